#!/usr/bin/env bash
# Benchmarks of kcr against kube-runtime and the Go originals (client-go, controller-runtime),
# side by side in one run. See BENCHMARKS.md for results and method.
#
#   bench/run.sh queue                          # work queues, workloads W1..W4
#   bench/run.sh controller [events objects workers]   # no-op controller throughput (default 1000000 10000 1,4)
#   bench/run.sh e2e --objects 1000[,10000] [--rounds R]   # controllers on a real API server;
#                                               # R rounds, each in a rotated order (default 1)
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

run_queue() { run_pair queue kcr-queue; }
run_controller() { run_pair controller kcr-controller "$@"; }

cluster_pid=""
stop_cluster() {
  if [[ -n $cluster_pid ]]; then
    kill "$cluster_pid" 2>/dev/null || true
    wait "$cluster_pid" 2>/dev/null || true
    cluster_pid=""
  fi
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

cmd=${1:-}
shift || true
case $cmd in
  queue) run_queue ;;
  controller) run_controller "$@" ;;
  e2e) run_e2e "$@" ;;
  all) run_queue; run_controller; run_e2e --objects 1000,10000 ;;
  *) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
echo "# raw output in $out" >&2
