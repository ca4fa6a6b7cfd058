//! The guide's "Tutorial: a Memcached operator" page (`docs/guide/src/tutorial-memcached.md`),
//! operator-sdk's Memcached operator on kcr: a `Memcached` kind (`spec.size`, validated by the
//! API server's schema), a controller that owns a Deployment of `size` replicas, keeps an
//! `Available` condition, publishes Events and removes the cache from a shared inventory under a
//! finalizer; and the five tests a user writes for it, each in a namespace of its own on the
//! test binary's API server, with the CRD installed once. `KCR_ENVTEST_BACKEND=real` runs them
//! on kube-apiserver and etcd. The module `perturbation` is the perturbation page's example
//! (`docs/guide/src/testing-perturbation.md`): the controller explored by kcr-perturb (in
//! process on either backend), and the false finding of a scenario that trusts a settle.

// ANCHOR: types
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A Memcached cluster: `size` memcached servers, run by a Deployment of the same name.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cache.example.com",
    version = "v1alpha1",
    kind = "Memcached",
    namespaced,
    status = "MemcachedStatus",
    shortname = "mc"
)]
pub struct MemcachedSpec {
    /// How many memcached servers to run: the API server refuses anything outside 1 to 5.
    #[schemars(range(min = 1, max = 5))]
    pub size: i32,
}

/// What the controller observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct MemcachedStatus {
    /// `Available`: whether all `size` servers are available (`kubectl wait
    /// --for=condition=Available memcached/<name>` reads it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
// ANCHOR_END: types

// ANCHOR: deployment
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, ContainerPort, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kcr_controller::objects::set_controller_reference;
use kube::ResourceExt;
use kube::api::ObjectMeta;

/// The Deployment of `memcached`: `spec.size` memcached servers, controlled by the Memcached
/// (so that Kubernetes deletes it with the Memcached, and its changes wake the controller).
pub fn deployment_for(memcached: &Memcached) -> anyhow::Result<Deployment> {
    let labels = BTreeMap::from([
        (
            "app.kubernetes.io/name".to_string(),
            "memcached".to_string(),
        ),
        (
            "app.kubernetes.io/instance".to_string(),
            memcached.name_any(),
        ),
    ]);
    let mut deployment = Deployment {
        metadata: ObjectMeta {
            name: Some(memcached.name_any()),
            namespace: memcached.namespace(),
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        },
        spec: DeploymentSpec {
            replicas: Some(memcached.spec.size),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "memcached".into(),
                        image: Some("memcached:1.6.38-alpine".into()),
                        command: Some(
                            ["memcached", "--memory-limit=64", "-o", "modern", "-v"]
                                .map(String::from)
                                .to_vec(),
                        ),
                        ports: Some(vec![ContainerPort {
                            container_port: 11211,
                            name: Some("memcached".into()),
                            ..ContainerPort::default()
                        }]),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        },
        ..Deployment::default()
    };
    set_controller_reference(memcached, &mut deployment)?;
    Ok(deployment)
}
// ANCHOR_END: deployment

// ANCHOR: reconcile
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kcr_controller::objects::conditions::{FALSE, TRUE, new_condition, set_condition};
use kcr_controller::objects::{FinalizerEvent, finalizer};
use kcr_controller::{
    Action, Client, Context, EventType, Manager, ManagerError, ObjectReconciler, WatchOptions,
};
use kube::api::Patch;
use serde_json::json;

/// The finalizer: while a Memcached has it, the API server only marks it deleted, and the
/// controller runs its cleanup first.
pub const FINALIZER: &str = "cache.example.com/finalizer";

/// The ConfigMap of each namespace that lists its caches (`<name>: <size>`), for the
/// applications that connect to them. It belongs to no one Memcached, so garbage collection
/// cannot remove a deleted one's entry: the finalizer does.
pub const INVENTORY: &str = "memcached-inventory";

/// Keeps each Memcached's Deployment, inventory entry and `Available` condition.
pub struct MemcachedReconciler {
    client: Client,
}

