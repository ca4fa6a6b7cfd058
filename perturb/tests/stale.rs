//! The stale-read class finds controllers that act destructively or non-idempotently on a
//! cache that is behind the API server, and passes the ones that check with the server first.
//!
//! Two mistakes, each with its correct counterpart:
//! - the orphan cleaner: deletes a ConfigMap labelled `tenant=<t>` when its cache has no
//!   Tenant `t`; a Tenant that is new but not yet in the cache loses its data; correct: a
//!   fresh read from the API server before the delete;
//! - the child maker: creates a child (generated name) when its cached list of the parent's
//!   children is empty; a child not yet in the cache gets a twin; correct: the list comes
//!   from the API server.

//!
//! In process on every backend (see `common::in_process_exploration`): the perturbation is
//! made in the controller's client, the same on any server.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{
    Parent, ParentSpec, Tenant, TenantSpec, in_process_exploration, one_child_per_parent,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_controller::objects::set_controller_reference;
use kcr_controller::{
    Action, Client, Context, ListOptions, Manager, ObjectReconciler, WatchOptions,
};
use kcr_perturb::{Class, Exploration, Problem, Report, RunId, Scenario, manager_options};
use kube::api::{ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

/// Deletes ConfigMaps whose tenant does not exist.
struct Cleaner {
    client: Client,
    /// The mistake: trusts the cache's "no such tenant".
    buggy: bool,
}

impl ObjectReconciler for Cleaner {
    type Object = ConfigMap;
    type Error = anyhow::Error;

    async fn reconcile(&self, cm: Arc<ConfigMap>, _ctx: &Context) -> anyhow::Result<Action> {
        let Some(tenant) = cm.labels().get("tenant").cloned() else {
            return Ok(Action::done());
        };
        let ns = cm.namespace();
        let cached: Option<Arc<Tenant>> = self.client.get(&tenant, ns.as_deref()).await?;
        if cached.is_some() {
            return Ok(Action::done());
        }
        if !self.buggy {
            let fresh: Option<Tenant> =
                self.client.api_reader().get(&tenant, ns.as_deref()).await?;
            if fresh.is_some() {
                return Ok(Action::done());
            }
        }
        match self
            .client
            .delete_named::<ConfigMap>(&cm.name_any(), ns.as_deref())
            .await
        {
            Err(e) if !e.is_not_found() => Err(e.into()),
            _ => Ok(Action::done()),
        }
    }
}

async fn start_cleaner(client: kube::Client, buggy: bool) -> anyhow::Result<Manager> {
    let mgr = Manager::new(client, manager_options()).await?;
    mgr.controller()
        .for_kind::<ConfigMap>(WatchOptions::new().labels("tenant"))
        .complete_objects(Cleaner {
            client: mgr.client(),
            buggy,
        })?;
    Ok(mgr)
}

fn labelled(name: &str, tenant: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("tenant".into(), tenant.into())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("k".into(), "v".into())])),
        ..ConfigMap::default()
    }
}

fn cleaner(buggy: bool) -> Exploration {
    in_process_exploration(if buggy { "cleaner-buggy" } else { "cleaner" })
        .crd::<Tenant>()
        .compare::<ConfigMap>()
        .compare::<Tenant>()
        .classes([Class::StaleRead])
        .controller(move |client| start_cleaner(client, buggy))
        .scenario(|ctx: Scenario| async move {
            let cms: Api<ConfigMap> = Api::namespaced(ctx.client(), ctx.namespace());
            let tenants: Api<Tenant> = Api::namespaced(ctx.client(), ctx.namespace());
            let pp = PostParams::default();
            // An orphan: the controller removes it (and starts watching tenants).
            cms.create(&pp, &labelled("orphan", "nobody")).await?;
            ctx.settle().await;
            tenants
                .create(&pp, &Tenant::new("t", TenantSpec::default()))
                .await?;
            ctx.settle().await;
            cms.create(&pp, &labelled("t-data", "t")).await?;
            ctx.settle().await;
            anyhow::Ok(())
        })
}

/// Keeps one child per parent, with the parent's note.
struct Maker {
    client: Client,
    /// The mistake: "no child" read from the cache.
    buggy: bool,
}

impl ObjectReconciler for Maker {
    type Object = Parent;
    type Error = anyhow::Error;

