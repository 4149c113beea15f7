//go:build crio

package crioe2e

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTwentyPodsAtOnce: twenty pods run and are deleted at once, as kubelet's pod
// workers do, half of them shaped, each with a host port CRI-O maps: each CHECKed,
// each with an address of its own, each reached, nothing left.
func TestTwentyPodsAtOnce(t *testing.T) {
	for _, side := range sides {
		t.Run(side.name, func(t *testing.T) {
			n := startCRIO(t, side, crioList, nil)
			peer, base := withPeer(t, n)

			pods := make([]*pod, 20)
			for i := range pods {
				bw := ""
				if i%2 == 0 {
					bw = "50M"
				}
				pods[i] = newPod(fmt.Sprintf("many-%d", i), int32(9000+i), bw)
			}
			parallel(t, pods, func(p *pod) error {
				id, err := n.CRI.RunPod(p.Pod)
				p.id = id
				return err
			})
			ips := map[string]string{}
			for _, p := range pods {
				p.serve(t, n)
				ip := p.ip(t, n)
				assert.Empty(t, ips[ip], "%s and %s share %s", ips[ip], p.Name, ip)
				ips[ip] = p.Name
				p.reach(t, peer)
			}
			parallel(t, pods, func(p *pod) error {
				if err := n.CRI.StopPod(p.id); err != nil {
					return err
				}
				return n.CRI.RemovePod(p.id)
			})
			requireNothingLeft(t, n, base)
		})
	}
}

// parallel runs fn for every pod at once.
func parallel(t *testing.T, pods []*pod, fn func(*pod) error) {
	t.Helper()
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(p)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}
