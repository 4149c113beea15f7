package crinode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Client is the part of kubelet's CRI client that runs pod sandboxes.
type Client struct {
	conn *grpc.ClientConn
	rt   runtimeapi.RuntimeServiceClient
	// cgroupParent is every sandbox's cgroup parent, as kubelet gives one per pod QoS
	// class; a node removes it when it closes.
	cgroupParent string
}

// DialCRI connects to a CRI socket.
func DialCRI(socket string) (*Client, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn, rt: runtimeapi.NewRuntimeServiceClient(conn)}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// timeout bounds every call, as kubelet's runtime request timeout does (2 min there).
const timeout = 2 * time.Minute

// Ready reports whether the runtime is ready, as kubelet's node readiness check asks.
func (c *Client) Ready() error { return c.condition(runtimeapi.RuntimeReady) }

// NetworkReady reports whether the CRI has loaded a network config.
func (c *Client) NetworkReady() error { return c.condition(runtimeapi.NetworkReady) }

// condition asks the runtime's status for one condition; an error says why it is not met.
func (c *Client) condition(typ string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := c.rt.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return err
	}
	for _, cond := range st.GetStatus().GetConditions() {
		if cond.Type == typ && !cond.Status {
			return fmt.Errorf("%s: %s: %s", typ, cond.Reason, cond.Message)
		}
	}
	return nil
}

// Port is one hostPort mapping of a pod, as a pod spec's container ports give it.
type Port struct {
	HostPort, ContainerPort int32
	UDP                     bool
}

// Pod is what kubelet puts into a sandbox config.
type Pod struct {
	Name, Namespace, UID string
	Ports                []Port
	// Annotations, e.g. kubernetes.io/ingress-bandwidth.
	Annotations map[string]string
	// HostNetwork runs the pod in the node's network namespace: no CNI at all.
	HostNetwork bool
}

// sandboxConfig builds the sandbox config the way kubelet's generatePodSandboxConfig
// does for these fields.
func (p Pod) sandboxConfig(cgroupParent string) *runtimeapi.PodSandboxConfig {
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:    &runtimeapi.PodSandboxMetadata{Name: p.Name, Namespace: p.Namespace, Uid: p.UID},
		Labels:      map[string]string{"io.kubernetes.pod.name": p.Name, "io.kubernetes.pod.namespace": p.Namespace, "io.kubernetes.pod.uid": p.UID},
		Annotations: p.Annotations,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: cgroupParent,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER},
			},
		},
	}
	if p.HostNetwork {
		// kubelet sets no hostname for a host-network pod: the node's is used.
		cfg.Linux.SecurityContext.NamespaceOptions.Network = runtimeapi.NamespaceMode_NODE
	} else {
		cfg.Hostname = p.Name
	}
	for _, port := range p.Ports {
		proto := runtimeapi.Protocol_TCP
		if port.UDP {
			proto = runtimeapi.Protocol_UDP
		}
		cfg.PortMappings = append(cfg.PortMappings, &runtimeapi.PortMapping{
			Protocol: proto, ContainerPort: port.ContainerPort, HostPort: port.HostPort,
		})
	}
	return cfg
}

// withTimeout calls a CRI method with a deadline of timeout.
func withTimeout[Req, Resp any](method func(context.Context, Req, ...grpc.CallOption) (Resp, error), req Req) (Resp, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return method(ctx, req)
}

// RunPod is RunPodSandbox; it returns the sandbox id.
func (c *Client) RunPod(p Pod) (string, error) {
	resp, err := withTimeout(c.rt.RunPodSandbox, &runtimeapi.RunPodSandboxRequest{Config: p.sandboxConfig(c.cgroupParent)})
	if err != nil {
		return "", fmt.Errorf("RunPodSandbox %s: %w", p.Name, err)
	}
	return resp.PodSandboxId, nil
}

// StopPod is StopPodSandbox.
func (c *Client) StopPod(id string) error {
	if _, err := withTimeout(c.rt.StopPodSandbox, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		return fmt.Errorf("StopPodSandbox %s: %w", id, err)
	}
	return nil
}

// RemovePod is RemovePodSandbox.
func (c *Client) RemovePod(id string) error {
	if _, err := withTimeout(c.rt.RemovePodSandbox, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		return fmt.Errorf("RemovePodSandbox %s: %w", id, err)
	}
	return nil
}

// PodStatus is what a sandbox's status says about its network and process.
type PodStatus struct {
	Ready bool
	IP    string
	// Pid is the sandbox process's PID in the node's PID namespace.
	Pid int
}

// Status is PodSandboxStatus, verbose for the sandbox's PID.
func (c *Client) Status(id string) (PodStatus, error) {
	resp, err := withTimeout(c.rt.PodSandboxStatus, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		return PodStatus{}, fmt.Errorf("PodSandboxStatus %s: %w", id, err)
	}
	st := PodStatus{Ready: resp.GetStatus().GetState() == runtimeapi.PodSandboxState_SANDBOX_READY,
		IP: resp.GetStatus().GetNetwork().GetIp()}
	var info struct {
		Pid int `json:"pid"`
	}
	if raw, ok := resp.GetInfo()["info"]; ok {
		if err := json.Unmarshal([]byte(raw), &info); err != nil {
			return PodStatus{}, fmt.Errorf("PodSandboxStatus %s: info: %w", id, err)
		}
	}
	st.Pid = info.Pid
	return st, nil
}

// Pods lists the sandbox ids the runtime knows.
func (c *Client) Pods() ([]string, error) {
	resp, err := withTimeout(c.rt.ListPodSandbox, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, s := range resp.Items {
		ids = append(ids, s.Id)
	}
	return ids, nil
}

// ErrNoPid is returned when a sandbox's status names no process.
var ErrNoPid = errors.New("sandbox status names no process")

// Network is one network config the CRI has loaded: its name and its plugins' types.
type Network struct {
	Name  string
	Types []string
}

// Networks are the network configs the CRI uses now, in order, as its verbose status
// reports them (containerd's cniconfig: go-cni's loopback network, then the conf dir's
// first max_conf_num). A test that rewrites the conf dir waits here for the reload.
func (c *Client) Networks() ([]Network, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.rt.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	if err != nil {
		return nil, err
	}
	raw, ok := st.GetInfo()["cniconfig"]
	if !ok {
		return nil, errors.New("the runtime's status has no cniconfig")
	}
	var cfg struct {
		Networks []struct {
			Config struct {
				Name    string
				Plugins []struct {
					Network struct {
						Type string `json:"type"`
					}
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return nil, fmt.Errorf("cniconfig: %w", err)
	}
	var out []Network
	for _, n := range cfg.Networks {
		net := Network{Name: n.Config.Name}
		for _, p := range n.Config.Plugins {
			net.Types = append(net.Types, p.Network.Type)
		}
		out = append(out, net)
	}
	return out, nil
}
