package tuning

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/sysctl"
)

// restore puts the backup's values back inside the container namespace, each on its
// own, so that one value failing does not keep the others. What can never be restored
// is reported and dropped: a sysctl name outside net/ (a backup is trusted no more
// than a config: tuning never writes anywhere else), a malformed MAC, a value the
// kernel refuses, a sysctl or interface that no longer exists. Any other failure is
// returned, and the caller keeps the backup for the runtime's next DEL.
func restore(cont *link.NS, ifName string, b *Backup, log io.Writer) error {
	var errs []error
	keep := func(what string, err error) {
		switch {
		case err == nil:
		case permanent(err):
			fmt.Fprintf(log, "tuning: cannot restore %s, dropping it: %v\n", what, err)
		default:
			errs = append(errs, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(b.Sysctls)) {
		if _, err := sysctl.Name(name); err != nil {
			fmt.Fprintf(log, "tuning: backup names sysctl %q, which tuning never writes; dropping it: %v\n", name, err)
			continue
		}
		keep("sysctl "+name, sysctl.Set(name, b.Sysctls[name]))
	}
	h := cont.Handle()
	for _, s := range b.linkSteps(log) {
		keep("link attributes of "+ifName, setLink(h, ifName, s))
	}
	return errors.Join(errs...)
}

// permanent reports a failure that no retry can fix.
func permanent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || link.IsNotFound(err) || errors.Is(err, unix.EINVAL) ||
		errors.Is(err, unix.ERANGE) || errors.Is(err, unix.EADDRNOTAVAIL) || errors.Is(err, unix.EOPNOTSUPP)
}

// linkSteps splits the backup's link attributes into one state per attribute, in
// setLink's order, so that each is applied (and may fail) on its own.
func (b *Backup) linkSteps(log io.Writer) []linkState {
	var out []linkState
	if b.Mac != "" {
		if mac, err := net.ParseMAC(b.Mac); err != nil {
			fmt.Fprintf(log, "tuning: backup holds an invalid mac %q; dropping it\n", b.Mac)
		} else {
			out = append(out, linkState{Mac: mac})
		}
	}
	for _, s := range [...]linkState{{Promisc: b.Promisc}, {Mtu: b.Mtu}, {Allmulti: b.Allmulti}, {TxQLen: b.TxQLen}} {
		if s.changes() {
			out = append(out, s)
		}
	}
	return out
}
