package dummy

import (
	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/spec/skel"
)

// load checks the config: dummy has no keys of its own, but an interface without
// addresses would carry nothing, so IPAM is required, as in the reference.
func load(req *skel.Request) error {
	skel.WarnUnknownKeys[struct{}](req) // no keys of its own: any beyond the spec's is unknown
	if req.Net.IPAM.Type == "" {
		return cnierror.New(cnierror.CodeInvalidConfig, "ipam: type is required: dummy configures the addresses IPAM gives")
	}
	return nil
}
