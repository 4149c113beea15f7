package bandwidth

import (
	"fmt"

	"github.com/cnikit/cni/internal/spec/skel"
)

// repair puts back the host veth's qdiscs when CHECK finds them missing: the root tbf
// of the ingress limit, the ifb's root tbf and the host veth's redirect to the ifb for
// the egress one (a tc reset of the node takes them, a firewall reload does not). The
// ifb itself is a link, which repair never makes: a missing one is an error, and the
// pod needs a new ADD.
func repair(req *skel.Request) error {
	shaping, clamps, err := load(req)
	if err != nil {
		return err
	}
	if req.PrevResult == nil {
		return errNotChained
	}
	if shaping.IsZero() {
		return nil
	}
	host, veth, err := hostVeth(req)
	if err != nil {
		return err
	}
	defer host.Close()
	h := host.Handle()
	found := req.Repair().Found
	if shaping.Ingress.Enabled() {
		if err := checkRootTBF(host, veth, tbfsFor(shaping.Ingress, clamps)...); err != nil && found("ingress: "+err.Error()) {
			if err := setRootTBF(h, veth, tbfFor(shaping.Ingress)); err != nil {
				return fmt.Errorf("ingress: %w", err)
			}
		}
	}
	if !shaping.Egress.Enabled() {
		return nil
	}
	ifb, err := host.ByName(ifbName(req.Net.Name, req.Args.ContainerID))
	if err != nil {
		return fmt.Errorf("egress: %w (repair makes no link: the pod needs a new ADD)", err)
	}
	if err := checkRootTBF(host, ifb, tbfsFor(shaping.Egress, clamps)...); err != nil && found("egress: "+err.Error()) {
		if err := setRootTBF(h, ifb, tbfFor(shaping.Egress)); err != nil {
			return fmt.Errorf("egress: %w", err)
		}
	}
	if err := checkRedirect(h, veth, ifb); err != nil && found("egress: "+err.Error()) {
		if err := redirectToIfb(h, veth, ifb); err != nil {
			return fmt.Errorf("egress: %w", err)
		}
	}
	return nil
}
