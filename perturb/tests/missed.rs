//! The missed-intermediate class finds controllers that rely on seeing every state an object
//! passes through, and passes the ones that act on the state they are given.
//!
//! Two mistakes, each with its correct counterpart:
//! - the flip counter: a status computed from the changes the controller expects to see
//!   (`flips += 1` whenever `spec.on` differs from the last value seen); correct: derived
//!   from the object's own level (`metadata.generation`);
//! - the drain: cleanup done only on the `draining` phase; a parent that goes straight on to
//!   `retired`, as far as the controller can tell, keeps its child; correct: cleanup in every
//!   phase from `draining` on.

//!
//! In process on every backend (see `common::in_process_exploration`): the perturbation is
//! made in the controller's client, the same on any server.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{Parent, ParentSpec, in_process_exploration};
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_controller::objects::set_controller_reference;
use kcr_controller::{Action, Client, Context, Manager, ObjectReconciler, WatchOptions};
use kcr_perturb::{Class, Exploration, Problem, Report, RunId, Scenario, manager_options};
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

/// Counts how often `spec.on` changed.
struct Flips {
    client: Client,
    /// The mistake: counts the changes it sees.
    buggy: bool,
}

impl ObjectReconciler for Flips {
    type Object = Parent;
    type Error = anyhow::Error;

    async fn reconcile(&self, parent: Arc<Parent>, _ctx: &Context) -> anyhow::Result<Action> {
        let status = parent.status.clone().unwrap_or_default();
        let flips = if self.buggy {
            status.flips + i64::from(parent.spec.on != status.last_on)
        } else {
            // Every spec change of this kind is a flip: the server counts them.
            parent.metadata.generation.unwrap_or(1) - 1
        };
        if flips == status.flips && parent.spec.on == status.last_on {
            return Ok(Action::done());
        }
        let patch = Patch::Merge(json!({"status": {"flips": flips, "last_on": parent.spec.on}}));
        self.client
            .patch_status::<Parent, _>(&parent.name_any(), parent.namespace().as_deref(), &patch)
            .await?;
        Ok(Action::done())
    }
}

/// Keeps a child while the parent is active, and removes it when the parent drains.
struct Drain {
    client: Client,
    /// The mistake: removes the child on `draining` only.
    buggy: bool,
}

impl ObjectReconciler for Drain {
    type Object = Parent;
    type Error = anyhow::Error;

    async fn reconcile(&self, parent: Arc<Parent>, _ctx: &Context) -> anyhow::Result<Action> {
        let ns = parent.namespace();
        let child = format!("{}-child", parent.name_any());
        let phase = parent.spec.phase.as_str();
        let cleanup = if self.buggy {
            phase == "draining"
        } else {
            matches!(phase, "draining" | "retired")
        };
        if phase.is_empty() {
            let mut cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(child),
                    namespace: ns,
                    ..ObjectMeta::default()
                },
                data: Some(BTreeMap::from([("note".into(), parent.spec.note.clone())])),
                ..ConfigMap::default()
            };
            set_controller_reference(&*parent, &mut cm)?;
            self.client.apply(&cm).force().await?;
        } else if cleanup {
            let existing: Option<Arc<ConfigMap>> = self.client.get(&child, ns.as_deref()).await?;
            if existing.is_some() {
                match self
                    .client
                    .delete_named::<ConfigMap>(&child, ns.as_deref())
                    .await
                {
                    Err(e) if !e.is_not_found() => return Err(e.into()),
                    _ => {}
                }
            }
        }
        Ok(Action::done())
    }
}

async fn start(client: kube::Client, drain: bool, buggy: bool) -> anyhow::Result<Manager> {
    let mgr = Manager::new(client, manager_options()).await?;
    let builder = mgr.controller().for_kind::<Parent>(WatchOptions::new());
    if drain {
        builder
            .owns::<ConfigMap>(WatchOptions::new())
            .complete_objects(Drain {
                client: mgr.client(),
                buggy,
            })?;
    } else {
        builder.complete_objects(Flips {
            client: mgr.client(),
            buggy,
        })?;
    }
    Ok(mgr)
}

