//! The manager against kcr-envtest (real HTTP on loopback, real time with short timings):
//! reconciling through the shared cache, probes and metrics, events, cache-sync diagnosis,
//! recovery from API faults.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::{CopyToSecret, configmap, eventually, http_get, manager_options};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcr_controller::{ControllerError, Manager, ManagerError, WatchOptions};
use kcr_envtest::{TestApiServer, TestNamespace};
use kube::api::{Api, PostParams};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manager_reconciles_and_serves_probes_metrics_and_events() {
    // A server of its own: it pauses the server.
    let server = TestApiServer::start().await.unwrap();
    let client = server.client();
    // hold the API server until the readiness probe has been seen failing
    server.faults().pause();
    let mgr = Manager::new(client.clone(), manager_options())
        .await
        .unwrap();
    let probes = mgr.health_probe_addr().expect("probes enabled");
    let metrics = mgr.metrics_addr().expect("metrics enabled");
    let reconciler = CopyToSecret::new(&mgr, "copier", "copier").with_events(&mgr);
    mgr.controller()
        .for_kind::<ConfigMap>(WatchOptions::new().namespace("default"))
        .owns::<Secret>(WatchOptions::new().namespace("default"))
        .named("copier")
        .complete(reconciler.clone())
        .unwrap();
    let (_mgr, stop, run) = common::spawn_manager(mgr);

    // liveness is up at once; readiness waits for the caches
    eventually("healthz ok", Duration::from_secs(10), || async {
        http_get(probes, "/healthz").await == Some((200, "ok".to_string()))
    })
    .await;
    let (code, body) = http_get(probes, "/readyz?verbose").await.unwrap();
    assert_eq!(code, 500, "{body}");
    assert!(body.contains("[-]caches-synced failed"), "{body}");
    assert!(body.contains("ConfigMap"), "{body}");
    server.faults().resume();
    eventually("readyz ok", Duration::from_secs(20), || async {
        http_get(probes, "/readyz").await.map(|r| r.0) == Some(200)
    })
    .await;

    // single checks by name
    assert_eq!(
        http_get(probes, "/readyz/caches-synced").await,
        Some((200, "ok".to_string()))
    );
    assert_eq!(
        http_get(probes, "/healthz/ping").await,
        Some((200, "ok".to_string()))
    );
    assert_eq!(
        http_get(probes, "/healthz/nope").await.map(|r| r.0),
        Some(404)
    );

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for i in 0..3 {
        cms.create(&PostParams::default(), &configmap(&format!("cm-{i}"), "v1"))
            .await
            .unwrap();
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    eventually("secrets copied", Duration::from_secs(20), || async {
        common::all_copied(&secrets, 3, "v1").await
    })
    .await;

    // deleting a child secret re-triggers its owner (owns → EnqueueRequestForOwner)
    secrets
        .delete("cm-1-copy", &Default::default())
        .await
        .unwrap();
    eventually("secret recreated", Duration::from_secs(20), || async {
        secrets.get_opt("cm-1-copy").await.ok().flatten().is_some()
    })
    .await;

    // events were recorded for the config maps
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), "default");
    eventually("events recorded", Duration::from_secs(10), || async {
        events.list(&Default::default()).await.is_ok_and(|l| {
            l.items.iter().any(|e| {
                e.reason.as_deref() == Some("Copied")
                    && e.reporting_controller.as_deref() == Some("kcr-controller/copier")
            })
        })
    })
    .await;

    let (code, text) = http_get(metrics, "/metrics").await.unwrap();
    assert_eq!(code, 200);
    for needle in [
        "controller_runtime_reconcile_total{controller=\"copier\",result=\"success\"}",
        "controller_runtime_reconcile_errors_total{controller=\"copier\"} 0",
        "controller_runtime_terminal_reconcile_errors_total{controller=\"copier\"} 0",
        "controller_runtime_reconcile_panics_total{controller=\"copier\"} 0",
        "controller_runtime_max_concurrent_reconciles{controller=\"copier\"} 1",
        "controller_runtime_active_workers{controller=\"copier\"}",
        "controller_runtime_reconcile_time_seconds_bucket{controller=\"copier\",le=\"0.005\"}",
        "controller_runtime_reconcile_time_seconds_count{controller=\"copier\"}",
        "name=\"copier\"",
        "# HELP controller_runtime_reconcile_total",
    ] {
        assert!(
            text.contains(needle),
            "{needle} missing from /metrics:\n{text}"
        );
    }
    let successes = common::metric_value(
        &text,
        "controller_runtime_reconcile_total{controller=\"copier\",result=\"success\"}",
    );
    assert!(
        successes >= 4.0,
        "at least 4 successful reconciles, got {successes}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("workqueue_adds_total") && l.contains("name=\"copier\"")),
        "workqueue metrics labelled with the controller name"
    );

    stop.cancel();
    run.await.unwrap().unwrap();
    // the servers are gone after shutdown
    assert!(http_get(probes, "/healthz").await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_crd_fails_startup_with_a_clear_error() {
    // A server of its own: the Widget CRD must be missing until this test installs it, and
    // other tests install it on a shared cluster.
    let ns = TestApiServer::start().await.unwrap();
    let mgr = Manager::new(ns.client(), manager_options()).await.unwrap();
    mgr.controller()
        .for_kind::<common::Widget>(WatchOptions::new().namespace(ns.namespace()))
        .cache_sync_timeout(Duration::from_secs(2))
        .complete(kcr_controller::reconciler_fn(
            |_r: kcr_handler::Request, _c: kcr_controller::Context| async {
                Ok::<_, anyhow::Error>(kcr_controller::Action::done())
            },
        ))
        .unwrap();
    let err = tokio::time::timeout(Duration::from_secs(20), mgr.run(CancellationToken::new()))
        .await
        .expect("startup fails within the sync timeout")
        .unwrap_err();
    let ManagerError::Runnable { name, source } = &err else {
        panic!("unexpected error {err}");
    };
    assert_eq!(name, "controller/widget", "name derived from the for kind");
    let inner = source
        .downcast_ref::<ControllerError>()
        .expect("a controller error");
    assert!(matches!(inner, ControllerError::CacheSyncTimeout { .. }));
    let msg = err.to_string();
    for needle in [
        "Widget",
        "widgets.test.kcr.io",
        "404 Not Found",
        "is its CustomResourceDefinition installed?",
    ] {
        assert!(msg.contains(needle), "{needle:?} missing from: {msg}");
    }

    // With the CRD installed, the same controller starts fine.
    ns.install_crd::<common::Widget>().await.unwrap();
    let mgr = Manager::new(ns.client(), manager_options()).await.unwrap();
    mgr.controller()
        .for_kind::<common::Widget>(WatchOptions::new().namespace(ns.namespace()))
        .cache_sync_timeout(Duration::from_secs(10))
        .complete(kcr_controller::reconciler_fn(
            |_r: kcr_handler::Request, _c: kcr_controller::Context| async {
                Ok::<_, anyhow::Error>(kcr_controller::Action::done())
            },
        ))
        .unwrap();
    let (mgr, stop, run) = common::spawn_manager(mgr);
    let probes = mgr.health_probe_addr().unwrap();
    eventually("ready with the CRD", Duration::from_secs(20), || async {
        http_get(probes, "/readyz").await.map(|r| r.0) == Some(200)
    })
    .await;
    stop.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovers_and_converges_after_500s_429s_and_dropped_watches() {
    // A server of its own: it injects faults and compacts the history.
    let server = TestApiServer::start().await.unwrap();
    let client = server.client();
    let mgr = Manager::new(client.clone(), manager_options())
        .await
        .unwrap();
    let reconciler = CopyToSecret::new(&mgr, "faulty", "faulty");
    mgr.controller()
        .for_kind::<ConfigMap>(WatchOptions::new().namespace("default"))
        .owns::<Secret>(WatchOptions::new().namespace("default"))
        .named("faulty")
        .max_concurrent_reconciles(2)
        .rate_limiter(kcr_queue::ItemExponential::new(
            Duration::from_millis(5),
            Duration::from_millis(200),
        ))
        .complete(reconciler.clone())
        .unwrap();
    let faults = server.faults().clone();
    // the initial list fails twice (a paged one, the default, is a LIST; a streaming one a
    // watch), the first watch attempts too
    faults.fail_next("list", "configmaps", 2, 500);
    faults.fail_next("watch", "configmaps", 2, 500);
    faults.fail_next("watch", "secrets", 2, 500);
    let (_mgr, stop, run) = common::spawn_manager(mgr);

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    for i in 0..6 {
        cms.create(&PostParams::default(), &configmap(&format!("cm-{i}"), "v1"))
            .await
            .unwrap();
    }
    eventually("first convergence", Duration::from_secs(30), || async {
        common::all_copied(&secrets, 6, "v1").await
    })
    .await;

    // Now: the reconciler's writes fail with 500s and 429s, watches are dropped and history
    // compacted (410 on resume), while every config map changes.
    faults.fail_next("create", "secrets", 3, 500);
    faults.fail_next("update", "secrets", 4, 500);
    faults.throttle_next("update", "secrets", 3, 1);
    faults.fail_next("get", "secrets", 2, 500);
    for i in 0..6 {
        let mut cm = cms.get(&format!("cm-{i}")).await.unwrap();
        cm.data = Some(BTreeMap::from([("value".to_string(), "v2".to_string())]));
        cms.replace(&format!("cm-{i}"), &PostParams::default(), &cm)
            .await
            .unwrap();
        if i % 2 == 0 {
            faults.close_watches();
        }
    }
    faults.compact_history();
    faults.close_watches();
    secrets
        .delete("cm-5-copy", &Default::default())
        .await
        .unwrap();
    eventually(
        "convergence after faults",
        Duration::from_secs(40),
        || async { common::all_copied(&secrets, 6, "v2").await },
    )
    .await;
    // Most injected faults were hit on the way (how many of the reads and creates fail depends
    // on timing: a reconcile may find the secret already up to date).
    assert!(
        faults.pending_failures() <= 2,
        "{} faults never hit",
        faults.pending_failures()
    );
    assert!(
        reconciler.errors() > 0,
        "the reconciler saw the injected errors"
    );

    stop.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runnables_without_leadership_run_and_their_failure_stops_the_manager() {
    let ns = TestNamespace::new("mgr-runnables").await.unwrap();
    let mgr = Manager::new(ns.client(), manager_options()).await.unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    mgr.add_runnable("fails-later", false, move |_token| async move {
        let _ = rx.await;
        Err("disk full".into())
    })
    .unwrap();
    let mgr = Arc::new(mgr);
    let run = tokio::spawn({
        let mgr = mgr.clone();
        async move { mgr.run(CancellationToken::new()).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!run.is_finished());
    tx.send(()).unwrap();
    let err = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert_eq!(err.to_string(), "runnable fails-later failed: disk full");
    assert!(matches!(
        mgr.run(CancellationToken::new()).await,
        Err(ManagerError::AlreadyStarted)
    ));
    assert!(matches!(
        mgr.add_runnable("late", false, |_t| async { Ok(()) }),
        Err(ManagerError::AlreadyStarted)
    ));
    assert!(matches!(
        mgr.controller()
            .named("late")
            .complete(kcr_controller::reconciler_fn(
                |_r: kcr_handler::Request, _c: kcr_controller::Context| async {
                    Ok::<_, anyhow::Error>(kcr_controller::Action::done())
                },
            )),
        Err(ManagerError::AlreadyStarted)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_is_bounded_by_its_timeout() {
    let ns = TestNamespace::new("mgr-shutdown").await.unwrap();
    let options = manager_options().graceful_shutdown_timeout(Duration::from_millis(300));
    let mgr = Manager::new(ns.client(), options).await.unwrap();
    mgr.add_runnable("stubborn", false, |_token| async move {
        // ignores its token
        std::future::pending::<()>().await;
        Ok(())
    })
    .unwrap();
    mgr.add_runnable("polite", false, |token: CancellationToken| async move {
        token.cancelled().await;
        Ok(())
    })
    .unwrap();
    let (_mgr, stop, run) = common::spawn_manager(mgr);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t0 = std::time::Instant::now();
    stop.cancel();
    let err = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(2),
        "{took:?}"
    );
    match err {
        ManagerError::ShutdownTimeout { pending, .. } => assert_eq!(pending, vec!["stubborn"]),
        other => panic!("unexpected error: {other}"),
    }
}
