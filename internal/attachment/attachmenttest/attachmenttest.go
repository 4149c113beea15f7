// Package attachmenttest is the test bench the one-link plugins (macvlan, ipvlan, vlan,
// dummy) share: a throwaway "host" namespace holding a master interface whose other end
// sits in a "peer" namespace (the rest of the network), a host-local data dir, and
// helpers to run a plugin in-process, exec'd like a runtime, and to see what it left.
package attachmenttest

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
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/cnierror"
	"github.com/cnikit/cni/internal/link"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/skel"
	"github.com/cnikit/cni/internal/testns"
)

// Names of the master pair.
const (
	Master = "master0" // the master, in Env.Host
	Peer   = "peer0"   // its other end, in Env.Peer
)

// Subnet is the default host-local range of Config; Env.Peer's end of the master holds
// PeerAddr in it, containers get addresses from .10 on.
const (
	Subnet   = "10.90.0.0/24"
	PeerAddr = "10.90.0.1"
)

// Env is one test's host namespace with a master, the peer namespace at the master's
// other end, and a host-local data dir.
type Env struct {
	T       testing.TB
	Plugin  *skel.Plugin
	Host    *testns.NS
	Peer    *testns.NS
	DataDir string
}

// New makes an Env for plugin (nil when the test execs plugins by name only, ExecCall): the master (a veth end, up, no address) in the host
// and its peer end, up with PeerAddr, in the peer namespace.
func New(t testing.TB, plugin *skel.Plugin) *Env {
	t.Helper()
	testns.RequireRoot(t)
	e := &Env{T: t, Plugin: plugin, Host: testns.NewWithLoopback(t), Peer: testns.NewWithLoopback(t), DataDir: t.TempDir()}
	testns.Veth(t, e.Host, Master, nil, e.Peer, Peer, []string{PeerAddr + "/24"})
	return e
}

// HostLocal is an ipam section of the Env's data dir, one range set per subnet, each
// handing out addresses from .10 on.
func (e *Env) HostLocal(subnets ...string) map[string]any {
	var ranges []any
	for _, s := range subnets {
		r := map[string]any{"subnet": s}
		if strings.HasSuffix(s, ".0/24") {
			r["rangeStart"] = strings.TrimSuffix(s, "0/24") + "10"
		}
		ranges = append(ranges, []any{r})
	}
	return map[string]any{"type": "host-local", "dataDir": e.DataDir, "ranges": ranges}
}

// Config builds the plugin's config: network "testnet", host-local on Subnet, plus
// keys; a nil value removes a key.
func (e *Env) Config(keys map[string]any) []byte {
	e.T.Helper()
	return e.ConfigOf(e.Plugin.Name, map[string]any{"ipam": e.HostLocal(Subnet)}, keys)
}

// ConfigOf builds a config of network "testnet" for plugin: base, then keys over it; a
// nil value removes a key.
func (e *Env) ConfigOf(plugin string, base, keys map[string]any) []byte {
	e.T.Helper()
	c := map[string]any{"cniVersion": "1.1.0", "name": "testnet", "type": plugin}
	for _, m := range []map[string]any{base, keys} {
		for k, v := range m {
			if v == nil {
				delete(c, k)
				continue
			}
			c[k] = v
		}
	}
	b, err := json.Marshal(c)
	require.NoError(e.T, err)
	return b
}

// WithPrev returns conf with res as its prevResult.
func WithPrev(t testing.TB, conf []byte, res *result.Result) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, res.Print(&buf))
	var c map[string]any
	require.NoError(t, json.Unmarshal(conf, &c))
	c["prevResult"] = json.RawMessage(buf.Bytes())
	b, err := json.Marshal(c)
	require.NoError(t, err)
	return b
}

// Invoke runs the plugin in-process inside the host namespace, as interface eth0.
func (e *Env) Invoke(cmd, cid, netns string, conf []byte, cniArgs ...string) (*result.Result, error) {
	args := skel.Args{Command: cmd, ContainerID: cid, Netns: netns, IfName: "eth0",
		Path: []string{"/nonexistent"}, CNIArgs: strings.Join(cniArgs, ";")}
	var res *result.Result
	var ierr error
	e.Host.Run(e.T, func() error {
		res, ierr = skel.Invoke(context.Background(), e.Plugin, args, conf, os.Stderr)
		return nil
	})
	return res, ierr
}

