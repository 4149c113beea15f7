// Package hostiletest holds the tests that play an attacker or an unlucky node against
// every plugin a defect class can reach at once, rather than one plugin at a time: a
// CNI_IFNAME no ADD of ours could have made, a config DEL does not need, a kernel
// error that is the config's fault, a namespace path gone while the namespace lingers,
// a plugin killed half way through ADD. Each runs the cni binary the way a runtime does,
// inside throwaway namespaces (internal/plugins/attachment/attachmenttest). It has no code of
// its own.
package hostiletest
