// Package hostlocal is the host-local IPAM plugin: it hands out addresses from
// configured ranges and records each reservation as a file under
// <dataDir>/<network>/, in exactly the reference plugin's layout, so reservations made
// by either implementation are honoured by the other:
//
//   - <ip>: one file per reserved address, content "<containerID>\r\n<ifname>" (no
//     trailing newline); files holding only "<containerID>" (reference before v0.8.0)
//     are honoured and released by container id;
//   - last_reserved_ip.<n>: the last address handed out from range set n (round-robin);
//   - lock: flock()ed for the whole of each operation, by both implementations.
//
// # The index
//
// The reference reads every file of the directory on every ADD, DEL and CHECK. Ours
// keeps .cni-index/<containerID>:<ifname> (hashed when too long): symlinks whose target
// text lists the attachment's addresses (one symlink(2) to create, one readlink(2) to
// read; the reference's walk skips them). Why a wrong index can never do harm:
//  1. it is trusted only while the network directory and .cni-index both carry our
//     last "seal" mtime (see seal); any change made past us (the reference, an operator,
//     a crashed operation) moves the directory's mtime, and the next operation rebuilds
//     the index from one walk;
//  2. every address it names is checked against its reservation file before use;
//  3. reservations are claimed by link(2), exclusive like O_EXCL, whatever the index says.
//
// So at worst a stale index costs one walk; per ADD the cost is otherwise a handful of
// syscalls on names known in advance, whatever the number of reservations.
//
// # Crash safety
//
// A reservation's content is written to a temp file that is then hard-linked to the
// address's name, so a reservation never exists without its owner. last_reserved_ip
// and index entries are replaced atomically, never truncated: entries by rename,
// last_reserved_ip by a RENAME_EXCHANGE swap (see store.replace). An ADD killed
// half-way leaves at most complete reservations of an attachment the runtime never saw
// succeed, which the runtime's DEL or a GC releases, and temp files, which the next
// operation's walk removes (the crash left the directory unsealed, so the next DEL or
// GC walks). An empty or garbage reservation file (another writer's crash) keeps its
// address taken, is reported on stderr, and is released by GC.
//
// # Foreign entries
//
// The data dir path may be a symbolic link an operator made; nothing inside the
// network's directory is ever followed (see statedir). An entry named like an address
// that is not a regular file (a link, a FIFO, a directory) keeps the address taken
// and is removed by GC (a directory with content is reported and left). A lock, index
// or last_reserved_ip entry of the wrong kind is replaced, the link itself and never
// its target. None of them makes ADD, DEL or GC fail.
package hostlocal

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Plugin returns the host-local registry entry.
func Plugin() *skel.Plugin {
	return &skel.Plugin{
		Name:     "host-local",
		About:    "allocates addresses from local ranges, recorded on disk",
		Versions: version.All(),
		Add:      add,
		Del:      del,
		Check:    check,
		GC:       gc,
		Status:   status,
	}
}

func add(req *skel.Request) (res *result.Result, err error) {
	conf, err := loadConfig(req, true)
	if err != nil {
		return nil, err
	}
	dns, err := readResolvConf(conf.ResolvConf)
	if err != nil {
		return nil, err
	}
	st, err := openStore(conf.DataDir, conf.Network, true, req.Stderr)
	if cnierror.Code(err) != 0 {
		return nil, fmt.Errorf("host-local: %w", err)
	} else if err != nil {
		return nil, cnierror.Newf(cnierror.CodeIO, "host-local: %v", err)
	}
	defer st.close()
	if err := st.refresh(); err != nil {
		return nil, fmt.Errorf("host-local: %w", err)
	}
	att := attachment{ID: req.Args.ContainerID, IfName: req.Args.IfName}
	held, _ := st.lookup(att)
	ips, err := allocate(st, conf, att, held)
	if err != nil {
		return nil, err
	}
	all := append(slices.Clone(held), addrsOf(ips)...)
	if err := st.putEntry(att, all); err != nil {
		// The reservation stands; left unsealed, the index is rebuilt by the next operation.
		fmt.Fprintf(req.Stderr, "host-local: %v\n", err)
	} else {
		st.seal()
	}
	return &result.Result{CNIVersion: conf.Version, IPs: ips, Routes: conf.Routes, DNS: dns}, nil
}

