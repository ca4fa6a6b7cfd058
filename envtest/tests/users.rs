//! `TestApiServer::add_user` on the real backend: a user with a client certificate of its own
//! is authenticated as exactly that name and those groups, and only RBAC decides what it may
//! do; its requests go straight to kube-apiserver, not through the fault proxy. In process it
//! is a typed error (nothing is authenticated there).

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kcr_envtest::{Backend, EnvtestError, TestApiServer};
use kube::api::{Api, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

/// Who the API server says `client` is: user name and groups (sorted).
async fn whoami(client: kube::Client) -> (String, Vec<String>) {
    let review = Api::<SelfSubjectReview>::all(client)
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    let user = review.status.unwrap().user_info.unwrap();
    let mut groups = user.groups.unwrap_or_default();
    groups.sort();
    (user.username.unwrap_or_default(), groups)
}

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
}

#[tokio::test]
async fn in_process_there_are_no_users_to_add() {
    let server = TestApiServer::builder()
        .backend(Backend::InProcess)
        .start()
        .await
        .unwrap();
    let err = server.add_user("alice", &["team-a"]).unwrap_err();
    assert!(
        matches!(
            err,
            EnvtestError::Unsupported {
                helper: "TestApiServer::add_user",
                backend: Backend::InProcess,
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_with_its_own_certificate_is_authenticated_and_authorized_by_rbac() {
    if kcr_envtest::binaries_for_test(
        "a_user_with_its_own_certificate_is_authenticated_and_authorized_by_rbac",
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
    let err = server.add_user("", &[]).unwrap_err();
    assert!(err.to_string().contains("user name is empty"), "{err}");

    let alice = server.add_user("alice", &["team-a", "readers"]).unwrap();
    assert_eq!(alice.name, "alice");
    assert_eq!(alice.groups, ["team-a", "readers"]);
    // Authenticated as exactly that name and those groups (and system:authenticated, which
    // the server adds to every authenticated user).
    assert_eq!(
        whoami(alice.client.clone()).await,
        (
            "alice".to_string(),
            vec![
                "readers".to_string(),
                "system:authenticated".to_string(),
                "team-a".to_string()
            ]
        )
    );

    // No RBAC: 403 Forbidden naming the user.
    let as_alice: Api<ConfigMap> = Api::namespaced(alice.client.clone(), "default");
    let err = as_alice.list(&ListParams::default()).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 403),
        "{err}"
    );
    assert!(err.to_string().contains("\"alice\""), "{err}");

    // A RoleBinding for the user grants list (RBAC changes apply asynchronously).
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "cm-reader", "namespace": "default"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
    }))
    .unwrap();
    Api::<Role>::namespaced(server.client(), "default")
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "alice-reads", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}],
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(server.client(), "default")
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    kcr_envtest::eventually(
        "alice may list configmaps",
        std::time::Duration::from_secs(30),
        || async {
            as_alice
                .list(&ListParams::default())
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        },
    )
    .await;
    // Only list and get: creating is still forbidden.
    let err = as_alice
        .create(&PostParams::default(), &config_map("x"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 403),
        "{err}"
    );

    // The client goes straight to kube-apiserver: faults and counters of the proxy do not see
    // it.
    server.faults().reset_counts();
    server.faults().fail_next("list", "configmaps", 1, 500);
    as_alice.list(&ListParams::default()).await.unwrap();
    assert_eq!(server.faults().request_count("list", "configmaps"), 0);
    assert_eq!(server.faults().pending_failures(), 1);
    server.faults().clear();

    // The kubeconfig holds the same credentials (written with the key readable by its owner
    // only).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("alice.kubeconfig");
    alice.write_kubeconfig(&file).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
    let config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::read_from(&file).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    let (name, _) = whoami(kube::Client::try_from(config).unwrap()).await;
    assert_eq!(name, "alice");

    // A user in system:masters may do anything.
    let root = server.add_user("root", &["system:masters"]).unwrap();
    let (name, groups) = whoami(root.client.clone()).await;
    assert_eq!(name, "root");
    assert!(groups.contains(&"system:masters".to_string()), "{groups:?}");
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "made-by-root"}})).unwrap();
    Api::<Namespace>::all(root.client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    Api::<ConfigMap>::namespaced(root.client.clone(), "made-by-root")
        .create(&PostParams::default(), &config_map("y"))
        .await
        .unwrap();

    // A user's certificate is not the admin's: two users differ, and neither is the admin.
    let bob = server.add_user("bob", &[]).unwrap();
    assert_eq!(
        whoami(bob.client.clone()).await,
        ("bob".to_string(), vec!["system:authenticated".to_string()])
    );
}

#[tokio::test]
async fn a_service_account_token_authenticates_as_the_account_until_it_is_deleted() {
    if kcr_envtest::binaries_for_test("a_service_account_token_authenticates_as_the_account")
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
    let admin = server.client();
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(admin.clone(), "default");
    // No account yet: no token.
    let err = server
        .service_account_token_user("default", "robot")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("default/robot"), "{err}");

    let account = serde_json::from_value(json!({"metadata": {"name": "robot"}})).unwrap();
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    let robot = server
        .service_account_token_user("default", "robot")
        .await
        .unwrap();
    assert_eq!(robot.name, "system:serviceaccount:default:robot");
    let (name, groups) = whoami(robot.client.clone()).await;
    assert_eq!(name, "system:serviceaccount:default:robot");
    assert!(
        groups.contains(&"system:serviceaccounts:default".to_string()),
        "{groups:?}"
    );
    // RBAC decides: nothing granted, so no listing.
    let cms: Api<ConfigMap> = Api::namespaced(robot.client.clone(), "default");
    let err = cms.list(&ListParams::default()).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 403),
        "{err}"
    );

    // A deleted account's token no longer authenticates.
    accounts.delete("robot", &Default::default()).await.unwrap();
    kcr_envtest::eventually(
        "the deleted account's token is refused",
        std::time::Duration::from_secs(30),
        || async {
            match cms.list(&ListParams::default()).await {
                Err(kube::Error::Api(s)) if s.code == 401 => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
}

#[tokio::test]
async fn in_process_there_are_no_tokens_to_authenticate_with() {
    let server = TestApiServer::builder()
        .backend(Backend::InProcess)
        .start()
        .await
        .unwrap();
    let err = server
        .service_account_token_user("default", "robot")
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            EnvtestError::Unsupported {
                helper: "TestApiServer::service_account_token_user",
                ..
            }
        ),
        "{err}"
    );
}