impl ObjectReconciler for MemcachedReconciler {
    type Object = Memcached;
    type Error = anyhow::Error;

    async fn reconcile(&self, memcached: Arc<Memcached>, ctx: &Context) -> anyhow::Result<Action> {
        // Adds the finalizer before the first Apply; on delete runs Cleanup, and removes the
        // finalizer only once Cleanup succeeded. The closure may fail with anyhow::Error.
        let action = finalizer(&self.client, FINALIZER, memcached, |event| async move {
            match event {
                FinalizerEvent::Apply(memcached) => self.apply(&memcached, ctx).await,
                FinalizerEvent::Cleanup(memcached) => self.cleanup(&memcached, ctx).await,
            }
        })
        .await?;
        Ok(action)
    }
}
// ANCHOR_END: reconcile

impl MemcachedReconciler {
    // ANCHOR: apply
    /// The Memcached is live: its inventory entry, its Deployment, an Event for what changed,
    /// and its condition.
    async fn apply(&self, memcached: &Memcached, ctx: &Context) -> anyhow::Result<Action> {
        let name = memcached.name_any();
        let ns = memcached.namespace();
        let size = memcached.spec.size;
        self.register(memcached).await?;

        // The Deployment as it is now, read from the API server: the cache may not have seen
        // the one this controller created a moment ago, and the Event would say so twice.
        let before: Option<Deployment> = self.client.api_reader().get(&name, ns.as_deref()).await?;
        // Server-side apply, forced: a replica count someone else wrote (`kubectl scale`) is
        // taken back.
        let deployment = self
            .client
            .apply(&deployment_for(memcached)?)
            .force()
            .await?;
        // (`replicas` is never empty on a Deployment read back: the API server defaults it to 1.)
        match before.map(|d| d.spec.replicas.unwrap_or(1)) {
            None => {
                let message = format!("created Deployment {name} with {size} replicas");
                ctx.event(memcached, EventType::Normal, "Created", message)
                    .await?;
            }
            Some(was) if was != size => {
                let message = format!("scaled Deployment {name} from {was} to {size} replicas");
                ctx.event(memcached, EventType::Normal, "Scaled", message)
                    .await?;
            }
            Some(_) => {}
        }

        // The condition: written only when it changed (set_condition says so), its transition
        // time moved only when its status did.
        let available = deployment
            .status
            .and_then(|s| s.available_replicas)
            .unwrap_or(0);
        let message = format!("{available} of {size} replicas available");
        let condition = if available >= size {
            new_condition("Available", TRUE, "Available", message)
        } else {
            new_condition("Available", FALSE, "Progressing", message)
        };
        let condition = condition.observed_generation(memcached.metadata.generation);
        let mut conditions = memcached.status.clone().unwrap_or_default().conditions;
        if set_condition(&mut conditions, condition) {
            let patch = Patch::Merge(json!({ "status": { "conditions": conditions } }));
            self.client
                .patch_status::<Memcached, _>(&name, ns.as_deref(), &patch)
                .await?;
        }
        Ok(Action::done())
    }
    // ANCHOR_END: apply

    // ANCHOR: inventory
    /// Records `<name>: <size>` in the namespace's inventory, making the ConfigMap if needed.
    async fn register(&self, memcached: &Memcached) -> anyhow::Result<()> {
        let ns = memcached.namespace();
        let entry = json!({ "data": { memcached.name_any(): memcached.spec.size.to_string() } });
        let patch = Patch::Merge(&entry);
        match self
            .client
            .patch::<ConfigMap, _>(INVENTORY, ns.as_deref(), &patch)
            .await
        {
            Err(e) if e.is_not_found() => {
                let mut inventory: ConfigMap = serde_json::from_value(entry)?;
                inventory.metadata.name = Some(INVENTORY.into());
                inventory.metadata.namespace = ns;
                // Two first caches at once: one create fails (409) and is retried as a patch.
                self.client.create(&inventory).await?;
                Ok(())
            }
            written => Ok(written.map(|_| ())?),
        }
    }

