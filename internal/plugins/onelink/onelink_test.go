package onelink_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/plugins/attachment"
	at "github.com/cnikit/cni/internal/plugins/attachment/attachmenttest"
	"github.com/cnikit/cni/internal/plugins/onelink"
	"github.com/cnikit/cni/internal/spec/skel"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
)

// conf is the test members' config: wrong makes Verify fail, invalid makes Load fail,
// failCreate makes Create fail after it made the link.
type conf struct {
	Wrong      bool `json:"wrong"`
	Invalid    bool `json:"invalid"`
	FailCreate bool `json:"failCreate"`
}

// loads counts the calls of load, to see which commands read the member's config.
func load(loads *atomic.Int32) func(*skel.Request) (conf, error) {
	return func(req *skel.Request) (conf, error) {
		loads.Add(1)
		c, err := skel.LoadConfig[conf](req)
		if err != nil {
			return conf{}, err
		}
		if c.Invalid {
			return conf{}, cnierror.Invalid("invalid: set")
		}
		return *c, nil
	}
}

// bridgeMember makes its link, a bridge, inside the container: any link kind the kernel
// has will do for the skeleton.
func bridgeMember(loads *atomic.Int32) func() *skel.Plugin {
	return func() *skel.Plugin {
		return onelink.Plugin(onelink.Member[conf]{Name: "inbridge", About: "test", Load: load(loads),
			Link: onelink.InContainer[conf]{
				Create: func(req *skel.Request, c conf, cont *link.NS) (func() error, error) {
					if _, err := link.CreateChild(cont, cont, &netlink.Bridge{}, req.Args.IfName); err != nil {
						return nil, err
					}
					remove := func() error { return cont.Delete(req.Args.IfName) }
					if c.FailCreate {
						return remove, errors.New("set up: failed")
					}
					return remove, nil
				},
				Verify: func(c conf, cont *link.NS, l netlink.Link) error {
					if _, err := cont.ByName(l.Attrs().Name); err != nil || c.Wrong {
						return errors.Join(err, errors.New("wrong, config says"))
					}
					return nil
				},
			}})
	}
}

func TestInContainerAddCheckDel(t *testing.T) {
	t.Parallel()
	var loads atomic.Int32
	e := at.New(t, bridgeMember(&loads)())
	cfg := e.Config(nil)
	c := e.Add(cfg)
	l, err := c.NS.Handle(t).LinkByName("eth0")
	require.NoError(t, err)
	assert.Equal(t, "bridge", l.Type())
	require.Len(t, c.Res.Interfaces, 1)
	assert.Equal(t, c.NS.Path, c.Res.Interfaces[0].Sandbox)
	assert.Equal(t, []string{c.Addr(t) + "/24"}, c.Addrs(t), "IPAM's address is on the link")

	require.NoError(t, e.Check(c, cfg))
	err = e.Check(c, pt.WithKeys(t, cfg, map[string]any{"wrong": true}))
	assert.ErrorContains(t, err, `container interface "eth0": wrong, config says`, "CHECK runs the member's Verify")
	assert.EqualValues(t, 3, loads.Load(), "ADD and each CHECK load the config")

	require.NoError(t, e.Del(c, pt.WithKeys(t, cfg, map[string]any{"invalid": true})), "DEL cleans up whatever the config says")
	assert.EqualValues(t, 3, loads.Load(), "DEL does not load the member's config")
	e.AssertNothingLeft(t, c)
}

func TestInContainerFailedAddUndoesTheLinkAndTheReservation(t *testing.T) {
	t.Parallel()
	var loads atomic.Int32
	e := at.New(t, bridgeMember(&loads)())
	ipam := e.HostLocal(at.Subnet)
	ipam["routes"] = []any{map[string]any{"dst": "10.200.0.0/16", "gw": "192.0.2.1"}}
	c := e.NewContainer()
	_, err := e.Invoke(skel.CmdAdd, c.ID, c.NS.Path, e.Config(map[string]any{"ipam": ipam}))
	require.ErrorContains(t, err, "192.0.2.1")
	e.AssertNothingLeft(t, c)
}

func TestInContainerCreateFailingAfterTheLinkRemovesIt(t *testing.T) {
	t.Parallel()
	var loads atomic.Int32
	e := at.New(t, bridgeMember(&loads)())
	c := e.NewContainer()
	_, err := e.Invoke(skel.CmdAdd, c.ID, c.NS.Path, e.Config(map[string]any{"failCreate": true}))
	require.ErrorContains(t, err, "set up: failed")
	e.AssertNothingLeft(t, c)
}

func TestInvalidConfigIsRefusedBeforeAnythingIsMade(t *testing.T) {
	t.Parallel()
	var loads atomic.Int32
	e := at.New(t, bridgeMember(&loads)())
	bad := e.Config(map[string]any{"invalid": true})
	c := e.NewContainer()
	_, err := e.Invoke(skel.CmdAdd, c.ID, c.NS.Path, bad)
	pt.RequireRefused(t, err, cnierror.CodeInvalidConfig, "invalid")
	_, err = e.Invoke(skel.CmdStatus, "", "", bad)
	pt.RequireRefused(t, err, cnierror.CodeInvalidConfig, "invalid")
	e.AssertNothingLeft(t, c)
}

// TestOnMasterCompletesTheChildForAddOnly: Chained runs for ADD (here it names the
// master, which the Env's host could not find by default route) and not for CHECK,
// which verifies the child hangs off a master.
func TestOnMasterCompletesTheChildForAddOnly(t *testing.T) {
	t.Parallel()
	var loads, chained atomic.Int32
	macvlan := onelink.Plugin(onelink.Member[conf]{Name: "onmaster", About: "test", Load: load(&loads),
		Link: onelink.OnMaster[conf]{
			Child: func(conf) attachment.Child {
				return attachment.Child{Kind: "macvlan", Make: func(m *attachment.Master) netlink.Link {
					return &netlink.Macvlan{LinkAttrs: attachment.ChildAttrs(m, 0), Mode: netlink.MACVLAN_MODE_BRIDGE}
				}}
			},
			Chained: func(_ *skel.Request, _ conf, c attachment.Child) (attachment.Child, error) {
				chained.Add(1)
				c.Master = at.Master
				return c, nil
			},
			Verify: func(c conf, l netlink.Link) error {
				if c.Wrong {
					return fmt.Errorf("is a %s, config says otherwise", l.Type())
				}
				return nil
			},
		}})
	e := at.New(t, macvlan)
	cfg := e.Config(nil)
	c := e.Add(cfg)
	assert.IsType(t, &netlink.Macvlan{}, at.LinkOf[*netlink.Macvlan](t, c))
	require.NoError(t, e.Check(c, cfg))
	assert.ErrorContains(t, e.Check(c, pt.WithKeys(t, cfg, map[string]any{"wrong": true})), "is a macvlan, config says otherwise")
	assert.EqualValues(t, 1, chained.Load(), "only ADD runs Chained")
	require.NoError(t, e.Del(c, cfg))
	e.AssertNothingLeft(t, c)
}
