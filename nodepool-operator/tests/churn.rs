//! Seeded churn: the operator stays correct while nodes join, leave and move between pools and
//! pool specs change, all at once from several writers.
//!
//! One API server and one operator (as in production: manager, cache, controller, HTTPS
//! webhooks) serve every seed; each seed works on names of its own (`churn<seed>-n<i>`,
//! `churn<seed>-p<j>`) and removes them when it is done. Per seed:
//! - [`NODES`] nodes of four shapes: full (labels and a taint), without `spec` (as `kubectl
//!   apply` of a status-only manifest), without `spec` and labels (bare), and with an empty
//!   taint list; random allocatable quantities in mixed units;
//! - [`POOLS`] pools, the odd ones with taints, the even ones without; nodes start in zero, one
//!   or two pools;
//! - [`ROUNDS`] rounds of [`OPS_PER_ROUND`] random changes from [`TASKS`] concurrent writers:
//!   joins, leaves, moves, pool spec changes, allocatable changes, and foreign label and taint
//!   changes (the taint through a read-modify-replace, as another controller would, so the
//!   operator's guarded patches meet genuine conflicts). In round 1 the nodes created without
//!   `spec` keep having none; in round 2 every node gets a foreign taint, so at the end every
//!   node carries a foreign label and a foreign taint.
//!
//! After each round's last change, within [`CONVERGE`] (the operator's bounded-recovery
//! promise), every node carries exactly the labels and taints of the pools it is in, its foreign
//! label and taint hold their last written values, and every pool is `Ready=True` with the right
//! `nodeCount`, `allocatable` and `observedGeneration`. Then one pool is deleted and exactly what
//! it applied must go.
//!
//! The seed fixes every writer's sequence of changes, not how the writers interleave. Everything
//! is created and changed through the Kubernetes API only, so the test runs unchanged on the real
//! backend (`KCR_ENVTEST_BACKEND=real`); there the control plane's own taints
//! (`node.kubernetes.io/*`) and annotations are left out of the comparisons.
//!
//! `KCR_CHURN_SEEDS=N` runs seeds `1..=N` (default [`DEFAULT_SEEDS`]); `KCR_CHURN_SEED=S` runs
//! seed `S` alone. A failing seed is printed with the command that replays it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use futures::StreamExt;

use k8s_openapi::api::core::v1::{Node, Taint};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use nodepool_operator::crd::{MEMBERSHIP_LABEL_PREFIX, NodePool, membership_label};
use nodepool_operator::embedded::Embedded;
use nodepool_operator::nodes::{APPLIED_ANNOTATION_PREFIX, Applied, applied_annotation_key};
use nodepool_operator::quantity::Quantity;
use serde_json::{Value, json};

/// Nodes per seed.
const NODES: usize = 24;
/// Pools per seed (odd indices have taints).
const POOLS: usize = 4;
/// Concurrent writers.
const TASKS: usize = 4;
/// Rounds of changes per seed; each ends with the convergence check.
const ROUNDS: usize = 2;
/// Random changes per round, over all writers (besides the scheduled foreign label and taint
/// writes for nodes created without them).
const OPS_PER_ROUND: usize = 100;
/// Seeds run when `KCR_CHURN_SEEDS` is not set.
const DEFAULT_SEEDS: u64 = 20;
/// How long after the last change every pool must have converged.
const CONVERGE: Duration = Duration::from_secs(10);

/// The label and taint key domain of pools.
const POOL_KEY: &str = "node-pool.lailin.xyz";
/// A label someone else owns, on every node.
const FOREIGN_LABEL: &str = "foreign.example.com/owner";
/// A taint someone else owns (effect `NoSchedule`), on every node.
const FOREIGN_TAINT: &str = "foreign.example.com/dedicated";
const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
const CPUS: [(&str, u64); 5] = [
    ("1", 1000),
    ("2", 2000),
    ("500m", 500),
    ("1500m", 1500),
    ("250m", 250),
];
const MEMORIES: [(&str, u64); 4] = [("1Gi", 1024), ("512Mi", 512), ("2Gi", 2048), ("768Mi", 768)];

