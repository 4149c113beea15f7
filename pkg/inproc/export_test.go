package inproc

import "github.com/cnikit/cni/internal/spec/skel"

// WithPlugins returns lookup-s that find extra beside the toolkit's plugins: the tests'
// own in-process plugins (one that panics).
func WithPlugins(extra ...*skel.Plugin) func(string) *skel.Plugin {
	return func(name string) *skel.Plugin {
		for _, p := range extra {
			if p.Name == name {
				return p
			}
		}
		return (&Exec{}).builtin(name)
	}
}

// SetLookup makes e find its in-process plugins with lookup.
func (e *Exec) SetLookup(lookup func(string) *skel.Plugin) { e.lookup = lookup }

// SetLookup makes r find its in-process plugins with lookup.
func (r *Runner) SetLookup(lookup func(string) *skel.Plugin) { r.lookup = lookup }
