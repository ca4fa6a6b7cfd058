//! The `existing` backend against a stand-in cluster: a kcr-envtest server whose kubeconfig is
//! written to a file, as a developer's `~/.kube/config` would point at a kind cluster. The
//! stand-in runs the backend `KCR_ENVTEST_BACKEND` names (in-process by default; `real` makes
//! it kube-apiserver, whose namespace controller deletes asynchronously), and one test always
//! uses a real control plane's own HTTPS endpoint with its client certificate when the
//! binaries are there. Each test has a stand-in of its own and names the kubeconfig file with
//! `kubeconfig_path` (or, for the CLI, `KUBECONFIG` in the child's environment only): no test
//! changes the process's environment.
//!
//! What is checked: the server works in a fresh namespace of its own (the default of its client
//! and kubeconfig, created on the cluster, deleted on drop), faults, counters, pauses, closed
//! watches and compactions act through the proxy in front of the cluster, the proxy admits
//! only its own clients, and what cannot exist there is a typed error.

use std::path::PathBuf;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kcr_envtest::{Backend, EnvtestError, TestApiServer, eventually};
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

mod stand_in;
use stand_in::stand_in;

/// A server on the existing backend whose cluster is the one of `kubeconfig`.
async fn existing(kubeconfig: &PathBuf) -> TestApiServer {
    TestApiServer::builder()
        .backend(Backend::Existing)
        .kubeconfig_path(kubeconfig)
        .start()
        .await
        .unwrap()
}

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

