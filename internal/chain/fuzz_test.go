package chain

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/result/resulttest"
	"github.com/cnikit/cni/internal/spec/skel"
)

// FuzzParse reads configuration lists: a refusal is an *InvalidError; an accepted list
// has a valid name and at least one plugin, each plugin object re-parses to itself, and
// the request config the runner builds for each plugin (with a prevResult and
// capability args) is a JSON object carrying the list's name and version.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"cniVersion":"1.1.0","name":"demo","plugins":[{"type":"bridge","bridge":"cni-demo0","isGateway":true,"ipMasq":true,` +
			`"ipam":{"type":"host-local","dataDir":"/run/ipam","ranges":[[{"subnet":"10.88.0.0/24"}]],"routes":[{"dst":"0.0.0.0/0"}]}},` +
			`{"type":"portmap","capabilities":{"portMappings":true}},{"type":"bandwidth","capabilities":{"bandwidth":true}}]}`,
		`{"cniVersion":"1.1.0","name":"loopback","plugins":[{"type":"loopback"}]}`,
		`{"cniVersion":"0.3.1","cniVersions":["0.4.0","1.0.0","2.0.0"],"name":"n","disableCheck":"TRUE","disableGC":false,` +
			`"loadOnlyInlinedPlugins":true,"plugins":[{"type":"ptp","mtu":1400,"ipam":{"type":"static"}},{"type":"tuning","sysctl":{"net.core.somaxconn":"500"}}]}`,
		`{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"firewall","backend":"iptables","prevResult":{"cniVersion":"1.0.0"},"runtimeConfig":{"x":1},` +
			`"cniVersion":"0.1.0","name":"other","big":12345678901234567890123}]}`,
		`{"name":"n","plugins":[{"type":"../bin/x"}]}`, `{"name":"n","plugins":[]}`, `{"name":"n"}`, `{"name":"a b","plugins":[{"type":"x"}]}`,
		`{"name":"n","cniVersions":["one"],"plugins":[{"type":"x"}]}`, `[]`, `null`,
	} {
		f.Add([]byte(seed))
	}
	prev := &result.Result{CNIVersion: "1.1.0", IPs: []result.IPConfig{{Address: netip.MustParsePrefix("10.88.0.5/24")}}}
	att := &Attachment{ContainerID: "c1", Netns: "/var/run/netns/c1", IfName: "eth0", CapabilityArgs: map[string]any{
		"portMappings": []any{map[string]any{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}},
		"bandwidth":    map[string]any{"ingressRate": 1000, "ingressBurst": 1000},
	}}
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := Parse(data)
		if err != nil {
			var inv *InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("refusal is a %T: %v", err, err)
			}
			return
		}
		if skel.ValidateNetworkName(n.Name) != nil || len(n.Plugins) == 0 {
			t.Fatalf("accepted name %q with %d plugins", n.Name, len(n.Plugins))
		}
		var p *result.Result
		if c, err := prev.Convert(n.CNIVersion); err == nil {
			p = c
		}
		for i, pc := range n.Plugins {
			again, err := ParsePlugin(pc.Bytes)
			if err != nil || !reflect.DeepEqual(again, pc) {
				t.Fatalf("plugins[%d] %s re-parses as %+v (%v)", i, pc.Bytes, again, err)
			}
			for _, a := range []*Attachment{att, nil} {
				conf, err := pluginConfig(n, pc, p, a, nil)
				if err != nil {
					t.Fatalf("request config of plugins[%d]: %v", i, err)
				}
				var obj map[string]any
				if err := json.Unmarshal(conf, &obj); err != nil {
					t.Fatalf("request config of plugins[%d] is not an object: %v\n%s", i, err, conf)
				}
				if obj["name"] != n.Name || obj["cniVersion"] != n.CNIVersion {
					t.Fatalf("request config of plugins[%d] says name %v, version %v", i, obj["name"], obj["cniVersion"])
				}
			}
		}
	})
}

// FuzzParsePlugin reads one plugin object: an accepted one has a type that is a name,
// its bytes are the compacted input, and those bytes re-parse to the same plugin.
func FuzzParsePlugin(f *testing.F) {
	for _, seed := range []string{
		`{"type":"portmap","capabilities":{"portMappings":true},"snat":true}`,
		`{ "type" : "tuning" , "sysctl" : { "net.core.somaxconn" : "500" } }`,
		`{"type":"x","TYPE":"y","capabilities":{"a":false,"A":true}}`,
		`{"type":""}`, `{"type":"a/b"}`, `{"capabilities":{"mac":"yes"},"type":"x"}`, `{"type":"x"} trailing`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pc, err := ParsePlugin(data)
		if err != nil {
			return
		}
		if pc.Type == "" || strings.ContainsRune(pc.Type, os.PathSeparator) {
			t.Fatalf("accepted type %q", pc.Type)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, data); err != nil || !bytes.Equal(compact.Bytes(), pc.Bytes) {
			t.Fatalf("bytes %s are not the compacted input (%v)", pc.Bytes, err)
		}
		again, err := ParsePlugin(pc.Bytes)
		if err != nil || !reflect.DeepEqual(again, pc) {
			t.Fatalf("%s re-parses as %+v (%v)", pc.Bytes, again, err)
		}
	})
}

