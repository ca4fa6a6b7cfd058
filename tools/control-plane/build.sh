#!/usr/bin/env bash
# Builds the test control plane from Go modules: kube-apiserver, kube-controller-manager, kubectl
# (k8s.io/kubernetes, pinned in a go.mod) and etcd (go.etcd.io/etcd/server/v3 at the version that
# Kubernetes release is tested with, cmd/etcd there).
#
# Usage: build.sh [MINOR]    e.g. build.sh, build.sh 1.34
# Each supported Kubernetes minor release has a Go module of its own, v<MINOR>/ here (go.mod,
# go.sum, cmd/etcd). Without an argument (or KCR_K8S_MINOR) the newest one is built: the version
# CI and the real backend use. The oldest is the other end of the supported range.
#
# Output: target/control-plane/<version>-<os>-<arch>/ at the workspace root (override the root with
# CARGO_TARGET_DIR), laid out as setup-envtest lays out a version: the binaries side by side, so
# KUBEBUILDER_ASSETS may point here or at a setup-envtest directory. Several versions live side by
# side; kcr-envtest's real backend takes the newest unless KUBEBUILDER_ASSETS names one. The last
# line printed is that directory. With every binary present and built from that go.mod, it only
# checks and prints.
#
# Go's module and build caches (go env GOMODCACHE GOCACHE) make a second cold build fast; they are
# Go's own folders, outside the repository.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

minor="${1:-${KCR_K8S_MINOR:-}}"
if [[ -z "$minor" ]]; then
  minor="$(cd "$here" && ls -d v1.* | sed 's/^v//' | sort -t. -k1,1n -k2,2n | tail -n 1)"
fi
minor="${minor#v}"
if [[ ! -f "$here/v$minor/go.mod" ]]; then
  echo "build.sh: no module for Kubernetes $minor; supported: $(cd "$here" && ls -d v1.* | tr '\n' ' ')" >&2
  exit 2
fi
cd "$here/v$minor"

# The Kubernetes release, read from go.mod so the two cannot disagree.
k8s_version="$(awk '$1 == "k8s.io/kubernetes" { sub(/^v/, "", $2); print $2; exit }' go.mod)"
if [[ -z "$k8s_version" ]]; then
  echo "build.sh: no k8s.io/kubernetes requirement in $here/v$minor/go.mod" >&2
  exit 1
fi
goos="$(go env GOOS)"
goarch="$(go env GOARCH)"
target_root="${CARGO_TARGET_DIR:-$root/target}"
case "$target_root" in /*) ;; *) target_root="$root/$target_root" ;; esac
out="$target_root/control-plane/${k8s_version}-${goos}-${goarch}"
mkdir -p "$out"

binaries=(kube-apiserver kube-controller-manager kubectl etcd)
# A stamp of the inputs: a change to go.mod, go.sum, the etcd main or the Go version rebuilds.
stamp="$( (cat go.mod go.sum cmd/etcd/main.go; go version) | sha256sum | cut -d' ' -f1)"
if [[ -f "$out/.stamp" && "$(cat "$out/.stamp")" == "$stamp" ]]; then
  all_there=1
  for b in "${binaries[@]}"; do [[ -x "$out/$b" ]] || all_there=0; done
  if [[ "$all_there" == 1 ]]; then
    echo "control plane v$k8s_version already built" >&2
    echo "$out"
    exit 0
  fi
fi

# What `kube-apiserver --version` and `kubectl version` report, as a release build sets them.
k8s_minor="$(echo "$k8s_version" | cut -d. -f2)"
build_date="$(date -u -d "@$(stat -c %Y go.sum)" +%Y-%m-%dT%H:%M:%SZ)"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=v$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$k8s_minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done

export CGO_ENABLED=0
start=$(date +%s)
echo "building control plane v$k8s_version into $out (a cold build takes a while)" >&2
rm -f "$out/.stamp"
go build -trimpath -ldflags "$ldflags" -o "$out/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kubectl \
  ./cmd/etcd
for b in "${binaries[@]}"; do
  [[ -x "$out/$b" ]] || { echo "build.sh: $out/$b was not built" >&2; exit 1; }
done
echo "$stamp" > "$out/.stamp"
echo "built in $(( $(date +%s) - start )) s" >&2
echo "$out"
