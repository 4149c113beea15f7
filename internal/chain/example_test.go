package chain_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// examplePlugins stands for the cni binary's registry (dispatch.Lookup): "addr", a
// main plugin that answers ADD with an address, and "dns", a meta plugin that adds a
// nameserver to the result it is chained after (its PrevResult). Neither touches the
// kernel, so the example runs without privileges.
func examplePlugins(name string) *skel.Plugin {
	switch name {
	case "addr":
		return &skel.Plugin{Name: name, Versions: []string{"1.0.0"},
			Add: func(req *skel.Request) (*result.Result, error) {
				return &result.Result{IPs: []result.IPConfig{{Address: netip.MustParsePrefix("10.1.2.3/24")}}}, nil
			},
			Check: func(*skel.Request) error { return nil },
		}
	case "dns":
		return &skel.Plugin{Name: name, Versions: []string{"1.0.0"},
			Add: func(req *skel.Request) (*result.Result, error) {
				res := *req.PrevResult
				res.DNS.Nameservers = append(res.DNS.Nameservers, "10.1.2.1")
				return &res, nil
			},
			Check: func(*skel.Request) error { return nil },
		}
	}
	return nil // not built in: the runner execs it from PluginPath
}

// Example runs a network configuration list as a runtime does (libcni's AddNetworkList,
// CheckNetworkList, DelNetworkList): each plugin in order for ADD, getting the result so
// far as prevResult; the final result cached under CacheDir, where CHECK and DEL find it
// (DEL runs the plugins in reverse order). A built-in type runs in-process; any other
// is exec'd from PluginPath.
func Example() {
	net, err := chain.Parse([]byte(`{
		"cniVersion": "1.0.0",
		"name": "net1",
		"plugins": [{"type": "addr"}, {"type": "dns"}]
	}`))
	if err != nil {
		panic(err)
	}
	cache, err := os.MkdirTemp("", "chain-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(cache)
	r := &chain.Runner{Builtin: examplePlugins, PluginPath: []string{"/opt/cni/bin"}, CacheDir: cache}
	att := chain.Attachment{ContainerID: "c1", Netns: "/run/netns/example", IfName: "eth0"}
	ctx := context.Background()

	res, err := r.Add(ctx, net, att)
	if err != nil {
		panic(err)
	}
	fmt.Println("ADD:", res.IPs[0].Address, res.DNS.Nameservers)
	cached, err := r.CachedResult(net, att)
	fmt.Println("cached:", cached.IPs[0].Address, err)
	fmt.Println("CHECK:", r.Check(ctx, net, att))
	fmt.Println("DEL:", r.Del(ctx, net, att))
	cached, err = r.CachedResult(net, att)
	fmt.Println("cached after DEL:", cached, err)
	// Output:
	// ADD: 10.1.2.3/24 [10.1.2.1]
	// cached: 10.1.2.3/24 <nil>
	// CHECK: <nil>
	// DEL: <nil>
	// cached after DEL: <nil> <nil>
}
