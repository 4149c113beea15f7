package portmap

import "github.com/cnikit/cni/internal/spec/skel"

// repair puts back the attachment's mappings when CHECK finds them missing (a host
// firewall reload removed them), in the backend the attachment is in (or, all of it gone, the one ADD chooses). Both backends'
// add replaces what is left of the attachment's rules and declares the shared layout
// again, so nothing is sent for an intact attachment and a half-removed one is left
// with exactly ADD's rules.
func repair(req *skel.Request) error {
	s, err := loadChained(req)
	if err != nil || len(s.mappings) == 0 {
		return err
	}
	fams, err := verify(req, s)
	if err == nil || !req.Repair().Found("portMappings: "+err.Error()) {
		return nil
	}
	o := attachment{net: req.Net.Name, cid: req.Args.ContainerID}
	return backendFor(addBackend(s.backend, o)).add(req.Context(), o, s, fams)
}
