// Package k8stest decodes infermatrix k8s's manifests into the Kubernetes
// API's own types, strictly, for tests: it is imported by tests only, so
// the binary does not carry k8s.io/api.
package k8stest

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// Decoded holds the manifests of one distributed run as the Kubernetes
// API's own types, decoded strictly: an unknown or duplicated field (a
// name misspelled or put at the wrong level in objects.go) is an error,
// as `kubectl apply --validate=strict` makes it.
type Decoded struct {
	ConfigMap  *corev1.ConfigMap
	Claim      *corev1.PersistentVolumeClaim
	Deployment *appsv1.Deployment
	Service    *corev1.Service
	Shards     *batchv1.Job
	Merge      *batchv1.Job
}

// StrictDecoder decodes YAML into the API's types as the API server's
// strict field validation does.
func StrictDecoder(t testing.TB) *kjson.Serializer {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, batchv1.AddToScheme, appsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme, kjson.SerializerOptions{Yaml: true, Strict: true})
}

// Decode strictly decodes a manifest stream into the API types.
func Decode(t testing.TB, stream []byte) *Decoded {
	t.Helper()
	ser := StrictDecoder(t)
	var d Decoded
	for i, doc := range strings.Split(string(stream), "\n---\n") {
		if i == 0 {
			continue // the header comment
		}
		obj, gvk, err := ser.Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("document %d does not strictly decode: %v\n%s", i, err, doc)
		}
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			d.ConfigMap = o
		case *corev1.PersistentVolumeClaim:
			d.Claim = o
		case *appsv1.Deployment:
			d.Deployment = o
		case *corev1.Service:
			d.Service = o
		case *batchv1.Job:
			if o.Spec.CompletionMode != nil && *o.Spec.CompletionMode == batchv1.IndexedCompletion {
				d.Shards = o
			} else {
				d.Merge = o
			}
		default:
			t.Fatalf("document %d: unexpected %v", i, gvk)
		}
	}
	return &d
}
