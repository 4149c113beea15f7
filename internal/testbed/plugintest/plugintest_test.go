package plugintest_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/plugins/loopback"
	"github.com/cnikit/cni/internal/result"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

const loConf = `{"cniVersion":"1.1.0","name":"lo-net","type":"loopback"}`

func TestEnvironIsTheRuntimesVariablesThenTheExtraOnes(t *testing.T) {
	c := pt.Call{Bin: "/opt/cni/bin/bridge", Command: "ADD", ContainerID: "c1", Netns: "/run/netns/x", IfName: "eth0"}
	assert.Equal(t, []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/run/netns/x", "CNI_IFNAME=eth0",
		"CNI_PATH=/opt/cni/bin"}, c.Environ(), "CNI_PATH is the binary's dir, no CNI_ARGS when empty")
	c.Args, c.Path, c.Env = "IgnoreUnknown=1", "/a:/b", []string{"PATH="}
	assert.Equal(t, []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/run/netns/x", "CNI_IFNAME=eth0",
		"CNI_PATH=/a:/b", "CNI_ARGS=IgnoreUnknown=1", "PATH="}, c.Environ())
	args := c.SkelArgs()
	assert.Equal(t, []string{"/a", "/b"}, args.Path)
	assert.Equal(t, "IgnoreUnknown=1", args.CNIArgs)
	assert.Equal(t, []string{"PATH="}, args.Env, "what delegates inherit")
	assert.Equal(t, []string{"/nonexistent"}, pt.Call{}.SkelArgs().Path, "an in-process call execs nothing")
	del := c.In("DEL", []byte("{}"))
	assert.Equal(t, "DEL", del.Command)
	assert.Equal(t, "c1", del.ContainerID)
	assert.Equal(t, "ADD", c.Command, "In copies")
}

func TestExecAndInvokeRunTheSameCall(t *testing.T) {
	testns.RequireRoot(t)
	host, ctr := testns.New(t), testns.New(t)
	c := pt.Call{Bin: testns.LinkPlugin(t, "loopback"), Command: "ADD",
		ContainerID: "c1", Netns: ctr.Path, IfName: "eth0", Config: []byte(loConf)}

	o := pt.Exec(t, host, c)
	require.Zero(t, o.Exit, o)
	assert.Positive(t, o.CPU, "the plugin's CPU time")
	assert.NoError(t, o.Err)
	assert.Zero(t, o.Code())
	assert.Nil(t, o.CNIError())
	printed, err := result.Parse([]byte(o.Stdout), "")
	require.NoError(t, err)

	res, err := pt.Invoke(t, host, loopback.Plugin(), c)
	require.NoError(t, err)
	b, err := json.Marshal(res)
	require.NoError(t, err)
	want, err := json.Marshal(printed)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(b), "the exec'd and the in-process ADD give the same result")
}

func TestAssertAnswersVersionTellsAPluginFromAnotherProgram(t *testing.T) {
	dir := testns.LinkPluginDir(t, "loopback")
	assert.True(t, pt.AssertAnswersVersion(t, filepath.Join(dir, "loopback")))
	r := recorder{TB: t}
	assert.False(t, pt.AssertAnswersVersion(&r, "/bin/true"), "no version object")
	assert.Equal(t, 1, r.errors)
}

func TestExecDecodesTheCNIErrorOfAFailedCall(t *testing.T) {
	testns.RequireRoot(t)
	host, ctr := testns.New(t), testns.New(t)
	c := pt.Call{Bin: testns.LinkPlugin(t, "loopback"), Command: "ADD",
		ContainerID: "c1", Netns: ctr.Path, IfName: "eth0", Config: []byte(`{"cniVersion":`)}
	o := pt.Exec(t, host, c)
	assert.Equal(t, 1, o.Exit)
	assert.Equal(t, cnierror.CodeDecode, o.Code(), o)
	require.NotNil(t, o.CNIError())
	assert.Contains(t, o.CNIError().Msg, "decod")
	assert.Contains(t, o.String(), "exit 1")
	assert.True(t, pt.AssertFailed(t, o, cnierror.CodeDecode, "decod"))
	r := recorder{TB: t}
	assert.False(t, pt.AssertFailed(&r, o, cnierror.CodeInvalidConfig), "another code")
	assert.False(t, pt.AssertFailed(&r, o, cnierror.CodeDecode, "no such words"), "a name the message lacks")
	assert.False(t, pt.AssertFailed(&r, pt.Outcome{}, cnierror.CodeDecode), "a success")
	assert.Equal(t, 4, r.errors, "each miss is said once: code; message; exit status and CNI error")

	_, err := pt.Invoke(t, host, loopback.Plugin(), c)
	assert.Equal(t, cnierror.CodeDecode, pt.Code(err), "the same code in-process")
	assert.True(t, pt.RequireRefused(t, err, cnierror.CodeDecode, "decod"))
	r = recorder{TB: t}
	assert.False(t, pt.RequireRefused(&r, err, cnierror.CodeInvalidConfig), "another code")
	assert.False(t, pt.RequireRefused(&r, err, cnierror.CodeDecode, "no such words"), "a name the message lacks")
	assert.Equal(t, 2, r.errors, "each miss is said once")
}

