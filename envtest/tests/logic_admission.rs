//! Admission webhook calls against a real in-test HTTPS webhook (rcgen CA + server cert).
//!
//! The webhook answers by URL path: `/allow`, `/deny`, `/mutate` (adds a label and an
//! annotation by JSONPatch), `/warn` (allows with a warning), `/hang` (never answers),
//! `/bad-uid` (answers with the wrong uid), `/status-500`.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use kcr_envtest::admission::{
    AdmissionError, Attributes, Operation, UserInfo, admit, run_mutating, run_validating,
};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use serde_json::{Value, json};

struct Webhook {
    base: String,
    ca_bundle: String,
    hits: Arc<AtomicUsize>,
    _task: tokio::task::JoinHandle<()>,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self._task.abort();
    }
}

async fn handle(
    req: hyper::Request<hyper::body::Incoming>,
    hits: Arc<AtomicUsize>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    hits.fetch_add(1, Ordering::SeqCst);
    let path = req.uri().path().to_string();
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let uid = review["request"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let response = match path.as_str() {
        "/allow" => json!({"uid": uid, "allowed": true}),
        "/warn" => json!({"uid": uid, "allowed": true, "warnings": ["careful"]}),
        "/deny" => json!({"uid": uid, "allowed": false,
            "status": {"code": 403, "reason": "Forbidden", "message": "pods named forbidden are not allowed"}}),
        "/mutate" => {
            let ops = json!([
                {"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}},
                {"op": "add", "path": "/metadata/annotations/seen-operation",
                    "value": review["request"]["operation"]}
            ]);
            let patch = base64::engine::general_purpose::STANDARD.encode(ops.to_string());
            json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch})
        }
        "/bad-uid" => json!({"uid": "not-the-uid", "allowed": true}),
        "/hang" => {
            std::future::pending::<()>().await;
            Value::Null
        }
        _ => {
            return Ok(hyper::Response::builder()
                .status(500)
                .body(Full::new(Bytes::from_static(b"boom")))
                .unwrap_or_default());
        }
    };
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response});
    Ok(hyper::Response::new(Full::new(Bytes::from(
        review.to_string(),
    ))))
}

async fn start_webhook() -> anyhow::Result<Webhook> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "envtest webhook test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
    let leaf_key = KeyPair::generate()?;
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])?
        .signed_by(&leaf_key, &ca)?;
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca.pem());

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            rustls::pki_types::PrivateKeyDer::try_from(leaf_key.serialize_der())
                .map_err(anyhow::Error::msg)?,
        )?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let hits = Arc::new(AtomicUsize::new(0));
    let task_hits = hits.clone();
    let task = tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let hits = task_hits.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = service_fn(move |req| handle(req, hits.clone()));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Ok(Webhook {
        base: format!("https://{addr}"),
        ca_bundle,
        hits,
        _task: task,
    })
}

fn attrs(op: Operation) -> Attributes {
    Attributes {
        group: "".into(),
        version: "v1".into(),
        resource: "pods".into(),
        subresource: "".into(),
        kind: "Pod".into(),
        operation: op,
        namespace: Some("default".into()),
        name: "p".into(),
        user: UserInfo {
            username: "tester".into(),
            uid: "1".into(),
            groups: vec!["system:authenticated".into()],
        },
        dry_run: false,
        namespace_labels: None,
    }
}

fn configuration(kind: &str, hooks: Vec<Value>) -> Vec<Value> {
    vec![
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
        "metadata": {"name": "cfg"}, "webhooks": hooks}),
    ]
}

fn hook(name: &str, url: &str, ca: &str, extra: Value) -> Value {
    let mut h = json!({
        "name": name,
        "clientConfig": {"url": url, "caBundle": ca},
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE", "UPDATE"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"]
    });
    if let (Value::Object(h), Value::Object(extra)) = (&mut h, extra) {
        h.extend(extra);
    }
    h
}

fn pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default", "annotations": {}},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
}

#[tokio::test]
async fn allow_passes_the_object_through() -> anyhow::Result<()> {
    let wh = start_webhook().await?;
    let cfg = configuration(
        "ValidatingWebhookConfiguration",
        vec![hook(
            "allow.example.com",
            &format!("{}/allow", wh.base),
            &wh.ca_bundle,
            json!({}),
        )],
    );
    let out = run_validating(&cfg, &attrs(Operation::Create), Some(&pod()), None).await?;
    assert_eq!(out.object, Some(pod()));
    assert_eq!(out.called, vec!["allow.example.com"]);
    assert_eq!(wh.hits.load(Ordering::SeqCst), 1);
    // A DELETE does not match the rule: no call.
    let out = run_validating(&cfg, &attrs(Operation::Delete), None, Some(&pod())).await?;
    assert!(out.called.is_empty());
    assert_eq!(wh.hits.load(Ordering::SeqCst), 1);
    Ok(())
}

