//! A tracing span per reconcile (alone in this binary: tracing's per-callsite interest cache is
//! global, so tests in other threads could race with this test's thread-local subscriber).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kcr_controller::{Action, Context, Controller, Reconciler};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// Fails the first reconcile of `ns/b`, succeeds otherwise.
#[derive(Clone, Default)]
struct FailOnce {
    failed: Arc<Mutex<HashSet<String>>>,
}

impl Reconciler<String> for FailOnce {
    type Error = anyhow::Error;
    async fn reconcile(&self, request: &String, _ctx: &Context) -> anyhow::Result<Action> {
        if request == "ns/b" && self.failed.lock().insert(request.clone()) {
            anyhow::bail!("first attempt fails");
        }
        Ok(Action::done())
    }
}

/// Records the fields of every `reconcile` span and the level of events inside them.
#[derive(Clone, Default)]
struct SpanCapture {
    spans: Arc<Mutex<Vec<HashMap<String, String>>>>,
    errors_in_span: Arc<AtomicUsize>,
}

struct FieldVisitor<'a>(&'a mut HashMap<String, String>);

impl tracing::field::Visit for FieldVisitor<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

impl<S> tracing_subscriber::Layer<S> for SpanCapture
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _id: &tracing::span::Id,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if attrs.metadata().name() == "reconcile" {
            let mut fields = HashMap::new();
            attrs.record(&mut FieldVisitor(&mut fields));
            self.spans.lock().push(fields);
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: tracing_subscriber::layer::Context<'_, S>) {
        let in_reconcile = ctx
            .event_span(event)
            .is_some_and(|s| s.name() == "reconcile");
        if in_reconcile && *event.metadata().level() == tracing::Level::ERROR {
            self.errors_in_span.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn each_reconcile_gets_a_span_with_controller_object_and_id() {
    use tracing_subscriber::layer::SubscriberExt;
    let capture = SpanCapture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _guard = tracing::subscriber::set_default(subscriber);

    let c = Controller::new("traced", FailOnce::default(), Default::default());
    c.queue().add("ns/a".to_string());
    c.queue().add("ns/b".to_string());
    let stop = CancellationToken::new();
    let task = tokio::spawn(c.run(stop.clone()));
    tokio::time::sleep(Duration::from_secs(5)).await;
    stop.cancel();
    task.await.unwrap().unwrap();

    let spans = capture.spans.lock().clone();
    assert_eq!(spans.len(), 3, "{spans:?}");
    for span in &spans {
        assert_eq!(span["controller"], "traced");
        assert_eq!(span["reconcile_id"].len(), 36, "a UUID: {span:?}");
    }
    let objects: Vec<&str> = spans.iter().map(|s| s["object"].as_str()).collect();
    assert_eq!(objects, vec!["ns/a", "ns/b", "ns/b"]);
    let ids: HashSet<&str> = spans.iter().map(|s| s["reconcile_id"].as_str()).collect();
    assert_eq!(ids.len(), 3, "every reconcile has its own id");
    assert_eq!(
        capture.errors_in_span.load(Ordering::SeqCst),
        1,
        "the error is logged inside the reconcile's span"
    );
}
