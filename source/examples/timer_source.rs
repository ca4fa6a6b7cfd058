//! A custom source in about thirty lines: a timer that emits a generic event for a fixed object
//! every period (for example to re-check something outside the cluster).
//!
//! Run with `cargo run -p kcr-source --example timer_source`.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kcr_source::{Event, Source, SourceError, Started, SyncHandle};

/// Emits `Event::Generic { object }` every `period`, starting one period after `start`.
struct Ticker<K> {
    object: Arc<K>,
    period: Duration,
}

impl<K: Send + Sync + 'static> Source<K> for Ticker<K> {
    fn start(&self) -> Result<Started<K>, SourceError> {
        let object = Arc::clone(&self.object);
        let first = tokio::time::Instant::now() + self.period;
        let interval = tokio::time::interval_at(first, self.period);
        let events = futures::stream::unfold(interval, move |mut interval| {
            let object = Arc::clone(&object);
            async move {
                interval.tick().await;
                Some((Ok(Event::Generic { object }), interval))
            }
        });
        // Nothing to list first: the source is in sync from the start.
        Ok(Started {
            events: events.boxed(),
            sync: SyncHandle::ready(),
        })
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let ticker = Ticker {
        object: Arc::new("external-dns-zone".to_string()),
        period: Duration::from_millis(200),
    };
    let started = ticker.start().expect("a ticker always starts");
    let mut events = started.events.take(3);
    while let Some(event) = events.next().await {
        let event = event.expect("a ticker never lags");
        println!("{} for {}", event.kind(), event.object());
    }
}
