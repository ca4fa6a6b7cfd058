#!/usr/bin/env python3
"""Regenerates envtest/src/bootstrap/rbac.json: kube-apiserver's bootstrap RBAC policy as the
real backend stores it (every ClusterRole, ClusterRoleBinding, Role and RoleBinding labelled
kubernetes.io/bootstrapping=rbac-defaults), without uid, resourceVersion and creationTimestamp,
the time of each managedFields entry replaced by "<start>".

Usage (after a Kubernetes bump; the control plane of tools/control-plane/build.sh):
  KCR_ENVTEST_BACKEND=real cargo run -q -p kcr-envtest-cli -- --port 0 --kubeconfig /tmp/kc.yaml &
  python3 envtest/tools/bootstrap_rbac.py /tmp/kc.yaml > envtest/src/bootstrap/rbac.json
"""
import json
import sys
import urllib.request

KINDS = [
    ("ClusterRole", "clusterroles"),
    ("ClusterRoleBinding", "clusterrolebindings"),
    ("Role", "roles"),
    ("RoleBinding", "rolebindings"),
]
META_KEYS = ["name", "namespace", "labels", "annotations", "managedFields"]


def server_of(kubeconfig_path):
    for line in open(kubeconfig_path):
        line = line.strip()
        if line.startswith("server:"):
            return line.split(":", 1)[1].strip()
    sys.exit(f"no server: line in {kubeconfig_path}")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    server = server_of(sys.argv[1])
    out = []
    for kind, plural in KINDS:
        url = (f"{server}/apis/rbac.authorization.k8s.io/v1/{plural}"
               "?labelSelector=kubernetes.io%2Fbootstrapping%3Drbac-defaults")
        items = json.load(urllib.request.urlopen(url))["items"]
        items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        for o in items:
            meta = o["metadata"]
            for mf in meta.get("managedFields", []):
                mf["time"] = "<start>"
            o["metadata"] = {k: meta[k] for k in META_KEYS if k in meta}
            o = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, **o}
            out.append(o)
    if not out:
        sys.exit("no bootstrap RBAC objects found: is the server a real kube-apiserver?")
    print("[")
    print(",\n".join(json.dumps(o, separators=(",", ":")) for o in out))
    print("]")


if __name__ == "__main__":
    main()
