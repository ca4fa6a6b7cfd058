// Command queue runs the four workloads of kcr-queue's throughput example (queue/examples/throughput.rs)
// against client-go's typed rate-limiting work queue and controller-runtime's priority queue.
//
//	go run ./cmd/queue [client-go,controller-runtime-pq]
//
// It prints one line per result, the format of the Rust example:
// `queue-bench impl=<client-go|controller-runtime-pq> workload=<W1|W2|W3|W4> ops=<n> secs=<float> rate=<ops/s>`.
//
//   - W1: one producer goroutine adds 1,000,000 distinct keys while one consumer goroutine gets and
//     completes (Done) all of them (ops = keys).
//   - W2: 100 rounds of: add 1,000 keys x 10 duplicates each (ten passes over the 1,000 keys),
//     then get and complete the 1,000, all on one goroutine (ops = adds).
//   - W3: as W1, every add delayed by 1 us with AddAfter (ops = keys).
//   - W4: 4 producer goroutines and 4 worker goroutines, 1,000,000 distinct keys in total (ops = keys).
//
// Keys are uint64. Both queues are unnamed, so neither records metrics (kcr's queue records into
// the `metrics` facade, which is a no-op without an installed recorder, as in the Rust example).
// GOMAXPROCS is Go's default (one P per core), as the Rust example runs one tokio worker per core.
// Every workload gets a fresh queue, shut down afterwards, and a GC before it starts. A workload
// still running after BENCH_DEADLINE_SECS (default 30) is stopped: its line then counts the ops
// completed by then and ends in `incomplete=1 of=<ops of the full workload>`. BENCH_KEYS changes
// the 1,000,000 keys of W1, W3 and W4; BENCH_CPUPROFILE=<file> writes a pprof CPU profile.
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
)

var keys = envInt("BENCH_KEYS", 1_000_000)

const (
	w2Rounds = 100
	w2Keys   = 1_000
	w2Dups   = 10
	w4Tasks  = 4
	delay    = time.Microsecond
)

// queue is what both implementations offer and the workloads use.
type queue = workqueue.TypedRateLimitingInterface[uint64]

func newClientGo() queue {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[uint64](),
		workqueue.TypedRateLimitingQueueConfig[uint64]{},
	)
}

func newPriorityQueue() queue {
	return priorityqueue.New[uint64]("")
}

func report(impl, workload string, ops int, secs float64, want int) {
	line := fmt.Sprintf("queue-bench impl=%s workload=%s ops=%d secs=%.4f rate=%.0f", impl, workload, ops, secs, float64(ops)/secs)
	if ops < want {
		// Stopped at the deadline: the rate is over the ops completed by then.
		line += fmt.Sprintf(" incomplete=1 of=%d", want)
	}
	fmt.Println(line)
}

// run is one workload on a fresh queue. At the deadline the queue is shut down and the workload
// stops, returning the ops completed so far.
type run struct {
	q       queue
	expired atomic.Bool
	once    sync.Once
}

func (r *run) shutDown() { r.once.Do(r.q.ShutDown) }

func (r *run) w1(after time.Duration) int {
	var wg sync.WaitGroup
	var done int
	wg.Add(2)
	go func() {
		defer wg.Done()
		for key := uint64(0); key < uint64(keys) && !r.expired.Load(); key++ {
			if after > 0 {
				r.q.AddAfter(key, after)
			} else {
				r.q.Add(key)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for done < keys && !r.expired.Load() {
			item, shutdown := r.q.Get()
			if shutdown {
				return
			}
			r.q.Done(item)
			done++
		}
	}()
	wg.Wait()
	return done
}

func (r *run) w2() int {
	ops := 0
	for round := 0; round < w2Rounds && !r.expired.Load(); round++ {
		for d := 0; d < w2Dups; d++ {
			for key := uint64(0); key < w2Keys; key++ {
				r.q.Add(key)
			}
		}
		for i := 0; i < w2Keys; i++ {
			item, shutdown := r.q.Get()
			if shutdown {
				return ops
			}
			r.q.Done(item)
		}
		ops += w2Dups * w2Keys
	}
	if ops == w2Rounds*w2Dups*w2Keys && r.q.Len() != 0 {
		panic("queue not empty after W2")
	}
	return ops
}

func (r *run) w4() int {
	var processed atomic.Int64
	var wg sync.WaitGroup
	per := uint64(keys / w4Tasks)
	for p := uint64(0); p < w4Tasks; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for key := p * per; key < (p+1)*per && !r.expired.Load(); key++ {
				r.q.Add(key)
			}
		}()
	}
	for w := 0; w < w4Tasks; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !r.expired.Load() {
				item, shutdown := r.q.Get()
				if shutdown {
					return
				}
				r.q.Done(item)
				if processed.Add(1) == int64(keys) {
					r.shutDown()
				}
			}
		}()
	}
	wg.Wait()
	return int(processed.Load())
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func main() {
	if path := os.Getenv("BENCH_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	impls := []string{"client-go", "controller-runtime-pq"}
	if len(os.Args) > 1 {
		impls = strings.Split(os.Args[1], ",")
	}
	constructors := map[string]func() queue{
		"client-go":             newClientGo,
		"controller-runtime-pq": newPriorityQueue,
	}
	deadline := time.Duration(envInt("BENCH_DEADLINE_SECS", 30)) * time.Second
	workloads := []struct {
		name string
		ops  int
		run  func(*run) int
	}{
		{"W1", keys, func(r *run) int { return r.w1(0) }},
		{"W2", w2Rounds * w2Dups * w2Keys, (*run).w2},
		{"W3", keys, func(r *run) int { return r.w1(delay) }},
		{"W4", keys, (*run).w4},
	}
	for _, wl := range workloads {
		for _, impl := range impls {
			newQueue, ok := constructors[impl]
			if !ok {
				fmt.Fprintf(os.Stderr, "unknown impl %q (client-go, controller-runtime-pq)\n", impl)
				os.Exit(2)
			}
			runtime.GC()
			r := &run{q: newQueue()}
			start := time.Now()
			timer := time.AfterFunc(deadline, func() {
				r.expired.Store(true)
				r.shutDown()
			})
			ops := wl.run(r)
			secs := time.Since(start).Seconds()
			timer.Stop()
			r.shutDown()
			report(impl, wl.name, ops, secs, wl.ops)
		}
	}
}
