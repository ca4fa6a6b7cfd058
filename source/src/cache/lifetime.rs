//! [`Lifetime`]: what keeps a cache's watches running while any handle of it (the cache, a
//! `Kind`, a `Reader`, a started stream) is alive.

use tokio_util::sync::CancellationToken;

/// Cancels its token when the last handle goes away.
pub(crate) struct Lifetime(pub(crate) CancellationToken);

impl Drop for Lifetime {
    fn drop(&mut self) {
        self.0.cancel();
    }
}
