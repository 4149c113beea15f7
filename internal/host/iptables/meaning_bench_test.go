package iptables

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkPlanAgainstABusyChain plans what a portmap ADD plans against a nat table of
// 300 attachments (600 entry rules): a delete by target and three appends, each needing
// "is this rule there" answered by meaning.
func BenchmarkPlanAgainstABusyChain(b *testing.B) {
	var listing strings.Builder
	listing.WriteString("-N CNI-HOSTPORT-DNAT\n")
	for i := range 600 {
		fmt.Fprintf(&listing, "-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment \"dnat name: \\\"net\\\" id: \\\"c%d\\\"\" -m multiport --dports %d -j CNI-DN-%021d\n", i, 10000+i, i)
	}
	want := []Rule{
		rule(`-p tcp -m comment --comment "dnat name: \"net\" id: \"new\"" -m multiport --dports 9000 -j CNI-DN-new`),
		rule(`-p udp -m comment --comment "dnat name: \"net\" id: \"new\"" -m multiport --dports 9001 -j CNI-DN-new`),
		rule(`-p sctp -m comment --comment "dnat name: \"net\" id: \"new\"" -m multiport --dports 9002 -j CNI-DN-new`),
	}
	for b.Loop() {
		tab, err := ParseRules(IPv4, "nat", listing.String())
		if err != nil {
			b.Fatal(err)
		}
		batch := NewBatch(tab)
		batch.DeleteRulesFunc("CNI-HOSTPORT-DNAT", func(r Rule) bool { return r.Target() == "CNI-DN-new" })
		for _, r := range want {
			batch.AppendRule("CNI-HOSTPORT-DNAT", r)
		}
	}
}
