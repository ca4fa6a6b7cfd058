// Command e2e is the benchmark controller of `bench/run.sh e2e` written with controller-runtime,
// the peer of kcr-bench's kcr-bench-kcr and kcr-bench-kube (bench/e2e): it watches Bench objects
// (benches.bench.kcr.io/v1) in one namespace and writes each object's status once.
//
//	e2e --namespace ns --objects N [--mode full|meta] [--workers 4] [--latency-file f] [--timeout-secs 600]
//
// A manager (metrics on a free loopback port, no health probes, no leader election, its cache
// restricted to the namespace) with one controller For(&benchapi.Bench{}) (For(&benchapi.Bench{},
// builder.OnlyMetadata) with --mode meta), MaxConcurrentReconciles --workers, and client-go's
// rate-limiting work queue (UsePriorityQueue false: controller-runtime's default queue up to
// v0.22; since v0.23 the default is its priority queue, and this benchmark keeps the queue its
// recorded results were measured with). The reconciler
// reads the object from the cache; when status.observedGeneration differs from
// metadata.generation it writes a JSON merge patch of the status subresource (generation,
// spec.value, the time), else nothing. In metadata mode the status is not in the cache, so it
// writes nothing (that run measures the cache). The rest.Config comes from KUBECONFIG with
// client-side rate limiting off (QPS -1), as kube-rs has none; with client-go's defaults a
// controller-runtime client is limited to 20 requests/s.
//
// It ends with the line kcr-bench prints: `e2e-run impl=controller-runtime mode=<..> objects=<n>
// synced_s=<..> all_reconciled_s=<..> writes=<n> rss_hwm_mib=<..> cpu_s=<..>`, measured the same way (see
// bench/e2e/src/lib.rs): synced_s from BENCH_T0_NS (set by the launcher) to the informer's
// HasSynced, latencies from the creator's created-at annotation to the status write returning.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"kcr.invalid/bench/internal/benchapi"
	"kcr.invalid/bench/internal/proc"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const createdAtAnnotation = "bench.kcr.io/created-at-us"

func nowUs() int64 { return time.Now().UnixMicro() }

// tracker counts what a run reconciled; the same bookkeeping as kcr-bench's Tracker.
type tracker struct {
	mu             sync.Mutex
	objects        int
	done           map[string]struct{}
	latenciesMs    []float64
	firstCreatedUs int64
	lastDoneUs     int64
	writes         int
	finished       chan struct{}
}

func (t *tracker) reconciled(name string, createdUs int64, wrote bool) {
	now := nowUs()
	t.mu.Lock()
	defer t.mu.Unlock()
	if wrote {
		t.writes++
	}
	if _, ok := t.done[name]; ok {
		return
	}
	t.done[name] = struct{}{}
	if createdUs > 0 {
		if t.firstCreatedUs == 0 || createdUs < t.firstCreatedUs {
			t.firstCreatedUs = createdUs
		}
		if wrote {
			t.latenciesMs = append(t.latenciesMs, float64(now-createdUs)/1000)
		}
	}
	t.lastDoneUs = now
	if len(t.done) == t.objects {
		close(t.finished)
	}
}

func createdAt(meta *metav1.ObjectMeta) int64 {
	v, _ := strconv.ParseInt(meta.Annotations[createdAtAnnotation], 10, 64)
	return v
}

type fullReconciler struct {
	client.Client
	tracker *tracker
}

func (r *fullReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var b benchapi.Bench
	if err := r.Get(ctx, req.NamespacedName, &b); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	wrote := false
	if b.Status.ObservedGeneration == nil || *b.Status.ObservedGeneration != b.Generation {
		patch, err := json.Marshal(map[string]any{"status": map[string]any{
			"observedGeneration": b.Generation,
			"value":              b.Spec.Value,
			"reconciledAtUs":     nowUs(),
		}})
		if err != nil {
			return reconcile.Result{}, err
		}
		if err := r.Status().Patch(ctx, &b, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return reconcile.Result{}, err
		}
		wrote = true
	}
	r.tracker.reconciled(req.Name, createdAt(&b.ObjectMeta), wrote)
	return reconcile.Result{}, nil
}

