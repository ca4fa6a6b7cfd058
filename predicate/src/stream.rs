//! Predicates over streams: [`PredicateStreamExt::filter_events`] keeps the events a predicate
//! accepts, for code that consumes a source (or any event stream) without a kcr controller.

use futures::{Stream, StreamExt, future};
use kcr_core::Event;

use crate::Predicate;

/// An item of an event stream: a bare [`Event`] or a `Result` holding one (as a started
/// kcr-source `Source` yields). Errors are not events and always pass the filter.
pub trait EventItem<K> {
    /// The event, if the item is one.
    fn event(&self) -> Option<&Event<K>>;
}

impl<K> EventItem<K> for Event<K> {
    fn event(&self) -> Option<&Event<K>> {
        Some(self)
    }
}

impl<K, E> EventItem<K> for Result<Event<K>, E> {
    fn event(&self) -> Option<&Event<K>> {
        self.as_ref().ok()
    }
}

/// Adds [`filter_events`](PredicateStreamExt::filter_events) to every stream of events.
///
/// ```
/// use futures::StreamExt;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcr_predicate::{LabelsChanged, PredicateStreamExt};
/// use kcr_core::Event;
///
/// # futures::executor::block_on(async {
/// let mut labelled = ConfigMap::default();
/// labelled.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
/// let events = futures::stream::iter([
///     Event::update(ConfigMap::default(), ConfigMap::default()), // no label change: dropped
///     Event::update(ConfigMap::default(), labelled),
/// ]);
/// let kept: Vec<Event<ConfigMap>> = events.filter_events(LabelsChanged).collect().await;
/// assert_eq!(kept.len(), 1);
/// # });
/// ```
pub trait PredicateStreamExt<K>: Stream + Sized
where
    Self::Item: EventItem<K>,
{
    /// Keeps the events `predicate` accepts (and every error item).
    fn filter_events<P: Predicate<K>>(self, predicate: P) -> impl Stream<Item = Self::Item> {
        self.filter(move |item| {
            future::ready(item.event().is_none_or(|event| predicate.evaluate(event)))
        })
    }
}

impl<K, S> PredicateStreamExt<K> for S
where
    S: Stream,
    S::Item: EventItem<K>,
{
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcr_source::SourceError;

    #[test]
    fn filters_events_and_passes_errors() {
        let items: Vec<Result<Event<u8>, SourceError>> = vec![
            Ok(Event::generic(1)),
            Err(SourceError::Lagged { missed: 2 }),
            Ok(Event::generic(2)),
            Ok(Event::create(4)),
        ];
        let even = |e: &Event<u8>| e.object().is_multiple_of(2);
        let kept: Vec<_> =
            futures::executor::block_on(futures::stream::iter(items).filter_events(even).collect());
        assert_eq!(
            kept,
            vec![
                Err(SourceError::Lagged { missed: 2 }),
                Ok(Event::generic(2)),
                Ok(Event::create(4))
            ]
        );
    }
}
