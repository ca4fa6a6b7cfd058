use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

/// Tokens `allowed-*` are users allowed to `get` `/metrics`, `denied-*` users who are not,
/// `broken` makes the review fail; anything else is not authenticated. Counts reviews.
#[derive(Default)]
struct Stub {
    authentications: AtomicUsize,
    authorizations: AtomicUsize,
}

impl Reviewer for Arc<Stub> {
    fn authenticate<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Result<UserInfo, String>, SecureMetricsError>> {
        Box::pin(async move {
            self.authentications.fetch_add(1, Ordering::SeqCst);
            if token == "broken" {
                return Err(SecureMetricsError::Reviewer {
                    stage: "authentication",
                    source: "the API server is unreachable".into(),
                });
            }
            if token.starts_with("allowed-") || token.starts_with("denied-") {
                Ok(Ok(UserInfo {
                    username: token.to_owned(),
                    ..UserInfo::default()
                }))
            } else {
                Ok(Err("unknown token".to_owned()))
            }
        })
    }

    fn authorize<'a>(
        &'a self,
        user: &'a UserInfo,
        verb: &'a str,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Result<(), String>, SecureMetricsError>> {
        Box::pin(async move {
            self.authorizations.fetch_add(1, Ordering::SeqCst);
            if user.username.starts_with("allowed-") && verb == "get" && path == "/metrics" {
                Ok(Ok(()))
            } else {
                Ok(Err("no RBAC rule".to_owned()))
            }
        })
    }
}

fn auth(ttl: Duration, capacity: usize) -> (Arc<Stub>, MetricsAuth) {
    let stub = Arc::new(Stub::default());
    let auth = MetricsAuth::new(Arc::new(stub.clone()), ttl, capacity).unwrap();
    (stub, auth)
}

fn reviews(stub: &Stub) -> (usize, usize) {
    (
        stub.authentications.load(Ordering::SeqCst),
        stub.authorizations.load(Ordering::SeqCst),
    )
}

#[tokio::test(start_paused = true)]
async fn verdicts_and_their_cache_lifetime() {
    let (stub, auth) = auth(Duration::from_secs(10), 16);
    let allowed = auth.review("allowed-a", "get", "/metrics").await.unwrap();
    assert!(matches!(&allowed, Verdict::Allowed(u) if u.username == "allowed-a"));
    assert_eq!(
        auth.review("denied-b", "get", "/metrics").await.unwrap(),
        Verdict::Forbidden {
            user: "denied-b".into(),
            reason: "no RBAC rule".into()
        }
    );
    assert_eq!(
        auth.review("who", "get", "/metrics").await.unwrap(),
        Verdict::Unauthenticated("unknown token".into())
    );
    // Allowed for get /metrics only.
    assert!(matches!(
        auth.review("allowed-a", "post", "/metrics").await.unwrap(),
        Verdict::Forbidden { .. }
    ));
    assert!(matches!(
        auth.review("allowed-a", "get", "/debug").await.unwrap(),
        Verdict::Forbidden { .. }
    ));
    assert_eq!(reviews(&stub), (5, 4));

    // Within the TTL every verdict comes from the cache.
    tokio::time::advance(Duration::from_secs(9)).await;
    for _ in 0..3 {
        assert_eq!(
            auth.review("allowed-a", "get", "/metrics").await.unwrap(),
            allowed
        );
        assert!(matches!(
            auth.review("denied-b", "get", "/metrics").await.unwrap(),
            Verdict::Forbidden { .. }
        ));
        assert!(matches!(
            auth.review("who", "get", "/metrics").await.unwrap(),
            Verdict::Unauthenticated(_)
        ));
    }
    assert_eq!(reviews(&stub), (5, 4));

    // After it, reviewed again (a revoked token or role stops working within the TTL).
    tokio::time::advance(Duration::from_secs(1)).await;
    auth.review("allowed-a", "get", "/metrics").await.unwrap();
    assert_eq!(reviews(&stub), (6, 5));
}

#[tokio::test(start_paused = true)]
async fn failed_reviews_are_errors_and_not_cached() {
    let (stub, auth) = auth(Duration::from_secs(10), 16);
    for _ in 0..2 {
        let err = auth.review("broken", "get", "/metrics").await.unwrap_err();
        assert!(
            err.to_string().contains("the API server is unreachable"),
            "{err}"
        );
    }
    assert_eq!(reviews(&stub), (2, 0));
    assert_eq!(auth.cached(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_cache_is_bounded_and_evicts_expired_then_oldest() {
    let (stub, auth) = auth(Duration::from_secs(10), 3);
    for t in ["allowed-1", "allowed-2", "allowed-3"] {
        auth.review(t, "get", "/metrics").await.unwrap();
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    assert_eq!(auth.cached(), 3);
    // Full: the oldest (allowed-1) goes.
    auth.review("allowed-4", "get", "/metrics").await.unwrap();
    assert_eq!(auth.cached(), 3);
    let before = reviews(&stub);
    auth.review("allowed-2", "get", "/metrics").await.unwrap();
    auth.review("allowed-3", "get", "/metrics").await.unwrap();
    auth.review("allowed-4", "get", "/metrics").await.unwrap();
    assert_eq!(reviews(&stub), before, "2, 3 and 4 are still cached");
    auth.review("allowed-1", "get", "/metrics").await.unwrap();
    assert_eq!(reviews(&stub).0, before.0 + 1, "1 was evicted");
    assert_eq!(auth.cached(), 3);

    // Once all have expired, a new entry clears them all out.
    tokio::time::advance(Duration::from_secs(30)).await;
    auth.review("allowed-5", "get", "/metrics").await.unwrap();
    assert_eq!(auth.cached(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_zero_ttl_reviews_every_request_and_a_zero_size_is_refused() {
    let (stub, auth) = auth(Duration::ZERO, 4);
    for _ in 0..3 {
        auth.review("allowed-a", "get", "/metrics").await.unwrap();
    }
    assert_eq!(reviews(&stub), (3, 3));
    assert_eq!(auth.cached(), 0);
    assert!(matches!(
        MetricsAuth::new(Arc::new(Arc::new(Stub::default())), DEFAULT_CACHE_TTL, 0),
        Err(SecureMetricsError::ZeroCacheSize)
    ));
}

#[test]
fn bearer_tokens_parse() {
    let mut h = HeaderMap::new();
    assert_eq!(bearer_token(&h), None);
    h.insert(header::AUTHORIZATION, "Bearer abc.def".parse().unwrap());
    assert_eq!(bearer_token(&h), Some("abc.def"));
    h.insert(header::AUTHORIZATION, "bearer   xyz ".parse().unwrap());
    assert_eq!(bearer_token(&h), Some("xyz"));
    h.insert(header::AUTHORIZATION, "Basic dXNlcjpwYXNz".parse().unwrap());
    assert_eq!(bearer_token(&h), None);
    h.insert(header::AUTHORIZATION, "Bearer ".parse().unwrap());
    assert_eq!(bearer_token(&h), None);
}
