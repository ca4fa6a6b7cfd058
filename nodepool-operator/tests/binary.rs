//! The production binary: `nodepool-operator run` with the Deployment's flags, connecting through
//! a kubeconfig (to kcr-envtest), reconciles, holds the Lease `97acaccf.lailin.xyz`, and shuts
//! down cleanly (exit 0) on SIGTERM.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use nodepool_operator::crd::NodePool;
use nodepool_operator::embedded::{Embedded, wait_converged};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_reconciles_and_exits_zero_on_sigterm() {
    // A server of its own: the operator (a child process) manages pools and nodes cluster-wide.
    let env = Embedded::start(2).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    env.server.write_kubeconfig(&kubeconfig).unwrap();
    let certs = dir.path().join("certs");
    kcr_webhook::CertificateAuthority::generate("test CA")
        .unwrap()
        .issue(&["127.0.0.1"])
        .unwrap()
        .write_to_dir(&certs)
        .unwrap();

    let mut child = Command::new(env!("CARGO_BIN_EXE_nodepool-operator"))
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "warn")
        .args([
            "run",
            "--leader-elect",
            "--leader-election-namespace=default",
            "--metrics-bind-address=127.0.0.1:0",
            "--health-probe-bind-address=127.0.0.1:0",
            "--webhook-port=0",
            "--max-concurrent-reconciles=2",
        ])
        .arg(format!("--cert-dir={}", certs.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();

    let pools: Api<NodePool> = Api::all(env.client.clone());
    let pool: NodePool = serde_json::from_value(json!({
        "apiVersion": "nodes.lailin.xyz/v1", "kind": "NodePool",
        "metadata": {"name": "worker", "labels": {"node-pool.lailin.xyz": "worker"}},
        "spec": {"labels": {"node-pool.lailin.xyz/worker": "10"},
                 "taints": [{"key": "node-pool.lailin.xyz", "value": "worker", "effect": "NoSchedule"}],
                 "handler": "runc"}
    }))
    .unwrap();
    pools.create(&PostParams::default(), &pool).await.unwrap();
    let nodes: Api<Node> = Api::all(env.client.clone());
    let join = json!({"metadata": {"labels": {"node-role.kubernetes.io/worker": ""}}});
    nodes
        .patch(
            "envtest-node-0",
            &PatchParams::default(),
            &Patch::Merge(&join),
        )
        .await
        .unwrap();
    wait_converged(&env.client, Duration::from_secs(30))
        .await
        .unwrap();
    let lease = Api::<Lease>::namespaced(env.client.clone(), "default")
        .get("97acaccf.lailin.xyz")
        .await
        .unwrap();
    assert!(lease.spec.unwrap().holder_identity.is_some());

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let start = Instant::now();
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no exit 20 s after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(exit.success(), "exit status {exit}");
    // Released on graceful shutdown so that a successor takes over at once.
    let lease = Api::<Lease>::namespaced(env.client.clone(), "default")
        .get("97acaccf.lailin.xyz")
        .await
        .unwrap();
    assert_eq!(lease.spec.unwrap().holder_identity, None);
}
