// Package chain is the embedded chain runner: it loads network configuration lists the
// way libcni does and runs them (ADD, CHECK, DEL, GC, STATUS) against a container,
// keeping libcni's result cache so that libcni-based runtimes and this runner can each
// CHECK and DEL what the other ADDed. Built-in plugins run in-process; any other plugin
// type is exec'd from the plugin path exactly as libcni would exec it.
//
// Embedding it takes a configuration, a Runner and an Attachment:
//
//	net, err := chain.Load("/etc/cni/net.d", "mynet") // or chain.Parse(bytes)
//	r := &chain.Runner{
//		Builtin:    dispatch.Lookup,          // nil: exec every plugin
//		PluginPath: []string{"/opt/cni/bin"},
//		CacheDir:   "/var/lib/cni",           // "" means the same default
//		Timeout:    30 * time.Second,
//	}
//	att := chain.Attachment{ContainerID: "c1", Netns: "/run/netns/c1", IfName: "eth0",
//		CapabilityArgs: map[string]any{"portMappings": ports}}
//	res, err := r.Add(ctx, net, att) // *result.Result, cached on disk
//	err = r.Check(ctx, net, att)
//	err = r.Del(ctx, net, att)
//	err = r.GC(ctx, net, &chain.GCArgs{ValidAttachments: stillInUse})
//	err = r.Status(ctx, net)
//
// Errors: loading gives *NotFoundError, *NoConfigsError or *InvalidError; a failing
// plugin gives *PluginError ("plugin type=... name=... failed (add): ..."), which wraps
// the plugin's *cnierror.Error so cnierror.Code(err) is the plugin's CNI code. Runner.Invoke
// runs a single plugin by hand (what `cni exec` does) and Runner.Version asks one for
// its versions.
//
// Plugin is the chain meta plugin built on the runner: one plugin object whose nested
// "plugins" list it runs as this runner runs a conflist, so that a runtime starts one
// process for a whole chain. It keeps no cache: CHECK and DEL pass every child the
// prevResult the runtime sent, which is the runtime's cached result of the whole chain.
// A failed ADD undoes the children that succeeded; a DEL goes on after a failing child.
// dispatch registers it with its registry lookup (chain.Plugin(dispatch.Lookup)); no
// plugin package imports the runner.
//
// The runner waits once per operation for the work its in-process plugins leave running
// (link deletions, see background.Pending), so the kernel waits of a DEL overlap; each call
// returns only when all of it is done, and that work's error is its plugin's.
//
// Deliberate differences from libcni: of a network defined in two files of a directory,
// the first wins as in libcni, but Load names the others (Network.Shadowed) rather than
// ignore them silently; files above MaxFileSize are
// refused; the cache entry is written atomically (under its own name in results.tmp,
// then renamed), the next DEL or GC removes what a crash mid-write leaves, and cache
// entries are read without following symlinks, MaxFileSize at most; an ADD whose cache
// entry name would pass 255 bytes is refused before any plugin runs, not after all of
// them; DEL of an attachment whose netns is the runner's own runs with CNI_NETNS empty
// (see Runner.Del); a "text file busy" exec is really retried; an exec'd plugin is done
// when it exits, whatever its children hold; large integers in plugin configs survive
// the injection round trip.
package chain
