package hostlocal

import (
	"strings"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/statedir"
	"github.com/cnikit/cni/internal/result"
)

// maxResolvConf bounds what is read of ipam.resolvConf; glibc reads far less.
const maxResolvConf = 1 << 20

// readResolvConf turns a resolv.conf into the result's DNS (nameserver, domain,
// search, options), as the reference does for ipam.resolvConf. No path, no DNS.
func readResolvConf(path string) (result.DNS, error) {
	var dns result.DNS
	if path == "" {
		return dns, nil
	}
	data, err := statedir.ReadPath(path, maxResolvConf)
	if err != nil {
		return dns, cnierror.Newf(cnierror.CodeInvalidConfig, "ipam.resolvConf: %v", err)
	}
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		if len(fields) < 2 || fields[0][0] == '#' || fields[0][0] == ';' {
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
	return dns, nil
}