    /// The Memcached is being deleted: remove its inventory entry. The Deployment needs no
    /// cleanup: garbage collection deletes it, as its controller is gone.
    ///
    /// Safe to run twice, as it may: a failure after the entry went (the Event below, the
    /// finalizer's removal, a crash) runs it again, and removing an entry that is not there,
    /// from a ConfigMap that may be gone, changes nothing.
    async fn cleanup(&self, memcached: &Memcached, ctx: &Context) -> anyhow::Result<Action> {
        let ns = memcached.namespace();
        let patch = Patch::Merge(json!({ "data": { memcached.name_any(): null } }));
        match self
            .client
            .patch::<ConfigMap, _>(INVENTORY, ns.as_deref(), &patch)
            .await
        {
            Err(e) if !e.is_not_found() => return Err(e.into()),
            _ => {}
        }
        let message = format!("removed {} from {INVENTORY}", memcached.name_any());
        ctx.event(memcached, EventType::Normal, "Deregistered", message)
            .await?;
        Ok(Action::done())
    }
    // ANCHOR_END: inventory
}

// ANCHOR: add_to_manager
/// Registers the controller: Memcacheds, and the Deployments they own.
pub fn add_to_manager(mgr: &Manager) -> Result<(), ManagerError> {
    mgr.controller()
        .named("memcached")
        .for_kind::<Memcached>(WatchOptions::new())
        .owns::<Deployment>(WatchOptions::new())
        .complete_objects(MemcachedReconciler {
            client: mgr.client(),
        })
}
// ANCHOR_END: add_to_manager

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::api::events::v1::Event;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    use kcr_controller::objects::conditions::find_condition;
    use kcr_envtest::TestNamespace;
    use kcr_source::WatchScope;
    use kcr_testkit::{RunningManager, consistently, eventually, that_ok};
    use kube::ResourceExt;
    use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
    use serde_json::json;
    use tokio::sync::OnceCell;

    use super::{FINALIZER, INVENTORY, Memcached, MemcachedSpec, add_to_manager};

    // ANCHOR: harness
    /// How long a test waits for the controller: generous, for a loaded machine and a real
    /// kube-apiserver; a passing test does not wait for it.
    const WAIT: Duration = Duration::from_secs(60);

    /// The controller, running against a namespace of the test's own.
    struct Harness {
        ns: TestNamespace,
        memcacheds: Api<Memcached>,
        deployments: Api<Deployment>,
        running: RunningManager,
    }

    impl Harness {
        async fn start(test: &str) -> anyhow::Result<Harness> {
            // A namespace `<test>-<random>` on the API server the binary's tests share.
            let ns = TestNamespace::new(test).await?;

            // Convention 1: the CRD once per test binary. CRDs are cluster-wide, and two tests
            // installing the same one at once can conflict on a real API server.
            static CRD: OnceCell<()> = OnceCell::const_new();
            CRD.get_or_try_init(|| ns.install_crd::<Memcached>())
                .await?;

            // Convention 2: this test's controller sees this test's namespace only, so it
            // neither acts on the objects of the tests running beside it nor sees their Events.
            // The cache's default scope covers the controller's watches and the client's reads.
            let options = kcr_testkit::options()
                .field_owner("memcached-operator")
                .event_reporter("memcached-operator");
            let mgr = kcr_testkit::manager_with(&ns, options).await?;
            mgr.cache()
                .set_default_scope(WatchScope::all().namespace(ns.namespace()))?;
            add_to_manager(&mgr)?;

            Ok(Harness {
                memcacheds: Api::default_namespaced(ns.client()),
                deployments: Api::default_namespaced(ns.client()),
                running: RunningManager::start(mgr),
                ns,
            })
        }

        /// Deletes the test's Memcacheds while the controller still runs (nothing else would
        /// remove their finalizer, and on a real cluster the namespace would then stay
        /// `Terminating`), then stops the manager, failing if it had failed.
        async fn stop(self) -> anyhow::Result<()> {
            let all = ListParams::default();
            for memcached in self.memcacheds.list(&all).await?.items {
                let name = memcached.metadata.name.unwrap_or_default();
                self.memcacheds
                    .delete(&name, &DeleteParams::default())
                    .await?;
            }
            eventually("every Memcached is gone", || async {
                that_ok(
                    self.memcacheds.list(&all).await.map(|l| l.items.len()),
                    |n| *n == 0,
                )
            })
            .timeout(WAIT)
            .await?;
            Ok(self.running.stop().await?)
        }
        // ANCHOR_END: harness

        /// Creates a Memcached of `size`.
        async fn create(&self, name: &str, size: i32) -> anyhow::Result<Memcached> {
            let memcached = Memcached::new(name, MemcachedSpec { size });
            Ok(self
                .memcacheds
                .create(&PostParams::default(), &memcached)
                .await?)
        }

        /// The Deployment's replica count (`None` while there is no Deployment).
        async fn replicas(&self, name: &str) -> Result<Option<i32>, kube::Error> {
            let deployment = self.deployments.get_opt(name).await?;
            Ok(deployment.and_then(|d| d.spec.replicas))
        }

        /// Waits until the Deployment has `n` replicas.
        async fn wait_for_replicas(&self, name: &str, n: i32) -> anyhow::Result<()> {
            eventually(format!("Deployment {name} has {n} replicas"), || async {
                that_ok(self.replicas(name).await, |r| *r == Some(n))
            })
            .timeout(WAIT)
            .await?;
            Ok(())
        }

        // ANCHOR: events
        /// The notes of the Events with `reason` about the Memcached `name`. The manager's
        /// recorder writes `events.k8s.io/v1` Events: list those, whose fields are the ones
        /// it wrote (core/v1's view of them calls `note` `message`, `regarding`
        /// `involvedObject`).
        async fn events(&self, name: &str, reason: &str) -> Result<Vec<String>, kube::Error> {
            let events: Api<Event> = Api::default_namespaced(self.ns.client());
            let list = events.list(&ListParams::default()).await?;
            Ok(list
                .items
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some(reason))
                .filter(|e| {
                    let regarding = e.regarding.as_ref();
                    regarding.and_then(|r| r.kind.as_deref()) == Some("Memcached")
                        && regarding.and_then(|r| r.name.as_deref()) == Some(name)
                })
                .filter(|e| {
                    e.reporting_controller.as_deref() == Some("memcached-operator/memcached")
                })
                .filter_map(|e| e.note)
                .collect())
        }
        // ANCHOR_END: events

        /// Waits for an Event with `reason` about `name` whose note is `note`.
        async fn wait_for_event(&self, name: &str, reason: &str, note: &str) -> anyhow::Result<()> {
            eventually(format!("a {reason} Event: {note}"), || async {
                that_ok(self.events(name, reason).await, |notes| {
                    notes.iter().any(|n| n == note)
                })
            })
            .timeout(WAIT)
            .await?;
            Ok(())
        }

        /// The `Available` condition of the Memcached `name`, if it has one.
        async fn available(&self, name: &str) -> Result<Option<Condition>, kube::Error> {
            let memcached = self.memcacheds.get(name).await?;
            let conditions = memcached.status.unwrap_or_default().conditions;
            Ok(find_condition(&conditions, "Available").cloned())
        }

        /// The namespace's inventory (empty while there is none).
        async fn inventory(&self) -> Result<Vec<(String, String)>, kube::Error> {
            let cms: Api<ConfigMap> = Api::default_namespaced(self.ns.client());
            let cm = cms.get_opt(INVENTORY).await?;
            Ok(cm
                .and_then(|cm| cm.data)
                .unwrap_or_default()
                .into_iter()
                .collect())
        }
    }

    fn entry(name: &str, size: &str) -> (String, String) {
        (name.to_string(), size.to_string())
    }

    // ANCHOR: test_create
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_memcached_gets_its_deployment() -> anyhow::Result<()> {
        let h = Harness::start("memcached-create").await?;
        h.create("cache", 3).await?;

        // The Deployment, with 3 replicas, controlled by the Memcached.
        h.wait_for_replicas("cache", 3).await?;
        let deployment = h.deployments.get("cache").await?;
        let owner = &deployment.metadata.owner_references.unwrap_or_default()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("Memcached", "cache")
        );
        assert_eq!(owner.controller, Some(true));

        // The finalizer, an Event, the inventory entry.
        let memcached = h.memcacheds.get("cache").await?;
        assert!(memcached.finalizers().iter().any(|f| f == FINALIZER));
        h.wait_for_event(
            "cache",
            "Created",
            "created Deployment cache with 3 replicas",
        )
        .await?;
        assert_eq!(h.inventory().await?, vec![entry("cache", "3")]);

        // Not available: no pod runs (neither test backend runs a deployment controller).
        eventually("Available is False", || async {
            that_ok(h.available("cache").await, |c| {
                c.as_ref().is_some_and(|c| c.status == "False")
            })
        })
        .timeout(WAIT)
        .await?;

        // The test plays the deployment controller: three replicas available.
        let status = json!({ "status": {
            "observedGeneration": deployment.metadata.generation,
            "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3
        }});
        h.deployments
            .patch_status("cache", &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        eventually("Available is True", || async {
            that_ok(h.available("cache").await, |c| {
                c.as_ref().is_some_and(|c| {
                    (c.status.as_str(), c.reason.as_str(), c.message.as_str())
                        == ("True", "Available", "3 of 3 replicas available")
                })
            })
        })
        .timeout(WAIT)
        .await?;
        h.stop().await
    }
    // ANCHOR_END: test_create

    // ANCHOR: test_revert
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_hand_scaled_deployment_is_scaled_back() -> anyhow::Result<()> {
        let h = Harness::start("memcached-revert").await?;
        h.create("cache", 2).await?;
        h.wait_for_replicas("cache", 2).await?;

        // Someone scales the Deployment by hand (`kubectl scale deployment cache --replicas=5`).
        let scale = json!({ "spec": { "replicas": 5 } });
        h.deployments
            .patch("cache", &PatchParams::default(), &Patch::Merge(&scale))
            .await?;

        // The controller owns the Deployment: the change wakes it, and it takes it back, for
        // good.
        h.wait_for_replicas("cache", 2).await?;
        consistently("the Deployment stays at 2 replicas", || async {
            that_ok(h.replicas("cache").await, |r| *r == Some(2))
        })
        .for_duration(Duration::from_millis(500))
        .await?;
        h.stop().await
    }
    // ANCHOR_END: test_revert

    // ANCHOR: test_resize
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_resized_memcached_resizes_its_deployment() -> anyhow::Result<()> {
        let h = Harness::start("memcached-resize").await?;
        h.create("cache", 2).await?;
        h.wait_for_replicas("cache", 2).await?;

        let resize = json!({ "spec": { "size": 4 } });
        h.memcacheds
            .patch("cache", &PatchParams::default(), &Patch::Merge(&resize))
            .await?;

        h.wait_for_replicas("cache", 4).await?;
        h.wait_for_event(
            "cache",
            "Scaled",
            "scaled Deployment cache from 2 to 4 replicas",
        )
        .await?;
        eventually("the inventory says 4", || async {
            that_ok(h.inventory().await, |i| i == &vec![entry("cache", "4")])
        })
        .timeout(WAIT)
        .await?;
        // The condition describes the new generation.
        let generation = h.memcacheds.get("cache").await?.metadata.generation;
        eventually("the condition observed the resize", || async {
            that_ok(h.available("cache").await, |c| {
                c.as_ref().and_then(|c| c.observed_generation) == generation
            })
        })
        .timeout(WAIT)
        .await?;
        h.stop().await
    }
    // ANCHOR_END: test_resize

    // ANCHOR: test_delete
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn deleting_a_memcached_runs_its_cleanup() -> anyhow::Result<()> {
        let h = Harness::start("memcached-delete").await?;
        h.create("cache", 1).await?;
        h.create("other", 1).await?;
        h.wait_for_replicas("cache", 1).await?;
        eventually("both caches are in the inventory", || async {
            that_ok(h.inventory().await, |i| i.len() == 2)
        })
        .timeout(WAIT)
        .await?;

        h.memcacheds
            .delete("cache", &DeleteParams::default())
            .await?;

        // The cleanup ran: the entry went (the other cache's stayed), then the finalizer,
        // then the Memcached; its Deployment follows by garbage collection.
        h.wait_for_event(
            "cache",
            "Deregistered",
            "removed cache from memcached-inventory",
        )
        .await?;
        assert_eq!(h.inventory().await?, vec![entry("other", "1")]);
        eventually("the Memcached is gone", || async {
            that_ok(h.memcacheds.get_opt("cache").await, Option::is_none)
        })
        .timeout(WAIT)
        .await?;
        eventually("its Deployment is gone", || async {
            that_ok(h.deployments.get_opt("cache").await, Option::is_none)
        })
        .timeout(WAIT)
        .await?;
        h.stop().await
    }
    // ANCHOR_END: test_delete

    // ANCHOR: test_schema
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_api_server_refuses_a_size_out_of_range() -> anyhow::Result<()> {
        let h = Harness::start("memcached-schema").await?;
        for (size, why) in [
            (0, "greater than or equal to 1"),
            (9, "less than or equal to 5"),
        ] {
            let err = h.create("bad", size).await.unwrap_err();
            let Some(kube::Error::Api(status)) = err.downcast_ref::<kube::Error>() else {
                panic!("not an API error: {err:#}");
            };
            assert_eq!(status.code, 422, "{status:?}");
            assert!(
                status
                    .message
                    .contains(&format!("spec.size in body should be {why}")),
                "{}",
                status.message
            );
        }
        // Nothing was stored, so the controller made nothing.
        assert!(h.memcacheds.get_opt("bad").await?.is_none());
        h.stop().await
    }
    // ANCHOR_END: test_schema
}

