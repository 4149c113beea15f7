package dhcp

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cnikit/cni/internal/ipam/dhcp/dhcpconf"
	"github.com/cnikit/cni/internal/ipam/dhcp/wire"
)

// statusTimeout bounds the call to the daemon.
const statusTimeout = 10 * time.Second

// statusMain runs `dhcp status [-socketpath P] [-prometheus]`: the daemon's counters
// (leases held, acquired, released, renewed, failed; DHCPv4 and DHCPv6 together), asked
// over its socket.
func statusMain(args, _ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dhcp status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socketpath", dhcpconf.DefaultSocketPath, "the dhcp daemon's socket")
	prom := fs.Bool("prometheus", false, "print the Prometheus text format (metrics cni_dhcp_*)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "dhcp status: unexpected arguments %q\n", fs.Args())
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	var c wire.Counters
	if err := wire.Call(ctx, *socket, "DHCP.Counters", &wire.Empty{}, &c); err != nil {
		if wire.IsUnknownMethod(err) {
			err = fmt.Errorf("%w (a reference daemon, which keeps no counters?)", err)
		}
		fmt.Fprintf(stderr, "dhcp status: %v\n", err)
		return 1
	}
	if *prom {
		io.WriteString(stdout, prometheus(&c))
		return 0
	}
	fmt.Fprintf(stdout, "dhcp daemon at %s, counting since %s\n", *socket, c.Since.Local().Format(time.RFC3339))
	for _, f := range fields(&c) {
		fmt.Fprintf(stdout, "%-20s %d\n", f.label, f.value)
	}
	return 0
}

type field struct {
	label, metric, help string
	value               int64
}

func fields(c *wire.Counters) []field {
	return []field{
		{"leases held", "cni_dhcp_leases_held", "Leases the dhcp daemon holds.", c.Held},
		{"allocations", "cni_dhcp_allocations_total", "Leases acquired for an ADD.", c.Allocations},
		{"allocation failures", "cni_dhcp_allocation_failures_total", "Leases an ADD asked for and did not get.", c.AllocationFailures},
		{"releases", "cni_dhcp_releases_total", "Leases given back.", c.Releases},
		{"renewals", "cni_dhcp_renewals_total", "Renewals and rebinds that extended the lease.", c.Renewals},
		{"renewal failures", "cni_dhcp_renewal_failures_total", "Renewals and rebinds that were refused or got no answer.", c.RenewalFailures},
		{"expirations", "cni_dhcp_expirations_total", "Leases that ran out.", c.Expirations},
	}
}

func prometheus(c *wire.Counters) string {
	var b strings.Builder
	for _, f := range fields(c) {
		kind := "counter"
		if !strings.HasSuffix(f.metric, "_total") {
			kind = "gauge"
		}
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n%s %d\n", f.metric, f.help, f.metric, kind, f.metric, f.value)
	}
	fmt.Fprintf(&b, "# HELP cni_dhcp_start_time_seconds When the daemon started counting.\n# TYPE cni_dhcp_start_time_seconds gauge\ncni_dhcp_start_time_seconds %d\n", c.Since.Unix())
	return b.String()
}
