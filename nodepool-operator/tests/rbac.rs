//! The operator's RBAC (`config/rbac/`), proven on the real API server: the operator runs as
//! its ServiceAccount `nodepool-system/nodepool-operator`, bound only to the shipped roles.
//!
//! - [`the_lifecycle_runs_as_the_service_account_with_the_shipped_roles`]: two replicas with
//!   leader election; pools created, changed, nodes moved between pools, the leader stopped and
//!   the standby taking over, pools deleted through the finalizer, events recorded; no request
//!   of the operator is forbidden (its log has no `forbidden`).
//! - [`every_verb_of_the_shipped_roles_is_needed`]: for every verb of every rule of the parsed
//!   role files, the roles without just that verb, and one short scenario that needs it
//!   ([`scenario_for`]): the API server's Forbidden must surface, naming the verb and the
//!   resource, in the operator's log (warnings and errors), the pool's `Ready` condition or a
//!   Warning event. A verb no scenario exercises fails the test: exercise it, or remove it from
//!   the role (`deploy::cluster_role`, `deploy::leader_election_role`).
//!
//! Both need an API server that authorizes: on kcr-envtest's in-process backend (which does
//! not) they print why they are skipped. `KCR_ENVTEST_BACKEND=real` runs them.
//!
//! The operator's client impersonates the ServiceAccount (`client_for_service_account`), so
//! its requests still pass the fault proxy: `nodes get` and `nodepools get` are used only to
//! re-read an object after a guarded patch was refused, which the scenarios of those two verbs
//! cause by answering the operator's first patch with an injected 409.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::node::v1::RuntimeClass;
use kcr_envtest::{ApiError, EnvtestError, service_account_groups, service_account_user};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use nodepool_operator::crd::{FINALIZER, NodePool, membership_label, runtime_class_name};
use nodepool_operator::deploy::{MUTATING_CONFIGURATION, NAMESPACE, VALIDATING_CONFIGURATION};
use nodepool_operator::embedded::{Embedded, convergence_problems};
use nodepool_operator::operator::{LEADER_ELECTION_ID, RunOptions};
use serde_json::{Value, json};

/// The operator's ServiceAccount (`config/rbac/service_account.yaml`).
const SERVICE_ACCOUNT: &str = "nodepool-operator";
/// The files of `config/rbac/`, applied in this order.
const RBAC_FILES: [&str; 5] = [
    "service_account.yaml",
    "role.yaml",
    "role_binding.yaml",
    "leader_election_role.yaml",
    "leader_election_role_binding.yaml",
];
/// The files whose rules are checked verb by verb.
const ROLE_FILES: [&str; 2] = ["role.yaml", "leader_election_role.yaml"];
/// How long one wait (convergence, a Forbidden surfacing, RBAC taking effect) may take.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Leader election timings short enough for a test: lease, renew deadline, retry period.
const LEADER_TIMINGS: (Duration, Duration, Duration) = (
    Duration::from_secs(3),
    Duration::from_secs(2),
    Duration::from_millis(500),
);

/// The two tests start operators whose log lines go to one capture: one test at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

// ---------------------------------------------------------------------------------------------
// The operator's log.

/// Every warning and error logged in this test binary (the operator's included), one event a
/// line.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
    fn clear(&self) {
        self.0.lock().unwrap().clear();
    }
}

/// The capture, installed as the global subscriber on first use.
fn logs() -> &'static Logs {
    static LOGS: OnceLock<Logs> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Logs::default();
        let writer = logs.clone();
        let installed = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::WARN)
            .try_init();
        assert!(installed.is_ok(), "another subscriber is installed");
        logs
    })
}

// ---------------------------------------------------------------------------------------------
// The shipped roles.

/// The YAML documents of `config/rbac/<file>`.
fn rbac_docs(file: &str) -> Vec<Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("config/rbac")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One verb on one resource granted by one of the shipped roles.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Permission {
    /// The role file.
    file: &'static str,
    /// The role's namespace (`None`: a ClusterRole).
    namespace: Option<String>,
    group: String,
    /// The resource, with `/<subresource>`.
    resource: String,
    verb: String,
}

