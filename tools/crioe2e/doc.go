// Package crioe2e is the CRI-O end-to-end suite (build tag crio, make test-crio): CRI-O,
// built at the version tools/crio pins, runs pods through the CRI as kubelet does, on
// our plugins and on the reference's side by side, inside namespaces the tests own
// (tools/crinode). It covers what CRI-O does to the plugins that containerd never does:
// CHECK after every ADD, host ports mapped by CRI-O itself with portmap still in the
// list, GC at its start with the restored sandboxes as the valid attachments.
package crioe2e
