package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// FlannelConfig is the network config flanneld reads from etcd: the pod network, a /24
// per node, the vxlan backend.
func FlannelConfig() string {
	data, _ := json.Marshal(map[string]any{
		"Network": PodNetwork.String(), "SubnetLen": 24, "Backend": map[string]string{"Type": "vxlan"},
	})
	return string(data)
}

// Etcd is the lab's etcd, on a host of its own on the underlay.
type Etcd struct {
	host *Host
	cmd  *exec.Cmd
	log  *os.File
	// Endpoint is its client URL.
	Endpoint string
}

func (l *Lab) startEtcd() (_ *Etcd, err error) {
	e := &Etcd{Endpoint: "http://" + etcdAddr.String() + ":2379"}
	if e.host, err = l.newHost("etcd", etcdAddr); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	if err := mkdirs(l.path("etcd")); err != nil {
		return nil, err
	}
	if e.log, err = os.Create(l.path("etcd.log")); err != nil {
		return nil, err
	}
	peer := "http://127.0.0.1:2380"
	e.cmd = exec.Command("nsenter", "--target", strconv.Itoa(e.host.Pid()), "--net", "--", l.o.Etcd,
		"--name", "lab", "--data-dir", l.path("etcd", "data"),
		"--listen-client-urls", e.Endpoint, "--advertise-client-urls", e.Endpoint,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "lab="+peer)
	e.cmd.Stdout, e.cmd.Stderr = e.log, e.log
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := e.cmd.Start(); err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := e.Ctl("put", "/coreos.com/network/config", FlannelConfig())
		if err == nil {
			return e, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("etcd did not take flannel's config in 30 s: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Ctl runs etcdctl (v3 API) against the lab's etcd.
func (e *Etcd) Ctl(args ...string) (string, error) {
	return e.host.Run("etcdctl", append([]string{"--endpoints", e.Endpoint, "--dial-timeout", "2s"}, args...)...)
}

// Close kills etcd and its host.
func (e *Etcd) Close() {
	if e.cmd != nil && e.cmd.Process != nil {
		e.cmd.Process.Kill()
		e.cmd.Wait()
	}
	if e.log != nil {
		e.log.Close()
	}
	e.host.Close()
}
