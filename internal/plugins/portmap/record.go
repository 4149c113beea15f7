package portmap

import "github.com/cnikit/cni/internal/host/netfilter"

// Where an attachment is. Its ADD chose the backend (the config, else netfilter's
// rule), and the chains it made are the record of that choice: CHECK, and `cni repair`,
// look for them rather than asking the rule again, whose answer changes when the host's
// firewall does (Docker installed after the first pods); DEL and GC remove what either
// backend holds. No file is kept beside them: a record that the chains could outlive,
// or that could outlive the chains, would be a second truth about one attachment.

// RecordedBackend tells which rule backend holds the portmap attachment of container
// containerID on network: nftables when a table cni_portmap has its dn- chain (a lookup
// by name per family), else iptables when a nat table may have its CNI-DN- chain (over
// netlink with iptables-nft; with legacy tables, whose chains only a listing shows,
// whenever such a table is in use). ok is false when neither does: nothing of the
// attachment is left (or it has no mappings), and a caller re-applying it applies the
// config and netfilter's rule, as ADD does. An nf_tables that cannot be read holds
// nothing. It reads the calling thread's network
// namespace.
func RecordedBackend(network, containerID string) (b netfilter.Backend, ok bool) {
	return recordedBackend(attachment{net: network, cid: containerID}.hash())
}

// recordedBackend is RecordedBackend of the attachment whose chains hash names. An
// nf_tables that cannot be read holds nothing of it.
func recordedBackend(hash string) (netfilter.Backend, bool) {
	if held, err := (nftBackend{}).holds(hash); err == nil && held {
		return netfilter.NFTables, true
	}
	if iptHolds(hash) {
		return netfilter.IPTables, true
	}
	return "", false
}
