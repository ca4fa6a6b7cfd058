//! Controller options under a manager, against kcr-envtest (both backends): controllers that
//! need no leader, warm standbys, the elected notification, manager-wide controller defaults
//! and the reason of each reconcile.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{configmap, eventually, manager_options};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kcr_controller::{
    Action, Context, ControllerDefaults, LeaderElectionConfig, Manager, ReconcileReason,
    Reconciler, WatchOptions,
};
use kcr_envtest::TestNamespace;
use kcr_handler::{EnqueueRequestsFromMapFunc, Request};
use kcr_source::WatchScope;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use parking_lot::Mutex;

/// Records every request it reconciles, with the reason.
#[derive(Clone, Default)]
struct Record {
    seen: Arc<Mutex<Vec<(String, ReconcileReason)>>>,
    /// Requests whose first reconcile asks to be requeued.
    requeue_once: Arc<Mutex<Vec<String>>>,
}

impl Record {
    fn names(&self) -> Vec<String> {
        self.seen.lock().iter().map(|(n, _)| n.clone()).collect()
    }

    fn reasons_of(&self, name: &str) -> Vec<ReconcileReason> {
        self.seen
            .lock()
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, r)| r.clone())
            .collect()
    }
}

impl Reconciler<Request> for Record {
    type Error = std::convert::Infallible;
    async fn reconcile(&self, request: &Request, ctx: &Context) -> Result<Action, Self::Error> {
        self.seen
            .lock()
            .push((request.name.clone(), ctx.reason().clone()));
        let mut once = self.requeue_once.lock();
        if let Some(i) = once.iter().position(|n| *n == request.name) {
            once.remove(i);
            return Ok(Action::requeue_after(Duration::from_millis(200)));
        }
        Ok(Action::done())
    }
}

/// The sum of `workqueue_depth` over the priorities of the queue `name`.
fn depth(text: &str, name: &str) -> f64 {
    let label = format!("name=\"{name}\"");
    text.lines()
        .filter(|l| l.starts_with("workqueue_depth{") && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A Lease of `name` held by someone else for an hour.
fn held_lease(name: &str) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("someone-else".into()),
            lease_duration_seconds: Some(3600),
            renew_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            acquire_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            ..Default::default()
        }),
    }
}

