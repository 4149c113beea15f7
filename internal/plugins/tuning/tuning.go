// Package tuning is the tuning plugin: a chained plugin that changes the container
// interface's sysctls (under net. only, filtered by the node's allow-list) and link
// attributes (mac, mtu, promisc, allmulti, txqueuelen). What it changes is saved first to
// <dataDir>/<containerID>_<ifname>.json (a hashed name when that is too long for a
// file name), and DEL puts it back: the link attributes as the reference does, and,
// unlike the reference, the sysctls too.
package tuning

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/rollback"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/sysctl"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Plugin returns the tuning plugin's registry entry, reading the node allow-list at
// its default path.
func Plugin() *skel.Plugin { return New(DefaultAllowList) }

// New returns the tuning plugin with the sysctl allow-list read from allowList. The
// path is not a config key: it is the node's policy over configs, so a config must not
// be able to point it elsewhere.
func New(allowList string) *skel.Plugin {
	t := tuner{allowList: allowList}
	return &skel.Plugin{
		Name:     "tuning",
		About:    "changes sysctls and link attributes of the container interface, restoring them on DEL",
		Versions: version.All(),
		Add:      t.add,
		Del:      t.del,
		Check:    t.check,
	}
}

type tuner struct {
	allowList string
}

var errNotChained = cnierror.New(cnierror.CodeInvalidConfig, "prevResult: tuning must be called as a chained plugin")

// prepare parses and validates the request's settings for ADD and CHECK.
func (t tuner) prepare(req *skel.Request) (*Plan, error) {
	p, err := plan(req)
	if err != nil {
		return nil, err
	}
	if req.PrevResult == nil {
		return nil, errNotChained
	}
	return p, checkAllowList(t.allowList, p.Sysctls)
}

// add saves the current values, applies the new ones inside the container and returns
// prevResult with the interface's new MAC.
func (t tuner) add(req *skel.Request) (*result.Result, error) {
	p, err := t.prepare(req)
	if err != nil {
		return nil, err
	}
	cont, err := link.OpenContainer(req.Context(), req.Args.Netns)
	if err != nil {
		return nil, err
	}
	defer cont.Close()
	store, err := openBackups(p.DataDir, req.Stderr)
	if err != nil {
		return nil, err
	}
	defer store.close()
	names := backupNames(req.Args.ContainerID, req.Args.IfName)
	if err := cont.Do(func() error { return apply(cont, req.Args.IfName, store, names, p) }); err != nil {
		return nil, err
	}
	res := req.PrevResult.Clone()
	if p.Mac != nil {
		setResultMac(res, req.Args.IfName, p.Mac.String())
	}
	return res, nil
}

// apply runs inside the container namespace: sysctls resolve through the calling
// thread's namespace. A failure part-way restores what was already changed.
func apply(cont *link.NS, ifName string, store *backups, names []string, p *Plan) (err error) {
	l, err := cont.ByName(ifName)
	if err != nil {
		return fmt.Errorf("container interface: %w", err)
	}
	h := cont.Handle()
	before, err := snapshot(l, p)
	if err != nil {
		return err
	}
	older, olderName := store.read(names)
	saved := *before
	saved.Sysctls = maps.Clone(before.Sysctls)
	saved.keepOlder(older)
	if len(saved.Sysctls) == 0 && !p.changes() && older == nil {
		return nil // nothing to change, nothing to restore
	}
	if olderName != "" {
		names = append([]string{olderName}, names...) // stay where DEL finds it first
	}

	var undo rollback.Stack
	defer undo.OnError(&err)
	name, err := store.write(names, &saved)
	if err != nil {
		return err
	}
	undo.Push("backup "+name, func() error {
		if older == nil {
			return store.remove(name)
		}
		_, err := store.write([]string{name}, older)
		return err
	})
	for _, s := range p.Sysctls {
		undo.Push("sysctl "+s.Name, func() error { return sysctl.Set(s.Name, before.Sysctls[s.Name]) })
		if err := sysctl.Set(s.Name, s.Value); err != nil {
			return fmt.Errorf("sysctl: key %q: %w", s.Key, err)
		}
	}
	if p.changes() {
		undo.Push("link attributes of "+ifName, func() error { return setLink(h, ifName, before.linkState()) })
		if err := setLink(h, ifName, p.linkState); err != nil {
			return err
		}
	}
	return nil
}