impl std::fmt::Display for Permission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(
            f,
            "{} {}/{} ({})",
            self.verb, group, self.resource, self.file
        )
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|s| s.as_str().expect("a string").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Every verb of every rule of the role files, in file and rule order.
fn permissions() -> Vec<Permission> {
    let mut out = Vec::new();
    for file in ROLE_FILES {
        let docs = rbac_docs(file);
        assert_eq!(docs.len(), 1, "{file}: one role");
        let role = &docs[0];
        let namespace = role["metadata"]["namespace"].as_str().map(str::to_owned);
        for rule in role["rules"].as_array().expect("rules") {
            for key in ["resourceNames", "nonResourceURLs"] {
                assert!(
                    rule.get(key).is_none(),
                    "{file}: {key} in a rule: teach this test to drop it"
                );
            }
            for group in strings(&rule["apiGroups"]) {
                for resource in strings(&rule["resources"]) {
                    for verb in strings(&rule["verbs"]) {
                        assert_ne!(verb, "*", "{file}: a wildcard verb");
                        assert_ne!(resource, "*", "{file}: a wildcard resource");
                        out.push(Permission {
                            file,
                            namespace: namespace.clone(),
                            group: group.clone(),
                            resource: resource.clone(),
                            verb,
                        });
                    }
                }
            }
        }
    }
    out
}

/// The role of `file` as shipped, without `dropped` (one rule per group and resource; the
/// same permissions as the file's rules otherwise).
fn role_without(file: &str, dropped: Option<&Permission>) -> Value {
    let mut role = rbac_docs(file).remove(0);
    let mut rules = Vec::new();
    for rule in role["rules"].as_array().expect("rules") {
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                let verbs: Vec<String> = strings(&rule["verbs"])
                    .into_iter()
                    .filter(|v| {
                        dropped.is_none_or(|d| {
                            !(d.file == file
                                && d.group == group
                                && d.resource == resource
                                && &d.verb == v)
                        })
                    })
                    .collect();
                if !verbs.is_empty() {
                    rules.push(
                        json!({"apiGroups": [group], "resources": [resource], "verbs": verbs}),
                    );
                }
            }
        }
    }
    role["rules"] = json!(rules);
    role
}

