//! The cache's watch-error hook and backoff, on either backend: a watch of a kind the server
//! does not serve reports each failed attempt to the hook, with the kind, the namespace and the
//! 404, and keeps retrying.

use std::time::Duration;

use kcr_envtest::TestNamespace;
use kcr_source::{Cache, DynamicResource, WatchBackoff, WatchScope};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Scope;

#[tokio::test]
async fn the_hook_hears_every_failed_attempt_with_kind_namespace_and_cause() {
    let test = TestNamespace::new("watch-errors").await.unwrap();
    let cache = Cache::new(test.client());
    cache
        .set_watch_backoff(
            WatchBackoff::default()
                .delays(Duration::from_millis(10), Duration::from_millis(50))
                .jitter(false),
        )
        .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    cache.on_watch_error(move |e| {
        let _ = tx.send((
            e.kind.to_string(),
            e.namespace.map(str::to_string),
            e.error.to_string(),
        ));
    });
    let gvk = GroupVersionKind::gvk("absent.kcr.io", "v1", "Phantom");
    let phantoms = DynamicResource::new(ApiResource::from_gvk(&gvk), Scope::Namespaced);
    let reader = cache
        .reader_dynamic(&phantoms, WatchScope::all().namespace(test.namespace()))
        .unwrap();

    // Every attempt is reported (a short backoff keeps this quick; its delays are pinned by the
    // unit test of `WatchBackoff`).
    for attempt in 0..3 {
        let (kind, namespace, cause) = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("attempt {attempt} reported"))
            .unwrap();
        assert_eq!(kind, "Phantom");
        assert_eq!(namespace.as_deref(), Some(test.namespace()));
        assert!(cause.contains("404"), "{cause}");
    }
    assert!(!reader.sync().is_synced());
    assert!(reader.last_error().is_some_and(|e| e.contains("404")));
    // The backoff is fixed once a watch has started.
    assert!(cache.set_watch_backoff(WatchBackoff::default()).is_err());
}
