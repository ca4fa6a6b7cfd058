//! `nodepool-operator demo`: the operator on an embedded API server, showing what a person wants
//! to see.
//!
//! Starts kcr-envtest in-process with N simulated nodes (two of them report allocatable in other
//! units, so the sums show mixed-unit arithmetic), installs the CRD and the webhook
//! configurations (pointing at the operator's own HTTPS webhook server, self-signed certificate
//! generated at start), runs the operator exactly as `run` does, applies sample pools (one
//! without a handler, defaulted by the mutating webhook), shows an invalid pool refused by the
//! validating webhook, labels nodes into pools, waits for convergence and prints which nodes
//! joined which pool, what changed on them and the pools' status table; then changes a pool's
//! spec and shows the nodes following. With `--keep-running` it writes a kubeconfig and stays up
//! until Ctrl-C.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::crd::{NodePool, membership_label, runtime_class_name};
use crate::embedded::{Embedded, EmbeddedError, api_err, list_all};

/// Options of the demo.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Number of simulated nodes (at least 1).
    pub nodes: usize,
    /// Stay up after converging, until `stop` is cancelled.
    pub keep_running: bool,
    /// Where to write the kubeconfig (with `keep_running`; default `nodepool-demo.kubeconfig`).
    pub kubeconfig_out: Option<PathBuf>,
    /// How long to wait for convergence at each step.
    pub timeout: Duration,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            nodes: 6,
            keep_running: false,
            kubeconfig_out: None,
            timeout: Duration::from_secs(60),
        }
    }
}

/// What the demo saw, for tests.
#[derive(Debug, Clone, Default)]
pub struct DemoReport {
    /// Pool → member nodes.
    pub members: BTreeMap<String, Vec<String>>,
    /// `kubectl get np`-like rows: name, status, nodeCount, ready, cpu, memory.
    pub pools: Vec<[String; 6]>,
    /// The webhook's message refusing the invalid pool.
    pub refused: String,
    /// Everything printed.
    pub output: String,
}

type Snapshot = BTreeMap<String, (BTreeMap<String, String>, Vec<String>)>;

async fn snapshot(client: &kube::Client) -> Result<Snapshot, EmbeddedError> {
    let nodes: Vec<Node> = list_all(client, "listing nodes").await?;
    Ok(nodes
        .into_iter()
        .map(|n| {
            let taints = n
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default()
                .iter()
                .map(|t| {
                    format!(
                        "{}={}:{}",
                        t.key,
                        t.value.clone().unwrap_or_default(),
                        t.effect
                    )
                })
                .collect();
            (n.name_any(), (n.labels().clone(), taints))
        })
        .collect())
}

fn describe_changes(before: &Snapshot, after: &Snapshot, out: &mut String) {
    let mut any = false;
    for (node, (labels, taints)) in after {
        let Some((old_labels, old_taints)) = before.get(node) else {
            continue;
        };
        let mut changes = Vec::new();
        for (k, v) in labels {
            match old_labels.get(k) {
                None => changes.push(format!("+label {k}={v}")),
                Some(o) if o != v => changes.push(format!("~label {k}={o} -> {v}")),
                _ => {}
            }
        }
        for (k, v) in old_labels {
            if !labels.contains_key(k) {
                changes.push(format!("-label {k}={v}"));
            }
        }
        for t in taints.iter().filter(|t| !old_taints.contains(t)) {
            changes.push(format!("+taint {t}"));
        }
        for t in old_taints.iter().filter(|t| !taints.contains(t)) {
            changes.push(format!("-taint {t}"));
        }
        if !changes.is_empty() {
            any = true;
            let _ = writeln!(out, "  {node}: {}", changes.join(", "));
        }
    }
    if !any {
        let _ = writeln!(out, "  (no changes)");
    }
}

