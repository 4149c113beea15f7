// Package crigc is the GC caller of a node whose runtime speaks CRI (containerd,
// CRI-O): it asks the runtime for the pod sandboxes it knows (ListPodSandbox) and runs
// `cni gc` on every network of the config dir with the attachments of those sandboxes
// as the valid ones, so that what a pod the runtime forgot left behind (an attachment
// whose DEL failed, the reservation of an ADD that failed half-way and whose teardown
// failed too, containerd #12130) is collected with no operator action.
//
// It lives in the build tools' module, built into a program of its own (cni-gc-cri),
// so that gRPC and the CRI API are never linked into the cni binary: every plugin exec
// starts as before. `cni gc` itself honours each network's disableGC.
//
// The spec has the runtime never run GC beside an ADD or a DEL; a caller outside the
// runtime cannot promise that, so it does what it can to stay clear of them: a round
// does nothing while a network namespace younger than Settle exists in the runtime's
// netns directory (a pod being set up or torn down, or one just set up that the
// runtime does not list yet), and nothing at all when the runtime cannot be asked:
// an empty list from an error would make every pod look gone.
package crigc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Options say where the runtime, the cni binary and the node's CNI state are.
type Options struct {
	Socket   string        // the CRI socket, e.g. /run/containerd/containerd.sock
	CNI      string        // the cni binary
	ConfDir  string        // the network config dir (cni gc --conf-dir)
	CacheDir string        // the runtime's CNI cache dir, holding results/ (cni gc --cache-dir)
	CNIPath  string        // CNI_PATH for the plugins cni gc runs
	NetnsDir string        // where the runtime makes pod network namespaces
	Settle   time.Duration // a netns younger than this means a pod may be in ADD or DEL
	Timeout  time.Duration // bounds the CRI call and each cni gc
	Log      io.Writer     // one line per network collected, per round skipped
}

// ErrBusy says a round did nothing because a pod's network may be changing now.
var ErrBusy = errors.New("a pod network namespace is younger than the settle time")

// Round runs one GC round: list the runtime's sandboxes, then `cni gc` per network.
// It returns ErrBusy (wrapped) when it skipped the round, an error when the runtime
// could not be asked (and then ran nothing), and the joined errors of the networks.
func Round(ctx context.Context, o Options) error {
	if err := settled(o.NetnsDir, o.Settle); err != nil {
		return err
	}
	live, err := Sandboxes(ctx, o.Socket, o.Timeout)
	if err != nil {
		return fmt.Errorf("listing the runtime's pod sandboxes (nothing collected): %w", err)
	}
	cached, err := cachedAttachments(filepath.Join(o.CacheDir, "results"))
	if err != nil {
		return fmt.Errorf("reading the result cache (nothing collected): %w", err)
	}
	nets, err := networks(ctx, o)
	if err != nil {
		return err
	}
	// Again after the list: a pod whose ADD began while the runtime answered is not in
	// it, and its netns is young now.
	if err := settled(o.NetnsDir, o.Settle); err != nil {
		return err
	}
	valid := validArgs(live, cached, len(nets))
	var errs []error
	for _, n := range nets {
		if err := gc(ctx, o, n, valid); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(o.Log, "cni-gc-cri: network %s: collected what none of the %d sandboxes holds\n", n, len(live))
	}
	return errors.Join(errs...)
}

// Sandboxes lists the ids of every sandbox the runtime knows, ready or not: a sandbox
// that is not ready still owns its attachments until the runtime removes it (its DEL
// may be the next thing the runtime does).
func Sandboxes(ctx context.Context, socket string, timeout time.Duration) ([]string, error) {
	if _, err := os.Stat(socket); err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := runtimeapi.NewRuntimeServiceClient(conn).ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(resp.GetItems()))
	for _, s := range resp.GetItems() {
		ids = append(ids, s.GetId())
	}
	return ids, nil
}

// settled returns ErrBusy when dir holds a network namespace younger than settle.
// A missing dir holds none.
func settled(dir string, settle time.Duration) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the netns dir (nothing collected): %w", err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue // gone since the listing: its pod is done
		}
		if age := time.Since(info.ModTime()); age < settle {
			return fmt.Errorf("%w: %s is %s old", ErrBusy, filepath.Join(dir, e.Name()), age.Round(time.Second))
		}
	}
	return nil
}

// cachedAttachment is what the GC caller needs of a result cache entry (libcni's
// format, which the runtime and cni share).
type cachedAttachment struct {
	ContainerID string `json:"containerId"`
	IfName      string `json:"ifName"`
}

// cachedAttachments reads the attachments of the result cache; an entry it cannot read
// is left to cni gc, which removes what it cannot use.
func cachedAttachments(dir string) ([]cachedAttachment, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []cachedAttachment
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		var a cachedAttachment
		if json.Unmarshal(data, &a) == nil && a.ContainerID != "" && a.IfName != "" {
			out = append(out, a)
		}
	}
	return out, nil
}

// validArgs are the --valid flags of cni gc: every cached attachment of a live sandbox,
// and for each live sandbox the interface names the runtime gives its networks (eth0 for
// the first, eth1 ...: containerd's and CRI-O's), so that a live pod whose cache entry
// is missing keeps what its plugins hold too.
func validArgs(live []string, cached []cachedAttachment, networks int) []string {
	isLive := map[string]bool{}
	for _, id := range live {
		isLive[id] = true
	}
	seen := map[string]bool{}
	var out []string
	add := func(cid, ifname string) {
		v := cid + ":" + ifname
		if !seen[v] {
			seen[v] = true
			out = append(out, "--valid", v)
		}
	}
	for _, a := range cached {
		if isLive[a.ContainerID] {
			add(a.ContainerID, a.IfName)
		}
	}
	for _, id := range live {
		for i := range max(networks, 1) {
			add(id, "eth"+strconv.Itoa(i))
		}
	}
	return out
}

// networks are the network names of the config dir, in cni ls's order; an unusable
// file is left out (cni ls lists it as "-" and exits 1).
func networks(ctx context.Context, o Options) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, o.CNI, "ls", "--conf-dir", o.ConfDir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		return nil, fmt.Errorf("%s ls: %w: %s", o.CNI, err, strings.TrimSpace(stderr.String()))
	}
	if stderr.Len() > 0 {
		fmt.Fprintf(o.Log, "cni-gc-cri: %s", stderr.String())
	}
	var out []string
	for i, line := range strings.Split(stdout.String(), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) == 0 || f[0] == "-" || slices.Contains(out, f[0]) {
			continue
		}
		out = append(out, f[0])
	}
	return out, nil
}

// gc runs cni gc on one network.
func gc(ctx context.Context, o Options, network string, valid []string) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	args := append([]string{"gc", "--conf-dir", o.ConfDir, "--cache-dir", o.CacheDir, "--cni-path", o.CNIPath}, valid...)
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, o.CNI, append(args, network)...)
	cmd.Stdout, cmd.Stderr = o.Log, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cni gc %s: %w: %s", network, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
