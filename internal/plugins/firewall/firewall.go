// Package firewall is the firewall plugin: a chained plugin that lets the container's
// addresses through the host's forwarding firewall, with iptables rules, nftables rules
// or firewalld zone sources, and optionally isolates bridges from each other
// (ingressPolicy).
//
// The iptables backend keeps the reference layout (filter table, both families):
// FORWARD's first rule jumps to CNI-FORWARD, whose first rule jumps to the operator's
// admin chain (CNI-ADMIN), followed per container address by `-d <ip>/32 -m conntrack
// --ctstate RELATED,ESTABLISHED -j ACCEPT` and `-s <ip>/32 -j ACCEPT`. Unlike the
// reference, each of those two rules also carries the comment `name: "<network>" id:
// "<containerID>"`, so DEL (without prevResult, or with the netns gone) and GC find an
// attachment's rules from its network and container ID alone; the chains and jumps that
// tooling looks for are unchanged. The reference's own rules of a container it let
// through, which name nothing but the address, are accepted by CHECK and removed by DEL
// from prevResult's addresses (adopt.go). Like the reference masquerade rules, the key is
// network + container: two interfaces of one container on one network share it. The
// admin chain is never flushed and CNI-FORWARD is never flushed wholesale, so rules an
// operator put there survive every ADD and DEL. One ADD, DEL or GC is one
// iptables-restore per family, and reads only CNI-FORWARD (and the isolation chains) and
// what FORWARD holds of its jumps (iptables -C), never the whole filter table.
//
// The nftables backend (nftables.go) has the same meaning in a table of its own, table
// inet cni_firewall, over netlink: a forward base chain jumps to the isolation chain,
// to the admin chain, then accepts replies to and everything from the addresses in its
// sets, where each attachment's addresses are elements commented with the attachment.
//
// The firewalld backend binds each address (/32, /128) as a source to a zone over
// D-Bus. firewalld cannot say which sources belong to a container, so its DEL needs the
// prevResult: without one the sources stay until firewalld reloads (they are runtime
// state only). GC cleans iptables and nftables rules only.
//
// With backend unset, firewalld is chosen when it owns its D-Bus name on the system bus
// ($DBUS_SYSTEM_BUS_ADDRESS or /run/dbus/system_bus_socket; a missing bus socket answers
// at once), otherwise the node's rule backend (netfilter.Detect: iptables where the host
// keeps its rules there, else nftables). DEL and GC clean both rule backends. The backend
// an attachment's first ADD chose stays its own: its rules are the record (record.go),
// which CHECK and a repeated ADD find. CHECK also fails when the host's own firewall
// drops by policy what those rules accept (netfilter.ForwardDrop): a pod that cannot
// forward does not pass it.
package firewall

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/rollback"
	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/host/owner"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Plugin returns the firewall plugin's registry entry.
func Plugin() *skel.Plugin {
	return &skel.Plugin{
		Name:     "firewall",
		About:    "lets container addresses through the host firewall (iptables, nftables or firewalld), optional bridge isolation",
		Versions: version.From("0.4.0"),
		Add:      add,
		Del:      del,
		Check:    check,
		GC:       gc,
		Repair:   repair,
	}
}

var errNotChained = cnierror.New(cnierror.CodeInvalidConfig, "prevResult: firewall must be called as a chained plugin")

// systemBus is the bus address the invocation's environment names.
func systemBus(req *skel.Request) string {
	for _, kv := range req.Args.Env {
		if v, ok := strings.CutPrefix(kv, "DBUS_SYSTEM_BUS_ADDRESS="); ok && v != "" {
			return v
		}
	}
	return DefaultSystemBus
}