type metaReconciler struct {
	client.Client
	tracker *tracker
}

func (r *metaReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(benchapi.GroupVersion.WithKind("Bench"))
	if err := r.Get(ctx, req.NamespacedName, m); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	r.tracker.reconciled(req.Name, createdAt(&m.ObjectMeta), false)
	return reconcile.Result{}, nil
}

func main() {
	startUs := nowUs()
	if t0, err := strconv.ParseInt(os.Getenv("BENCH_T0_NS"), 10, 64); err == nil {
		startUs = t0 / 1000
	}
	namespace := flag.String("namespace", "", "the namespace whose objects to reconcile")
	objects := flag.Int("objects", 0, "the run ends once this many distinct objects are reconciled")
	mode := flag.String("mode", "full", "full or meta (metadata-only watch)")
	workers := flag.Int("workers", 4, "concurrent reconciles")
	latencyFile := flag.String("latency-file", "", "where to write the latencies (ms, one per line)")
	timeoutSecs := flag.Int("timeout-secs", 600, "give up after this many seconds")
	flag.Parse()
	if err := run(startUs, *namespace, *objects, *mode, *workers, *latencyFile, time.Duration(*timeoutSecs)*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
}

func run(startUs int64, namespace string, objects int, mode string, workers int, latencyFile string, timeout time.Duration) error {
	log.SetLogger(logr.Discard())
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	benchapi.AddToScheme(scheme)

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	cfg.QPS = -1 // no client-side rate limiting, as kube-rs
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "127.0.0.1:0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
	})
	if err != nil {
		return err
	}
	t := &tracker{objects: objects, done: map[string]struct{}{}, finished: make(chan struct{})}
	var watched client.Object = &benchapi.Bench{}
	var opts []builder.ForOption
	var r reconcile.Reconciler = &fullReconciler{Client: mgr.GetClient(), tracker: t}
	if mode == "meta" {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(benchapi.GroupVersion.WithKind("Bench"))
		watched = m
		opts = append(opts, builder.OnlyMetadata)
		r = &metaReconciler{Client: mgr.GetClient(), tracker: t}
	}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("bench").
		For(watched, opts...).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers, UsePriorityQueue: ptr.To(false)}).
		Complete(r); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The controller's informer (same type, same metadata-only choice): created here, started
	// with the manager's cache; its HasSynced is the controller's cache sync.
	informer, err := mgr.GetCache().GetInformer(ctx, watched)
	if err != nil {
		return err
	}
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	syncedUs := int64(0)
	deadline := time.Now().Add(timeout)
	for !informer.HasSynced() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if informer.HasSynced() {
		syncedUs = nowUs()
	}
	complete := true
	select {
	case <-t.finished:
	case <-time.After(time.Until(deadline)):
		complete = false
	case err := <-stopped:
		return fmt.Errorf("manager stopped: %v", err)
	}
	t.mu.Lock()
	synced := "NaN"
	if syncedUs > 0 {
		synced = fmt.Sprintf("%.3f", float64(syncedUs-startUs)/1e6)
	}
	from := startUs
	if t.firstCreatedUs > startUs {
		from = t.firstCreatedUs
	}
	line := fmt.Sprintf("e2e-run impl=controller-runtime mode=%s objects=%d synced_s=%s all_reconciled_s=%.3f writes=%d rss_hwm_mib=%.1f cpu_s=%.2f",
		mode, len(t.done), synced, float64(t.lastDoneUs-from)/1e6, t.writes, proc.StatusMiB("VmHWM"), proc.CPUSecs())
	if !complete {
		line += " incomplete=1"
	}
	fmt.Println(line)
	if latencyFile != "" {
		var sb strings.Builder
		for _, l := range t.latenciesMs {
			fmt.Fprintf(&sb, "%.3f\n", l)
		}
		if err := os.WriteFile(latencyFile, []byte(sb.String()), 0o644); err != nil {
			return err
		}
	}
	t.mu.Unlock()
	cancel()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
	}
	return nil
}
