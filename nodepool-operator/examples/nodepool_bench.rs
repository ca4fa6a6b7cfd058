//! Benchmark: converge 1,000 nodes across 10 pools from a cold start on the embedded API server,
//! then again after every pool's spec changes. Prints seconds and peak RSS.
//!
//! `cargo run --release -p nodepool-operator --example nodepool_bench [-- NODES POOLS]`
//!
//! Set-up (not timed): an embedded API server with the nodes, the pools created and every node
//! labelled into pool `i % POOLS`, before any operator runs. Cold start (timed): the operator
//! starts (manager, cache sync of nodes, pools and RuntimeClasses, webhook server) and works until
//! the cluster matches every pool (checked through the API by
//! `embedded::convergence_problems`: labels, taints, records, RuntimeClasses, Ready statuses with
//! counts and observed generations). Spec change (timed): every pool's label value changes and its
//! taint value changes, through the webhooks, and the operator converges again.
//!
//! Peak RSS is `VmHWM` from /proc/self/status: the whole process, i.e. the operator *and* the
//! embedded API server holding every object (`VmRSS` before the operator starts is printed too,
//! to show the server's share).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use nodepool_operator::crd::NodePool;
use nodepool_operator::embedded::Embedded;
use serde_json::json;

fn proc_status(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    text.lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn mib(kib: Option<u64>) -> String {
    kib.map_or_else(
        || "unknown".to_owned(),
        |k| format!("{:.1}", k as f64 / 1024.0),
    )
}

/// Merge-patches the object `name` of `api`.
async fn merge<K>(api: &Api<K>, name: &str, patch: &serde_json::Value) -> Result<(), kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map(|_| ())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let nodes: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(1000);
    let pools: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(10);

    let env = Embedded::start(nodes).await?;
    let node_api: Api<Node> = Api::all(env.client.clone());
    let pool_api: Api<NodePool> = Api::all(env.client.clone());
    for p in 0..pools {
        let pool: NodePool = serde_json::from_value(json!({
            "apiVersion": "nodes.lailin.xyz/v1", "kind": "NodePool",
            "metadata": {"name": format!("pool{p}"), "labels": {"node-pool.lailin.xyz": format!("pool{p}")}},
            "spec": {"labels": {format!("node-pool.lailin.xyz/pool{p}"): "1"},
                     "taints": [{"key": "node-pool.lailin.xyz", "value": format!("pool{p}"), "effect": "NoSchedule"}],
                     "handler": "runc"}
        }))?;
        pool_api.create(&PostParams::default(), &pool).await?;
    }
    for i in 0..nodes {
        let patch = json!({"metadata": {"labels": {format!("node-role.kubernetes.io/pool{}", i % pools): ""}}});
        merge(&node_api, &format!("envtest-node-{i}"), &patch).await?;
    }
    let rss_before = proc_status("VmRSS:");

    let mut options = env.run_options();
    options.max_concurrent_reconciles = 4;
    let start = Instant::now();
    let op = env.start_operator(&options, true).await?;
    env.wait_converged(Duration::from_secs(120)).await?;
    let cold = start.elapsed();
    println!(
        "nodepool-bench phase=cold-start nodes={nodes} pools={pools} secs={:.3}",
        cold.as_secs_f64()
    );

    let start = Instant::now();
    for p in 0..pools {
        let patch = json!({"spec": {
            "labels": {format!("node-pool.lailin.xyz/pool{p}"): "2"},
            "taints": [{"key": "node-pool.lailin.xyz", "value": format!("pool{p}-v2"), "effect": "NoSchedule"}]}});
        merge(&pool_api, &format!("pool{p}"), &patch).await?;
    }
    env.wait_converged(Duration::from_secs(120)).await?;
    let change = start.elapsed();
    println!(
        "nodepool-bench phase=spec-change nodes={nodes} pools={pools} secs={:.3}",
        change.as_secs_f64()
    );
    op.stop().await?;
    println!(
        "nodepool-bench peak_rss_mib={} rss_before_operator_mib={} (one process: operator + embedded API server)",
        mib(proc_status("VmHWM:")),
        mib(rss_before)
    );
    Ok(())
}
