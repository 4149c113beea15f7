package chain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/google/nftables"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/testbed/nfttest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// The client netns reaches the host over a veth: hostAddr on the host end.
const (
	hostAddr   = "10.99.0.1"
	clientAddr = "10.99.0.2"
	echoPort   = 9000
)

// stdChildren is the standard chain (loopback, bridge with host-local and masquerade,
// portmap, bandwidth; nftables backends), storing IPAM state under ipamDir.
func stdChildren(ipamDir string) []string {
	return []string{
		`{"type":"loopback"}`,
		`{"type":"bridge","bridge":"cni-std0","isGateway":true,"ipMasq":true,"ipMasqBackend":"nftables",` +
			`"ipam":{"type":"host-local","dataDir":"` + ipamDir + `","ranges":[[{"subnet":"10.77.0.0/24"}]],"routes":[{"dst":"0.0.0.0/0"}]}}`,
		`{"type":"portmap","backend":"nftables","capabilities":{"portMappings":true}}`,
		`{"type":"bandwidth","capabilities":{"bandwidth":true}}`,
	}
}

// stdCapabilities is what the chain plugin declares for the standard chain.
const stdCapabilities = `,"capabilities":{"portMappings":true,"bandwidth":true}`

// stdAsChain is the standard chain written as one chain plugin; stdAsConflist as the
// usual conflist of four plugins.
func stdAsChain(ipamDir string, extra ...string) string {
	return chainOf("1.1.0", "std", stdCapabilities, append(stdChildren(ipamDir), extra...)...)
}

func stdAsConflist(ipamDir string) string {
	return `{"cniVersion":"1.1.0","name":"std","plugins":[` + strings.Join(stdChildren(ipamDir), ",") + `]}`
}

// world is a host netns with a client netns routed to it, a CNI_PATH of wrapper
// scripts that log every exec before exec'ing the real plugin, and libcni.
type world struct {
	host, client *testns.NS
	dir          string // CNI_PATH
	log          string // one line per plugin process: "<type> <command>"
	cacheDir     string
	ipamDir      string
	cni          *libcni.CNIConfig
}

func newWorld(t *testing.T) *world {
	testns.RequireRoot(t)
	requireBuiltins(t, "chain", "loopback", "bridge", "host-local", "portmap", "bandwidth")
	w := &world{host: testns.NewWithLoopback(t), client: testns.NewWithLoopback(t), dir: t.TempDir(),
		cacheDir: t.TempDir(), ipamDir: t.TempDir()}
	w.log = filepath.Join(t.TempDir(), "execs")
	bin := testns.Binary(t)
	rec, err := recorder.Path()
	require.NoError(t, err)
	for _, name := range []string{"chain", "loopback", "bridge", "host-local", "portmap", "bandwidth", "recorder"} {
		target := bin
		if name == "recorder" {
			target = rec
		}
		// exec -a keeps the plugin name in argv[0], which the cni binary dispatches on.
		script := fmt.Sprintf("#!/bin/bash\nprintf '%%s %%s\\n' \"${0##*/}\" \"$CNI_COMMAND\" >>%q\nexec -a \"$0\" %q \"$@\"\n", w.log, target)
		require.NoError(t, os.WriteFile(filepath.Join(w.dir, name), []byte(script), 0o755))
	}
	w.cni = libcni.NewCNIConfigWithCacheDir([]string{w.dir}, w.cacheDir, nil)
	testns.Veth(t, w.host, "vclient", []string{hostAddr + "/24"}, w.client, "vclientp", []string{clientAddr + "/24"})
	testns.DefaultRoutes(t, w.client, "vclientp", hostAddr)
	return w
}

// execs returns the plugin processes started since the last call.
func (w *world) execs(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(w.log)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	require.NoError(t, os.Remove(w.log))
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

func (w *world) list(t *testing.T, conf string) *libcni.NetworkConfigList {
	l, err := libcni.ConfListFromBytes([]byte(conf))
	require.NoError(t, err)
	return l
}

func rt(id string, ctr *testns.NS, hostPort int) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: id, NetNS: ctr.Path, IfName: "eth0", CapabilityArgs: map[string]any{
		"portMappings": []map[string]any{{"hostPort": hostPort, "containerPort": 80, "protocol": "tcp"}},
		"bandwidth":    standardCaps["bandwidth"],
	}}
}

