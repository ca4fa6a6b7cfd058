//! The backend choice itself: options that do not exist on a backend are typed errors, and a
//! real control plane dies with its test, also when the test panics. (Bad backend names and
//! missing binaries, and a test process killed with SIGKILL, are tested through the binary in
//! `envtest/cli/tests/cli.rs`.)

use kcr_envtest::{Backend, EnvtestError, TestApiServer};

/// Processes whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
        .filter(|cmdline| cmdline.contains(needle))
        .collect()
}

#[tokio::test]
async fn options_of_one_backend_are_typed_errors_on_the_other() {
    let err = TestApiServer::builder()
        .backend(Backend::Real)
        .history_window(10)
        .start()
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            EnvtestError::Unsupported {
                helper: "TestApiServerBuilder::history_window",
                backend: Backend::Real,
                ..
            }
        ),
        "{err}"
    );
    let err = TestApiServer::builder()
        .backend(Backend::Real)
        .bookmark_interval(std::time::Duration::from_millis(5))
        .start()
        .await
        .unwrap_err();
    assert!(matches!(err, EnvtestError::Unsupported { .. }), "{err}");
    // kube-apiserver's admission configuration exists only where a kube-apiserver is started.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("admission.yaml");
    std::fs::write(&config, "apiVersion: apiserver.config.k8s.io/v1\n").unwrap();
    let err = TestApiServer::builder()
        .backend(Backend::InProcess)
        .admission_control_config_file(&config)
        .start()
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            EnvtestError::Unsupported {
                helper: "TestApiServerBuilder::admission_control_config_file",
                backend: Backend::InProcess,
                ..
            }
        ),
        "{err}"
    );
    // So are kube-apiserver's and etcd's own flags.
    for builder in [
        TestApiServer::builder().apiserver_flag("--feature-gates=SomeGate=true"),
        TestApiServer::builder().etcd_flag("--quota-backend-bytes=1"),
    ] {
        let err = builder
            .backend(Backend::InProcess)
            .start()
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                EnvtestError::Unsupported {
                    helper: "TestApiServerBuilder::apiserver_flag and etcd_flag",
                    backend: Backend::InProcess,
                    ..
                }
            ),
            "{err}"
        );
    }
    let server = TestApiServer::builder()
        .backend(Backend::InProcess)
        .start()
        .await
        .unwrap();
    let err = server.direct_kubeconfig().unwrap_err();
    assert!(
        err.to_string()
            .contains("not supported on the in-process backend"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_test_takes_its_control_plane_with_it() {
    if kcr_envtest::binaries_for_test("a_panicking_test_takes_its_control_plane_with_it")
        .expect("KCR_REQUIRE_BINARIES=1 asks for the control plane")
        .is_none()
    {
        return;
    }
    let (dir_tx, dir_rx) = tokio::sync::oneshot::channel();
    let test = tokio::spawn(async move {
        let server = TestApiServer::builder()
            .backend(Backend::Real)
            .start()
            .await
            .expect("a real control plane");
        let dir = server
            .real_dir()
            .expect("a temporary directory")
            .to_path_buf();
        let running = processes_mentioning(&dir.display().to_string());
        dir_tx.send((dir, running)).unwrap();
        panic!("the test fails while its server runs");
    });
    let err = test.await.unwrap_err();
    assert!(err.is_panic());
    let (dir, running) = dir_rx.await.unwrap();
    assert!(
        running.len() >= 2,
        "etcd and kube-apiserver ran from {}: {running:?}",
        dir.display()
    );
    let left = processes_mentioning(&dir.display().to_string());
    assert!(left.is_empty(), "still running after the panic: {left:?}");
    assert!(!dir.exists(), "{} was not removed", dir.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_backend_collects_garbage_and_faults_go_through_its_proxy() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, DeleteParams, PostParams};
    if kcr_envtest::binaries_for_test(
        "the_real_backend_collects_garbage_and_faults_go_through_its_proxy",
    )
    .expect("KCR_REQUIRE_BINARIES=1 asks for the control plane")
    .is_none()
    {
        return;
    }
    let server = TestApiServer::builder()
        .backend(Backend::Real)
        .start()
        .await
        .unwrap();
    assert_eq!(server.backend(), Backend::Real);
    assert!(server.has_asynchronous_garbage_collection());
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let owner: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "owner"}
    }))
    .unwrap();
    let owner = cms.create(&PostParams::default(), &owner).await.unwrap();
    let child: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "child", "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
            "uid": owner.metadata.uid.clone().unwrap(),
        }]}
    }))
    .unwrap();
    cms.create(&PostParams::default(), &child).await.unwrap();
    // An injected fault is answered by the proxy, counted, and does not reach the server.
    server.faults().fail_next("delete", "configmaps", 1, 500);
    let err = cms
        .delete("owner", &DeleteParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 500),
        "{err}"
    );
    assert!(cms.get_opt("owner").await.unwrap().is_some());
    cms.delete("owner", &DeleteParams::default()).await.unwrap();
    assert_eq!(server.faults().request_count("delete", "configmaps"), 2);
    // kube-controller-manager's garbage collector removes the child.
    kcr_envtest::eventually(
        "the garbage collector deletes the child",
        std::time::Duration::from_secs(60),
        || async { cms.get_opt("child").await.is_ok_and(|c| c.is_none()) },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_is_enforced_for_other_users() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    use kube::api::{Api, PostParams};
    let in_process = TestApiServer::builder()
        .backend(Backend::InProcess)
        .start()
        .await
        .unwrap();
    let Err(err) = in_process.client_as("alice", &[]) else {
        panic!("client_as worked in process");
    };
    assert!(matches!(err, EnvtestError::Unsupported { .. }), "{err}");
    if kcr_envtest::binaries_for_test("rbac_is_enforced_for_other_users")
        .expect("KCR_REQUIRE_BINARIES=1 asks for the control plane")
        .is_none()
    {
        return;
    }
    let server = TestApiServer::builder()
        .backend(Backend::Real)
        .start()
        .await
        .unwrap();
    let alice = server.client_as("alice", &["team-a"]).unwrap();
    let as_alice: Api<ConfigMap> = Api::namespaced(alice, "default");
    let err = as_alice.list(&Default::default()).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 403),
        "{err}"
    );
    assert!(err.to_string().contains("\"alice\""), "{err}");

    let role: Role = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "cm-reader", "namespace": "default"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
    }))
    .unwrap();
    Api::<Role>::namespaced(server.client(), "default")
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "team-a-reads", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "team-a"}],
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(server.client(), "default")
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    // RBAC changes take effect asynchronously (the authorizer's informer).
    kcr_envtest::eventually(
        "alice may list configmaps through her group",
        std::time::Duration::from_secs(30),
        || async {
            as_alice
                .list(&Default::default())
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        },
    )
    .await;
    let cm: ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "x"}})).unwrap();
    let err = as_alice
        .create(&PostParams::default(), &cm)
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 403),
        "{err}"
    );
}