// Container is one attached container namespace.
type Container struct {
	NS  *testns.NS
	ID  string
	Res *result.Result
}

var containerSeq atomic.Int64

// NewContainer makes a container namespace (lo up) that is not attached yet.
func (e *Env) NewContainer() *Container {
	return &Container{NS: testns.NewWithLoopback(e.T), ID: fmt.Sprintf("ctr-%d", containerSeq.Add(1))}
}

// Add attaches a new container with conf and fails the test if ADD fails.
func (e *Env) Add(conf []byte, cniArgs ...string) *Container {
	e.T.Helper()
	c := e.NewContainer()
	e.AddTo(c, conf, cniArgs...)
	return c
}

// AddTo runs ADD for c and fails the test if it fails.
func (e *Env) AddTo(c *Container, conf []byte, cniArgs ...string) {
	e.T.Helper()
	res, err := e.Invoke(skel.CmdAdd, c.ID, c.NS.Path, conf, cniArgs...)
	require.NoError(e.T, err)
	c.Res = res
}

// Del runs DEL for c.
func (e *Env) Del(c *Container, conf []byte) error {
	_, err := e.Invoke(skel.CmdDel, c.ID, c.NS.Path, conf)
	return err
}

// Check runs CHECK for c with its ADD result as prevResult.
func (e *Env) Check(c *Container, conf []byte) error {
	_, err := e.Invoke(skel.CmdCheck, c.ID, c.NS.Path, WithPrev(e.T, conf, c.Res))
	return err
}

// Reservations lists host-local's reservation files for network testnet.
func (e *Env) Reservations() []string {
	entries, _ := os.ReadDir(filepath.Join(e.DataDir, "testnet"))
	var out []string
	for _, en := range entries {
		if n := en.Name(); !strings.HasPrefix(n, "last_reserved") && !strings.HasPrefix(n, ".") && n != "lock" {
			out = append(out, n)
		}
	}
	return out
}

// LinkList lists the links in n, the dump retried when a concurrent change interrupts
// it (link.RetryDump): links still come and go after a DEL (the kernel removes a gone
// container's veth peer when it frees the namespace, in its time), and a bare LinkList
// then fails now and then with "dump interrupted".
func LinkList(t testing.TB, n *testns.NS) []netlink.Link {
	t.Helper()
	h := n.Handle(t)
	links, err := link.RetryDump(h.LinkList)
	require.NoError(t, err)
	return links
}

// Links returns the names of the links in n, sorted.
func Links(t testing.TB, n *testns.NS) []string {
	t.Helper()
	var names []string
	for _, l := range LinkList(t, n) {
		names = append(names, l.Attrs().Name)
	}
	slices.Sort(names)
	return names
}

// AssertNothingLeft checks that c holds only lo, the host only lo and the master, and
// host-local no reservation: what every DEL and every failed ADD must leave.
func (e *Env) AssertNothingLeft(t testing.TB, c *Container) {
	t.Helper()
	assert.Equal(t, []string{"lo"}, Links(t, c.NS))
	assert.Equal(t, []string{"lo", Master}, Links(t, e.Host))
	assert.Empty(t, e.Reservations())
}

// Code returns the CNI error code of err (0 for nil).
func Code(err error) uint {
	if err == nil {
		return 0
	}
	return cnierror.From(err).Code
}

// Addr returns the address of the container's first IP, without prefix length.
func (c *Container) Addr(t testing.TB) string {
	t.Helper()
	require.NotEmpty(t, c.Res.IPs)
	return c.Res.IPs[0].Address.Addr().String()
}

// Reach reports whether a TCP connection from `from` to a server in `to` at addr gets
// an answer.
func Reach(t testing.TB, from, to *testns.NS, addr string) error {
	t.Helper()
	port := testns.ServeTCP(t, to, "tcp", ":0", "hello")
	got, err := testns.DialTCP(from, fmt.Sprintf("%s:%d", addr, port), 3*time.Second)
	if err != nil {
		return err
	}
	if got != "hello" {
		return fmt.Errorf("got %q from %s", got, addr)
	}
	return nil
}

// Exec runs the cni binary as the Env's plugin inside the host namespace the way a
// runtime does (env + stdin), as interface eth0 with CNI_PATH dir (ExecCall).
func (e *Env) Exec(dir, cmd, cid, netns string, conf []byte, extraEnv ...string) (string, *cnierror.Error) {
	e.T.Helper()
	return e.ExecCall(dir, Call{Plugin: e.Plugin.Name, Command: cmd, ContainerID: cid, Netns: netns,
		IfName: "eth0", Config: conf, Env: extraEnv})
}