#[tokio::test]
async fn standby_runs_leaderless_controllers_warms_up_and_starts_workers_once_elected() {
    let ns = TestNamespace::new("standby").await.unwrap();
    let client = ns.client();
    let namespace = ns.namespace().to_owned();
    let leases: Api<Lease> = Api::namespaced(client.clone(), &namespace);
    leases
        .create(&PostParams::default(), &held_lease("standby"))
        .await
        .unwrap();
    let election = LeaderElectionConfig::new("standby")
        .namespace(&namespace)
        .identity("me")
        .timings(
            Duration::from_secs(2),
            Duration::from_secs(1),
            Duration::from_millis(200),
        );
    let mgr = Manager::new(client.clone(), manager_options().leader_election(election))
        .await
        .unwrap();
    let ns_name = namespace.clone();
    let scope = move || ns_name.clone();
    let everywhere = Record::default();
    mgr.controller()
        .named("everywhere")
        .for_kind::<ConfigMap>(WatchOptions::new().namespace(scope()))
        .needs_leader_election(false)
        .complete(everywhere.clone())
        .unwrap();
    let warm = Record::default();
    mgr.controller()
        .named("warm")
        .for_kind::<Secret>(WatchOptions::new().namespace(scope()))
        .warmup(true)
        .complete(warm.clone())
        .unwrap();
    let cold = Record::default();
    mgr.controller()
        .named("cold")
        .for_kind::<ServiceAccount>(WatchOptions::new().namespace(scope()))
        .complete(cold.clone())
        .unwrap();
    let mut leadership = mgr.leadership();
    let elected = mgr.elected();
    let (mgr, stop, run) = common::spawn_manager(mgr);

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    cms.create(&PostParams::default(), &configmap("cm-1", "x"))
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("secret-1".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();

    // Not the leader: the leaderless controller reconciles, the warm one's cache fills, the
    // cold one has not even started its watch.
    eventually(
        "the leaderless controller reconciles on the standby",
        Duration::from_secs(30),
        || async { everywhere.names().contains(&"cm-1".to_string()) },
    )
    .await;
    let warm_scope = WatchScope::all().namespace(namespace.clone());
    eventually(
        "the warm controller's cache holds the Secret",
        Duration::from_secs(30),
        || async {
            mgr.cache()
                .reader_if_started::<Secret>(&warm_scope)
                .unwrap()
                .is_some_and(|r| r.get("secret-1", Some(&namespace)).ok().flatten().is_some())
        },
    )
    .await;
    assert!(!mgr.is_leader());
    assert!(!*leadership.borrow());
    assert!(
        warm.names().is_empty(),
        "no reconcile before leadership: {:?}",
        warm.names()
    );
    // The warm controller's queue holds the Secret; the cold one has queued nothing.
    let metrics = mgr.metrics_addr().expect("metrics served");
    eventually(
        "the warm controller's queue holds the Secret",
        Duration::from_secs(30),
        || async {
            let (_, text) = common::http_get(metrics, "/metrics")
                .await
                .unwrap_or_default();
            depth(&text, "warm") >= 1.0
        },
    )
    .await;
    let (_, text) = common::http_get(metrics, "/metrics").await.unwrap();
    assert_eq!(depth(&text, "cold"), 0.0, "{text}");
    assert!(cold.names().is_empty());

    // The other holder goes: this replica is elected, and the warm controller reconciles
    // what it queued meanwhile.
    leases
        .delete("standby", &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(30), elected)
        .await
        .expect("elected");
    assert!(mgr.is_leader());
    tokio::time::timeout(Duration::from_secs(5), leadership.wait_for(|l| *l))
        .await
        .expect("the leadership channel says so")
        .unwrap();
    eventually(
        "the warm controller reconciles the queued Secret",
        Duration::from_secs(30),
        || async { warm.names().contains(&"secret-1".to_string()) },
    )
    .await;
    eventually(
        "the cold controller starts and reconciles the default ServiceAccount",
        Duration::from_secs(30),
        || async { cold.names().contains(&"default".to_string()) },
    )
    .await;
    assert_eq!(
        warm.reasons_of("secret-1")[0],
        ReconcileReason::ObjectChanged,
        "queued by its watch before the election"
    );

    stop.cancel();
    run.await.unwrap().unwrap();
    assert!(!*leadership.borrow(), "not leading once run returned");
}

#[tokio::test]
async fn without_leader_election_elected_resolves_at_once() {
    let ns = TestNamespace::new("elected").await.unwrap();
    let mgr = Manager::new(ns.client(), manager_options()).await.unwrap();
    assert!(mgr.is_leader());
    tokio::time::timeout(Duration::from_secs(1), mgr.elected())
        .await
        .expect("leading without an election");
}

#[tokio::test]
async fn manager_controller_defaults_apply_unless_the_controller_sets_its_own() {
    let ns = TestNamespace::new("defaults").await.unwrap();
    let defaults = ControllerDefaults::default()
        .max_concurrent_reconciles(3)
        .group_kind_concurrency("Secret", 7)
        .reconcile_timeout(Duration::from_secs(11))
        .recover_panic(false)
        .cache_sync_timeout(Duration::from_secs(13))
        .needs_leader_election(false);
    let mgr = Manager::new(ns.client(), manager_options().controller_defaults(defaults))
        .await
        .unwrap();
    let c = mgr
        .controller()
        .for_kind::<ConfigMap>(WatchOptions::new())
        .build(Record::default())
        .unwrap();
    let o = c.options();
    assert_eq!(o.max_concurrent_reconciles, 3);
    assert_eq!(o.reconcile_timeout, Some(Duration::from_secs(11)));
    assert!(!o.recover_panic);
    assert_eq!(o.cache_sync_timeout, Duration::from_secs(13));
    assert!(!o.needs_leader_election);

    let c = mgr
        .controller()
        .for_kind::<Secret>(WatchOptions::new())
        .build(Record::default())
        .unwrap();
    assert_eq!(c.options().max_concurrent_reconciles, 7, "by group-kind");

    let c = mgr
        .controller()
        .for_kind::<Secret>(WatchOptions::new())
        .max_concurrent_reconciles(2)
        .recover_panic(true)
        .needs_leader_election(true)
        .build(Record::default())
        .unwrap();
    let o = c.options();
    assert_eq!(o.max_concurrent_reconciles, 2, "the controller's own wins");
    assert!(o.recover_panic && o.needs_leader_election);
    assert_eq!(o.reconcile_timeout, Some(Duration::from_secs(11)));

    let c = mgr
        .controller()
        .for_kind::<Secret>(WatchOptions::new())
        .options(kcr_controller::ControllerOptions::default())
        .build(Record::default())
        .unwrap();
    let o = c.options();
    assert_eq!(o.max_concurrent_reconciles, 1, "options() sets them all");
    assert_eq!(o.reconcile_timeout, None);
}

#[tokio::test]
async fn each_reconcile_says_why_it_runs() {
    let ns = TestNamespace::new("reasons").await.unwrap();
    let client = ns.client();
    let namespace = ns.namespace().to_owned();
    let mgr = Manager::new(client.clone(), manager_options())
        .await
        .unwrap();
    let record = Record::default();
    record.requeue_once.lock().push("owner".into());
    let accounts = mgr
        .cache()
        .kind::<ServiceAccount>(WatchScope::all().namespace(namespace.clone()))
        .unwrap();
    mgr.controller()
        .named("why")
        .for_kind::<ConfigMap>(WatchOptions::new().namespace(namespace.clone()))
        .owns::<Secret>(WatchOptions::new().namespace(namespace.clone()))
        .watches(
            accounts,
            // A ServiceAccount `sa-for-<name>` maps to the ConfigMap `<name>`.
            EnqueueRequestsFromMapFunc::new(|sa: &ServiceAccount| {
                sa.name_any()
                    .strip_prefix("sa-for-")
                    .map(|cm| Request::namespaced(cm, sa.namespace().unwrap_or_default()))
            }),
            WatchOptions::new(),
        )
        .complete(record.clone())
        .unwrap();
    let (_mgr, stop, run) = common::spawn_manager(mgr);

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let owner = cms
        .create(&PostParams::default(), &configmap("owner", "x"))
        .await
        .unwrap();
    eventually(
        "created, then requeued",
        Duration::from_secs(30),
        || async { record.reasons_of("owner").len() >= 2 },
    )
    .await;
    assert_eq!(
        record.reasons_of("owner")[..2],
        [ReconcileReason::ObjectChanged, ReconcileReason::Requeue]
    );

    // An owned Secret changes.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let owned = Secret {
        metadata: ObjectMeta {
            name: Some("owned".into()),
            owner_references: Some(vec![common::controlled_by(&owner)]),
            ..Default::default()
        },
        ..Default::default()
    };
    secrets
        .create(&PostParams::default(), &owned)
        .await
        .unwrap();
    let owned_changed = ReconcileReason::OwnedObjectChanged {
        kind: Arc::from("Secret"),
    };
    eventually(
        "the owned Secret's change reconciles its owner",
        Duration::from_secs(30),
        || async { record.reasons_of("owner").contains(&owned_changed) },
    )
    .await;

    // A ServiceAccount maps to it.
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
    let sa = ServiceAccount {
        metadata: ObjectMeta {
            name: Some("sa-for-owner".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    sas.create(&PostParams::default(), &sa).await.unwrap();
    let mapped = ReconcileReason::Mapped {
        kind: Arc::from("ServiceAccount"),
    };
    eventually(
        "the ServiceAccount's event maps to the ConfigMap",
        Duration::from_secs(30),
        || async { record.reasons_of("owner").contains(&mapped) },
    )
    .await;

    // The ConfigMap itself changes again.
    let before = record.reasons_of("owner").len();
    cms.patch(
        "owner",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"data": {"value": "y"}})),
    )
    .await
    .unwrap();
    eventually(
        "the update reconciles as an object change",
        Duration::from_secs(30),
        || async { record.reasons_of("owner")[before..].contains(&ReconcileReason::ObjectChanged) },
    )
    .await;
    stop.cancel();
    run.await.unwrap().unwrap();
}
