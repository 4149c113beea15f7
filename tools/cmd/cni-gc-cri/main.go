// Command cni-gc-cri is the GC caller of a containerd or CRI-O node (package crigc):
// it lists the runtime's pod sandboxes over CRI and runs `cni gc` on every network of
// the config dir with their attachments as the valid ones. Once per run (the packages'
// cni-gc.timer runs it so), or every -every (the DaemonSet's gc container). It is a
// program of its own so that gRPC is never linked into the cni binary.
//
// Exit status: 0 collected or skipped (a pod's network was changing: the next round
// does it), 1 the runtime could not be asked or a network's GC failed, 2 usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cnikit/cni/tools/crigc"
)

func main() {
	var o crigc.Options
	flag.StringVar(&o.Socket, "socket", "/run/containerd/containerd.sock", "the runtime's CRI socket (CRI-O: /var/run/crio/crio.sock)")
	flag.StringVar(&o.CNI, "cni", "/opt/cni/bin/cni", "the cni binary")
	flag.StringVar(&o.ConfDir, "conf-dir", "/etc/cni/net.d", "network config dir")
	flag.StringVar(&o.CacheDir, "cache-dir", "/var/lib/cni", "the runtime's CNI cache dir (holding results/)")
	flag.StringVar(&o.CNIPath, "cni-path", "/opt/cni/bin", "plugin search path")
	flag.StringVar(&o.NetnsDir, "netns-dir", "/var/run/netns", "where the runtime makes pod network namespaces")
	flag.DurationVar(&o.Settle, "settle", 5*time.Minute, "skip a round while a pod netns is younger than this (a pod may be in ADD)")
	flag.DurationVar(&o.Timeout, "timeout", 2*time.Minute, "bound of the CRI call and of each cni gc")
	every := flag.Duration("every", 0, "run a round every this long, until SIGTERM (0: one round)")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "cni-gc-cri: no arguments expected, got %q\n", flag.Args())
		os.Exit(2)
	}
	o.Log = os.Stdout
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if *every <= 0 {
		if !round(ctx, o) {
			os.Exit(1)
		}
		return
	}
	t := time.NewTicker(*every)
	defer t.Stop()
	for {
		round(ctx, o)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// round runs one round and says on stderr what went wrong; false when it failed.
func round(ctx context.Context, o crigc.Options) bool {
	err := crigc.Round(ctx, o)
	switch {
	case err == nil:
		return true
	case errors.Is(err, crigc.ErrBusy):
		fmt.Fprintf(os.Stderr, "cni-gc-cri: round skipped: %v\n", err)
		return true
	default:
		fmt.Fprintf(os.Stderr, "cni-gc-cri: %v\n", err)
		return false
	}
}
