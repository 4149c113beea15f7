// Command embedder is a program outside the cni module, as Multus or a DRA driver is:
// it plugs inproc.Exec into libcni and runs a configuration list's ADD, CHECK and DEL
// for one container, printing ADD's result. pkg/inproc's TestAProgramOutsideTheModule
// builds it in a module of its own and runs it.
//
//	embedder <conflist file> <container id> <netns path> <cache dir>
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/containernetworking/cni/libcni"

	"github.com/cnikit/cni/pkg/inproc"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "embedder:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 4 {
		return fmt.Errorf("usage: embedder <conflist file> <container id> <netns path> <cache dir>")
	}
	list, err := libcni.ConfListFromFile(args[0])
	if err != nil {
		return err
	}
	cni := libcni.NewCNIConfigWithCacheDir([]string{"/nonexistent"}, args[3], &inproc.Exec{Stderr: os.Stderr})
	rt := &libcni.RuntimeConf{ContainerID: args[1], NetNS: args[2], IfName: "eth0"}
	ctx := context.Background()
	res, err := cni.AddNetworkList(ctx, list, rt)
	if err != nil {
		return fmt.Errorf("ADD: %w", err)
	}
	if err := cni.CheckNetworkList(ctx, list, rt); err != nil {
		return fmt.Errorf("CHECK: %w", err)
	}
	if err := cni.DelNetworkList(ctx, list, rt); err != nil {
		return fmt.Errorf("DEL: %w", err)
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}
