// Package manifest reads the Kubernetes manifests of deploy/kubernetes strictly, as
// the API server would, and runs their containers' commands the way a container
// runtime runs them: the image's binary in a root of its own, the pod's hostPath and
// ConfigMap volumes bound where the spec mounts them. The manifests' tests and the
// cluster lab run the DaemonSet's own install step through it, so that what ships is
// what is tested. Nothing here is linked into cni.
package manifest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Objects are the decoded documents of one manifest file.
type Objects struct {
	ConfigMaps []corev1.ConfigMap
	DaemonSets []appsv1.DaemonSet
}

// Load decodes every document of the file at path strictly: an unknown or misplaced
// field, a wrong type or a kind other than a ConfigMap or a DaemonSet fails.
func Load(path string) (Objects, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Objects{}, err
	}
	return Parse(filepath.Base(path), data)
}

// Parse is Load of data, named name in errors.
func Parse(name string, data []byte) (Objects, error) {
	var out Objects
	for i, doc := range strings.Split(string(data), "\n---\n") {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			return out, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		switch tm.APIVersion + " " + tm.Kind {
		case "v1 ConfigMap":
			var cm corev1.ConfigMap
			if err := yaml.UnmarshalStrict([]byte(doc), &cm); err != nil {
				return out, fmt.Errorf("%s: document %d: %w", name, i, err)
			}
			out.ConfigMaps = append(out.ConfigMaps, cm)
		case "apps/v1 DaemonSet":
			var ds appsv1.DaemonSet
			if err := yaml.UnmarshalStrict([]byte(doc), &ds); err != nil {
				return out, fmt.Errorf("%s: document %d: %w", name, i, err)
			}
			out.DaemonSets = append(out.DaemonSets, ds)
		default:
			return out, fmt.Errorf("%s: document %d: unexpected %q", name, i, tm.APIVersion+" "+tm.Kind)
		}
	}
	return out, nil
}

// ConfigMap is the ConfigMap called name.
func (o Objects) ConfigMap(name string) (corev1.ConfigMap, error) {
	i := slices.IndexFunc(o.ConfigMaps, func(cm corev1.ConfigMap) bool { return cm.Name == name })
	if i < 0 {
		return corev1.ConfigMap{}, fmt.Errorf("no ConfigMap %q in the manifest", name)
	}
	return o.ConfigMaps[i], nil
}

// DaemonSet is the manifest's one DaemonSet.
func (o Objects) DaemonSet() (appsv1.DaemonSet, error) {
	if len(o.DaemonSets) != 1 {
		return appsv1.DaemonSet{}, fmt.Errorf("the manifest holds %d DaemonSets, not one", len(o.DaemonSets))
	}
	return o.DaemonSets[0], nil
}