func (w *world) add(t *testing.T, conf string, r *libcni.RuntimeConf) (string, error) {
	var out string
	var err error
	w.host.Run(t, func() error {
		var res types.Result
		if res, err = w.cni.AddNetworkList(context.Background(), w.list(t, conf), r); err == nil {
			out = string(mustJSON(t, res))
		}
		return nil
	})
	return out, err
}

func (w *world) check(t *testing.T, conf string, r *libcni.RuntimeConf) (err error) {
	w.host.Run(t, func() error { err = w.cni.CheckNetworkList(context.Background(), w.list(t, conf), r); return nil })
	return err
}

func (w *world) del(t *testing.T, conf string, r *libcni.RuntimeConf) (err error) {
	w.host.Run(t, func() error { err = w.cni.DelNetworkList(context.Background(), w.list(t, conf), r); return nil })
	return err
}

func (w *world) gc(t *testing.T, conf string, valid ...*libcni.RuntimeConf) (err error) {
	args := &libcni.GCArgs{}
	for _, v := range valid {
		args.ValidAttachments = append(args.ValidAttachments, types.GCAttachment{ContainerID: v.ContainerID, IfName: v.IfName})
	}
	w.host.Run(t, func() error { err = w.cni.GCNetworkList(context.Background(), w.list(t, conf), args); return nil })
	return err
}

// ruleset is the host's whole firewall state: the nf_tables ruleset read over netlink
// and, where the firewall binaries are, iptables-save's tables (legacy ones too).
func (w *world) ruleset(t *testing.T) string {
	return nfttest.Firewall(t, w.host)
}

// hostLinks returns the host's links by name: type.
func (w *world) hostLinks(t *testing.T) map[string]string {
	links, err := w.host.Handle(t).LinkList()
	require.NoError(t, err)
	out := map[string]string{}
	for _, l := range links {
		out[l.Attrs().Name] = l.Type()
	}
	return out
}