// snapshot records the current values of everything p is about to change.
func snapshot(l linkAttrs, p *Plan) (*Backup, error) {
	b := current(l, p.linkState)
	for _, s := range p.Sysctls {
		v, err := sysctl.Get(s.Name)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "sysctl: key %q: %s does not exist", s.Key, s.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("sysctl: key %q: %w", s.Key, err)
		}
		if b.Sysctls == nil {
			b.Sysctls = map[string]string{}
		}
		b.Sysctls[s.Name] = v
	}
	return b, nil
}

// delConfig is all DEL reads of the config: where the backups are. The settings
// themselves are not looked at, so a config ADD refused (or one changed since) does
// not keep DEL from restoring what an earlier ADD saved.
type delConfig struct {
	DataDir string `json:"dataDir"`
}

// del restores the saved values and deletes the backup. With no backup there is
// nothing to do; with the namespace gone there is nothing left to restore. A backup
// that cannot be used is dropped: keeping it would make every later DEL fail too.
func (t tuner) del(req *skel.Request) error {
	conf, err := skel.LoadConfig[delConfig](req)
	if err != nil {
		// ADD reads dataDir the same way, so it wrote nothing with this config.
		fmt.Fprintf(req.Stderr, "tuning: nothing to restore: %v\n", err)
		return nil
	}
	store, err := openBackups(cmp.Or(conf.DataDir, DefaultDataDir), req.Stderr)
	if err != nil {
		return err
	}
	defer store.close()
	store.removeStaleTemps()
	b, name := store.read(backupNames(req.Args.ContainerID, req.Args.IfName))
	if b == nil {
		return nil
	}
	cont, err := link.OpenIfPresent(req.Args.Netns)
	if err != nil {
		return err
	}
	if cont != nil {
		defer cont.Close()
		if err := cont.Do(func() error { return restore(cont, req.Args.IfName, b, req.Stderr) }); err != nil {
			return err // the backup stays for the runtime's next DEL
		}
	}
	return store.remove(name)
}

// check compares the configured sysctls and attributes with the container's.
func (t tuner) check(req *skel.Request) error {
	p, err := t.prepare(req)
	if err != nil {
		return err
	}
	cont, err := link.OpenContainer(req.Context(), req.Args.Netns)
	if err != nil {
		return err
	}
	defer cont.Close()
	return cont.Do(func() error {
		for _, s := range p.Sysctls {
			cur, err := sysctl.Get(s.Name)
			if err != nil {
				return fmt.Errorf("sysctl: key %q: %w", s.Key, err)
			}
			if !sameSysctl(cur, s.Value) {
				return fmt.Errorf("sysctl %s is %q, configured %q", s.Name, cur, s.Value)
			}
		}
		l, err := cont.ByName(req.Args.IfName)
		if err != nil {
			return fmt.Errorf("container interface: %w", err)
		}
		return verifyLink(l, p.linkState)
	})
}

// sameSysctl compares values the way the kernel prints them: multi-value sysctls come
// back tab-separated whatever separator was written.
func sameSysctl(a, b string) bool {
	return strings.Join(strings.Fields(a), " ") == strings.Join(strings.Fields(b), " ")
}

// setResultMac updates the MAC of the container interface in the result: the entry
// with that name inside a sandbox, or, if none has a sandbox, any entry with that name.
func setResultMac(res *result.Result, ifName, mac string) {
	sandboxed := slices.ContainsFunc(res.Interfaces, func(i result.Interface) bool { return i.Name == ifName && i.Sandbox != "" })
	for i := range res.Interfaces {
		if res.Interfaces[i].Name == ifName && (res.Interfaces[i].Sandbox != "" || !sandboxed) {
			res.Interfaces[i].Mac = mac
		}
	}
}
