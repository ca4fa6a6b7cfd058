//! Cache-wide defaults on either backend: a default transform applies to every kind without a
//! transform of its own, a kind's scope narrows what `WatchScope::all()` watches, and both are
//! refused once the watches they would change have started.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcr_envtest::TestNamespace;
use kcr_source::{Cache, CacheError, WatchScope};
use serde_json::json;

#[tokio::test]
async fn a_default_transform_and_a_kind_scope_shape_what_is_cached() {
    let test = TestNamespace::new("cache-defaults").await.unwrap();
    let ns = test.namespace();
    for (kind, name, team) in [
        ("ConfigMap", "a", "a"),
        ("ConfigMap", "b", "b"),
        ("Secret", "s", "a"),
    ] {
        test.upsert(json!({
            "apiVersion": "v1", "kind": kind,
            "metadata": {"name": name, "labels": {"team": team}, "annotations": {"note": "big"}},
        }))
        .await
        .unwrap();
    }
    let cache = Cache::new(test.client());
    cache
        .set_default_transform(|meta| {
            meta.managed_fields = None;
            meta.annotations = None;
        })
        .unwrap();
    // Secrets keep theirs: a kind's own transform wins over the default.
    cache.set_transform::<Secret>(|_| {}).unwrap();
    cache
        .set_scope::<ConfigMap>(WatchScope::all().namespace(ns).labels("team=a"))
        .unwrap();
    assert_eq!(
        cache.scope_for::<ConfigMap>(&WatchScope::all()),
        WatchScope::all().namespace(ns).labels("team=a")
    );

    let configmaps = cache.reader::<ConfigMap>(WatchScope::all()).unwrap();
    let secrets = cache
        .reader::<Secret>(WatchScope::all().namespace(ns))
        .unwrap();
    configmaps
        .wait_for_sync(Duration::from_secs(20))
        .await
        .unwrap();
    secrets
        .wait_for_sync(Duration::from_secs(20))
        .await
        .unwrap();

    // Only team a's ConfigMap, without annotations or managedFields.
    let cached = configmaps.list();
    assert_eq!(cached.len(), 1);
    assert_eq!(cached[0].metadata.name.as_deref(), Some("a"));
    assert_eq!(cached[0].metadata.annotations, None);
    assert_eq!(cached[0].metadata.managed_fields, None);
    let secret = secrets.get("s", Some(ns)).unwrap().unwrap();
    assert!(secret.metadata.annotations.is_some());

    // The watches have started: defaults and this kind's scope are fixed now.
    assert!(matches!(
        cache.set_default_transform(|_| {}),
        Err(CacheError::ScopeAfterStart { .. })
    ));
    assert!(matches!(
        cache.set_scope::<ConfigMap>(WatchScope::all()),
        Err(CacheError::ScopeAfterStart { .. })
    ));
}
