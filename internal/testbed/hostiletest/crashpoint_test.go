package hostiletest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/plugins/attachment/attachmenttest"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/kernelfeature"
	"github.com/cnikit/cni/internal/testbed/nfttest"
	"github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// crashCase is one plugin, chain or CLI run whose ADD the crash-point test stops
// after each of its steps.
type crashCase struct {
	name  string
	needs []kernelfeature.Feature
	// firewall: the case writes iptables rules (the iptables backend), which needs
	// the iptables tools.
	firewall bool
	// prepare readies the node and the container and returns the ADD and the DEL the
	// runtime runs: a plugin's DEL gets the config without prevResult, as after a
	// failed ADD.
	prepare func(n *node, c *attachmenttest.Container) (add, del invocation)
}

// invocation is one exec of the cni binary (under one of its names) inside the host.
type invocation struct {
	bin   string
	args  []string
	env   []string
	stdin []byte
}

// pluginCall is the exec of plugin for cmd on c's ifName with conf, as a runtime makes it.
func (n *node) pluginCall(plugin, cmd string, c *attachmenttest.Container, ifName string, conf []byte) invocation {
	call := plugintest.Call{Bin: filepath.Join(n.dir, plugin), Command: cmd, ContainerID: c.ID,
		Netns: c.NS.Path, IfName: ifName, Config: conf}
	return invocation{bin: call.Bin, env: call.Environ(), stdin: conf}
}

// pluginCase is a crash case of one plugin: prepare returns ADD's config, DEL's and
// CNI_IFNAME.
func pluginCase(name, plugin string, firewall bool, needs []kernelfeature.Feature,
	prepare func(n *node, c *attachmenttest.Container) (add, del []byte, ifName string)) crashCase {
	return crashCase{name: name, needs: needs, firewall: firewall,
		prepare: func(n *node, c *attachmenttest.Container) (invocation, invocation) {
			add, del, ifName := prepare(n, c)
			return n.pluginCall(plugin, skel.CmdAdd, c, ifName, add), n.pluginCall(plugin, skel.CmdDel, c, ifName, del)
		}}
}

// cliCase is a crash case of `cni add` and `cni del` of the standard chain through
// backend, the conflist in a dir of its own and the CLI's result cache in another,
// which the snapshot lists.
func cliCase(backend string) crashCase {
	return crashCase{name: "cli/" + backend, firewall: backend == "iptables",
		prepare: func(n *node, c *attachmenttest.Container) (invocation, invocation) {
			confDir := n.T.TempDir()
			list := n.conf("chain", map[string]any{"type": nil,
				"plugins": []any{stdBridge(n, backend), stdPortmap(backend, false), stdBandwidth("bandwidth")}})
			require.NoError(n.T, os.WriteFile(filepath.Join(confDir, "10-std.conflist"), list, 0o644))
			env := []string{"NETCONFPATH=" + confDir, "CNI_PATH=" + n.dir, "CNI_CACHE_DIR=" + n.cacheDir,
				`CAP_ARGS={"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]}`}
			cli := invocation{bin: filepath.Join(n.dir, "cni"), env: env}
			add, del := cli, cli
			add.args = []string{"add", "--container-id", c.ID, "testnet", c.NS.Path}
			del.args = []string{"del", "--container-id", c.ID, "testnet", c.NS.Path}
			return add, del
		}}
}

// maxCrashPoints bounds the steps of one ADD: one that takes more is a loop.
const maxCrashPoints = 64

// crashCases are the standard chain's plugins (each alone, and the chain plugin
// running them in one process) with both firewall backends, and the link plugins of
// the kill matrix (subjects).
func crashCases() []crashCase {
	var cases []crashCase
	for _, s := range subjects() {
		prepare := s.prepare
		cases = append(cases, pluginCase(s.plugin, s.plugin, false, s.needs,
			func(n *node, c *attachmenttest.Container) ([]byte, []byte, string) {
				conf, ifName := prepare(n, c)
				return conf, withoutPrev(n.T, conf), ifName
			}))
	}
	same := func(conf []byte, ifName string) ([]byte, []byte, string) { return conf, conf, ifName }
	cases = append(cases, pluginCase("loopback", "loopback", false, nil,
		func(n *node, c *attachmenttest.Container) ([]byte, []byte, string) {
			// DEL sets lo down: so it is before the ADD.
			h := c.NS.Handle(n.T)
			lo, err := h.LinkByName("lo")
			require.NoError(n.T, err)
			require.NoError(n.T, h.LinkSetDown(lo))
			return same(n.conf("loopback", nil), "lo")
		}))
	for _, backend := range []string{"iptables", "nftables"} {
		fw := backend == "iptables"
		cases = append(cases,
			pluginCase("bridge/"+backend, "bridge", fw, nil,
				func(n *node, _ *attachmenttest.Container) ([]byte, []byte, string) {
					return same(n.conf("bridge", stdBridge(n, backend)), "eth0")
				}),
			pluginCase("ptp/"+backend, "ptp", fw, nil,
				func(n *node, _ *attachmenttest.Container) ([]byte, []byte, string) {
					return same(n.conf("ptp", map[string]any{"ipMasq": true, "ipMasqBackend": backend,
						"ipam": n.hostLocal(attachmenttest.Subnet)}), "eth0")
				}),
			pluginCase("portmap/"+backend, "portmap", fw, nil,
				func(n *node, c *attachmenttest.Container) ([]byte, []byte, string) {
					conf := n.conf("portmap", stdPortmap(backend, true))
					return plugintest.WithPrev(n.T, conf, n.bridged(c)), conf, "eth0"
				}),
			pluginCase("chain/"+backend, "chain", fw, nil,
				func(n *node, _ *attachmenttest.Container) ([]byte, []byte, string) {
					return same(n.conf("chain", map[string]any{
						"runtimeConfig": map[string]any{"portMappings": portMappings},
						"plugins":       []any{stdBridge(n, backend), stdPortmap(backend, false), stdBandwidth("bandwidth")},
					}), "eth0")
				}),
			cliCase(backend))
	}
	cases = append(cases, pluginCase("bandwidth", "bandwidth", false, nil,
		func(n *node, c *attachmenttest.Container) ([]byte, []byte, string) {
			conf := n.conf("bandwidth", stdBandwidth(""))
			return plugintest.WithPrev(n.T, conf, n.bridged(c)), conf, "eth0"
		}))
	return cases
}