/// splitmix64: small, seedable, good enough to pick test actions.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, stream: u64) -> Rng {
        let mut r = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ stream);
        r.next();
        r
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn percent(&mut self, p: u64) -> bool {
        self.next() % 100 < p
    }
}

fn node_name(seed: u64, i: usize) -> String {
    format!("churn{seed}-n{i}")
}

fn pool_name(seed: u64, j: usize) -> String {
    format!("churn{seed}-p{j}")
}

fn tainted(j: usize) -> bool {
    j % 2 == 1
}

/// The shape a node is created with.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Shape {
    /// Labels and `spec.taints` with the foreign taint.
    Full,
    /// Labels, no `spec` (as `kubectl apply` of a status-only manifest).
    NoSpec,
    /// No labels, no annotations, no `spec`.
    Bare,
    /// Labels and `spec: {taints: []}`.
    EmptyTaints,
}

fn shape_of(i: usize) -> Shape {
    [Shape::Full, Shape::NoSpec, Shape::Bare, Shape::EmptyTaints][i % 4]
}

/// One change a writer makes.
#[derive(Debug, Clone)]
enum Op {
    Join(usize, usize),
    Leave(usize, usize),
    Move(usize, usize, usize),
    Spec(usize),
    Allocatable(usize),
    ForeignLabel(usize),
    ForeignTaint(usize),
}

/// A pool spec as a merge patch body: every key the pool may use is named (null when unused),
/// taints are replaced as a whole.
fn pool_spec(rng: &mut Rng, seed: u64, j: usize) -> Value {
    let name = pool_name(seed, j);
    let mut labels = serde_json::Map::new();
    labels.insert(
        format!("{POOL_KEY}/{name}"),
        json!(format!("v{}", rng.below(5))),
    );
    labels.insert(
        format!("{POOL_KEY}/{name}-extra"),
        if rng.percent(50) {
            json!(format!("x{}", rng.below(5)))
        } else {
            Value::Null
        },
    );
    let mut taints = Vec::new();
    if tainted(j) {
        let first = rng.below(EFFECTS.len());
        let count = 1 + rng.below(2);
        for k in 0..count {
            taints.push(json!({
                "key": format!("{POOL_KEY}/{name}"),
                "value": format!("t{}", rng.below(4)),
                "effect": EFFECTS[(first + k) % EFFECTS.len()],
            }));
        }
    }
    json!({"labels": labels, "taints": taints, "handler": "runc"})
}

fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn seeds() -> Vec<u64> {
    if let Some(seed) = std::env::var("KCR_CHURN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return vec![seed];
    }
    let n = std::env::var("KCR_CHURN_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEEDS);
    (1..=n).collect()
}

/// Prints the seed (and how to replay it) when the test fails while it runs.
struct SeedGuard(u64);

impl Drop for SeedGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "churn seed {} FAILED; replay with KCR_CHURN_SEED={} cargo test -p nodepool-operator --test churn",
                self.0, self.0
            );
        }
    }
}

