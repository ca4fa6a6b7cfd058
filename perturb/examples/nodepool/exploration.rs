//! The NodePool operator's exploration, shared by `examples/nodepool` and `tests/nodepool.rs`.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::node::v1::RuntimeClass;
use kcr_controller::Manager;
use kcr_envtest::TestApiServer;
use kcr_perturb::{Exploration, Scenario, manager_options};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use nodepool_operator::crd::{NodePool, NodePoolSpec, membership_label};
use nodepool_operator::operator::register_controller;
use serde_json::json;

/// The three nodes of every run's server.
pub const NODES: usize = 3;

/// The operator as `nodepool-operator run` starts it, minus listeners and webhooks: its one
/// controller on a Manager.
pub async fn start(client: kube::Client) -> anyhow::Result<Manager> {
    let mgr = Manager::new(client, manager_options().field_owner("nodepool-operator")).await?;
    register_controller(&mgr, 1)?;
    Ok(mgr)
}

fn node(i: usize) -> String {
    format!("envtest-node-{i}")
}

async fn label_node(nodes: &Api<Node>, i: usize, pool: &str, join: bool) -> anyhow::Result<()> {
    let value = if join { json!("") } else { json!(null) };
    let patch = json!({"metadata": {"labels": {membership_label(pool): value}}});
    nodes
        .patch(&node(i), &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Pools created, nodes joining and leaving, a pool changed, a pool deleted.
pub async fn scenario(ctx: Scenario) -> anyhow::Result<()> {
    let pools: Api<NodePool> = Api::all(ctx.client());
    let nodes: Api<Node> = Api::all(ctx.client());
    let pp = PostParams::default();

    let mut a = NodePoolSpec::default();
    a.labels.insert("node-pool.lailin.xyz/a".into(), "1".into());
    pools.create(&pp, &NodePool::new("a", a)).await?;
    let b: NodePoolSpec = serde_json::from_value(json!({
        "labels": {"node-pool.lailin.xyz/b": "1"},
        "taints": [{"key": "node-pool.lailin.xyz/b", "value": "x", "effect": "NoSchedule"}],
    }))?;
    pools.create(&pp, &NodePool::new("b", b)).await?;
    ctx.settle().await;

    label_node(&nodes, 0, "a", true).await?;
    label_node(&nodes, 1, "a", true).await?;
    label_node(&nodes, 2, "b", true).await?;
    ctx.settle().await;

    label_node(&nodes, 1, "a", false).await?;
    ctx.settle().await;

    let change = json!({"spec": {"labels": {"node-pool.lailin.xyz/a": "2"}}});
    pools
        .patch("a", &PatchParams::default(), &Patch::Merge(&change))
        .await?;
    ctx.settle().await;

    pools.delete("b", &DeleteParams::default()).await?;
    ctx.settle().await;
    Ok(())
}

/// The exploration: every class, a fresh server with [`NODES`] nodes per run.
pub fn exploration() -> Exploration {
    Exploration::new("nodepool")
        .server(|| TestApiServer::builder().nodes(NODES).start())
        .crd::<NodePool>()
        .compare::<NodePool>()
        .compare::<Node>()
        .compare::<RuntimeClass>()
        .invariant("a node carries the labels of its pools only", |snap| {
            for node in snap.objects("Node") {
                let labels = node["metadata"]["labels"].as_object();
                let name = node["metadata"]["name"].as_str().unwrap_or("?");
                for (key, _) in labels.into_iter().flatten() {
                    if let Some(pool) = key.strip_prefix("node-pool.lailin.xyz/") {
                        let member =
                            labels.is_some_and(|l| l.contains_key(&membership_label(pool)));
                        let pool_exists = snap
                            .objects("NodePool")
                            .iter()
                            .any(|p| p["metadata"]["name"] == pool);
                        if !member && !pool_exists {
                            return Err(format!(
                                "node {name} carries {key} of pool {pool}, which it is not in \
                                 and which does not exist"
                            ));
                        }
                    }
                }
            }
            Ok(())
        })
        .quiet_window(Duration::from_millis(150))
        .hold_window(Duration::from_millis(800))
        .controller(start)
        .scenario(scenario)
}
