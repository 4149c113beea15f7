// Package inproc runs the toolkit's plugins inside the calling process, for programs
// that are CNI runtimes themselves: the one public package of this module, a thin facade
// over the chain runner and the plugin registry, which stay internal.
//
// Two ways in. A program that already calls libcni plugs Exec in where libcni takes an
// invoke.Exec; every plugin type the toolkit holds (Builtins) then runs in-process, and
// any other type is found on the search path and exec'd, as libcni would:
//
//	cfg := libcni.NewCNIConfigWithCacheDir(paths, cacheDir, &inproc.Exec{Stderr: os.Stderr})
//	res, err := cfg.AddNetworkList(ctx, list, rt)
//
// libcni keeps its own result cache then, as it always does. A program that does not
// use libcni takes a Runner: it loads a configuration list, runs ADD, CHECK, DEL, GC and
// STATUS through it, and keeps a result cache that libcni reads and writes too:
//
//	net, err := inproc.Load("/etc/cni/net.d", "mynet")
//	r := &inproc.Runner{PluginPath: []string{"/opt/cni/bin"}, CacheDir: "/var/lib/cni"}
//	res, err := r.Add(ctx, net, inproc.Attachment{ContainerID: id, Netns: path, IfName: "eth0"})
//
// A plugin run in-process answers exactly as its exec'd binary would: the same bytes for
// a result, a CNI error (libcni's *types.Error from Exec, with the plugin's code) and
// VERSION. What holds a long-lived host process safe, and the tests that hold it, are in
// docs/embedding.md: a plugin never changes the process's working directory,
// environment, umask, signal handlers or rlimits; an OS thread it moves into a container
// namespace comes back or is discarded; no goroutine, descriptor or netlink socket
// outlives a call, and the work a DEL leaves running (link deletions) is waited for
// before the call returns; a panic, on the plugin's goroutine or one it started, comes
// back as a CNI error (code 999) with its stack on Stderr.
//
// Calls are safe for concurrent use on different attachments; as with any CNI runtime,
// never run two operations on one attachment at once.
package inproc
