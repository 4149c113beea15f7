// Package chaintest holds end-to-end tests of the network configurations that container
// runtimes ship by default (podman's "podman" network, Nomad's bridge mode), run by
// libcni itself on the cni binary's plugins, so that what those runtimes do on a node
// is what the tests do, and the invocation log as a runtime's plugins write it (a
// runtime's trace context through libcni to an exec'd delegate and back, parallel
// streams of exec'd plugins rotating one log). It also holds the other tests of whole
// chains, where plugins meet: bridge and portmap hairpinning, bridge and sbr routing the
// replies of a second network, ptp and bandwidth undone past a bad limit. It has no
// code of its own.
package chaintest
