// Package benchapi holds the benchmark's custom resource, Bench (benches.bench.kcr.io/v1), as
// the Go peers (cmd/e2e, cmd/scale) decode it: the Go twin of kcr-bench's Bench.
package benchapi

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is Bench's group and version.
var GroupVersion = schema.GroupVersion{Group: "bench.kcr.io", Version: "v1"}

// BenchSpec is the spec of a Bench.
type BenchSpec struct {
	Value int64 `json:"value"`
}

// BenchStatus is what the controller writes.
type BenchStatus struct {
	ObservedGeneration *int64 `json:"observedGeneration,omitempty"`
	Value              *int64 `json:"value,omitempty"`
	ReconciledAtUs     *int64 `json:"reconciledAtUs,omitempty"`
}

// Bench is the benchmark's custom resource.
type Bench struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              BenchSpec   `json:"spec"`
	Status            BenchStatus `json:"status,omitempty"`
}

// BenchList is a list of Bench.
type BenchList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Bench `json:"items"`
}

func copyInt(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// DeepCopyInto copies b into out.
func (b *Bench) DeepCopyInto(out *Bench) {
	*out = *b
	b.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Status.ObservedGeneration = copyInt(b.Status.ObservedGeneration)
	out.Status.Value = copyInt(b.Status.Value)
	out.Status.ReconciledAtUs = copyInt(b.Status.ReconciledAtUs)
}

// DeepCopyObject implements runtime.Object.
func (b *Bench) DeepCopyObject() runtime.Object {
	out := &Bench{}
	b.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *BenchList) DeepCopyObject() runtime.Object {
	out := &BenchList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]Bench, len(l.Items))
	for i := range l.Items {
		l.Items[i].DeepCopyInto(&out.Items[i])
	}
	return out
}

// AddToScheme registers Bench and BenchList with scheme.
func AddToScheme(scheme *runtime.Scheme) {
	scheme.AddKnownTypes(GroupVersion, &Bench{}, &BenchList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
}
