// Package prevresulttest holds the side-by-side test of the prevResult shapes that
// third-party main plugins hand on (Calico, Cilium, IPAM-only results, 0.3.x/0.4.0
// results, several interfaces and addresses): each shape goes through our meta plugins
// and the reference's, exec'd as a runtime execs them, and the test shows what each
// accepts and what it does with the shape. It has no code of its own.
package prevresulttest
