#!/usr/bin/env bash
# Benchmarks of kcr against kube-runtime and the Go originals (client-go, controller-runtime),
# side by side in one run. See BENCHMARKS.md for results and method.
#
#   bench/run.sh queue [--rounds R] [--hog]     # work queues, workloads W1..W4; R rounds, median
#                                               # of per-round ratios; --hog: one core kept busy
#   bench/run.sh controller [events objects workers]   # no-op controller throughput (default 1000000 10000 1,4)
#   bench/run.sh e2e --objects 1000[,10000] [--rounds R]   # controllers on a real API server;
#                                               # R rounds, each in a rotated order (default 1)
#   bench/run.sh scale --objects 1000,10000,100000 [--rounds R] [--kinds bench,configmap]
#                      [--modes full,meta] [--lists paginated,cache,streaming] [--managed-fields default,strip]
#                      [--steady-secs S]        # synced caches of N objects on a real API server:
#                                               # sync time, peak/steady RSS, CPU, bytes per object,
#                                               # the API server's CPU and peak RSS per run; list
#                                               # modes and managedFields variants at the largest N
#   bench/run.sh all                            # all three (e2e with 1000,10000)
#
# Every result line is printed as it comes, then a summary table (ratios). Raw output and the
# e2e latency files and SVG plot go to $BENCH_OUT (default target/bench-results/<time>).
# Needs cargo, go (module proxy or a filled module cache) and python3; e2e needs the control
# plane of tools/control-plane/build.sh (or KUBEBUILDER_ASSETS).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
gobin=$target/bench-go
out=${BENCH_OUT:-$target/bench-results/$(date -u +%Y%m%dT%H%M%S)}
mkdir -p "$out" "$gobin"
report() { python3 "$root/bench/report.py" "$@"; }

# BENCH_NO_BUILD=1 skips the builds (binaries already in place).
cargo_build() {
  [[ -n ${BENCH_NO_BUILD:-} ]] || cargo build --quiet "$@"
}
build_go() {
  [[ -n ${BENCH_NO_BUILD:-} && -x $gobin/$1 ]] || (cd "$root/bench/go" && go build -o "$gobin/" "./cmd/$1")
}

# run_pair <name> <crate> [args...]: kcr's `<name>_throughput` example of <crate> (kcr and
# kube-runtime), then the Go peers' `cmd/<name>` (client-go and controller-runtime), one log.
run_pair() {
  local name=$1 crate=$2
  shift 2
  echo "# building (cargo release, go)" >&2
  cargo_build --release -p "$crate" --example "${name}_throughput"
  build_go "$name"
  local log=$out/$name.txt
  : >"$log"
  "$target/release/examples/${name}_throughput" "$@" | tee -a "$log"
  "$gobin/$name" "$@" | tee -a "$log"
  echo
  report "$name" "$log" | tee "$out/$name.md"
}

# run_queue [--rounds R] [--hog]: R rounds of the queue workloads, kcr's process (kcr and
# kube-runtime) and the Go one (client-go and controller-runtime's priority queue) in an order
# that alternates by round; every line gets `round=<r>`, and the summary gives per-round ratios
# and their median. --hog keeps one core busy (a `yes` process pinned to the last core) for the
# whole run, to measure under load.
run_queue() {
  local rounds=1 hog=""
  while [[ $# -gt 0 ]]; do
    case $1 in
      --rounds) rounds=$2; shift 2 ;;
      --hog) hog=1; shift ;;
      *) echo "queue: unknown argument $1" >&2; exit 2 ;;
    esac
  done
  [[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "queue: --rounds wants a positive whole number, got '$rounds'" >&2; exit 2; }
  echo "# building (cargo release, go)" >&2
  cargo_build --release -p kcr-queue --example queue_throughput
  build_go queue
  local hog_pid=""
  if [[ -n $hog ]]; then
    taskset -c "$(($(nproc) - 1))" yes >/dev/null &
    hog_pid=$!
    trap 'kill $hog_pid 2>/dev/null || true' EXIT
    echo "# CPU hog: pid $hog_pid on core $(($(nproc) - 1))" >&2
  fi
  local log=$out/queue.txt round
  : >"$log"
  local rust=("$target/release/examples/queue_throughput") go=("$gobin/queue")
  for ((round = 1; round <= rounds; round++)); do
    echo "# queue round $round of $rounds" >&2
    if ((round % 2)); then
      "${rust[@]}" | sed "s/\$/ round=$round/" | tee -a "$log"
      "${go[@]}" | sed "s/\$/ round=$round/" | tee -a "$log"
    else
      "${go[@]}" | sed "s/\$/ round=$round/" | tee -a "$log"
      "${rust[@]}" | sed "s/\$/ round=$round/" | tee -a "$log"
    fi
  done
  [[ -z $hog_pid ]] || kill "$hog_pid"
  echo
  report queue "$log" | tee "$out/queue.md"
}
run_controller() { run_pair controller kcr-controller "$@"; }

