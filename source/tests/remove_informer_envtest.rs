//! Removing one watch from a cache, on either backend: its streams end with a typed
//! `SourceError::Removed` after what they were owed, its readers keep their last state, other
//! watches go on, and the next reader of the kind starts a new watch.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcr_envtest::TestNamespace;
use kcr_source::{Cache, Event, Source, SourceError, WatchScope};
use serde_json::json;

async fn next(
    events: &mut kcr_source::EventStream<ConfigMap>,
) -> Option<Result<Event<ConfigMap>, SourceError>> {
    tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("an item within 10 s")
}

#[tokio::test]
async fn a_removed_watch_ends_its_streams_with_a_typed_error() {
    let test = TestNamespace::new("remove-informer").await.unwrap();
    test.upsert(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}))
        .await
        .unwrap();
    let cache = Cache::new(test.client());
    let scope = WatchScope::all().namespace(test.namespace());
    let mut events = cache
        .kind::<ConfigMap>(scope.clone())
        .unwrap()
        .start()
        .unwrap()
        .events;
    let reader = cache.reader::<ConfigMap>(scope.clone()).unwrap();
    let secrets = cache.reader::<Secret>(scope.clone()).unwrap();
    let first = next(&mut events).await.unwrap().unwrap();
    assert!(
        matches!(first, Event::Create { initial: true, .. }),
        "{first:?}"
    );
    assert_eq!(cache.informer_count(), 2);

    assert!(cache.remove_informer::<ConfigMap>(&scope).unwrap());
    match next(&mut events).await {
        Some(Err(SourceError::Removed { kind })) => assert_eq!(kind, "ConfigMap"),
        other => panic!("expected the typed end, got {other:?}"),
    }
    assert!(
        next(&mut events).await.is_none(),
        "the stream ends after it"
    );
    assert!(
        !cache.remove_informer::<ConfigMap>(&scope).unwrap(),
        "removed once only"
    );
    assert_eq!(cache.informer_count(), 1);
    // The reader keeps the last state; the other watch goes on.
    assert!(reader.get("a", Some(test.namespace())).unwrap().is_some());
    secrets
        .wait_for_sync(Duration::from_secs(10))
        .await
        .unwrap();

    // A new reader of the kind starts a new watch, which sees what changed meanwhile.
    test.upsert(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}))
        .await
        .unwrap();
    let again = cache.reader::<ConfigMap>(scope).unwrap();
    assert_eq!(cache.informer_count(), 2);
    again.wait_for_sync(Duration::from_secs(10)).await.unwrap();
    assert_eq!(again.len(), 2);
}
