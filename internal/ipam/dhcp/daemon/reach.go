package daemon

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cnikit/cni/internal/ipam/dhcp/lease"
	"github.com/cnikit/cni/internal/ipam/dhcp/leasefile"
)

// reachability is what the daemon last heard from each network's servers, per family:
// whether its last exchange was answered, for STATUS. The daemon cannot ask a server by
// itself (it has no interface on the pods' networks), so it knows only what the leases'
// own exchanges tell it.
type reachability struct {
	mu   sync.Mutex
	last map[reachKey]contact
}

type reachKey struct {
	network string
	family  leasefile.Family
}

// contact is one network's last exchange in one family: answered or not, and when.
type contact struct {
	answered bool
	at       time.Time
	err      string
}

// note records an exchange's outcome. A refusal is an answer; an attachment that is gone
// says nothing of the server.
func (r *reachability) note(network string, f leasefile.Family, err error, refused bool) {
	if err != nil && lease.Final(err) || errors.Is(err, context.Canceled) {
		return
	}
	c := contact{answered: err == nil || refused, at: time.Now()}
	if !c.answered {
		c.err = err.Error()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last = map[reachKey]contact{}
	}
	r.last[reachKey{network, f}] = c
}

// unansweredFor is how long an unanswered exchange makes STATUS fail. A lease in
// trouble retries at least every minute and so keeps it current, while a failed ADD with
// no lease left to retry ages out: a runtime that stops sending ADDs while STATUS fails
// (a node reported not ready) must not be kept from ever trying again.
const unansweredFor = 5 * time.Minute

// unanswered returns the network's last exchange in family f when no server answered it,
// lately.
func (r *reachability) unanswered(network string, f leasefile.Family) (contact, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.last[reachKey{network, f}]
	return c, ok && !c.answered && time.Since(c.at) < unansweredFor
}
