//! The partition drill: the operator, as deployed, behind a silent network partition.
//!
//! Every connection between the operator and its API server is frozen for `partition`
//! (kcr-envtest's blackhole: nothing closed, bytes dropped) and stays dead after the heal; new
//! connections flow again after it. A node joins the pool during the partition and another
//! right after the heal; the drill measures how long after the heal the cluster has converged
//! (both nodes labelled and tainted, the pool's status counting them) and the operator is
//! ready. Three scenarios ([`Scenario`]): the operator running through the partition, the same
//! with leader election (it steps down when it cannot renew and is restarted at once, as its
//! Deployment would, so the new process starts during the partition), and a process started
//! during the partition.
//!
//! `cargo run --release -p nodepool-operator --example partition` runs them with the default
//! bounds and a 45 s partition and prints the table of the README; the operator's partition
//! test runs them with bounds and a partition of seconds.

use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::crd::{NodePool, NodePoolSpec, membership_label};
use crate::embedded::{Embedded, EmbeddedError, RunningOperator, api_err, wait_converged};
use crate::operator::RunOptions;

/// How the operator meets the partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// Running before, through and after the partition, without leader election.
    Running,
    /// Running with leader election: it loses its Lease during the partition and exits; the
    /// drill restarts it at once (a new identity, as a new pod), during the partition.
    LeaderElect,
    /// Started during the partition, without leader election.
    StartedDuring,
}

impl Scenario {
    /// Every scenario.
    pub const ALL: [Scenario; 3] = [
        Scenario::Running,
        Scenario::LeaderElect,
        Scenario::StartedDuring,
    ];

    /// A short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Running => "running",
            Scenario::LeaderElect => "--leader-elect",
            Scenario::StartedDuring => "started during",
        }
    }
}

/// One drill's settings.
#[derive(Debug, Clone)]
pub struct Drill {
    /// The scenario.
    pub scenario: Scenario,
    /// How long every connection stays frozen.
    pub partition: Duration,
    /// The operator's connection bounds.
    pub connection: kcr_connect::ConnectionOptions,
    /// Leader election timings (lease, renew deadline, retry); `None`: the defaults
    /// (15 s, 10 s, 2 s).
    pub leader_timings: Option<(Duration, Duration, Duration)>,
    /// How long to wait for convergence after the heal before giving up.
    pub give_up_after: Duration,
}

/// What a drill measured.
#[derive(Debug, Clone)]
pub struct DrillReport {
    /// The scenario.
    pub scenario: Scenario,
    /// From the heal until the cluster converged.
    pub converged_after_heal: Duration,
    /// From the heal until the operator's `/readyz` answered 200.
    pub ready_after_heal: Duration,
    /// How many times the operator was restarted (it exited on a lost Lease).
    pub restarts: usize,
    /// Connections the partition froze.
    pub frozen_connections: usize,
}

/// A node's object as a JSON value to write back with `upsert`, joined to `pool`.
fn joined(node: &Node, pool: &str) -> Value {
    let mut value = serde_json::to_value(node).unwrap_or(Value::Null);
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
        meta.remove("managedFields");
        let labels = meta
            .entry("labels")
            .or_insert_with(|| json!({}))
            .as_object_mut();
        if let Some(labels) = labels {
            labels.insert(membership_label(pool), json!(""));
        }
    }
    value
}

/// The operator's run options in the drill.
fn options(env: &Embedded, drill: &Drill, identity: usize) -> RunOptions {
    let mut options = env.run_options();
    options.webhook_enabled = false;
    options.connection = drill.connection.clone();
    if drill.scenario == Scenario::LeaderElect {
        options.leader_elect = true;
        options.leader_election_namespace = Some(env.server.namespace().to_owned());
        options.leader_election_identity = Some(format!("drill-{identity}"));
        options.leader_election_timings = drill.leader_timings;
    }
    options
}

/// Whether `/readyz` at `addr` answers 200 (one GET, bounded by a second).
async fn ready(addr: Option<SocketAddr>) -> bool {
    let Some(addr) = addr else { return false };
    let get = async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        stream
            .write_all(b"GET /readyz HTTP/1.1\r\nhost: probe\r\nconnection: close\r\n\r\n")
            .await
            .ok()?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.ok()?;
        Some(answer.starts_with(b"HTTP/1.1 200"))
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), get).await,
        Ok(Some(true))
    )
}

/// A supervisor of the operator: restarts it whenever it exits (a lost Lease), as a
/// Deployment does.
struct Supervisor<'a> {
    env: &'a Embedded,
    drill: &'a Drill,
    current: Option<RunningOperator>,
    started: usize,
}

