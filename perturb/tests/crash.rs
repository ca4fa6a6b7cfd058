//! The crash class finds controllers that are not crash-safe, and passes the ones that are.
//!
//! Two mistakes, each with its correct counterpart:
//! - the ledger: two non-idempotent writes with no marker between them (add the amount to a
//!   total, then mark the order processed): a crash between them books the order twice;
//! - the child: an owned object created with a generated name, its name recorded afterwards:
//!   a crash between the two makes a second child;
//! - the finalizer: removed before the cleanup it guards is done: a crash between the two
//!   leaves the cleanup undone for good (the object is gone, nothing reconciles it again).

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{Order, OrderSpec, Parent, ParentSpec, exploration, one_child_per_parent};
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_controller::objects::set_controller_reference;
use kcr_controller::{Action, Client, Context, Manager, ObjectReconciler, WatchOptions};
use kcr_perturb::{Class, Exploration, Report, RunId, Scenario, manager_options};
use kube::api::{ObjectMeta, Patch, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

/// Books orders into the `ledger` ConfigMap.
struct Ledger {
    client: Client,
    /// The mistake: `total += amount` (not idempotent), then the marker in a second write.
    buggy: bool,
}

impl ObjectReconciler for Ledger {
    type Object = Order;
    type Error = anyhow::Error;

    async fn reconcile(&self, order: Arc<Order>, _ctx: &Context) -> anyhow::Result<Action> {
        if order.status.as_ref().is_some_and(|s| s.processed) {
            return Ok(Action::done());
        }
        let ns = order.namespace();
        let name = order.name_any();
        // ANCHOR: booking
        if self.buggy {
            let mut ledger: ConfigMap = self
                .client
                .api_reader()
                .get("ledger", ns.as_deref())
                .await?
                .ok_or_else(|| anyhow::anyhow!("no ledger"))?;
            let data = ledger.data.get_or_insert_with(BTreeMap::new);
            let total: i64 = data.get("total").and_then(|t| t.parse().ok()).unwrap_or(0);
            data.insert("total".into(), (total + order.spec.amount).to_string());
            self.client.update(&ledger).await?;
        } else {
            // Idempotent: the booking is keyed by the order, so doing it twice is harmless.
            let patch =
                Patch::Merge(json!({"data": {name.clone(): order.spec.amount.to_string()}}));
            self.client
                .patch::<ConfigMap, _>("ledger", ns.as_deref(), &patch)
                .await?;
        }
        let status = Patch::Merge(json!({"status": {"processed": true}}));
        self.client
            .patch_status::<Order, _>(&name, ns.as_deref(), &status)
            .await?;
        // ANCHOR_END: booking
        Ok(Action::done())
    }
}

// ANCHOR: exploration
async fn start_ledger(client: kube::Client, buggy: bool) -> anyhow::Result<Manager> {
    let mgr = Manager::new(client, manager_options()).await?;
    mgr.controller()
        .for_kind::<Order>(WatchOptions::new())
        .complete_objects(Ledger {
            client: mgr.client(),
            buggy,
        })?;
    Ok(mgr)
}

async fn ledger_scenario(ctx: Scenario) -> anyhow::Result<()> {
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client(), ctx.namespace());
    let ledger = ConfigMap {
        metadata: ObjectMeta {
            name: Some("ledger".into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("total".into(), "0".into())])),
        ..ConfigMap::default()
    };
    cms.create(&PostParams::default(), &ledger).await?;
    let orders: Api<Order> = Api::namespaced(ctx.client(), ctx.namespace());
    for (name, amount) in [("a", 3), ("b", 4)] {
        orders
            .create(
                &PostParams::default(),
                &Order::new(name, OrderSpec { amount }),
            )
            .await?;
        ctx.settle().await;
    }
    Ok(())
}

