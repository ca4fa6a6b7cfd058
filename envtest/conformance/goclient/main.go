// Command goclient is the Go client section of kcr-envtest's conformance suite: it drives
// client-go's typed clients against one API server, with protobuf bodies and answers (what Go
// operators send for built-in kinds) and then with JSON, and prints one JSON line per exchange:
//
//	{"name": "protobuf/configmap-create", "ok": true, "body": {...the object...}}
//	{"name": "protobuf/configmap-delete-wrong-uid", "ok": false, "body": {...the Status...}}
//
// The Rust side (envtest/conformance/src/goclient.rs) runs it against kube-apiserver and
// kcr-envtest and compares the lines exchange by exchange. Test tooling only.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

type line struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	Body any    `json:"body"`
}

type run struct {
	mode string
	cs   *kubernetes.Clientset
	ns   string
	out  *json.Encoder
}

// emit prints the outcome of one exchange: the object on success, the Status on an API error.
func (r *run) emit(name string, obj runtime.Object, err error) {
	l := line{Name: r.mode + "/" + name}
	switch {
	case err == nil:
		l.OK = true
		if obj != nil {
			u, cerr := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			if cerr != nil {
				l.Body = map[string]any{"convertError": cerr.Error()}
			} else {
				l.Body = u
			}
		}
	default:
		if status, ok := err.(apierrors.APIStatus); ok {
			s := status.Status()
			u, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&s)
			l.Body = u
		} else {
			l.Body = map[string]any{"clientError": err.Error()}
		}
	}
	if werr := r.out.Encode(l); werr != nil {
		fmt.Fprintln(os.Stderr, "goclient: cannot write:", werr)
		os.Exit(1)
	}
}

func labels(extra map[string]string) map[string]string {
	l := map[string]string{"conformance": "goclient"}
	for k, v := range extra {
		l[k] = v
	}
	return l
}