/// Creates parent `p`, then applies each spec patch in turn with a settle after each.
async fn steps(ctx: Scenario, patches: Vec<serde_json::Value>) -> anyhow::Result<()> {
    let parents: Api<Parent> = Api::namespaced(ctx.client(), ctx.namespace());
    let spec = ParentSpec {
        note: "n".into(),
        ..ParentSpec::default()
    };
    parents
        .create(&PostParams::default(), &Parent::new("p", spec))
        .await?;
    ctx.settle().await;
    for spec in patches {
        parents
            .patch(
                "p",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": spec})),
            )
            .await?;
        ctx.settle().await;
    }
    Ok(())
}

fn flips(buggy: bool) -> Exploration {
    in_process_exploration(if buggy { "flips-buggy" } else { "flips" })
        .crd::<Parent>()
        .compare::<Parent>()
        .classes([Class::MissedIntermediate])
        .controller(move |client| start(client, false, buggy))
        .scenario(|ctx| {
            let on = |on: bool| json!({"on": on});
            steps(ctx, vec![on(true), on(false), on(true)])
        })
}

fn drain(buggy: bool) -> Exploration {
    in_process_exploration(if buggy { "drain-buggy" } else { "drain" })
        .crd::<Parent>()
        .compare::<Parent>()
        .compare::<ConfigMap>()
        .classes([Class::MissedIntermediate])
        .controller(move |client| start(client, true, buggy))
        .scenario(|ctx| {
            let phase = |p: &str| json!({"phase": p});
            steps(ctx, vec![phase("draining"), phase("retired")])
        })
}

fn show(report: &Report) {
    println!("{report}");
    println!("{}", report.summary_line(&report.exploration));
}

fn diff_text(report: &Report) -> String {
    report
        .findings
        .iter()
        .flat_map(|f| &f.problems)
        .filter_map(|p| match p {
            Problem::Diff(changes) => Some(changes.iter().map(ToString::to_string)),
            _ => None,
        })
        .flatten()
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn missed_finds_a_status_counted_from_events() {
    let report = flips(true).run().await.unwrap();
    show(&report);
    assert!(report.points >= 3, "{report}");
    assert!(
        report.findings_of(Class::MissedIntermediate).count() >= 1,
        "{report}"
    );
    let text = diff_text(&report);
    assert!(
        text.contains("~ Parent default/p /status/flips: 3 -> 1"),
        "{text}"
    );
    for f in &report.findings {
        assert!(matches!(f.run, RunId::Missed(_)), "{f}");
        assert!(
            f.perturbation.starts_with("dropped watch event MODIFIED"),
            "{f}"
        );
    }
}

#[tokio::test]
async fn missed_passes_a_status_derived_from_the_object() {
    let report = flips(false).run().await.unwrap();
    show(&report);
    assert!(report.points >= 3, "{report}");
    assert!(
        report.points_effective >= 1,
        "some event must have been dropped: {report}"
    );
    assert!(report.findings.is_empty(), "{report}");
}

#[tokio::test]
async fn missed_finds_cleanup_done_on_one_phase_only() {
    let report = drain(true).run().await.unwrap();
    show(&report);
    assert!(
        report.findings_of(Class::MissedIntermediate).count() >= 1,
        "{report}"
    );
    let text = diff_text(&report);
    assert!(text.contains("+ ConfigMap default/p-child"), "{text}");
}

#[tokio::test]
async fn missed_passes_cleanup_in_every_later_phase() {
    let report = drain(false).run().await.unwrap();
    show(&report);
    assert!(
        report.points_effective >= 1,
        "some event must have been dropped: {report}"
    );
    assert!(report.findings.is_empty(), "{report}");
}
