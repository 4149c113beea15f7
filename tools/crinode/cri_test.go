package crinode

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestSandboxConfigIsWhatKubeletSends(t *testing.T) {
	p := Pod{Name: "web", Namespace: "default", UID: "u1",
		Ports:       []Port{{HostPort: 8080, ContainerPort: 80}, {HostPort: 5353, ContainerPort: 53, UDP: true}},
		Annotations: map[string]string{"kubernetes.io/ingress-bandwidth": "1M"}}
	cfg := p.sandboxConfig("/cni-e2e-1")
	assert.Equal(t, "web", cfg.Metadata.Name)
	assert.Equal(t, "web", cfg.Hostname)
	assert.Equal(t, runtimeapi.NamespaceMode_POD, cfg.Linux.SecurityContext.NamespaceOptions.Network)
	assert.Equal(t, "/cni-e2e-1", cfg.Linux.CgroupParent, "the node's own cgroup, removed with it")
	require.Len(t, cfg.PortMappings, 2)
	assert.Equal(t, runtimeapi.Protocol_TCP, cfg.PortMappings[0].Protocol)
	assert.Equal(t, int32(8080), cfg.PortMappings[0].HostPort)
	assert.Equal(t, runtimeapi.Protocol_UDP, cfg.PortMappings[1].Protocol)
	assert.Equal(t, "1M", cfg.Annotations["kubernetes.io/ingress-bandwidth"], "the runtime turns it into runtimeConfig.bandwidth")

	host := Pod{Name: "agent", Namespace: "kube-system", UID: "u2", HostNetwork: true}.sandboxConfig("/cni-e2e-1")
	assert.Equal(t, runtimeapi.NamespaceMode_NODE, host.Linux.SecurityContext.NamespaceOptions.Network)
	assert.Empty(t, host.Hostname, "a host-network sandbox must not set a hostname")
}
