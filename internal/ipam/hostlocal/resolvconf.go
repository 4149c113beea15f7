package hostlocal

import (
	"bufio"
	"os"
	"strings"

	"github.com/cnikit/cni/internal/cnierror"
	"github.com/cnikit/cni/internal/result"
)

// readResolvConf turns a resolv.conf into the result's DNS (nameserver, domain,
// search, options), as the reference does for ipam.resolvConf. No path, no DNS.
func readResolvConf(path string) (result.DNS, error) {
	var dns result.DNS
	if path == "" {
		return dns, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return dns, cnierror.Newf(cnierror.CodeInvalidConfig, "ipam.resolvConf: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "nameserver":
			dns.Nameservers = append(dns.Nameservers, fields[1])
		case "domain":
			dns.Domain = fields[1]
		case "search":
			dns.Search = append(dns.Search, fields[1:]...)
		case "options":
			dns.Options = append(dns.Options, fields[1:]...)
		}
	}
	if err := sc.Err(); err != nil {
		return dns, cnierror.Newf(cnierror.CodeIO, "ipam.resolvConf: %v", err)
	}
	return dns, nil
}
