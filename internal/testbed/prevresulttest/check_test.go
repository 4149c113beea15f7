package prevresulttest_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/reftest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// CHECK of a meta plugin whose optional config is absent (a runtimeConfig without
// portMappings or bandwidth, no limits, no sysctls), as CRI-O sends it for every pod,
// succeeds, ours and the reference's alike: the reference's bandwidth crashed there
// before v1.9.1 (upstream row P20).
func TestCheckWithoutOptionalConfigSucceeds(t *testing.T) {
	testns.RequireRoot(t)
	ourDir := testns.LinkPluginDir(t, "portmap", "bandwidth", "firewall", "tuning", "sbr")
	bridgeShape := shapes[0]
	for _, name := range []string{"portmap", "bandwidth", "firewall", "tuning", "sbr"} {
		for side, bin := range map[string]func() string{
			"ours":      func() string { return filepath.Join(ourDir, name) },
			"reference": func() string { return reftest.Bin(t, name) },
		} {
			t.Run(name+"/"+side, func(t *testing.T) {
				w := newWorld(t)
				keys := `"runtimeConfig":{}`
				switch name {
				case "firewall":
					keys += `,"backend":"iptables"`
				case "tuning":
					keys += `,"dataDir":"STATE"`
				}
				m := meta{name: name, keys: keys}
				conf := m.config(bridgeShape, w, false)
				r := w.exec(t, bin(), "ADD", conf)
				require.Zero(t, r.code, r.msg)
				check := pt.WithKeys(t, conf, map[string]any{"prevResult": json.RawMessage(r.out)})
				r = w.exec(t, bin(), "CHECK", check)
				assert.Zero(t, r.code, r.msg)
			})
		}
	}
}