fn ledger(buggy: bool) -> Exploration {
    exploration(if buggy { "ledger-buggy" } else { "ledger" })
        .crd::<Order>()
        .compare::<ConfigMap>()
        .compare::<Order>()
        .classes([Class::Crash])
        .controller(move |client| start_ledger(client, buggy))
        .scenario(ledger_scenario)
}
// ANCHOR_END: exploration

/// Keeps one child ConfigMap per parent.
struct Children {
    client: Client,
    /// The mistake: a generated name, recorded in the parent's status by a second write.
    buggy: bool,
}

impl ObjectReconciler for Children {
    type Object = Parent;
    type Error = anyhow::Error;

    async fn reconcile(&self, parent: Arc<Parent>, _ctx: &Context) -> anyhow::Result<Action> {
        let ns = parent.namespace();
        let name = parent.name_any();
        if self.buggy {
            // A fresh read, so that the cache's lag does not hide the recorded child: only a
            // crash can.
            let fresh: Option<Parent> = self.client.api_reader().get(&name, ns.as_deref()).await?;
            if fresh.and_then(|p| p.status).and_then(|s| s.child).is_some() {
                return Ok(Action::done());
            }
        }
        let mut child = ConfigMap {
            metadata: ObjectMeta {
                namespace: ns.clone(),
                labels: Some(BTreeMap::from([("parent".into(), name.clone())])),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([("note".into(), parent.spec.note.clone())])),
            ..ConfigMap::default()
        };
        set_controller_reference(&*parent, &mut child)?;
        let child_name = if self.buggy {
            child.metadata.generate_name = Some(format!("{name}-"));
            self.client.create(&child).await?.name_any()
        } else {
            // A name derived from the parent: a second create finds the first child.
            child.metadata.name = Some(format!("{name}-child"));
            self.client.apply(&child).force().await?;
            format!("{name}-child")
        };
        let status = Patch::Merge(json!({"status": {"child": child_name}}));
        self.client
            .patch_status::<Parent, _>(&name, ns.as_deref(), &status)
            .await?;
        Ok(Action::done())
    }
}

async fn start_children(client: kube::Client, buggy: bool) -> anyhow::Result<Manager> {
    let mgr = Manager::new(client, manager_options()).await?;
    mgr.controller()
        .for_kind::<Parent>(WatchOptions::new())
        .owns::<ConfigMap>(WatchOptions::new())
        .complete_objects(Children {
            client: mgr.client(),
            buggy,
        })?;
    Ok(mgr)
}

fn children(buggy: bool) -> Exploration {
    exploration(if buggy { "children-buggy" } else { "children" })
        .crd::<Parent>()
        .compare::<ConfigMap>()
        .compare::<Parent>()
        .invariant("one child per parent", one_child_per_parent)
        .classes([Class::Crash])
        .controller(move |client| start_children(client, buggy))
        .scenario(|ctx: Scenario| async move {
            let parents: Api<Parent> = Api::namespaced(ctx.client(), ctx.namespace());
            for name in ["p", "q"] {
                let spec = ParentSpec {
                    note: format!("for {name}"),
                    ..ParentSpec::default()
                };
                parents
                    .create(&PostParams::default(), &Parent::new(name, spec))
                    .await?;
                ctx.settle().await;
            }
            anyhow::Ok(())
        })
}

const FINALIZER: &str = "perturb.kcr.dev/cleanup";

/// Keeps a ConfigMap `<parent>-data` (not owned: garbage collection does not remove it) while
/// the parent lives, and removes it under a finalizer when the parent is deleted.
struct Finalizing {
    client: Client,
    /// The mistake: the finalizer goes first, the cleanup second.
    buggy: bool,
}

impl Finalizing {
    async fn set_finalizers(&self, parent: &Parent, finalizers: &[&str]) -> anyhow::Result<()> {
        let patch = Patch::Merge(json!({"metadata": {"finalizers": finalizers}}));
        self.client
            .patch::<Parent, _>(&parent.name_any(), parent.namespace().as_deref(), &patch)
            .await?;
        Ok(())
    }

