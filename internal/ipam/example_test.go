package ipam_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/cnikit/cni/internal/core/rollback"
	"github.com/cnikit/cni/internal/ipam"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// mainPlugin is a main plugin that delegates its addresses: ipam.Validate before it
// makes anything (a broken ipam section leaves nothing behind), ipam.Add for the
// addresses of the type named in ipam.type, ipam.Release pushed onto the rollback stack
// so that a later failure of the ADD gives them back, and ipam.Del in DEL. A built-in
// type (host-local, static, dhcp) runs in-process; any other is exec'd from CNI_PATH.
// A real plugin makes its link between Add and the return, and puts the addresses on
// it; this one makes none, so it runs without privileges.
func mainPlugin() *skel.Plugin {
	return &skel.Plugin{
		Name:     "main",
		Versions: []string{"1.0.0"},
		Add: func(req *skel.Request) (res *result.Result, err error) {
			if err := ipam.Validate(req); err != nil {
				return nil, err
			}
			var undo rollback.Stack
			defer undo.OnError(&err)
			res, err = ipam.Add(req)
			if err != nil {
				return nil, err
			}
			undo.Push("release IPAM", ipam.Release(req))
			res.Interfaces = []result.Interface{{Name: req.Args.IfName, Sandbox: req.Args.Netns}}
			for i := range res.IPs {
				res.IPs[i].Interface = new(int) // the addresses go on interface 0
			}
			return res, nil
		},
		Del:   ipam.Del,
		Check: ipam.Check,
	}
}

// Example delegates to the static IPAM type, which answers with the addresses and
// routes its config names.
func Example() {
	conf := `{"cniVersion":"1.0.0","name":"net1","type":"main","ipam":{"type":"static",
		"addresses":[{"address":"10.1.2.3/24","gateway":"10.1.2.1"}],"routes":[{"dst":"0.0.0.0/0"}]}}`
	env := []string{"CNI_CONTAINERID=c1", "CNI_NETNS=/run/netns/example", "CNI_IFNAME=eth0", "CNI_PATH=/opt/cni/bin"}
	for _, cmd := range []string{"ADD", "DEL"} {
		status := skel.Run(mainPlugin(), append(env, "CNI_COMMAND="+cmd), strings.NewReader(conf), os.Stdout, os.Stderr)
		fmt.Println(cmd, "exit status", status)
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
	//             "gateway": "10.1.2.1",
	//             "interface": 0
	//         }
	//     ],
	//     "routes": [
	//         {
	//             "dst": "0.0.0.0/0"
	//         }
	//     ]
	// }
	// ADD exit status 0
	// DEL exit status 0
}
