package loopback

import (
	"testing"

	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/spec/skel/skeltest"
)

// passThrough is what loopback's ADD does with its config once lo is up: it has no keys
// of its own and hands the parsed prevResult back.
func passThrough(req *skel.Request) (*result.Result, error) { return req.PrevResult, nil }

// FuzzLoad drives loopback's config through skel's ADD path (loopback reads no keys of
// its own, so this is the spec keys and prevResult): a refused config is a config error,
// and an accepted one, written back out, gives the same prevResult.
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		conf,
		`{"cniVersion":"0.3.1","name":"lo","type":"loopback"}`,
		`{"name":"lo","type":"loopback"}`,
		`{"cniVersion":"1.0.0","name":"lo","type":"loopback","prevResult":{"cniVersion":"1.0.0",` +
			`"interfaces":[{"name":"eth0","sandbox":"/var/run/netns/x"}],"ips":[{"address":"10.1.0.5/24","interface":0}]}}`,
		`{"cniVersion":"0.4.0","name":"lo","type":"loopback","prevResult":{"cniVersion":"0.4.0",` +
			`"ips":[{"version":"4","address":"10.1.0.5/24","gateway":"10.1.0.1"}],"dns":{"nameservers":["10.1.0.1"]}}}`,
		`{"cniVersion":"0.2.0","name":"lo","type":"loopback","prevResult":{"ip4":{"ip":"10.1.0.5/24"}}}`,
		`{"cniVersion":"1.1.0","name":"lo","type":"loopback","prevResult":null,"dns":{"nameservers":["1.1.1.1"]}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, config []byte) {
		l := skeltest.Load(Plugin(), skeltest.AddArgs(""), config, passThrough)
		skeltest.RequireConfigError(t, l)
		skeltest.RequireStable(t, Plugin(), l, nil, passThrough)
	})
}