// reserved lists the addresses host-local holds for network std.
func (w *world) reserved(t *testing.T) []string {
	entries, err := os.ReadDir(filepath.Join(w.ipamDir, "std"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if net.ParseIP(e.Name()) != nil {
			out = append(out, e.Name())
		}
	}
	return out
}

// leftovers describes what the attachment of id at ip left on the host: links of
// its own, firewall state naming it, its address reservation, its cache entry.
func (w *world) leftovers(t *testing.T, id, ip string) []string {
	var out []string
	for name, typ := range w.hostLinks(t) {
		if typ == "ifb" || typ == "veth" && name != "vclient" {
			out = append(out, typ+" "+name)
		}
	}
	if rs := w.ruleset(t); strings.Contains(rs, ip) || strings.Contains(rs, id) {
		out = append(out, "firewall state naming "+id+" or "+ip)
	}
	for _, a := range w.reserved(t) {
		if a == ip {
			out = append(out, "reservation "+a)
		}
	}
	for _, f := range cacheFiles(t, w.cacheDir) {
		if strings.Contains(f, id) {
			out = append(out, "cache entry "+f)
		}
	}
	return out
}

// serveRemoteAddr answers every TCP connection on port inside n with the address the
// connection came from.
func serveRemoteAddr(t *testing.T, n *testns.NS, port int) {
	testns.ServeTCPWith(t, n, "tcp4", fmt.Sprintf(":%d", port), func(remote net.Addr) string {
		host, _, _ := net.SplitHostPort(remote.String())
		return host
	})
}

func dial(n *testns.NS, addr string) (string, error) {
	return testns.DialTCP(n, addr, 2*time.Second)
}

// qdisc returns the type of the root qdisc of the host link called name.
func (w *world) rootQdisc(t *testing.T, name string) string {
	h := w.host.Handle(t)
	l, err := h.LinkByName(name)
	require.NoError(t, err)
	qs, err := h.QdiscList(l)
	require.NoError(t, err)
	for _, q := range qs {
		if q.Attrs().Parent == netlink.HANDLE_ROOT {
			return q.Type()
		}
	}
	return ""
}

func typesError(t *testing.T, err error) *types.Error {
	t.Helper()
	var te *types.Error
	require.True(t, asTypesError(err, &te), "not a CNI error: %v", err)
	return te
}

// TestStandardChainAsOnePluginThroughLibcni: the runtime starts one process per
// operation, and the chain does what the four plugins do: traffic out masqueraded, the
// mapped port answering from another netns, the rates in place, CHECK catching a rule
// removed by hand, DEL leaving nothing.
func TestStandardChainAsOnePluginThroughLibcni(t *testing.T) {
	w := newWorld(t)
	ctr := testns.NewWithLoopback(t)
	testns.ServeTCP(t, ctr, "tcp4", ":80", "container")
	serveRemoteAddr(t, w.client, echoPort)
	conf := stdAsChain(w.ipamDir)
	r := rt("ctr-std-1", ctr, 8080)

	res, err := w.add(t, conf, r)
	require.NoError(t, err)
	assert.Equal(t, []string{"chain ADD"}, w.execs(t), "one process for the whole chain")
	assert.Contains(t, res, `"address":"10.77.0.2/24"`)

	from, err := dial(ctr, fmt.Sprintf("%s:%d", clientAddr, echoPort))
	require.NoError(t, err, "the container reaches the outside")
	assert.Equal(t, hostAddr, from, "traffic out is masqueraded to the host's address")
	got, err := dial(w.client, fmt.Sprintf("%s:8080", hostAddr))
	require.NoError(t, err, "the mapped port answers")
	assert.Equal(t, "container", got)

	var parsed struct {
		Interfaces []struct{ Name, Sandbox string }
	}
	require.NoError(t, json.Unmarshal([]byte(res), &parsed))
	var hostVeth, ifb string
	for _, i := range parsed.Interfaces {
		switch {
		case strings.HasPrefix(i.Name, "veth"):
			hostVeth = i.Name
		case strings.HasPrefix(i.Name, "bwp"):
			ifb = i.Name
		}
	}
	require.NotEmpty(t, hostVeth, res)
	require.NotEmpty(t, ifb, "bandwidth's ifb is in the result: %s", res)
	assert.Equal(t, "ifb", w.hostLinks(t)[ifb])
	assert.Equal(t, "tbf", w.rootQdisc(t, ifb), "egress is shaped on the ifb")
	assert.Equal(t, "tbf", w.rootQdisc(t, hostVeth), "ingress is shaped on the host veth")

	require.NoError(t, w.check(t, conf, r))
	assert.Equal(t, []string{"chain CHECK"}, w.execs(t))

	// Flush the container's DNAT chain by hand (nft flush chain ip cni_portmap dn-...):
	// CHECK must see it.
	rs := nfttest.Ruleset(t, w.host)
	dn := regexp.MustCompile(`chain (dn-[0-9a-f]+)`).FindStringSubmatch(rs)
	require.NotNil(t, dn, rs)
	nfttest.Apply(t, w.host, func(c *nftables.Conn) error {
		c.FlushChain(&nftables.Chain{Name: dn[1], Table: &nftables.Table{Name: "cni_portmap", Family: nftables.TableFamilyIPv4}})
		return nil
	})
	err = w.check(t, conf, r)
	require.Error(t, err)
	assert.Contains(t, typesError(t, err).Msg, "chain: portmap: ")
	assert.Equal(t, []string{"chain CHECK"}, w.execs(t))

	require.NoError(t, w.del(t, conf, r))
	assert.Equal(t, []string{"chain DEL"}, w.execs(t))
	assert.Empty(t, w.leftovers(t, r.ContainerID, "10.77.0.2"))
	_, err = ctr.Handle(t).LinkByName("eth0")
	assert.Error(t, err, "the container interface is gone when DEL returns")
	_, err = dial(w.client, fmt.Sprintf("%s:8080", hostAddr))
	assert.Error(t, err, "the mapped port is gone")

	require.NoError(t, w.del(t, conf, r), "DEL again succeeds")
}

// TestStandardChainAsOnePluginDelAfterTheNetnsIsGone: the runtime may delete the netns
// before DEL; the chain still releases everything of the attachment on the host.
func TestStandardChainAsOnePluginDelAfterTheNetnsIsGone(t *testing.T) {
	w := newWorld(t)
	ctr := testns.New(t)
	conf := stdAsChain(w.ipamDir)
	r := rt("ctr-gone", ctr, 8080)
	_, err := w.add(t, conf, r)
	require.NoError(t, err)
	ctr.Close() // nothing else holds it: the kernel destroys it, the container veth with it

	require.NoError(t, w.del(t, conf, r))
	assert.Equal(t, []string{"chain ADD", "chain DEL"}, w.execs(t))
	// The host veth goes with the netns, asynchronously in the kernel; the ifb, the
	// rules, the reservation and the cache entry are DEL's to remove.
	require.Eventually(t, func() bool { return len(w.leftovers(t, r.ContainerID, "10.77.0.2")) == 0 },
		30*time.Second, 50*time.Millisecond, "left: %v", w.leftovers(t, r.ContainerID, "10.77.0.2"))
}

// TestStandardChainAsOnePluginGCRemovesStaleAttachments: libcni's GC DELs what its
// cache holds outside the valid list (through the chain), then the chain sends GC with
// the valid list to every child.
func TestStandardChainAsOnePluginGCRemovesStaleAttachments(t *testing.T) {
	w := newWorld(t)
	ctr1, ctr2 := testns.New(t), testns.New(t)
	conf := stdAsChain(w.ipamDir)
	r1, r2 := rt("ctr-keep", ctr1, 8080), rt("ctr-stale", ctr2, 8081)
	_, err := w.add(t, conf, r1)
	require.NoError(t, err)
	_, err = w.add(t, conf, r2)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"10.77.0.2", "10.77.0.3"}, w.reserved(t))
	w.execs(t)

	require.NoError(t, w.gc(t, conf, r1))
	assert.Equal(t, []string{"chain DEL", "chain GC"}, w.execs(t))
	assert.Equal(t, []string{"10.77.0.2"}, w.reserved(t))
	assert.NotContains(t, w.ruleset(t), "10.77.0.3")
	assert.NotContains(t, w.ruleset(t), r2.ContainerID)
	_, err = ctr2.Handle(t).LinkByName("eth0")
	assert.Error(t, err, "the stale container's interface is gone")
	var ifbs int
	for _, typ := range w.hostLinks(t) {
		if typ == "ifb" {
			ifbs++
		}
	}
	assert.Equal(t, 1, ifbs, "only the kept attachment's ifb is left")
	require.NoError(t, w.check(t, conf, r1), "the kept attachment is whole")

	require.NoError(t, w.del(t, conf, r1))
	assert.Empty(t, w.leftovers(t, r1.ContainerID, "10.77.0.2"))
}