/// Whether the API server authorizes the ServiceAccount for `p` (a SubjectAccessReview).
async fn allowed(admin: &kube::Client, p: &Permission) -> Result<bool, String> {
    let (resource, subresource) = match p.resource.split_once('/') {
        Some((r, s)) => (r.to_owned(), Some(s.to_owned())),
        None => (p.resource.clone(), None),
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(service_account_user(NAMESPACE, SERVICE_ACCOUNT)),
            groups: Some(service_account_groups(NAMESPACE).to_vec()),
            resource_attributes: Some(ResourceAttributes {
                group: Some(p.group.clone()),
                resource: Some(resource),
                subresource,
                verb: Some(p.verb.clone()),
                namespace: p.namespace.clone(),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SubjectAccessReview>::all(admin.clone())
        .create(&PostParams::default(), &review)
        .await
        .map_err(|e| format!("SubjectAccessReview for {p}: {e}"))?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// Installs the roles without `dropped` and waits until the API server authorizes exactly
/// that: every permission but `dropped` allowed, `dropped` denied.
async fn install_roles(env: &Embedded, all: &[Permission], dropped: Option<&Permission>) {
    for file in ROLE_FILES {
        env.server
            .upsert(role_without(file, dropped))
            .await
            .unwrap_or_else(|e| panic!("installing {file}: {e}"));
    }
    let admin = env.client.clone();
    kcr_envtest::eventually("the roles in effect", TIMEOUT, || {
        let admin = admin.clone();
        async move {
            for p in all {
                let want = dropped != Some(p);
                if allowed(&admin, p).await? != want {
                    return Err(format!("{p}: allowed is not {want} yet"));
                }
            }
            Ok::<(), String>(())
        }
    })
    .await;
}

/// Prepares `env` for the operator's ServiceAccount: its namespace, and `config/rbac/` as
/// shipped. Returns the ServiceAccount's client, or `None` (printing why) when the backend
/// cannot authorize.
async fn service_account_client(env: &Embedded, test: &str) -> Option<kube::Client> {
    let client = match env
        .server
        .client_for_service_account(NAMESPACE, SERVICE_ACCOUNT)
    {
        Ok(c) => c,
        Err(e @ EnvtestError::Unsupported { .. }) => {
            println!(
                "SKIPPED {test}: the {} backend cannot enforce RBAC ({e}); run it with KCR_ENVTEST_BACKEND=real",
                env.server.backend().as_str()
            );
            return None;
        }
        Err(e) => panic!("{e}"),
    };
    env.server
        .upsert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}))
        .await
        .unwrap();
    for file in RBAC_FILES {
        for doc in rbac_docs(file) {
            env.server
                .upsert(doc)
                .await
                .unwrap_or_else(|e| panic!("applying {file}: {e}"));
        }
    }
    // The OwnerReferencesPermissionEnforcement admission resolves an owner's kind with a
    // discovery cache it fills on first use (and refreshes every 30 s): let NodePool be in
    // discovery before the operator's first owned RuntimeClass is admitted.
    let admin = env.client.clone();
    kcr_envtest::eventually("NodePool in discovery", TIMEOUT, || {
        let admin = admin.clone();
        async move {
            let group = kube::discovery::group(&admin, nodepool_operator::crd::GROUP)
                .await
                .map_err(|e| e.to_string())?;
            if group
                .recommended_resources()
                .iter()
                .any(|(r, _)| r.plural == "nodepools")
            {
                Ok(())
            } else {
                Err("not served yet".to_owned())
            }
        }
    })
    .await;
    Some(client)
}

// ---------------------------------------------------------------------------------------------
// Helpers shared by both tests.

fn run_options(env: &Embedded, leader_identity: Option<&str>) -> RunOptions {
    RunOptions {
        leader_elect: leader_identity.is_some(),
        leader_election_namespace: Some(NAMESPACE.to_owned()),
        leader_election_identity: leader_identity.map(str::to_owned),
        leader_election_timings: Some(LEADER_TIMINGS),
        ..env.run_options()
    }
}

fn pool(name: &str, labels: Value, taints: Value) -> NodePool {
    serde_json::from_value(json!({
        "apiVersion": "nodes.lailin.xyz/v1", "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"labels": labels, "taints": taints, "handler": "runc"}
    }))
    .unwrap()
}

/// A pool labelling its members `node-pool.lailin.xyz/<name>=10`, without taints.
fn simple_pool(name: &str) -> NodePool {
    pool(
        name,
        json!({format!("node-pool.lailin.xyz/{name}"): "10"}),
        json!([]),
    )
}

async fn set_membership(env: &Embedded, node: &str, pool: &str, member: bool) {
    let value = if member { json!("") } else { Value::Null };
    Api::<Node>::all(env.client.clone())
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"labels": {membership_label(pool): value}}})),
        )
        .await
        .unwrap();
}

async fn create_pool(env: &Embedded, p: &NodePool) {
    Api::<NodePool>::all(env.client.clone())
        .create(&PostParams::default(), p)
        .await
        .unwrap_or_else(|e| panic!("creating pool {}: {e}", p.name_any()));
}

async fn converged(env: &Embedded) {
    let client = env.client.clone();
    kcr_envtest::eventually("converged", TIMEOUT, || {
        let client = client.clone();
        async move {
            match convergence_problems(&client).await {
                Ok(p) if p.is_empty() => Ok(()),
                Ok(p) => Err(format!("{p:?}")),
                Err(e) => Err(e.to_string()),
            }
        }
    })
    .await;
}

async fn lease(env: &Embedded) -> Option<Lease> {
    Api::<Lease>::namespaced(env.client.clone(), NAMESPACE)
        .get_opt(LEADER_ELECTION_ID)
        .await
        .unwrap()
}

fn holder(lease: Option<&Lease>) -> Option<String> {
    lease
        .and_then(|l| l.spec.as_ref())
        .and_then(|s| s.holder_identity.clone())
        .filter(|h| !h.is_empty())
}

