//! Any `Stream` of events as a [`Source`]: [`StreamSource`].

use futures::StreamExt;
use futures::stream::BoxStream;
use parking_lot::Mutex;

use crate::{Event, Source, SourceError, Started, SyncHandle};

/// A [`Source`] made of any `Stream<Item = Event<K>>` (for example a kube-runtime watcher stream
/// mapped into events, or a `tokio_stream` of ticks).
///
/// A stream has one consumer, so this source can be started once; a second `start` returns
/// [`SourceError::AlreadyStarted`]. Use a [`Channel`](crate::Channel) to feed several consumers.
/// It is synced at once unless built with [`StreamSource::with_sync`].
pub struct StreamSource<K> {
    stream: Mutex<Option<BoxStream<'static, Event<K>>>>,
    sync: SyncHandle,
    name: String,
}

impl<K: Send + 'static> StreamSource<K> {
    /// Wraps `stream`; the source counts as synced immediately.
    pub fn new(stream: impl futures::Stream<Item = Event<K>> + Send + 'static) -> Self {
        Self::with_sync(stream, SyncHandle::ready())
    }

    /// Wraps `stream`, reporting sync through `sync` (keep the [`SyncSignal`](crate::SyncSignal)
    /// of the pair and call `set_synced` when the stream's initial state has been emitted).
    pub fn with_sync(
        stream: impl futures::Stream<Item = Event<K>> + Send + 'static,
        sync: SyncHandle,
    ) -> Self {
        Self {
            stream: Mutex::new(Some(stream.boxed())),
            sync,
            name: format!("stream<{}>", std::any::type_name::<K>()),
        }
    }

    /// Sets the name used in logs and errors.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
}

impl<K: Send + 'static> Source<K> for StreamSource<K> {
    fn start(&self) -> Result<Started<K>, SourceError> {
        let stream = self
            .stream
            .lock()
            .take()
            .ok_or_else(|| SourceError::AlreadyStarted {
                source_name: self.name.clone(),
            })?;
        Ok(Started {
            events: stream.map(Ok).boxed(),
            sync: self.sync.clone(),
        })
    }

    fn name(&self) -> String {
        self.name.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn yields_the_stream_once() {
        let source =
            StreamSource::new(futures::stream::iter([Event::create(1), Event::generic(2)]))
                .named("numbers");
        let started = source.start().expect("first start succeeds");
        assert!(started.sync.is_synced());
        let got: Vec<_> = started.events.collect().await;
        assert_eq!(got, vec![Ok(Event::create(1)), Ok(Event::generic(2))]);
        assert_eq!(
            source.start().map(|_| ()),
            Err(SourceError::AlreadyStarted {
                source_name: "numbers".into()
            })
        );
        assert_eq!(source.name(), "numbers");
    }

    #[tokio::test]
    async fn custom_sync_handle_is_passed_through() {
        let (signal, handle) = SyncHandle::pair();
        let source = StreamSource::with_sync(futures::stream::empty::<Event<u8>>(), handle);
        let started = source.start().expect("first start succeeds");
        assert!(!started.sync.is_synced());
        signal.set_synced();
        assert!(started.sync.is_synced());
    }
}