// backend resolves the backend: iptables where its tools are installed (else nftables,
// as netfilter's rule says), and when unset firewalld if it is on the bus, else the
// node's rule backend.
func backend(req *skel.Request, conf *Config) string {
	switch {
	case conf.Backend == BackendIPTables:
		return string(netfilter.Runnable(netfilter.IPTables))
	case conf.Backend != "":
		return conf.Backend
	case usesFirewalld(req, conf):
		return BackendFirewalld
	}
	return string(netfilter.Detect())
}

// usesFirewalld reports whether the backend is firewalld: named, or unset with
// firewalld on the bus. It is all DEL needs to know (it cleans both rule backends
// whatever the node's), so DEL never detects the rule backend.
func usesFirewalld(req *skel.Request, conf *Config) bool {
	switch conf.Backend {
	case BackendFirewalld:
		return true
	case "":
		return firewalldRunning(req.Context(), systemBus(req))
	}
	return false
}

// bridgeName is the host-side interface the ingress policy is keyed on: the first
// interface outside any sandbox in prevResult (the bridge plugin lists its bridge
// first, which is the reference's interfaces[0]), or, when prevResult lists none, the
// one the kernel shows (hostInterface). The reference takes interfaces[0] whatever it
// is, so for a result that lists only the container's interface (Cilium's) it polices
// the container's interface name on the host: "eth0", which may well be the host's
// uplink. Ours polices the container's bridge.
func bridgeName(req *skel.Request, conf *Config) (string, error) {
	if conf.IngressPolicy == PolicyOpen {
		return "", nil
	}
	name, err := listedBridge(req.PrevResult)
	if name != "" || err != nil {
		return name, err
	}
	name, err = hostInterface(req.Args.Netns, req.Args.IfName)
	if cnierror.Code(err) == cnierror.CodeUnknownContainer {
		return "", err
	}
	if err != nil {
		return "", cnierror.Newf(cnierror.CodeInvalidConfig,
			"ingressPolicy: %q needs the host interface (the bridge): prevResult.interfaces lists none, and %v", conf.IngressPolicy, err)
	}
	return name, nil
}

// listedBridge is the first interface outside any sandbox in prev, "" if there is none.
func listedBridge(prev *result.Result) (string, error) {
	for n, i := range prev.Interfaces {
		if i.Sandbox == "" && i.Name != "" {
			// The name is another plugin's output and ends up in iptables rules.
			return i.Name, skel.ValidateIfNameField(fmt.Sprintf("prevResult.interfaces[%d].name", n), i.Name)
		}
	}
	return "", nil
}

// hostInterface is the host interface the container interface ifName hangs off: the
// bridge its veth's host end is a port of, or that host end itself when it is no
// bridge's port (a routed veth, as Calico's and Cilium's are).
func hostInterface(netnsPath, ifName string) (string, error) {
	host, cont, err := link.OpenPair(context.Background(), netnsPath) // a lookup: no step to record
	if err != nil {
		return "", err
	}
	defer host.Close()
	defer cont.Close()
	veth, err := link.HostPeer(host, cont, ifName)
	if err != nil {
		return "", err
	}
	master := veth.Attrs().MasterIndex
	if master == 0 {
		return veth.Attrs().Name, nil
	}
	br, err := host.Handle().LinkByIndex(master)
	if err != nil {
		return "", fmt.Errorf("master of %q: %w", veth.Attrs().Name, err)
	}
	if _, ok := br.(*netlink.Bridge); !ok {
		return "", fmt.Errorf("host veth %q is a port of %s %q, not of a bridge", veth.Attrs().Name, br.Type(), br.Attrs().Name)
	}
	return br.Attrs().Name, nil
}

func attachmentOf(req *skel.Request) attachment {
	return attachment{network: req.Net.Name, containerID: req.Args.ContainerID}
}

// loadChained is the head of ADD, CHECK and REPAIR: the config, the prevResult they
// work from (the plugin is chained) and the bridge the ingress policy is keyed on.
func loadChained(req *skel.Request) (*Config, string, error) {
	conf, err := loadConfig(req)
	if err != nil {
		return nil, "", err
	}
	if req.PrevResult == nil {
		return nil, "", errNotChained
	}
	bridge, err := bridgeName(req, conf)
	return conf, bridge, err
}