// allocate takes one address from every range set, the requested one where a request
// falls into the set. On failure everything taken so far is released again.
func allocate(st *store, conf *config, att attachment, held []netip.Addr) (ips []result.IPConfig, err error) {
	defer func() {
		if err != nil {
			st.release(addrsOf(ips), indexChange{}) // reserved just now, not yet indexed
			ips = nil
			st.seal()
		}
	}()
	requested := slices.Clone(conf.Requested)
	for n, set := range conf.Sets {
		var want netip.Addr
		if i := slices.IndexFunc(requested, set.contains); i >= 0 {
			want = requested[i]
			requested = slices.Delete(requested, i, i+1)
		}
		ip, err := allocateFrom(st, n, set, att, want, held)
		if err != nil {
			return ips, err
		}
		ips = append(ips, ip)
	}
	if len(requested) > 0 {
		return ips, cnierror.Newf(cnierror.CodeInvalidConfig, "failed to allocate all requested IPs: %s",
			strings.Trim(fmt.Sprint(requested), "[]")) // "a b", as the reference lists them
	}
	return ips, nil
}

// allocateFrom reserves want, or the next free address round-robin, from range set n.
func allocateFrom(st *store, n int, set rangeSet, att attachment, want netip.Addr, held []netip.Addr) (result.IPConfig, error) {
	var got netip.Addr
	var pool ipRange
	if want.IsValid() {
		pool, _ = set.rangeFor(want)
		if want == pool.Gateway {
			return result.IPConfig{}, cnierror.Newf(cnierror.CodeInvalidConfig, "requested ip %s is subnet's gateway", want)
		}
		ok, err := st.reserve(want, att)
		if err != nil {
			return result.IPConfig{}, fmt.Errorf("host-local: %w", err)
		}
		if !ok {
			return result.IPConfig{}, cnierror.Newf(cnierror.CodeTryAgainLater,
				"requested IP address %s is not available in range set %s", want, set)
		}
		got = want
	} else {
		if i := slices.IndexFunc(held, set.contains); i >= 0 {
			return result.IPConfig{}, cnierror.Newf(cnierror.CodeInvalidConfig,
				"%s has been allocated to %s, duplicate allocation is not allowed", held[i], att.ID)
		}
		it := newIterator(set, st.lastReserved(n))
		for {
			a, r, more := it.next()
			if !more {
				// Not 50: that code belongs to STATUS (which does report exhaustion so).
				return result.IPConfig{}, cnierror.Newf(cnierror.CodeInternal,
					"failed to allocate for range %d: no IP addresses available in range set: %s", n, set)
			}
			ok, err := st.reserve(a, att)
			if err != nil {
				return result.IPConfig{}, fmt.Errorf("host-local: %w", err)
			}
			if ok {
				got, pool = a, r
				break
			}
		}
	}
	if err := st.setLastReserved(n, got); err != nil {
		fmt.Fprintf(st.log, "host-local: %v\n", err) // only round-robin suffers
	}
	return result.IPConfig{Address: netip.PrefixFrom(got, pool.Subnet.Bits()), Gateway: pool.Gateway}, nil
}

func addrsOf(ips []result.IPConfig) []netip.Addr {
	out := make([]netip.Addr, len(ips))
	for i, ip := range ips {
		out[i] = ip.Address.Addr()
	}
	return out
}

// openExisting opens the network's store for DEL, CHECK and GC, which never create
// state: st is nil, with no error, when the network has none (no directory, or
// something else under its name).
func openExisting(req *skel.Request, dataDir, network string) (*store, error) {
	st, err := openStore(dataDir, network, false, req.Stderr)
	if errors.Is(err, errNoStore) {
		return nil, nil
	}
	if err != nil {
		return nil, cnierror.Newf(cnierror.CodeIO, "host-local: %v", err)
	}
	return st, nil
}

// openForRelease opens the network's store for DEL and GC. They read no more config
// than where the state is, so a config ADD would refuse can still release what an
// earlier ADD took; st is nil when there is nothing to release.
func openForRelease(req *skel.Request) (*store, error) {
	dataDir, err := loadDataDir(req)
	if err != nil {
		// ADD reads ipam.dataDir the same way: it reserved nothing with this config.
		fmt.Fprintf(req.Stderr, "host-local: nothing to release: %v\n", err)
		return nil, nil
	}
	return openExisting(req, dataDir, req.Net.Name)
}