func TestForEachDataDirThatIsNoDirectoryGivesPathsNoDirectoryCanBeMadeAt(t *testing.T) {
	var names []string
	pt.ForEachDataDirThatIsNoDirectory(t, func(t *testing.T, dataDir string) {
		names = append(names, t.Name())
		assert.Error(t, os.MkdirAll(dataDir, 0o700), "a directory at %s", dataDir)
	})
	assert.Equal(t, []string{t.Name() + "/file/", t.Name() + "/file/sub"}, names)
}

func TestCodeIsWhatARuntimeSees(t *testing.T) {
	assert.Zero(t, pt.Code(nil))
	assert.Equal(t, cnierror.CodeInternal, pt.Code(os.ErrNotExist), "an untyped error is 999")
	assert.Equal(t, cnierror.CodeInvalidConfig, pt.Code(cnierror.Invalid("x")))
}

func TestConfigLaysKeysOverTheBaseAndNilRemovesOne(t *testing.T) {
	base := map[string]any{"cniVersion": "1.1.0", "name": "n", "type": "bridge", "mtu": 1400}
	got := pt.Config(t, base, map[string]any{"mtu": nil, "bridge": "br0"}, map[string]any{"bridge": "br1"})
	assert.JSONEq(t, `{"cniVersion":"1.1.0","name":"n","type":"bridge","bridge":"br1"}`, string(got))
	assert.Equal(t, 1400, base["mtu"], "the base is not changed")
}

func TestWithKeysChangesOnlyTheKeysGiven(t *testing.T) {
	got := pt.WithKeys(t, []byte(loConf), map[string]any{"cniVersion": "0.4.0", "type": nil, "mtu": 1400})
	assert.JSONEq(t, `{"cniVersion":"0.4.0","name":"lo-net","mtu":1400}`, string(got))
}

func TestWithPrevPutsTheResultAsPrinted(t *testing.T) {
	res := &result.Result{CNIVersion: "1.1.0", Interfaces: []result.Interface{{Name: "eth0", Sandbox: "/x"}}}
	conf := pt.WithPrev(t, []byte(loConf), res)
	var got struct {
		Name       string
		PrevResult json.RawMessage
	}
	require.NoError(t, json.Unmarshal(conf, &got))
	assert.Equal(t, "lo-net", got.Name)
	back, err := result.Parse(got.PrevResult, "")
	require.NoError(t, err)
	assert.Equal(t, "eth0", back.Interfaces[0].Name)
}

func TestMergedLaysLaterMapsOverEarlierOnes(t *testing.T) {
	a := map[string]any{"x": 1, "y": 2}
	got := pt.Merged(a, map[string]any{"y": 3, "z": nil})
	assert.Equal(t, map[string]any{"x": 1, "y": 3, "z": nil}, got)
	assert.Equal(t, 2, a["y"], "the maps given are not changed")
	assert.Empty(t, pt.Merged())
}

func TestNetnsOfIsTheContainersUnlessOverridden(t *testing.T) {
	host, ctr := pt.HostAndContainer(t)
	assert.NotEqual(t, host.Path, ctr.Path)
	assert.Equal(t, ctr.Path, pt.NetnsOf(ctr, ""))
	assert.Equal(t, "/nonexistent", pt.NetnsOf(ctr, "/nonexistent"))
	assert.Equal(t, "", pt.NetnsOf(ctr, pt.NoNetns))
}

