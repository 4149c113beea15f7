// Package lockedns runs a chained plugin's change of the container's namespace (sbr's
// routing tables, vrf's VRFs) with the namespace's lock held (link.NS.Lock), so that two
// ADDs or DELs into one namespace cannot interleave: an id chosen as free stays free
// until it is in use. A new plugin of that kind writes its ADD's and DEL's work as a
// function of the open namespace and hands it to Run or RunIfPresent.
package lockedns

import (
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Run opens the container's namespace CNI_NETNS (a missing one is code 3, as every
// ADD and CHECK has it: link.OpenContainer) and runs change in it under its lock.
func Run(req *skel.Request, change func(cont *link.NS) error) error {
	cont, err := link.OpenContainer(req.Context(), req.Args.Netns)
	if err != nil {
		return err
	}
	return locked(cont, change)
}

// RunIfPresent is Run for a DEL: a namespace that is gone (link.OpenIfPresent) is
// nothing left to do.
func RunIfPresent(req *skel.Request, change func(cont *link.NS) error) error {
	cont, err := link.OpenIfPresent(req.Args.Netns)
	if cont == nil {
		return err
	}
	return locked(cont, change)
}

// locked runs change with cont's lock held, then releases the lock and closes cont.
func locked(cont *link.NS, change func(cont *link.NS) error) error {
	defer cont.Close()
	unlock, err := cont.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	return change(cont)
}
