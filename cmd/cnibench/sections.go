package main

// sections lists what one run measures, in order.
func (b *bench) sections() []section {
	return []section{
		{"startup", b.startup},
		{"size", b.size},
		{"rss", b.rss},
		{"host-local", b.hostLocal},
		{"chain", b.chainPerPod},
		{"floor", b.floor},
		{"portmap", b.portmap},
		{"firewall", b.firewall},
		{"macvlan", b.macvlan},
		{"host-device", b.hostDevice},
		{"scale", b.scale},
		{"node", b.node},
		{"parallel", b.parallel},
		{"embed", b.embed},
		{"flannel", b.flannel},
		{"containerd", b.containerd},
		{"crio", b.crio},
		{"cluster", b.cluster},
		{"invlog", b.invlog},
	}
}
