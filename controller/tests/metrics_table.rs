//! The metrics served on `/metrics` are exactly those of the table in `kcr_controller::metrics`
//! (names, types, label names), both ways: every documented metric of kcr-controller and
//! kcr-queue is served by a manager running a controller with leader election, and nothing is
//! served that the table does not list. (The kcr-webhook rows are checked by the NodePool
//! operator's metrics test, which runs a webhook server.)

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{http_get, manager_options, spawn_manager};
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_controller::metrics::{DocumentedMetric, ScrapedFamily, documented, parse_exposition};
use kcr_controller::{Action, LeaderElectionConfig, Manager, WatchOptions, reconciler_fn};
use kcr_envtest::TestNamespace;
use kube::api::{Api, PostParams};

/// Differences between the table and a scrape, as readable lines (empty when they agree).
fn differences(
    table: &[DocumentedMetric],
    scraped: &BTreeMap<String, ScrapedFamily>,
) -> Vec<String> {
    let mut out = Vec::new();
    for row in table {
        match scraped.get(&row.name) {
            None => out.push(format!("{} is documented but not served", row.name)),
            Some(f) if f.kind != row.kind => out.push(format!(
                "{}: documented as a {}, served as a {}",
                row.name, row.kind, f.kind
            )),
            Some(f) if f.labels != row.labels => out.push(format!(
                "{}: documented labels {:?}, served {:?}",
                row.name, row.labels, f.labels
            )),
            Some(_) => {}
        }
    }
    let all = documented();
    for name in scraped.keys() {
        if !all.iter().any(|r| &r.name == name) {
            out.push(format!("{name} is served but not in the table"));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_metrics_match_the_documented_table() {
    let ns = TestNamespace::new("metrics-table").await.unwrap();
    let options = manager_options()
        .leader_election(
            LeaderElectionConfig::new("metrics-table")
                .namespace(ns.namespace())
                .timings(
                    Duration::from_secs(4),
                    Duration::from_secs(3),
                    Duration::from_millis(500),
                ),
        )
        .api_server_host(ns.addr().to_string());
    let mgr = Manager::new(ns.client(), options).await.unwrap();
    let metrics = mgr.metrics_addr().unwrap();
    mgr.controller()
        .named("tabled")
        .for_kind::<ConfigMap>(WatchOptions::new().namespace(ns.namespace()))
        .complete(reconciler_fn(|_req, _ctx| async move {
            Ok::<_, anyhow::Error>(Action::done())
        }))
        .unwrap();
    let (mgr, stop, run) = spawn_manager(mgr);

    Api::<ConfigMap>::default_namespaced(ns.client())
        .create(&PostParams::default(), &common::configmap("tabled", "1"))
        .await
        .unwrap();

    let table: Vec<DocumentedMetric> = documented()
        .into_iter()
        // The webhook and certificate-watcher metrics need a server with a certificate (the
        // NodePool operator's demo and controller/tests/secure_metrics.rs check them).
        .filter(|r| r.from != "kcr-webhook" && r.from != "kcr-tls")
        .filter(|r| cfg!(target_os = "linux") || !r.name.starts_with("process_"))
        .collect();
    let mut last = (Vec::new(), String::new());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while tokio::time::Instant::now() < deadline {
        let (code, text) = http_get(metrics, "/metrics").await.unwrap();
        assert_eq!(code, 200, "{text}");
        let scraped = parse_exposition(&text);
        let reconciled = common::metric_value(
            &text,
            "controller_runtime_reconcile_total{controller=\"tabled\",result=\"success\"}",
        ) >= 1.0;
        last = (differences(&table, &scraped), text);
        if last.0.is_empty() && reconciled {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (diff, text) = last;
    assert!(
        diff.is_empty(),
        "/metrics and the table in controller/src/observe/metrics.rs disagree:\n{}\n\n{text}",
        diff.join("\n")
    );

    // Values, not only names: this replica leads, the queue is the controller's, requests were
    // counted with the API server's address and their status.
    assert!(mgr.is_leader());
    assert_eq!(
        common::metric_value(
            &text,
            "leader_election_master_status{name=\"metrics-table\"}"
        ),
        1.0
    );
    assert!(
        text.lines().any(|l| l.starts_with("workqueue_adds_total")
            && l.contains("controller=\"tabled\"")
            && l.contains("name=\"tabled\"")),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.starts_with("workqueue_depth{")
            && l.contains("controller=\"tabled\"")
            && l.contains("priority=\"0\"")),
        "the default priority's depth: {text}"
    );
    assert_eq!(
        common::metric_value(
            &text,
            "leader_election_slowpath_total{name=\"metrics-table\"}"
        ),
        0.0,
        "a leader alone renews on the fast path"
    );
    let host = format!("host=\"{}\"", ns.addr());
    assert!(
        text.lines()
            .any(|l| l.starts_with("rest_client_requests_total")
                && l.contains("code=\"200\"")
                && l.contains("method=\"GET\"")
                && l.contains(&host)),
        "{text}"
    );
    assert!(
        text.lines().any(
            |l| l.starts_with("rest_client_request_duration_seconds_count")
                && l.contains("verb=\"POST\"")
                && l.contains(&host)
        ),
        "the Lease was created by a POST: {text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("rest_client_requests_total")
                && l.contains("code=\"201\"")
                && l.contains("method=\"POST\"")),
        "{text}"
    );
    // Sizes: the Lease's POST sent a body; GETs and LISTs got bodies back (watches are not
    // observed).
    let sum = |series: &str| {
        text.lines()
            .filter(|l| l.starts_with(series) && l.contains(&host))
            .map(|l| {
                l.rsplit(' ')
                    .next()
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(0.0)
            })
            .sum::<f64>()
    };
    assert!(
        sum("rest_client_request_size_bytes_sum{verb=\"POST\"") > 0.0,
        "{text}"
    );
    assert!(
        sum("rest_client_response_size_bytes_sum{verb=\"GET\"") > 0.0,
        "{text}"
    );

    stop.cancel();
    run.await.unwrap().unwrap();
    // Not leading any more once stopped.
    let after = kcr_controller::http::prometheus_handle().unwrap().render();
    assert_eq!(
        common::metric_value(
            &after,
            "leader_election_master_status{name=\"metrics-table\"}"
        ),
        0.0
    );
}

/// A request refused by the API server is counted under its status code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_requests_are_counted_by_status() {
    let ns = TestNamespace::new("metrics-refused").await.unwrap();
    let mgr = Manager::new(
        ns.client(),
        manager_options().api_server_host("refusals.test:443"),
    )
    .await
    .unwrap();
    let missing = Api::<ConfigMap>::namespaced(mgr.kube_client(), ns.namespace())
        .get("no-such-configmap")
        .await;
    assert!(
        matches!(&missing, Err(kube::Error::Api(s)) if s.code == 404),
        "the wrapped client returns the API error as is: {missing:?}"
    );
    let text = kcr_controller::http::prometheus_handle().unwrap().render();
    let series =
        "rest_client_requests_total{code=\"404\",method=\"GET\",host=\"refusals.test:443\"}";
    assert_eq!(common::metric_value(&text, series), 1.0, "{text}");
}

/// An extra handler is served on the metrics server next to `/metrics`, which keeps working;
/// `/metrics` itself, a second handler on one path and a path with a capture are refused with
/// typed errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extra_handlers_are_served_beside_metrics() {
    use axum::routing::get;
    use kcr_controller::http::ExtraHandlerError;

    let refused = manager_options().metrics_extra_handler("/metrics", get(|| async { "mine" }));
    assert!(
        matches!(&refused, Err(ExtraHandlerError::Reserved { path }) if path == "/metrics"),
        "{:?}",
        refused.map(|_| ())
    );
    let twice = manager_options()
        .metrics_extra_handler("/debug/info", get(|| async { "a" }))
        .unwrap()
        .metrics_extra_handler("/debug/info", get(|| async { "b" }));
    assert!(matches!(twice, Err(ExtraHandlerError::Duplicate { .. })));
    for bad in ["debug", "/debug/{name}", "/debug//x", "/debug/*rest", ""] {
        let res = manager_options().metrics_extra_handler(bad, get(|| async { "x" }));
        assert!(
            matches!(res, Err(ExtraHandlerError::InvalidPath { .. })),
            "{bad:?} is refused"
        );
    }

    let ns = TestNamespace::new("metrics-extra").await.unwrap();
    let options = manager_options()
        .metrics_extra_handler(
            "/debug/info",
            get(|| async { "kcr extra handler\n" }).post(|| async { "posted\n" }),
        )
        .unwrap();
    let mgr = Manager::new(ns.client(), options).await.unwrap();
    let addr = mgr.metrics_addr().unwrap();
    let (mgr, stop, run) = spawn_manager(mgr);
    let (code, body) = http_get(addr, "/debug/info").await.unwrap();
    assert_eq!((code, body.as_str()), (200, "kcr extra handler\n"));
    let (code, text) = http_get(addr, "/metrics").await.unwrap();
    assert_eq!(code, 200, "{text}");
    assert!(
        parse_exposition(&text).contains_key("tokio_runtime_workers"),
        "/metrics is still kcr's: {text}"
    );
    let (code, _) = http_get(addr, "/debug/info/more").await.unwrap();
    assert_eq!(code, 404, "exact paths only");
    let (code, _) = http_get(addr, "/debug").await.unwrap();
    assert_eq!(code, 404);
    drop(mgr);
    stop.cancel();
    run.await.unwrap().unwrap();
}
