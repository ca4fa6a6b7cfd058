//! A controller fed by a cached watch *and* by an event source of the program's own, against
//! kcr-envtest: the extension point DEVELOPERS.md promises ("plug in your own event sources").

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_controller::{Action, Context, Manager, ManagerOptions, Reconciler, WatchOptions};
use kcr_envtest::TestNamespace;
use kcr_handler::{EnqueueRequestForObject, Request};
use kcr_source::{Event, Source, SourceError, Started, SyncHandle};
use kcr_tests::{RunningManager, eventually};
use kube::api::{Api, PostParams};
use parking_lot::Mutex;
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(20);

/// "Look at this ConfigMap again", pushed by another part of the program (an alerting hook, a
/// timer, a message queue): delivered as generic events for objects that carry only a name.
/// Single-use, like most hand-written sources.
struct Resync {
    namespace: String,
    names: Mutex<Option<mpsc::UnboundedReceiver<String>>>,
}

impl Source<ConfigMap> for Resync {
    fn start(&self) -> Result<Started<ConfigMap>, SourceError> {
        let names = self
            .names
            .lock()
            .take()
            .ok_or_else(|| SourceError::AlreadyStarted {
                source_name: self.name(),
            })?;
        let namespace = self.namespace.clone();
        let events = futures::stream::unfold(names, move |mut names| {
            let namespace = namespace.clone();
            async move {
                let name = names.recv().await?;
                let mut object = ConfigMap::default();
                object.metadata.name = Some(name);
                object.metadata.namespace = Some(namespace);
                Some((Ok(Event::generic(object)), names))
            }
        })
        .boxed();
        // Nothing to list first: in sync from the start.
        Ok(Started {
            events,
            sync: SyncHandle::ready(),
        })
    }

    fn name(&self) -> String {
        "resync".to_string()
    }
}

#[derive(Clone, Default)]
struct Seen {
    requests: Arc<Mutex<Vec<String>>>,
}

impl Reconciler<Request> for Seen {
    type Error = kube::Error;
    async fn reconcile(&self, request: &Request, _ctx: &Context) -> Result<Action, kube::Error> {
        self.requests.lock().push(request.to_string());
        Ok(Action::done())
    }
}

impl Seen {
    fn count(&self, request: &str) -> usize {
        self.requests
            .lock()
            .iter()
            .filter(|r| *r == request)
            .count()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_of_your_own_feeds_the_same_queue_as_a_cached_watch() {
    let ns = TestNamespace::new("own-source")
        .await
        .expect("envtest starts");
    let client = ns.client();
    let options = ManagerOptions::default()
        .metrics_bind_address("0")
        .expect("metrics off")
        .health_probe_bind_address("0")
        .expect("probes off");
    let mgr = Manager::new(client.clone(), options)
        .await
        .expect("manager");
    let (resync, names) = mpsc::unbounded_channel();
    let seen = Seen::default();
    mgr.controller()
        .named("configmaps")
        .for_kind::<ConfigMap>(WatchOptions::new().namespace(ns.namespace()))
        .watches(
            Resync {
                namespace: ns.namespace().to_string(),
                names: Mutex::new(Some(names)),
            },
            EnqueueRequestForObject,
            WatchOptions::new(),
        )
        .complete(seen.clone())
        .expect("controller");
    let running = RunningManager::start(mgr);

    // From the cluster, through the cached watch.
    let configmaps: Api<ConfigMap> = Api::namespaced(client, ns.namespace());
    let key = |name: &str| format!("{}/{name}", ns.namespace());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("settings".into());
    configmaps
        .create(&PostParams::default(), &cm)
        .await
        .expect("create");
    eventually("the create is reconciled", WAIT, || async {
        seen.count(&key("settings")) == 1
    })
    .await;

    // From the program's own source: nothing changed in the cluster, the key is reconciled
    // again; a name the cluster does not know is reconciled too (the reconciler decides).
    resync.send("settings".to_string()).expect("source running");
    resync
        .send("not-yet-created".to_string())
        .expect("source running");
    eventually("both triggers are reconciled", WAIT, || async {
        seen.count(&key("settings")) == 2 && seen.count(&key("not-yet-created")) == 1
    })
    .await;

    running.stop(WAIT).await;
}
