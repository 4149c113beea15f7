package skel_test

import (
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// exampleConf is the example plugin's own config: the keys it reads beside the spec's.
type exampleConf struct {
	Address string `json:"address"`
}

// examplePlugin is a whole plugin: a *skel.Plugin value with its name, the spec
// versions it speaks and one callback per command, each handed a checked *skel.Request.
// A nil Del, GC or Status succeeds; a real plugin makes its links in req.Args.Netns and
// undoes in Del what Add made (this one makes nothing, so it runs without privileges).
// To add a plugin to the binary, return such a value from a Plugin function and add one
// line to internal/dispatch/registry.go.
func examplePlugin() *skel.Plugin {
	return &skel.Plugin{
		Name:     "example",
		About:    "answers ADD with the address of its config",
		Versions: []string{"0.4.0", "1.0.0", "1.1.0"},
		Add: func(req *skel.Request) (*result.Result, error) {
			conf, err := skel.LoadConfig[exampleConf](req) // a mistyped key is code 7, named
			if err != nil {
				return nil, err
			}
			addr, err := netip.ParsePrefix(conf.Address)
			if err != nil {
				return nil, cnierror.Invalid("address: %v", err) // the key first, code 7
			}
			return &result.Result{
				Interfaces: []result.Interface{{Name: req.Args.IfName, Sandbox: req.Args.Netns}},
				IPs:        []result.IPConfig{{Interface: new(int), Address: addr}},
			}, nil
		},
		Check: func(req *skel.Request) error { return nil }, // a real one compares req.PrevResult with the host
	}
}

// Example shows how ADD reaches a plugin. A runtime execs the binary under the plugin's
// name; main hands skel.Run the environment and stdio. skel.Run reads CNI_COMMAND and
// the other CNI_* variables, reads and checks the config on stdin, negotiates its
// version, calls Add, and prints the result converted to the config's cniVersion, or
// the spec's error JSON with exit status 1. In-process callers (IPAM delegation, the
// chain runner) call skel.Invoke with the same checks and get the result back instead.
func Example() {
	env := []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/run/netns/example", "CNI_IFNAME=eth0", "CNI_PATH=/opt/cni/bin"}
	for _, conf := range []string{
		`{"cniVersion":"1.0.0","name":"net1","type":"example","address":"10.1.2.3/24"}`,
		`{"cniVersion":"1.0.0","name":"net1","type":"example","address":"10.1.2.3"}`,
	} {
		status := skel.Run(examplePlugin(), env, strings.NewReader(conf), os.Stdout, os.Stderr)
		fmt.Println("exit status", status)
	}
	// Output:
	// {
	//     "cniVersion": "1.0.0",
	//     "interfaces": [
	//         {
	//             "name": "eth0",
	//             "sandbox": "/run/netns/example"
	//         }
	//     ],
	//     "ips": [
	//         {
	//             "address": "10.1.2.3/24",
	//             "interface": 0
	//         }
	//     ]
	// }
	// exit status 0
	// {
	//     "cniVersion": "1.0.0",
	//     "code": 7,
	//     "msg": "address: netip.ParsePrefix(\"10.1.2.3\"): no '/'"
	// }
	// exit status 1
}