/// What one seed measured.
struct SeedReport {
    changes: usize,
    churn: Duration,
    converged: Duration,
    deleted: Duration,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_converge_under_seeded_churn() {
    // A server of its own: the operator manages pools, nodes and RuntimeClasses cluster-wide.
    let env = Embedded::start(0).await.unwrap();
    let operator = env.start_operator(&env.run_options(), true).await.unwrap();
    let started = Instant::now();
    let mut worst = Duration::ZERO;
    let seeds = seeds();
    for &seed in &seeds {
        let guard = SeedGuard(seed);
        let seed_start = Instant::now();
        let r = run_seed(&env.client, seed).await;
        drop(guard);
        println!(
            "churn seed {seed}: {} changes in {:?}; converged at most {:?} after a round's last change; pool deletion cleaned in {:?}; seed total {:?}",
            r.changes,
            r.churn,
            r.converged,
            r.deleted,
            seed_start.elapsed()
        );
        worst = worst.max(r.converged);
    }
    println!(
        "churn: {} seeds in {:?}; slowest convergence after a round's last change: {worst:?}",
        seeds.len(),
        started.elapsed()
    );
    operator.stop().await.unwrap();
}

async fn run_seed(client: &kube::Client, seed: u64) -> SeedReport {
    let nodes: Api<Node> = Api::all(client.clone());
    let pools: Api<NodePool> = Api::all(client.clone());
    let pp = PostParams::default();
    let patch = PatchParams::default();
    let mut rng = Rng::new(seed, 0);

    // Nodes, through the API only, then their allocatable through the status subresource
    // (drawn in order, created concurrently).
    let mut creations = Vec::new();
    for i in 0..NODES {
        let name = node_name(seed, i);
        let mut labels = serde_json::Map::new();
        labels.insert(FOREIGN_LABEL.into(), json!("v0"));
        for j in 0..POOLS {
            if rng.percent(30) {
                labels.insert(membership_label(&pool_name(seed, j)), json!(""));
            }
        }
        let foreign_taint = json!({"key": FOREIGN_TAINT, "value": "v0", "effect": "NoSchedule"});
        let body = match shape_of(i) {
            Shape::Full => {
                json!({"metadata": {"name": name, "labels": labels}, "spec": {"taints": [foreign_taint]}})
            }
            Shape::NoSpec => json!({"metadata": {"name": name, "labels": labels}}),
            Shape::Bare => json!({"metadata": {"name": name}}),
            Shape::EmptyTaints => {
                json!({"metadata": {"name": name, "labels": labels}, "spec": {"taints": []}})
            }
        };
        let node: Node = serde_json::from_value(body).unwrap();
        let (cpu, _) = CPUS[rng.below(CPUS.len())];
        let (mem, _) = MEMORIES[rng.below(MEMORIES.len())];
        let resources = json!({"cpu": cpu, "memory": mem});
        let status = json!({"status": {"capacity": resources, "allocatable": resources}});
        let (nodes, pp, patch) = (&nodes, &pp, &patch);
        creations.push(async move {
            nodes.create(pp, &node).await.unwrap();
            nodes
                .patch_status(&name, patch, &Patch::Merge(status))
                .await
                .unwrap();
        });
    }
    futures::stream::iter(creations)
        .buffer_unordered(TASKS)
        .collect::<Vec<()>>()
        .await;
    for j in 0..POOLS {
        let spec = without_nulls(&pool_spec(&mut rng, seed, j));
        let pool: NodePool = serde_json::from_value(json!({
            "apiVersion": "nodes.lailin.xyz/v1", "kind": "NodePool",
            "metadata": {"name": pool_name(seed, j)}, "spec": spec
        }))
        .unwrap();
        pools.create(&pp, &pool).await.unwrap();
    }

    // Two rounds of changes, each followed by the bounded convergence check. In round 1 the
    // nodes created without `spec` keep having none (their writers change only labels); in
    // round 2 every node gets its foreign taint, at a random point.
    let mut foreign: HashMap<usize, Foreign> = (0..NODES)
        .map(|i| {
            let f = Foreign {
                label: (shape_of(i) != Shape::Bare).then(|| "v0".to_owned()),
                taint: (shape_of(i) == Shape::Full).then(|| "v0".to_owned()),
            };
            (i, f)
        })
        .collect();
    let mut changes = 0;
    let mut churn = Duration::ZERO;
    let mut converged = Duration::ZERO;
    for round in 1..=ROUNDS {
        let plans = round_plans(&mut rng, round);
        changes += plans.iter().map(Vec::len).sum::<usize>();
        let churn_start = Instant::now();
        let writers: Vec<_> = plans
            .into_iter()
            .enumerate()
            .map(|(t, plan)| {
                let client = client.clone();
                let rng = Rng::new(seed, (round * TASKS + t) as u64);
                tokio::spawn(run_writer(client, seed, rng, plan))
            })
            .collect();
        for w in writers {
            for (i, f) in w.await.unwrap() {
                let entry = foreign.entry(i).or_default();
                if f.label.is_some() {
                    entry.label = f.label;
                }
                if f.taint.is_some() {
                    entry.taint = f.taint;
                }
            }
        }
        churn += churn_start.elapsed();
        // Bounded recovery: converged within CONVERGE of the last change.
        let last_change = Instant::now();
        kcr_envtest::eventually(
            &format!("every pool converged after churn round {round}"),
            CONVERGE,
            || check_converged(client, seed, &foreign),
        )
        .await;
        converged = converged.max(last_change.elapsed());
    }

    // Deleting a pool removes exactly what it applied.
    let deleted = delete_one_pool(client, seed, &mut rng).await;

    // Clean up this seed's objects.
    for j in 0..POOLS {
        let _ = pools
            .delete(&pool_name(seed, j), &DeleteParams::default())
            .await;
    }
    kcr_envtest::eventually("this seed's pools deleted", CONVERGE, || async {
        let left = seed_pools(client, seed).await?;
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("{} pools left", left.len()))
        }
    })
    .await;
    futures::stream::iter((0..NODES).map(|i| {
        let nodes = &nodes;
        async move {
            nodes
                .delete(&node_name(seed, i), &DeleteParams::default())
                .await
                .unwrap();
        }
    }))
    .buffer_unordered(TASKS)
    .collect::<Vec<()>>()
    .await;
    SeedReport {
        changes,
        churn,
        converged,
        deleted,
    }
}

