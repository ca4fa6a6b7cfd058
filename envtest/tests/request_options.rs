//! Request options the real API server refuses, and how: 422 `Invalid` about the options kind
//! (`CreateOptions`, `DeleteOptions`, `ListOptions`, ...) for unsupported values, 500 for a
//! resourceVersion that is not a number, 504 for one in the future; and the ones it accepts.
//! Raw HTTP through the client, so these hold on a real API server too.

use kcr_envtest::TestNamespace;
use serde_json::{Value, json};

/// The ConfigMaps of the test's namespace.
fn configmaps(ns: &TestNamespace) -> String {
    format!("/api/v1/namespaces/{}/configmaps", ns.namespace())
}

/// One request over a plain HTTP/1.1 connection (no client middleware: kube-rs retries 5xx
/// answers); the status code and the body's first JSON line (a watch streams several).
async fn call(ns: &TestNamespace, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let content_type = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let url = ns.url();
    let host = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut stream = tokio::net::TcpStream::connect(&host).await.unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let payload = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = String::new();
        let mut rest = rest;
        while let Some((size, tail)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 || tail.len() < n {
                break;
            }
            out.push_str(&tail[..n]);
            rest = tail[n..].trim_start_matches("\r\n");
        }
        out
    } else {
        rest.to_string()
    };
    let first = payload.lines().next().unwrap_or_default();
    (code, serde_json::from_str(first).unwrap_or(Value::Null))
}

fn cause_field(status: &Value) -> &str {
    status["details"]["causes"][0]["field"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test]
async fn unsupported_option_values_are_invalid_options() {
    let ns = TestNamespace::new("options").await.unwrap();
    let cms = configmaps(&ns);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "opts"}});
    let (code, s) = call(&ns, "POST", &format!("{cms}?dryRun=Some"), Some(cm.clone())).await;
    assert_eq!((code, cause_field(&s)), (422, "dryRun"), "{s}");
    assert_eq!(
        s["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"Some\"]: supported values: \"All\""
    );
    let (code, s) = call(
        &ns,
        "POST",
        &format!("{cms}?fieldValidation=Loud"),
        Some(cm.clone()),
    )
    .await;
    assert_eq!((code, cause_field(&s)), (422, "fieldValidation"), "{s}");
    assert_eq!(s["details"]["kind"], "CreateOptions");
    // Nothing was created by the refused requests; a good one works.
    let (code, _) = call(&ns, "POST", &cms, Some(cm)).await;
    assert_eq!(code, 201);
    let item = format!("{cms}/opts");
    let (code, s) = call(&ns, "PATCH", &format!("{item}?force=true"), Some(json!({}))).await;
    assert_eq!((code, cause_field(&s)), (422, "force"), "{s}");
    assert_eq!(s["details"]["kind"], "PatchOptions");
    let (code, s) = call(
        &ns,
        "DELETE",
        &format!("{item}?propagationPolicy=Sometimes"),
        None,
    )
    .await;
    assert_eq!((code, cause_field(&s)), (422, "propagationPolicy"), "{s}");
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .ends_with("\"Orphan\", \"nil\""),
        "{s}"
    );
    let (code, s) = call(&ns, "DELETE", &format!("{item}?dryRun=Some"), None).await;
    assert_eq!(
        (code, s["details"]["kind"].as_str()),
        (422, Some("DeleteOptions")),
        "{s}"
    );
    // Still there.
    let (code, _) = call(&ns, "GET", &item, None).await;
    assert_eq!(code, 200);
}

#[tokio::test]
async fn resource_versions_that_are_not_numbers_or_not_reached() {
    let ns = TestNamespace::new("rv-options").await.unwrap();
    let cms = configmaps(&ns);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rv"}});
    let (_, created) = call(&ns, "POST", &cms, Some(cm)).await;
    let item = format!("{cms}/rv");
    let (code, s) = call(&ns, "GET", &format!("{item}?resourceVersion=abc"), None).await;
    assert_eq!(code, 500, "{s}");
    assert_eq!(
        s["message"],
        "resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax"
    );
    let (code, s) = call(
        &ns,
        "GET",
        &format!("{item}?resourceVersion=999999999"),
        None,
    )
    .await;
    assert_eq!((code, s["reason"].as_str()), (504, Some("Timeout")), "{s}");
    let rv = created["metadata"]["resourceVersion"].as_str().unwrap();
    let (code, _) = call(&ns, "GET", &format!("{item}?resourceVersion={rv}"), None).await;
    assert_eq!(code, 200);
    let (code, s) = call(
        &ns,
        "GET",
        &format!("{cms}?resourceVersionMatch=Exact"),
        None,
    )
    .await;
    assert_eq!(
        (code, s["details"]["kind"].as_str()),
        (422, Some("ListOptions")),
        "{s}"
    );
    let (code, s) = call(
        &ns,
        "GET",
        &format!("{cms}?resourceVersion=1&resourceVersionMatch=Sometimes"),
        None,
    )
    .await;
    assert_eq!(
        (code, cause_field(&s)),
        (422, "resourceVersionMatch"),
        "{s}"
    );
    let (code, s) = call(
        &ns,
        "PUT",
        &item,
        Some(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "rv", "resourceVersion": "x"}})),
    )
    .await;
    assert_eq!(code, 500, "{s}");
    assert_eq!(
        s["message"],
        "strconv.ParseUint: parsing \"x\": invalid syntax"
    );
}

#[tokio::test]
async fn watches_read_the_first_of_repeated_parameters_and_need_no_bookmarks_for_initial_events() {
    let ns = TestNamespace::new("watch-options").await.unwrap();
    let cms = configmaps(&ns);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w"}});
    call(&ns, "POST", &cms, Some(cm)).await;
    let (code, event) = call(
        &ns,
        "GET",
        &format!("{cms}?watch=true&timeoutSeconds=1&timeoutSeconds=abc"),
        None,
    )
    .await;
    assert_eq!(code, 200, "{event}");
    let (code, s) = call(
        &ns,
        "GET",
        &format!("{cms}?watch=true&timeoutSeconds=abc"),
        None,
    )
    .await;
    assert_eq!(
        (code, s["reason"].as_str()),
        (400, Some("BadRequest")),
        "{s}"
    );
    let (code, event) = call(
        &ns,
        "GET",
        &format!("{cms}?watch=true&timeoutSeconds=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"),
        None,
    )
    .await;
    assert_eq!(code, 200, "{event}");
    assert_eq!(event["type"], "ADDED");
    let (code, s) = call(
        &ns,
        "GET",
        &format!("{cms}?watch=true&timeoutSeconds=1&sendInitialEvents=true&resourceVersionMatch=Exact&allowWatchBookmarks=true"),
        None,
    )
    .await;
    assert_eq!(code, 422, "{s}");
    assert_eq!(
        s["details"]["causes"].as_array().map(Vec::len),
        Some(2),
        "{s}"
    );
}