async fn pool_table(
    client: &kube::Client,
    report: &mut DemoReport,
) -> Result<String, EmbeddedError> {
    let pools: Vec<NodePool> = list_all(client, "listing pools").await?;
    let rcs = Api::<RuntimeClass>::all(client.clone());
    let mut rows = Vec::new();
    for p in &pools {
        let s = p.status.clone().unwrap_or_default();
        let q = |r: &str| {
            s.allocatable
                .get(r)
                .map(|q| q.0.clone())
                .unwrap_or_else(|| "-".into())
        };
        let rc = match rcs.get_opt(&runtime_class_name(&p.name_any())).await {
            Ok(Some(rc)) => format!("{} (handler {})", rc.name_any(), rc.handler),
            _ => "-".into(),
        };
        rows.push([
            p.name_any(),
            s.status.to_string(),
            s.node_count.to_string(),
            s.ready_condition()
                .map(|c| c.status.clone())
                .unwrap_or_default(),
            q("cpu"),
            q("memory"),
            rc,
        ]);
    }
    let mut out = String::new();
    let header = [
        "NAME",
        "STATUS",
        "NODECOUNT",
        "READY",
        "CPU",
        "MEMORY",
        "RUNTIMECLASS",
    ];
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.len());
        }
    }
    let line = |cells: Vec<&str>| {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    let _ = writeln!(out, "  {}", line(header.to_vec()));
    for r in &rows {
        let _ = writeln!(out, "  {}", line(r.iter().map(String::as_str).collect()));
    }
    report.pools = rows
        .into_iter()
        .map(|r| {
            [
                r[0].clone(),
                r[1].clone(),
                r[2].clone(),
                r[3].clone(),
                r[4].clone(),
                r[5].clone(),
            ]
        })
        .collect();
    Ok(out)
}

fn say(report: &mut DemoReport, text: &str) {
    print!("{text}");
    report.output.push_str(text);
}

