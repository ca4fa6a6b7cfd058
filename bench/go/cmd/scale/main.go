// Command scale is the scale benchmark's controller-runtime run (bench/run.sh scale), the peer
// of kcr-bench's kcr-bench-scale-kcr and kcr-bench-scale-kube (bench/e2e/src/scale.rs): one
// controller-runtime cache restricted to one namespace, one informer of one kind (Bench or
// ConfigMap; metav1.PartialObjectMetadata with --mode meta), started cold; it waits for the
// informer's HasSynced, sits --steady-secs and prints the line the Rust runs print:
//
//	scale-bench impl=controller-runtime objects=N mode=<full|meta> kind=<bench|configmap>
//	  list=<paginated|streaming> managed_fields=<keep|strip> sync_s= peak_rss_mib=
//	  steady_rss_mib= cpu_s= bytes_per_object= base_rss_mib=
//
// (one line), measured the same way. --list streaming turns client-go's WatchListClient
// feature on, paginated turns it off (client-go reads KUBE_FEATURE_WatchListClient); client-go's
// paginated first list asks for resourceVersion=0, which the API server answers from its watch
// cache (kcr's and kube-runtime's `--list cache`), so there is no separate cache mode here.
// controller-runtime keeps managedFields unless --managed-fields strip (then the cache's
// DefaultTransform is cache.TransformStripManagedFields).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"kcr.invalid/bench/internal/benchapi"
	"kcr.invalid/bench/internal/proc"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

func main() {
	startUs := time.Now().UnixMicro()
	if t0, err := strconv.ParseInt(os.Getenv("BENCH_T0_NS"), 10, 64); err == nil {
		startUs = t0 / 1000
	}
	namespace := flag.String("namespace", "", "the namespace whose objects to cache")
	objects := flag.Int("objects", 0, "how many objects the namespace holds")
	kind := flag.String("kind", "bench", "bench or configmap")
	mode := flag.String("mode", "full", "full or meta (metadata-only watch)")
	list := flag.String("list", "paginated", "paginated or streaming")
	managedFields := flag.String("managed-fields", "keep", "keep or strip")
	steadySecs := flag.Int("steady-secs", 5, "seconds to sit after the sync before the steady RSS is read")
	timeoutSecs := flag.Int("timeout-secs", 600, "give up when the cache has not synced after this many seconds")
	flag.Parse()
	baseRSS := proc.StatusMiB("VmRSS")
	if err := run(startUs, baseRSS, *namespace, *objects, *kind, *mode, *list, *managedFields,
		time.Duration(*steadySecs)*time.Second, time.Duration(*timeoutSecs)*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

func run(startUs int64, baseRSS float64, namespace string, objects int, kind, mode, list, managedFields string, steady, timeout time.Duration) error {
	log.SetLogger(logr.Discard())
	switch list {
	case "paginated":
		os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	case "streaming":
		os.Setenv("KUBE_FEATURE_WatchListClient", "true")
	default:
		return fmt.Errorf("--list: want paginated or streaming, got %q", list)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	benchapi.AddToScheme(scheme)
	var object client.Object
	var gvkKind string
	var gv = corev1.SchemeGroupVersion
	switch kind {
	case "bench":
		object, gvkKind, gv = &benchapi.Bench{}, "Bench", benchapi.GroupVersion
	case "configmap":
		object, gvkKind = &corev1.ConfigMap{}, "ConfigMap"
	default:
		return fmt.Errorf("--kind: want bench or configmap, got %q", kind)
	}
	switch mode {
	case "full":
	case "meta":
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gv.WithKind(gvkKind))
		object = m
	default:
		return fmt.Errorf("--mode: want full or meta, got %q", mode)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	cfg.QPS = -1 // no client-side rate limiting, as kube-rs
	options := cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{namespace: {}}}
	switch managedFields {
	case "keep":
	case "strip":
		options.DefaultTransform = cache.TransformStripManagedFields()
	default:
		return fmt.Errorf("--managed-fields: want keep or strip, got %q", managedFields)
	}
	c, err := cache.New(cfg, options)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	informer, err := c.GetInformer(ctx, object)
	if err != nil {
		return err
	}
	stopped := make(chan error, 1)
	go func() { stopped <- c.Start(ctx) }()
	deadline := time.Now().Add(timeout)
	for !informer.HasSynced() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	synced := informer.HasSynced()
	syncedUs := time.Now().UnixMicro()
	peak, cpu := proc.StatusMiB("VmHWM"), proc.CPUSecs()
	cached := 0
	if mode == "meta" {
		var l metav1.PartialObjectMetadataList
		l.SetGroupVersionKind(gv.WithKind(gvkKind + "List"))
		if err := c.List(ctx, &l); err != nil {
			return err
		}
		cached = len(l.Items)
	} else if kind == "bench" {
		var l benchapi.BenchList
		if err := c.List(ctx, &l); err != nil {
			return err
		}
		cached = len(l.Items)
	} else {
		var l corev1.ConfigMapList
		if err := c.List(ctx, &l); err != nil {
			return err
		}
		cached = len(l.Items)
	}
	select {
	case <-time.After(steady):
	case err := <-stopped:
		return fmt.Errorf("cache stopped: %v", err)
	}
	steadyRSS := proc.StatusMiB("VmRSS")
	syncS := "NaN"
	if synced {
		syncS = fmt.Sprintf("%.3f", float64(syncedUs-startUs)/1e6)
	}
	perObject := (steadyRSS - baseRSS) * 1024 * 1024 / float64(max(objects, 1))
	line := fmt.Sprintf("scale-bench impl=controller-runtime objects=%d mode=%s kind=%s list=%s managed_fields=%s sync_s=%s peak_rss_mib=%.1f steady_rss_mib=%.1f cpu_s=%.2f bytes_per_object=%.0f base_rss_mib=%.1f",
		objects, mode, kind, list, managedFields, syncS, peak, steadyRSS, cpu, perObject, baseRSS)
	complete := synced && cached >= objects
	if !complete {
		line += " incomplete=1"
	}
	fmt.Println(line)
	if !complete {
		return fmt.Errorf("the cache of %s did not sync with %d objects within %v (it holds %d)", namespace, objects, timeout, cached)
	}
	return nil
}