/// A test's kube-apiserver flags reach kube-apiserver, after kcr-envtest's own (the last one
/// wins): with another service IP range, the `kubernetes` Service gets that range's first
/// address. A flag that would unwire the control plane is refused before anything starts, and
/// an etcd flag etcd does not know fails the start with etcd's own complaint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_apiserver_and_etcd_take_the_tests_flags() {
    use k8s_openapi::api::core::v1::Service;
    use kube::api::Api;
    if kcr_envtest::binaries_for_test("kube_apiserver_and_etcd_take_the_tests_flags")
        .expect("KCR_REQUIRE_BINARIES=1 asks for the control plane")
        .is_none()
    {
        return;
    }
    let server = TestApiServer::builder()
        .backend(Backend::Real)
        .apiserver_flag("--service-cluster-ip-range=10.96.0.0/24")
        .start()
        .await
        .unwrap();
    let services: Api<Service> = Api::namespaced(server.client(), "default");
    kcr_envtest::eventually(
        "the kubernetes Service in the test's range",
        std::time::Duration::from_secs(30),
        || async {
            let ip = services
                .get_opt("kubernetes")
                .await
                .ok()
                .flatten()
                .and_then(|s| s.spec)
                .and_then(|s| s.cluster_ip);
            match ip.as_deref() {
                Some("10.96.0.1") => Ok(()),
                other => Err(format!("clusterIP {other:?}")),
            }
        },
    )
    .await;
    drop(server);

    let err = TestApiServer::builder()
        .backend(Backend::Real)
        .apiserver_flag("--secure-port=1")
        .start()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, EnvtestError::Prepare { reason, .. } if reason.contains("kcr-envtest sets --secure-port itself")),
        "{err}"
    );

    let err = TestApiServer::builder()
        .backend(Backend::Real)
        .etcd_flag("--no-such-etcd-flag=1")
        .start()
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("etcd"), "{err}");
    assert!(err.contains("no-such-etcd-flag"), "{err}");
}
