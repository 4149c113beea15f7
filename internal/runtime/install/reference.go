package install

// ReferenceNames are the names other installers put into a plugin directory for the
// plugins cni replaces: every Linux plugin of containernetworking/plugins v1.9.x (what
// the kubernetes-cni package and most node images ship in /opt/cni/bin), and flannel,
// which flannel-io/cni-plugin provides and flannel's own manifest copies to
// /opt/cni/bin/flannel. A foreign entry at one of these names is taken over by
// Install, kept in KeptDir, and put back by Uninstall; a foreign entry at any other
// name is refused unless Force is set.
func ReferenceNames() []string {
	return []string{
		// containernetworking/plugins v1.9.x, plugins/main
		"bridge", "dummy", "host-device", "ipvlan", "loopback", "macvlan", "ptp", "tap", "vlan",
		// plugins/ipam
		"dhcp", "host-local", "static",
		// plugins/meta
		"bandwidth", "firewall", "portmap", "sbr", "tuning", "vrf",
		// flannel-io/cni-plugin
		"flannel",
	}
}
