package hostlocal

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/spec/skel"
)

// TestGCOfManyReleasesExactlyTheInvalidAndLeavesTheIndexRight: GC over 500 reservations
// of 300 attachments (every third container's with a second interface, every fifth one
// id-only as reference versions before v0.8.0 wrote them, a few with garbage content),
// with the index fresh and with it unsealed by a file the reference wrote: the
// reservations of valid attachments stay, nothing else does, the index is sealed again
// and holds an entry for each attachment that kept an address and nothing else, and
// later operations agree with the directory. GC reads, removes and rewrites these a few
// at a time, so this runs under -race too.
func TestGCOfManyReleasesExactlyTheInvalidAndLeavesTheIndexRight(t *testing.T) {
	for _, fresh := range []bool{true, false} {
		t.Run(fmt.Sprintf("fresh index %v", fresh), func(t *testing.T) {
			n := newNetwork(t, obj{"subnet": "10.2.0.0/22"})
			want := map[string]string{}
			var valid []obj
			for i := range 300 {
				id := fmt.Sprintf("ctr%d", i)
				ifnames := []string{"eth0"}
				if i%3 == 0 {
					ifnames = append(ifnames, "net1")
				}
				for _, ifname := range ifnames {
					res := n.mustAdd(id, ifname)
					if i%2 == 0 {
						ip := res.IPs[0].Address.Addr().String()
						want[ip] = id + "\r\n" + ifname
						valid = append(valid, obj{"containerID": id, "ifname": ifname})
					}
				}
			}
			if !fresh {
				n.writeReference("10.2.3.200", "ref-gone\r\neth0")
				n.writeReference("10.2.3.201", "ref-kept")
				n.writeReference("10.2.3.202", "\x00garbage")
				want["10.2.3.201"] = "ref-kept"
				valid = append(valid, obj{"containerID": "ref-kept", "ifname": "eth7"})
			}
			require.Len(t, n.reservations(), 400+3*btoi(!fresh))

			n.extra = obj{"cni.dev/valid-attachments": valid}
			_, stderr, err := n.invoke(skel.CmdGC, "", "", "")
			require.NoError(t, err, stderr)
			assert.Equal(t, want, n.reservations())

			st, err := openStore(n.dataDir, n.name, false, io.Discard)
			require.NoError(t, err)
			assert.True(t, st.fresh(), "GC sealed the index")
			st.close()
			entries, err := os.ReadDir(filepath.Join(n.dir(), indexDirName))
			require.NoError(t, err)
			var got, wantEntries []string
			for _, e := range entries {
				got = append(got, e.Name())
			}
			for _, v := range valid {
				if v["containerID"] != "ref-kept" {
					wantEntries = append(wantEntries, entryName(attachment{ID: v["containerID"].(string), IfName: v["ifname"].(string)}))
				}
			}
			if !fresh {
				wantEntries = append(wantEntries, entryName(attachment{ID: "ref-kept"}))
			}
			sort.Strings(got)
			sort.Strings(wantEntries)
			assert.Equal(t, wantEntries, got)

			n.extra = obj{}
			_, err = n.add("ctr0", "net1")
			assert.ErrorContains(t, err, "has been allocated to ctr0", "the index still gives ctr0/net1 its address")
			require.NoError(t, n.del("ctr2", "eth0"))
			require.NoError(t, n.del("ctr1", "eth0"), "a released attachment has nothing to release")
			res := n.mustAdd("ctr1", "eth0")
			_, taken := want[res.IPs[0].Address.Addr().String()]
			assert.False(t, taken, "a released attachment gets a free address")
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
