package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/host/nftexpr"
)

// The floor is what the kernel makes one pod of the standard chain cost: the objects
// the chain leaves (a veth pair, its container end named eth0 and up with its address,
// the host end a port of the bridge, a masquerade rule, a port-mapping rule, a tbf on
// the host end, an ifb with the redirect to it and its own tbf, the loopback up), made
// and removed with the fewest netlink messages one process can send, through sockets
// bound to each namespace, without CNI, JSON, files or locks. The interface indexes are
// chosen by the floor (the kernel takes them at creation), so nothing is looked up.
//
// ADD, 11 messages: loopback up; one RTM_NEWLINK making the veth with its host end up
// in the bridge and its peer as eth0 in the container (a peer cannot be created up: it
// would open before it has its peer, ENOTCONN); eth0 up; the address; one nftables
// transaction for the masquerade element; one for the port mapping's chains, rules and
// elements; the ifb (one RTM_NEWLINK, up, alias); tbf on the veth, the ingress qdisc,
// the redirect filter, tbf on the ifb. CHECK, 8: the host end, eth0, its addresses, lo,
// the two root qdiscs, the two map elements. DEL, 5: lo down, the two links deleted at
// once (their RCU waits overlap, as our DEL overlaps them), one nftables transaction
// per plugin.
type floorDriver struct {
	host     netns.NsHandle
	hostSock *nl.SocketHandle
	h        *netlink.Handle // bound to the host
	nft      *nftables.Conn
	bridge   int
	tbl      *nftables.Table
	ports    *nftables.Set
	masq     *nftables.Set
	pods     *nftables.Set
	clock    *pluginClock
	mu       sync.Mutex
	cont     map[string]*floorPod
	addrs    int // addresses handed out
}

// floorPod is what the floor keeps of one pod between its commands.
type floorPod struct {
	// ifName and peer are the container end's name and index: resident pods share
	// namespaces (eth0, eth1, …), whose lo is index 1.
	ifName string
	peer   int
	ns     netns.NsHandle
	sock   *nl.SocketHandle
	h      *netlink.Handle
	addr   netip.Addr
	port   uint16
	i      int
}

const (
	floorSubnet   = "10.89.0.0/16"
	floorGateway  = "10.89.0.1/16"
	floorPeerIdx  = 2 // eth0 in a namespace of its own, after lo
	floorHostBase = 100_000
	floorIfbBase  = 300_000
)

func floorHostIdx(i int) int { return floorHostBase + i }
func floorIfbIdx(i int) int  { return floorIfbBase + i }

// newFloorDriver makes the host's standing objects (the bridge with the gateway
// address, the nftables table with its hooks and maps), as the standard chain's first
// pod leaves them. It runs on the scenario's host thread.
func newFloorDriver(clock *pluginClock) (*floorDriver, error) {
	d := &floorDriver{clock: clock, cont: map[string]*floorPod{}}
	var err error
	if d.host, err = netns.Get(); err != nil {
		return nil, err
	}
	if d.h, err = netlink.NewHandleAt(d.host, unix.NETLINK_ROUTE); err != nil {
		return nil, err
	}
	if d.hostSock, err = socketIn(d.host); err != nil {
		return nil, err
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "cnifloor0", Flags: net.FlagUp}}
	if err := d.h.LinkAdd(br); err != nil {
		return nil, fmt.Errorf("floor bridge: %w", err)
	}
	l, err := d.h.LinkByName("cnifloor0")
	if err != nil {
		return nil, err
	}
	d.bridge = l.Attrs().Index
	gw, _ := netlink.ParseAddr(floorGateway)
	if err := d.h.AddrAdd(l, gw); err != nil {
		return nil, err
	}
	if d.nft, err = nftables.New(nftables.WithNetNSFd(int(d.host)), nftables.AsLasting()); err != nil {
		return nil, err
	}
	return d, d.base()
}

