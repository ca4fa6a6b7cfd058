//! The server over real HTTPS without an API server: what every kind of request gets back.

mod common;

use std::time::Duration;

use base64::Engine;
use common::{Hooks, admission_review, https, post_json};
use kcr_webhook::example::{WidgetDefaulter, WidgetValidator, v1, v1alpha1};
use kcr_webhook::{AdmissionError, AdmissionRequest, Conversion, Validator, Warnings};
use serde_json::{Value, json};

const MUTATE: &str = "/mutate-example-kcr-dev-v1-widget";
const VALIDATE: &str = "/validate-example-kcr-dev-v1-widget";

async fn running() -> Hooks {
    let mut hooks = Hooks::bind().await;
    let paths = hooks
        .server
        .webhook::<v1::Widget>()
        .defaulter(WidgetDefaulter)
        .validator(WidgetValidator)
        .validate_delete(true)
        .complete()
        .unwrap();
    assert_eq!(paths, vec![MUTATE, VALIDATE]);
    hooks
        .server
        .add_conversion(Conversion::<v1::Widget>::hub().spoke::<v1alpha1::Widget>())
        .unwrap();
    hooks.run();
    hooks
}

fn w(spec: Value) -> Value {
    json!({"apiVersion": "example.kcr.dev/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "default", "labels": {"keep": "me"}}, "spec": spec, "unknownTopLevel": 1})
}

fn decode_patch(resp: &Value) -> Value {
    let b64 = resp["patch"].as_str().unwrap();
    serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap(),
    )
    .unwrap()
}

#[tokio::test]
async fn defaulting_answers_a_patch_of_the_changes_only() {
    let hooks = running().await;
    let ca = hooks.ca.ca_pem().to_string();
    let (status, review) = post_json(
        hooks.addr(),
        &ca,
        MUTATE,
        &admission_review("CREATE", w(json!({"appearance": {}})), Value::Null),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(review["kind"], "AdmissionReview");
    let resp = &review["response"];
    assert_eq!(resp["uid"], "uid-1");
    assert_eq!(resp["allowed"], true);
    assert_eq!(resp["patchType"], "JSONPatch");
    let mut patch = decode_patch(resp).as_array().unwrap().clone();
    patch.sort_by_key(|op| op["path"].as_str().unwrap().to_string());
    assert_eq!(
        patch,
        vec![
            json!({"op": "add", "path": "/spec/appearance/colour", "value": "blue"}),
            json!({"op": "add", "path": "/spec/replicas", "value": 1}),
        ]
    );
    // Applied to what was sent, the unknown field and the labels stay.
    let mut obj = w(json!({"appearance": {}}));
    json_patch::patch(
        &mut obj,
        &serde_json::from_value::<json_patch::Patch>(Value::Array(patch)).unwrap(),
    )
    .unwrap();
    assert_eq!(obj["unknownTopLevel"], 1);
    assert_eq!(obj["metadata"]["labels"]["keep"], "me");

    // A spec without `appearance` at all (the type serialises `appearance: {}`): the patch
    // still applies to the object as sent.
    let sent = w(json!({"replicas": 2}));
    let (_, review) = post_json(
        hooks.addr(),
        &ca,
        MUTATE,
        &admission_review("UPDATE", sent.clone(), sent.clone()),
    )
    .await;
    let patch: json_patch::Patch =
        serde_json::from_value(decode_patch(&review["response"])).unwrap();
    let mut obj = sent;
    json_patch::patch(&mut obj, &patch).unwrap();
    assert_eq!(obj["spec"]["appearance"]["colour"], "blue");
    assert_eq!(obj["spec"]["replicas"], 2);
    assert_eq!(obj["unknownTopLevel"], 1);

    // Nothing to default: no patch. Deletes are not defaulted.
    let full = w(json!({"replicas": 3, "appearance": {"colour": "red"}}));
    for op in ["CREATE", "DELETE"] {
        let (_, review) = post_json(
            hooks.addr(),
            &ca,
            MUTATE,
            &admission_review(op, full.clone(), full.clone()),
        )
        .await;
        assert_eq!(review["response"]["allowed"], true);
        assert!(review["response"].get("patch").is_none(), "{review}");
    }
}

#[tokio::test]
async fn validation_allows_warns_and_denies_with_causes() {
    let hooks = running().await;
    let ca = hooks.ca.ca_pem().to_string();
    let call = |op: &'static str, new: Value, old: Value| {
        let ca = ca.clone();
        let addr = hooks.addr();
        async move {
            let (status, review) =
                post_json(addr, &ca, VALIDATE, &admission_review(op, new, old)).await;
            assert_eq!(status, 200);
            review["response"].clone()
        }
    };
    let ok = call("CREATE", w(json!({"replicas": 2})), Value::Null).await;
    assert_eq!(ok["allowed"], true);
    assert!(ok.get("warnings").is_none());

    let warned = call("CREATE", w(json!({"replicas": 0})), Value::Null).await;
    assert_eq!(warned["allowed"], true);
    assert_eq!(
        warned["warnings"],
        json!(["spec.replicas is 0: the widget does nothing"])
    );

    let bad = call(
        "CREATE",
        w(json!({"replicas": 11, "appearance": {"colour": "pink"}})),
        Value::Null,
    )
    .await;
    assert_eq!(bad["allowed"], false);
    let status = &bad["status"];
    assert_eq!(status["code"], 422);
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(
        status["message"],
        "Widget.example.kcr.dev \"w\" is invalid: [spec.replicas: Invalid value: 11: must be between 0 and 10, spec.appearance.colour: Unsupported value: \"pink\": supported values: \"red\", \"green\", \"blue\"]"
    );
    assert_eq!(status["details"]["kind"], "Widget");
    assert_eq!(status["details"]["group"], "example.kcr.dev");
    assert_eq!(
        status["details"]["causes"],
        json!([
            {"reason": "FieldValueInvalid", "message": "Invalid value: 11: must be between 0 and 10", "field": "spec.replicas"},
            {"reason": "FieldValueNotSupported", "message": "Unsupported value: \"pink\": supported values: \"red\", \"green\", \"blue\"", "field": "spec.appearance.colour"},
        ])
    );

    // Update: sees the old object.
    let immutable = call(
        "UPDATE",
        w(json!({"appearance": {"colour": "red"}})),
        w(json!({"appearance": {"colour": "blue"}})),
    )
    .await;
    assert_eq!(immutable["allowed"], false);
    assert_eq!(
        immutable["status"]["message"],
        "Widget.example.kcr.dev \"w\" is invalid: spec.appearance.colour: Forbidden: field is immutable once set"
    );
    // An UPDATE without the old object is a bad request, not a panic.
    let missing = call("UPDATE", w(json!({})), Value::Null).await;
    assert_eq!(missing["allowed"], false);
    assert_eq!(missing["status"]["code"], 400);
    assert!(
        missing["status"]["message"]
            .as_str()
            .unwrap()
            .contains("without object and oldObject"),
        "{missing}"
    );

    // Delete: a plain 403 with the validator's message.
    let mut protected = w(json!({}));
    protected["metadata"]["labels"]["example.kcr.dev/protected"] = json!("true");
    let refused = call("DELETE", Value::Null, protected).await;
    assert_eq!(refused["allowed"], false);
    assert_eq!(refused["status"]["code"], 403);
    assert_eq!(refused["status"]["reason"], "Forbidden");
    assert!(
        refused["status"]["message"]
            .as_str()
            .unwrap()
            .starts_with("widget w is protected")
    );
    let allowed = call("DELETE", Value::Null, w(json!({}))).await;
    assert_eq!(allowed["allowed"], true);
}

struct Broken;

impl Validator<v1alpha1::Widget> for Broken {
    async fn validate_create(
        &self,
        _: &AdmissionRequest<v1alpha1::Widget>,
        obj: &v1alpha1::Widget,
    ) -> Result<Warnings, AdmissionError> {
        if obj.spec.size == Some(13) {
            panic!("unlucky size");
        }
        Err(AdmissionError::internal("the quota service is unreachable"))
    }
}

#[tokio::test]
async fn internal_errors_are_500s_and_panics_do_not_stop_the_server() {
    let mut hooks = Hooks::bind().await;
    hooks
        .server
        .webhook::<v1alpha1::Widget>()
        .validator(Broken)
        .complete()
        .unwrap();
    hooks.run();
    let ca = hooks.ca.ca_pem().to_string();
    let path = "/validate-example-kcr-dev-v1alpha1-widget";
    let mut review = admission_review(
        "CREATE",
        json!({"apiVersion": "example.kcr.dev/v1alpha1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}}),
        Value::Null,
    );
    let (status, out) = post_json(hooks.addr(), &ca, path, &review).await;
    assert_eq!(status, 200);
    assert_eq!(out["response"]["allowed"], false);
    assert_eq!(out["response"]["status"]["code"], 500);
    assert_eq!(out["response"]["status"]["reason"], "InternalError");
    assert_eq!(
        out["response"]["status"]["message"],
        format!("internal error in webhook {path}: the quota service is unreachable")
    );
    review["request"]["object"]["spec"]["size"] = json!(13);
    let (status, out) = post_json(hooks.addr(), &ca, path, &review).await;
    assert_eq!(status, 500);
    assert!(
        out["message"].as_str().unwrap().contains("unlucky size"),
        "{out}"
    );
    // Still serving.
    review["request"]["object"]["spec"]["size"] = json!(1);
    let (status, _) = post_json(hooks.addr(), &ca, path, &review).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn malformed_reviews_get_a_clear_400() {
    let hooks = running().await;
    let ca = hooks.ca.ca_pem().to_string();
    let bodies: Vec<(&[u8], &str)> = vec![
        (b"not json", "the request body is not JSON"),
        (
            b"[]",
            "expected an AdmissionReview of admission.k8s.io/v1, got kind <none>",
        ),
        (
            br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview"}"#,
            "got kind AdmissionReview of admission.k8s.io/v1beta1",
        ),
        (
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
            "the AdmissionReview has no request",
        ),
        (
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}"#,
            "request has no uid",
        ),
    ];
    for path in [MUTATE, VALIDATE] {
        for (body, expected) in &bodies {
            let (status, out, _) = https(
                hooks.addr(),
                &ca,
                "POST",
                path,
                "application/json",
                body.to_vec(),
            )
            .await;
            assert_eq!(status, 400, "{path} {out}");
            assert_eq!(out["kind"], "Status");
            assert_eq!(out["code"], 400);
            assert_eq!(out["reason"], "BadRequest");
            let message = out["message"].as_str().unwrap();
            assert!(
                message.starts_with(&format!("webhook {path}: ")),
                "{message}"
            );
            assert!(message.contains(expected), "{message} lacks {expected}");
        }
        // A review whose object is not a Widget: answered (it has a uid) with a 400 status.
        let (status, out) = post_json(
            hooks.addr(),
            &ca,
            path,
            &admission_review("CREATE", json!({"spec": {"replicas": "many"}}), Value::Null),
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(out["response"]["uid"], "uid-1");
        assert_eq!(out["response"]["allowed"], false);
        assert_eq!(out["response"]["status"]["code"], 400);
        assert!(
            out["response"]["status"]["message"]
                .as_str()
                .unwrap()
                .contains("cannot decode the request for Widget"),
            "{out}"
        );
    }
    // ConversionReviews.
    for (body, expected) in [
        (&b"{"[..], "the request body is not JSON"),
        (
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
            "expected a ConversionReview of apiextensions.k8s.io/v1",
        ),
        (
            br#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u"}}"#,
            "no desiredAPIVersion",
        ),
        (
            br#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"example.kcr.dev/v1"}}"#,
            "no objects list",
        ),
    ] {
        let (status, out, _) = https(
            hooks.addr(),
            &ca,
            "POST",
            "/convert",
            "application/json",
            body.to_vec(),
        )
        .await;
        assert_eq!(status, 400, "{out}");
        let message = out["message"].as_str().unwrap();
        assert!(message.starts_with("conversion webhook: "), "{message}");
        assert!(message.contains(expected), "{message} lacks {expected}");
    }
    // Wrong method, path, content type; too big.
    let (status, out, _) =
        https(hooks.addr(), &ca, "GET", MUTATE, "application/json", vec![]).await;
    assert_eq!(status, 405, "{out}");
    let (status, out, _) = https(
        hooks.addr(),
        &ca,
        "POST",
        "/mutate-nothing",
        "application/json",
        vec![],
    )
    .await;
    assert_eq!(status, 404, "{out}");
    assert!(out["message"].as_str().unwrap().contains("/mutate-nothing"));
    let (status, _, _) = https(
        hooks.addr(),
        &ca,
        "POST",
        MUTATE,
        "text/plain",
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(status, 415);
}

#[tokio::test]
async fn bodies_over_the_limit_get_413() {
    let ca = kcr_webhook::CertificateAuthority::generate("ca").unwrap();
    let mut certs = common::CertDir::new();
    certs.publish(&ca.issue(&["localhost"]).unwrap());
    let server = kcr_webhook::WebhookServer::bind(
        kcr_webhook::ServerOptions::default()
            .bind_address("127.0.0.1:0".parse().unwrap())
            .cert_dir(certs.path())
            .max_request_bytes(1024),
    )
    .await
    .unwrap();
    server
        .webhook::<v1::Widget>()
        .defaulter(WidgetDefaulter)
        .complete()
        .unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let run = server.clone();
    let token = stop.clone();
    tokio::spawn(async move { run.run(token).await });
    let mut review = admission_review("CREATE", w(json!({})), Value::Null);
    let (status, _) = post_json(server.local_addr(), ca.ca_pem(), MUTATE, &review).await;
    assert_eq!(status, 200);
    review["request"]["object"]["metadata"]["annotations"] = json!({"big": "x".repeat(2000)});
    let (status, out) = post_json(server.local_addr(), ca.ca_pem(), MUTATE, &review).await;
    assert_eq!(status, 413, "{out}");
    assert_eq!(
        out["message"],
        format!("webhook {MUTATE}: request body larger than 1024 bytes")
    );
    stop.cancel();
}

fn conversion_review(desired: &str, objects: Vec<Value>) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "c-1", "desiredAPIVersion": desired, "objects": objects},
    })
}

#[tokio::test]
async fn conversion_round_trips_and_names_unknown_versions() {
    let hooks = running().await;
    let ca = hooks.ca.ca_pem().to_string();
    let alpha = json!({
        "apiVersion": "example.kcr.dev/v1alpha1", "kind": "Widget",
        "metadata": {"name": "a", "namespace": "default", "uid": "x", "resourceVersion": "7", "labels": {"l": "1"}},
        "spec": {"size": 3, "colour": "red"},
    });
    let v1 = json!({
        "apiVersion": "example.kcr.dev/v1", "kind": "Widget",
        "metadata": {"name": "b", "namespace": "default"},
        "spec": {"replicas": 4, "appearance": {"colour": "green"}},
    });
    let (status, out) = post_json(
        hooks.addr(),
        &ca,
        "/convert",
        &conversion_review("example.kcr.dev/v1", vec![alpha.clone(), v1.clone()]),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(out["kind"], "ConversionReview");
    let resp = &out["response"];
    assert_eq!(resp["uid"], "c-1");
    assert_eq!(resp["result"]["status"], "Success");
    let converted = resp["convertedObjects"].as_array().unwrap();
    assert_eq!(converted[0]["apiVersion"], "example.kcr.dev/v1");
    assert_eq!(
        converted[0]["spec"],
        json!({"replicas": 3, "appearance": {"colour": "red"}})
    );
    // Metadata is what was sent.
    assert_eq!(converted[0]["metadata"], alpha["metadata"]);
    // Already in the desired version: untouched.
    assert_eq!(converted[1], v1);

    // And back.
    let (_, out) = post_json(
        hooks.addr(),
        &ca,
        "/convert",
        &conversion_review("example.kcr.dev/v1alpha1", vec![converted[0].clone()]),
    )
    .await;
    assert_eq!(out["response"]["convertedObjects"][0], alpha);

    // Unknown versions and kinds fail the review with a message naming them.
    for (desired, obj, expected) in [
        (
            "example.kcr.dev/v2",
            alpha.clone(),
            "Widget.example.kcr.dev: unknown version v2 (known: v1, v1alpha1)",
        ),
        (
            "example.kcr.dev/v1",
            json!({"apiVersion": "example.kcr.dev/v0", "kind": "Widget", "metadata": {}}),
            "unknown version v0",
        ),
        (
            "example.kcr.dev/v1",
            json!({"apiVersion": "example.kcr.dev/v1alpha1", "kind": "Gadget", "metadata": {}}),
            "no conversion is registered for Gadget.example.kcr.dev (registered: Widget.example.kcr.dev)",
        ),
        (
            "example.kcr.dev/v1",
            json!({"spec": {}}),
            "object 0 has no apiVersion or kind",
        ),
        (
            "other.dev/v1",
            alpha.clone(),
            "cannot convert Widget.example.kcr.dev of example.kcr.dev/v1alpha1 to other.dev/v1",
        ),
        (
            "example.kcr.dev/v1",
            json!({"apiVersion": "example.kcr.dev/v1alpha1", "kind": "Widget", "metadata": {}, "spec": {"size": "big"}}),
            "cannot decode Widget.example.kcr.dev example.kcr.dev/v1alpha1",
        ),
    ] {
        let (status, out) = post_json(
            hooks.addr(),
            &ca,
            "/convert",
            &conversion_review(desired, vec![obj]),
        )
        .await;
        assert_eq!(status, 200);
        let result = &out["response"]["result"];
        assert_eq!(result["status"], "Failure", "{out}");
        let message = result["message"].as_str().unwrap();
        assert!(message.contains(expected), "{message} lacks {expected}");
    }
}

/// Another kind, for the registration checks.
mod other {
    use kcr_webhook::example::v1;
    use kcr_webhook::{ConversionError, Convertible};
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// Spec.
    #[derive(CustomResource, Serialize, Deserialize, Debug, Clone, Default, JsonSchema)]
    #[kube(group = "example.kcr.dev", version = "v2", kind = "Gadget", namespaced)]
    pub struct GadgetSpec {}

    impl Convertible<v1::Widget> for Gadget {
        fn to_hub(self) -> Result<v1::Widget, ConversionError> {
            Err(ConversionError::failed("never"))
        }
        fn from_hub(_: v1::Widget) -> Result<Self, ConversionError> {
            Err(ConversionError::failed("never"))
        }
    }
}

#[tokio::test]
async fn registrations_are_checked() {
    let hooks = Hooks::bind().await;
    hooks
        .server
        .webhook::<v1::Widget>()
        .defaulter(WidgetDefaulter)
        .complete()
        .unwrap();
    let err = hooks
        .server
        .webhook::<v1::Widget>()
        .defaulter(WidgetDefaulter)
        .complete()
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("a webhook is already registered at /mutate-example-kcr-dev-v1-widget"),
        "{err}"
    );
    hooks
        .server
        .add_conversion(Conversion::<v1::Widget>::hub())
        .unwrap();
    let err = hooks
        .server
        .add_conversion(Conversion::<v1::Widget>::hub().spoke::<v1alpha1::Widget>())
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("a conversion for Widget.example.kcr.dev is already registered"),
        "{err}"
    );
    let err = hooks
        .server
        .add_conversion(Conversion::<v1::Widget>::hub().spoke::<other::Gadget>())
        .unwrap_err();
    assert!(
        err.to_string().contains(
            "spoke Gadget.example.kcr.dev is not a version of the hub's kind Widget.example.kcr.dev"
        ),
        "{err}"
    );
    let err = hooks
        .server
        .add_conversion(
            Conversion::<v1::Widget>::hub()
                .spoke::<v1alpha1::Widget>()
                .spoke::<v1alpha1::Widget>(),
        )
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("version v1alpha1 of Widget.example.kcr.dev is registered twice"),
        "{err}"
    );
    // Bound, not running: not ready.
    let why = hooks.server.ready().unwrap_err();
    assert!(why.contains("is not serving"), "{why}");
}

