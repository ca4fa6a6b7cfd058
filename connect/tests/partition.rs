//! A silent network partition (kcr-envtest's blackhole: every connection frozen, nothing
//! closed) against a client from `kcr_connect::client`, on either backend: requests and watches
//! fail within their bounds during it and recover on new connections after it. Each test
//! starts a server of its own, since a blackhole freezes every client of a server.
//!
//! The control test shows what the fault does to a client without these bounds: kube's
//! default client waits on its frozen watch long after the heal.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_connect::{ConnectionOptions, HttpVersion, Timeout, TimeoutKind};
use kcr_envtest::{Backend, TestApiServer};
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use serde_json::json;
use tokio::sync::Mutex;
use tokio::time::Instant;

/// The process-wide recorder the metrics of these tests go to (each test reads its own server's
/// `host` label).
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

/// Every counter seen so far: a snapshot takes the counts since the last one, and the tests of
/// this binary take snapshots concurrently, so they add up here.
fn counted() -> std::sync::MutexGuard<'static, Vec<(metrics::Key, u64)>> {
    static COUNTED: OnceLock<std::sync::Mutex<Vec<(metrics::Key, u64)>>> = OnceLock::new();
    let mut counted = COUNTED.get_or_init(Default::default).lock().unwrap();
    for (key, _, _, value) in snapshotter().snapshot().into_vec() {
        if let DebugValue::Counter(n) = value {
            counted.push((key.key().clone(), n));
        }
    }
    counted
}

/// The sum of counter `name` for `host`, with `label` = `value` if given.
fn counter(name: &str, host: &str, label: Option<(&str, &str)>) -> u64 {
    counted()
        .iter()
        .filter(|(key, _)| key.name() == name)
        .filter(|(key, _)| {
            let labels: Vec<_> = key.labels().collect();
            labels
                .iter()
                .any(|l| l.key() == "host" && l.value() == host)
                && label.is_none_or(|(k, v)| labels.iter().any(|l| l.key() == k && l.value() == v))
        })
        .map(|(_, n)| n)
        .sum()
}

/// A server of this test's own, its in-process bookmarks every 200 ms (kube-apiserver's
/// every minute are fixed: there a watch's idle bound below cuts quiet watches too, which
/// then resume, and the assertions hold the same).
async fn own_server() -> TestApiServer {
    snapshotter();
    let mut builder = TestApiServer::builder();
    if Backend::from_env().unwrap() == Backend::InProcess {
        builder = builder.bookmark_interval(Duration::from_millis(200));
    }
    builder.start().await.unwrap()
}

async fn config_of(server: &TestApiServer) -> kube::Config {
    kube::Config::from_custom_kubeconfig(server.kubeconfig(), &Default::default())
        .await
        .unwrap()
}

/// Bounds short enough for a test: a partition of a few seconds outlasts them all.
fn short() -> ConnectionOptions {
    ConnectionOptions::default()
        .connect_timeout(Duration::from_millis(500))
        .request_timeout(Duration::from_millis(800))
        .watch_start_timeout(Duration::from_millis(800))
        .watch_idle_timeout(Duration::from_millis(1200))
        .pool_idle_timeout(Duration::from_millis(600))
        .pings(Duration::from_millis(300), Duration::from_millis(300))
}

fn configmap(name: &str, value: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": value}})
}

/// The value of `name`'s `data.v` as a watcher stream reports it: a map kept from its events.
type Seen = Arc<Mutex<std::collections::BTreeMap<String, String>>>;

fn follow(api: Api<ConfigMap>) -> (Seen, tokio::task::JoinHandle<()>) {
    let seen: Seen = Arc::default();
    let task = {
        let seen = seen.clone();
        tokio::spawn(async move {
            // kube-runtime's watcher asks for bookmarks; a short backoff, as a cache's would be
            // in a test.
            let stream = watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            let mut stream = stream;
            while let Some(event) = stream.next().await {
                let Ok(event) = event else { continue };
                for cm in match event {
                    watcher::Event::Apply(cm) | watcher::Event::InitApply(cm) => vec![cm],
                    _ => vec![],
                } {
                    let name = cm.metadata.name.clone().unwrap_or_default();
                    let value = cm
                        .data
                        .as_ref()
                        .and_then(|d| d.get("v"))
                        .cloned()
                        .unwrap_or_default();
                    seen.lock().await.insert(name, value);
                }
            }
        })
    };
    (seen, task)
}