    async fn delete_data(&self, parent: &Parent) -> anyhow::Result<()> {
        let name = format!("{}-data", parent.name_any());
        match self
            .client
            .delete_named::<ConfigMap>(&name, parent.namespace().as_deref())
            .await
        {
            Err(e) if !e.is_not_found() => Err(e.into()),
            _ => Ok(()),
        }
    }
}

impl ObjectReconciler for Finalizing {
    type Object = Parent;
    type Error = anyhow::Error;

    async fn reconcile(&self, parent: Arc<Parent>, _ctx: &Context) -> anyhow::Result<Action> {
        let has_finalizer = parent.finalizers().iter().any(|f| f == FINALIZER);
        if parent.metadata.deletion_timestamp.is_some() {
            if !has_finalizer {
                return Ok(Action::done());
            }
            if self.buggy {
                self.set_finalizers(&parent, &[]).await?;
                self.delete_data(&parent).await?;
            } else {
                self.delete_data(&parent).await?;
                self.set_finalizers(&parent, &[]).await?;
            }
            return Ok(Action::done());
        }
        if !has_finalizer {
            self.set_finalizers(&parent, &[FINALIZER]).await?;
        }
        let data = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("{}-data", parent.name_any())),
                namespace: parent.namespace(),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([("note".into(), parent.spec.note.clone())])),
            ..ConfigMap::default()
        };
        self.client.apply(&data).force().await?;
        Ok(Action::done())
    }
}

async fn start_finalizing(client: kube::Client, buggy: bool) -> anyhow::Result<Manager> {
    let mgr = Manager::new(client, manager_options()).await?;
    mgr.controller()
        .for_kind::<Parent>(WatchOptions::new())
        .complete_objects(Finalizing {
            client: mgr.client(),
            buggy,
        })?;
    Ok(mgr)
}

fn finalizing(buggy: bool) -> Exploration {
    exploration(if buggy {
        "finalizer-buggy"
    } else {
        "finalizer"
    })
    .crd::<Parent>()
    .compare::<ConfigMap>()
    .compare::<Parent>()
    .classes([Class::Crash])
    .controller(move |client| start_finalizing(client, buggy))
    .scenario(|ctx: Scenario| async move {
        let parents: Api<Parent> = Api::namespaced(ctx.client(), ctx.namespace());
        let spec = ParentSpec {
            note: "n".into(),
            ..ParentSpec::default()
        };
        parents
            .create(&PostParams::default(), &Parent::new("p", spec))
            .await?;
        ctx.settle().await;
        parents.delete("p", &Default::default()).await?;
        ctx.settle().await;
        anyhow::Ok(())
    })
}

fn show(report: &Report) {
    println!("{report}");
    println!("{}", report.summary_line(&report.exploration));
}

// ANCHOR: test
#[tokio::test]
async fn crash_finds_a_non_idempotent_pair_of_writes() {
    let report = ledger(true).run().await.unwrap();
    show(&report);
    assert_eq!(
        report
            .reference_writes
            .iter()
            .filter(|w| w.index > 0)
            .count(),
        4
    );
    assert!(report.findings_of(Class::Crash).count() >= 1, "{report}");
    // Crashing right after a booking (writes 1 and 3) books the order twice.
    let finding = report
        .findings
        .iter()
        .find(|f| f.run == RunId::CrashAfter(1))
        .expect("crash-after:1 is a finding");
    let text = finding.to_string();
    assert!(text.contains("/data/total: \"7\" -> \"10\""), "{text}");
    assert!(
        finding.reproduce.starts_with(
            "KCR_PERTURB_ONLY='crash-after=update configmaps default/ledger #1' \
             KCR_PERTURB_SEED=0 cargo test -p kcr-perturb --test crash \
             crash_finds_a_non_idempotent_pair_of_writes -- --exact"
        ),
        "{text}"
    );
    // Crashing after a booking, or losing the marker that follows it, books the order twice;
    // crashing after the marker or losing the booking itself is harmless.
    let runs: Vec<RunId> = report.findings.iter().map(|f| f.run).collect();
    assert_eq!(
        runs,
        vec![
            RunId::CrashAfter(1),
            RunId::CrashBefore(2),
            RunId::CrashAfter(3),
            RunId::CrashBefore(4)
        ],
        "{report}"
    );
}