    async fn reconcile(&self, parent: Arc<Parent>, _ctx: &Context) -> anyhow::Result<Action> {
        let ns = parent.namespace();
        let name = parent.name_any();
        let selector = format!("parent={name}");
        let children: Vec<String> = if self.buggy {
            let options = ListOptions::new()
                .namespace(ns.clone().unwrap_or_default())
                .labels(selector);
            self.client
                .list::<ConfigMap>(&options)
                .await?
                .iter()
                .map(|c| c.name_any())
                .collect()
        } else {
            self.client
                .api_reader()
                .list::<ConfigMap>(ns.as_deref(), &ListParams::default().labels(&selector))
                .await?
                .iter()
                .map(|c| c.name_any())
                .collect()
        };
        let note = json!({"data": {"note": parent.spec.note}});
        match children.first() {
            Some(child) => {
                self.client
                    .patch::<ConfigMap, _>(child, ns.as_deref(), &Patch::Merge(note))
                    .await?;
            }
            None => {
                let mut child = ConfigMap {
                    metadata: ObjectMeta {
                        generate_name: Some(format!("{name}-")),
                        namespace: ns.clone(),
                        labels: Some(BTreeMap::from([("parent".into(), name.clone())])),
                        ..ObjectMeta::default()
                    },
                    data: Some(BTreeMap::from([("note".into(), parent.spec.note.clone())])),
                    ..ConfigMap::default()
                };
                set_controller_reference(&*parent, &mut child)?;
                self.client.create(&child).await?;
            }
        }
        Ok(Action::done())
    }
}

async fn start_maker(client: kube::Client, buggy: bool) -> anyhow::Result<Manager> {
    let mgr = Manager::new(client, manager_options()).await?;
    mgr.controller()
        .for_kind::<Parent>(WatchOptions::new())
        .owns::<ConfigMap>(WatchOptions::new())
        .complete_objects(Maker {
            client: mgr.client(),
            buggy,
        })?;
    Ok(mgr)
}

fn maker(buggy: bool) -> Exploration {
    in_process_exploration(if buggy { "maker-buggy" } else { "maker" })
        .crd::<Parent>()
        .compare::<ConfigMap>()
        .compare::<Parent>()
        .invariant("one child per parent", one_child_per_parent)
        .classes([Class::StaleRead])
        .controller(move |client| start_maker(client, buggy))
        .scenario(|ctx: Scenario| async move {
            let parents: Api<Parent> = Api::namespaced(ctx.client(), ctx.namespace());
            let spec = ParentSpec {
                note: "first".into(),
                ..ParentSpec::default()
            };
            parents
                .create(&PostParams::default(), &Parent::new("p", spec))
                .await?;
            ctx.settle().await;
            let patch = Patch::Merge(json!({"spec": {"note": "second"}}));
            parents.patch("p", &PatchParams::default(), &patch).await?;
            ctx.settle().await;
            anyhow::Ok(())
        })
}

fn show(report: &Report) {
    println!("{report}");
    println!("{}", report.summary_line(&report.exploration));
}

fn problems_text(report: &Report) -> String {
    report
        .findings
        .iter()
        .flat_map(|f| &f.problems)
        .map(|p: &Problem| p.to_string())
        .collect()
}

#[tokio::test]
async fn stale_finds_a_delete_decided_on_the_cache() {
    let report = cleaner(true).run().await.unwrap();
    show(&report);
    assert!(
        report.findings_of(Class::StaleRead).count() >= 1,
        "{report}"
    );
    let text = problems_text(&report);
    assert!(text.contains("- ConfigMap default/t-data"), "{text}");
    for f in &report.findings {
        assert!(matches!(f.run, RunId::Stale(_)), "{f}");
        assert!(
            f.perturbation.contains("tenants"),
            "only the tenants' lag matters: {f}"
        );
    }
}

#[tokio::test]
async fn stale_passes_a_delete_checked_with_the_server() {
    let report = cleaner(false).run().await.unwrap();
    show(&report);
    assert!(report.points >= 3, "{report}");
    // The run that finds the buggy cleaner happened here too, harmlessly.
    assert!(
        report.tried.iter().any(|t| t
            .effect
            .as_deref()
            .is_some_and(|e| e.contains("ADDED /apis/perturb.kcr.dev/v1/tenants default/t #1"))),
        "{report}"
    );
    assert!(report.findings.is_empty(), "{report}");
}

#[tokio::test]
async fn stale_finds_a_create_decided_on_the_cache() {
    let report = maker(true).run().await.unwrap();
    show(&report);
    assert!(
        report.findings_of(Class::StaleRead).count() >= 1,
        "{report}"
    );
    let text = problems_text(&report);
    assert!(text.contains("one child per parent"), "{text}");
    assert!(text.contains("+ ConfigMap default/p-<1>"), "{text}");
}

#[tokio::test]
async fn stale_passes_a_create_checked_with_the_server() {
    let report = maker(false).run().await.unwrap();
    show(&report);
    assert!(report.points >= 3, "{report}");
    assert!(report.findings.is_empty(), "{report}");
}