/// A certificate rotated in the Secret-volume layout is served by the next handshake, and
/// requests on either side of the rotation succeed.
#[tokio::test]
async fn rotation_is_picked_up_by_the_next_handshake() {
    let mut hooks = running().await;
    let ca = hooks.ca.ca_pem().to_string();
    let review = admission_review("CREATE", w(json!({})), Value::Null);
    let body = serde_json::to_vec(&review).unwrap();
    let (_, _, first) = https(
        hooks.addr(),
        &ca,
        "POST",
        MUTATE,
        "application/json",
        body.clone(),
    )
    .await;
    for _ in 0..3 {
        let next = hooks.rotate();
        let (status, out, served) = https(
            hooks.addr(),
            &ca,
            "POST",
            MUTATE,
            "application/json",
            body.clone(),
        )
        .await;
        assert_eq!(status, 200, "{out}");
        assert_eq!(out["response"]["allowed"], true);
        let expected = {
            use rustls::pki_types::pem::PemObject;
            rustls::pki_types::CertificateDer::from_pem_slice(next.cert_pem.as_bytes()).unwrap()
        };
        assert_eq!(served, expected.as_ref());
        assert_ne!(served, first);
    }
    assert_eq!(hooks.server.cert_watcher().generation(), 4);
    hooks.server.ready().unwrap();
}

