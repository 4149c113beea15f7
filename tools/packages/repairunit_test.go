package packages_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/tools/internal/cnibuild"
	"github.com/cnikit/cni/tools/packages"
)

// firewallUnits are the units whose start, restart or reload takes the pods' rules
// away (Debian's and RHEL's): cni-repair.service must follow each.
var firewallUnits = []string{"nftables.service", "firewalld.service", "iptables.service", "ip6tables.service", "netfilter-persistent.service"}

// TestTheRepairUnitRunsAfterEveryFirewallReload reads deploy/systemd/cni-repair.service:
// a oneshot `cni repair` that stays active, ordered after the firewall units, pulled in
// by their start (the package's .wants links), restarted with them (PartOf) and reloaded
// with them (ExecReload, ReloadPropagatedFrom).
func TestTheRepairUnitRunsAfterEveryFirewallReload(t *testing.T) {
	unit := readUnit(t, "cni-repair.service")
	assert.Equal(t, []string{"oneshot"}, unit["Type"])
	assert.Equal(t, []string{"yes"}, unit["RemainAfterExit"], "active after its run, so that PartOf and ReloadPropagatedFrom reach it")
	assert.Equal(t, []string{"/opt/cni/bin/cni repair"}, unit["ExecStart"])
	assert.Equal(t, []string{"/opt/cni/bin/cni repair"}, unit["ExecReload"])
	for _, key := range []string{"After", "PartOf", "ReloadPropagatedFrom", "X-StaticWantedBy", "WantedBy"} {
		assert.ElementsMatch(t, firewallUnits, strings.Fields(strings.Join(unit[key], " ")), key)
	}
	watch := readUnit(t, "cni-repair-watch.service")
	assert.Equal(t, []string{"/opt/cni/bin/cni repair --watch"}, watch["ExecStart"])
	assert.Empty(t, watch["X-StaticWantedBy"], "the resident watcher is opt-in")
}

// TestTheDebEnablesTheRepairUnitWithoutAScript builds the .deb from deploy/systemd: both
// repair units are shipped, cni-repair.service is linked into each firewall unit's
// .wants directory (enabled with no maintainer script), and nothing else is but the GC
// timer, into timers.target's.
func TestTheDebEnablesTheRepairUnitWithoutAScript(t *testing.T) {
	deb, _ := shippedDeb(t)
	contents := tool(t, "dpkg-deb", "-c", deb)
	for _, u := range []string{"cni-repair.service", "cni-repair-watch.service", "cni-dhcp.service", "cni-dhcp.socket"} {
		assert.Contains(t, contents, " ./usr/lib/systemd/system/"+u+"\n")
	}
	var links []string
	for _, m := range regexp.MustCompile(`\./usr/lib/systemd/system/(\S+\.wants/\S+) -> (\S+)`).FindAllStringSubmatch(contents, -1) {
		links = append(links, m[1]+" -> "+m[2])
	}
	want := []string{"timers.target.wants/cni-gc.timer -> ../cni-gc.timer"}
	for _, by := range firewallUnits {
		want = append(want, by+".wants/cni-repair.service -> ../cni-repair.service")
	}
	assert.ElementsMatch(t, want, links)
	assert.NotContains(t, tool(t, "dpkg-deb", "-I", deb), "postinst", "no maintainer script")
}

func TestStaticWantedByRefusesWhatIsNoUnitName(t *testing.T) {
	unit := filepath.Join(t.TempDir(), "x.service")
	require.NoError(t, os.WriteFile(unit, []byte("[Unit]\nX-StaticWantedBy=nftables.service ../../etc/passwd\n"), 0o644))
	_, err := packages.StaticWantedBy(unit)
	assert.ErrorContains(t, err, `X-StaticWantedBy: "../../etc/passwd" is no unit name`)
}

// readUnit parses a unit of deploy/systemd into its keys' values (continuation lines
// and sections are not needed for these units).
func readUnit(t *testing.T, name string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cnibuild.Root(), "deploy", "systemd", name))
	require.NoError(t, err)
	out := map[string][]string{}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && !strings.HasPrefix(line, "#") {
			out[k] = append(out[k], v)
		}
	}
	return out
}

// shippedDeb builds the .deb with the units of deploy/systemd, as make packages does,
// and returns it with the options it was built from.
func shippedDeb(t *testing.T) (string, packages.Options) {
	t.Helper()
	o := options(t)
	units, err := packages.Units(filepath.Join(cnibuild.Root(), "deploy", "systemd"))
	require.NoError(t, err)
	o.Units = units
	deb, err := packages.Write(o, "deb", t.TempDir())
	require.NoError(t, err)
	return deb, o
}
