// Package e2e is the containerd end-to-end suite (make test-e2e): Debian's containerd
// runs our plugins the way a Kubernetes node does, driven through its CRI as kubelet
// drives it, inside namespaces the tests own (see package crinode). Its tests carry the
// build tag e2e, so that make test-tools does not run them a second time.
package e2e
