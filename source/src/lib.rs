//! # kcr-source: where controller events come from
//!
//! A controller reacts to [`Event`]s: an object was created (and whether it was found by a list,
//! the initial one or a relist, rather than seen as a watch event), updated (with the old *and* new object), deleted (and whether its final state is
//! unknown because it vanished while the watch was disconnected), or a generic trigger. Objects
//! are shared as `Arc<K>`, never cloned per consumer.
//!
//! Events come from a [`Source`]. [`Source::start`] returns at once with a [`Started`]: a stream of
//! events for this consumer and a [`SyncHandle`] telling when the source is in sync; a controller
//! waits for all its sources with [`wait_for_sync`] and a timeout before it starts its workers.
//!
//! The crate does not depend on any controller: the stream can be consumed by anything. The
//! event type and the label selector parser live in kcr-core (re-exported here), so that
//! kcr-predicate and kcr-handler need them without the kube client this crate brings.
//!
//! For a [`Kind`], "synced" means the shared cache holds its first complete list (like
//! controller-runtime's `HasSynced`); the subscriber receives that list as creates with
//! `initial: true` through its stream, so a consumer keeps polling the stream while it waits.
//!
//! ```
//! use futures::StreamExt;
//! use kcr_source::{Event, Source, StreamSource, wait_for_sync};
//! use std::time::Duration;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // Any stream of events is a source.
//! let source = StreamSource::new(futures::stream::iter([
//!     Event::create("a".to_string()),
//!     Event::update("a".to_string(), "b".to_string()),
//! ]));
//! let started = source.start().unwrap();
//! wait_for_sync([&started.sync], Duration::from_secs(5)).await.unwrap();
//! let events: Vec<Event<String>> = started.events.map(Result::unwrap).collect().await;
//! assert_eq!(events[1].object().as_str(), "b");
//! assert_eq!(events[1].old_object().unwrap().as_str(), "a");
//! # }
//! ```
//!
//! ## Sources in this crate
//!
//! * [`Kind`]: a cached watch of one resource type (kube-runtime `watcher` + kcr's own store,
//!   objects keyed by their own name).
//!   Updates carry the previous object from the store; after a relist (410, reconnect) changed
//!   objects come out as updates and vanished ones as deletes with `state_unknown: true`. Options
//!   ([`WatchScope`]): one namespace or several ([`WatchScope::namespaces`]: one watch per
//!   namespace into one store, synced when every namespace is, a relist of one namespace
//!   touching only its objects, and reads of any other namespace refused with a
//!   [`ReadError`]; see [`namespaces`]), label and field selectors, streaming lists;
//!   metadata-only watches through [`Cache::metadata_kind`].
//! * [`Cache`]: the shared informer map. Every `Kind` and every [`Reader`] (cached `get`/`list`
//!   with label selectors, and secondary indexes: [`Reader::add_index`] / [`Reader::by_index`],
//!   controller-runtime's field indexer) for the same type and options shares one watch and one
//!   store. Each
//!   subscriber has a bounded buffer; one that falls behind is resynced from the store (it gets
//!   the net difference since what it last saw) instead of blocking the others or losing a change
//!   (details in [`KindStream`]). Objects are transformed before they are stored: by default
//!   `metadata.managedFields` is dropped ([`strip_managed_fields`]; two thirds of a cache of
//!   10,000 small ConfigMaps, 71.4 MiB whole vs 21.4 MiB, measured by
//!   `cargo run --release -p kcr-source --example cache_memory`); set another transform per
//!   type with [`Cache::set_transform`], or none with [`Cache::keep_whole`]. Kinds chosen at
//!   run time are cached too: [`Cache::kind_dynamic`] and [`Cache::reader_dynamic`] watch the
//!   `DynamicObject`s of a [`DynamicResource`] (an `ApiResource` and its scope), keyed by the
//!   resource, so two dynamic kinds never share a store (see [`dynamic`]). Cache-wide default
//!   scopes and transform, and a scope per kind, are set once on the cache and apply to every
//!   watch that does not set its own (see [`defaults`]).
//! * [`StreamSource`]: any `Stream<Item = Event<K>>`.
//! * [`Channel`]: events pushed from anywhere in the program to any number of consumers, each with
//!   its own bounded buffer; a slow consumer either back-pressures the producer or gets an
//!   explicit [`SourceError::Lagged`], never a silent loss (see [`Overflow`]).
//!
//! ## Writing your own source
//!
//! Implement [`Source::start`]: return the stream and a [`SyncHandle`] (ready at once if there is
//! nothing to list first). A timer that emits a generic event every period, in about thirty
//! lines (also `examples/timer_source.rs`):
//!
//! ```
//! use std::{sync::Arc, time::Duration};
//! use futures::StreamExt;
//! use kcr_source::{Event, Source, SourceError, Started, SyncHandle};
//!
//! /// Emits `Event::Generic { object }` every `period`.
//! struct Ticker<K> {
//!     object: Arc<K>,
//!     period: Duration,
//! }
//!
//! impl<K: Send + Sync + 'static> Source<K> for Ticker<K> {
//!     fn start(&self) -> Result<Started<K>, SourceError> {
//!         let object = Arc::clone(&self.object);
//!         let first = tokio::time::Instant::now() + self.period;
//!         let interval = tokio::time::interval_at(first, self.period);
//!         let events = futures::stream::unfold(interval, move |mut interval| {
//!             let object = Arc::clone(&object);
//!             async move {
//!                 interval.tick().await;
//!                 Some((Ok(Event::Generic { object }), interval))
//!             }
//!         });
//!         Ok(Started { events: events.boxed(), sync: SyncHandle::ready() })
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let ticker = Ticker { object: Arc::new("zone".to_string()), period: Duration::from_secs(60) };
//! let started = ticker.start().unwrap();
//! assert!(started.sync.is_synced());
//! let t0 = tokio::time::Instant::now();
//! let ticks: Vec<_> = started.events.take(2).collect().await;
//! assert_eq!(ticks.len(), 2);
//! assert_eq!(t0.elapsed(), Duration::from_secs(120)); // paused clock: no real waiting
//! # }
//! ```
#![forbid(unsafe_code)]

mod cache;
mod channel;
mod error;
mod index;
mod informer;
mod kind;
mod object;
mod source;
mod stream;
mod transform;

pub use cache::{
    Cache, CacheError, DEFAULT_SUBSCRIBER_BUFFER, DynamicResource, InitialList, MetaTransform,
    ReadError, Reader, ScopedApi, WatchBackoff, WatchError, WatchErrorHook, WatchScope,
};
pub use cache::{defaults, dynamic, namespaces, watch_errors};
pub use channel::{Channel, ChannelStream, Overflow};
pub use error::{SendError, SourceError, SyncError};
pub use index::{IndexError, IndexFn};
pub use informer::KindStream;
pub use kcr_core::{Event, EventKind, SelectorError, parse_label_selector};
pub use kind::{Kind, KindStats};
pub use object::{CacheDynamicType, CacheObject};
pub use source::{EventStream, Source, Started, SyncHandle, SyncSignal, wait_for_sync};
pub use stream::StreamSource;
pub use transform::{Transform, strip_managed_fields};