/// The lines of the captured log that mention `forbidden` (any case).
fn forbidden_lines() -> Vec<String> {
    logs()
        .text()
        .lines()
        .filter(|l| l.to_lowercase().contains("forbidden"))
        .map(str::to_owned)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The lifecycle with the shipped roles.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lifecycle_runs_as_the_service_account_with_the_shipped_roles() {
    let _serial = SERIAL.lock().await;
    // A server of its own: a cluster-wide operator, the shipped ClusterRoles (fixed names).
    let env = Embedded::start(3).await.unwrap();
    let test = "the_lifecycle_runs_as_the_service_account_with_the_shipped_roles";
    let Some(sa) = service_account_client(&env, test).await else {
        return;
    };
    let all = permissions();
    install_roles(&env, &all, None).await;
    logs().clear();

    // The client is the ServiceAccount's, not an admin's: what the roles do not grant is
    // refused, naming the account.
    let err = Api::<Secret>::all(sa.clone())
        .list(&ListParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 403),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains(&service_account_user(NAMESPACE, SERVICE_ACCOUNT)),
        "{err}"
    );

    // Two replicas with leader election; webhooks served by the first.
    let a = env
        .start_operator_as(sa.clone(), &run_options(&env, Some("replica-a")), true)
        .await
        .unwrap();
    let b = env
        .start_operator_as(sa.clone(), &run_options(&env, Some("replica-b")), false)
        .await
        .unwrap();
    let mut replicas = vec![("replica-a", a), ("replica-b", b)];
    kcr_envtest::eventually("one replica leads", TIMEOUT, || {
        let leaders = replicas.iter().filter(|(_, r)| r.is_leader()).count();
        async move { leaders == 1 }
    })
    .await;
    let leader = replicas.iter().position(|(_, r)| r.is_leader()).unwrap();
    assert_eq!(
        holder(lease(&env).await.as_ref()).as_deref(),
        Some(replicas[leader].0)
    );

    let nodes: Api<Node> = Api::all(env.client.clone());
    let pools: Api<NodePool> = Api::all(env.client.clone());
    let rcs: Api<RuntimeClass> = Api::all(env.client.clone());
    let (n0, n1, n2) = ("envtest-node-0", "envtest-node-1", "envtest-node-2");

    // Create: two members of "worker", one of "batch".
    for (n, p) in [(n0, "worker"), (n1, "worker"), (n2, "batch")] {
        set_membership(&env, n, p, true).await;
    }
    let taint = json!([{"key": "node-pool.lailin.xyz", "value": "worker", "effect": "NoSchedule"}]);
    create_pool(
        &env,
        &pool(
            "worker",
            json!({"node-pool.lailin.xyz/worker": "10"}),
            taint,
        ),
    )
    .await;
    create_pool(&env, &simple_pool("batch")).await;
    converged(&env).await;
    let worker = pools.get("worker").await.unwrap();
    assert!(worker.finalizers().iter().any(|f| f == FINALIZER));
    assert_eq!(worker.status.as_ref().unwrap().node_count, 2);
    let rc = rcs.get(&runtime_class_name("worker")).await.unwrap();
    let owner = &rc.owner_references()[0];
    assert_eq!(
        (owner.name.as_str(), owner.block_owner_deletion),
        ("worker", Some(true))
    );
    let node0 = nodes.get(n0).await.unwrap();
    assert_eq!(node0.labels()["node-pool.lailin.xyz/worker"], "10");

    // Spec change.
    pools
        .patch(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(
                &json!({"spec": {"labels": {"node-pool.lailin.xyz/worker": "11"}, "taints": null}}),
            ),
        )
        .await
        .unwrap();
    converged(&env).await;
    assert_eq!(
        nodes.get(n1).await.unwrap().labels()["node-pool.lailin.xyz/worker"],
        "11"
    );

    // A node moves from "worker" to "batch" in one write.
    nodes
        .patch(
            n1,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"labels": {
                membership_label("worker"): null, membership_label("batch"): ""}}})),
        )
        .await
        .unwrap();
    converged(&env).await;
    let node1 = nodes.get(n1).await.unwrap();
    assert!(!node1.labels().contains_key("node-pool.lailin.xyz/worker"));
    assert_eq!(node1.labels()["node-pool.lailin.xyz/batch"], "10");
    assert_eq!(
        pools.get("batch").await.unwrap().status.unwrap().node_count,
        2
    );

    // The leader renews its lease (an update).
    let renewed = lease(&env)
        .await
        .and_then(|l| l.spec)
        .and_then(|s| s.renew_time);
    kcr_envtest::eventually("the lease renewed", TIMEOUT, || {
        let env = &env;
        let renewed = renewed.clone();
        async move {
            let now = lease(env)
                .await
                .and_then(|l| l.spec)
                .and_then(|s| s.renew_time);
            now.is_some() && now != renewed
        }
    })
    .await;

    // The leader stops (releasing the lease); the standby takes over and reconciles.
    let (old_name, old) = replicas.remove(leader);
    let (new_name, new) = replicas.remove(0);
    if old_name == "replica-a" {
        env.install_webhooks(new.webhook_addr.unwrap())
            .await
            .unwrap();
    }
    old.stop().await.unwrap();
    kcr_envtest::eventually("the standby leads", TIMEOUT, || {
        let leads = new.is_leader();
        async move { leads }
    })
    .await;
    assert_eq!(
        holder(lease(&env).await.as_ref()).as_deref(),
        Some(new_name)
    );
    pools
        .patch(
            "batch",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"labels": {"node-pool.lailin.xyz/batch": "20"}}})),
        )
        .await
        .unwrap();
    converged(&env).await;
    assert_eq!(
        nodes.get(n2).await.unwrap().labels()["node-pool.lailin.xyz/batch"],
        "20"
    );

    // Deletion through the finalizer: nodes cleaned, RuntimeClasses gone, pools gone.
    for p in ["worker", "batch"] {
        pools.delete(p, &DeleteParams::default()).await.unwrap();
    }
    kcr_envtest::eventually("pools and their RuntimeClasses gone", TIMEOUT, || {
        let (pools, rcs) = (pools.clone(), rcs.clone());
        async move {
            let left = pools
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            let rcs = rcs
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            if left.items.is_empty() && rcs.items.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "pools {:?}, RuntimeClasses {:?}",
                    left.items
                        .iter()
                        .map(ResourceExt::name_any)
                        .collect::<Vec<_>>(),
                    rcs.items
                        .iter()
                        .map(ResourceExt::name_any)
                        .collect::<Vec<_>>()
                ))
            }
        }
    })
    .await;
    for n in [n0, n1, n2] {
        let node = nodes.get(n).await.unwrap();
        assert!(
            !node
                .labels()
                .keys()
                .chain(node.annotations().keys())
                .any(|k| k.contains("node-pool.lailin.xyz")),
            "{n}: {:?} {:?}",
            node.labels(),
            node.annotations()
        );
    }

    assert_no_forbidden("after the deletion");

    // Events: recorded by the operator for every step.
    let events = Api::<Event>::namespaced(env.client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    for reason in [
        "NodesUpdated",
        "RuntimeClassCreated",
        "NodesCleaned",
        "RuntimeClassDeleted",
    ] {
        assert!(
            events
                .items
                .iter()
                .any(|e| e.reason.as_deref() == Some(reason)
                    && e.reporting_controller.as_deref() == Some("nodepool-operator/nodepool")),
            "no {reason} event"
        );
    }
    // A repeated event is a patch of the first (kube's recorder): NodesUpdated came often.
    assert!(
        events
            .items
            .iter()
            .any(|e| e.series.as_ref().is_some_and(|s| s.count >= 2)),
        "no repeated event"
    );

    new.stop().await.unwrap();
    assert_eq!(
        holder(lease(&env).await.as_ref()),
        None,
        "the last replica released the lease"
    );
    assert_no_forbidden("after the last replica stopped");
}

