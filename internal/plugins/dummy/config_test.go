package dummy

import (
	"encoding/json"
	"testing"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/spec/skel"
)

// FuzzLoad feeds the config check hostile configs: it must never panic, must refuse with
// a config error, and must accept only configs naming an IPAM type.
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		`{"cniVersion":"1.1.0","name":"n","type":"dummy","ipam":{"type":"host-local","subnet":"10.1.0.0/24"},"dns":{"nameservers":["10.0.0.53"]}}`,
		`{"cniVersion":"1.1.0","name":"n","type":"dummy","ipam":{}}`,
		`{"ipam":{"type":7}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, config []byte) {
		req := &skel.Request{Config: config}
		_ = json.Unmarshal(config, &req.Net)
		err := load(req)
		switch {
		case err == nil && req.Net.IPAM.Type == "":
			t.Fatalf("accepted %q without an IPAM type", config)
		case err != nil && cnierror.From(err).Code != cnierror.CodeInvalidConfig:
			t.Fatalf("code %d for %q: %v", cnierror.From(err).Code, config, err)
		}
	})
}