// base is the table every pod's rules hang off:
//
//	table ip cnifloor {
//	  map ports { type inet_proto . inet_service : verdict }   # host port → dn-<pod>
//	  map masq  { type ipv4_addr : verdict }                   # hairpin: container → mq-<pod>
//	  map pods  { type ipv4_addr : verdict }                   # bridge masquerade: container → out
//	  chain out { ip daddr != 10.89.0.0/16 masquerade }
//	  chain prerouting  { type nat hook prerouting priority dstnat; fib daddr type local meta l4proto . th dport vmap @ports }
//	  chain postrouting { type nat hook postrouting priority srcnat; ct status dnat ip daddr vmap @masq; ip saddr vmap @pods }
//	}
func (d *floorDriver) base() error {
	d.tbl = d.nft.AddTable(&nftables.Table{Name: "cnifloor", Family: nftables.TableFamilyIPv4})
	d.ports = &nftables.Set{Table: d.tbl, Name: "ports", IsMap: true, Concatenation: true,
		KeyType:  nftables.MustConcatSetType(nftables.TypeInetProto, nftables.TypeInetService),
		DataType: nftables.TypeVerdict}
	d.masq = &nftables.Set{Table: d.tbl, Name: "masq", IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict}
	d.pods = &nftables.Set{Table: d.tbl, Name: "pods", IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict}
	for _, s := range []*nftables.Set{d.ports, d.masq, d.pods} {
		if err := d.nft.AddSet(s, nil); err != nil {
			return err
		}
	}
	out := d.nft.AddChain(&nftables.Chain{Name: "out", Table: d.tbl})
	d.nft.AddRule(&nftables.Rule{Table: d.tbl, Chain: out, Exprs: nftexpr.Rule(nftexpr.NotIn(nftexpr.Daddr(false), netip.MustParsePrefix(floorSubnet)), nftexpr.Masquerade())})
	pre := d.nft.AddChain(&nftables.Chain{Name: "prerouting", Table: d.tbl, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest})
	d.nft.AddRule(&nftables.Rule{Table: d.tbl, Chain: pre, Exprs: nftexpr.Rule(nftexpr.FibDaddrTypeLocal(), nftexpr.VMap(d.ports, nftexpr.L4Proto, nftexpr.THDport))})
	post := d.nft.AddChain(&nftables.Chain{Name: "postrouting", Table: d.tbl, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
	d.nft.AddRule(&nftables.Rule{Table: d.tbl, Chain: post, Exprs: nftexpr.Rule(nftexpr.CtStatusDNAT(), nftexpr.VMap(d.masq, nftexpr.Daddr(false)))})
	d.nft.AddRule(&nftables.Rule{Table: d.tbl, Chain: post, Exprs: nftexpr.VMap(d.pods, nftexpr.Saddr(false))})
	return d.nft.Flush()
}

func socketIn(ns netns.NsHandle) (*nl.SocketHandle, error) {
	cur, err := netns.Get()
	if err != nil {
		return nil, err
	}
	defer cur.Close()
	s, err := nl.GetNetlinkSocketAt(ns, cur, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, err
	}
	return &nl.SocketHandle{Socket: s}, nil
}

// step times one part of an operation under the plugin whose work it is.
func (d *floorDriver) step(plugin, op string, fn func() error) error {
	start := time.Now()
	err := fn()
	d.clock.note(plugin, op, time.Since(start))
	if err != nil {
		return fmt.Errorf("floor %s %s: %w", plugin, op, err)
	}
	return nil
}

func (d *floorDriver) add(_ context.Context, p pod) (netip.Addr, error) {
	fd, err := netns.GetFromPath(p.ns.Path)
	if err != nil {
		return netip.Addr{}, err
	}
	var n int
	if _, err := fmt.Sscanf(p.ifName, "eth%d", &n); err != nil {
		return netip.Addr{}, fmt.Errorf("floor: interface name %q", p.ifName)
	}
	fp := &floorPod{ns: fd, i: p.i, ifName: p.ifName, peer: floorPeerIdx + n, port: uint16(20000 + p.i%40000)}
	d.mu.Lock()
	d.addrs++
	fp.addr = netip.AddrFrom4([4]byte{10, 89, byte((d.addrs + 2) >> 8), byte(d.addrs + 2)})
	d.mu.Unlock()
	if fp.sock, err = socketIn(fd); err != nil {
		return netip.Addr{}, err
	}
	if fp.h, err = netlink.NewHandleAt(fd, unix.NETLINK_ROUTE); err != nil {
		return netip.Addr{}, err
	}
	d.mu.Lock()
	d.cont[p.id] = fp
	d.mu.Unlock()
	err = errors.Join(
		d.step("loopback", "ADD", func() error { return fp.h.LinkSetUp(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: 1}}) }),
		d.step("bridge", "ADD", func() error {
			if err := d.newVeth(fp); err != nil {
				return err
			}
			eth := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: fp.peer}}
			if err := fp.h.LinkSetUp(eth); err != nil {
				return err
			}
			addr := &netlink.Addr{IPNet: &net.IPNet{IP: fp.addr.AsSlice(), Mask: net.CIDRMask(16, 32)}}
			if err := fp.h.AddrAdd(eth, addr); err != nil {
				return err
			}
			return d.transaction(func() error {
				return d.nft.SetAddElements(d.pods, []nftables.SetElement{{Key: fp.addr.AsSlice(), VerdictData: nftexpr.GotoTo("out")}})
			})
		}),
		d.step("portmap", "ADD", func() error { return d.transaction(func() error { return d.addMapping(fp) }) }),
		d.step("bandwidth", "ADD", func() error { return d.shape(fp) }),
	)
	return fp.addr, err
}