/// The handler's timeout answers 504 (tokio's paused clock: no real waiting).
#[tokio::test(start_paused = true)]
async fn slow_handlers_time_out() {
    struct Stuck;
    impl Validator<v1::Widget> for Stuck {
        async fn validate_create(
            &self,
            _: &AdmissionRequest<v1::Widget>,
            _: &v1::Widget,
        ) -> Result<Warnings, AdmissionError> {
            std::future::pending::<()>().await;
            Ok(vec![])
        }
    }
    let ca = kcr_webhook::CertificateAuthority::generate("ca").unwrap();
    let mut certs = common::CertDir::new();
    certs.publish(&ca.issue(&["localhost"]).unwrap());
    let server = kcr_webhook::WebhookServer::bind(
        kcr_webhook::ServerOptions::default()
            .bind_address("127.0.0.1:0".parse().unwrap())
            .cert_dir(certs.path())
            .request_timeout(Duration::from_secs(2)),
    )
    .await
    .unwrap();
    server
        .webhook::<v1::Widget>()
        .validator(Stuck)
        .complete()
        .unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let run = server.clone();
    let token = stop.clone();
    tokio::spawn(async move { run.run(token).await });
    let (status, out) = post_json(
        server.local_addr(),
        ca.ca_pem(),
        VALIDATE,
        &admission_review("CREATE", w(json!({})), Value::Null),
    )
    .await;
    assert_eq!(status, 504, "{out}");
    assert!(
        out["message"]
            .as_str()
            .unwrap()
            .contains("no answer within 2s")
    );
    stop.cancel();
}