/// Runs the demo; see the [module docs](self). `stop` ends a `keep_running` demo.
pub async fn run_demo(
    options: &DemoOptions,
    stop: CancellationToken,
) -> Result<DemoReport, EmbeddedError> {
    let mut report = DemoReport::default();
    let n = options.nodes.max(1);
    let env = Embedded::start(n).await?;
    let client = env.client.clone();
    let nodes_api: Api<Node> = Api::all(client.clone());
    let pools_api: Api<NodePool> = Api::all(client.clone());

    // Mixed units on two nodes, as real kubelets report them.
    let mut names: Vec<String> = list_all::<Node>(&client, "listing nodes")
        .await?
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    names.sort_by_key(|s| (s.len(), s.clone()));
    for (name, cpu, mem) in names
        .iter()
        .skip(1)
        .take(1)
        .map(|n| (n, "500m", "512Mi"))
        .chain(
            names
                .iter()
                .skip(3)
                .take(1)
                .map(|n| (n, "3900m", "15880788Ki")),
        )
    {
        let patch = json!({"status": {"allocatable": {"cpu": cpu, "memory": mem}}});
        nodes_api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(api_err("setting node allocatable"))?;
    }

    let mut opts = env.run_options();
    opts.metrics_bind_address = "127.0.0.1:0".into();
    // As in a deployment: leader election on (the Lease is free, so it leads at once) and its
    // `leader_election_master_status` on /metrics.
    opts.leader_elect = true;
    let op = env.start_operator(&opts, true).await?;
    say(
        &mut report,
        &format!(
            "== nodepool-operator demo ==\nAPI server   {} (kcr-envtest, {n} simulated nodes)\nwebhooks     https://{} (self-signed CA, reloaded on change)\nmetrics      http://{}/metrics\nprobes       http://{}/healthz  /readyz\n\n",
            env.server.url(),
            op.webhook_addr.map(|a| a.to_string()).unwrap_or_default(),
            op.metrics_addr.map(|a| a.to_string()).unwrap_or_default(),
            op.probes_addr.map(|a| a.to_string()).unwrap_or_default(),
        ),
    );

    // Sample pools: the spec's sample, and one that leaves labels and handler to the webhook.
    let worker: NodePool = serde_json::from_value(json!({
        "apiVersion": "nodes.lailin.xyz/v1", "kind": "NodePool",
        "metadata": {"name": "worker"},
        "spec": {"labels": {"node-pool.lailin.xyz/worker": "10"},
                 "taints": [{"key": "node-pool.lailin.xyz", "value": "worker", "effect": "NoSchedule"}],
                 "handler": "runc"}
    }))
    .map_err(|e| api_err("sample")(kube::Error::SerdeError(e)))?;
    let gpu: NodePool = serde_json::from_value(json!({
        "apiVersion": "nodes.lailin.xyz/v1", "kind": "NodePool",
        "metadata": {"name": "gpu"},
        "spec": {"labels": {"node-pool.lailin.xyz/gpu": "true"},
                 "taints": [{"key": "node-pool.lailin.xyz/gpu", "value": "true", "effect": "NoExecute"}]}
    }))
    .map_err(|e| api_err("sample")(kube::Error::SerdeError(e)))?;
    for p in [&worker, &gpu] {
        let created = pools_api
            .create(&PostParams::default(), p)
            .await
            .map_err(api_err("creating a sample pool"))?;
        say(
            &mut report,
            &format!(
                "applied NodePool {:<7} handler={} labels={:?} (after the mutating webhook)\n",
                created.name_any(),
                created.spec.handler,
                created.labels()
            ),
        );
    }
    let bad: NodePool = serde_json::from_value(json!({
        "apiVersion": "nodes.lailin.xyz/v1", "kind": "NodePool",
        "metadata": {"name": "bad"},
        "spec": {"labels": {"xxx": "1"}, "taints": [{"key": "", "effect": "Sometimes"}], "handler": "runc"}
    }))
    .map_err(|e| api_err("sample")(kube::Error::SerdeError(e)))?;
    match pools_api.create(&PostParams::default(), &bad).await {
        Ok(_) => say(&mut report, "UNEXPECTED: the invalid pool was accepted\n"),
        Err(kube::Error::Api(s)) => {
            report.refused = s.message.clone();
            say(
                &mut report,
                &format!("refused NodePool bad: {}\n", s.message),
            );
        }
        Err(e) => return Err(api_err("creating the invalid pool")(e)),
    }

    // Label nodes into pools: the first half into worker, the next third into gpu.
    let before = snapshot(&client).await?;
    let t0 = std::time::Instant::now();
    let worker_count = n.div_ceil(2);
    let gpu_count = (n / 3).max(usize::from(n > 1));
    for (i, name) in names.iter().enumerate() {
        let pool = if i < worker_count {
            "worker"
        } else if i < worker_count + gpu_count {
            "gpu"
        } else {
            continue;
        };
        let patch = json!({"metadata": {"labels": {membership_label(pool): ""}}});
        nodes_api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(api_err("labelling a node"))?;
        report
            .members
            .entry(pool.to_owned())
            .or_default()
            .push(name.clone());
    }
    env.wait_converged(options.timeout).await?;
    let after = snapshot(&client).await?;
    let mut text = format!(
        "\nconverged {} ms after the first node was labelled\n\nnodes that joined pools:\n",
        t0.elapsed().as_millis()
    );
    for (pool, members) in &report.members {
        let _ = writeln!(text, "  {pool:<7} {}", members.join(", "));
    }
    text.push_str("\nwhat changed on them:\n");
    describe_changes(&before, &after, &mut text);
    text.push_str("\npools (kubectl get np, plus allocatable and RuntimeClass):\n");
    text.push_str(&pool_table(&client, &mut report).await?);
    say(&mut report, &text);

    // A spec change: new label value, taint dropped; nodes follow.
    let patch = json!({"spec": {"labels": {"node-pool.lailin.xyz/worker": "11"}, "taints": null}});
    let t0 = std::time::Instant::now();
    pools_api
        .patch("worker", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(api_err("changing the worker pool"))?;
    env.wait_converged(options.timeout).await?;
    let again = snapshot(&client).await?;
    let mut text = format!(
        "\nchanged pool worker (label value 10 -> 11, taint removed); converged {} ms after the change:\n",
        t0.elapsed().as_millis()
    );
    describe_changes(&after, &again, &mut text);
    text.push_str("\npools:\n");
    text.push_str(&pool_table(&client, &mut report).await?);
    say(&mut report, &text);

    if options.keep_running {
        let path = options
            .kubeconfig_out
            .clone()
            .unwrap_or_else(|| PathBuf::from("nodepool-demo.kubeconfig"));
        env.server.write_kubeconfig(&path)?;
        let spare = names.last().cloned().unwrap_or_default();
        say(
            &mut report,
            &format!(
                "\nkeeping the API server and the operator running; kubeconfig written to {p}\n\
                 try:\n  export KUBECONFIG={p}\n  kubectl get nodes\n  kubectl get np\n  \
                 kubectl label node {spare} node-role.kubernetes.io/gpu=\n  kubectl get node {spare} -o jsonpath='{{.metadata.labels}}{{\"\\n\"}}{{.spec.taints}}{{\"\\n\"}}'\n  \
                 kubectl get runtimeclass\n  kubectl apply -f nodepool-operator/config/samples/nodes_v1_nodepool.yaml\n\
                 and the operator's endpoints:\n  curl -s http://{metrics}/metrics\n  \
                 curl -s http://{probes}/healthz\n  curl -s 'http://{probes}/readyz?verbose'\n\
                 press Ctrl-C to stop\n",
                p = path.display(),
                metrics = op.metrics_addr.map(|a| a.to_string()).unwrap_or_default(),
                probes = op.probes_addr.map(|a| a.to_string()).unwrap_or_default(),
            ),
        );
        stop.cancelled().await;
    }
    op.stop().await?;
    Ok(report)
}