// ANCHOR_END: test

#[tokio::test]
async fn crash_only_runs_the_chosen_point() {
    // By number, and by key as the reproduction lines print it: the same run.
    for selector in [
        "crash-after:3",
        "crash-after=update configmaps default/ledger #2",
    ] {
        let report = ledger(true).only(selector).run().await.unwrap();
        show(&report);
        assert_eq!(report.runs, 2, "the reference run and {selector}: {report}");
        assert_eq!(report.points_tried, 1);
        assert_eq!(report.findings.len(), 1, "{report}");
        assert_eq!(report.findings[0].run, RunId::CrashAfter(3));
        assert!(
            report.findings[0].to_string().contains("\"7\" -> \"11\""),
            "{report}"
        );
    }
    let err = ledger(true).only("crash-after=update configmaps default/nothing #1");
    let err = err.run().await.unwrap_err();
    assert!(
        matches!(err, kcr_perturb::PerturbError::BadOnly { .. }),
        "{err}"
    );
    let err = ledger(true)
        .only("crash-sideways:1")
        .run()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unknown kind of run"), "{err}");
}

#[tokio::test]
async fn crash_passes_an_idempotent_booking() {
    let report = ledger(false).run().await.unwrap();
    show(&report);
    assert_eq!(report.points, 8);
    assert_eq!(report.points_tried, 8);
    assert!(report.points_effective >= 7, "{report}");
    assert!(report.findings.is_empty(), "{report}");
}

#[tokio::test]
async fn crash_finds_a_child_with_a_generated_name() {
    let report = children(true).run().await.unwrap();
    show(&report);
    let finding = report
        .findings
        .iter()
        .find(|f| f.run == RunId::CrashAfter(1))
        .expect("crash-after:1 is a finding");
    let text = finding.to_string();
    assert!(text.contains("one child per parent"), "{text}");
    assert!(text.contains("+ ConfigMap default/p-<1>"), "{text}");
}

#[tokio::test]
async fn crash_passes_a_child_with_a_derived_name() {
    let report = children(false).run().await.unwrap();
    show(&report);
    assert!(report.points >= 8, "{report}");
    assert!(report.findings.is_empty(), "{report}");
}

#[tokio::test]
async fn crash_finds_a_finalizer_removed_before_its_cleanup() {
    let report = finalizing(true).run().await.unwrap();
    show(&report);
    // Writes: add the finalizer, apply the data (twice: the finalizer's update reconciles
    // again), remove the finalizer, delete the data. Crashing after the removal, or losing
    // the delete, leaves the data behind; every other point is harmless.
    let found: Vec<(bool, &str)> = report
        .findings
        .iter()
        .map(|f| {
            (
                matches!(f.run, RunId::CrashAfter(_)),
                f.perturbation.as_str(),
            )
        })
        .collect();
    assert_eq!(found.len(), 2, "{report}");
    assert!(
        found[0].0
            && found[0]
                .1
                .contains("(patch parents.perturb.kcr.dev default/p -> 200)"),
        "{report}"
    );
    assert!(
        !found[1].0 && found[1].1.contains("(delete configmaps default/p-data"),
        "{report}"
    );
    for f in &report.findings {
        assert!(f.to_string().contains("+ ConfigMap default/p-data"), "{f}");
    }
}

#[tokio::test]
async fn crash_passes_a_finalizer_removed_after_its_cleanup() {
    let report = finalizing(false).run().await.unwrap();
    show(&report);
    assert!(report.points >= 8, "{report}");
    assert!(report.findings.is_empty(), "{report}");
}
