//! The event log: a bounded window of writes that watches and paginated lists read from,
//! with the resourceVersions below which a resume gets 410 Gone.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Expired, LogEvent, ObjKey, Store, StoredObject};

impl Store {
    /// The state of `resource` objects at resourceVersion `at` that changed after it: for each
    /// key touched by a later write, its value at `at` (`None` = absent). Used for consistent
    /// pagination and exact-RV lists. Fails when `at` is older than the window.
    pub fn overlay_at(
        &self,
        resource: &str,
        at: u64,
    ) -> Result<BTreeMap<ObjKey, Option<Arc<StoredObject>>>, Expired> {
        if at < self.compacted {
            return Err(Expired {
                oldest: self.compacted,
            });
        }
        let mut overlay = BTreeMap::new();
        let start = self.log.partition_point(|e| e.rv <= at);
        for event in self.log.range(start..).rev() {
            if &*event.resource == resource {
                overlay.insert(event.key.clone(), event.prev.clone());
            }
        }
        Ok(overlay)
    }

    /// Events with rv > `after`, in order (all resources). Fails when `after` is older than
    /// the window. (Watches resume through `events_since_live`; this is the tests' view.)
    #[cfg(test)]
    pub fn events_since(&self, after: u64, max: usize) -> Result<Vec<Arc<LogEvent>>, Expired> {
        self.read_log(after, max, self.compacted)
    }

    /// Events with rv > `after`, in order (all resources), for a watch that is already running: fails only when
    /// events it has not read yet were dropped (window overflow or compaction).
    pub fn events_since_live(&self, after: u64, max: usize) -> Result<Vec<Arc<LogEvent>>, Expired> {
        self.read_log(after, max, self.dropped)
    }

    /// Up to `max` events with rv > `after`; [`Expired`] when `after` is below `floor`.
    fn read_log(&self, after: u64, max: usize, floor: u64) -> Result<Vec<Arc<LogEvent>>, Expired> {
        if after < floor {
            return Err(Expired {
                oldest: self.compacted,
            });
        }
        let start = self.log.partition_point(|e| e.rv <= after);
        Ok(self.log.range(start..).take(max).cloned().collect())
    }

    /// Drop the whole history: every resume from a resourceVersion handed out so far gets 410.
    /// Running watches that have read everything keep going.
    pub fn compact(&mut self) {
        if let Some(last) = self.log.back() {
            self.dropped = last.rv;
        }
        self.rv += 1;
        self.compacted = self.rv;
        self.log.clear();
    }

    pub(super) fn push_event(&mut self, event: LogEvent) {
        self.log.push_back(Arc::new(event));
        while self.log.len() > self.window {
            if let Some(old) = self.log.pop_front() {
                self.compacted = old.rv;
                self.dropped = old.rv;
            }
        }
    }
}
