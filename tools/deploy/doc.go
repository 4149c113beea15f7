// Package deploy holds the tests of the Kubernetes manifests in deploy/kubernetes: they
// decode strictly against the Kubernetes API types (k8s.io/api, sigs.k8s.io/yaml, in
// this tools module so that the main module stays lean), and the install DaemonSet's
// init container runs with its exact command and mounts against a temporary host root.
package deploy