impl Supervisor<'_> {
    async fn start(&mut self) -> Result<(), EmbeddedError> {
        let running = self
            .env
            .start_operator(&options(self.env, self.drill, self.started), false)
            .await?;
        self.started += 1;
        self.current = Some(running);
        Ok(())
    }

    /// Restarts the operator if it has exited.
    async fn tend(&mut self) -> Result<(), EmbeddedError> {
        if let Some(current) = &self.current
            && current.is_finished()
        {
            if let Some(ended) = self.current.take() {
                // Its error (the lost Lease) is what made it exit, as a process would.
                let outcome = ended.stop().await;
                tracing::info!(?outcome, "the operator exited; restarting it");
            }
            self.start().await?;
        }
        Ok(())
    }

    /// Tends the operator for `duration`.
    async fn tend_for(&mut self, duration: Duration) -> Result<(), EmbeddedError> {
        let until = Instant::now() + duration;
        while Instant::now() < until {
            self.tend().await?;
            tokio::time::sleep(Duration::from_millis(100).min(until - Instant::now())).await;
        }
        Ok(())
    }

    fn probes(&self) -> Option<SocketAddr> {
        self.current.as_ref().and_then(|c| c.probes_addr)
    }
}

/// Runs one drill on a server of its own (the backend of `KCR_ENVTEST_BACKEND`).
pub async fn run(drill: &Drill) -> Result<DrillReport, EmbeddedError> {
    let env = Embedded::start(3).await?;
    let nodes: Api<Node> = Api::all(env.client.clone());
    let pools: Api<NodePool> = Api::all(env.client.clone());
    let mut spec = NodePoolSpec::default();
    spec.labels
        .insert("node-pool.lailin.xyz/worker".into(), "10".into());
    spec.handler = "runc".into();
    pools
        .create(&PostParams::default(), &NodePool::new("worker", spec))
        .await
        .map_err(api_err("creating the pool"))?;
    let node = |i: usize| format!("envtest-node-{i}");
    let first = nodes
        .get(&node(0))
        .await
        .map_err(api_err("reading a node"))?;
    env.server.upsert(joined(&first, "worker")).await?;
    // Read before the partition: the test's own client goes through the frozen proxy too.
    let second = nodes
        .get(&node(1))
        .await
        .map_err(api_err("reading a node"))?;
    let third = nodes
        .get(&node(2))
        .await
        .map_err(api_err("reading a node"))?;

    let mut supervisor = Supervisor {
        env: &env,
        drill,
        current: None,
        started: 0,
    };
    if drill.scenario != Scenario::StartedDuring {
        supervisor.start().await?;
        wait_converged(&env.client, Duration::from_secs(60)).await?;
    }

    env.server.faults().blackhole();
    let partitioned = Instant::now();
    if drill.scenario == Scenario::StartedDuring {
        supervisor.start().await?;
    }
    supervisor.tend_for(drill.partition / 10).await?;
    env.server.upsert(joined(&second, "worker")).await?;
    supervisor
        .tend_for(drill.partition.saturating_sub(partitioned.elapsed()))
        .await?;
    env.server.faults().heal();
    let healed = Instant::now();
    env.server.upsert(joined(&third, "worker")).await?;

    // Observe through a client made now: connections made before the heal are dead.
    let config = kube::Config::from_custom_kubeconfig(env.server.kubeconfig(), &Default::default())
        .await
        .map_err(|e| EmbeddedError::Kubeconfig(e.to_string()))?;
    let observer = kcr_connect::client(config, kcr_connect::ConnectionOptions::default())
        .map_err(|e| EmbeddedError::Kubeconfig(e.to_string()))?;
    let mut converged = None;
    let mut is_ready = None;
    while converged.is_none() || is_ready.is_none() {
        supervisor.tend().await?;
        if converged.is_none()
            && crate::embedded::convergence_problems(&observer)
                .await
                .is_ok_and(|p| p.is_empty())
        {
            converged = Some(healed.elapsed());
        }
        if is_ready.is_none() && ready(supervisor.probes()).await {
            is_ready = Some(healed.elapsed());
        }
        if healed.elapsed() > drill.give_up_after {
            let problems = crate::embedded::convergence_problems(&observer)
                .await
                .unwrap_or_default();
            return Err(EmbeddedError::NotConverged {
                after: healed.elapsed(),
                problems: if problems.is_empty() {
                    vec![format!("converged: {converged:?}, ready: {is_ready:?}")]
                } else {
                    problems
                },
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let report = DrillReport {
        scenario: drill.scenario,
        converged_after_heal: converged.unwrap_or_default(),
        ready_after_heal: is_ready.unwrap_or_default(),
        restarts: supervisor.started.saturating_sub(1),
        frozen_connections: env.server.faults().frozen_connections(),
    };
    if let Some(current) = supervisor.current.take() {
        current.stop().await?;
    }
    Ok(report)
}