/// Waits until `seen` shows `name` = `value`, up to `bound`; returns how long it took.
async fn wait_seen(seen: &Seen, name: &str, value: &str, bound: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < bound {
        if seen.lock().await.get(name).map(String::as_str) == Some(value) {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_on_a_frozen_connection_fails_within_its_bound_then_recovers() {
    let server = own_server().await;
    let config = config_of(&server).await;
    let host = kcr_connect::host_of(&config);
    let options = short();
    let client = kcr_connect::client(config, options.clone()).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, server.namespace());
    api.list(&Default::default()).await.unwrap();

    server.faults().blackhole();
    let started = Instant::now();
    let error = api.get("anything").await.unwrap_err();
    let took = started.elapsed();
    let timeout = Timeout::find(&error).unwrap_or_else(|| panic!("not a timeout: {error:?}"));
    assert_eq!(timeout.kind, TimeoutKind::Response, "{error}");
    assert!(
        timeout.what.starts_with("GET /api/v1/namespaces/"),
        "{timeout:?}"
    );
    assert!(
        took >= options.request_timeout && took < options.request_timeout * 3,
        "gave up after {took:?}"
    );
    assert!(
        error.to_string().contains("connection is taken for dead"),
        "{error}"
    );
    assert_eq!(
        counter(
            kcr_connect::metrics::REQUEST_TIMEOUTS_TOTAL,
            &host,
            Some(("what", "response"))
        ),
        1
    );

    server.faults().heal();
    // The frozen connection went with its request; the next one is new, and answered.
    let started = Instant::now();
    api.list(&Default::default()).await.unwrap();
    assert!(
        started.elapsed() < options.request_timeout,
        "{:?}",
        started.elapsed()
    );
    assert!(server.faults().frozen_connections() >= 1);
    // Dropped by hyper once its request was given up on: counted as dead.
    assert!(
        counter(kcr_connect::metrics::DEAD_CONNECTIONS_TOTAL, &host, None) >= 1,
        "the frozen connection is counted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_notices_the_partition_and_sees_every_change_after_the_heal() {
    let server = own_server().await;
    let config = config_of(&server).await;
    let host = kcr_connect::host_of(&config);
    let options = short();
    let client = kcr_connect::client(config, options.clone()).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, server.namespace());
    server.upsert(configmap("before", "0")).await.unwrap();
    let (seen, task) = follow(api);
    assert!(
        wait_seen(&seen, "before", "0", Duration::from_secs(10))
            .await
            .is_some()
    );

    server.faults().blackhole();
    server.upsert(configmap("during", "1")).await.unwrap();
    // Longer than every bound: the watch and whatever it tries meanwhile die.
    let partition = options.watch_idle_timeout * 3;
    tokio::time::sleep(partition).await;
    assert!(
        !seen.lock().await.contains_key("during"),
        "nothing crosses the partition"
    );
    server.faults().heal();
    server.upsert(configmap("after", "2")).await.unwrap();

    // Within the bound after the heal: an attempt made during the partition is given up within
    // its watch_start_timeout, the watcher's backoff (800 ms, doubling, jittered) follows.
    let bound = options.watch_idle_timeout + options.watch_start_timeout + Duration::from_secs(7);
    let during = wait_seen(&seen, "during", "1", bound).await;
    let after = wait_seen(&seen, "after", "2", bound).await;
    task.abort();
    assert!(
        during.is_some() && after.is_some(),
        "after the heal the watch saw during={during:?} after={after:?}"
    );
    assert!(
        counter(kcr_connect::metrics::REQUEST_TIMEOUTS_TOTAL, &host, None) >= 1,
        "the dead watch is counted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_bounds_a_frozen_watch_waits_past_the_heal() {
    // The control: kube's default client (no read timeout) and kube-runtime's watcher (its
    // idle timeout is 290 s plus a margin) against the same fault.
    let server = own_server().await;
    // kube's own stack (kcr-envtest's server.client() is a kcr-connect client).
    let plain = kube::Client::try_from(config_of(&server).await).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(plain, server.namespace());
    server.upsert(configmap("before", "0")).await.unwrap();
    let (seen, task) = follow(api);
    assert!(
        wait_seen(&seen, "before", "0", Duration::from_secs(10))
            .await
            .is_some()
    );
    server.faults().blackhole();
    server.upsert(configmap("during", "1")).await.unwrap();
    tokio::time::sleep(short().watch_idle_timeout * 3).await;
    server.faults().heal();
    // The bounded client saw this within its bound after the heal (the test above); this
    // one has not, in twice that time.
    let unbounded = wait_seen(&seen, "during", "1", Duration::from_secs(8)).await;
    task.abort();
    assert_eq!(
        unbounded, None,
        "the plain client's watch is frozen for good"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_pings_close_a_frozen_connection_before_any_request_deadline() {
    let server = own_server().await;
    let config = config_of(&server).await;
    let host = kcr_connect::host_of(&config);
    // h2c with prior knowledge (kcr-envtest and its proxy serve it); a request deadline far
    // beyond the PINGs', so that only the PINGs can end the wait.
    let options = short()
        .http_version(HttpVersion::Http2Only)
        .request_timeout(Duration::from_secs(30));
    let client = kcr_connect::client(config, options.clone()).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, server.namespace());
    api.list(&Default::default()).await.unwrap();

    server.faults().blackhole();
    let started = Instant::now();
    let error = api.get("anything").await.unwrap_err();
    let took = started.elapsed();
    assert!(
        Timeout::find(&error).is_none(),
        "the PINGs ended it, not the deadline: {error}"
    );
    assert!(
        took < Duration::from_secs(5),
        "a dead HTTP/2 connection is noticed within its PING interval and timeout: {took:?}"
    );
    // The connection is dropped: counted once.
    kcr_envtest::eventually(
        "the frozen HTTP/2 connection counted as dead",
        Duration::from_secs(5),
        || async { counter(kcr_connect::metrics::DEAD_CONNECTIONS_TOTAL, &host, None) >= 1 },
    )
    .await;

    server.faults().heal();
    let started = Instant::now();
    api.list(&Default::default()).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_tls_handshake_that_never_finishes_fails_within_the_connect_bound() {
    // A listener that accepts and never says a word: TCP connects, the TLS handshake hangs.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let mut config = kube::Config::new(format!("https://{addr}").parse().unwrap());
    config.accept_invalid_certs = true;
    let options = ConnectionOptions::default().connect_timeout(Duration::from_millis(300));
    let client = kcr_connect::client(config, options).unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let started = Instant::now();
    let error = api.list(&Default::default()).await.unwrap_err();
    let timeout = Timeout::find(&error).unwrap_or_else(|| panic!("not a timeout: {error:?}"));
    assert_eq!(timeout.kind, TimeoutKind::Connect);
    assert!(started.elapsed() < Duration::from_secs(5));
    held.abort();
}

#[tokio::test]
async fn a_proxy_in_the_config_is_a_clear_error() {
    let mut config = kube::Config::new("https://127.0.0.1:6443".parse().unwrap());
    config.proxy_url = Some("http://proxy.example:3128".parse().unwrap());
    let Err(error) = kcr_connect::client(config, ConnectionOptions::default()) else {
        panic!("a proxy is refused");
    };
    assert!(
        error
            .to_string()
            .contains("proxy http://proxy.example:3128/"),
        "{error}"
    );
    assert!(error.to_string().contains("kcr_connect::bound"), "{error}");
}

#[tokio::test]
async fn zero_bounds_are_refused() {
    let config = kube::Config::new("https://127.0.0.1:6443".parse().unwrap());
    let options = ConnectionOptions::default().watch_idle_timeout(Duration::ZERO);
    let Err(error) = kcr_connect::client(config, options) else {
        panic!("a zero bound is refused");
    };
    assert!(
        error
            .to_string()
            .contains("watch_idle_timeout must be positive"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_apiserver_over_tls_is_spoken_to_in_http2() {
    // The real backend's kube-apiserver, straight (its TLS endpoint, past the fault proxy):
    // ALPN offers h2, and the client takes it, PINGs and all. The in-process server has no
    // TLS endpoint (a typed Unsupported error).
    let server = own_server().await;
    let kubeconfig = match server.direct_kubeconfig() {
        Ok(kubeconfig) => kubeconfig,
        Err(kcr_envtest::EnvtestError::Unsupported { .. }) => {
            assert_ne!(server.backend(), Backend::Real);
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = kcr_connect::client(config, ConnectionOptions::default()).unwrap();
    let response = client
        .send(
            http::Request::get("/api/v1/namespaces/default/configmaps")
                .body(kube::client::Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.version(), http::Version::HTTP_2);
}
