//! The cache's sync period, on either backend: with nothing changing, every cached object comes
//! again, periodically, as an update whose old and new object are the same.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_envtest::TestNamespace;
use kcr_source::{Cache, CacheError, Event, Source, WatchScope};
use serde_json::json;

async fn next(events: &mut kcr_source::EventStream<ConfigMap>) -> Event<ConfigMap> {
    tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("an event within 10 s")
        .expect("the stream is open")
        .expect("no error")
}

#[tokio::test]
async fn every_cached_object_comes_again_as_an_update_to_itself() {
    let test = TestNamespace::new("sync-period").await.unwrap();
    test.upsert(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "steady"}}))
        .await
        .unwrap();
    let cache = Cache::new(test.client());
    assert!(matches!(
        cache.set_sync_period(Duration::ZERO),
        Err(CacheError::ZeroSyncPeriod)
    ));
    cache.set_sync_period(Duration::from_millis(200)).unwrap();
    let kind = cache
        .kind::<ConfigMap>(WatchScope::all().namespace(test.namespace()))
        .unwrap();
    assert!(cache.set_sync_period(Duration::from_secs(1)).is_err());
    let mut events = kind.start().unwrap().events;

    let first = next(&mut events).await;
    assert!(
        matches!(first, Event::Create { initial: true, .. }),
        "{first:?}"
    );
    // Nothing changes; resyncs keep coming.
    for _ in 0..2 {
        match next(&mut events).await {
            Event::Update { old, new } => {
                assert!(Arc::ptr_eq(&old, &new));
                assert_eq!(new.metadata.name.as_deref(), Some("steady"));
            }
            other => panic!("expected a resync, got {other:?}"),
        }
    }
}