func add(req *skel.Request) (*result.Result, error) {
	conf, bridge, err := loadChained(req)
	if err != nil {
		return nil, err
	}
	if err := bridgedTrafficIsFiltered(conf.IngressPolicy); err != nil {
		return nil, err
	}
	if err := install(req, conf, bridge); err != nil {
		return nil, err
	}
	return req.PrevResult.Clone(), nil
}

// addBackend is the backend of an ADD: where the attachment already is (a repeated ADD,
// `cni repair`), else the one the config and netfilter's rule give. An attachment thus
// stays in the backend its first ADD chose, whatever the host's firewall became since.
// Only the other backend is looked in: where the rule picks iptables, nftables (a
// lookup by key per address), so that an iptables node's ADD execs nothing more.
func addBackend(req *skel.Request, conf *Config, ips []netip.Addr) string {
	be := backend(req, conf)
	switch be {
	case BackendNFTables:
		if held, ok := RecordedBackend(req.Context(), req.Net.Name, req.Args.ContainerID, ips); ok {
			return string(held)
		}
	case BackendIPTables:
		if newNFTLayout().holds(attachmentOf(req), ips) {
			return BackendNFTables
		}
	}
	return be
}

// install lets prevResult's addresses through in the backend the attachment is in, or
// for a new one the chosen backend, undoing its own part on failure; run again, it
// leaves the same rules (ADD, REPAIR).
func install(req *skel.Request, conf *Config, bridge string) (err error) {
	ips := req.PrevResult.Addrs()
	switch addBackend(req, conf, ips) {
	case BackendFirewalld:
		return firewalldAdd(req, conf, ips, bridge)
	case BackendNFTables:
		return steps.Begin(req.Context(), steps.Firewall).Done(nftAdd(conf, attachmentOf(req), ips, bridge))
	}
	var undo rollback.Stack
	defer undo.OnError(&err)
	return iptAdd(req.Context(), conf, attachmentOf(req), ips, bridge, undo.Push)
}

// firewalldAdd binds the addresses to the zone and installs the ingress policy, in the
// node's rule backend (the reference always uses iptables for it). The connection stays
// open until a failure's rollback has run.
func firewalldAdd(req *skel.Request, conf *Config, ips []netip.Addr, bridge string) (err error) {
	fw, err := dialFirewalld(req.Context(), systemBus(req))
	if err != nil {
		return cnierror.Newf(cnierror.CodeTryAgainLater, "firewalld: %v", err)
	}
	defer fw.Close()
	var undo rollback.Stack
	defer undo.OnError(&err)
	if err := fw.addSources(req.Context(), conf.Zone, ips, undo.Push); err != nil {
		return err
	}
	if netfilter.Detect() == netfilter.NFTables {
		return steps.Begin(req.Context(), steps.Firewall).Done(nftIsolation(conf, bridge))
	}
	return iptIsolation(req.Context(), conf, ips, bridge)
}

// del removes the attachment's iptables and nftables rules whatever the backend (a node
// that switched backend is left clean), with the reference's rules of prevResult's
// addresses, and its firewalld sources when the backend is
// firewalld and prevResult names them. A bus that is not there means firewalld has no
// runtime sources to remove. The rules are found by network and container alone, so a
// config that does not validate (any more) still gets them removed: an invalid config
// could add nothing, and must not keep an attachment undeletable.
func del(req *skel.Request) error {
	errs := []error{iptDel(req.Context(), attachmentOf(req), req.PrevResult.Addrs()),
		steps.Begin(req.Context(), steps.Firewall).Done(nftDel(attachmentOf(req)))}
	conf, err := loadConfig(req)
	if err != nil {
		fmt.Fprintf(req.Stderr, "firewall: DEL: config not usable, only the iptables and nftables rules were looked for: %v\n", err)
		return errors.Join(errs...)
	}
	if ips := req.PrevResult.Addrs(); len(ips) > 0 && usesFirewalld(req, conf) {
		fw, err := dialFirewalld(req.Context(), systemBus(req))
		if err != nil {
			fmt.Fprintf(req.Stderr, "firewall: DEL: firewalld not reachable, no sources to remove: %v\n", err)
		} else {
			defer fw.Close()
			for _, ip := range ips {
				errs = append(errs, fw.removeSource(req.Context(), conf.Zone, hostPrefix(ip)))
			}
		}
	}
	return errors.Join(errs...)
}