func (d *floorDriver) transaction(plan func() error) error {
	if err := plan(); err != nil {
		return err
	}
	return d.nft.Flush()
}

// newLinkUp starts the RTM_NEWLINK that creates a link of kind up, under the index
// chosen (the kernel takes it), and returns the request and its IFLA_LINKINFO.
func newLinkUp(kind, name string, index int) (*nl.NetlinkRequest, *nl.RtAttr) {
	req := nl.NewNetlinkRequest(unix.RTM_NEWLINK, unix.NLM_F_CREATE|unix.NLM_F_EXCL|unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index, msg.Flags, msg.Change = int32(index), unix.IFF_UP, unix.IFF_UP
	req.AddData(msg)
	req.AddData(nl.NewRtAttr(unix.IFLA_IFNAME, nl.ZeroTerminated(name)))
	info := nl.NewRtAttr(unix.IFLA_LINKINFO, nil)
	info.AddRtAttr(nl.IFLA_INFO_KIND, nl.NonZeroTerminated(kind))
	return req, info
}

// newVeth sends the one RTM_NEWLINK that makes the pair: the host end (index chosen,
// up, in the bridge) and its peer (eth0, index chosen, in the container).
func (d *floorDriver) newVeth(fp *floorPod) error {
	req, info := newLinkUp("veth", fmt.Sprintf("vfl%d", fp.i), floorHostIdx(fp.i))
	req.AddData(nl.NewRtAttr(unix.IFLA_MASTER, nl.Uint32Attr(uint32(d.bridge))))
	peer := info.AddRtAttr(nl.IFLA_INFO_DATA, nil).AddRtAttr(nl.VETH_INFO_PEER, nil)
	pm := nl.NewIfInfomsgChild(peer, unix.AF_UNSPEC)
	pm.Index = int32(fp.peer)
	peer.AddRtAttr(unix.IFLA_IFNAME, nl.ZeroTerminated(fp.ifName))
	peer.AddRtAttr(unix.IFLA_NET_NS_FD, nl.Uint32Attr(uint32(fp.ns)))
	req.AddData(info)
	return d.send(req)
}

func (d *floorDriver) send(req *nl.NetlinkRequest) error {
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: d.hostSock}
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

// addMapping queues the port mapping: `chain dn-<i> { tcp dport P dnat to A:80 }`,
// `chain mq-<i> { ip saddr 10.89.0.0/16 masquerade }` and their elements.
func (d *floorDriver) addMapping(fp *floorPod) error {
	dn := d.nft.AddChain(&nftables.Chain{Name: fmt.Sprintf("dn-%d", fp.i), Table: d.tbl})
	d.nft.AddRule(&nftables.Rule{Table: d.tbl, Chain: dn, Exprs: nftexpr.Rule(nftexpr.ProtoDPortIs(unix.IPPROTO_TCP, fp.port), nftexpr.DNAT(netip.AddrPortFrom(fp.addr, 80)))})
	mq := d.nft.AddChain(&nftables.Chain{Name: fmt.Sprintf("mq-%d", fp.i), Table: d.tbl})
	d.nft.AddRule(&nftables.Rule{Table: d.tbl, Chain: mq, Exprs: nftexpr.Rule(nftexpr.SaddrIn(netip.MustParsePrefix(floorSubnet)), nftexpr.Masquerade())})
	if err := d.nft.SetAddElements(d.ports, []nftables.SetElement{{Key: nftexpr.Key([]byte{unix.IPPROTO_TCP}, nftexpr.Port(fp.port)), VerdictData: nftexpr.JumpTo(dn.Name)}}); err != nil {
		return err
	}
	return d.nft.SetAddElements(d.masq, []nftables.SetElement{{Key: fp.addr.AsSlice(), VerdictData: nftexpr.JumpTo(mq.Name)}})
}

// shape is bandwidth's part: tbf on the host end (the container's ingress), an ifb
// (one RTM_NEWLINK: index, up, alias) with the host end's ingress redirected to it and
// a tbf of its own (the container's egress).
func (d *floorDriver) shape(fp *floorPod) error {
	req, info := newLinkUp("ifb", fmt.Sprintf("bfl%d", fp.i), floorIfbIdx(fp.i))
	req.AddData(nl.NewRtAttr(unix.IFLA_IFALIAS, []byte(fmt.Sprintf("floor pod %d", fp.i))))
	req.AddData(info)
	if err := d.send(req); err != nil {
		return fmt.Errorf("ifb: %w", err)
	}
	veth, ifb := floorHostIdx(fp.i), floorIfbIdx(fp.i)
	tbf := func(idx int) *netlink.Tbf {
		return &netlink.Tbf{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
			Rate: 125_000_000, Buffer: 1_000_000, Limit: 1_250_000}
	}
	ingress := &netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: veth, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_INGRESS}}
	redirect := &netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: veth, Parent: ingress.Handle, Priority: 1, Protocol: syscall.ETH_P_ALL},
		ClassId:     netlink.MakeHandle(1, 1),
		Actions:     []netlink.Action{netlink.NewMirredAction(ifb)},
	}
	return errors.Join(d.h.QdiscAdd(tbf(veth)), d.h.QdiscAdd(ingress), d.h.FilterAdd(redirect), d.h.QdiscAdd(tbf(ifb)))
}

