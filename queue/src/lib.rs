//! # kcr-queue: the work queue of a controller
//!
//! A generic, de-duplicating, rate-limited, priority work queue with client-go's semantics and
//! metric names, usable on its own (no Kubernetes dependency):
//!
//! - **De-duplication**: adding a key that is already waiting is a no-op.
//! - **One in flight per key**: a key held by a worker is not handed to another worker; adding it
//!   meanwhile marks it dirty and it becomes ready again when the first worker is done.
//! - **Async [`WorkQueue::get`]** that sleeps (no spinning) until there is work; FIFO among ready
//!   keys of the same priority.
//! - **Priorities** ([`WorkQueue::add_with_priority`], [`LOW_PRIORITY`]): higher first; a re-add
//!   keeps the higher priority.
//! - **Batched adds** ([`WorkQueue::add_all`]): the semantics of adding one by one, with one
//!   lock hold per 32 keys.
//! - **Delayed adds** ([`WorkQueue::add_after`]): a waiting key keeps its earliest time.
//! - **Rate-limited adds** ([`WorkQueue::add_rate_limited`]) through a [`RateLimiter`]:
//!   exponential, fast-slow, token bucket (which, unlike client-go's, cannot pile up delays
//!   without bound), max-of, max-wait, and seedable [`Jitter`] on any of them.
//! - **Shutdown** ([`WorkQueue::shutdown`]) and **drain** ([`WorkQueue::shutdown_with_drain`]).
//! - **Metrics** through the [`metrics`](https://docs.rs/metrics) facade with client-go's names
//!   (see [`mod@metrics`]).
//! - **A guard**, [`WorkItem`], that marks its key done when dropped.
//!
//! ```
//! use kcr_queue::{LOW_PRIORITY, WorkQueue};
//! use std::time::Duration;
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() {
//!     let queue: WorkQueue<String> = WorkQueue::new("example");
//!     queue.add_with_priority("default/old".to_string(), LOW_PRIORITY); // from the initial list
//!     queue.add("default/web".to_string());
//!     queue.add("default/web".to_string()); // de-duplicated
//!     assert_eq!(queue.len(), 2);
//!
//!     // A worker: the higher-priority key comes first.
//!     let item = queue.get().await.expect("the queue is running");
//!     assert_eq!(item.as_str(), "default/web");
//!     queue.add("default/web".to_string()); // in flight: marked dirty, not handed out twice
//!     item.retry_rate_limited(); // failed: retry with back-off, and mark done
//!     assert_eq!(queue.num_requeues(&"default/web".to_string()), 1);
//!
//!     let item = queue.get().await.expect("the queue is running");
//!     assert_eq!(item.as_str(), "default/web"); // the dirty re-add beat the back-off
//!     drop(item); // marks done
//!
//!     let item = queue.get().await.expect("the queue is running");
//!     assert_eq!(item.as_str(), "default/old");
//!     item.done_and_forget();
//!
//!     queue.shutdown_with_drain(Duration::from_secs(5)).await.expect("nothing in flight");
//!     assert!(queue.get().await.is_none());
//! }
//! ```
//!
//! # Performance
//!
//! Adds and workers share almost nothing: each key's state is one atomic word in a shared slot,
//! adds keep the key map (and an inbox of what they did) under their own lock, and a getter
//! swaps the whole inbox out in one lock round trip, only when it has no ready key of its own
//! that comes first. Marking a key done is one compare-and-swap with no lock in the common case;
//! idle slots are reused from a small pool; no wake-up call is made unless a getter sleeps;
//! and the clock is read as rarely as possible (never per key without delays or metrics). The
//! [`queue`] module documents the design; the workspace README has the measured throughput
//! against kube-runtime's scheduler (`cargo run --release -p kcr-queue --example queue_throughput`)
//! and the metrics cost (`--example metrics_cost`).
//!
//! Modules: [`queue`] (the queue and its data structures), [`rate_limiter`], [`jitter`],
//! [`mod@metrics`], [`guard`] ([`WorkItem`]), [`error`].

pub mod error;
pub mod guard;
pub mod jitter;
pub mod metrics;
pub mod queue;
pub mod rate_limiter;

pub use error::{ConfigError, QueueError};
pub use guard::WorkItem;
pub use jitter::Jitter;
pub use queue::{DEFAULT_PRIORITY, LOW_PRIORITY, WorkQueue, WorkQueueBuilder};
pub use rate_limiter::{
    DefaultControllerRateLimiter, FastSlow, ItemExponential, Jittered, MaxOf, RateLimiter,
    RateLimiterExt, TokenBucket, WithMaxWait, default_controller_rate_limiter,
};

/// The hash map used for per-key state: std's map with foldhash's fast, randomly seeded hasher.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
