//! The hub-and-members pattern on kcr-envtest servers: the crate docs' mirror operator copies
//! the hub's ConfigMaps to every member (static provider, then a member engaged at run time)
//! and writes per-member status back to the hub; a hub controller hears of member changes
//! through `Fleet::member_watch`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcr_controller::{Action, Context, Manager, ManagerOptions, Reconciler};
use kcr_envtest::{TestApiServer, eventually};
use kcr_handler::Request;
use kcr_multicluster::{
    Cluster, ClusterName, ClusterRequest, Fleet, FleetReconciler, StaticProvider,
};
use kcr_source::WatchScope;
use kube::api::{Api, Patch, PatchParams, PostParams};
use parking_lot::Mutex;

const WAIT: Duration = Duration::from_secs(60);

/// The crate docs' mirror operator.
struct Mirror {
    fleet: Fleet,
}

impl FleetReconciler for Mirror {
    type Error = kube::Error;
    async fn reconcile(
        &self,
        request: &ClusterRequest,
        member: &Cluster,
        _ctx: &Context,
    ) -> Result<Action, kube::Error> {
        let Some(hub) = self.fleet.cluster(self.fleet.local_name()) else {
            return Ok(Action::done());
        };
        let ns = request.request.namespace.as_deref().unwrap_or("default");
        let name = &request.request.name;
        let hub_api: Api<ConfigMap> = Api::namespaced(hub.client(), ns);
        let Some(source) = hub_api.get_opt(name).await? else {
            return Ok(Action::done());
        };
        let copy = ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(ns.to_string()),
                labels: source.metadata.labels.clone(),
                ..Default::default()
            },
            data: source.data.clone(),
            ..Default::default()
        };
        let params = PatchParams::apply("kcr-mirror").force();
        Api::<ConfigMap>::namespaced(member.client(), ns)
            .patch(name, &params, &Patch::Apply(&copy))
            .await?;
        let status = serde_json::json!({"metadata": {"annotations": {
            format!("mirror.kcr.io/{}", member.name()): source.data.unwrap_or_default().get("v"),
        }}});
        hub_api
            .patch(name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        Ok(Action::done())
    }
}

/// A hub controller: records the requests member watches map to.
#[derive(Clone, Default)]
struct Summary(Arc<Mutex<Vec<String>>>);

impl Reconciler<Request> for Summary {
    type Error = anyhow::Error;
    async fn reconcile(&self, request: &Request, _ctx: &Context) -> anyhow::Result<Action> {
        self.0.lock().push(request.name.clone());
        Ok(Action::done())
    }
}

async fn copy_of(server: &TestApiServer, name: &str) -> Option<String> {
    Api::<ConfigMap>::namespaced(server.client(), server.namespace())
        .get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|cm| cm.data?.get("v").cloned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_is_mirrored_to_every_member_and_hears_from_them() {
    let (hub, east, west, late) = tokio::try_join!(
        TestApiServer::start(),
        TestApiServer::start(),
        TestApiServer::start(),
        TestApiServer::start(),
    )
    .unwrap();
    let ns = hub.namespace().to_string();
    let mgr = Manager::new(
        hub.client(),
        ManagerOptions::default()
            .metrics_bind_address("127.0.0.1:0")
            .unwrap()
            .health_probe_bind_address("127.0.0.1:0")
            .unwrap(),
    )
    .await
    .unwrap();
    let fleet = Fleet::new("hub");
    fleet.engage_local(&mgr);
    fleet
        .run_provider(
            &mgr,
            StaticProvider::new()
                .kubeconfig("east", east.kubeconfig())
                .kubeconfig("west", west.kubeconfig()),
        )
        .unwrap();
    let scope = WatchScope::all()
        .namespace(ns.clone())
        .labels("mirror.kcr.io/enabled=true");
    fleet
        .controller(&mgr)
        .named("mirror")
        .members_only()
        .from_hub::<ConfigMap>(scope.clone())
        .for_kind::<ConfigMap>(scope.clone())
        .complete(Mirror {
            fleet: fleet.clone(),
        })
        .unwrap();
    // Read in the members, act in the hub.
    let summary = Summary::default();
    let mut hub_controller = mgr
        .controller()
        .named("summary")
        .build(summary.clone())
        .unwrap();
    hub_controller.add_watch(fleet.member_watch::<ConfigMap, _>(
        scope.clone(),
        |cluster: &ClusterName, cm: &ConfigMap| {
            let name = cm.metadata.name.clone().unwrap_or_default();
            vec![Request::namespaced(format!("{cluster}.{name}"), "default")]
        },
    ));
    mgr.add_controller(hub_controller).unwrap();

    let mgr = Arc::new(mgr);
    let stop = tokio_util::sync::CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });

    let hub_api: Api<ConfigMap> = Api::namespaced(hub.client(), &ns);
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("shared".into());
    cm.metadata.labels = Some(BTreeMap::from([(
        "mirror.kcr.io/enabled".to_string(),
        "true".to_string(),
    )]));
    cm.data = Some(BTreeMap::from([("v".to_string(), "1".to_string())]));
    hub_api.create(&PostParams::default(), &cm).await.unwrap();
    for (name, member) in [("east", &east), ("west", &west)] {
        eventually(&format!("the copy in {name}"), WAIT, || async move {
            copy_of(member, "shared").await.as_deref() == Some("1")
        })
        .await;
    }
    eventually("per-member status in the hub", WAIT, || {
        let hub_api = hub_api.clone();
        async move {
            let annotations = hub_api
                .get("shared")
                .await
                .ok()
                .and_then(|cm| cm.metadata.annotations)
                .unwrap_or_default();
            annotations.get("mirror.kcr.io/east").map(String::as_str) == Some("1")
                && annotations.get("mirror.kcr.io/west").map(String::as_str) == Some("1")
        }
    })
    .await;
    assert!(
        copy_of(&hub, "shared").await.is_some(),
        "the hub keeps its own"
    );

    // A change in the hub reaches every member.
    hub_api
        .patch(
            "shared",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"v": "2"}})),
        )
        .await
        .unwrap();
    for member in [&east, &west] {
        eventually("the change is mirrored", WAIT, || async move {
            copy_of(member, "shared").await.as_deref() == Some("2")
        })
        .await;
    }

    // A member engaged at run time gets every hub object.
    fleet.engage("late", late.client());
    eventually("the copy in the late member", WAIT, || {
        let late = &late;
        async move { copy_of(late, "shared").await.as_deref() == Some("2") }
    })
    .await;

    // The hub controller heard of the members' copies, by cluster.
    eventually("the hub heard of every member's copy", WAIT, || {
        let summary = summary.clone();
        async move {
            let seen = summary.0.lock().clone();
            ["east.shared", "west.shared", "late.shared"]
                .iter()
                .all(|n| seen.contains(&n.to_string()))
        }
    })
    .await;
    assert!(
        !summary.0.lock().iter().any(|n| n.starts_with("hub.")),
        "the hub is not a member"
    );

    stop.cancel();
    run.await.unwrap().unwrap();
}