// TestStandardChainAsOnePluginWithAnExternalChild: a child that is not built in is
// exec'd from CNI_PATH with the previous child's result, and its result is the chain's.
func TestStandardChainAsOnePluginWithAnExternalChild(t *testing.T) {
	w := newWorld(t)
	ctr := testns.New(t)
	rec := filepath.Join(t.TempDir(), "rec")
	conf := stdAsChain(w.ipamDir, recorderConf(rec))
	r := rt("ctr-ext", ctr, 8080)

	res, err := w.add(t, conf, r)
	require.NoError(t, err)
	assert.Equal(t, []string{"chain ADD", "recorder ADD"}, w.execs(t))
	assert.Contains(t, res, `"address":"10.77.0.2/24"`)
	assert.Contains(t, res, `"name":"rec-eth0"`, "the last child's result is the chain's")
	recs := readRecords(t, rec)
	require.Len(t, recs, 1)
	prev := recs[0].conf(t)["prevResult"].(map[string]any)
	assert.Len(t, prev["ips"], 1, "the external child got the previous children's result")
	assert.Equal(t, w.dir, recs[0].Env["CNI_PATH"])

	require.NoError(t, w.check(t, conf, r))
	require.NoError(t, w.del(t, conf, r))
	assert.Equal(t, []string{"chain CHECK", "recorder CHECK", "chain DEL", "recorder DEL"}, w.execs(t))
	assert.Empty(t, w.leftovers(t, r.ContainerID, "10.77.0.2"))
}

