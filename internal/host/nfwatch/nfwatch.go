// Package nfwatch tells when something removed nf_tables state of the network namespace:
// it listens to the kernel's nftables notifications (the NFNLGRP_NFTABLES multicast
// group of NETLINK_NETFILTER), which `nft flush ruleset`, `systemctl restart nftables`,
// a firewalld reload and iptables-nft's changes all raise, and reports the ones that
// delete something (a table, chain, rule, set, set element, object, flowtable). Only a
// deletion can take a pod's rules away; additions, the bulk of a busy node's traffic
// (kube-proxy's syncs, every pod's ADD), are read and dropped. Legacy iptables
// (x_tables) raises no event at all: a caller polls there (netfilter.LegacyTablesInUse).
package nfwatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Watcher is a subscription to the nftables notifications of one network namespace.
type Watcher struct {
	conn *netlink.Conn
}

// Open subscribes in the calling thread's network namespace. It needs CAP_NET_ADMIN
// (the kernel refuses the group otherwise).
func Open() (*Watcher, error) {
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{Groups: 1 << (unix.NFNLGRP_NFTABLES - 1)})
	if err != nil {
		return nil, fmt.Errorf("nftables notifications: %w", err)
	}
	return &Watcher{conn: conn}, nil
}

// Close ends the subscription; a Removals running returns.
func (w *Watcher) Close() error { return w.conn.Close() }

// Removals sends on out once per batch of notifications that holds a deletion, until
// ctx ends or the socket fails; a send that would block is dropped (one pending signal
// says it all). A receive buffer overrun (ENOBUFS: more notifications than the socket
// holds, as a flush of a big ruleset raises) counts as a deletion, since what was lost
// may have been one.
func (w *Watcher) Removals(ctx context.Context, out chan<- struct{}) error {
	stop := context.AfterFunc(ctx, func() { w.conn.Close() })
	defer stop()
	for {
		msgs, err := w.conn.Receive()
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, unix.ENOBUFS) {
			notify(out)
			continue
		}
		if err != nil {
			return fmt.Errorf("nftables notifications: %w", err)
		}
		for _, m := range msgs {
			if Removes(uint16(m.Header.Type)) {
				notify(out)
				break
			}
		}
	}
}

func notify(out chan<- struct{}) {
	select {
	case out <- struct{}{}:
	default:
	}
}

// Removes reports whether a netlink message type is an nftables notification of a
// deletion: subsystem NFNL_SUBSYS_NFTABLES in the high byte, NFT_MSG_DEL* in the low.
func Removes(typ uint16) bool {
	if typ>>8 != unix.NFNL_SUBSYS_NFTABLES {
		return false
	}
	switch typ & 0xff {
	case unix.NFT_MSG_DELTABLE, unix.NFT_MSG_DELCHAIN, unix.NFT_MSG_DELRULE, unix.NFT_MSG_DELSET,
		unix.NFT_MSG_DELSETELEM, unix.NFT_MSG_DELOBJ, unix.NFT_MSG_DELFLOWTABLE:
		return true
	}
	return false
}
