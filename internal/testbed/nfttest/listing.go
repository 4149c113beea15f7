package nfttest

import (
	"strings"
	"testing"

	"github.com/google/nftables"

	"github.com/cnikit/cni/internal/testbed/testns"
)

// ListedRules are the rule lines of `nft list chain` output, trimmed (a base chain's
// type line first): what a test compares with the nft text the code's comments promise.
func ListedRules(listing string) []string {
	var rules []string
	for _, line := range strings.Split(listing, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasSuffix(line, "{") || line == "}" {
			continue
		}
		rules = append(rules, line)
	}
	return rules
}

// Apply runs fn with a netlink connection in the namespace and sends what it queued as
// one transaction: a test's own rules, or damage done by hand, without the nft binary.
// The test fails if either fails.
func Apply(t testing.TB, n *testns.NS, fn func(c *nftables.Conn) error) {
	t.Helper()
	n.Run(t, func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		if err := fn(c); err != nil {
			return err
		}
		return c.Flush()
	})
}