// cacheSeeds are cache files as libcni and this runner write them, a legacy bare
// result, and broken ones.
var cacheSeeds = []string{
	`{"kind":"cniCacheV1","containerId":"c1","config":"eyJuYW1lIjoibiJ9","ifName":"eth0","networkName":"n","netns":"/var/run/netns/c1",` +
		`"cniArgs":[["IP","10.1.0.5"]],"capabilityArgs":{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]},` +
		`"result":{"cniVersion":"1.1.0","interfaces":[{"name":"eth0","sandbox":"/var/run/netns/c1"}],"ips":[{"address":"10.1.0.5/24","interface":0}]}}`,
	`{"kind":"cniCacheV1","containerId":"c1","ifName":"eth0","networkName":"n","result":{"cniVersion":"0.4.0","ips":[{"version":"4","address":"10.1.0.5/24"}]}}`,
	`{"kind":"cniCacheV1","containerId":"c1","ifName":"eth0","networkName":"n","result":null}`,
	`{"cniVersion":"0.3.1","ips":[{"version":"4","address":"10.1.0.5/24"}],"dns":{}}`,
	`{"ip4":{"ip":"10.1.0.5/24"}}`,
	`{"kind":"cniCacheV1","result":{"cniVersion":"1.1.0","ips":[{"address":"nope"}]}}`,
	`{"kind":"cniCacheV2","containerId":"c1","ifName":"eth0","networkName":"n"}`,
	``, `{not json`, `null`, `[]`,
}

// FuzzCachedResult reads a cache file for DEL and CHECK: an unusable entry is a CNI
// error of a result's codes (6 undecodable, 1 unknown version or nothing left after
// conversion), never a panic; a usable one is in the network's version and prints as
// a result that reads back the same.
func FuzzCachedResult(f *testing.F) {
	for _, seed := range cacheSeeds {
		for _, v := range []string{"1.1.0", "0.4.0", "0.2.0", "", "3.0.0"} {
			f.Add([]byte(seed), v)
		}
	}
	r := &Runner{CacheDir: f.TempDir()}
	att := Attachment{ContainerID: "c1", IfName: "eth0"}
	path := filepath.Join(r.cacheDir(), "results", cacheName("n", &att))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, version string) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		res, err := r.CachedResult(&Network{Name: "n", CNIVersion: version}, att)
		if err != nil {
			if c := cnierror.Code(err); c != cnierror.CodeDecode && c != cnierror.CodeIncompatibleVersion {
				t.Fatalf("unusable cache gives code %d: %v", c, err)
			}
			return
		}
		if res == nil {
			return
		}
		want := version
		if want == "" {
			want = "0.1.0"
		}
		if res.CNIVersion != want {
			t.Fatalf("cached result in version %q for a %q network", res.CNIVersion, version)
		}
		resulttest.RequireRoundTrips(t, res)
	})
}

// FuzzCachedAttachments lists a cache directory holding one arbitrary entry (beside a
// good one): never a panic or an error; only cniCacheV1 entries with a network and an
// interface are listed, and a container filter keeps exactly that container's.
func FuzzCachedAttachments(f *testing.F) {
	for _, seed := range cacheSeeds {
		f.Add([]byte(seed))
	}
	r := &Runner{CacheDir: f.TempDir()}
	dir := filepath.Join(r.CacheDir, "results")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "good-c0-eth0"), []byte(cacheSeeds[0]), 0o600); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, "n-c1-eth0"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		all, err := r.CachedAttachments("")
		if err != nil || len(all) == 0 || len(all) > 2 {
			t.Fatalf("listed %d attachments (%v)", len(all), err)
		}
		for _, a := range all {
			if a.Network == "" || a.IfName == "" {
				t.Fatalf("listed %+v", a)
			}
		}
		for _, cid := range []string{"c1", all[len(all)-1].ContainerID} {
			some, err := r.CachedAttachments(cid)
			if err != nil {
				t.Fatal(err)
			}
			want := slices.DeleteFunc(slices.Clone(all), func(a CachedAttachment) bool { return a.ContainerID != cid })
			if cid != "" && !reflect.DeepEqual(some, want) {
				t.Fatalf("filter %q listed %+v, want %+v", cid, some, want)
			}
		}
	})
}
