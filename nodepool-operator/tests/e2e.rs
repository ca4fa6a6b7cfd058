//! End to end: the operator running as in production (manager, shared cache, controller, HTTPS
//! webhook server), pointed at kcr-envtest.
//!
//! Every test has an API server of its own (`Embedded::start`, a `TestApiServer` with
//! simulated nodes): the operator manages NodePools, Nodes and RuntimeClasses, all
//! cluster-scoped, cluster-wide (it cannot be scoped to a namespace), and the convergence
//! checks list every pool, node and RuntimeClass, so one test's operator would act on another
//! test's pools and nodes on a shared server.
//!
//! These tests wait on a real API server and real timers, so they poll (every 50 ms, bounded by
//! a timeout) for the state they expect; nothing sleeps and hopes.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use nodepool_operator::crd::{FINALIZER, NodePool};
use nodepool_operator::embedded::{Embedded, RunningOperator, convergence_problems};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(20);

/// Polls `check` until it holds, for [`TIMEOUT`]; the panic carries its last error.
async fn eventually<F, Fut>(what: &str, check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    kcr_envtest::eventually(what, TIMEOUT, check).await;
}

async fn converged(env: &Embedded) {
    let client = env.client.clone();
    eventually("converged", || {
        let client = client.clone();
        async move {
            let p = convergence_problems(&client)
                .await
                .map_err(|e| e.to_string())?;
            if p.is_empty() {
                Ok(())
            } else {
                Err(format!("{p:?}"))
            }
        }
    })
    .await;
}