/// Fails the test with the operator's log lines that mention `forbidden`, if any.
fn assert_no_forbidden(when: &str) {
    let forbidden = forbidden_lines();
    assert!(
        forbidden.is_empty(),
        "{when}: the shipped roles lack a permission:\n{}",
        forbidden.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Every verb needed.

/// A short scenario that needs a permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    /// Start the operator, create a pool with one member node. Needs: the watches (list and
    /// watch of pools, nodes, RuntimeClasses), the finalizer (patch pools), the node patch, the
    /// RuntimeClass's read and create (with `blockOwnerDeletion` on its owner reference: update
    /// of `nodepools/finalizers` under OwnerReferencesPermissionEnforcement), the status patch,
    /// the first events (create).
    CreatePool,
    /// As `CreatePool`, with the operator's first node patch answered 409: it re-reads the
    /// node (get nodes).
    NodePatchConflict,
    /// As `CreatePool`, with the operator's first pool patch (the finalizer) answered 409: it
    /// re-reads the pool (get nodepools).
    FinalizerPatchConflict,
    /// The pool converges, then its RuntimeClass is edited by hand: the operator repairs it
    /// (update runtimeclasses).
    RepairRuntimeClass,
    /// The pool converges, then is deleted: the finalizer's cleanup deletes its RuntimeClass
    /// (delete runtimeclasses).
    DeletePool,
    /// The pool converges with one member, then a second node joins: a second `NodesUpdated`
    /// event, which kube's recorder sends as a patch of the first (patch events).
    RepeatEvent,
    /// The operator runs with leader election: acquires the Lease (get, create) and renews it
    /// (update).
    LeaderElection,
}

/// The scenario that needs `p`, or `Err` when none does.
fn scenario_for(p: &Permission) -> Result<Scenario, String> {
    use Scenario::*;
    Ok(match (p.resource.as_str(), p.verb.as_str()) {
        ("leases", "get" | "create" | "update") => LeaderElection,
        ("nodepools", "get") => FinalizerPatchConflict,
        ("nodes", "get") => NodePatchConflict,
        ("runtimeclasses", "update") => RepairRuntimeClass,
        ("runtimeclasses", "delete") => DeletePool,
        ("events", "patch") => RepeatEvent,
        ("nodepools" | "nodes" | "runtimeclasses", "list" | "watch")
        | ("nodepools" | "nodes" | "nodepools/status", "patch")
        | ("nodepools/finalizers", "update")
        | ("runtimeclasses", "get" | "create")
        | ("events", "create") => CreatePool,
        _ => {
            return Err(format!(
                "the roles grant {p}, which no scenario needs: exercise it here, or remove it \
                 from deploy::cluster_role / deploy::leader_election_role and regenerate config/"
            ));
        }
    })
}

/// What the API server's refusal of `p` says, in one message.
fn refusal_text(p: &Permission) -> Vec<String> {
    if p.resource == "nodepools/finalizers" {
        // OwnerReferencesPermissionEnforcement's words (it names neither user nor verb).
        return vec![
            "forbidden".to_owned(),
            "cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on".to_owned(),
        ];
    }
    vec![
        format!(
            "User \"{}\" cannot {} resource \"{}\"",
            service_account_user(NAMESPACE, SERVICE_ACCOUNT),
            p.verb,
            p.resource
        ),
        format!("in API group \"{}\"", p.group),
    ]
}

/// Where a message with every part of `wanted` surfaced: the log, the pool's `Ready` condition
/// or a Warning event about it.
async fn surfaced(env: &Embedded, pool: &str, wanted: &[String]) -> Option<String> {
    let has = |text: &str| wanted.iter().all(|w| text.contains(w.as_str()));
    if let Some(line) = logs().text().lines().find(|l| has(l)) {
        return Some(format!("the operator's log: {line}"));
    }
    let ready = Api::<NodePool>::all(env.client.clone())
        .get_opt(pool)
        .await
        .ok()
        .flatten()
        .and_then(|p| p.status)
        .and_then(|s| s.ready_condition().map(|c| c.message.clone()));
    if let Some(message) = ready.filter(|m| has(m)) {
        return Some(format!("the pool's Ready condition: {message}"));
    }
    let events = Api::<Event>::namespaced(env.client.clone(), "default")
        .list(&ListParams::default())
        .await
        .ok()?;
    events
        .items
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pool))
        .find_map(|e| e.note.filter(|n| has(n)))
        .map(|n| format!("a Warning event: {n}"))
}

