//! The server's metrics carry controller-runtime's names and labels.

mod common;

use common::{Hooks, admission_review, https, post_json};
use kcr_webhook::example::{WidgetDefaulter, v1};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use serde_json::{Value, json};

#[test]
fn requests_latency_and_in_flight_per_webhook() {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || {
        rt.block_on(async {
            let mut hooks = Hooks::bind().await;
            hooks
                .server
                .webhook::<v1::Widget>()
                .defaulter(WidgetDefaulter)
                .complete()
                .unwrap();
            hooks.run();
            let ca = hooks.ca.ca_pem().to_string();
            let path = "/mutate-example-kcr-dev-v1-widget";
            let obj = json!({"apiVersion": "example.kcr.dev/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}});
            for _ in 0..3 {
                let (status, _) = post_json(
                    hooks.addr(),
                    &ca,
                    path,
                    &admission_review("CREATE", obj.clone(), Value::Null),
                )
                .await;
                assert_eq!(status, 200);
            }
            let (status, _, _) =
                https(hooks.addr(), &ca, "POST", path, "application/json", b"x".to_vec()).await;
            assert_eq!(status, 400);
        })
    });
    let mut requests = Vec::new();
    let mut latency_samples = 0;
    let mut in_flight = None;
    for (ck, _, _, value) in snap.snapshot().into_vec() {
        let key = ck.key();
        let labels: Vec<(String, String)> = key
            .labels()
            .map(|l| (l.key().to_string(), l.value().to_string()))
            .collect();
        let webhook = labels
            .iter()
            .find(|(k, _)| k == "webhook")
            .map(|(_, v)| v.clone());
        assert_eq!(
            webhook.as_deref(),
            Some("/mutate-example-kcr-dev-v1-widget"),
            "{}",
            key.name()
        );
        match (key.name(), value) {
            ("controller_runtime_webhook_requests_total", DebugValue::Counter(n)) => {
                let code = labels.iter().find(|(k, _)| k == "code").unwrap().1.clone();
                requests.push((code, n));
            }
            ("controller_runtime_webhook_latency_seconds", DebugValue::Histogram(samples)) => {
                latency_samples += samples.len();
            }
            ("controller_runtime_webhook_requests_in_flight", DebugValue::Gauge(g)) => {
                in_flight = Some(g.into_inner());
            }
            (name, _) => panic!("unexpected metric {name}"),
        }
    }
    requests.sort();
    assert_eq!(
        requests,
        vec![("200".to_string(), 3), ("400".to_string(), 1)]
    );
    assert_eq!(latency_samples, 4);
    assert_eq!(in_flight, Some(0.0));
}
