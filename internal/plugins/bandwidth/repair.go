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
	found := req.Repair().Found
	return inspect(req, func(part string, err error, put func() error) error {
		if put == nil {
			return fmt.Errorf("%s: %w (repair makes no link: the pod needs a new ADD)", part, err)
		}
		if !found(part + ": " + err.Error()) {
			return nil
		}
		if err := put(); err != nil {
			return fmt.Errorf("%s: %w", part, err)
		}
		return nil
	})
}