fn pool(name: &str, spec: Value) -> NodePool {
    serde_json::from_value(json!({
        "apiVersion": "nodes.lailin.xyz/v1", "kind": "NodePool",
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap()
}

fn sample(name: &str) -> NodePool {
    pool(
        name,
        json!({
            "labels": {format!("node-pool.lailin.xyz/{name}"): "10"},
            "taints": [{"key": "node-pool.lailin.xyz", "value": name, "effect": "NoSchedule"}],
            "handler": "runc"
        }),
    )
}

async fn merge(api: &Api<Node>, node: &str, patch: Value) {
    api.patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

async fn join(api: &Api<Node>, node: &str, pool: &str) {
    merge(
        api,
        node,
        json!({"metadata": {"labels": {format!("node-role.kubernetes.io/{pool}"): ""}}}),
    )
    .await;
}

fn labels(n: &Node) -> BTreeMap<String, String> {
    n.labels().clone()
}

fn taints(n: &Node) -> Vec<(String, String, String)> {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|t| (t.key, t.value.unwrap_or_default(), t.effect))
        .collect()
}

fn t(k: &str, v: &str, e: &str) -> (String, String, String) {
    (k.into(), v.into(), e.into())
}

async fn start(nodes: usize) -> (Embedded, RunningOperator) {
    let env = Embedded::start(nodes).await.unwrap();
    let op = env.start_operator(&env.run_options(), true).await.unwrap();
    (env, op)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_lifecycle_create_change_repair_delete() {
    // A server of its own: the operator is cluster-wide (module docs).
    let (env, op) = start(3).await;
    let nodes: Api<Node> = Api::all(env.client.clone());
    let pools: Api<NodePool> = Api::all(env.client.clone());
    let rcs: Api<RuntimeClass> = Api::all(env.client.clone());
    let (n0, n1, n2) = ("envtest-node-0", "envtest-node-1", "envtest-node-2");
    // Mixed units; a person's label and taint on a member.
    for (n, cpu, mem) in [(n0, "4", "1Gi"), (n1, "500m", "512Mi")] {
        nodes
            .patch_status(
                n,
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": {"allocatable": {"cpu": cpu, "memory": mem}}})),
            )
            .await
            .unwrap();
    }
    merge(&nodes, n0, json!({"metadata": {"labels": {"team": "a"}}, "spec": {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}})).await;
    join(&nodes, n0, "worker").await;
    join(&nodes, n1, "worker").await;

    let created = pools
        .create(&PostParams::default(), &sample("worker"))
        .await
        .unwrap();
    converged(&env).await;

    for n in [n0, n1] {
        let node = nodes.get(n).await.unwrap();
        assert_eq!(labels(&node)["node-pool.lailin.xyz/worker"], "10");
        assert!(taints(&node).contains(&t("node-pool.lailin.xyz", "worker", "NoSchedule")));
    }
    let node0 = nodes.get(n0).await.unwrap();
    assert_eq!(labels(&node0)["team"], "a");
    assert!(taints(&node0).contains(&t("dedicated", "x", "NoSchedule")));
    let outsider = nodes.get(n2).await.unwrap();
    assert!(!labels(&outsider).contains_key("node-pool.lailin.xyz/worker"));
    assert!(taints(&outsider).is_empty());

    let rc = rcs.get("node-pool-worker").await.unwrap();
    assert_eq!(rc.handler, "runc");
    let sched = rc.scheduling.clone().unwrap();
    assert_eq!(
        sched.node_selector.unwrap()["node-pool.lailin.xyz/worker"],
        "10"
    );
    let tol = &sched.tolerations.unwrap()[0];
    assert_eq!(
        (
            tol.key.as_deref(),
            tol.operator.as_deref(),
            tol.value.as_deref(),
            tol.effect.as_deref()
        ),
        (
            Some("node-pool.lailin.xyz"),
            Some("Equal"),
            Some("worker"),
            Some("NoSchedule")
        )
    );
    let owner = &rc.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("NodePool", "worker", Some(true))
    );
    assert_eq!(Some(owner.uid.clone()), created.metadata.uid);

    let p = pools.get("worker").await.unwrap();
    let s = p.status.clone().unwrap();
    assert_eq!(s.node_count, 2);
    assert_eq!(s.allocatable["cpu"].0, "4500m");
    assert_eq!(s.allocatable["memory"].0, "1536Mi");
    assert_eq!(s.status, 200);
    assert_eq!(s.ready_condition().unwrap().status, "True");
    assert_eq!(s.observed_generation, p.metadata.generation);
    assert!(p.finalizers().iter().any(|f| f == FINALIZER));

    // Spec change: a label value changes, a label is added, the taint is dropped.
    pools
        .patch(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {
            "labels": {"node-pool.lailin.xyz/worker": "11", "node-pool.lailin.xyz/tier": "b"},
            "taints": null}})),
        )
        .await
        .unwrap();
    converged(&env).await;
    for n in [n0, n1] {
        let node = nodes.get(n).await.unwrap();
        assert_eq!(labels(&node)["node-pool.lailin.xyz/worker"], "11");
        assert_eq!(labels(&node)["node-pool.lailin.xyz/tier"], "b");
        assert!(
            !taints(&node).iter().any(|t| t.0 == "node-pool.lailin.xyz"),
            "{:?}",
            taints(&node)
        );
    }
    let node0 = nodes.get(n0).await.unwrap();
    assert_eq!(
        labels(&node0)["team"],
        "a",
        "a person's label is never touched"
    );
    assert_eq!(
        taints(&node0),
        vec![t("dedicated", "x", "NoSchedule")],
        "a person's taint is never touched"
    );
    let p = pools.get("worker").await.unwrap();
    assert_eq!(p.status.unwrap().observed_generation, p.metadata.generation);

    // The RuntimeClass deleted by hand is re-created; edited by hand is repaired.
    rcs.delete("node-pool-worker", &DeleteParams::default())
        .await
        .unwrap();
    converged(&env).await;
    let mut rc = rcs.get("node-pool-worker").await.unwrap();
    rc.scheduling.as_mut().unwrap().node_selector = Some(
        [("hacked".to_owned(), "yes".to_owned())]
            .into_iter()
            .collect(),
    );
    rcs.replace("node-pool-worker", &PostParams::default(), &rc)
        .await
        .unwrap();
    converged(&env).await;
    let rc = rcs.get("node-pool-worker").await.unwrap();
    assert!(
        !rc.scheduling
            .unwrap()
            .node_selector
            .unwrap()
            .contains_key("hacked")
    );
    // The handler is immutable (the API server refuses to change it), so a wrong handler comes
    // from someone deleting and re-creating the RuntimeClass: it is re-created with the spec's.
    let mut rc = rcs.get("node-pool-worker").await.unwrap();
    rc.handler = "other".into();
    let err = rcs
        .replace("node-pool-worker", &PostParams::default(), &rc)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("field is immutable"), "{err}");
    rc.metadata.resource_version = None;
    rc.metadata.uid = None;
    // The operator re-creates a deleted RuntimeClass at once, so our create may lose that race
    // (409): then delete and try again, a bounded number of times.
    let mut attempts = 0;
    loop {
        attempts += 1;
        rcs.delete("node-pool-worker", &DeleteParams::default())
            .await
            .unwrap();
        match rcs.create(&PostParams::default(), &rc).await {
            Ok(_) => break,
            Err(kube::Error::Api(e)) if e.code == 409 && attempts < 20 => continue,
            Err(e) => panic!("creating the RuntimeClass with the wrong handler: {e}"),
        }
    }
    converged(&env).await;
    assert_eq!(rcs.get("node-pool-worker").await.unwrap().handler, "runc");

    // Deletion: nodes cleaned, RuntimeClass gone, finalizer released, pool gone.
    pools
        .delete("worker", &DeleteParams::default())
        .await
        .unwrap();
    eventually("pool deleted", || {
        let pools = pools.clone();
        async move {
            match pools.get_opt("worker").await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(p) => Err(format!("still there: finalizers {:?}", p.finalizers())),
            }
        }
    })
    .await;
    eventually("runtimeclass gone", || {
        let rcs = rcs.clone();
        async move {
            match rcs
                .get_opt("node-pool-worker")
                .await
                .map_err(|e| e.to_string())?
            {
                None => Ok(()),
                Some(_) => Err("still there".into()),
            }
        }
    })
    .await;
    for n in [n0, n1] {
        let node = nodes.get(n).await.unwrap();
        let l = labels(&node);
        assert!(
            !l.keys().any(|k| k.starts_with("node-pool.lailin.xyz")),
            "{l:?}"
        );
        assert!(
            !node
                .annotations()
                .keys()
                .any(|k| k.starts_with("applied.node-pool.lailin.xyz/"))
        );
        assert!(
            l.contains_key("node-role.kubernetes.io/worker"),
            "membership is the person's label"
        );
    }
    let node0 = nodes.get(n0).await.unwrap();
    assert_eq!(labels(&node0)["team"], "a");
    assert_eq!(taints(&node0), vec![t("dedicated", "x", "NoSchedule")]);
    op.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_moved_from_pool_a_to_b_carries_exactly_b() {
    // A server of its own: the operator is cluster-wide (module docs).
    let (env, op) = start(2).await;
    let nodes: Api<Node> = Api::all(env.client.clone());
    let pools: Api<NodePool> = Api::all(env.client.clone());
    // Both pools use the taint key node-pool.lailin.xyz with NoSchedule (different values).
    pools
        .create(&PostParams::default(), &sample("a"))
        .await
        .unwrap();
    pools
        .create(&PostParams::default(), &sample("b"))
        .await
        .unwrap();
    let n = "envtest-node-0";
    merge(&nodes, n, json!({"metadata": {"labels": {"mine": "1"}}})).await;
    join(&nodes, n, "a").await;
    converged(&env).await;
    let node = nodes.get(n).await.unwrap();
    assert_eq!(labels(&node)["node-pool.lailin.xyz/a"], "10");
    assert_eq!(
        taints(&node),
        vec![t("node-pool.lailin.xyz", "a", "NoSchedule")]
    );

    // Relabel: drop a's role, add b's, in one write.
    merge(&nodes, n, json!({"metadata": {"labels": {"node-role.kubernetes.io/a": null, "node-role.kubernetes.io/b": ""}}})).await;
    converged(&env).await;
    let node = nodes.get(n).await.unwrap();
    let want: BTreeMap<String, String> = [
        ("node-role.kubernetes.io/b", ""),
        ("node-pool.lailin.xyz/b", "10"),
        ("mine", "1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let got: BTreeMap<String, String> = labels(&node)
        .into_iter()
        .filter(|(k, _)| !k.contains("kubernetes.io/") || k.starts_with("node-role."))
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        taints(&node),
        vec![t("node-pool.lailin.xyz", "b", "NoSchedule")]
    );
    let a = pools.get("a").await.unwrap().status.unwrap();
    let b = pools.get("b").await.unwrap().status.unwrap();
    assert_eq!(
        (a.node_count, b.node_count),
        (0, 1),
        "both pools were reconciled"
    );
    op.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_through_the_api_server() {
    // A server of its own: the operator is cluster-wide (module docs).
    let (env, op) = start(1).await;
    let pools: Api<NodePool> = Api::all(env.client.clone());
    // Refused at create, with every violation listed.
    let bad = pool(
        "bad",
        json!({"labels": {"xxx": "1"}, "taints": [{"key": "", "effect": "Never"}], "handler": "Not_DNS"}),
    );
    let err = pools
        .create(&PostParams::default(), &bad)
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err}")
    };
    for field in [
        "spec.labels[xxx]",
        "spec.taints[0].key",
        "spec.taints[0].effect",
        "spec.handler",
    ] {
        assert!(
            status.message.contains(field),
            "{} lacks {field}",
            status.message
        );
    }
    assert!(pools.get_opt("bad").await.unwrap().is_none());
    // The original's accepted keys; defaulting of labels and handler.
    let ok = pool(
        "ok",
        json!({"labels": {"node-pool.lailin.xyz": "a", "node-pool.lailin.xyz/xxx": "b"}}),
    );
    let created = pools.create(&PostParams::default(), &ok).await.unwrap();
    assert_eq!(created.spec.handler, "runc");
    assert_eq!(created.labels()["node-pool.lailin.xyz"], "ok");
    // Refused at update.
    let err = pools
        .patch(
            "ok",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"taints": [
            {"key": "node-pool.lailin.xyz", "effect": "NoSchedule"},
            {"key": "node-pool.lailin.xyz", "effect": "NoSchedule"}]}})),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err}")
    };
    assert!(
        status.message.contains("spec.taints[1]: Duplicate value"),
        "{}",
        status.message
    );
    assert!(pools.get("ok").await.unwrap().spec.taints.is_empty());
    converged(&env).await;
    op.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converges_through_500s_409s_and_dropped_watches() {
    // A server of its own: the operator is cluster-wide (module docs); it injects faults.
    let (env, op) = start(6).await;
    let nodes: Api<Node> = Api::all(env.client.clone());
    let pools: Api<NodePool> = Api::all(env.client.clone());
    let faults = env.server.faults();
    for i in 0..4 {
        join(&nodes, &format!("envtest-node-{i}"), "w").await;
    }
    faults.fail_next("patch", "nodes", 3, 500);
    faults.fail_next("patch", "nodes", 3, 409);
    faults.fail_next("create", "runtimeclasses", 2, 500);
    pools
        .create(&PostParams::default(), &sample("w"))
        .await
        .unwrap();
    faults.close_watches();
    converged(&env).await;
    assert_eq!(
        faults.pending_failures(),
        0,
        "every injected failure was hit"
    );
    // The failure surfaced in status at some point; now it is Ready again.
    let p = pools.get("w").await.unwrap();
    assert_eq!(p.status.unwrap().status, 200);
    // More trouble: status writes fail, watches drop and history is compacted (410 relist).
    faults.fail_next("patch", "nodepools", 2, 500);
    faults.compact_history();
    faults.close_watches();
    for i in 4..6 {
        join(&nodes, &format!("envtest-node-{i}"), "w").await;
    }
    converged(&env).await;
    assert_eq!(pools.get("w").await.unwrap().status.unwrap().node_count, 6);
    op.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_midway_loses_and_leaves_nothing() {
    // A server of its own: the operator is cluster-wide (module docs).
    let env = Embedded::start(40).await.unwrap();
    let nodes: Api<Node> = Api::all(env.client.clone());
    let pools: Api<NodePool> = Api::all(env.client.clone());
    let op = env.start_operator(&env.run_options(), true).await.unwrap();
    for p in ["a", "b"] {
        pools
            .create(&PostParams::default(), &sample(p))
            .await
            .unwrap();
    }
    for i in 0..40 {
        join(
            &nodes,
            &format!("envtest-node-{i}"),
            if i % 2 == 0 { "a" } else { "b" },
        )
        .await;
    }
    // Crash as soon as the first node carries a pool label (mid-way through the work).
    eventually("first node patched", || {
        let nodes = nodes.clone();
        async move {
            let list = nodes
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            if list.items.iter().any(|n| {
                n.labels().contains_key("node-pool.lailin.xyz/a")
                    || n.labels().contains_key("node-pool.lailin.xyz/b")
            }) {
                Ok(())
            } else {
                Err("none yet".into())
            }
        }
    })
    .await;
    op.kill().await;
    // While it is down, half of b's nodes move to a (the webhooks are down too, so pools cannot
    // change now: failurePolicy Fail).
    for i in (1..20).step_by(2) {
        merge(&nodes, &format!("envtest-node-{i}"), json!({"metadata": {"labels": {"node-role.kubernetes.io/b": null, "node-role.kubernetes.io/a": ""}}})).await;
    }
    let op = env.start_operator(&env.run_options(), true).await.unwrap();
    // Right after the restart, pool a changes.
    pools
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"labels": {"node-pool.lailin.xyz/a": "20"}}})),
        )
        .await
        .unwrap();
    converged(&env).await;
    let list = nodes.list(&ListParams::default()).await.unwrap();
    for n in &list.items {
        let l = labels(n);
        let in_a = l.contains_key("node-role.kubernetes.io/a");
        assert_eq!(
            l.get("node-pool.lailin.xyz/a").map(String::as_str),
            in_a.then_some("20"),
            "{}",
            n.name_any()
        );
        assert_eq!(
            l.contains_key("node-pool.lailin.xyz/b"),
            !in_a,
            "{}",
            n.name_any()
        );
        assert_eq!(taints(n).len(), 1, "{}: {:?}", n.name_any(), taints(n));
    }
    op.stop().await.unwrap();
}

