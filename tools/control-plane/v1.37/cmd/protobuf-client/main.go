// Command protobuf-client drives client-go in protobuf mode (ContentType and Accept
// application/vnd.kubernetes.protobuf, as Go operators run) against a server: create, update after
// reading, update status, scale, list, watch, delete with preconditions and propagation, the
// metadata client, and leader election on a Lease. It prints one line per step and exits non-zero
// at the first failure.
//
// Test tooling only: kcr-envtest's tests/protobuf_go_client.rs builds and runs it against both
// backends. By hand, from tools/control-plane/v1.37:
//
//	go run ./cmd/protobuf-client KUBECONFIG NAMESPACE
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

func ptr[T any](v T) *T { return &v }

func must(what string, err error) {
	if err != nil {
		fmt.Printf("FAIL %s: %v\n", what, err)
		os.Exit(1)
	}
	fmt.Printf("ok   %s\n", what)
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: protobuf-client KUBECONFIG NAMESPACE")
		os.Exit(2)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Args[1])
	must("config", err)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(cfg)
	must("clientset", err)
	ctx := context.Background()
	ns := os.Args[2]

	node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ns + "-node"},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}}}, metav1.CreateOptions{})
	must("create node", err)
	node.Labels = map[string]string{"x": "y"}
	_, err = cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	must("update node (read first: creationTimestamp, managedFields)", err)
	node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) {
		must("update status of a stale node is a conflict", fmt.Errorf("got %v", err))
	}
	node, err = cs.CoreV1().Nodes().Get(ctx, ns+"-node", metav1.GetOptions{})
	must("get node", err)
	node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	node, err = cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	must("update node status", err)
	if q := node.Status.Capacity[corev1.ResourceCPU]; q.String() != "4" {
		must("node capacity read back", fmt.Errorf("%v", node.Status.Capacity))
	}
	must("delete node", cs.CoreV1().Nodes().Delete(ctx, ns+"-node", metav1.DeleteOptions{}))

	d, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx",
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}},
		}}, metav1.CreateOptions{})
	must("create deployment", err)
	d.Spec.Replicas = ptr(int32(2))
	d, err = cs.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
	must("update deployment", err)
	got, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	must("get deployment", err)
	if *got.Spec.Replicas != 2 || got.CreationTimestamp.IsZero() {
		must("deployment read back", fmt.Errorf("%+v", got.Spec))
	}
	sc, err := cs.AppsV1().Deployments(ns).GetScale(ctx, "web", metav1.GetOptions{})
	must("get scale", err)
	sc.Spec.Replicas = 3
	_, err = cs.AppsV1().Deployments(ns).UpdateScale(ctx, "web", sc, metav1.UpdateOptions{})
	must("update scale", err)
	list, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	must(fmt.Sprintf("list deployments (%d)", len(list.Items)), err)
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	must("watch configmaps", err)
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{})
	must("create configmap", err)
	select {
	case ev := <-w.ResultChan():
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if !ok || cm.Name != "cm" || ev.Type != "ADDED" {
			must("watch event", fmt.Errorf("%v %#v", ev.Type, ev.Object))
		}
		must("watch event "+string(ev.Type), nil)
	case <-time.After(10 * time.Second):
		must("watch event", fmt.Errorf("none"))
	}
	w.Stop()
	err = cs.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: ptr("1")}})
	if !apierrors.IsConflict(err) {
		must("delete with a stale precondition is a conflict", fmt.Errorf("got %v", err))
	}
	must("delete deployment", cs.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationForeground)}))

	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-role"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}, metav1.CreateOptions{})
	must("create clusterrole", err)
	must("delete clusterrole", cs.RbacV1().ClusterRoles().Delete(ctx, ns+"-role", metav1.DeleteOptions{}))

	mc, err := metadata.NewForConfig(cfg)
	must("metadata client", err)
	ml, err := mc.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns).List(ctx, metav1.ListOptions{})
	must(fmt.Sprintf("metadata list configmaps (%d)", len(ml.Items)), err)

	// Leader election on a Lease.
	lock := &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Name: "gosmoke-leader", Namespace: ns}, Client: cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: "me"}}
	lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	elected := make(chan struct{})
	go leaderelection.RunOrDie(lctx, leaderelection.LeaderElectionConfig{Lock: lock, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) { close(elected) }, OnStoppedLeading: func() {}}})
	select {
	case <-elected:
		must("leader elected", nil)
	case <-lctx.Done():
		must("leader elected", fmt.Errorf("timed out"))
	}
	l, err := cs.CoordinationV1().Leases(ns).Get(ctx, "gosmoke-leader", metav1.GetOptions{})
	must(fmt.Sprintf("lease holder %s renew %v", *l.Spec.HolderIdentity, l.Spec.RenewTime), err)
}
