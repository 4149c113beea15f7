package inproc_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cnikit/cni/internal/core/background"
	"github.com/cnikit/cni/internal/host/ns"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/pkg/inproc"
)

// panicker is an in-process test plugin that panics where its config says ("panic":
// "callback", "netns": on a thread moved into the container's namespace, "background":
// in the work it leaves running) for the commands of "on" (default ADD), and otherwise
// passes prevResult through.
func panicker() *skel.Plugin {
	act := func(req *skel.Request) error {
		var c struct {
			Panic string   `json:"panic"`
			On    []string `json:"on"`
		}
		if err := json.Unmarshal(req.Config, &c); err != nil {
			return err
		}
		if len(c.On) == 0 {
			c.On = []string{skel.CmdAdd}
		}
		if !slices.Contains(c.On, req.Args.Command) {
			return nil
		}
		switch c.Panic {
		case "callback":
			panic("panicker: on the callback's goroutine")
		case "netns":
			h, err := ns.Open(req.Args.Netns)
			if err != nil {
				return err
			}
			defer h.Close()
			return ns.DoHandle(h, func() error { panic("panicker: inside the container's netns") })
		case "background":
			return background.Start(req.Context(), func() error { panic("panicker: in the work left running") })
		}
		return fmt.Errorf("panicker: unknown panic %q", c.Panic)
	}
	return &skel.Plugin{
		Name: "panicker", Versions: []string{"0.4.0", "1.0.0", "1.1.0"},
		Add: func(req *skel.Request) (*result.Result, error) {
			if err := act(req); err != nil {
				return nil, err
			}
			if req.PrevResult == nil {
				return &result.Result{}, nil
			}
			return req.PrevResult, nil
		},
		Del:   act,
		Check: act,
	}
}

// errWaitedOut is the sleeper's answer when no cancellation reached it.
var errWaitedOut = errors.New("sleeper: waited 20s, the caller's context never ended")

// sleeper is an in-process test plugin whose ADD waits for its request's context to
// end (20 s at most).
func sleeper() *skel.Plugin {
	return &skel.Plugin{
		Name: "sleeper", Versions: []string{"1.0.0", "1.1.0"},
		Add: func(req *skel.Request) (*result.Result, error) {
			select {
			case <-req.Context().Done():
				return nil, fmt.Errorf("sleeper: %w", req.Context().Err())
			case <-time.After(20 * time.Second):
				return nil, errWaitedOut
			}
		},
	}
}

// testExec is an Exec that also holds the test plugins.
func testExec() *inproc.Exec {
	e := &inproc.Exec{}
	e.SetLookup(inproc.WithPlugins(panicker(), sleeper()))
	return e
}