/// The perturbation page's example (`docs/guide/src/testing-perturbation.md`): this
/// controller explored by kcr-perturb (a crash at write points, missed and lagging watch
/// events), with a scenario that waits for what each step needs rather than assuming that a
/// settle means the controller is done.
#[cfg(test)]
mod perturbation {
    // ANCHOR: perturbation
    use std::time::Duration;

    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kcr_controller::Manager;
    use kcr_envtest::{Backend, TestApiServer};
    use kcr_perturb::{Class, Exploration, Scenario, manager_options};
    use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
    use serde_json::json;

    use super::{Memcached, MemcachedSpec, add_to_manager};

    /// Each incarnation of the controller: a fresh Manager on the harness's client.
    async fn start(client: kube::Client) -> anyhow::Result<Manager> {
        let mgr = Manager::new(client, manager_options()).await?;
        add_to_manager(&mgr)?;
        Ok(mgr)
    }

    /// Waits for the Deployment `name`. A `settle` does not wait for watch events the
    /// harness holds back, so the Deployment may not exist yet after one: a step that needs
    /// it waits for it (well beyond the hold window), or the run fails for the scenario's sake.
    async fn deployment(ctx: &Scenario, name: &str) -> anyhow::Result<Deployment> {
        let deployments: Api<Deployment> = Api::namespaced(ctx.client(), ctx.namespace());
        for _ in 0..500 {
            if let Some(d) = deployments.get_opt(name).await? {
                return Ok(d);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        anyhow::bail!("no Deployment {name} after 10 s")
    }

    /// What a user does: two caches, one scaled by hand and then deleted, one resized.
    async fn session(ctx: Scenario) -> anyhow::Result<()> {
        let memcacheds: Api<Memcached> = Api::namespaced(ctx.client(), ctx.namespace());
        let deployments: Api<Deployment> = Api::namespaced(ctx.client(), ctx.namespace());
        for name in ["a", "b"] {
            let memcached = Memcached::new(name, MemcachedSpec { size: 2 });
            memcacheds
                .create(&PostParams::default(), &memcached)
                .await?;
        }
        ctx.settle().await;
        deployment(&ctx, "a").await?;
        let scale = json!({ "spec": { "replicas": 5 } });
        deployments
            .patch("a", &PatchParams::default(), &Patch::Merge(&scale))
            .await?;
        ctx.settle().await;
        let resize = json!({ "spec": { "size": 3 } });
        memcacheds
            .patch("b", &PatchParams::default(), &Patch::Merge(&resize))
            .await?;
        ctx.settle().await;
        memcacheds.delete("a", &DeleteParams::default()).await?;
        ctx.settle().await;
        Ok(())
    }

    fn memcached_exploration() -> Exploration {
        Exploration::new("memcached")
            .crd::<Memcached>()
            .compare::<Memcached>()
            .compare::<Deployment>()
            .compare::<ConfigMap>()
            .classes([Class::Crash, Class::MissedIntermediate, Class::StaleRead])
            .controller(start)
            .scenario(session)
            // In process on every backend: each run starts a server of its own, and garbage
            // collection there is part of the delete (the end state does not wait for it).
            .server(|| TestApiServer::builder().backend(Backend::InProcess).start())
            // A seeded sample of the points (KCR_PERTURB_SEED picks another).
            .max_runs(16)
    }

    #[tokio::test]
    async fn the_memcached_controller_survives_perturbation() {
        let report = memcached_exploration().run().await.unwrap();
        println!("{report}");
        println!("{}", report.summary_line(&report.exploration));
        assert!(report.findings.is_empty(), "{report}");
    }
    // ANCHOR_END: perturbation

    // ANCHOR: false_finding
    /// The scenario above without the wait: it scales Deployment `a` right after a settle.
    async fn trusting_session(ctx: Scenario) -> anyhow::Result<()> {
        let memcacheds: Api<Memcached> = Api::namespaced(ctx.client(), ctx.namespace());
        let deployments: Api<Deployment> = Api::namespaced(ctx.client(), ctx.namespace());
        for name in ["a", "b"] {
            let memcached = Memcached::new(name, MemcachedSpec { size: 2 });
            memcacheds
                .create(&PostParams::default(), &memcached)
                .await?;
        }
        ctx.settle().await;
        let scale = json!({ "spec": { "replicas": 5 } });
        deployments
            .patch("a", &PatchParams::default(), &Patch::Merge(&scale))
            .await?;
        ctx.settle().await;
        Ok(())
    }

    /// The controller's Memcached watch held back from `a`'s creation on (about a second),
    /// far longer than a settle's quiet window: the controller has not made Deployment `a`
    /// when the settle returns.
    const HELD: &str = "stale=ADDED /apis/cache.example.com/v1alpha1/memcacheds default/a #1";

    #[tokio::test]
    async fn a_scenario_that_trusts_a_settle_reports_a_false_finding() {
        let report = memcached_exploration()
            .scenario(trusting_session)
            .only(HELD)
            .run()
            .await
            .unwrap();
        let text = report.to_string();
        assert_eq!(report.findings.len(), 1, "{text}");
        assert!(text.contains("the scenario failed"), "{text}");
        assert!(
            text.contains(r#"deployments.apps \"a\" not found"#),
            "{text}"
        );

        // The same perturbation, with the scenario that waits for the Deployment: no finding.
        let report = memcached_exploration().only(HELD).run().await.unwrap();
        assert!(report.findings.is_empty(), "{report}");
    }
    // ANCHOR_END: false_finding
}
