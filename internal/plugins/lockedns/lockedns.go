// Package lockedns runs a chained plugin's change of the container's namespace (sbr's
// routing tables, vrf's VRFs) with the namespace's lock held (link.NS.Lock), so that two
// ADDs or DELs into one namespace cannot interleave: an id chosen as free stays free
// until it is in use; tables.go is the routing-table search sbr and vrf share. A new
// plugin of that kind writes its ADD's and DEL's work as functions of the open namespace
// and hands them to Add and Del.
package lockedns

import (
	"fmt"

	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Add is such a plugin's ADD once its config is checked: it opens the container's
// namespace CNI_NETNS (a missing one is code 3: link.OpenContainer), runs change in it
// under its lock, and passes the prevResult on.
func Add(req *skel.Request, change func(cont *link.NS) error) (*result.Result, error) {
	cont, err := link.OpenContainer(req.Context(), req.Args.Netns)
	if err != nil {
		return nil, err
	}
	if err := locked(cont, change); err != nil {
		return nil, err
	}
	return req.PrevResult.Clone(), nil
}

// Del is such a plugin's DEL, named plugin in what it says on stderr: key reads from the
// config what DEL needs, and a config ADD refuses leaves nothing to delete; so does a
// namespace that is gone (link.OpenIfPresent). Otherwise remove runs under the lock.
func Del[K any](req *skel.Request, plugin string, key func(*skel.Request) (K, error), remove func(*link.NS, K) error) error {
	k, err := key(req)
	if err != nil {
		fmt.Fprintf(req.Stderr, "%s: nothing to delete, ADD refuses this config: %v\n", plugin, err)
		return nil
	}
	cont, err := link.OpenIfPresent(req.Args.Netns)
	if cont == nil {
		return err
	}
	return locked(cont, func(cont *link.NS) error { return remove(cont, k) })
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