func TestHostLocalHasOneRangeSetPerSubnet(t *testing.T) {
	b, err := json.Marshal(pt.HostLocal("/d", "10.1.0.0/24", "fd01::/64"))
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"host-local","dataDir":"/d","ranges":[[{"subnet":"10.1.0.0/24"}],[{"subnet":"fd01::/64"}]]}`, string(b))
}

func TestReservationsAreTheAddressFilesOnly(t *testing.T) {
	dir := t.TempDir()
	assert.Nil(t, pt.Reservations(t, filepath.Join(dir, "none")), "no network dir yet")
	for _, n := range []string{"10.1.0.2", "fd01::2", "lock", "last_reserved_ip.0", "index"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), nil, 0o600))
	}
	assert.Equal(t, []string{"10.1.0.2", "fd01::2"}, pt.Reservations(t, dir))
	assert.Equal(t, []string{"10.1.0.2", "fd01::2", "index", "last_reserved_ip.0", "lock"}, pt.Entries(t, dir))
}

func TestLinksAndLinkInLookInTheNamespace(t *testing.T) {
	testns.RequireRoot(t)
	a, b := testns.New(t), testns.New(t)
	testns.Veth(t, a, "va", nil, b, "vb", nil)
	assert.Equal(t, []string{"lo", "va"}, pt.Links(t, a))
	assert.NotNil(t, pt.LinkIn(t, b, "vb"))
	assert.Nil(t, pt.LinkIn(t, b, "va"))
	require.NotNil(t, pt.AttrsIn(t, a, "va"))
	assert.Equal(t, "va", pt.AttrsIn(t, a, "va").Name)
	assert.Nil(t, pt.AttrsIn(t, a, "vb"))
	assert.Equal(t, "va", pt.LinkAs[*netlink.Veth](t, a, "va").Name)

	assert.Empty(t, pt.SourceRules(t, a), "the kernel's own rules match no source")
	h := a.Handle(t)
	rule := netlink.NewRule()
	rule.Src, rule.Table = &net.IPNet{IP: net.IPv4(10, 1, 0, 2), Mask: net.CIDRMask(32, 32)}, 100
	require.NoError(t, h.RuleAdd(rule))
	assert.Equal(t, []string{"from 10.1.0.2/32 lookup 100"}, pt.SourceRules(t, a))
}

// recorder is t but that it counts the failures said to it instead of failing.
type recorder struct {
	testing.TB
	errors int
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.errors++ }

func TestObjectJoinsTheMembersGiven(t *testing.T) {
	prev := &result.Result{CNIVersion: "1.1.0"}
	assert.Equal(t, "", pt.PrevMember(t, nil))
	got := pt.Object(`"cniVersion":"1.1.0","name":"n"`, "", pt.PrevMember(t, prev), `"mtu":1400`)
	var c struct {
		Name       string
		MTU        int
		PrevResult struct{ CNIVersion string }
	}
	require.NoError(t, json.Unmarshal(got, &c), string(got))
	assert.Equal(t, "n", c.Name)
	assert.Equal(t, 1400, c.MTU)
	assert.Equal(t, "1.1.0", c.PrevResult.CNIVersion)
	assert.Equal(t, "{}", string(pt.Object()))
}

func TestSnapshotChangesWithAnyEntry(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(f, []byte("a"), 0o644))
	require.NoError(t, os.Symlink("f", filepath.Join(dir, "l")))
	before := pt.Snapshot(t, dir, filepath.Join(dir, "none"))
	require.Len(t, before, 2)
	assert.Equal(t, "f", before[filepath.Join(dir, "l")].Link)
	assert.Equal(t, before, pt.Snapshot(t, dir), "nothing changed")

	require.NoError(t, os.WriteFile(f+".new", []byte("a"), 0o644))
	require.NoError(t, os.Rename(f+".new", f))
	after := pt.Snapshot(t, dir)
	assert.NotEqual(t, before[f].Inode, after[f].Inode, "a replaced file is seen")
	assert.Equal(t, before[filepath.Join(dir, "l")], after[filepath.Join(dir, "l")])
}

func TestRecordsAreTheLinesOfTheFile(t *testing.T) {
	type rec struct{ Command string }
	path := filepath.Join(t.TempDir(), "records")
	assert.Nil(t, pt.Records[rec](t, path), "no file: the plugin never ran")
	require.NoError(t, os.WriteFile(path, []byte(`{"command":"ADD"}`+"\n"+`{"command":"DEL"}`+"\n"), 0o600))
	assert.Equal(t, []rec{{"ADD"}, {"DEL"}}, pt.Records[rec](t, path))
}

func TestLibcniRunsTheLifeOfAnAttachmentAsARuntimeDoes(t *testing.T) {
	host, ctr := pt.HostAndContainer(t)
	dir := testns.LinkPluginDir(t, "loopback")
	rt := &libcni.RuntimeConf{ContainerID: "c1", NetNS: ctr.Path, IfName: "eth0"}
	run := pt.Libcni(t, host, dir, `{"cniVersion":"1.1.0","name":"lo-net","plugins":[{"type":"loopback"}]}`, rt)
	require.NoError(t, run.AddErr)
	assert.Equal(t, "1.1.0", run.Result.CNIVersion)
	assert.NoError(t, run.CheckErr)
	assert.NoError(t, run.DelErr)
	assert.NoError(t, run.Del2Err)

	run = pt.Libcni(t, host, dir, `{"cniVersion":"1.1.0","name":"lo-net","plugins":[{"type":"nosuch"}]}`, rt)
	assert.Error(t, run.AddErr)
	assert.Nil(t, run.Result)
	assert.NoError(t, run.CheckErr, "no CHECK after a failed ADD")
	assert.Error(t, run.DelErr, "but a DEL, which finds no plugin either")
}

func TestLongIDIsOfTheLengthAskedInLibcnisAlphabet(t *testing.T) {
	id := pt.LongID(255)
	assert.Len(t, id, 255)
	assert.Regexp(t, `^c[a-zA-Z0-9_.\-]+$`, id)
}

func TestForEachBackendRunsBoth(t *testing.T) {
	var ran []string
	t.Run("all", func(t *testing.T) {
		pt.ForEachBackend(t, func(t *testing.T, backend string) { ran = append(ran, backend) })
	})
	if testns.FirewallBinariesHidden() {
		assert.Equal(t, []string{"nftables"}, ran, "iptables skipped without its binaries")
		return
	}
	assert.Equal(t, []string{"nftables", "iptables"}, ran)
}

func TestRunCommandSaysHowAProgramEnded(t *testing.T) {
	o := pt.RunCommand(t, nil, nil, []byte("in"), "/bin/sh", "-c", "cat; echo err >&2; exit 3")
	assert.Equal(t, 3, o.Exit)
	assert.Equal(t, "in", o.Stdout)
	assert.Equal(t, "err\n", o.Stderr)
	assert.NoError(t, o.Err, "no CNI error is looked for")
	assert.Zero(t, pt.RunCommand(t, nil, nil, nil, "/bin/true").Exit)
}

// TestLinkListSurvivesLinksComingAndGoing lists a namespace of many links while another
// goroutine adds and deletes a veth pair in it, as the kernel's late removal of gone
// containers' veths does: many of those dumps come back interrupted, and the listing
// retries them instead of failing the test (it failed within a few tries).
func TestLinkListSurvivesLinksComingAndGoing(t *testing.T) {
	testns.RequireRoot(t)
	n := testns.New(t)
	h := n.Handle(t)
	const pairs = 150 // enough links for a dump of several messages, which a change can interrupt
	for i := range pairs {
		require.NoError(t, h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: fmt.Sprintf("a%d", i)}, PeerName: fmt.Sprintf("b%d", i)}))
	}
	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Go(func() {
		ch := n.Handle(t)
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "churn0"}, PeerName: "churn1"}
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = ch.LinkAdd(v)
			_ = ch.LinkDel(v)
		}
	})
	defer churn.Wait()
	defer close(stop)
	for range 50 {
		assert.NotEmpty(t, pt.LinkList(t, n)) // an interrupted dump it could not retry fails the test
	}
}

func TestAssertEachRefusedExecsEveryConfigAndChecksWhatIsLeftAfterEach(t *testing.T) {
	testns.RequireRoot(t)
	ctr := testns.New(t)
	c := pt.Call{Bin: testns.LinkPlugin(t, "loopback"), Command: "ADD", ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"}
	var checked []string
	pt.AssertEachRefused(t, nil, c, cnierror.CodeDecode, map[string][]byte{
		"truncated": []byte(`{"cniVersion":`),
		"no json":   []byte(`x`),
	}, func(t *testing.T) { checked = append(checked, t.Name()) })
	assert.ElementsMatch(t, []string{t.Name() + "/truncated", t.Name() + "/no_json"}, checked)
}
