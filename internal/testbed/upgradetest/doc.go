// Package upgradetest holds the in-place upgrade tests: attachments that the reference
// plugins (containernetworking/plugins at reftest.Version, real binaries) set up are
// CHECKed, DELeted and GC'd by the cni binary's plugins, as on a node whose
// /opt/cni/bin was replaced under running pods. Each test then lists the host's
// firewall, links, qdiscs and state dirs and requires that nothing names the pod any
// more. Runtimes are played by libcni and by this module's own chain runner, both
// exec'ing plugins with CNI_* variables and stdin. It has no code of its own.
package upgradetest
