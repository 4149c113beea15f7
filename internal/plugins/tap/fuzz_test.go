package tap

import (
	"errors"
	"testing"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/spec/skel"
)

// FuzzLoad feeds arbitrary configs and CNI_ARGS to the loader: it either accepts a
// config whose values are in range or answers with a CNI error, never a panic.
func FuzzLoad(f *testing.F) {
	for _, seed := range []struct{ conf, args string }{
		{`{"cniVersion":"1.1.0","name":"n","type":"tap"}`, ""},
		{`{"cniVersion":"1.1.0","name":"n","type":"tap","mac":"02:00:00:00:00:01","mtu":1400,"multiQueue":true}`, ""},
		{`{"cniVersion":"1.1.0","name":"n","type":"tap","owner":1000,"group":1000,"bridge":"br0"}`, "MAC=02:00:00:00:00:02"},
		{`{"cniVersion":"1.1.0","name":"n","type":"tap","selinuxcontext":"system_u:system_r:container_t:s0"}`, "IgnoreUnknown=1;K=V"},
		{`{"cniVersion":"1.1.0","name":"n","type":"tap","runtimeConfig":{"mac":"02:00:00:00:00:03"}}`, ""},
		{`{"mtu":-1,"owner":-1}`, "MAC"},
	} {
		f.Add([]byte(seed.conf), seed.args)
	}
	f.Fuzz(func(t *testing.T, data []byte, cniArgs string) {
		req := &skel.Request{Config: data, Args: skel.Args{CNIArgs: cniArgs}, Net: skel.NetConf{Type: "tap"}}
		c, err := load(req)
		if err != nil {
			var ce *cnierror.Error
			if !errors.As(err, &ce) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if c.MTU != 0 && (c.MTU < minMTU || c.MTU > maxMTU) {
			t.Fatalf("accepted mtu %d", c.MTU)
		}
		if c.mac != nil && (len(c.mac) != 6 || c.mac[0]&1 == 1) {
			t.Fatalf("accepted mac %s", c.mac)
		}
		if c.Bridge != "" && skel.ValidateIfName(c.Bridge) != nil {
			t.Fatalf("accepted bridge %q", c.Bridge)
		}
	})
}
