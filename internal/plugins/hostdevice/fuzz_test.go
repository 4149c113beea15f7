package hostdevice

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/spec/skel"
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
		if dir := loadForDel(req); dir != "" && !filepath.IsAbs(dir) {
			t.Fatalf("DEL loader: data dir %q is not absolute", dir)
		}
	})
}

// FuzzReadState feeds arbitrary bytes to the state reader as a state file: it never
// panics, and whatever it accepts holds only values ADD could have written and reads
// back the same once written.
func FuzzReadState(f *testing.F) {
	for _, seed := range []string{
		`{"network":"hdnet","containerID":"c1","ifName":"eth0","name":"hd0","mac":"02:00:00:00:00:01","mtu":1400,"up":true,"index":3}`,
		`{"network":"hdnet","containerID":"c1","ifName":"eth0","name":"hd0","permMAC":"02:00:00:00:00:01","device":"/sys/devices/pci0000:00/0000:00:05.0"}`,
		`{"network":"hdnet","containerID":"ghost","ifName":"eth0","name":"victim","mac":"02:de:ad:be:ef:01","mtu":1280,"up":true}`,
		`{"name":"a/b"}`, `{"name":"hd0","device":"/sys/devices/../../etc"}`, `null`, `[]`, "\x00",
	} {
		f.Add([]byte(seed))
	}
	dir := f.TempDir()
	s, err := openStore(dir, false)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(s.Close)
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, "c1:eth0.json"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		st, err := s.read("c1:eth0.json")
		if err != nil || st == nil {
			return
		}
		if err := st.validate(); err != nil {
			t.Fatalf("accepted %q: %v", data, err)
		}
		if err := s.write("again.json", st); err != nil {
			t.Fatal(err)
		}
		again, err := s.read("again.json")
		if err != nil || again == nil || *again != *st {
			t.Fatalf("%+v read back as %+v (%v)", st, again, err)
		}
	})
}
