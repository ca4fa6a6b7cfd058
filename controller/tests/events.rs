//! `Context::event`: a reconciler publishes a Kubernetes Event about its object through the
//! manager's recorder (events.k8s.io/v1, reporting `<event_reporter>/<controller>`); a
//! controller outside a manager, given no recorder, gets a clear error instead.

mod common;

use std::time::Duration;

use common::{manager_options, spawn_manager};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kcr_controller::{Action, Context, EventError, EventType, Manager, Reconciler, WatchOptions};
use kcr_envtest::{TestNamespace, eventually};
use kcr_handler::Request;
use kcr_source::Reader;
use kube::api::{Api, ListParams, PostParams};

struct Announce {
    reader: Reader<ConfigMap>,
}

impl Reconciler<Request> for Announce {
    type Error = anyhow::Error;

    async fn reconcile(&self, request: &Request, ctx: &Context) -> anyhow::Result<Action> {
        if let Some(cm) = self
            .reader
            .get(&request.name, request.namespace.as_deref())?
        {
            ctx.event(
                &*cm,
                EventType::Normal,
                "Seen",
                format!("saw {}", request.name),
            )
            .await?;
        }
        Ok(Action::done())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconciler_publishes_events_through_the_managers_recorder() {
    let ns = TestNamespace::new("events").await.unwrap();
    let mut options = manager_options();
    options.event_reporter = "announcer".to_owned();
    let mgr = Manager::new(ns.client(), options).await.unwrap();
    let scope = WatchOptions::new().namespace(ns.namespace());
    let reader = mgr
        .reader::<ConfigMap>(kcr_source::WatchScope::all().namespace(ns.namespace()))
        .unwrap();
    mgr.controller()
        .named("announce")
        .for_kind::<ConfigMap>(scope)
        .complete(Announce { reader })
        .unwrap();
    let (_mgr, stop, run) = spawn_manager(mgr);
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("hello".into());
    Api::<ConfigMap>::default_namespaced(ns.client())
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();

    let events: Api<Event> = Api::default_namespaced(ns.client());
    eventually(
        "the Seen event is published",
        Duration::from_secs(30),
        || async {
            let list = events.list(&ListParams::default()).await.unwrap();
            list.items.iter().any(|e| {
                e.reason.as_deref() == Some("Seen")
                    && e.note.as_deref() == Some("saw hello")
                    && e.type_.as_deref() == Some("Normal")
                    && e.reporting_controller.as_deref() == Some("announcer/announce")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("hello")
            })
        },
    )
    .await;
    stop.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_context_without_a_recorder_says_so() {
    let ctx = Context::new("standalone");
    let cm = ConfigMap::default();
    let err = ctx
        .event(&cm, EventType::Warning, "Failed", "nothing")
        .await
        .unwrap_err();
    assert!(matches!(err, EventError::NoRecorder { .. }), "{err}");
    assert!(err.to_string().contains("standalone"), "{err}");
}