/// Each writer's changes for one round. Foreign values of node `i` are written by writer
/// `i % TASKS` only, so their last values are known. In round 1 a node created without a
/// foreign taint gets none (so nodes without `spec` stay so); in round 2 each such node gets it
/// at a random point, and any node's foreign taint may change.
fn round_plans(rng: &mut Rng, round: usize) -> Vec<Vec<Op>> {
    (0..TASKS)
        .map(|t| {
            let own = |rng: &mut Rng| t + TASKS * rng.below(NODES / TASKS);
            let mut plan: Vec<Op> = (0..OPS_PER_ROUND / TASKS)
                .map(|_| match rng.below(100) {
                    0..=29 => Op::Join(rng.below(NODES), rng.below(POOLS)),
                    30..=49 => Op::Leave(rng.below(NODES), rng.below(POOLS)),
                    50..=69 => Op::Move(rng.below(NODES), rng.below(POOLS), rng.below(POOLS)),
                    70..=79 => Op::Spec(rng.below(POOLS)),
                    80..=87 => Op::Allocatable(rng.below(NODES)),
                    88..=93 => {
                        let i = own(rng);
                        if round > 1 || shape_of(i) == Shape::Full {
                            Op::ForeignTaint(i)
                        } else {
                            Op::ForeignLabel(i)
                        }
                    }
                    _ => Op::ForeignLabel(own(rng)),
                })
                .collect();
            for i in (t..NODES).step_by(TASKS) {
                if round == 1 && shape_of(i) == Shape::Bare {
                    let at = rng.below(plan.len() + 1);
                    plan.insert(at, Op::ForeignLabel(i));
                }
                if round == 2 && shape_of(i) != Shape::Full {
                    let at = rng.below(plan.len() + 1);
                    plan.insert(at, Op::ForeignTaint(i));
                }
            }
            plan
        })
        .collect()
}

/// The last values a writer gave a node's foreign label and taint.
#[derive(Debug, Default, Clone)]
struct Foreign {
    label: Option<String>,
    taint: Option<String>,
}