/// Runs `scenario` with the roles lacking `p` until the refusal of `p` surfaces; returns
/// where, or why not.
async fn exercise(
    env: &Embedded,
    sa: &kube::Client,
    p: &Permission,
    scenario: Scenario,
    index: usize,
) -> Result<String, String> {
    let name = format!("v{index}");
    let node_names = env.server.add_nodes(2).await.map_err(|e| e.to_string())?;
    let (first, second) = (node_names[0].as_str(), node_names[1].as_str());
    let faults = env.server.faults();
    set_membership(env, first, &name, true).await;
    let leader = (scenario == Scenario::LeaderElection).then_some("variant");
    if leader.is_some() {
        let _ = Api::<Lease>::namespaced(env.client.clone(), NAMESPACE)
            .delete(LEADER_ELECTION_ID, &DeleteParams::default())
            .await;
    }
    let op = env
        .start_operator_as(sa.clone(), &run_options(env, leader), true)
        .await
        .map_err(|e| format!("starting the operator: {e}"))?;
    let conflict =
        |resource: &str| ApiError::conflict("", resource, &name, "injected: changed meanwhile");
    match scenario {
        Scenario::NodePatchConflict => {
            faults.fail_next_with("patch", "nodes", 1, conflict("nodes"))
        }
        Scenario::FinalizerPatchConflict => {
            faults.fail_next_with("patch", "nodepools", 1, conflict("nodepools"))
        }
        _ => {}
    }
    if scenario != Scenario::LeaderElection {
        create_pool(env, &simple_pool(&name)).await;
    }
    let needs_convergence = matches!(
        scenario,
        Scenario::RepairRuntimeClass | Scenario::DeletePool | Scenario::RepeatEvent
    );
    if needs_convergence {
        converged(env).await;
        match scenario {
            Scenario::RepairRuntimeClass => {
                let rcs: Api<RuntimeClass> = Api::all(env.client.clone());
                let mut rc = rcs
                    .get(&runtime_class_name(&name))
                    .await
                    .map_err(|e| e.to_string())?;
                rc.scheduling
                    .get_or_insert_with(Default::default)
                    .node_selector
                    .get_or_insert_with(Default::default)
                    .insert("hacked".into(), "yes".into());
                rcs.replace(&rc.name_any(), &PostParams::default(), &rc)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Scenario::DeletePool => {
                Api::<NodePool>::all(env.client.clone())
                    .delete(&name, &DeleteParams::default())
                    .await
                    .map_err(|e| e.to_string())?;
            }
            _ => set_membership(env, second, &name, true).await,
        }
    }
    let wanted = refusal_text(p);
    let deadline = Instant::now() + TIMEOUT;
    let result = loop {
        if let Some(place) = surfaced(env, &name, &wanted).await {
            break Ok(place);
        }
        if Instant::now() > deadline {
            break Err(format!(
                "no message with {wanted:?} within {TIMEOUT:?}; forbidden lines: {:?}",
                forbidden_lines()
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    faults.clear();
    // A replica that lost its lease has stopped already, and its release is refused.
    let _ = op.stop().await;
    clean_up(env, &node_names).await;
    result
}

/// Removes what a scenario left: webhook configurations (the next operator installs its own),
/// pools (finalizers dropped), RuntimeClasses, the scenario's nodes, the Lease.
async fn clean_up(env: &Embedded, nodes: &[String]) {
    use k8s_openapi::api::admissionregistration::v1::{
        MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
    };
    let dp = DeleteParams::default();
    let _ = Api::<MutatingWebhookConfiguration>::all(env.client.clone())
        .delete(MUTATING_CONFIGURATION, &dp)
        .await;
    let _ = Api::<ValidatingWebhookConfiguration>::all(env.client.clone())
        .delete(VALIDATING_CONFIGURATION, &dp)
        .await;
    let pools: Api<NodePool> = Api::all(env.client.clone());
    for p in pools.list(&ListParams::default()).await.unwrap().items {
        let name = p.name_any();
        pools
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"metadata": {"finalizers": null}})),
            )
            .await
            .unwrap();
        let _ = pools.delete(&name, &dp).await;
    }
    let rcs: Api<RuntimeClass> = Api::all(env.client.clone());
    for rc in rcs.list(&ListParams::default()).await.unwrap().items {
        let _ = rcs.delete(&rc.name_any(), &dp).await;
    }
    let api: Api<Node> = Api::all(env.client.clone());
    for n in nodes {
        let _ = api.delete(n, &dp).await;
    }
    let _ = Api::<Lease>::namespaced(env.client.clone(), NAMESPACE)
        .delete(LEADER_ELECTION_ID, &dp)
        .await;
}

/// Every permission the role files grant has a scenario that needs it (checked on every
/// backend: no API server needed).
#[test]
fn every_permission_of_the_role_files_has_a_scenario() {
    let all = permissions();
    assert!(all.len() >= 10, "{all:?}");
    let missing: Vec<String> = all.iter().filter_map(|p| scenario_for(p).err()).collect();
    assert!(missing.is_empty(), "{}", missing.join("\n"));
    // The role without a permission lacks exactly that one.
    for p in &all {
        let role = role_without(p.file, Some(p));
        let granted = role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| {
                strings(&r["verbs"])
                    .into_iter()
                    .map(move |v| (r.clone(), v))
            })
            .filter(|(r, _)| {
                strings(&r["apiGroups"]) == [p.group.clone()]
                    && strings(&r["resources"]) == [p.resource.clone()]
            })
            .map(|(_, v)| v)
            .collect::<Vec<_>>();
        assert!(!granted.contains(&p.verb), "{p}: still granted");
        let others = all.iter().filter(|q| q.file == p.file && *q != p).count();
        let kept: usize = role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| strings(&r["verbs"]).len())
            .sum();
        assert_eq!(kept, others, "{p}: the others are kept");
    }
}

