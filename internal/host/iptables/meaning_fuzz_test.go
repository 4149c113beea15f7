package iptables

import "testing"

// FuzzRuleMeaning feeds the rule reader rule text as iptables-save prints it, or as an
// operator may write it: it must not panic, a rule is the same as itself and as its own
// rendering read back, and asking for an option never panics.
func FuzzRuleMeaning(f *testing.F) {
	for _, seed := range []string{
		`-s 10.1.0.5/32 -m comment --comment "name: \"n\" id: \"c\"" -j CNI-abc`,
		`! -d 224.0.0.0/4 -m comment --comment "name: \"n\" id: \"c\"" -j MASQUERADE`,
		`-p tcp -m comment --comment "dnat name: \"n\" id: \"c\"" -m multiport --dports 80,81 -j CNI-DN-x`,
		`-d ! 10.0.0.1 -p 6 --dport http -j DNAT --to-destination [fd00::1]:80`,
		`-m mark --mark 8192/8192 -j MARK --set-mark 0x2000 -m conntrack --ctstate established,related`,
		`--src 10.0.0.0/255.255.255.0 -i br+ ! -o br0 -m set --match-set s src -g X`,
		`-p tcp --tcp-flags SYN,ACK SYN ! --syn -j RETURN`,
		`-`, `!`, `-j`, `--comment`, `-s 1.2.3.4/99`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args, err := split(line)
		if err != nil {
			return
		}
		r := Rule(args)
		if !r.Same(r) {
			t.Fatalf("%q is not the same as itself", line)
		}
		back, err := split(r.String())
		if err != nil {
			t.Fatalf("rendering of %q does not read back: %v", line, err)
		}
		if !r.Same(Rule(back)) {
			t.Fatalf("%q read back from %q means something else", r.String(), line)
		}
		for _, opt := range []string{"-s", "-d", "-p", "--dport", "--dports", "--comment", "--to-destination", "-j"} {
			r.Value(opt)
		}
		r.Target()
	})
}