// del releases the attachment's addresses; reservations written with the container id
// only are released when the attachment has none of its own, as the reference does.
// A network without state, a second DEL and an attachment holding nothing in a
// read-only directory succeed.
func del(req *skel.Request) error {
	st, err := openForRelease(req)
	if st == nil || err != nil {
		return err
	}
	defer st.close()
	if err := st.refresh(); err != nil {
		return fmt.Errorf("host-local: %w", err)
	}
	att := attachment{ID: req.Args.ContainerID, IfName: req.Args.IfName}
	released, err := releaseAll(st, att)
	if err == nil && released == 0 {
		_, err = releaseAll(st, attachment{ID: att.ID})
	}
	st.seal()
	if err != nil {
		return fmt.Errorf("host-local: %w", err)
	}
	return nil
}

// releaseAll removes att's reservations and its index entry.
func releaseAll(st *store, att attachment) (int, error) {
	held, entry := st.lookup(att)
	var ch indexChange
	if entry {
		ch.entries = map[attachment]bool{att: true}
	}
	n, err, indexErr := st.release(held, ch)
	return n, errors.Join(err, indexErr)
}

// check succeeds when the attachment (or, for old reservations, its container) holds
// an address on this network.
func check(req *skel.Request) error {
	notFound := fmt.Errorf("host-local: Failed to find address added by container %v", req.Args.ContainerID)
	conf, err := loadConfig(req, false)
	if err != nil {
		return err
	}
	st, err := openExisting(req, conf.DataDir, conf.Network)
	if err != nil {
		return err
	}
	if st == nil {
		return notFound
	}
	defer st.close()
	if err := st.refresh(); err != nil {
		return fmt.Errorf("host-local: %w", err)
	}
	st.seal()
	att := attachment{ID: req.Args.ContainerID, IfName: req.Args.IfName}
	held, _ := st.lookup(att)
	legacy, _ := st.lookup(attachment{ID: att.ID})
	if len(held) == 0 && len(legacy) == 0 {
		return notFound
	}
	return nil
}

// gc releases every reservation whose owner is not a valid attachment: reservations of
// other attachments, id-only reservations of ids with no valid attachment, and entries
// that name no attachment at all (garbage content, links, FIFOs, empty directories;
// a directory with content is reported and left). Leftover temp files go too.
func gc(req *skel.Request) error {
	st, err := openForRelease(req)
	if st == nil || err != nil {
		return err
	}
	defer st.close()
	valid, validIDs := map[attachment]bool{}, map[string]bool{}
	for _, a := range req.ValidAttachments {
		valid[attachment{ID: a.ContainerID, IfName: a.IfName}] = true
		validIDs[a.ContainerID] = true
	}
	keep := func(o attachment) bool { return valid[o] || (o.IfName == "" && validIDs[o.ID]) }
	released, ch, err := st.stale(keep)
	if err != nil {
		return fmt.Errorf("host-local: %w", err)
	}
	_, err, indexErr := st.release(released, ch)
	if indexErr != nil {
		fmt.Fprintf(req.Stderr, "host-local: gc: %v\n", indexErr) // left unsealed: the next operation rebuilds
	} else {
		st.seal()
	}
	if err != nil {
		return fmt.Errorf("host-local: gc: %w", err)
	}
	return nil
}

// status reports code 50 when ADD cannot succeed: the data directory is unusable, or a
// range set has no free address left (ADD needs one from every set).
func status(req *skel.Request) error {
	conf, err := loadConfig(req, false)
	if err != nil {
		return err
	}
	st, err := openStore(conf.DataDir, conf.Network, true, req.Stderr)
	if err != nil {
		return cnierror.Newf(cnierror.CodeNotAvailable, "host-local: data dir %s unusable: %v", conf.DataDir, err)
	}
	defer st.close()
	probe, err := st.dir.WriteTemp(tempPrefix+"status-", nil)
	if err != nil {
		return cnierror.Newf(cnierror.CodeNotAvailable, "host-local: data dir %s unusable: %v", conf.DataDir, err)
	}
	st.dir.Remove(probe)
	taken, err := st.scan(false)
	if err != nil {
		return cnierror.Newf(cnierror.CodeNotAvailable, "host-local: data dir %s unusable: %v", conf.DataDir, err)
	}
	for n, set := range conf.Sets {
		if !hasFree(set, taken) {
			return cnierror.Newf(cnierror.CodeNotAvailable, "host-local: range set %d (%s) is exhausted", n, set)
		}
	}
	return nil
}

// hasFree reports whether set has an address that is neither reserved nor a gateway.
func hasFree(set rangeSet, taken []netip.Addr) bool {
	for _, r := range set {
		n := r.size()
		if r.contains(r.Gateway) {
			n--
		}
		for _, a := range taken {
			if a != r.Gateway && r.contains(a) {
				n--
			}
		}
		if n > 0 {
			return true
		}
	}
	return false
}
