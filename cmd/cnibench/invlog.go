package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cnikit/cni/internal/core/timing"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// invlogArm is one way of running an exec'd ADD: a build, with the invocation log off
// or on, in a host namespace and container of its own.
type invlogArm struct {
	label string
	dir   string // plugin dir: bridge, host-local and loopback linked to the build
	log   string // the log file, "" for the log off
	host  *testns.NS
	ctr   *testns.NS
	tmp   string
}

// invlog measures what the invocation log costs an exec'd ADD (issue 25): this build
// with the log off against -base (the log must cost nothing when off), and with the log
// on at level info against off. The arms take turns operation by operation, in an order
// that rotates every round, and each figure is the median of the paired differences, as
// for the start-up comparison. Two ADDs: loopback (little more than a process start) and
// bridge+host-local (each followed by its DEL, untimed, so every round starts alike).
func (b *bench) invlog() error {
	var arms []*invlogArm
	defer func() {
		for _, a := range arms {
			a.close()
		}
	}()
	builds := []struct{ label, bin string }{{"this", b.bin}}
	if b.base != "" {
		builds = append(builds, struct{ label, bin string }{"-base", b.base})
	}
	// arms[0] is this build with the log off, arms[1] with it on, arms[2] -base off.
	for _, build := range builds {
		for _, on := range []bool{false, true} {
			if on && build.bin == b.base {
				continue // -base may predate the log
			}
			a, err := newInvlogArm(build.bin, build.label, on)
			if err != nil {
				return err
			}
			arms = append(arms, a)
		}
	}
	n := b.iterations(200)
	for _, op := range []struct {
		name string
		run  func(a *invlogArm) (time.Duration, error)
	}{{"loopback ADD", (*invlogArm).loopback}, {"bridge+host-local ADD", (*invlogArm).bridge}} {
		d := make([][]time.Duration, len(arms))
		for i := range n + 5 {
			for k := range arms {
				j := (k + i) % len(arms)
				t, err := op.run(arms[j])
				if err != nil {
					return fmt.Errorf("%s, %s: %w", op.name, arms[j].label, err)
				}
				if i >= 5 { // warm-up rounds are not counted
					d[j] = append(d[j], t)
				}
			}
		}
		for j, a := range arms {
			b.record("invlog", fmt.Sprintf("%s exec'd, %s", op.name, a.label), timing.MedianMs(d[j]), "ms", fmt.Sprintf("%d rounds", n))
		}
		b.record("invlog", op.name+": log on (info) minus off, paired median", pairedMs(d[1], d[0]), "ms", "")
		b.target("<= 0.3 ms")
		if len(arms) > 2 {
			b.record("invlog", op.name+": log off minus -base, paired median", pairedMs(d[0], d[2]), "ms", "")
			b.target("within noise")
		}
	}
	return nil
}

// pairedMs is the median of the round-by-round differences x[i]-y[i], in ms.
func pairedMs(x, y []time.Duration) float64 {
	diff := make([]time.Duration, len(x))
	for i := range x {
		diff[i] = x[i] - y[i]
	}
	return timing.MedianMs(diff)
}

func newInvlogArm(bin, build string, on bool) (*invlogArm, error) {
	a := &invlogArm{label: build + ", log off"}
	var err error
	if a.dir, err = linkDir(bin, "bridge", "host-local", "loopback"); err != nil {
		return nil, err
	}
	if a.tmp, err = os.MkdirTemp("", "cnibench-invlog-"); err != nil {
		a.close()
		return nil, err
	}
	if on {
		a.label, a.log = build+", log on (info)", filepath.Join(a.tmp, "cni.log")
	}
	if a.host, err = testns.Create(); err != nil {
		a.close()
		return nil, err
	}
	if a.ctr, err = testns.Create(); err != nil {
		a.close()
		return nil, err
	}
	return a, nil
}

// conf is the plugin config, with the log object when the arm logs.
func (a *invlogArm) conf(body string) []byte {
	if a.log != "" {
		body += fmt.Sprintf(`,"log":{"file":%q,"level":"info","maxSizeMB":5}`, a.log)
	}
	return []byte(`{"cniVersion":"1.1.0","name":"logbench",` + body + `}`)
}

func (a *invlogArm) args(cmd string) skel.Args {
	return skel.Args{Command: cmd, ContainerID: "logbench1", Netns: a.ctr.Path, IfName: "eth0", Path: []string{a.dir},
		CNIArgs: "IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=logbench-0"}
}

func (a *invlogArm) loopback() (time.Duration, error) {
	start := time.Now()
	err := runPlugin(filepath.Join(a.dir, "loopback"), a.args("ADD"), a.conf(`"type":"loopback"`))
	return time.Since(start), err
}

func (a *invlogArm) bridge() (time.Duration, error) {
	conf := a.conf(fmt.Sprintf(`"type":"bridge","bridge":"logbr0","isGateway":true,
		"ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.96.0.0/24"}]]}`, filepath.Join(a.tmp, "ipam")))
	var d time.Duration
	err := a.host.Do(func() error {
		start := time.Now()
		if err := runPlugin(filepath.Join(a.dir, "bridge"), a.args("ADD"), conf); err != nil {
			return err
		}
		d = time.Since(start)
		return runPlugin(filepath.Join(a.dir, "bridge"), a.args("DEL"), conf)
	})
	return d, err
}

func (a *invlogArm) close() {
	if a.ctr != nil {
		a.ctr.Close()
	}
	if a.host != nil {
		a.host.Close()
	}
	os.RemoveAll(a.dir)
	if a.tmp != "" {
		os.RemoveAll(a.tmp)
	}
}
