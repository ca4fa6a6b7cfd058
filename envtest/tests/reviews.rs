//! TokenReview and SubjectAccessReview, as a delegating authenticator and authorizer (a
//! secured metrics endpoint) uses them. Everything goes through the API, so the same
//! assertions hold on the real backend (`KCR_ENVTEST_BACKEND=real`), which pins the in-process
//! answers to kube-apiserver's.

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{
    TokenRequest, TokenRequestSpec, TokenReview, TokenReviewSpec, TokenReviewStatus,
};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kcr_envtest::{TestNamespace, eventually};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

const LIMIT: Duration = Duration::from_secs(30);

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    }
}

/// A token of a new ServiceAccount `name` in the client's namespace.
async fn service_account_token(client: &kube::Client, name: &str) -> String {
    let sas: Api<ServiceAccount> = Api::default_namespaced(client.clone());
    let sa = ServiceAccount {
        metadata: meta(name),
        ..Default::default()
    };
    sas.create(&PostParams::default(), &sa).await.unwrap();
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: Some(vec![]),
            expiration_seconds: Some(600),
            ..Default::default()
        }),
        ..Default::default()
    };
    sas.create_token_request(name, &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token
        .unwrap()
}

async fn review_token(client: &kube::Client, token: &str) -> TokenReviewStatus {
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: token.into(),
            audiences: None,
        },
        ..Default::default()
    };
    Api::<TokenReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap()
        .status
        .unwrap_or_default()
}

fn sa_user(namespace: &str, name: &str) -> (String, Vec<String>) {
    (
        format!("system:serviceaccount:{namespace}:{name}"),
        vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{namespace}"),
            "system:authenticated".into(),
        ],
    )
}

async fn allowed(
    client: &kube::Client,
    user: &(String, Vec<String>),
    resource: Option<ResourceAttributes>,
    non_resource: Option<NonResourceAttributes>,
) -> bool {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.0.clone()),
            groups: Some(user.1.clone()),
            resource_attributes: resource,
            non_resource_attributes: non_resource,
            ..Default::default()
        },
        ..Default::default()
    };
    let status = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap()
        .status
        .unwrap();
    status.allowed
}