// portMappings is the runtime's one mapping, host port 8080 to 80.
var portMappings = []any{map[string]any{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}}

// stdBridge is the standard chain's bridge (deploy/net.d/10-std.conflist) on the node's
// range, masquerading through backend.
func stdBridge(n *node, backend string) map[string]any {
	return map[string]any{"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true,
		"ipMasqBackend": backend, "hairpinMode": true, "ipam": n.hostLocal(attachmenttest.Subnet)}
}

// stdPortmap is the standard chain's portmap through backend; alone, it carries the
// runtime's mapping itself.
func stdPortmap(backend string, alone bool) map[string]any {
	m := map[string]any{"type": "portmap", "backend": backend, "capabilities": map[string]any{"portMappings": true}}
	if alone {
		m["runtimeConfig"] = map[string]any{"portMappings": portMappings}
	}
	return m
}

// stdBandwidth shapes both directions (typ "" leaves the type to the caller).
func stdBandwidth(typ string) map[string]any {
	m := map[string]any{"ingressRate": 8000000, "ingressBurst": 80000, "egressRate": 8000000, "egressBurst": 80000}
	if typ != "" {
		m["type"] = typ
	}
	return m
}

// bridged attaches c to a bridge of the node (no masquerading) as eth0 and returns the
// result, the prevResult of a meta plugin chained after it.
func (n *node) bridged(c *attachmenttest.Container) *result.Result {
	n.T.Helper()
	out := n.mustExec("bridge", skel.CmdAdd, c, "eth0", n.conf("bridge", map[string]any{"bridge": "cni0",
		"isGateway": true, "ipam": n.hostLocal(attachmenttest.Subnet)}))
	res, err := result.Parse([]byte(out), "1.1.0")
	require.NoError(n.T, err)
	return res
}

// withoutPrev is conf without its prevResult.
func withoutPrev(t testing.TB, conf []byte) []byte {
	return plugintest.WithKeys(t, conf, map[string]any{"prevResult": nil})
}

// TestDelFinishesAndLeavesNothingAfterAnAddStoppedAtAnyStep stops each plugin's ADD
// dead (SIGKILL, no rollback) at the end of its first step, then of its second, and so on
// until an ADD completes, through a cni binary built with the crashpoint tag
// (internal/core/steps/crashpoint.go). After each, the runtime's DEL (the config
// without prevResult, as after a failed ADD) must succeed within plugintest.Timeout and
// leave the node and the container as they were before the ADD: links, qdiscs, rules,
// routes, IPAM reservations, state files, iptables and nftables rules. Issue 36: an ADD
// stopped between creating a veth and setting its host end up left a link on which
// bandwidth's DEL waited for ever.
func TestDelFinishesAndLeavesNothingAfterAnAddStoppedAtAnyStep(t *testing.T) {
	t.Parallel()
	testns.RequireRoot(t)
	bin := testns.CrashPointBinary(t)
	for _, cc := range crashCases() {
		t.Run(cc.name, func(t *testing.T) {
			t.Parallel()
			requireFeatures(t, cc.needs)
			if cc.firewall {
				testns.RequireFirewallBinaries(t, "the iptables backend")
			}
			n := newNode(t)
			n.dir = testns.LinkBinaryDir(t, bin, slices.Concat(pluginNames, []string{"loopback", "cni"})...)
			n.cacheDir = t.TempDir()
			c := n.NewContainer()
			add, del := cc.prepare(n, c)
			// One whole ADD and DEL first: what outlives every attachment (the bridge,
			// the backend's empty tables) is then in the snapshot every DEL must leave.
			n.mustRun(add, "ADD")
			n.mustRun(del, "DEL")
			before := n.crashSnapshot(c)
			for at := 1; ; at++ {
				require.LessOrEqual(t, at, maxCrashPoints, "ADD still stopped after %d steps", maxCrashPoints)
				step, stopped := n.addStoppedAt(add, at)
				where := fmt.Sprintf("ADD stopped at the end of step %d (%s)", at, step)
				if !stopped {
					where = fmt.Sprintf("ADD completed in %d steps", at-1)
				}
				t.Log(where)
				n.mustRun(del, "DEL after the "+where)
				if !assert.Equal(t, before, n.crashSnapshot(c), "after the %s and DEL", where) || !stopped {
					return
				}
			}
		})
	}
}

