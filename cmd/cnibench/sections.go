package main

// sections lists what one run measures, in order.
func (b *bench) sections() []section {
	return []section{
		{"startup", b.startup},
		{"size", b.size},
	}
}
