package firewall

import (
	"github.com/cnikit/cni/internal/spec/skel"
)

// repair lets the attachment's addresses through again when CHECK finds them missing:
// after `nft flush ruleset` (rules) or a firewalld reload (its runtime sources), in the
// backend ADD and CHECK choose. ADD's install leaves the same rules when run again.
func repair(req *skel.Request) error {
	conf, bridge, err := loadChained(req)
	if err != nil {
		return err
	}
	if _, err := verify(req, conf, bridge); err == nil || !req.Repair().Found(err.Error()) {
		return nil
	}
	return install(req, conf, bridge)
}