async fn run_writer(
    client: kube::Client,
    seed: u64,
    mut rng: Rng,
    plan: Vec<Op>,
) -> HashMap<usize, Foreign> {
    let nodes: Api<Node> = Api::all(client.clone());
    let pools: Api<NodePool> = Api::all(client);
    let pp = PatchParams::default();
    let mut foreign: HashMap<usize, Foreign> = HashMap::new();
    let role = |j: usize| membership_label(&pool_name(seed, j));
    for (n, op) in plan.into_iter().enumerate() {
        match op {
            Op::Join(i, j) => {
                let body = json!({"metadata": {"labels": {role(j): ""}}});
                nodes
                    .patch(&node_name(seed, i), &pp, &Patch::Merge(&body))
                    .await
                    .unwrap();
            }
            Op::Leave(i, j) => {
                let body = json!({"metadata": {"labels": {role(j): null}}});
                nodes
                    .patch(&node_name(seed, i), &pp, &Patch::Merge(&body))
                    .await
                    .unwrap();
            }
            Op::Move(i, from, to) => {
                let mut labels = serde_json::Map::new();
                labels.insert(role(from), Value::Null);
                labels.insert(role(to), json!(""));
                let body = json!({"metadata": {"labels": labels}});
                nodes
                    .patch(&node_name(seed, i), &pp, &Patch::Merge(&body))
                    .await
                    .unwrap();
            }
            Op::Spec(j) => {
                let body = json!({"spec": pool_spec(&mut rng, seed, j)});
                pools
                    .patch(&pool_name(seed, j), &pp, &Patch::Merge(&body))
                    .await
                    .unwrap();
            }
            Op::Allocatable(i) => {
                let (cpu, _) = CPUS[rng.below(CPUS.len())];
                let (mem, _) = MEMORIES[rng.below(MEMORIES.len())];
                let resources = json!({"cpu": cpu, "memory": mem});
                let body = json!({"status": {"capacity": resources, "allocatable": resources}});
                nodes
                    .patch_status(&node_name(seed, i), &pp, &Patch::Merge(&body))
                    .await
                    .unwrap();
            }
            Op::ForeignLabel(i) => {
                let value = format!("w{n}");
                let body = json!({"metadata": {"labels": {FOREIGN_LABEL: value}}});
                nodes
                    .patch(&node_name(seed, i), &pp, &Patch::Merge(&body))
                    .await
                    .unwrap();
                foreign.entry(i).or_default().label = Some(value);
            }
            Op::ForeignTaint(i) => {
                let value = format!("w{n}");
                replace_foreign_taint(&nodes, &node_name(seed, i), &value).await;
                foreign.entry(i).or_default().taint = Some(value);
            }
        }
        if n % 8 == 0 {
            tokio::task::yield_now().await;
        }
    }
    foreign
}

/// Sets the foreign taint's value as another controller would: read, change, replace with the
/// resourceVersion read, again on 409.
async fn replace_foreign_taint(nodes: &Api<Node>, name: &str, value: &str) {
    for _ in 0..50 {
        let mut node = nodes.get(name).await.unwrap();
        let spec = node.spec.get_or_insert_with(Default::default);
        let taints = spec.taints.get_or_insert_with(Vec::new);
        match taints
            .iter_mut()
            .find(|t| t.key == FOREIGN_TAINT && t.effect == "NoSchedule")
        {
            Some(t) => t.value = Some(value.into()),
            None => taints.push(Taint {
                key: FOREIGN_TAINT.into(),
                value: Some(value.into()),
                effect: "NoSchedule".into(),
                time_added: None,
            }),
        }
        match nodes.replace(name, &PostParams::default(), &node).await {
            Ok(_) => return,
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => panic!("replacing node {name}: {e}"),
        }
    }
    panic!("node {name}: 50 conflicts in a row replacing the foreign taint");
}