fn get_metrics() -> Option<NonResourceAttributes> {
    Some(NonResourceAttributes {
        path: Some("/metrics".into()),
        verb: Some("get".into()),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_reviews_authenticate_service_account_tokens() {
    let ns = TestNamespace::new("token-review").await.unwrap();
    let client = ns.client();
    let token = service_account_token(&client, "reviewed").await;

    let status = review_token(&client, &token).await;
    assert_eq!(status.authenticated, Some(true), "{status:?}");
    let user = status.user.unwrap();
    let (name, groups) = sa_user(ns.namespace(), "reviewed");
    assert_eq!(user.username.as_deref(), Some(name.as_str()));
    for g in &groups {
        assert!(user.groups.as_ref().unwrap().contains(g), "{g}: {user:?}");
    }
    let sa = Api::<ServiceAccount>::default_namespaced(client.clone())
        .get("reviewed")
        .await
        .unwrap();
    assert_eq!(user.uid, sa.metadata.uid);

    // Not a token, or a tampered one: not authenticated, with an error.
    for bad in ["not-a-token".to_owned(), format!("{token}x")] {
        let status = review_token(&client, &bad).await;
        assert_ne!(status.authenticated, Some(true), "{bad}: {status:?}");
        assert!(status.error.is_some_and(|e| !e.is_empty()));
    }
    // No token at all: a bad request.
    let empty = Api::<TokenReview>::all(client.clone())
        .create(&PostParams::default(), &TokenReview::default())
        .await;
    assert!(
        matches!(&empty, Err(kube::Error::Api(s)) if s.code == 400),
        "{empty:?}"
    );

    // A token of a deleted ServiceAccount stops authenticating.
    Api::<ServiceAccount>::default_namespaced(client.clone())
        .delete("reviewed", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the deleted account's token is refused", LIMIT, || async {
        review_token(&client, &token).await.authenticated != Some(true)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subject_access_reviews_follow_rbac() {
    let ns = TestNamespace::new("sar").await.unwrap();
    let client = ns.client();
    let pp = PostParams::default();
    let namespace = ns.namespace();
    let metrics_reader = ns.unique_name("reviews-metrics-reader");
    let reader_role = ClusterRole {
        metadata: meta(&metrics_reader),
        rules: Some(vec![PolicyRule {
            non_resource_urls: Some(vec!["/metrics".into()]),
            verbs: vec!["get".into()],
            ..Default::default()
        }]),
        ..Default::default()
    };
    Api::<ClusterRole>::all(client.clone())
        .create(&pp, &reader_role)
        .await
        .unwrap();
    let sa_subject = |name: &str| Subject {
        kind: "ServiceAccount".into(),
        name: name.into(),
        namespace: Some(namespace.into()),
        api_group: None,
    };
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(
            &pp,
            &ClusterRoleBinding {
                metadata: meta(&metrics_reader),
                role_ref: RoleRef {
                    api_group: Some("rbac.authorization.k8s.io".into()),
                    kind: "ClusterRole".into(),
                    name: metrics_reader.clone(),
                },
                subjects: Some(vec![sa_subject("scraper")]),
            },
        )
        .await
        .unwrap();
    Api::<Role>::default_namespaced(client.clone())
        .create(
            &pp,
            &Role {
                metadata: meta("reviews-configmap-reader"),
                rules: Some(vec![PolicyRule {
                    api_groups: Some(vec!["".into()]),
                    resources: Some(vec!["configmaps".into()]),
                    resource_names: Some(vec!["settings".into()]),
                    verbs: vec!["get".into()],
                    ..Default::default()
                }]),
            },
        )
        .await
        .unwrap();
    Api::<RoleBinding>::default_namespaced(client.clone())
        .create(
            &pp,
            &RoleBinding {
                metadata: meta("reviews-configmap-reader"),
                role_ref: RoleRef {
                    api_group: Some("rbac.authorization.k8s.io".into()),
                    kind: "Role".into(),
                    name: "reviews-configmap-reader".into(),
                },
                subjects: Some(vec![sa_subject("scraper")]),
            },
        )
        .await
        .unwrap();

    let scraper = sa_user(namespace, "scraper");
    let stranger = sa_user(namespace, "stranger");
    let configmap = |in_namespace: &str, name: &str, verb: &str| {
        Some(ResourceAttributes {
            namespace: Some(in_namespace.into()),
            resource: Some("configmaps".into()),
            name: Some(name.into()),
            verb: Some(verb.into()),
            ..Default::default()
        })
    };
    // RBAC takes effect asynchronously on a real ns.
    eventually("the bindings are in effect", LIMIT, || async {
        allowed(&client, &scraper, None, get_metrics()).await
            && allowed(
                &client,
                &scraper,
                configmap(namespace, "settings", "get"),
                None,
            )
            .await
    })
    .await;
    assert!(!allowed(&client, &stranger, None, get_metrics()).await);
    let post = Some(NonResourceAttributes {
        path: Some("/metrics".into()),
        verb: Some("post".into()),
    });
    assert!(!allowed(&client, &scraper, None, post).await);
    let other_path = Some(NonResourceAttributes {
        path: Some("/debug/pprof".into()),
        verb: Some("get".into()),
    });
    assert!(!allowed(&client, &scraper, None, other_path).await);
    assert!(
        !allowed(
            &client,
            &scraper,
            configmap(namespace, "other", "get"),
            None
        )
        .await
    );
    assert!(
        !allowed(
            &client,
            &scraper,
            configmap(namespace, "settings", "delete"),
            None
        )
        .await
    );
    assert!(
        !allowed(
            &client,
            &scraper,
            configmap("kube-system", "settings", "get"),
            None
        )
        .await
    );
    // The bootstrap policy counts: system:masters may do anything, everyone may read /healthz.
    let admin = ("someone".to_owned(), vec!["system:masters".to_owned()]);
    assert!(allowed(&client, &admin, None, get_metrics()).await);
    assert!(
        allowed(
            &client,
            &admin,
            configmap("kube-system", "x", "delete"),
            None
        )
        .await
    );
    let healthz = Some(NonResourceAttributes {
        path: Some("/healthz".into()),
        verb: Some("get".into()),
    });
    assert!(allowed(&client, &stranger, None, healthz).await);

    // Neither attributes: invalid.
    let invalid = Api::<SubjectAccessReview>::all(client.clone())
        .create(
            &pp,
            &SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some("someone".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await;
    assert!(
        matches!(&invalid, Err(kube::Error::Api(s)) if s.code == 422),
        "{invalid:?}"
    );
}