func (d *floorDriver) pod(p pod) (*floorPod, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fp, ok := d.cont[p.id]
	if !ok {
		return nil, fmt.Errorf("floor: no pod %s", p.id)
	}
	return fp, nil
}

func (d *floorDriver) check(_ context.Context, p pod) error {
	fp, err := d.pod(p)
	if err != nil {
		return err
	}
	up := func(h *netlink.Handle, idx int) error {
		l, err := h.LinkByIndex(idx)
		if err == nil && l.Attrs().Flags&net.FlagUp == 0 {
			err = fmt.Errorf("%s is down", l.Attrs().Name)
		}
		return err
	}
	elem := func(s *nftables.Set, key []byte) error {
		_, err := netfilter.GetElement(nftables.TableFamilyIPv4, d.tbl.Name, s.Name, key)
		return err
	}
	return errors.Join(
		d.step("loopback", "CHECK", func() error { return up(fp.h, 1) }),
		d.step("bridge", "CHECK", func() error {
			return errors.Join(up(d.h, floorHostIdx(fp.i)), up(fp.h, fp.peer), func() error {
				_, err := fp.h.AddrList(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: fp.peer}}, netlink.FAMILY_V4)
				return err
			}())
		}),
		d.step("portmap", "CHECK", func() error {
			return errors.Join(elem(d.ports, nftexpr.Key([]byte{unix.IPPROTO_TCP}, nftexpr.Port(fp.port))), elem(d.masq, fp.addr.AsSlice()))
		}),
		d.step("bandwidth", "CHECK", func() error {
			_, err := d.h.QdiscList(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: floorHostIdx(fp.i)}})
			if err == nil {
				_, err = d.h.QdiscList(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: floorIfbIdx(fp.i)}})
			}
			return err
		}),
	)
}