async fn seed_pools(client: &kube::Client, seed: u64) -> Result<Vec<NodePool>, String> {
    let prefix = format!("churn{seed}-");
    Ok(Api::<NodePool>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?
        .items
        .into_iter()
        .filter(|p| p.name_any().starts_with(&prefix))
        .collect())
}

async fn seed_nodes(client: &kube::Client, seed: u64) -> Result<Vec<Node>, String> {
    let prefix = format!("churn{seed}-");
    Ok(Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?
        .items
        .into_iter()
        .filter(|n| n.name_any().starts_with(&prefix))
        .collect())
}

type TaintId = (String, String, String);

fn taints_of(n: &Node) -> Vec<TaintId> {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|t| (t.key, t.value.unwrap_or_default(), t.effect))
        .collect()
}

fn is_pool_key(k: &str) -> bool {
    k == POOL_KEY || k.starts_with(&format!("{POOL_KEY}/"))
}

/// Taints the control plane manages itself (`node.kubernetes.io/not-ready` on a new node,
/// `unreachable` from the node lifecycle controller on a real API server): neither the
/// operator's nor the foreign writer's, so not checked.
fn is_control_plane_taint(t: &TaintId) -> bool {
    t.0.starts_with("node.kubernetes.io/")
}

/// A node's taints without the control plane's.
fn checked_taints(n: &Node) -> Vec<TaintId> {
    taints_of(n)
        .into_iter()
        .filter(|t| !is_control_plane_taint(t))
        .collect()
}

