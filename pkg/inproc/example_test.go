package inproc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/containernetworking/cni/libcni"

	"github.com/cnikit/cni/pkg/inproc"
)

// A runtime that calls libcni plugs Exec in: the toolkit's plugins run in-process, any
// other type is exec'd from the path, and libcni keeps its result cache as always.
func ExampleExec() {
	cni := libcni.NewCNIConfigWithCacheDir([]string{"/opt/cni/bin"}, "/var/lib/cni", &inproc.Exec{Stderr: os.Stderr})
	list, err := libcni.LoadNetworkConf("/etc/cni/net.d", "mynet")
	if err != nil {
		log.Fatal(err)
	}
	rt := &libcni.RuntimeConf{ContainerID: "c1", NetNS: "/run/netns/c1", IfName: "eth0"}
	ctx := context.Background()
	res, err := cni.AddNetworkList(ctx, list, rt)
	if err != nil {
		log.Fatal(err)
	}
	_ = res.Print()
	if err := cni.DelNetworkList(ctx, list, rt); err != nil {
		log.Fatal(err)
	}
}

// A program without libcni takes a Runner; its cache is libcni's, so a libcni-based
// runtime can CHECK and DEL what it ADDed.
func ExampleRunner() {
	net, err := inproc.Load("/etc/cni/net.d", "mynet")
	if err != nil {
		log.Fatal(err)
	}
	r := &inproc.Runner{PluginPath: []string{"/opt/cni/bin"}, CacheDir: "/var/lib/cni", Stderr: os.Stderr}
	att := inproc.Attachment{ContainerID: "c1", Netns: "/run/netns/c1", IfName: "eth0",
		CapabilityArgs: map[string]any{"portMappings": []map[string]any{{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}}}}
	ctx := context.Background()
	res, err := r.Add(ctx, net, att)
	if err != nil {
		log.Fatalf("ADD failed with CNI code %d: %v", inproc.Code(err), err)
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	if err := r.Check(ctx, net, att); err != nil {
		log.Fatal(err)
	}
	if err := r.Del(ctx, net, att); err != nil {
		log.Fatal(err)
	}
	// Later, GC drops whatever the cache holds that is no longer in use.
	if err := r.GC(ctx, net, &inproc.GCArgs{ValidAttachments: []inproc.ValidAttachment{{ContainerID: "c2", IfName: "eth0"}}}); err != nil {
		log.Fatal(err)
	}
}
