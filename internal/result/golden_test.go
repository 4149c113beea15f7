package result

import (
	"fmt"
	"strings"
)

// allVersions is every spec version, oldest first.
var allVersions = []string{"0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}

// The golden JSON below is compact and in the key order the reference library writes:
// struct order for 0.x, alphabetical at every level for 1.x. "%[1]s" is the version.

// sample02 is a rich 0.1.0/0.2.0 result. Its second ip4 route carries an "mtu": the
// reference shares its route type across versions, so even 0.2.0 keeps it.
const sample02 = `{"cniVersion":"%[1]s",` +
	`"ip4":{"ip":"10.1.0.5/24","gateway":"10.1.0.1","routes":[{"dst":"0.0.0.0/0","gw":"10.1.0.1"},{"dst":"192.168.0.0/16","mtu":1400}]},` +
	`"ip6":{"ip":"fd00::5/64","gateway":"fd00::1","routes":[{"dst":"::/0","gw":"fd00::1"}]},` +
	`"dns":{"nameservers":["10.1.0.1"],"domain":"example.org","search":["example.org"],"options":["ndots:2"]}}`

// sample04 is a rich 0.3.x/0.4.0 result: two IPv4 addresses, extended route fields and
// an IPv4 route listed after an IPv6 one.
const sample04 = `{"cniVersion":"%[1]s",` +
	`"interfaces":[{"name":"cni0","mac":"00:11:22:33:44:55"},{"name":"eth0","mac":"66:77:88:99:aa:bb","sandbox":"/var/run/netns/test"}],` +
	`"ips":[{"version":"4","interface":1,"address":"10.1.0.5/24","gateway":"10.1.0.1"},` +
	`{"version":"4","interface":1,"address":"10.2.0.5/16"},` +
	`{"version":"6","interface":1,"address":"fd00::5/64","gateway":"fd00::1"}],` +
	`"routes":[{"dst":"0.0.0.0/0","gw":"10.1.0.1"},{"dst":"fd01::/64","gw":"fd00::1","mtu":1400,"table":100},{"dst":"10.10.0.0/16","advmss":1360,"scope":253}],` +
	`"dns":{"nameservers":["10.1.0.1"],"domain":"example.org","search":["example.org"],"options":["ndots:2"]}}`

// sample1 is a rich 1.0.0/1.1.0 result with no DNS, the 1.1 interface fields, explicit
// zero interface index, table and scope, and the IPv6 address listed first.
const sample1 = `{"cniVersion":"%[1]s",` +
	`"interfaces":[{"mac":"00:11:22:33:44:55","mtu":9000,"name":"br0","pciID":"0000:00:1f.6","socketPath":"/run/vhost.sock"},` +
	`{"mac":"66:77:88:99:aa:bb","mtu":1500,"name":"eth0","sandbox":"/var/run/netns/test"}],` +
	`"ips":[{"address":"fd00::5/64","gateway":"fd00::1","interface":1},{"address":"10.1.0.5/24","interface":0},{"address":"fd00::6/64"}],` +
	`"routes":[{"dst":"::/0","gw":"fd00::1"},{"advmss":1360,"dst":"0.0.0.0/0","gw":"10.1.0.1","mtu":1400,"priority":10,"scope":0,"table":0}]}`

// converted maps (source shape, target shape) to the expected JSON of Convert. Each
// entry is reasoned from the reference converters, not copied from output:
var converted = map[[2]shape]string{
	{shape02, shape02}: sample02,
	// ip4 then ip6, routes merged ip4-first with all their fields, "version" from family.
	{shape02, shape04}: `{"cniVersion":"%[1]s",` +
		`"ips":[{"version":"4","address":"10.1.0.5/24","gateway":"10.1.0.1"},{"version":"6","address":"fd00::5/64","gateway":"fd00::1"}],` +
		`"routes":[{"dst":"0.0.0.0/0","gw":"10.1.0.1"},{"dst":"192.168.0.0/16","mtu":1400},{"dst":"::/0","gw":"fd00::1"}],` +
		`"dns":{"nameservers":["10.1.0.1"],"domain":"example.org","search":["example.org"],"options":["ndots:2"]}}`,
	// as 0.4.0, without "version", alphabetical keys, dns first.
	{shape02, shape1}: `{"cniVersion":"%[1]s",` +
		`"dns":{"domain":"example.org","nameservers":["10.1.0.1"],"options":["ndots:2"],"search":["example.org"]},` +
		`"ips":[{"address":"10.1.0.5/24","gateway":"10.1.0.1"},{"address":"fd00::5/64","gateway":"fd00::1"}],` +
		`"routes":[{"dst":"0.0.0.0/0","gw":"10.1.0.1"},{"dst":"192.168.0.0/16","mtu":1400},{"dst":"::/0","gw":"fd00::1"}]}`,
	// first v4 (10.1.0.5, not 10.2.0.5) and first v6; routes by family, dst/gw only.
	{shape04, shape02}: `{"cniVersion":"%[1]s",` +
		`"ip4":{"ip":"10.1.0.5/24","gateway":"10.1.0.1","routes":[{"dst":"0.0.0.0/0","gw":"10.1.0.1"},{"dst":"10.10.0.0/16"}]},` +
		`"ip6":{"ip":"fd00::5/64","gateway":"fd00::1","routes":[{"dst":"fd01::/64","gw":"fd00::1"}]},` +
		`"dns":{"nameservers":["10.1.0.1"],"domain":"example.org","search":["example.org"],"options":["ndots:2"]}}`,
	{shape04, shape04}: sample04,
	// everything carried; only the shape changes.
	{shape04, shape1}: `{"cniVersion":"%[1]s",` +
		`"dns":{"domain":"example.org","nameservers":["10.1.0.1"],"options":["ndots:2"],"search":["example.org"]},` +
		`"interfaces":[{"mac":"00:11:22:33:44:55","name":"cni0"},{"mac":"66:77:88:99:aa:bb","name":"eth0","sandbox":"/var/run/netns/test"}],` +
		`"ips":[{"address":"10.1.0.5/24","gateway":"10.1.0.1","interface":1},{"address":"10.2.0.5/16","interface":1},{"address":"fd00::5/64","gateway":"fd00::1","interface":1}],` +
		`"routes":[{"dst":"0.0.0.0/0","gw":"10.1.0.1"},{"dst":"fd01::/64","gw":"fd00::1","mtu":1400,"table":100},{"advmss":1360,"dst":"10.10.0.0/16","scope":253}]}`,
	// first v4 is 10.1.0.5 (no gateway), first v6 fd00::5; ip4 is written first even
	// though v6 came first; the extended fields of the default route are gone.
	{shape1, shape02}: `{"cniVersion":"%[1]s",` +
		`"ip4":{"ip":"10.1.0.5/24","routes":[{"dst":"0.0.0.0/0","gw":"10.1.0.1"}]},` +
		`"ip6":{"ip":"fd00::5/64","gateway":"fd00::1","routes":[{"dst":"::/0","gw":"fd00::1"}]},` +
		`"dns":{}}`,
	// interface mtu/socketPath/pciID dropped, route fields kept, version recomputed,
	// empty dns written as {}.
	{shape1, shape04}: `{"cniVersion":"%[1]s",` +
		`"interfaces":[{"name":"br0","mac":"00:11:22:33:44:55"},{"name":"eth0","mac":"66:77:88:99:aa:bb","sandbox":"/var/run/netns/test"}],` +
		`"ips":[{"version":"6","interface":1,"address":"fd00::5/64","gateway":"fd00::1"},{"version":"4","interface":0,"address":"10.1.0.5/24"},{"version":"6","address":"fd00::6/64"}],` +
		`"routes":[{"dst":"::/0","gw":"fd00::1"},{"dst":"0.0.0.0/0","gw":"10.1.0.1","mtu":1400,"advmss":1360,"priority":10,"table":0,"scope":0}],` +
		`"dns":{}}`,
	{shape1, shape1}: sample1,
}

// sampleFor returns the rich sample of version v.
func sampleFor(v string) string {
	sh, _ := shapeOf(v)
	return golden(map[shape]string{shape02: sample02, shape04: sample04, shape1: sample1}[sh], v)
}

func golden(tmpl, v string) string {
	s := fmt.Sprintf(tmpl, v)
	if strings.Contains(s, "%!") {
		panic("bad golden template: " + s)
	}
	return s
}
