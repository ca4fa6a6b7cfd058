//! # kcr-source: where controller events come from
//!
//! A controller reacts to [`Event`]s: an object was created (and whether it came from the initial
//! list), updated (with the old *and* new object), deleted (and whether its final state is
//! unknown because it vanished while the watch was disconnected), or a generic trigger. Objects
//! are shared as `Arc<K>`, never cloned per consumer.
//!
//! Events come from a [`Source`]. [`Source::start`] returns at once with a [`Started`]: a stream of
//! events for this consumer and a [`SyncHandle`] telling when the source is in sync; a controller
//! waits for all its sources with [`wait_for_sync`] and a timeout before it starts its workers.
//!
//! The crate does not depend on any controller: the stream can be consumed by anything.
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
#![forbid(unsafe_code)]

mod error;
mod event;
mod selector;
mod source;
mod stream;

pub use error::{SourceError, SyncError};
pub use event::{Event, EventKind};
pub use selector::{SelectorError, parse_label_selector};
pub use source::{EventStream, Source, Started, SyncHandle, SyncSignal, wait_for_sync};
pub use stream::StreamSource;
