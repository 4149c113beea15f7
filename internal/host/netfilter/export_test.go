package netfilter

import "github.com/google/nftables"

// DetectWith is Detect with options for its nf_tables connection, for the tests of
// package netfilter_test, which record what it sends (nftrecord) and read the ruleset
// with nfttest (which imports this package).
func DetectWith(opts ...nftables.ConnOption) Backend { return detect(opts...) }

// RulesOfTable counts the messages of the rule dump ChainsWithRules reads.
func RulesOfTable(family nftables.TableFamily, table string) (n int, err error) {
	err = dumpRules(family, table, func(string) { n++ })
	return n, err
}
