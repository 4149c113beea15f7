package main

import (
	"context"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// pluginClock is libcni's way of exec'ing plugins with a stopwatch around each exec:
// what a chain operation spends in each of its plugins, so that a regression shows in
// the plugin where it is (the DEL of 9a095a5 was portmap's, hidden in the chain's sum).
// It also times the in-process plugins our runner calls (wrap).
type pluginClock struct {
	raw invoke.RawExec
	mu  sync.Mutex
	on  bool
	// times are by "<plugin> <command>".
	times map[string][]time.Duration
}

func newPluginClock() *pluginClock {
	return &pluginClock{raw: invoke.RawExec{Stderr: os.Stderr}, times: map[string][]time.Duration{}}
}

// counting turns recording on or off (background pods are not recorded).
func (c *pluginClock) counting(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.on = on
}

func (c *pluginClock) note(plugin, command string, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.on {
		k := plugin + " " + command
		c.times[k] = append(c.times[k], d)
	}
}

// ExecPlugin is invoke.Exec's: one exec, timed.
func (c *pluginClock) ExecPlugin(ctx context.Context, pluginPath string, stdin []byte, environ []string) ([]byte, error) {
	start := time.Now()
	out, err := c.raw.ExecPlugin(ctx, pluginPath, stdin, environ)
	command := ""
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "CNI_COMMAND="); ok {
			command = v
		}
	}
	c.note(pluginName(pluginPath), command, time.Since(start))
	return out, err
}

func (c *pluginClock) FindInPath(plugin string, paths []string) (string, error) {
	return invoke.FindInPath(plugin, paths)
}

func (c *pluginClock) Decode(jsonBytes []byte) (version.PluginInfo, error) {
	return (&version.PluginDecoder{}).Decode(jsonBytes)
}

func pluginName(path string) string {
	return path[strings.LastIndexByte(path, '/')+1:]
}

// wrap returns a registry lookup whose plugins time their ADD, CHECK and DEL.
func (c *pluginClock) wrap(lookup func(string) *skel.Plugin) func(string) *skel.Plugin {
	return func(name string) *skel.Plugin {
		p := lookup(name)
		if p == nil {
			return nil
		}
		timed := *p
		if p.Add != nil {
			timed.Add = func(r *skel.Request) (*result.Result, error) {
				defer c.since(name, skel.CmdAdd, time.Now())
				return p.Add(r)
			}
		}
		if p.Check != nil {
			timed.Check = func(r *skel.Request) error {
				defer c.since(name, skel.CmdCheck, time.Now())
				return p.Check(r)
			}
		}
		if p.Del != nil {
			timed.Del = func(r *skel.Request) error {
				defer c.since(name, skel.CmdDel, time.Now())
				return p.Del(r)
			}
		}
		return &timed
	}
}

func (c *pluginClock) since(plugin, command string, start time.Time) {
	c.note(plugin, command, time.Since(start))
}
