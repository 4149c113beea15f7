package main

// sections lists what one run measures, in order.
func (b *bench) sections() []section {
	return []section{
		{"startup", b.startup},
		{"size", b.size},
		{"rss", b.rss},
		{"host-local", b.hostLocal},
		{"chain", b.chainPerPod},
		{"chainplugin", b.chainPlugin},
		{"portmap", b.portmap},
		{"firewall", b.firewall},
		{"macvlan", b.macvlan},
		{"host-device", b.hostDevice},
		{"concurrency", b.concurrency},
		{"flannel", b.flannel},
		{"containerd", b.containerd},
		{"invlog", b.invlog},
	}
}