#[tokio::test]
async fn deny_carries_the_webhook_message() -> anyhow::Result<()> {
    let wh = start_webhook().await?;
    let cfg = configuration(
        "ValidatingWebhookConfiguration",
        vec![
            hook(
                "allow.example.com",
                &format!("{}/allow", wh.base),
                &wh.ca_bundle,
                json!({}),
            ),
            hook(
                "deny.example.com",
                &format!("{}/deny", wh.base),
                &wh.ca_bundle,
                json!({}),
            ),
        ],
    );
    let err = run_validating(&cfg, &attrs(Operation::Create), Some(&pod()), None)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "admission webhook \"deny.example.com\" denied the request: pods named forbidden are not allowed"
    );
    assert_eq!(err.status_code(), 403);
    assert_eq!(err.status_reason(), "Forbidden");
    assert!(
        matches!(err, AdmissionError::Denied { ref webhook, .. } if webhook == "deny.example.com")
    );
    Ok(())
}

#[tokio::test]
async fn mutating_patches_apply_in_order_then_validation_sees_them() -> anyhow::Result<()> {
    let wh = start_webhook().await?;
    let mutating = configuration(
        "MutatingWebhookConfiguration",
        vec![
            hook(
                "mutate.example.com",
                &format!("{}/mutate", wh.base),
                &wh.ca_bundle,
                json!({}),
            ),
            hook(
                "warn.example.com",
                &format!("{}/warn", wh.base),
                &wh.ca_bundle,
                json!({}),
            ),
        ],
    );
    // The validating webhook only matches objects carrying the label added by the mutation.
    let validating = configuration(
        "ValidatingWebhookConfiguration",
        vec![hook(
            "deny-mutated.example.com",
            &format!("{}/deny", wh.base),
            &wh.ca_bundle,
            json!({"objectSelector": {"matchLabels": {"mutated": "yes"}}}),
        )],
    );
    let out = run_mutating(&mutating, &attrs(Operation::Create), Some(pod()), None).await?;
    let obj = out.object.clone().unwrap_or_default();
    assert_eq!(obj["metadata"]["labels"], json!({"mutated": "yes"}));
    assert_eq!(obj["metadata"]["annotations"]["seen-operation"], "CREATE");
    assert_eq!(out.warnings, vec!["careful"]);
    assert_eq!(out.called, vec!["mutate.example.com", "warn.example.com"]);

    let err = admit(
        &mutating,
        &validating,
        &attrs(Operation::Create),
        Some(pod()),
        None,
    )
    .await
    .unwrap_err();
    assert!(
        err.to_string().contains("deny-mutated.example.com"),
        "{err}"
    );
    // Without the mutation the validating webhook does not match.
    let out = admit(
        &[],
        &validating,
        &attrs(Operation::Create),
        Some(pod()),
        None,
    )
    .await?;
    assert_eq!(out.object, Some(pod()));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn timeout_with_ignore_skips_the_webhook() -> anyhow::Result<()> {
    let wh = start_webhook().await?;
    let cfg = configuration(
        "ValidatingWebhookConfiguration",
        vec![hook(
            "slow.example.com",
            &format!("{}/hang", wh.base),
            &wh.ca_bundle,
            json!({"timeoutSeconds": 2, "failurePolicy": "Ignore"}),
        )],
    );
    let start = tokio::time::Instant::now();
    let out = run_validating(&cfg, &attrs(Operation::Create), Some(&pod()), None).await?;
    assert!(out.called.is_empty());
    assert_eq!(out.object, Some(pod()));
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_secs(2) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn timeout_with_fail_rejects() -> anyhow::Result<()> {
    let wh = start_webhook().await?;
    let cfg = configuration(
        "MutatingWebhookConfiguration",
        vec![hook(
            "slow.example.com",
            &format!("{}/hang", wh.base),
            &wh.ca_bundle,
            json!({"timeoutSeconds": 5, "failurePolicy": "Fail"}),
        )],
    );
    let start = tokio::time::Instant::now();
    let err = run_mutating(&cfg, &attrs(Operation::Create), Some(pod()), None)
        .await
        .unwrap_err();
    assert!(start.elapsed() >= Duration::from_secs(5));
    assert_eq!(err.status_code(), 500);
    assert_eq!(err.status_reason(), "InternalError");
    let text = err.to_string();
    assert!(
        text.starts_with(
            "failed calling webhook \"slow.example.com\": failed to call webhook: Post"
        ),
        "{text}"
    );
    assert!(text.contains("context deadline exceeded"), "{text}");
    Ok(())
}

#[tokio::test]
async fn unreachable_webhook_honours_failure_policy() -> anyhow::Result<()> {
    // A port that was free a moment ago and has no listener.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    drop(listener);
    let wh = start_webhook().await?;
    let url = format!("https://{addr}/allow");
    let ignore = configuration(
        "ValidatingWebhookConfiguration",
        vec![hook(
            "gone.example.com",
            &url,
            &wh.ca_bundle,
            json!({"failurePolicy": "Ignore"}),
        )],
    );
    let out = run_validating(&ignore, &attrs(Operation::Create), Some(&pod()), None).await?;
    assert!(out.called.is_empty());
    let fail = configuration(
        "ValidatingWebhookConfiguration",
        vec![hook("gone.example.com", &url, &wh.ca_bundle, json!({}))],
    );
    let err = run_validating(&fail, &attrs(Operation::Create), Some(&pod()), None)
        .await
        .unwrap_err();
    assert!(matches!(err, AdmissionError::CallFailed { .. }), "{err}");
    assert!(err.to_string().contains("dial tcp"), "{err}");
    Ok(())
}

#[tokio::test]
async fn wrong_ca_bad_uid_and_error_status_fail() -> anyhow::Result<()> {
    let wh = start_webhook().await?;
    let other = start_webhook().await?;
    let cases = [
        // Trusting another CA: TLS verification fails.
        (format!("{}/allow", wh.base), other.ca_bundle.clone(), "tls"),
        (
            format!("{}/bad-uid", wh.base),
            wh.ca_bundle.clone(),
            "expected response.uid",
        ),
        (
            format!("{}/status-500", wh.base),
            wh.ca_bundle.clone(),
            "status 500",
        ),
        (
            format!("http://{}/allow", wh.base.trim_start_matches("https://")),
            wh.ca_bundle.clone(),
            "https",
        ),
        (format!("{}/allow", wh.base), String::new(), "caBundle"),
    ];
    for (url, ca, expected) in cases {
        let cfg = configuration(
            "ValidatingWebhookConfiguration",
            vec![hook("h.example.com", &url, &ca, json!({}))],
        );
        let err = run_validating(&cfg, &attrs(Operation::Update), Some(&pod()), Some(&pod()))
            .await
            .unwrap_err();
        assert!(err.to_string().contains(expected), "{url}: {err}");
        assert_eq!(err.status_code(), 500);
    }
    Ok(())
}

#[tokio::test]
async fn if_needed_webhooks_are_reinvoked_after_later_mutations() -> anyhow::Result<()> {
    let wh = start_webhook().await?;
    let cfg = configuration(
        "MutatingWebhookConfiguration",
        vec![
            hook(
                "observer.example.com",
                &format!("{}/allow", wh.base),
                &wh.ca_bundle,
                json!({"reinvocationPolicy": "IfNeeded"}),
            ),
            hook(
                "mutate.example.com",
                &format!("{}/mutate", wh.base),
                &wh.ca_bundle,
                json!({}),
            ),
            hook(
                "last.example.com",
                &format!("{}/allow", wh.base),
                &wh.ca_bundle,
                json!({"reinvocationPolicy": "IfNeeded"}),
            ),
        ],
    );
    let out = run_mutating(&cfg, &attrs(Operation::Create), Some(pod()), None).await?;
    // The observer saw the object before the mutation: called again; `last` saw the final one.
    assert_eq!(
        out.called,
        vec![
            "observer.example.com",
            "mutate.example.com",
            "last.example.com",
            "observer.example.com"
        ]
    );
    assert_eq!(wh.hits.load(Ordering::SeqCst), 4);
    // "Never" (the default) is not reinvoked.
    let cfg = configuration(
        "MutatingWebhookConfiguration",
        vec![
            hook(
                "observer.example.com",
                &format!("{}/allow", wh.base),
                &wh.ca_bundle,
                json!({}),
            ),
            hook(
                "mutate.example.com",
                &format!("{}/mutate", wh.base),
                &wh.ca_bundle,
                json!({}),
            ),
        ],
    );
    let out = run_mutating(&cfg, &attrs(Operation::Create), Some(pod()), None).await?;
    assert_eq!(
        out.called,
        vec!["observer.example.com", "mutate.example.com"]
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn validating_webhooks_run_concurrently() -> anyhow::Result<()> {
    let wh = start_webhook().await?;
    let slow = |name: &str| {
        hook(
            name,
            &format!("{}/hang", wh.base),
            &wh.ca_bundle,
            json!({"timeoutSeconds": 3, "failurePolicy": "Ignore"}),
        )
    };
    let cfg = configuration(
        "ValidatingWebhookConfiguration",
        vec![
            slow("a.example.com"),
            slow("b.example.com"),
            slow("c.example.com"),
        ],
    );
    let start = tokio::time::Instant::now();
    let out = run_validating(&cfg, &attrs(Operation::Create), Some(&pod()), None).await?;
    let waited = start.elapsed();
    assert!(out.called.is_empty());
    // Three 3 s timeouts overlap instead of adding up to 9 s.
    assert!(
        waited >= Duration::from_secs(3) && waited < Duration::from_secs(4),
        "{waited:?}"
    );
    Ok(())
}
