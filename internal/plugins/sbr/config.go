package sbr

import (
	"cmp"
	"encoding/json"
	"net/netip"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/plugins/lockedns"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Config is the plugin's part of the network config: the reference's keys.
type Config struct {
	// Table, when set, is the routing table every address's rule points at; the
	// plugin then adds only the rules and leaves that table's routes to the user.
	Table *int64 `json:"table,omitempty"`
	// Gateways are default gateways, at most one per family; an entry wins over the
	// gateway prevResult gives an address of its family.
	Gateways []string `json:"gateways,omitempty"`
	// AddSourceHints puts the interface's subnet routes back into the main table with
	// the interface's address as preferred source once they were moved out.
	AddSourceHints bool `json:"addSourceHints,omitempty"`
}

// Plan is the validated config.
type Plan struct {
	// Table is the configured table, 0 when each address gets a free one.
	Table          int
	GW4, GW6       netip.Addr
	AddSourceHints bool
}

func plan(req *skel.Request) (*Plan, error) {
	conf, err := skel.LoadConfig[Config](req)
	if err != nil {
		return nil, err
	}
	p := &Plan{AddSourceHints: conf.AddSourceHints}
	if t := conf.Table; t != nil {
		if err := lockedns.CheckTable(*t); err != nil {
			return nil, err
		}
		p.Table = int(*t)
	}
	for _, s := range conf.Gateways {
		gw, err := netip.ParseAddr(s)
		if err != nil || gw.Zone() != "" {
			return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "gateways: %q is not an IP address", s)
		}
		gw = gw.Unmap()
		slot := &p.GW6
		if gw.Is4() {
			slot = &p.GW4
		}
		if slot.IsValid() {
			return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "gateways: two gateways of one family (%s, %s)", *slot, gw)
		}
		*slot = gw
	}
	return p, nil
}

// tableForDel reads the one key DEL needs, table: 0 when none is set (each address got
// a table of the plugin's choice). A table ADD refuses (not a number, reserved, out of
// range) holds no rule of this plugin's: DEL deletes nothing, where it used to fail for
// ever with ADD's refusal, or worse, take a reserved table for "none set".
func tableForDel(req *skel.Request) (int, error) {
	var c struct {
		Table json.RawMessage `json:"table"`
	}
	_ = json.Unmarshal(req.Config, &c) // the skel decoded it as an object already
	if len(c.Table) == 0 || string(c.Table) == "null" {
		return 0, nil
	}
	var t int64
	if err := json.Unmarshal(c.Table, &t); err != nil {
		return 0, cnierror.Newf(cnierror.CodeInvalidConfig, "table: %s is not a routing table number", c.Table)
	}
	return int(t), lockedns.CheckTable(t)
}

// gateway is the default gateway for ip's table: the configured one of its family,
// else prevResult's.
func (p *Plan) gateway(ip result.IPConfig) netip.Addr {
	gw := p.GW6
	if ip.Address.Addr().Is4() {
		gw = p.GW4
	}
	return cmp.Or(gw, ip.Gateway)
}