async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .unwrap();
    tokio::spawn(conn);
    let req = http::Request::get(path)
        .header("host", "localhost")
        .body(Empty::<bytes::Bytes>::new())
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_metrics_and_leader_election_with_two_replicas() {
    // A server of its own: the operator is cluster-wide (module docs).
    let env = Embedded::start(2).await.unwrap();
    let pools: Api<NodePool> = Api::all(env.client.clone());
    let nodes: Api<Node> = Api::all(env.client.clone());
    let mut opts = env.run_options();
    opts.leader_elect = true;
    opts.leader_election_namespace = Some("default".into());
    opts.leader_election_timings = Some((
        Duration::from_secs(2),
        Duration::from_millis(1500),
        Duration::from_millis(200),
    ));
    opts.leader_election_identity = Some("replica-1".into());
    let first = env.start_operator(&opts, true).await.unwrap();
    opts.leader_election_identity = Some("replica-2".into());
    let second = env.start_operator(&opts, false).await.unwrap();

    for op in [&first, &second] {
        let probes = op.probes_addr.unwrap();
        assert_eq!(http_get(probes, "/healthz").await.0, 200);
        eventually("readyz", || async move {
            let (code, body) = http_get(probes, "/readyz").await;
            if code == 200 { Ok(()) } else { Err(body) }
        })
        .await;
    }
    eventually("one leader", || {
        let n = usize::from(first.is_leader()) + usize::from(second.is_leader());
        async move {
            if n == 1 {
                Ok(())
            } else {
                Err(format!("{n} leaders"))
            }
        }
    })
    .await;
    join(&nodes, "envtest-node-0", "w").await;
    pools
        .create(&PostParams::default(), &sample("w"))
        .await
        .unwrap();
    converged(&env).await;
    assert_eq!(
        usize::from(first.is_leader()) + usize::from(second.is_leader()),
        1,
        "exactly one leads"
    );
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(env.client.clone(), "default");
    let lease = leases.get("97acaccf.lailin.xyz").await.unwrap();
    let holder = lease.spec.unwrap().holder_identity.unwrap();
    assert!(holder == "replica-1" || holder == "replica-2", "{holder}");
    // Exactly one acted: only the leader's metrics count reconciles.
    let count = |text: &str| -> f64 {
        text.lines()
            .filter(|l| {
                l.starts_with("controller_runtime_reconcile_total")
                    && l.contains("controller=\"nodepool\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let m1 = http_get(first.metrics_addr.unwrap(), "/metrics").await;
    assert_eq!(m1.0, 200);
    assert!(
        m1.1.contains("controller_runtime_reconcile_total") || m1.1.contains("workqueue"),
        "{}",
        m1.1
    );
    // Both replicas share one process-wide metrics recorder here, so leadership is checked on
    // the lease and by handing over instead.
    assert!(count(&m1.1) >= 1.0);

    // Stop the leader: the other replica takes over and reconciles a new pool.
    let (leader, standby) = if holder == "replica-1" {
        (first, second)
    } else {
        (second, first)
    };
    assert!(leader.is_leader() && !standby.is_leader());
    leader.stop().await.unwrap();
    // In a cluster the webhook Service now routes to the remaining replica only.
    env.install_webhooks(standby.webhook_addr.unwrap())
        .await
        .unwrap();
    eventually("standby takes over", || {
        let l = standby.is_leader();
        async move { if l { Ok(()) } else { Err("not yet".into()) } }
    })
    .await;
    join(&nodes, "envtest-node-1", "v").await;
    pools
        .create(&PostParams::default(), &sample("v"))
        .await
        .unwrap();
    converged(&env).await;
    let lease = leases.get("97acaccf.lailin.xyz").await.unwrap();
    assert_ne!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some(holder.as_str())
    );
    standby.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_reconcile_is_reported_in_status_and_events_then_recovers() {
    // A server of its own: the operator is cluster-wide (module docs); it injects faults.
    let (env, op) = start(2).await;
    let nodes: Api<Node> = Api::all(env.client.clone());
    let pools: Api<NodePool> = Api::all(env.client.clone());
    join(&nodes, "envtest-node-0", "w").await;
    let faults = env.server.faults();
    faults.fail_next("patch", "nodes", 1_000_000, 500);
    pools
        .create(&PostParams::default(), &sample("w"))
        .await
        .unwrap();
    eventually("Ready=False NodePatchFailed", || {
        let pools = pools.clone();
        async move {
            let s = pools
                .get("w")
                .await
                .map_err(|e| e.to_string())?
                .status
                .unwrap_or_default();
            let ready = s.ready_condition().cloned();
            match ready {
                Some(c)
                    if c.status == "False" && c.reason == "NodePatchFailed" && s.status == 500 =>
                {
                    Ok(())
                }
                other => Err(format!("{other:?} status {}", s.status)),
            }
        }
    })
    .await;
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(env.client.clone(), "default");
    let client_events = events.clone();
    eventually("Warning event", || {
        let events = client_events.clone();
        async move {
            let list = events
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            if list.items.iter().any(|e| {
                e.type_.as_deref() == Some("Warning")
                    && e.reason.as_deref() == Some("NodePatchFailed")
            }) {
                Ok(())
            } else {
                Err(format!("{} events", list.items.len()))
            }
        }
    })
    .await;
    faults.clear();
    converged(&env).await;
    let list = events.list(&ListParams::default()).await.unwrap();
    assert!(
        list.items
            .iter()
            .any(|e| e.type_.as_deref() == Some("Normal")
                && e.reason.as_deref() == Some("NodesUpdated")),
        "a Normal NodesUpdated event after recovery"
    );
    assert!(
        list.items
            .iter()
            .any(|e| e.reason.as_deref() == Some("RuntimeClassCreated"))
    );
    op.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_cause_no_writes_and_status_is_not_rewritten() {
    // A server of its own: the operator is cluster-wide (module docs); it counts requests.
    let (env, op) = start(3).await;
    let nodes: Api<Node> = Api::all(env.client.clone());
    let pools: Api<NodePool> = Api::all(env.client.clone());
    for i in 0..3 {
        join(&nodes, &format!("envtest-node-{i}"), "w").await;
    }
    pools
        .create(&PostParams::default(), &sample("w"))
        .await
        .unwrap();
    converged(&env).await;
    // Let the echoes of the operator's own writes settle: the write counters stop moving.
    let faults = env.server.faults();
    let writes = || {
        faults.request_count("patch", "nodes")
            + faults.request_count("patch", "nodepools")
            + faults.request_count("patch", "nodepools/status")
            + faults.request_count("update", "runtimeclasses")
            + faults.request_count("create", "runtimeclasses")
    };
    let mut last = writes();
    let mut stable_since = std::time::Instant::now();
    while stable_since.elapsed() < Duration::from_millis(500) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = writes();
        if now != last {
            last = now;
            stable_since = std::time::Instant::now();
        }
    }
    // Kubelet heartbeats: status conditions change, nothing that matters to pools.
    let before = writes() + faults.request_count("patch", "nodes/status");
    for round in 0..5 {
        for i in 0..3 {
            let hb = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": format!("heartbeat {round}"), "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
            nodes
                .patch_status(
                    &format!("envtest-node-{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(&hb),
                )
                .await
                .unwrap();
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = writes() + faults.request_count("patch", "nodes/status");
    assert_eq!(
        after - before,
        15,
        "only the 15 heartbeats were written, no operator writes"
    );
    assert!(convergence_problems(&env.client).await.unwrap().is_empty());
    op.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_member_pools_wanting_one_label_do_not_fight() {
    // A server of its own: the operator is cluster-wide (module docs).
    let (env, op) = start(1).await;
    let nodes: Api<Node> = Api::all(env.client.clone());
    let pools: Api<NodePool> = Api::all(env.client.clone());
    for p in ["a", "b"] {
        pools
            .create(
                &PostParams::default(),
                &pool(
                    p,
                    json!({"labels": {"node-pool.lailin.xyz": p}, "handler": "runc"}),
                ),
            )
            .await
            .unwrap();
    }
    let n = "envtest-node-0";
    join(&nodes, n, "a").await;
    converged(&env).await;
    join(&nodes, n, "b").await;
    eventually("b reports the conflict", || {
        let pools = pools.clone();
        async move {
            let s = pools
                .get("b")
                .await
                .map_err(|e| e.to_string())?
                .status
                .unwrap_or_default();
            match s.ready_condition() {
                Some(c) if c.status == "False" && c.reason == "PoolConflict" && s.status == 409 => {
                    Ok(())
                }
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
    let node = nodes.get(n).await.unwrap();
    assert_eq!(
        labels(&node)["node-pool.lailin.xyz"],
        "a",
        "the first pool's value stays"
    );
    let rv = node.metadata.resource_version.clone();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        nodes.get(n).await.unwrap().metadata.resource_version,
        rv,
        "no write loop on the node"
    );
    let a = pools.get("a").await.unwrap().status.unwrap();
    assert_eq!(a.ready_condition().unwrap().status, "True");
    // The node leaves a: b takes the label over and becomes Ready.
    merge(
        &nodes,
        n,
        json!({"metadata": {"labels": {"node-role.kubernetes.io/a": null}}}),
    )
    .await;
    converged(&env).await;
    assert_eq!(
        labels(&nodes.get(n).await.unwrap())["node-pool.lailin.xyz"],
        "b"
    );
    op.stop().await.unwrap();
}

/// The pool's `Ready` condition, once it is `False` with `reason`.
async fn ready_false_with(pools: &Api<NodePool>, pool: &str, reason: &str) -> (String, i32) {
    let found = std::sync::Arc::new(std::sync::Mutex::new(None));
    let seen = found.clone();
    eventually(&format!("Ready=False {reason}"), || {
        let (pools, seen) = (pools.clone(), seen.clone());
        async move {
            let s = pools
                .get(pool)
                .await
                .map_err(|e| e.to_string())?
                .status
                .unwrap_or_default();
            match s.ready_condition() {
                Some(c) if c.status == "False" && c.reason == reason => {
                    *seen.lock().unwrap() = Some((c.message.clone(), s.status));
                    Ok(())
                }
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
    let got = found.lock().unwrap().take();
    got.unwrap()
}

/// A Warning event of `reason` about the pool, once there is one; returns its note.
async fn warning_event(env: &Embedded, reason: &str) -> String {
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(env.client.clone(), "default");
    let found = std::sync::Arc::new(std::sync::Mutex::new(None));
    let seen = found.clone();
    eventually(&format!("a Warning event {reason}"), || {
        let (events, seen) = (events.clone(), seen.clone());
        async move {
            let list = events
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            match list.items.into_iter().find(|e| {
                e.type_.as_deref() == Some("Warning") && e.reason.as_deref() == Some(reason)
            }) {
                Some(e) => {
                    *seen.lock().unwrap() = e.note;
                    Ok(())
                }
                None => Err("none yet".to_owned()),
            }
        }
    })
    .await;
    let note = found.lock().unwrap().take();
    note.unwrap_or_default()
}

/// Issue 18: a node patch refused for a reason other than a conflict is reported as what it
/// is, with the API server's message, in `Ready` and in a Warning event, and is not re-planned
/// as if the node kept changing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_node_patch_is_reported_as_what_it_is() {
    // A server of its own: the operator is cluster-wide (module docs); faults, request counts.
    let (env, op) = start(2).await;
    let nodes: Api<Node> = Api::all(env.client.clone());
    let pools: Api<NodePool> = Api::all(env.client.clone());
    let node = "envtest-node-0";
    join(&nodes, node, "w").await;
    let faults = env.server.faults();

    // 1. The patched node does not validate: 422 with a field cause. Reported at once as
    //    NodePatchFailed with the server's message; the node is not even re-read.
    let invalid = kcr_envtest::ApiError::invalid(
        "",
        "Node",
        node,
        vec![(
            "spec.taints[0].effect".into(),
            "FieldValueNotSupported".into(),
            "Unsupported value: \"Sometimes\"".into(),
        )],
    );
    faults.reset_counts();
    faults.fail_next_with("patch", "nodes", 1_000_000, invalid);
    pools
        .create(&PostParams::default(), &sample("w"))
        .await
        .unwrap();
    let (message, code) = ready_false_with(&pools, "w", "NodePatchFailed").await;
    assert_eq!(code, 422);
    for part in [
        node,
        "422 Invalid",
        "spec.taints[0].effect: Unsupported value: \"Sometimes\"",
    ] {
        assert!(message.contains(part), "{part:?} in {message:?}");
    }
    let note = warning_event(&env, "NodePatchFailed").await;
    assert!(note.contains("Unsupported value"), "{note}");
    assert!(faults.request_count("patch", "nodes") >= 1);
    assert_eq!(faults.request_count("get", "nodes"), 0, "no re-read");

    // 2. The JSON-patch refusal the real server gives for any operation that does not apply
    //    (422, no causes), while the patch does apply to the node as it is: each refusal is
    //    followed by one re-read, the re-plan is the same patch, and re-planning stops there.
    faults.clear();
    faults.reset_counts();
    let refused = kcr_envtest::ApiError::new(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
    )
    .with_details(json!({}));
    faults.fail_next_with("patch", "nodes", 1_000_000, refused);
    let (message, code) = ready_false_with(&pools, "w", "NodePatchRejected").await;
    assert_eq!(code, 422);
    assert!(
        message.contains("the server rejected our request due to an error in our request"),
        "{message}"
    );
    let note = warning_event(&env, "NodePatchRejected").await;
    assert!(note.contains("rejected our request"), "{note}");
    // Over several reconciles: one re-read per refused patch (at most one still in flight),
    // where re-planning the same patch until the attempts run out would send 5 per 4 reads.
    eventually("ten refused patches", || async {
        match faults.request_count("patch", "nodes") {
            n if n >= 10 => Ok(()),
            n => Err(format!("{n} so far")),
        }
    })
    .await;
    let (patches, gets) = (
        faults.request_count("patch", "nodes"),
        faults.request_count("get", "nodes"),
    );
    assert!(
        gets <= patches && gets + 1 >= patches,
        "{patches} patches, {gets} re-reads"
    );
    let pool = pools.get("w").await.unwrap();
    let ready = pool.status.unwrap();
    assert_ne!(
        ready.ready_condition().map(|c| c.reason.as_str()),
        Some("NodeConflict")
    );

    // 3. Once the API server accepts the patch, the pool converges.
    faults.clear();
    converged(&env).await;
    op.stop().await.unwrap();
}
