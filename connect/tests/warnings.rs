//! The API server's warnings reach the log and the metrics, on both backends: a ConfigMap
//! written with a field the API does not know draws `Warning: 299 - "unknown field ..."`
//! (`fieldValidation=Warn`, the default) from kube-apiserver and from kcr-envtest alike.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use kcr_connect::warnings::API_WARNINGS_TOTAL;
use kcr_connect::{ApiWarnings, ConnectionOptions};
use kcr_envtest::TestNamespace;
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use serde_json::json;

fn snapshotter() -> &'static Snapshotter {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this binary");
        snapshotter
    })
}

/// Every counter increment seen so far (snapshots take the counts since the last one).
fn counted() -> std::sync::MutexGuard<'static, Vec<(metrics::Key, u64)>> {
    static COUNTED: OnceLock<Mutex<Vec<(metrics::Key, u64)>>> = OnceLock::new();
    let mut counted = COUNTED.get_or_init(Default::default).lock().unwrap();
    for (key, _, _, value) in snapshotter().snapshot().into_vec() {
        if let DebugValue::Counter(n) = value {
            counted.push((key.key().clone(), n));
        }
    }
    counted
}

fn warnings_counted(host: &str) -> u64 {
    counted()
        .iter()
        .filter(|(key, _)| key.name() == API_WARNINGS_TOTAL)
        .filter(|(key, _)| key.labels().any(|l| l.key() == "host" && l.value() == host))
        .map(|(_, n)| n)
        .sum()
}

/// The log lines written while a test runs (a subscriber of its own, on this thread).
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Lines {
    fn warnings_about(&self, field: &str) -> usize {
        let text = String::from_utf8_lossy(&self.0.lock().unwrap()).to_string();
        text.lines()
            .filter(|l| l.contains("the API server warns") && l.contains(field))
            .count()
    }
}

/// Creates ConfigMaps with an unknown top-level field `field` through a kcr-connect client
/// with `mode`, `times` times; returns the log and the host label.
async fn write_unknown_fields(
    ns: &TestNamespace,
    mode: ApiWarnings,
    field: &str,
    times: usize,
) -> (Lines, String) {
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    snapshotter();
    let config = kube::Config::from_custom_kubeconfig(ns.kubeconfig(), &Default::default())
        .await
        .unwrap();
    let host = kcr_connect::host_of(&config);
    let client = kcr_connect::client(config, ConnectionOptions::default().api_warnings(mode))
        .expect("a client");
    let resource = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client, ns.namespace(), &resource);
    for i in 0..times {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": format!("{}-{i}", field.to_lowercase())},
            "data": {"a": "b"},
            field: "not a field of ConfigMap",
        }))
        .unwrap();
        api.create(&PostParams::default(), &object)
            .await
            .expect("a warning is not an error");
    }
    (lines, host)
}

/// One test for the three choices: the counter is per host, and the tests of one binary share
/// the server (and run at once under `cargo test`).
#[tokio::test]
async fn warnings_are_logged_once_every_time_or_never_as_chosen_and_always_counted() {
    let ns = TestNamespace::new("warnings").await.unwrap();
    let host = host_of_ns(&ns).await;

    let before = warnings_counted(&host);
    let (lines, _) =
        write_unknown_fields(&ns, ApiWarnings::Deduplicated, "kcrUnknownOnce", 3).await;
    assert_eq!(
        lines.warnings_about("kcrUnknownOnce"),
        1,
        "one log line for three identical warnings"
    );
    assert_eq!(warnings_counted(&host) - before, 3, "every warning counted");

    let before = warnings_counted(&host);
    let (every, _) = write_unknown_fields(&ns, ApiWarnings::Every, "kcrUnknownEvery", 2).await;
    assert_eq!(every.warnings_about("kcrUnknownEvery"), 2);
    let (ignored, _) = write_unknown_fields(&ns, ApiWarnings::Ignore, "kcrUnknownIgnored", 2).await;
    assert_eq!(ignored.warnings_about("kcrUnknownIgnored"), 0);
    assert_eq!(
        warnings_counted(&host) - before,
        4,
        "ignored warnings are counted too"
    );
}

async fn host_of_ns(ns: &TestNamespace) -> String {
    let config = kube::Config::from_custom_kubeconfig(ns.kubeconfig(), &Default::default())
        .await
        .unwrap();
    kcr_connect::host_of(&config)
}