/// The `kcr-test-*` namespaces on `cluster`.
async fn test_namespaces(cluster: &TestApiServer) -> Vec<String> {
    Api::<Namespace>::all(cluster.client())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .filter(|n| n.starts_with("kcr-test-"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_on_an_existing_cluster_works_in_a_namespace_of_its_own_and_removes_it() {
    let (cluster, _dir, kubeconfig) = stand_in().await;
    let server = existing(&kubeconfig).await;
    assert_eq!(server.backend(), Backend::Existing);
    let ns = server.namespace().to_string();
    let random = ns.strip_prefix("kcr-test-").expect("a kcr-test- namespace");
    assert_eq!(random.len(), 8, "{ns}");
    assert_eq!(server.client().default_namespace(), ns);
    let context = server.kubeconfig().contexts[0].context.clone().unwrap();
    assert_eq!(context.namespace.as_deref(), Some(ns.as_str()));
    assert!(server.has_asynchronous_garbage_collection());
    assert_eq!(server.real_dir(), None);

    // The namespace exists on the cluster, labelled as this crate's.
    let on_cluster = Api::<Namespace>::all(cluster.client())
        .get(&ns)
        .await
        .unwrap();
    assert_eq!(
        on_cluster.metadata.labels.unwrap()["app.kubernetes.io/managed-by"],
        "kcr-envtest"
    );
    // A second server on the same cluster gets another one.
    let other = existing(&kubeconfig).await;
    assert_ne!(other.namespace(), ns);

    // Objects written through the default namespace land in it, on the cluster.
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.create(&PostParams::default(), &config_map("written"))
        .await
        .unwrap();
    let in_cluster: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    assert!(in_cluster.get_opt("written").await.unwrap().is_some());
    // So do the helpers' namespaced objects that name no namespace.
    let seeded = server
        .upsert(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "seeded"}}))
        .await
        .unwrap();
    assert_eq!(seeded["metadata"]["namespace"], ns.as_str());
    assert!(in_cluster.get_opt("seeded").await.unwrap().is_some());
    let seeded_rv: u64 = seeded["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let rv = server.resource_version().await.unwrap();
    assert!(rv >= seeded_rv, "{rv} < {seeded_rv}");
    assert!(rv <= cluster.resource_version().await.unwrap(), "{rv}");

    // The kubeconfig (YAML) reaches the same namespace through the proxy.
    let yaml: Kubeconfig = serde_saphyr::from_str(&server.kubeconfig_yaml()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(yaml, &KubeConfigOptions::default())
        .await
        .unwrap();
    assert_eq!(config.default_namespace, ns);
    let from_yaml: Api<ConfigMap> =
        Api::default_namespaced(kube::Client::try_from(config).unwrap());
    assert!(from_yaml.get_opt("written").await.unwrap().is_some());

    // Dropping the server deletes its namespace (and, with it, what is in it); the other
    // server's namespace stays.
    drop(server);
    eventually(
        "the test namespace is deleted",
        Duration::from_secs(30),
        || async {
            Api::<Namespace>::all(cluster.client())
                .get_opt(&ns)
                .await
                .is_ok_and(|n| n.is_none())
        },
    )
    .await;
    assert!(in_cluster.get_opt("written").await.unwrap().is_none());
    assert_eq!(
        test_namespaces(&cluster).await,
        [other.namespace().to_string()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_counters_pauses_and_watches_act_through_the_proxy() {
    let (cluster, _dir, kubeconfig) = stand_in().await;
    let server = existing(&kubeconfig).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.create(&PostParams::default(), &config_map("a"))
        .await
        .unwrap();
    server.faults().reset_counts();
    cluster.faults().reset_counts();

    // An injected fault is answered by the proxy and never reaches the cluster.
    server.faults().fail_next("get", "configmaps", 1, 500);
    let err = cms.get("a").await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 500),
        "{err}"
    );
    assert!(cms.get("a").await.is_ok());
    assert_eq!(server.faults().request_count("get", "configmaps"), 2);
    assert_eq!(cluster.faults().request_count("get", "configmaps"), 1);

    // A paused proxy holds requests until resumed.
    server.faults().pause();
    let held = tokio::spawn({
        let cms = cms.clone();
        async move { cms.get("a").await.map(|_| ()) }
    });
    eventually("the request is held", Duration::from_secs(10), || async {
        server.faults().held_requests() == 1
    })
    .await;
    assert!(!held.is_finished());
    server.faults().resume();
    tokio::time::timeout(Duration::from_secs(10), held)
        .await
        .expect("the held request is answered after resume")
        .unwrap()
        .unwrap();

    // A watch streams events through the proxy, and close_watches ends it.
    let rv = cms
        .list_metadata(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut events = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    cms.create(&PostParams::default(), &config_map("watched"))
        .await
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(10), events.try_next())
        .await
        .expect("an event within 10 s")
        .unwrap();
    match event {
        Some(WatchEvent::Added(cm)) => assert_eq!(cm.metadata.name.as_deref(), Some("watched")),
        other => panic!("expected ADDED watched, got {other:?}"),
    }
    server.faults().close_watches();
    let end = tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("the watch ends within 10 s");
    assert!(end.is_none(), "{end:?}");

    // After a compaction a watch from a resourceVersion handed out before is expired (the
    // proxy's Lease marking the boundary lives in the test's namespace).
    server.faults().compact_history();
    let mut events = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    let event = tokio::time::timeout(Duration::from_secs(10), events.try_next())
        .await
        .expect("an event within 10 s")
        .unwrap();
    assert!(
        matches!(event, Some(WatchEvent::Error(ref e)) if e.code == 410),
        "{event:?}"
    );
    let lease = cluster
        .client()
        .request_text(
            http::Request::get(format!(
                "/apis/coordination.k8s.io/v1/namespaces/{}/leases/kcr-envtest-compaction",
                server.namespace()
            ))
            .body(Vec::new())
            .unwrap(),
        )
        .await;
    assert!(
        lease.is_ok(),
        "the compaction Lease is in the test namespace: {lease:?}"
    );
}

/// A client of the proxy's endpoint from the server's kubeconfig, with `token` instead of its.
async fn client_with_token(server: &TestApiServer, token: Option<&str>) -> kube::Client {
    let mut kubeconfig = server.kubeconfig();
    kubeconfig.auth_infos[0].auth_info.as_mut().unwrap().token =
        token.map(|t| t.to_string().into());
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_lends_the_kubeconfigs_credentials_only_to_the_servers_own_clients() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (cluster, _dir, kubeconfig) = stand_in().await;
    let server = existing(&kubeconfig).await;
    assert!(
        server.url().starts_with("https://127.0.0.1:"),
        "{}",
        server.url()
    );
    cluster.faults().reset_counts();
    // Without the token, or with another one: 401 from the proxy, nothing forwarded.
    for token in [None, Some("not-the-token")] {
        let cms: Api<ConfigMap> = Api::default_namespaced(client_with_token(&server, token).await);
        let err = cms.list(&ListParams::default()).await.unwrap_err();
        assert!(
            matches!(err, kube::Error::Api(ref s) if s.code == 401),
            "{token:?}: {err}"
        );
        assert!(err.to_string().contains("bearer token"), "{err}");
    }
    // Plain HTTP gets no answer at all (the endpoint speaks TLS).
    let mut tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    tcp.write_all(b"GET /api HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = tcp.read_to_end(&mut answer).await;
    assert!(!answer.starts_with(b"HTTP/1.1 200"), "{answer:?}");
    assert_eq!(cluster.faults().request_count("*", "*"), 0);
    assert_eq!(server.faults().request_count("*", "*"), 0);
    // The server's client carries the token.
    Api::<ConfigMap>::default_namespaced(server.client())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(cluster.faults().request_count("list", "configmaps"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_an_existing_cluster_cannot_offer_is_a_typed_error() {
    let (cluster, dir, kubeconfig) = stand_in().await;
    let unsupported = |err: EnvtestError, expected: &str| match err {
        EnvtestError::Unsupported {
            helper, backend, ..
        } => {
            assert_eq!(helper, expected);
            assert_eq!(backend, Backend::Existing);
        }
        other => panic!("{expected}: expected Unsupported, got {other}"),
    };
    // Options that do not exist there fail before a namespace is created.
    let builder = || {
        TestApiServer::builder()
            .backend(Backend::Existing)
            .kubeconfig_path(&kubeconfig)
    };
    let err = builder().nodes(1).start().await.unwrap_err();
    unsupported(err, "TestApiServerBuilder::nodes");
    let err = builder().history_window(10).start().await.unwrap_err();
    unsupported(err, "TestApiServerBuilder::history_window");
    let err = builder()
        .bookmark_interval(Duration::from_millis(5))
        .start()
        .await
        .unwrap_err();
    unsupported(err, "TestApiServerBuilder::bookmark_interval");
    let err = builder()
        .admission_control_config_file(dir.path().join("admission.yaml"))
        .start()
        .await
        .unwrap_err();
    unsupported(err, "TestApiServerBuilder::admission_control_config_file");
    assert!(test_namespaces(&cluster).await.is_empty());

    let server = existing(&kubeconfig).await;
    unsupported(
        server.add_nodes(1).await.unwrap_err(),
        "TestApiServer::add_nodes",
    );
    unsupported(
        server.direct_kubeconfig().unwrap_err(),
        "TestApiServer::direct_kubeconfig",
    );
    unsupported(
        server.add_user("alice", &[]).unwrap_err(),
        "TestApiServer::add_user",
    );
    let nodes = Api::<k8s_openapi::api::core::v1::Node>::all(cluster.client())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(nodes.items.is_empty(), "no Node was created");

    // The kubeconfig option belongs to the existing backend.
    let err = TestApiServer::builder()
        .backend(Backend::InProcess)
        .kubeconfig_path(&kubeconfig)
        .start()
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            EnvtestError::Unsupported {
                helper: "TestApiServerBuilder::kubeconfig_path",
                backend: Backend::InProcess,
                ..
            }
        ),
        "{err}"
    );
    // A kubeconfig that is not there is an error naming it and what to do.
    let missing = dir.path().join("missing-kubeconfig");
    let err = TestApiServer::builder()
        .backend(Backend::Existing)
        .kubeconfig_path(&missing)
        .start()
        .await
        .unwrap_err();
    assert!(matches!(err, EnvtestError::Kubeconfig { .. }), "{err}");
    assert!(err.to_string().contains("missing-kubeconfig"), "{err}");
    // A cluster that does not answer: the error says which namespace could not be created.
    let gone = dir.path().join("gone");
    std::fs::write(&gone, kcr_envtest::kubeconfig_yaml("http://127.0.0.1:9")).unwrap();
    let err = TestApiServer::builder()
        .backend(Backend::Existing)
        .kubeconfig_path(&gone)
        .start()
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("creating the test namespace kcr-test-"),
        "{err}"
    );
}

/// A cluster as kind or a cloud gives it: kube-apiserver over HTTPS with its own CA and a client
/// certificate, garbage collection and namespace deletion by kube-controller-manager. The
/// proxy's upstream client speaks TLS and authenticates as the kubeconfig says, watches stream
/// through, and the namespace goes when the server is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_cluster_over_https_with_a_client_certificate() {
    if kcr_envtest::binaries_for_test("a_real_cluster_over_https_with_a_client_certificate")
        .expect("KCR_REQUIRE_BINARIES=1 asks for the control plane")
        .is_none()
    {
        return;
    }
    let cluster = TestApiServer::builder()
        .backend(Backend::Real)
        .start()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let direct = cluster.direct_kubeconfig().unwrap();
    let server_url = direct.clusters[0].cluster.as_ref().unwrap().server.clone();
    assert!(server_url.unwrap().starts_with("https://"));
    std::fs::write(&kubeconfig, serde_saphyr::to_string(&direct).unwrap()).unwrap();

    let server = existing(&kubeconfig).await;
    let ns = server.namespace().to_string();
    let in_cluster: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let rv = cms
        .list_metadata(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut events = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    cms.create(&PostParams::default(), &config_map("over-tls"))
        .await
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(10), events.try_next())
        .await
        .expect("an event within 10 s")
        .unwrap();
    assert!(
        matches!(event, Some(WatchEvent::Added(ref cm)) if cm.metadata.name.as_deref() == Some("over-tls")),
        "{event:?}"
    );
    assert!(in_cluster.get_opt("over-tls").await.unwrap().is_some());
    // kube-apiserver's own answers pass unchanged (a 404 with its Status), injected ones are
    // the proxy's.
    let err = cms.get("missing").await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404 && s.reason == "NotFound"),
        "{err}"
    );
    server.faults().fail_next("get", "configmaps", 1, 500);
    let err = cms.get("over-tls").await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 500),
        "{err}"
    );
    assert_eq!(server.faults().request_count("get", "configmaps"), 2);
    // kube-apiserver's resourceVersions are etcd revisions: a compaction expires the old ones.
    server.faults().compact_history();
    let mut events = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    let event = tokio::time::timeout(Duration::from_secs(10), events.try_next())
        .await
        .expect("an event within 10 s")
        .unwrap();
    assert!(
        matches!(event, Some(WatchEvent::Error(ref e)) if e.code == 410),
        "{event:?}"
    );

    drop(server);
    // kube-controller-manager's namespace controller empties the namespace, then it is gone.
    eventually(
        "the test namespace is deleted",
        Duration::from_secs(60),
        || async {
            Api::<Namespace>::all(cluster.client())
                .get_opt(&ns)
                .await
                .is_ok_and(|n| n.is_none())
        },
    )
    .await;
}