// TestStandardChainAsOnePluginFailedChildUndoesItsPredecessors: a child failing ADD
// leaves nothing of the children before it, and the error is the child's, code and all.
func TestStandardChainAsOnePluginFailedChildUndoesItsPredecessors(t *testing.T) {
	w := newWorld(t)
	ctr := testns.New(t)
	rec := filepath.Join(t.TempDir(), "rec")
	conf := stdAsChain(w.ipamDir, recorderConf(rec, `"fail":{"ADD":{"code":11,"msg":"quota exceeded"}}`))
	r := rt("ctr-fail", ctr, 8080)

	_, err := w.add(t, conf, r)
	require.Error(t, err)
	te := typesError(t, err)
	assert.Equal(t, cnierror.CodeTryAgainLater, te.Code)
	assert.Equal(t, "chain: recorder: quota exceeded", te.Msg)
	assert.Equal(t, []string{"chain ADD", "recorder ADD"}, w.execs(t))
	assert.Empty(t, w.leftovers(t, r.ContainerID, "10.77.0.2"), "bridge, portmap and bandwidth were undone")
	links, err := ctr.Handle(t).LinkList()
	require.NoError(t, err)
	require.Len(t, links, 1, "only lo is left in the container")
	assert.Zero(t, links[0].Attrs().Flags&net.FlagUp, "loopback was undone too")

	require.NoError(t, w.del(t, conf, r), "the runtime's DEL after the failed ADD succeeds")
	_, err = w.add(t, stdAsChain(w.ipamDir), r)
	require.NoError(t, err, "the same attachment can be added again")
	require.NoError(t, w.del(t, stdAsChain(w.ipamDir), r))
}

// masker hides what differs on every ADD whoever runs it (see volatile), and the netns.
func masker(ctr *testns.NS) func(string) string {
	return func(s string) string { return volatile.ReplaceAllString(strings.ReplaceAll(s, ctr.Path, "NETNS"), "X") }
}

// TestStandardChainAsOnePluginMatchesTheConflist: the same attachment made by the
// chain plugin and by the conflist of four gives the runtime the same result and the
// same cache entry (but for the config it was given), and the kernel the same state.
func TestStandardChainAsOnePluginMatchesTheConflist(t *testing.T) {
	type observed struct {
		result, cached, ctr, host string
	}
	got := map[string]observed{}
	for _, form := range []string{"conflist", "chain"} {
		w := newWorld(t)
		ctr := testns.New(t)
		conf := stdAsConflist(w.ipamDir)
		if form == "chain" {
			conf = stdAsChain(w.ipamDir)
		}
		mask := masker(ctr)
		r := rt("ctr-shape", ctr, 8080)
		res, err := w.add(t, conf, r)
		require.NoError(t, err)
		require.Contains(t, res, `"name":"bwp`, "the ifb is in the result")
		var o observed
		o.result = mask(res)

		data, err := os.ReadFile(filepath.Join(w.cacheDir, "results", "std-ctr-shape-eth0"))
		require.NoError(t, err)
		var entry map[string]any
		require.NoError(t, json.Unmarshal(data, &entry))
		require.NotEmpty(t, entry["config"])
		delete(entry, "config")
		o.cached = mask(string(mustJSON(t, entry)))

		ip := func(n *testns.NS, args ...string) string {
			out, err := n.Exec(t, "ip", args...)
			require.NoError(t, err, out)
			return mask(out)
		}
		o.ctr = addrs(ip(ctr, "-br", "addr")) + ip(ctr, "route")
		o.host = links(ip(w.host, "-br", "link")) + addrs(ip(w.host, "-br", "addr", "show", "cni-std0")) + ip(w.host, "route")
		require.NoError(t, w.del(t, conf, r))
		got[form] = o
	}
	assert.Contains(t, got["chain"].cached, `"kind":"cniCacheV1"`)
	assert.Equal(t, got["conflist"], got["chain"])
}