/// Whether every rule of `role` only lets the operator ask the API server to review a caller
/// (TokenReview, SubjectAccessReview): delegated authentication and authorization, used by a
/// secured metrics endpoint only, which the operator does not serve by default.
fn only_delegated_auth(role: &Value) -> bool {
    role["rules"].as_array().is_some_and(|rules| {
        rules.iter().all(|r| {
            strings(&r["verbs"]) == ["create"]
                && [
                    (vec!["authentication.k8s.io"], vec!["tokenreviews"]),
                    (vec!["authorization.k8s.io"], vec!["subjectaccessreviews"]),
                ]
                .iter()
                .any(|(g, res)| strings(&r["apiGroups"]) == *g && strings(&r["resources"]) == *res)
        })
    })
}

/// Every Role and ClusterRole of `config/rbac/` bound to the operator's ServiceAccount is
/// checked verb by verb here ([`ROLE_FILES`]), or is one this test documents why it leaves
/// out: roles for delegated authentication and authorization only ([`only_delegated_auth`]),
/// needed by the secured metrics endpoint, whose own test proves them.
#[test]
fn every_role_bound_to_the_service_account_is_checked() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/rbac");
    let mut roles = Vec::new();
    let mut bound = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let file = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !file.ends_with(".yaml") {
            continue;
        }
        for doc in rbac_docs(&file) {
            let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
            let name = doc["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            match kind.as_str() {
                "Role" | "ClusterRole" => roles.push((kind, name, file.clone(), doc)),
                "RoleBinding" | "ClusterRoleBinding" => {
                    let ours = doc["subjects"].as_array().into_iter().flatten().any(|s| {
                        s["kind"] == "ServiceAccount"
                            && s["name"] == SERVICE_ACCOUNT
                            && s["namespace"] == NAMESPACE
                    });
                    if ours {
                        let r = &doc["roleRef"];
                        bound.push((
                            r["kind"].as_str().unwrap_or_default().to_owned(),
                            r["name"].as_str().unwrap_or_default().to_owned(),
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    let reviews = json!({"rules": [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}]});
    assert!(only_delegated_auth(&reviews));
    let more = json!({"rules": [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create", "list"]}]});
    assert!(!only_delegated_auth(&more));
    for file in ROLE_FILES {
        assert!(
            roles
                .iter()
                .any(|(k, n, f, _)| f == file && bound.contains(&(k.clone(), n.clone()))),
            "{file}: not bound to the ServiceAccount by config/rbac/"
        );
    }
    for (kind, name) in &bound {
        let Some((_, _, file, role)) = roles.iter().find(|(k, n, _, _)| k == kind && n == name)
        else {
            panic!("a binding refers to {kind} {name}, which config/rbac/ does not define");
        };
        assert!(
            ROLE_FILES.contains(&file.as_str()) || only_delegated_auth(role),
            "{kind} {name} ({file}) is bound to the operator's ServiceAccount but not checked \
             verb by verb: add it to ROLE_FILES with scenarios, or document why not here"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_verb_of_the_shipped_roles_is_needed() {
    let _serial = SERIAL.lock().await;
    // A server of its own: a cluster-wide operator, the shipped ClusterRoles, injected 409s.
    let env = Embedded::start(0).await.unwrap();
    let Some(sa) = service_account_client(&env, "every_verb_of_the_shipped_roles_is_needed").await
    else {
        return;
    };
    let all = permissions();
    let started = Instant::now();
    let mut failures = Vec::new();
    for (index, p) in all.iter().enumerate() {
        let scenario = match scenario_for(p) {
            Ok(s) => s,
            Err(e) => {
                failures.push(e);
                continue;
            }
        };
        install_roles(&env, &all, Some(p)).await;
        logs().clear();
        let t = Instant::now();
        match exercise(&env, &sa, p, scenario, index).await {
            Ok(place) => println!(
                "without {p}: {scenario:?} refused in {:?}, surfaced in {place}",
                t.elapsed()
            ),
            Err(e) => failures.push(format!("without {p}: {scenario:?}: {e}")),
        }
    }
    println!(
        "{} permissions checked in {:?}",
        all.len(),
        started.elapsed()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
