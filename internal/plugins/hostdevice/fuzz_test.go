package hostdevice

import (
	"errors"
	"testing"

	"github.com/cnikit/cni/internal/cnierror"
	"github.com/cnikit/cni/internal/skel"
)

// FuzzLoad feeds arbitrary configs to the loaders: they either accept exactly one
// well-formed selector or answer with a CNI error, never a panic or an untyped error.
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		`{"cniVersion":"1.1.0","name":"n","type":"host-device","device":"eth1"}`,
		`{"cniVersion":"1.1.0","name":"n","type":"host-device","hwaddr":"02:00:00:00:00:01"}`,
		`{"cniVersion":"1.1.0","name":"n","type":"host-device","kernelpath":"/sys/devices/pci0000:00/0000:00:05.0"}`,
		`{"cniVersion":"1.1.0","name":"n","type":"host-device","pciBusID":"0000:3b:02.1","ipam":{"type":"host-local"}}`,
		`{"cniVersion":"1.1.0","name":"n","type":"host-device","runtimeConfig":{"deviceID":"mlx5_core.sf.4"}}`,
		`{"cniVersion":"1.1.0","name":"n","type":"host-device","device":"eth1","pciBusID":"0000:3b:02.1"}`,
		`{"cniVersion":"1.1.0","name":"n","type":"host-device","device":"eth1","dataDir":"/run/x"}`,
		`{"device":7}`,
	} {
		f.Add([]byte(seed))
	}
	sys := sysfs{root: f.TempDir()}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &skel.Request{Config: data, Net: skel.NetConf{Type: "host-device"}}
		c, err := load(req, sys)
		if err != nil {
			var ce *cnierror.Error
			if !errors.As(err, &ce) {
				t.Fatalf("untyped error %v", err)
			}
		} else if c.sel.value == "" || c.dataDir == "" {
			t.Fatalf("accepted without a selector or data dir: %+v", c)
		}
		if _, err := loadForDel(req); err != nil {
			var ce *cnierror.Error
			if !errors.As(err, &ce) {
				t.Fatalf("DEL loader: untyped error %v", err)
			}
		}
	})
}
