package inproc

import (
	"context"
	"io"
	"time"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// The types a Runner works with are the chain runner's own, named here so that a
// program outside the module can spell them.
type (
	// Network is a loaded configuration list: name, negotiated cniVersion, plugins.
	Network = chain.Network
	// Attachment names the container a network is attached to: CNI_CONTAINERID,
	// CNI_NETNS, CNI_IFNAME, CNI_ARGS and the capability args (runtimeConfig).
	Attachment = chain.Attachment
	// GCArgs lists the attachments GC must keep; a nil *GCArgs keeps none.
	GCArgs = chain.GCArgs
	// ValidAttachment is one attachment GC keeps.
	ValidAttachment = skel.Attachment
	// Result is an ADD's result; json.Marshal writes it in its cniVersion's shape.
	Result = result.Result
	// PluginError is a plugin's failure in a list: its type, the network, the step,
	// and the plugin's CNI error (Code).
	PluginError = chain.PluginError
	// NotFoundError: no configuration of that name in the directory.
	NotFoundError = chain.NotFoundError
	// NoConfigsError: the directory holds no configuration at all.
	NoConfigsError = chain.NoConfigsError
	// InvalidError: the configuration cannot be used (its Err says why).
	InvalidError = chain.InvalidError
)

// Load finds the network called name in dir as libcni's LoadNetworkConf does: the
// *.conflist files first, then the single-plugin *.conf and *.json ones; the first file
// that defines it wins, and Network.Shadowed names the others.
func Load(dir, name string) (*Network, error) { return chain.Load(dir, name) }

// LoadFile reads one .conflist file, with the drop-in plugins of <dir>/<name>/*.conf
// unless loadOnlyInlinedPlugins is set.
func LoadFile(path string) (*Network, error) { return chain.LoadFile(path) }

// Parse reads a configuration list from bytes, as libcni's NetworkConfFromBytes does.
func Parse(data []byte) (*Network, error) { return chain.Parse(data) }

// Code is the CNI error code err carries (a *PluginError's is its plugin's), 0 when it
// carries none.
func Code(err error) uint { return cnierror.Code(err) }

// Runner runs configuration lists with the built-in plugins in-process and any other
// type exec'd from PluginPath, keeping libcni's result cache: an attachment either one
// ADDed, the other can CHECK, DEL and GC. The zero value needs only PluginPath for
// exec'd types; one value serves concurrent calls on different attachments.
type Runner struct {
	// PluginPath is CNI_PATH: where exec'd plugins are found, and what every plugin is
	// told for its own delegates.
	PluginPath []string
	// CacheDir holds the result cache; empty is libcni's default, /var/lib/cni.
	CacheDir string
	// Env is the environment exec'd plugins inherit (CNI_* replaced); nil is this
	// process's, as with libcni. In-process plugins read nothing else of the process.
	Env []string
	// Stderr receives the plugins' logs and must take concurrent writes; nil discards
	// them.
	Stderr io.Writer
	// Timeout bounds each operation as a whole; zero leaves it to the caller's context.
	Timeout time.Duration

	// lookup is as Exec's.
	lookup func(pluginType string) *skel.Plugin
}

func (r *Runner) chain() *chain.Runner {
	return &chain.Runner{Builtin: registryOr(r.lookup), PluginPath: r.PluginPath, CacheDir: r.CacheDir, Env: r.Env,
		Stderr: r.Stderr, Timeout: r.Timeout}
}

// Add runs ADD through the list's plugins in order and caches the result. On failure
// nothing is cached or undone: as with libcni, DEL next.
func (r *Runner) Add(ctx context.Context, n *Network, att Attachment) (*Result, error) {
	return r.chain().Add(ctx, n, att)
}

// Check runs CHECK through the plugins with the cached result (configs of 0.4.0 on).
func (r *Runner) Check(ctx context.Context, n *Network, att Attachment) error {
	return r.chain().Check(ctx, n, att)
}

// Del runs DEL through the plugins in reverse order and removes the cache entry. It
// returns once everything the plugins started is done.
func (r *Runner) Del(ctx context.Context, n *Network, att Attachment) error {
	return r.chain().Del(ctx, n, att)
}

// GC deletes every cached attachment of the network that args does not keep, then
// sends GC to the plugins (configs of 1.1.0 on).
func (r *Runner) GC(ctx context.Context, n *Network, args *GCArgs) error {
	return r.chain().GC(ctx, n, args)
}

// Status asks the plugins whether they are ready (configs of 1.1.0 on); its error's
// Code is the first unready plugin's (50, 51, ...).
func (r *Runner) Status(ctx context.Context, n *Network) error {
	return r.chain().Status(ctx, n)
}
