package netfilter

import "github.com/google/nftables"

// RulesOfTable counts the messages of the rule dump ChainsWithRules reads.
func RulesOfTable(family nftables.TableFamily, table string) (n int, err error) {
	err = dumpRules(family, table, func(string) { n++ })
	return n, err
}