func (r *run) exchanges(ctx context.Context) {
	cms := r.cs.CoreV1().ConfigMaps(r.ns)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cm1", Labels: labels(nil)},
		Data:       map[string]string{"a": "1"},
	}
	created, err := cms.Create(ctx, cm, metav1.CreateOptions{})
	r.emit("configmap-create", created, err)
	got, err := cms.Get(ctx, "cm1", metav1.GetOptions{})
	r.emit("configmap-get", got, err)
	if got != nil && err == nil {
		// A read-modify-write carries creationTimestamp, managedFields and the uid back.
		got.Data["b"] = "2"
		updated, err := cms.Update(ctx, got, metav1.UpdateOptions{FieldManager: "goclient"})
		r.emit("configmap-update", updated, err)
	}
	patched, err := cms.Patch(ctx, "cm1", types.StrategicMergePatchType,
		[]byte(`{"data":{"c":"3"}}`), metav1.PatchOptions{})
	r.emit("configmap-patch-strategic", patched, err)
	dry, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dry"}},
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	r.emit("configmap-create-dry-run", dry, err)
	_, err = cms.Get(ctx, "dry", metav1.GetOptions{})
	r.emit("configmap-dry-run-not-stored", nil, err)
	wrong := types.UID("00000000-0000-0000-0000-000000000000")
	err = cms.Delete(ctx, "cm1", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &wrong}})
	r.emit("configmap-delete-wrong-uid", nil, err)

	applied, err := cms.Apply(ctx,
		corev1apply.ConfigMap("applied", r.ns).WithLabels(labels(nil)).WithData(map[string]string{"k": "v"}),
		metav1.ApplyOptions{FieldManager: "goclient", Force: true})
	r.emit("configmap-apply", applied, err)

	list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "conformance=goclient"})
	if list != nil {
		list.ResourceVersion = ""
	}
	r.emit("configmap-list-selector", list, err)

	// A watch from the list's resourceVersion sees the next create.
	w, err := cms.Watch(ctx, metav1.ListOptions{LabelSelector: "conformance=goclient,watched=yes"})
	if err != nil {
		r.emit("configmap-watch-added", nil, err)
	} else {
		_, cerr := cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "watched", Labels: labels(map[string]string{"watched": "yes"})},
			Data:       map[string]string{"w": "1"},
		}, metav1.CreateOptions{})
		if cerr != nil {
			r.emit("configmap-watch-added", nil, cerr)
		} else {
			select {
			case ev := <-w.ResultChan():
				r.emit("configmap-watch-added-"+string(ev.Type), ev.Object, nil)
			case <-time.After(20 * time.Second):
				r.emit("configmap-watch-added", nil, fmt.Errorf("no event in 20 s"))
			}
		}
		w.Stop()
	}
	err = cms.Delete(ctx, "cm1", metav1.DeleteOptions{})
	r.emit("configmap-delete", nil, err)
	_, err = cms.Get(ctx, "cm1", metav1.GetOptions{})
	r.emit("configmap-get-deleted", nil, err)

	// A leader election Lease, as a Go manager writes it.
	leases := r.cs.CoordinationV1().Leases(r.ns)
	now := metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 678901000, time.UTC))
	holder, duration, transitions := "replica-a", int32(15), int32(0)
	lease, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "leader"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &duration,
			AcquireTime: &now, RenewTime: &now, LeaseTransitions: &transitions},
	}, metav1.CreateOptions{})
	r.emit("lease-create", lease, err)
	if lease != nil && err == nil {
		renewed := metav1.NewMicroTime(now.Add(2 * time.Second))
		lease.Spec.RenewTime = &renewed
		lease, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		r.emit("lease-renew", lease, err)
	}

	// A Deployment, its status written by a controller.
	deployments := r.cs.AppsV1().Deployments(r.ns)
	replicas := int32(2)
	d, err := deployments.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labels(nil)},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: "nginx:1",
					Ports: []corev1.ContainerPort{{ContainerPort: 80}},
				}}},
			},
		},
	}, metav1.CreateOptions{})
	r.emit("deployment-create", d, err)
	if d != nil && err == nil {
		d.Status.Replicas = 2
		d.Status.ObservedGeneration = d.Generation
		d, err = deployments.UpdateStatus(ctx, d, metav1.UpdateOptions{})
		r.emit("deployment-update-status", d, err)
	}
	_, err = deployments.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "empty"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "e"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "e"}}},
		},
	}, metav1.CreateOptions{})
	r.emit("deployment-no-containers", nil, err)

	// A Pod with resources, probes and an env var from a field.
	pods := r.cs.CoreV1().Pods(r.ns)
	pod, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: "busybox:1", Command: []string{"sleep", "3600"},
			Env: []corev1.EnvVar{{Name: "NODE", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
		}}},
	}, metav1.CreateOptions{})
	r.emit("pod-create", pod, err)
	err = pods.Delete(ctx, "p1", metav1.DeleteOptions{})
	r.emit("pod-delete", nil, err)

	// Cluster-scoped: a Node and an RBAC ClusterRole with capitals in its name.
	nodes := r.cs.CoreV1().Nodes()
	nodeName := "goclient-" + r.mode
	node, err := nodes.Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: labels(nil)},
		Spec:       corev1.NodeSpec{Unschedulable: true},
	}, metav1.CreateOptions{})
	r.emit("node-create", node, err)
	err = nodes.Delete(ctx, nodeName, metav1.DeleteOptions{})
	r.emit("node-delete", nil, err)
	roleName := "GoClient:" + r.mode
	role, err := r.cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: roleName},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
			Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{})
	r.emit("clusterrole-create", role, err)
	err = r.cs.RbacV1().ClusterRoles().Delete(ctx, roleName, metav1.DeleteOptions{})
	r.emit("clusterrole-delete", nil, err)
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server")
	namespace := flag.String("namespace", "conf-goclient", "namespace to create and use (a suffix per mode is added)")
	flag.Parse()
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "goclient: kubeconfig:", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := json.NewEncoder(os.Stdout)
	for _, mode := range []string{"protobuf", "json"} {
		c := rest.CopyConfig(config)
		if mode == "protobuf" {
			c.ContentType = "application/vnd.kubernetes.protobuf"
			c.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
		} else {
			c.ContentType = "application/json"
			c.AcceptContentTypes = "application/json"
		}
		cs, err := kubernetes.NewForConfig(c)
		if err != nil {
			fmt.Fprintln(os.Stderr, "goclient: client:", err)
			os.Exit(2)
		}
		ns := *namespace + "-" + mode
		if _, err := cs.CoreV1().Namespaces().Create(ctx,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			fmt.Fprintln(os.Stderr, "goclient: namespace:", err)
			os.Exit(2)
		}
		(&run{mode: mode, cs: cs, ns: ns, out: out}).exchanges(ctx)
	}
}