cluster_pid=""
stop_cluster() {
  if [[ -n $cluster_pid ]]; then
    kill "$cluster_pid" 2>/dev/null || true
    wait "$cluster_pid" 2>/dev/null || true
    cluster_pid=""
  fi
}

# start_cluster: the real control plane (kcr-bench's `cluster` example, built in debug), its
# kubeconfig exported as KUBECONFIG; stop_cluster ends it (also on exit).
start_cluster() {
  local kubeconfig=$out/kubeconfig
  rm -f "$kubeconfig"
  "$target/debug/examples/cluster" "$kubeconfig" >"$out/cluster.log" 2>&1 &
  cluster_pid=$!
  trap stop_cluster EXIT
  for _ in $(seq 1 240); do
    grep -q "cluster ready" "$out/cluster.log" 2>/dev/null && break
    kill -0 "$cluster_pid" 2>/dev/null || { cat "$out/cluster.log" >&2; exit 1; }
    sleep 0.5
  done
  grep "cluster ready" "$out/cluster.log" >&2 || { echo "e2e: the control plane did not start" >&2; exit 1; }
  export KUBECONFIG=$kubeconfig
}

run_e2e() {
  local counts=1000 workers=4 rounds=1
  while [[ $# -gt 0 ]]; do
    case $1 in
      --objects) counts=$2; shift 2 ;;
      --workers) workers=$2; shift 2 ;;
      --rounds) rounds=$2; shift 2 ;;
      *) echo "e2e: unknown argument $1" >&2; exit 2 ;;
    esac
  done
  [[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "e2e: --rounds wants a positive whole number, got '$rounds'" >&2; exit 2; }
  echo "# building (cargo release bins, cargo debug cluster example, go)" >&2
  cargo_build --release -p kcr-bench --bins
  cargo_build -p kcr-bench --example cluster
  build_go e2e
  start_cluster
  declare -A bins=(
    [kcr]=$target/release/kcr-bench-kcr
    [kube-runtime]=$target/release/kcr-bench-kube
    [controller-runtime]=$gobin/e2e
  )
  local impls=(kcr kube-runtime controller-runtime)
  local n impl ns log pid round suffix order
  for n in ${counts//,/ }; do
    for ((round = 1; round <= rounds; round++)); do
      # Round r starts with the r-th implementation, so no one always runs first (on the
      # freshest server) or last; one round keeps the file names of earlier versions.
      order=()
      for i in 0 1 2; do order+=("${impls[$(((round - 1 + i) % 3))]}"); done
      suffix=""
      ((rounds == 1)) || suffix="-r$round"
      echo "# objects=$n round $round of $rounds: ${order[*]}" >&2
      for impl in "${order[@]}"; do
        ns=bench-$impl-$n$suffix
        log=$out/e2e-$impl-$n$suffix.txt
        : >"$log"
        # (a), (b): the controller runs while the objects are created.
        BENCH_T0_NS=$(date +%s%N) "${bins[$impl]}" --namespace "$ns" --objects "$n" --workers "$workers" \
          --latency-file "$out/latency-$impl-$n$suffix.txt" >>"$log" &
        pid=$!
        sleep 2 # the controller starts and syncs (an empty namespace) before the first create
        "$target/release/kcr-bench-create" --namespace "$ns" --objects "$n" | tee -a "$log"
        wait "$pid"
        sed -n '$s/^/live:    /p' "$log"
        # (c), (d): restarted over the N reconciled objects, full and metadata-only watch.
        BENCH_T0_NS=$(date +%s%N) "${bins[$impl]}" --namespace "$ns" --objects "$n" --workers "$workers" \
          --mode full | sed 's/^/restart: /' | tee -a "$log"
        BENCH_T0_NS=$(date +%s%N) "${bins[$impl]}" --namespace "$ns" --objects "$n" --workers "$workers" \
          --mode meta | sed 's/^/meta:    /' | tee -a "$log"
      done
    done
  done
  stop_cluster
  echo
  report e2e "$out" "$counts" "$rounds" | tee "$out/e2e.md"
}

# api_server_pid: the kube-apiserver started by the cluster example (a descendant of $cluster_pid).
api_server_pid() {
  python3 - "$cluster_pid" <<'PY'
import os, sys
children = {}
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        continue
    comm = stat[stat.index("(") + 1:stat.rindex(")")]
    ppid = stat[stat.rindex(")") + 2:].split()[1]
    children.setdefault(ppid, []).append((pid, comm))
todo = [sys.argv[1]]
while todo:
    for pid, comm in children.get(todo.pop(), []):
        if comm == "kube-apiserver":
            print(pid)
            sys.exit(0)
        todo.append(pid)
sys.exit("scale: no kube-apiserver under the cluster example")
PY
}

# proc_cpu_s <pid>: the process's CPU time (user + system) in seconds.
proc_cpu_s() {
  awk '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / 100 }' "/proc/$1/stat"
}

# proc_hwm_mib <pid>: the process's peak RSS (VmHWM) in MiB.
proc_hwm_mib() {
  awk '/^VmHWM:/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"
}

run_scale() {
  local counts=1000,10000,100000 rounds=1 kinds=bench,configmap modes=full,meta
  local lists=paginated,cache,streaming managed=default,strip steady=5
  while [[ $# -gt 0 ]]; do
    case $1 in
      --objects) counts=$2; shift 2 ;;
      --rounds) rounds=$2; shift 2 ;;
      --kinds) kinds=$2; shift 2 ;;
      --modes) modes=$2; shift 2 ;;
      --lists) lists=$2; shift 2 ;;
      --managed-fields) managed=$2; shift 2 ;;
      --steady-secs) steady=$2; shift 2 ;;
      *) echo "scale: unknown argument $1" >&2; exit 2 ;;
    esac
  done
  [[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "scale: --rounds wants a positive whole number, got '$rounds'" >&2; exit 2; }
  local mf
  for mf in ${managed//,/ }; do
    [[ $mf == default || $mf == keep || $mf == strip ]] || { echo "scale: --managed-fields wants default, keep or strip, got '$mf'" >&2; exit 2; }
  done
  echo "# building (cargo release bins, cargo debug cluster example, go)" >&2
  cargo_build --release -p kcr-bench --bins
  cargo_build -p kcr-bench --example cluster
  build_go scale
  start_cluster
  local api
  api=$(api_server_pid)
  declare -A bins=(
    [kcr]=$target/release/kcr-bench-scale-kcr
    [kube-runtime]=$target/release/kcr-bench-scale-kube
    [controller-runtime]=$gobin/scale
  )
  local impls=(kcr kube-runtime controller-runtime)
  local log=$out/scale.txt
  : >"$log"
  local n kind mode list impl round order ns cpu0 line extra variant managed_arg
  local largest=0
  for n in ${counts//,/ }; do ((n > largest)) && largest=$n; done
  for n in ${counts//,/ }; do
    for kind in ${kinds//,/ }; do
      ns=scale-$kind-$n
      echo "# creating $n ${kind}s in $ns" >&2
      "$target/release/kcr-bench-create" --namespace "$ns" --objects "$n" --kind "$kind" --concurrency 64 | tee -a "$log"
      for mode in ${modes//,/ }; do
        "$target/release/kcr-bench-floor" --namespace "$ns" --kind "$kind" --mode "$mode" | tee -a "$log"
      done
    done
    # Every count: paged lists, each implementation's own managedFields default. The largest
    # count also: each other list mode, and each asked managedFields setting that is not the
    # implementation's default (kcr strips, the peers keep).
    local variants=("paginated default")
    if ((n == largest)); then
      for list in ${lists//,/ }; do
        [[ $list == paginated ]] || variants+=("$list default")
      done
      for mf in ${managed//,/ }; do
        [[ $mf == default ]] || variants+=("paginated $mf")
      done
    fi
    for ((round = 1; round <= rounds; round++)); do
      order=()
      for i in 0 1 2; do order+=("${impls[$(((round - 1 + i) % 3))]}"); done
      for kind in ${kinds//,/ }; do
        for mode in ${modes//,/ }; do
          for variant in "${variants[@]}"; do
            read -r list mf <<<"$variant"
            echo "# objects=$n $kind $mode $list managedFields=$mf, round $round of $rounds: ${order[*]}" >&2
            for impl in "${order[@]}"; do
              # client-go's reflector lists from the watch cache already (its first list asks for
              # resourceVersion=0): its `paginated` run is that, so it has no `cache` run.
              [[ $impl == controller-runtime && $list == cache ]] && continue
              managed_arg=()
              if [[ $mf != default ]]; then
                # The implementation's own default is its default run; not again.
                [[ $impl == kcr && $mf == strip ]] && continue
                [[ $impl != kcr && $mf == keep ]] && continue
                managed_arg=(--managed-fields "$mf")
              fi
              # The API server's cost of this run: its CPU, and its peak RSS (reset first).
              echo 5 >"/proc/$api/clear_refs"
              cpu0=$(proc_cpu_s "$api")
              line=$(BENCH_T0_NS=$(date +%s%N) "${bins[$impl]}" --namespace "scale-$kind-$n" --objects "$n" \
                --kind "$kind" --mode "$mode" --list "$list" --steady-secs "$steady" "${managed_arg[@]}") || true
              extra=$(awk -v a="$cpu0" -v b="$(proc_cpu_s "$api")" 'BEGIN { printf "%.2f", b - a }')
              echo "$line apiserver_cpu_s=$extra apiserver_peak_rss_mib=$(proc_hwm_mib "$api") round=$round" | tee -a "$log"
            done
          done
        done
      done
    done
  done
  stop_cluster
  echo
  report scale "$log" | tee "$out/scale.md"
  python3 "$root/bench/report.py" scale-svg "$log" "$out/scale-rss.svg"
}

cmd=${1:-}
shift || true
case $cmd in
  queue) run_queue "$@" ;;
  controller) run_controller "$@" ;;
  e2e) run_e2e "$@" ;;
  scale) run_scale "$@" ;;
  all) run_queue; run_controller; run_e2e --objects 1000,10000 ;;
  *) awk 'NR > 1 && /^set -euo/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
echo "# raw output in $out" >&2