func check(req *skel.Request) error {
	conf, bridge, err := loadChained(req)
	if err != nil {
		return err
	}
	held, err := verify(req, conf, bridge)
	if err != nil || held == "" {
		return err
	}
	return checkForwarding(held, req.PrevResult.Addrs())
}

// verify checks that prevResult's addresses are let through by the rules in the backend
// that holds them (or as the reference left them), and returns that backend ("" for
// firewalld). Whether the host's own firewall lets the traffic reach them is CHECK's
// further question, which no repair of ours can answer (firewalld's zones answer it).
func verify(req *skel.Request, conf *Config, bridge string) (netfilter.Backend, error) {
	ips := req.PrevResult.Addrs()
	be := backend(req, conf)
	if be == BackendFirewalld {
		return "", checkFirewalld(req, conf, ips, bridge)
	}
	return checkRules(req, conf, be, ips, bridge)
}

// checkRules verifies the attachment's rules in the backend that holds them, which it
// returns: the one the rule picks now (be), or, when that holds nothing of the
// attachment, the other, where its ADD put it before the host's firewall changed
// (adopt.go).
func checkRules(req *skel.Request, conf *Config, be string, ips []netip.Addr, bridge string) (netfilter.Backend, error) {
	if be == BackendNFTables {
		err := steps.Begin(req.Context(), steps.Firewall).Done(nftCheck(conf, attachmentOf(req), ips, bridge))
		if !errors.Is(err, errAbsent) {
			return netfilter.NFTables, err
		}
		return netfilter.IPTables, checkAdopted(req.Context(), conf, attachmentOf(req), ips, bridge, err)
	}
	err := iptCheck(req.Context(), conf, attachmentOf(req), ips, bridge)
	if !errors.Is(err, errAbsent) {
		return netfilter.IPTables, err
	}
	return netfilter.NFTables, checkInNFTables(req.Context(), conf, attachmentOf(req), ips, bridge, err)
}

// checkFirewalld verifies the zone's sources and the ingress policy of the firewalld
// backend. firewalld owns the host's forwarding there: its zones decide what passes.
func checkFirewalld(req *skel.Request, conf *Config, ips []netip.Addr, bridge string) error {
	fw, err := dialFirewalld(req.Context(), systemBus(req))
	if err != nil {
		return fmt.Errorf("firewalld: %w", err)
	}
	defer fw.Close()
	if err := fw.checkSources(req.Context(), conf.Zone, ips); err != nil {
		return err
	}
	if netfilter.Detect() == netfilter.NFTables {
		return steps.Begin(req.Context(), steps.Firewall).Done(nftCheckIsolation(conf, bridge))
	}
	return iptCheckIsolation(req.Context(), conf, ips, bridge)
}

// gc removes the iptables and nftables rules of this network's containers that are not
// among the valid attachments. Like DEL it needs only the network name, so the rest of
// the config is not validated.
func gc(req *skel.Request) error {
	var ids []string
	for _, a := range req.ValidAttachments {
		ids = append(ids, a.ContainerID)
	}
	return errors.Join(iptGC(req.Context(), req.Net.Name, owner.NewSet(ids...)),
		steps.Begin(req.Context(), steps.Firewall).Done(nftGC(req.Net.Name, ids)))
}
