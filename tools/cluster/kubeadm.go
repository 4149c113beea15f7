package cluster

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ContainerdDefaultConfName and ContainerdDefaultConf are the network config that
// containerd's own CNI setup writes (its containerd-net network: bridge cni0 with
// host-local on 10.88.0.0/16 and 2001:4860:4860::/64, portmap), found on many nodes
// that kubeadm joined.
const (
	ContainerdDefaultConfName = "10-containerd-net.conflist"
	ContainerdDefaultConf     = `{
  "cniVersion": "1.0.0",
  "name": "containerd-net",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": true,
      "promiscMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [
          [{"subnet": "10.88.0.0/16"}],
          [{"subnet": "2001:4860:4860::/64"}]
        ],
        "routes": [
          {"dst": "0.0.0.0/0"},
          {"dst": "::/0"}
        ]
      }
    },
    {
      "type": "portmap",
      "capabilities": {"portMappings": true}
    }
  ]
}
`
)

// KubeadmNode returns a Prepare that lays a node's disk out as kubeadm's packages leave
// it: every reference plugin of refDir copied into /opt/cni/bin as the kubernetes-cni
// package installs them (regular files, mode 0755), and containerd's default network
// config in /etc/cni/net.d.
func KubeadmNode(refDir string) func(*Node) error {
	return func(n *Node) error {
		entries, err := os.ReadDir(refDir)
		if err != nil {
			return fmt.Errorf("reference plugins: %w", err)
		}
		for _, e := range entries {
			if e.Type().IsRegular() {
				if err := copyFile(filepath.Join(refDir, e.Name()), filepath.Join(n.Disk(BinDir), e.Name()), 0o755); err != nil {
					return err
				}
			}
		}
		return os.WriteFile(filepath.Join(n.Disk(ConfDir), ContainerdDefaultConfName), []byte(ContainerdDefaultConf), 0o644)
	}
}

// ReferenceFlannelConfName and ReferenceFlannelConf are what flannel's own manifest
// (kube-flannel.yml) installs as the node's network: flannel and portmap at cniVersion
// 0.3.1, with bandwidth added as k3s chains it, so that a pod's bandwidth annotations
// are honoured as ours honour them.
const (
	ReferenceFlannelConfName = "10-flannel.conflist"
	ReferenceFlannelConf     = `{
  "name": "cbr0",
  "cniVersion": "0.3.1",
  "plugins": [
    {
      "type": "flannel",
      "delegate": {
        "hairpinMode": true,
        "isDefaultGateway": true
      }
    },
    {
      "type": "portmap",
      "capabilities": {
        "portMappings": true
      }
    },
    {
      "type": "bandwidth",
      "capabilities": {
        "bandwidth": true
      }
    }
  ]
}
`
)

// InstallReferenceFlannel does on n what flannel's manifest does on a kubeadm node with
// the reference plugins: its flannel plugin binary (flannelBin) copied into
// /opt/cni/bin and its network config written. The operator removes the runtime's
// default network, which would sort first and win.
func (n *Node) InstallReferenceFlannel(flannelBin string) error {
	if err := copyFile(flannelBin, filepath.Join(n.Disk(BinDir), "flannel"), 0o755); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(n.Disk(ConfDir), ContainerdDefaultConfName)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return writeFileAtomic(filepath.Join(n.Disk(ConfDir), ReferenceFlannelConfName), []byte(ReferenceFlannelConf))
}

// writeFileAtomic writes data beside p and renames it over p: the runtime watching the
// directory never reads half a config.
func writeFileAtomic(p string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