/// A node's applied records (the operator's annotations; a real control plane adds others).
fn records(n: &Node) -> BTreeMap<String, String> {
    n.annotations()
        .iter()
        .filter(|(k, _)| k.starts_with(APPLIED_ANNOTATION_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Everything that is not yet as it must be after the churn (`Ok`: converged).
async fn check_converged(
    client: &kube::Client,
    seed: u64,
    foreign: &HashMap<usize, Foreign>,
) -> Result<(), String> {
    let pools = seed_pools(client, seed).await?;
    let nodes = seed_nodes(client, seed).await?;
    let mut problems = Vec::new();
    let members = |pool: &str| -> Vec<&Node> {
        nodes
            .iter()
            .filter(|n| n.labels().contains_key(&membership_label(pool)))
            .collect()
    };
    for pool in &pools {
        let name = pool.name_any();
        let status = pool.status.clone().unwrap_or_default();
        let ready = status.ready_condition();
        if ready.map(|c| c.status.as_str()) != Some("True") || status.status != 200 {
            problems.push(format!(
                "pool {name} not ready: status {} {:?}",
                status.status,
                ready.map(|c| (&c.reason, &c.message))
            ));
        }
        if status.observed_generation != pool.metadata.generation {
            problems.push(format!(
                "pool {name}: observedGeneration {:?} of generation {:?}",
                status.observed_generation, pool.metadata.generation
            ));
        }
        let m = members(&name);
        if usize::try_from(status.node_count).ok() != Some(m.len()) {
            problems.push(format!(
                "pool {name}: nodeCount {} with {} members",
                status.node_count,
                m.len()
            ));
        }
        // Expected allocatable, summed here in integers.
        let mut cpu_milli = 0;
        let mut mem_mi = 0;
        for n in &m {
            let alloc = n
                .status
                .as_ref()
                .and_then(|s| s.allocatable.clone())
                .unwrap_or_default();
            let find = |table: &[(&str, u64)], v: Option<&str>| {
                table
                    .iter()
                    .find(|(s, _)| Some(*s) == v)
                    .map_or(0, |(_, x)| *x)
            };
            cpu_milli += find(&CPUS, alloc.get("cpu").map(|q| q.0.as_str()));
            mem_mi += find(&MEMORIES, alloc.get("memory").map(|q| q.0.as_str()));
        }
        let got = |r: &str| {
            status
                .allocatable
                .get(r)
                .map(|q| Quantity::parse(&q.0).map_err(|e| e.to_string()))
                .transpose()
        };
        let (got_cpu, got_mem) = (got("cpu")?, got("memory")?);
        let (want_cpu, want_mem) = if m.is_empty() {
            (None, None)
        } else {
            (
                Some(Quantity::parse(&format!("{cpu_milli}m")).map_err(|e| e.to_string())?),
                Some(Quantity::parse(&format!("{mem_mi}Mi")).map_err(|e| e.to_string())?),
            )
        };
        if got_cpu != want_cpu || got_mem != want_mem {
            problems.push(format!(
                "pool {name}: allocatable {:?}, want cpu {cpu_milli}m memory {mem_mi}Mi",
                status.allocatable
            ));
        }
    }
    let specs: BTreeMap<String, &NodePool> = pools.iter().map(|p| (p.name_any(), p)).collect();
    for (i, node) in (0..NODES).filter_map(|i| {
        nodes
            .iter()
            .find(|n| n.name_any() == node_name(seed, i))
            .map(|n| (i, n))
    }) {
        let name = node.name_any();
        let labels = node.labels();
        let in_pools: Vec<&String> = specs
            .keys()
            .filter(|p| labels.contains_key(&membership_label(p)))
            .collect();
        let mut want_labels = BTreeMap::new();
        let mut want_taints = BTreeSet::new();
        for p in &in_pools {
            let spec = &specs[*p].spec;
            want_labels.extend(spec.labels.clone());
            want_taints.extend(spec.taints.iter().map(|t| {
                (
                    t.key.clone(),
                    t.value.clone().unwrap_or_default(),
                    t.effect.clone(),
                )
            }));
        }
        let got_labels: BTreeMap<String, String> = labels
            .iter()
            .filter(|(k, _)| is_pool_key(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if got_labels != want_labels {
            problems.push(format!(
                "node {name} in {in_pools:?}: pool labels {got_labels:?}, want {want_labels:?}"
            ));
        }
        let taints = checked_taints(node);
        let got_taints: Vec<TaintId> = taints
            .iter()
            .filter(|t| is_pool_key(&t.0))
            .cloned()
            .collect();
        let got_set: BTreeSet<TaintId> = got_taints.iter().cloned().collect();
        if got_set != want_taints || got_set.len() != got_taints.len() {
            problems.push(format!(
                "node {name} in {in_pools:?}: pool taints {got_taints:?}, want {want_taints:?}"
            ));
        }
        // Foreign values: intact, with their last written value; nothing else foreign.
        let f = foreign.get(&i).cloned().unwrap_or_default();
        if labels.get(FOREIGN_LABEL) != f.label.as_ref() {
            problems.push(format!(
                "node {name}: foreign label {:?}, want {:?}",
                labels.get(FOREIGN_LABEL),
                f.label
            ));
        }
        let foreign_taints: Vec<&TaintId> = taints.iter().filter(|t| !is_pool_key(&t.0)).collect();
        let want_foreign: Vec<TaintId> = f
            .taint
            .iter()
            .map(|v| (FOREIGN_TAINT.to_owned(), v.clone(), "NoSchedule".to_owned()))
            .collect();
        if foreign_taints.into_iter().cloned().collect::<Vec<_>>() != want_foreign {
            problems.push(format!(
                "node {name}: taints {taints:?}, want the foreign one as {:?}",
                f.taint
            ));
        }
        for k in labels.keys() {
            if !is_pool_key(k) && k != FOREIGN_LABEL && !k.starts_with(MEMBERSHIP_LABEL_PREFIX) {
                problems.push(format!("node {name}: unexpected label {k}"));
            }
        }
        // Records: exactly the member pools with something to apply, equal to their specs.
        for (k, v) in node.annotations() {
            let Some(p) = k.strip_prefix(APPLIED_ANNOTATION_PREFIX) else {
                continue;
            };
            match specs.get(p) {
                Some(pool) if in_pools.iter().any(|m| m.as_str() == p) => {
                    let record: Applied = serde_json::from_str(v).map_err(|e| e.to_string())?;
                    let mut want = Applied::from_spec(&pool.spec);
                    want.taints.sort();
                    let mut got = record;
                    got.taints.sort();
                    if got != want {
                        problems.push(format!("node {name}: record of {p} is {v}"));
                    }
                }
                _ => problems.push(format!("node {name}: record of pool {p}, not a member")),
            }
        }
    }
    if nodes.len() != NODES || pools.len() != POOLS {
        problems.push(format!("{} nodes and {} pools", nodes.len(), pools.len()));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        let n = problems.len();
        problems.truncate(8);
        Err(format!("{n} problems, first: {}", problems.join("; ")))
    }
}

/// Deletes the pool with the most members (ties: a seeded pick, tainted pools first) and
/// checks that exactly what it applied leaves the nodes; returns how long that took.
async fn delete_one_pool(client: &kube::Client, seed: u64, rng: &mut Rng) -> Duration {
    let pools_api: Api<NodePool> = Api::all(client.clone());
    let before = seed_nodes(client, seed).await.unwrap();
    let count = |j: usize| {
        before
            .iter()
            .filter(|n| {
                n.labels()
                    .contains_key(&membership_label(&pool_name(seed, j)))
            })
            .count()
    };
    let offset = rng.below(POOLS);
    let victim_j = (0..POOLS)
        .map(|k| (k + offset) % POOLS)
        .max_by_key(|&j| (count(j), tainted(j)))
        .unwrap_or(0);
    let victim = pool_name(seed, victim_j);
    let spec = pools_api.get(&victim).await.unwrap().spec;
    let record_key = applied_annotation_key(&victim);
    // What every node must look like once the pool is gone.
    let expected: BTreeMap<String, Node> = before
        .iter()
        .map(|n| {
            let mut n = n.clone();
            if let Some(raw) = n.annotations().get(&record_key).cloned() {
                let record: Applied = serde_json::from_str(&raw).unwrap();
                assert_eq!(
                    record.labels,
                    spec.labels,
                    "record of {victim} on {} before deletion",
                    n.name_any()
                );
                let labels = n.labels_mut();
                for k in record.labels.keys() {
                    labels.remove(k);
                }
                if let Some(taints) = n.spec.as_mut().and_then(|s| s.taints.as_mut()) {
                    taints.retain(|t| {
                        !record.taints.iter().any(|r| {
                            r.key == t.key
                                && r.effect == t.effect
                                && r.value == t.value.clone().unwrap_or_default()
                        })
                    });
                }
                n.annotations_mut().remove(&record_key);
            }
            (n.name_any(), n)
        })
        .collect();
    let start = Instant::now();
    pools_api
        .delete(&victim, &DeleteParams::default())
        .await
        .unwrap();
    kcr_envtest::eventually(
        "exactly the deleted pool's labels and taints removed",
        CONVERGE,
        || async {
            if pools_api
                .get_opt(&victim)
                .await
                .map_err(|e| e.to_string())?
                .is_some()
            {
                return Err(format!("pool {victim} still exists"));
            }
            let now = seed_nodes(client, seed).await?;
            for n in &now {
                let want = &expected[&n.name_any()];
                if n.labels() != want.labels()
                    || checked_taints(n) != checked_taints(want)
                    || records(n) != records(want)
                {
                    return Err(format!(
                        "node {}: labels {:?} taints {:?} records {:?}; want labels {:?} taints {:?} records {:?}",
                        n.name_any(),
                        n.labels(),
                        checked_taints(n),
                        records(n).keys().collect::<Vec<_>>(),
                        want.labels(),
                        checked_taints(want),
                        records(want).keys().collect::<Vec<_>>()
                    ));
                }
            }
            Ok(())
        },
    )
    .await;
    start.elapsed()
}