// Call is one invocation of a plugin binary, as a runtime makes it.
type Call struct {
	Plugin, Command, ContainerID, Netns, IfName string
	Config                                      []byte
	// Env is added to the CNI_* variables.
	Env []string
	// Stderr, when set, gets a copy of the plugin's stderr (ExecCall).
	Stderr io.Writer
}

// Command is the exec.Cmd of c: the cni binary as c.Plugin from dir, CNI_PATH dir, the
// config on stdin. It runs in the namespace of the thread that starts it (Host.Do).
func Command(ctx context.Context, dir string, c Call) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(dir, c.Plugin))
	cmd.Env = append([]string{"CNI_COMMAND=" + c.Command, "CNI_CONTAINERID=" + c.ContainerID, "CNI_NETNS=" + c.Netns,
		"CNI_IFNAME=" + c.IfName, "CNI_PATH=" + dir}, c.Env...)
	cmd.Stdin = bytes.NewReader(c.Config)
	return cmd
}

// ExecTimeout bounds every exec'd call: a plugin that hangs (on a FIFO, a lock it
// should not wait for) fails the test instead of stalling it.
const ExecTimeout = 30 * time.Second

// ExecCall runs the cni binary as c.Plugin from dir inside the host namespace, with
// CNI_PATH dir. It returns stdout and the CNI error printed there when the plugin
// failed.
func (e *Env) ExecCall(dir string, c Call) (string, *cnierror.Error) {
	e.T.Helper()
	var out, errb bytes.Buffer
	var runErr error
	ctx, cancel := context.WithTimeout(context.Background(), ExecTimeout)
	defer cancel()
	e.Host.Run(e.T, func() error {
		cmd := Command(ctx, dir, c)
		cmd.Stdout, cmd.Stderr = &out, &errb
		if c.Stderr != nil {
			cmd.Stderr = io.MultiWriter(&errb, c.Stderr)
		}
		runErr = cmd.Run()
		return nil
	})
	require.NoError(e.T, ctx.Err(), "%s %s did not finish within %v; stderr %q", c.Plugin, c.Command, ExecTimeout, errb.String())
	if runErr == nil {
		return out.String(), nil
	}
	var exit *exec.ExitError
	require.True(e.T, errors.As(runErr, &exit), "exec %s: %v", c.Plugin, runErr)
	var ce cnierror.Error
	require.NoError(e.T, json.Unmarshal(out.Bytes(), &ce), "stdout %q stderr %q", out.String(), errb.String())
	return out.String(), &ce
}

// PluginDir links the cni binary into a temp dir as the Env's plugin and host-local.
func (e *Env) PluginDir() string {
	return testns.LinkPluginDir(e.T, e.Plugin.Name, "host-local")
}

// LibcniRun is what the reference runtime library saw of one attachment's life.
type LibcniRun struct {
	Result                            *types100.Result
	AddErr, CheckErr, DelErr, Del2Err error
}

// Libcni drives the conflist through libcni as an independent client, exec'ing the cni
// binary from a plugin dir inside the host namespace: ADD for c, then CHECK, DEL and
// DEL again.
func (e *Env) Libcni(conflist string, c *Container, capArgs map[string]any) LibcniRun {
	e.T.Helper()
	cni := libcni.NewCNIConfigWithCacheDir([]string{e.PluginDir()}, e.T.TempDir(), nil)
	list, err := libcni.ConfListFromBytes([]byte(conflist))
	require.NoError(e.T, err)
	rt := &libcni.RuntimeConf{ContainerID: c.ID, NetNS: c.NS.Path, IfName: "eth0", CapabilityArgs: capArgs}
	ctx := context.Background()
	var run LibcniRun
	e.Host.Run(e.T, func() error {
		res, err := cni.AddNetworkList(ctx, list, rt)
		if run.AddErr = err; err != nil {
			return nil
		}
		if run.Result, err = types100.GetResult(res); err != nil {
			return err
		}
		run.CheckErr = cni.CheckNetworkList(ctx, list, rt)
		run.DelErr = cni.DelNetworkList(ctx, list, rt)
		run.Del2Err = cni.DelNetworkList(ctx, list, rt)
		return nil
	})
	return run
}
