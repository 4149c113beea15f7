package skeltest

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/spec/skel"
)

func TestRequestHoldsTheConfigItsSpecKeysAndCNIArgs(t *testing.T) {
	req := Request([]byte(`{"cniVersion":"1.1.0","name":"n","type":"vlan","vlanId":3}`), "K=V")
	assert.Equal(t, "n", req.Net.Name)
	assert.Equal(t, "vlan", req.Net.Type)
	assert.Equal(t, "K=V", req.Args.CNIArgs)
	assert.Contains(t, string(req.Config), "vlanId")
	assert.Empty(t, Request([]byte(`not json`), "").Net.Name, "what does not decode is left to the loader")
}

func TestRefusedTellsAcceptedFromRefusedWithTheCodesAllowed(t *testing.T) {
	assert.False(t, Refused(t, nil, nil))
	assert.True(t, Refused(t, nil, cnierror.Invalid("mtu")))
	assert.True(t, Refused(t, nil, cnierror.New(cnierror.CodeInvalidEnv, "CNI_ARGS"), cnierror.CodeInvalidConfig, cnierror.CodeInvalidEnv))
}

func TestRequireUsableMTUTakesUnsetAndTheLinkRange(t *testing.T) {
	for _, mtu := range []int{0, 68, 1500, 65535} {
		RequireUsableMTU(t, mtu)
	}
}

func TestThenRunsTheNextStepOnWhatWasLoaded(t *testing.T) {
	load := func(req *skel.Request) (string, error) { return req.Net.Name, nil }
	next := func(name string) (int, error) {
		if name == "" {
			return 0, cnierror.Invalid("name")
		}
		return len(name), nil
	}
	d, err := Then(load, next)(Request([]byte(`{"name":"abc"}`), ""))
	assert.NoError(t, err)
	assert.Equal(t, Decided[string, int]{Conf: "abc", Next: 3}, d)
	_, err = Then(load, next)(Request([]byte(`{}`), ""))
	assert.Error(t, err, "the next step's refusal is the loader's")
}
