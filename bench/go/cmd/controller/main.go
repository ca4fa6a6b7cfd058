// Command controller is controller-runtime's side of kcr-controller's no-op throughput comparison
// (controller/examples/throughput.rs): the same events for the same objects, a no-op reconciler.
//
//	go run ./cmd/controller [<events> <objects> <workers,...>]   (defaults 1000000 10000 1,4)
//
// The pipeline: a source.Channel of GenericEvents (buffer 4096, as kcr's Channel) -> a predicate
// (label app=bench) -> handler.EnqueueRequestForObject (wrapped to count handled events) -> the
// controller's work queue -> <workers> workers running a reconciler that counts and returns.
// The controller is unmanaged (no manager, no cache: nothing else runs). Events cycle over
// <objects> ConfigMaps cm-<i> in ns-<i mod 10>, so bursts for one key are de-duplicated. The rate
// is completed reconciles per second from the first event until every event has been handled and
// the queue is empty with nothing in flight.
//
// It prints `controller-bench impl=controller-runtime workers=<n> ops=<reconciles> secs=<s>
// rate=<reconciles/s>` lines. The queue is client-go's rate-limiting work queue with
// controller-runtime's default controller rate limiter: since controller-runtime v0.23 the
// default queue is its priority queue (UsePriorityQueue defaults to true), so the options set
// UsePriorityQueue to false, which also keeps the rate limiter (DefaultTypedControllerRateLimiter)
// of the client-go queue; the priority queue is measured on its own in cmd/queue. Queue metrics:
// off by default (an unnamed client-go queue), as kcr runs without a metrics recorder;
// BENCH_METRICS=1 names the queue, which is controller-runtime's default queue with
// UsePriorityQueue false (with its Prometheus metrics), as the Rust example's BENCH_METRICS=1
// installs a recorder. controller-runtime's own reconcile metrics are always recorded. GOMAXPROCS
// defaults to BENCH_THREADS (default 2), the Rust example's tokio worker threads.
package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

type cm = *corev1.ConfigMap

func objects(n int) []cm {
	objs := make([]cm, n)
	for i := range objs {
		objs[i] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name:            fmt.Sprintf("cm-%d", i),
			Namespace:       fmt.Sprintf("ns-%d", i%10),
			ResourceVersion: strconv.Itoa(i),
			Labels:          map[string]string{"app": "bench"},
		}}
	}
	return objs
}

// trackedQueue counts the items handed out and not yet done, so the benchmark knows when every
// reconcile has finished.
type trackedQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	inFlight atomic.Int64
}

func (q *trackedQueue) Get() (reconcile.Request, bool) {
	item, shutdown := q.TypedRateLimitingInterface.Get()
	if !shutdown {
		q.inFlight.Add(1)
	}
	return item, shutdown
}

func (q *trackedQueue) Done(item reconcile.Request) {
	q.TypedRateLimitingInterface.Done(item)
	q.inFlight.Add(-1)
}

func bench(objs []cm, events, workers int, withMetrics bool) (int64, float64) {
	var reconciles, handled atomic.Int64
	var tracked *trackedQueue
	ready := make(chan struct{})
	ctrl, err := controller.NewTypedUnmanaged[reconcile.Request](fmt.Sprintf("bench-%d", workers), controller.TypedOptions[reconcile.Request]{
		MaxConcurrentReconciles: workers,
		SkipNameValidation:      ptr.To(true),
		// The client-go queue below and, as before v0.23, DefaultTypedControllerRateLimiter
		// (with the priority queue on, the default rate limiter is the per-item exponential one).
		UsePriorityQueue: ptr.To(false),
		Reconciler: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			reconciles.Add(1)
			return reconcile.Result{}, nil
		}),
		NewQueue: func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
			config := workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{}
			if withMetrics {
				config.Name = name // controller-runtime's default queue with UsePriorityQueue false
			}
			tracked = &trackedQueue{TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(rl, config)}
			close(ready)
			return tracked
		},
	})
	if err != nil {
		panic(err)
	}
	ch := make(chan event.TypedGenericEvent[cm], 4096)
	enqueue := handler.TypedEnqueueRequestForObject[cm]{}
	counting := handler.TypedFuncs[cm, reconcile.Request]{
		GenericFunc: func(ctx context.Context, e event.TypedGenericEvent[cm], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			handled.Add(1)
			enqueue.Generic(ctx, e, q)
		},
	}
	wanted := predicate.NewTypedPredicateFuncs(func(o cm) bool { return o.Labels["app"] == "bench" })
	if err := ctrl.Watch(source.Channel(ch, counting, source.WithPredicates[cm, reconcile.Request](wanted))); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- ctrl.Start(ctx) }()
	<-ready
	time.Sleep(50 * time.Millisecond) // let the source and the workers start

	start := time.Now()
	for i := 0; i < events; i++ {
		ch <- event.TypedGenericEvent[cm]{Object: objs[i%len(objs)]}
	}
	idle := func() bool {
		return handled.Load() == int64(events) && tracked.Len() == 0 && tracked.inFlight.Load() == 0
	}
	for !idle() || func() bool { time.Sleep(200 * time.Microsecond); return !idle() }() {
		time.Sleep(200 * time.Microsecond)
	}
	secs := time.Since(start).Seconds()
	cancel()
	if err := <-stopped; err != nil {
		panic(err)
	}
	return reconciles.Load(), secs
}

func main() {
	log.SetLogger(logr.Discard())
	events, nObjects, workerCounts := 1_000_000, 10_000, []int{1, 4}
	args := os.Args[1:]
	if len(args) > 0 {
		events, _ = strconv.Atoi(args[0])
	}
	if len(args) > 1 {
		nObjects, _ = strconv.Atoi(args[1])
	}
	if len(args) > 2 {
		workerCounts = nil
		for _, w := range strings.Split(args[2], ",") {
			if n, err := strconv.Atoi(w); err == nil {
				workerCounts = append(workerCounts, n)
			}
		}
	}
	if os.Getenv("GOMAXPROCS") == "" {
		threads := 2
		if t, err := strconv.Atoi(os.Getenv("BENCH_THREADS")); err == nil && t > 0 {
			threads = t
		}
		runtime.GOMAXPROCS(threads)
	}
	withMetrics := os.Getenv("BENCH_METRICS") != ""
	objs := objects(nObjects)
	for _, workers := range workerCounts {
		runtime.GC()
		ops, secs := bench(objs, events, workers, withMetrics)
		fmt.Printf("controller-bench impl=controller-runtime workers=%d ops=%d secs=%.3f rate=%.0f\n", workers, ops, secs, float64(ops)/secs)
	}
}
