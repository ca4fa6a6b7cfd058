//! The server's metrics carry controller-runtime's names and labels: requests, latency and
//! in-flight per webhook, panics, and kcr-tls's certificate reads.

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
    let mut unlabelled = std::collections::BTreeMap::new();
    for (ck, _, _, value) in snap.snapshot().into_vec() {
        let key = ck.key();
        if let (
            "controller_runtime_webhook_panics_total"
            | "certwatcher_read_certificate_total"
            | "certwatcher_read_certificate_errors_total",
            DebugValue::Counter(n),
        ) = (key.name(), &value)
        {
            assert_eq!(key.labels().count(), 0, "{}", key.name());
            unlabelled.insert(key.name().to_string(), *n);
            continue;
        }
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
    // No panics (registered at 0); the pair was read once (unchanged since).
    assert_eq!(
        unlabelled.into_iter().collect::<Vec<_>>(),
        vec![
            ("certwatcher_read_certificate_errors_total".to_string(), 0),
            ("certwatcher_read_certificate_total".to_string(), 1),
            ("controller_runtime_webhook_panics_total".to_string(), 0),
        ]
    );
}

/// A raw handler that panics on a marked request.
fn panicking() -> impl kcr_webhook::AdmissionHandler {
    kcr_webhook::admission_fn(
        |_ctx, req: kube::core::admission::AdmissionRequest<kube::core::DynamicObject>| async move {
            if req.name == "boom" {
                panic!("the handler blew up on {}", req.name);
            }
            kube::core::admission::AdmissionResponse::from(&req)
        },
    )
}

#[test]
fn a_panic_is_a_500_counted_once_and_the_connection_keeps_serving() {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || {
        rt.block_on(async {
            let mut hooks = Hooks::bind().await;
            hooks.server.admission_handler("/raw", panicking()).unwrap();
            hooks.run();
            // One connection for every request: it survives the panic.
            let tcp = tokio::net::TcpStream::connect(hooks.addr()).await.unwrap();
            let tls = common::connector(hooks.ca.ca_pem())
                .connect(
                    rustls::pki_types::ServerName::try_from("localhost").unwrap(),
                    tcp,
                )
                .await
                .unwrap();
            let (mut sender, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                    .await
                    .unwrap();
            tokio::spawn(conn);
            let obj = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
            for (name, expected) in [("fine", 200), ("boom", 500), ("fine", 200)] {
                let mut review = admission_review("CREATE", obj(name), Value::Null);
                review["request"]["name"] = json!(name);
                let req = http::Request::post("/raw")
                    .header("host", "localhost")
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(serde_json::to_vec(&review).unwrap())))
                    .unwrap();
                sender.ready().await.unwrap();
                let resp = sender.send_request(req).await.unwrap();
                assert_eq!(resp.status().as_u16(), expected, "{name}");
                let body: Value =
                    serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes())
                        .unwrap();
                if expected == 500 {
                    assert_eq!(body["reason"], "InternalError", "{body}");
                    assert!(
                        body["message"]
                            .as_str()
                            .unwrap()
                            .contains("the handler blew up on boom"),
                        "{body}"
                    );
                } else {
                    assert_eq!(body["response"]["allowed"], true, "{body}");
                    assert_eq!(body["response"]["uid"], "uid-1", "{body}");
                }
            }
        })
    });
    let mut panics = None;
    let mut codes = Vec::new();
    for (ck, _, _, value) in snap.snapshot().into_vec() {
        match (ck.key().name(), value) {
            ("controller_runtime_webhook_panics_total", DebugValue::Counter(n)) => panics = Some(n),
            ("controller_runtime_webhook_requests_total", DebugValue::Counter(n)) => {
                let code = ck.key().labels().find(|l| l.key() == "code").unwrap();
                codes.push((code.value().to_string(), n));
            }
            _ => {}
        }
    }
    assert_eq!(panics, Some(1));
    codes.sort();
    assert_eq!(codes, vec![("200".into(), 2), ("500".into(), 1)]);
}
