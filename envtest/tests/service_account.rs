//! `TestApiServer::client_for_service_account` on the real backend: the identity it
//! impersonates is the one the API server gives the account's own token (TokenRequest), so
//! RBAC treats both alike; in process it is a typed error.

use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kcr_envtest::{
    Backend, EnvtestError, TestApiServer, service_account_groups, service_account_user,
};
use kube::api::{Api, PostParams};
use kube::config::{AuthInfo, KubeConfigOptions};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_client_is_who_the_accounts_token_is() {
    let in_process = TestApiServer::builder()
        .backend(Backend::InProcess)
        .start()
        .await
        .unwrap();
    let Err(err) = in_process.client_for_service_account("default", "robot") else {
        panic!("client_for_service_account worked in process");
    };
    assert!(
        matches!(
            err,
            EnvtestError::Unsupported {
                helper: "TestApiServer::client_for_service_account",
                ..
            }
        ),
        "{err}"
    );
    if kcr_envtest::binaries_for_test("a_service_account_client_is_who_the_accounts_token_is")
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
    let accounts: Api<ServiceAccount> = Api::namespaced(server.client(), "default");
    let account: ServiceAccount =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "robot"}})).unwrap();
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    // A token from the TokenRequest API (what a pod's projected volume holds), used straight
    // against kube-apiserver: the proxy's own client certificate would authenticate first.
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: Some(Vec::new()),
            expiration_seconds: Some(600),
            ..Default::default()
        }),
        ..Default::default()
    };
    let token = accounts
        .create_token_request("robot", &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token
        .unwrap();
    let mut kubeconfig = server.direct_kubeconfig().unwrap();
    for named in &mut kubeconfig.auth_infos {
        named.auth_info = Some(AuthInfo {
            token: Some(token.clone().into()),
            ..AuthInfo::default()
        });
    }
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    let with_token = kube::Client::try_from(config).unwrap();

    let (token_user, token_groups) = whoami(with_token).await;
    assert_eq!(token_user, service_account_user("default", "robot"));
    let (user, groups) = whoami(
        server
            .client_for_service_account("default", "robot")
            .unwrap(),
    )
    .await;
    assert_eq!(user, token_user);
    assert_eq!(groups, token_groups);
    for g in service_account_groups("default") {
        assert!(groups.contains(&g), "{g} in {groups:?}");
    }
    assert!(
        groups.iter().any(|g| g == "system:authenticated"),
        "{groups:?}"
    );
}