/// Certificate files rewritten in place (not atomically: cert, then key, each truncated and
/// written) while clients keep opening connections: every handshake and request succeeds,
/// served by the old pair or the new one, never by a half-written or mismatched one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn in_place_rewrites_under_concurrent_handshakes_fail_no_request() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let ca = kcr_webhook::CertificateAuthority::generate("ca").unwrap();
    let dir = tempfile::tempdir().unwrap();
    ca.issue(&["localhost"])
        .unwrap()
        .write_to_dir(dir.path())
        .unwrap();
    let server = kcr_webhook::WebhookServer::bind(
        kcr_webhook::ServerOptions::default()
            .bind_address("127.0.0.1:0".parse().unwrap())
            .cert_dir(dir.path()),
    )
    .await
    .unwrap();
    server
        .webhook::<v1::Widget>()
        .defaulter(WidgetDefaulter)
        .complete()
        .unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    {
        let (server, stop) = (server.clone(), stop.clone());
        tokio::spawn(async move { server.run(stop).await });
    }
    let done = Arc::new(AtomicUsize::new(0));
    // The clients stop first and are awaited before the server stops: a request that starts
    // while the server shuts down would be refused for that reason, not for a rewrite.
    let halt = tokio_util::sync::CancellationToken::new();
    let review = admission_review("CREATE", w(json!({})), Value::Null);
    let clients: Vec<_> = (0..3)
        .map(|_| {
            let (done, halt, review) = (done.clone(), halt.clone(), review.clone());
            let (addr, ca_pem) = (server.local_addr(), ca.ca_pem().to_string());
            tokio::spawn(async move {
                while !halt.is_cancelled() {
                    let (status, out) = post_json(addr, &ca_pem, MUTATE, &review).await;
                    assert_eq!(status, 200, "{out}");
                    assert_eq!(out["response"]["allowed"], true);
                    done.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    for _ in 0..15 {
        // Let at least two requests through between rewrites.
        let before = done.load(Ordering::SeqCst);
        while done.load(Ordering::SeqCst) < before + 2 {
            tokio::task::yield_now().await;
        }
        let next = ca.issue(&["localhost"]).unwrap();
        std::fs::write(dir.path().join("tls.crt"), &next.cert_pem).unwrap();
        tokio::task::yield_now().await;
        std::fs::write(dir.path().join("tls.key"), &next.key_pem).unwrap();
    }
    let before = done.load(Ordering::SeqCst);
    while done.load(Ordering::SeqCst) < before + 2 {
        tokio::task::yield_now().await;
    }
    halt.cancel();
    for c in clients {
        c.await.unwrap();
    }
    stop.cancel();
    // Every rewrite that was seen whole was loaded; the last one certainly.
    let generation = server.cert_watcher().generation();
    assert!(generation >= 2, "{generation}");
    server.cert_watcher().check().unwrap();
}