// delDeadline bounds each DEL: one that has not returned by then hangs.
const delDeadline = 20 * time.Second

// command is the command of inv, with extraEnv, bound by ctx.
func (inv invocation) command(ctx context.Context, extraEnv ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, inv.bin, inv.args...)
	cmd.Env = slices.Concat(inv.env, extraEnv)
	cmd.Stdin = bytes.NewReader(inv.stdin)
	return cmd
}

// run runs cmd inside the host (the child is born in the namespace of the thread that
// starts it) and returns its output (stdout and stderr) and its error.
func (n *node) run(cmd *exec.Cmd) (string, error) {
	n.T.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	var err error
	n.Host.Run(n.T, func() error { err = cmd.Run(); return nil })
	return out.String(), err
}

// mustRun runs inv and fails the test unless it succeeds within delDeadline.
func (n *node) mustRun(inv invocation, what string) {
	n.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), delDeadline)
	defer cancel()
	out, err := n.run(inv.command(ctx))
	require.NoError(n.T, ctx.Err(), "%s did not finish within %s: %s", what, delDeadline, out)
	require.NoError(n.T, err, "%s: %s", what, out)
}

// addStoppedAt runs the ADD add with the crash point at step at. It returns the name
// of the step at whose end the ADD stopped, and whether it did: an ADD of fewer steps
// completes, and must succeed.
func (n *node) addStoppedAt(add invocation, at int) (string, bool) {
	n.T.Helper()
	log := filepath.Join(n.T.TempDir(), "steps")
	ctx, cancel := context.WithTimeout(context.Background(), plugintest.Timeout)
	defer cancel()
	out, err := n.run(add.command(ctx, fmt.Sprintf("CNI_TEST_CRASHPOINT=%d", at), "CNI_TEST_CRASHPOINT_LOG="+log))
	require.NoError(n.T, ctx.Err(), "ADD with the crash point at %d did not finish", at)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return lastStep(n.T, log), true
		}
	}
	require.NoError(n.T, err, "ADD with the crash point at %d (past its last step): %s", at, out)
	return "", false
}

// lastStep is the name of the last step the crash-point log records.
func lastStep(t testing.TB, log string) string {
	t.Helper()
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	_, name, _ := strings.Cut(lines[len(lines)-1], " ")
	return name
}

// crashSnapshot is snapshot with the host's qdiscs and firewall rules.
func (n *node) crashSnapshot(c *attachmenttest.Container) []string {
	n.T.Helper()
	out := n.snapshot(c)
	h := n.Host.Handle(n.T)
	qdiscs, err := h.QdiscList(nil)
	require.NoError(n.T, err)
	for _, q := range qdiscs {
		a := q.Attrs()
		out = append(out, fmt.Sprintf("host qdisc %s link %d parent %s handle %s", q.Type(), a.LinkIndex,
			netlink.HandleStr(a.Parent), netlink.HandleStr(a.Handle)))
	}
	out = append(out, "nftables "+nfttest.Ruleset(n.T, n.Host))
	if n.cacheDir != "" {
		out = append(out, fmt.Sprintf("cache %v", cacheFiles(n.T, n.cacheDir)))
	}
	if !testns.FirewallBinariesHidden() {
		for _, table := range []string{"nat", "filter", "mangle"} {
			out = append(out, "iptables "+testns.IPTables{}.Rules(n.T, n.Host, table))
		}
	}
	return out
}

// TestOnlyTheCrashPointBuildCanStopItself: the production binary holds nothing of the
// crash point (neither its variable's name nor its code), the crashpoint build does.
func TestOnlyTheCrashPointBuildCanStopItself(t *testing.T) {
	t.Parallel()
	for _, b := range []struct {
		bin  string
		want bool
	}{{testns.Binary(t), false}, {testns.CrashPointBinary(t), true}} {
		data, err := os.ReadFile(b.bin)
		require.NoError(t, err)
		assert.Equal(t, b.want, bytes.Contains(data, []byte("CNI_TEST_CRASHPOINT")), "%s names the crash point", b.bin)
		assert.Equal(t, b.want, bytes.Contains(data, []byte("steps.stepEnded")), "%s has the crash point's code", b.bin)
	}
}

// cacheFiles lists the files under dir (a runtime's result cache).
func cacheFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, path)
		}
		return err
	}))
	return out
}