func (d *floorDriver) del(_ context.Context, p pod) error {
	fp, err := d.pod(p)
	if err != nil {
		return err
	}
	defer func() {
		fp.h.Close()
		fp.sock.Close()
		fp.ns.Close()
		d.mu.Lock()
		delete(d.cont, p.id)
		d.mu.Unlock()
	}()
	// Both links' deletions start at once, so that their RCU waits overlap.
	var wg sync.WaitGroup
	var vethErr, ifbErr error
	start := time.Now()
	wg.Add(2)
	go func() {
		defer wg.Done()
		vethErr = d.h.LinkDel(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: floorHostIdx(fp.i)}})
	}()
	go func() {
		defer wg.Done()
		ifbErr = d.h.LinkDel(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: floorIfbIdx(fp.i)}})
	}()
	err = errors.Join(
		d.step("loopback", "DEL", func() error { return fp.h.LinkSetDown(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: 1}}) }),
		d.step("portmap", "DEL", func() error {
			return d.transaction(func() error {
				if err := d.nft.SetDeleteElements(d.ports, []nftables.SetElement{{Key: nftexpr.Key([]byte{unix.IPPROTO_TCP}, nftexpr.Port(fp.port))}}); err != nil {
					return err
				}
				if err := d.nft.SetDeleteElements(d.masq, []nftables.SetElement{{Key: fp.addr.AsSlice()}}); err != nil {
					return err
				}
				for _, name := range []string{fmt.Sprintf("dn-%d", fp.i), fmt.Sprintf("mq-%d", fp.i)} {
					ch := &nftables.Chain{Name: name, Table: d.tbl}
					d.nft.FlushChain(ch)
					d.nft.DelChain(ch)
				}
				return nil
			})
		}),
		d.step("bridge", "DEL", func() error {
			return d.transaction(func() error {
				return d.nft.SetDeleteElements(d.pods, []nftables.SetElement{{Key: fp.addr.AsSlice()}})
			})
		}),
	)
	wg.Wait()
	d.clock.note("links (both deletions)", "DEL", time.Since(start))
	return errors.Join(err, vethErr, ifbErr)
}

func (d *floorDriver) close() {
	if d.nft != nil {
		d.nft.CloseLasting()
	}
	if d.h != nil {
		d.h.Close()
	}
	if d.hostSock != nil {
		d.hostSock.Close()
	}
	d.host.Close()
}

// floor measures the floor beside our in-process runner and one chain exec (default
// backend, nftables here), 10 pods resident in each, taking turns operation by
// operation, with the time of each step against each plugin's share.
func (b *bench) floor() error {
	arrs := []arrangement{
		{build: b.ours(), floor: true},
		{build: b.ours(), inProcess: true, backend: "nftables"},
		{build: b.ours(), oneChain: true, backend: "nftables"},
	}
	arms, err := b.measureAt(arrs, 10, b.iterations(30))
	defer closeArms(arms)
	if err != nil {
		return err
	}
	b.recordArms("floor", arms, true)
	floor := arrs[0]
	for _, arr := range arrs[1:] {
		for _, op := range chainOps {
			f, ok1 := medianOf(arms, floor, op)
			m, ok2 := medianOf(arms, arr, op)
			if ok1 && ok2 && f > 0 {
				b.record("floor", fmt.Sprintf("%-5s %s / floor", op, arr.describe()), m/f, "ratio", "same moments")
				if arr.inProcess && op == "ADD" {
					b.target("≤ 1.3 (issue 29)")
				}
				if arr.inProcess && op == "DEL" {
					b.target("≤ 1.1 (issue 29)")
				}
			}
		}
	}
	return nil
}
