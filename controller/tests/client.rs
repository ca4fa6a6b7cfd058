//! The manager's client and its controllers share the cache: a reconciler written against
//! `mgr.client()` reads the kind its controller watches through that controller's watch (no
//! second watch or list, counted at the server), and a cache-wide scope set once applies to the
//! controller's `for_kind` and the client's reads alike. Runs on either backend.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcr_controller::{
    Action, BindAddress, Client, Context, ListOptions, Manager, ManagerOptions, Reconciler,
    WatchOptions,
};
use kcr_envtest::TestApiServer;
use kcr_handler::Request;
use kcr_source::WatchScope;
use kube::ResourceExt;
use kube::api::{ObjectMeta, Patch};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Marks each ConfigMap `reconciled=yes`, reading and writing through the manager's client.
struct Mark {
    client: Client,
}

impl Reconciler<Request> for Mark {
    type Error = kcr_controller::ClientError;
    async fn reconcile(&self, request: &Request, _ctx: &Context) -> Result<Action, Self::Error> {
        let ns = request.namespace.as_deref();
        let Some(cm) = self.client.get::<ConfigMap>(&request.name, ns).await? else {
            return Ok(Action::done());
        };
        if cm.labels().get("reconciled").is_none() {
            let patch = Patch::Merge(json!({"metadata": {"labels": {"reconciled": "yes"}}}));
            self.client
                .patch::<ConfigMap, _>(&request.name, ns, &patch)
                .await?;
        }
        Ok(Action::done())
    }
}

async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn options() -> ManagerOptions {
    ManagerOptions {
        metrics_bind_address: BindAddress::Disabled,
        health_probe_bind_address: BindAddress::Disabled,
        ..ManagerOptions::default()
    }
    .field_owner("client-test")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_read_of_a_watched_kind_opens_no_second_watch() {
    let server = TestApiServer::start().await.expect("envtest starts");
    let ns = "client-shared";
    server
        .upsert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
        .await
        .unwrap();
    let mgr = Manager::new(server.client(), options()).await.unwrap();
    // The operator's scope, said once: the controller's for_kind and the client's reads get it.
    mgr.cache()
        .set_default_scope(WatchScope::all().namespace(ns))
        .unwrap();
    let client = mgr.client();
    mgr.controller()
        .named("mark")
        .for_kind::<ConfigMap>(WatchOptions::new())
        .complete(Mark {
            client: client.clone(),
        })
        .unwrap();
    let stop = CancellationToken::new();
    let running = {
        let mgr = Arc::new(mgr);
        let stop = stop.clone();
        let handle = tokio::spawn({
            let mgr = Arc::clone(&mgr);
            async move { mgr.run(stop).await }
        });
        (mgr, handle)
    };
    let (mgr, handle) = running;

    for name in ["a", "b", "c"] {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                ..Default::default()
            },
            data: Some([("k".to_string(), name.to_string())].into()),
            ..Default::default()
        };
        client.create(&cm).await.unwrap();
    }
    until("every ConfigMap reconciled, as the cache shows", || async {
        let marked = client
            .list::<ConfigMap>(&ListOptions::new().labels("reconciled=yes"))
            .await
            .unwrap();
        marked.len() == 3
    })
    .await;
    let faults = server.faults();
    let watches = faults.request_count("watch", "configmaps");
    let lists = faults.request_count("list", "configmaps");
    assert_eq!(mgr.cache().informer_count(), 1);

    // Many more reads of the watched kind: no request reaches the server.
    for _ in 0..50 {
        assert!(
            client
                .get::<ConfigMap>("a", Some(ns))
                .await
                .unwrap()
                .is_some()
        );
        client.list::<ConfigMap>(&ListOptions::new()).await.unwrap();
    }
    assert_eq!(faults.request_count("watch", "configmaps"), watches);
    assert_eq!(faults.request_count("list", "configmaps"), lists);
    assert_eq!(mgr.cache().informer_count(), 1);

    // The writes were the client's field owner's (read uncached: the cache drops managedFields).
    let stored: ConfigMap = client
        .api_reader()
        .get("a", Some(ns))
        .await
        .unwrap()
        .unwrap();
    let managers: std::collections::BTreeSet<_> = stored
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.as_deref())
        .collect();
    assert_eq!(managers, ["client-test"].into());

    // Outside the scope: a typed error, not "not found".
    let err = client
        .get::<ConfigMap>("a", Some("default"))
        .await
        .unwrap_err();
    assert!(matches!(err, kcr_controller::ClientError::Read(_)), "{err}");

    stop.cancel();
    handle.await.unwrap().unwrap();
}
