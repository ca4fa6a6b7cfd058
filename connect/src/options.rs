//! [`ConnectionOptions`]: every bound on a client's requests and connections, with its
//! default and the trade-off behind it.

use std::time::Duration;

use crate::error::ConnectError;
use crate::warnings::ApiWarnings;

/// The default of [`ConnectionOptions::connect_timeout`].
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The default of [`ConnectionOptions::request_timeout`].
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The default of [`ConnectionOptions::watch_start_timeout`].
pub const DEFAULT_WATCH_START_TIMEOUT: Duration = Duration::from_secs(10);
/// The default of [`ConnectionOptions::watch_idle_timeout`]: kube-apiserver sends a watch that
/// asked for bookmarks one about every minute (its watch cache's `bookmarkFrequency`, dispatched
/// on a one-second tick), so 70 s of silence means the connection is dead, not the watch quiet.
pub const DEFAULT_WATCH_IDLE_TIMEOUT: Duration = Duration::from_secs(70);
/// The default of [`ConnectionOptions::ping_interval`].
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(10);
/// The default of [`ConnectionOptions::ping_timeout`].
pub const DEFAULT_PING_TIMEOUT: Duration = Duration::from_secs(10);
/// The default of [`ConnectionOptions::pool_idle_timeout`].
pub const DEFAULT_POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(15);
/// What a watch without bookmarks may stay silent past the `timeoutSeconds` it asked the
/// server for (the server ends it then).
pub const WATCH_TIMEOUT_MARGIN: Duration = Duration::from_secs(10);

/// Which HTTP versions a client from [`crate::client`] speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpVersion {
    /// HTTP/2 where the server offers it in the TLS handshake (ALPN), as client-go does;
    /// HTTP/1.1 otherwise and over plain `http://`. The default.
    #[default]
    Negotiate,
    /// HTTP/1.1 only.
    Http1Only,
    /// HTTP/2 only; over plain `http://` with prior knowledge (h2c), which kube-apiserver does
    /// not serve but kcr-envtest does (a test of the HTTP/2 path without TLS).
    Http2Only,
}

/// The bounds on a client's requests, watches and connections. Every field has a default that
/// holds for a healthy server and notices a silent network partition (connections frozen
/// without being closed) within about a minute at most; see each field for its trade-off.
///
/// | bound | default | what it cuts |
/// |---|---|---|
/// | [`connect_timeout`](Self::connect_timeout) | 10 s | a TCP connect and TLS handshake that do not finish |
/// | [`request_timeout`](Self::request_timeout) | 30 s | a request (not a watch) without its response headers, or a response body silent that long |
/// | [`watch_start_timeout`](Self::watch_start_timeout) | 10 s | a watch whose stream does not start |
/// | [`watch_idle_timeout`](Self::watch_idle_timeout) | 70 s | a watch that asked for bookmarks and heard nothing, not even a bookmark |
/// | [`ping_interval`](Self::ping_interval) / [`ping_timeout`](Self::ping_timeout) | 10 s / 10 s | an HTTP/2 connection that does not answer a PING |
/// | [`pool_idle_timeout`](Self::pool_idle_timeout) | 15 s | an idle pooled connection, before it can go stale unseen |
///
/// ```
/// use std::time::Duration;
/// use kcr_connect::ConnectionOptions;
///
/// let options = ConnectionOptions::default()
///     .request_timeout(Duration::from_secs(60))
///     .watch_idle_timeout(Duration::from_secs(90));
/// assert!(options.validate().is_ok());
/// assert!(ConnectionOptions::default().request_timeout(Duration::ZERO).validate().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct ConnectionOptions {
    /// The longest a new connection may take to connect and finish its TLS handshake. A server
    /// behind a partition accepts nothing, or (a half-dead load balancer) accepts and never
    /// answers the handshake. Loopback and LAN handshakes take milliseconds; 10 s leaves room
    /// for a slow network without letting a request wait on a handshake that will not come.
    pub connect_timeout: Duration,
    /// The longest a request that is not a watch may wait for its response headers, and the
    /// longest its response body may stay silent between two chunks (so a large list that keeps
    /// streaming is never cut). kube-apiserver ends a request it cannot answer in 60 s itself;
    /// most answer in milliseconds, a slow admission webhook takes up to its own timeout
    /// (10 s by default). Shorter notices a dead connection sooner; too short cuts a slow but
    /// live request, whose write may then land after the client gave up on it.
    pub request_timeout: Duration,
    /// The longest a watch may wait for its stream to start (the response headers):
    /// kube-apiserver starts a watch's stream at once, after waiting at most 3 s for its cache
    /// to be fresh.
    pub watch_start_timeout: Duration,
    /// The longest a started watch that asked for bookmarks (`allowWatchBookmarks=true`, as
    /// kube-runtime's watcher does) may stay silent. kube-apiserver sends such a watch a
    /// bookmark about every minute, so silence means the connection is dead: the stream ends
    /// with an error and the watcher resumes from its last resourceVersion (no relist). A quiet
    /// watch on a healthy server is never cut. A watch without bookmarks may stay silent for
    /// its `timeoutSeconds` plus [`WATCH_TIMEOUT_MARGIN`], or this long if it names none. An
    /// aggregated API server that sends no bookmarks gets its quiet watches resumed once per
    /// this interval, which costs one request each.
    pub watch_idle_timeout: Duration,
    /// How long an HTTP/2 connection may go without receiving a frame before the client sends
    /// it a PING (idle connections included). Every request and watch shares the one connection
    /// HTTP/2 gives, so a dead one must be noticed however quiet it is.
    pub ping_interval: Duration,
    /// How long a PING may go unanswered before the connection is closed as dead, with every
    /// request and watch on it (they are retried on a new connection). client-go's health check
    /// waits 30 s and then 15 s.
    pub ping_timeout: Duration,
    /// How long an idle connection stays pooled for reuse. A connection that froze while idle
    /// looks alive until a request is sent on it, which then waits for its deadline; a short
    /// pool lifetime keeps such connections from outliving a partition. A client that sends a
    /// request every few seconds (a leader renewing its Lease) keeps its connections warm.
    pub pool_idle_timeout: Duration,
    /// Which HTTP versions to speak.
    pub http_version: HttpVersion,
    /// What to do with the API server's warnings (`Warning` headers): log each distinct one
    /// once (the default), every one, or none; see [`crate::warnings`].
    pub api_warnings: ApiWarnings,
}

impl Default for ConnectionOptions {
    fn default() -> Self {
        ConnectionOptions {
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            watch_start_timeout: DEFAULT_WATCH_START_TIMEOUT,
            watch_idle_timeout: DEFAULT_WATCH_IDLE_TIMEOUT,
            ping_interval: DEFAULT_PING_INTERVAL,
            ping_timeout: DEFAULT_PING_TIMEOUT,
            pool_idle_timeout: DEFAULT_POOL_IDLE_TIMEOUT,
            http_version: HttpVersion::default(),
            api_warnings: ApiWarnings::default(),
        }
    }
}

impl ConnectionOptions {
    /// Sets [`connect_timeout`](Self::connect_timeout).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets [`request_timeout`](Self::request_timeout).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets [`watch_start_timeout`](Self::watch_start_timeout).
    pub fn watch_start_timeout(mut self, timeout: Duration) -> Self {
        self.watch_start_timeout = timeout;
        self
    }

    /// Sets [`watch_idle_timeout`](Self::watch_idle_timeout).
    pub fn watch_idle_timeout(mut self, timeout: Duration) -> Self {
        self.watch_idle_timeout = timeout;
        self
    }

    /// Sets [`ping_interval`](Self::ping_interval) and [`ping_timeout`](Self::ping_timeout).
    pub fn pings(mut self, interval: Duration, timeout: Duration) -> Self {
        self.ping_interval = interval;
        self.ping_timeout = timeout;
        self
    }

    /// Sets [`pool_idle_timeout`](Self::pool_idle_timeout).
    pub fn pool_idle_timeout(mut self, timeout: Duration) -> Self {
        self.pool_idle_timeout = timeout;
        self
    }

    /// Sets [`http_version`](Self::http_version).
    pub fn http_version(mut self, version: HttpVersion) -> Self {
        self.http_version = version;
        self
    }

    /// Sets [`api_warnings`](Self::api_warnings).
    pub fn api_warnings(mut self, warnings: ApiWarnings) -> Self {
        self.api_warnings = warnings;
        self
    }

    /// Every bound scaled to `factor` of its default (`0.1`: a tenth), for tests that make a
    /// partition outlast the bounds in seconds rather than minutes. The HTTP version stays
    /// [`HttpVersion::Negotiate`].
    pub fn scaled(factor: f64) -> Self {
        let d = ConnectionOptions::default();
        ConnectionOptions {
            connect_timeout: d.connect_timeout.mul_f64(factor),
            request_timeout: d.request_timeout.mul_f64(factor),
            watch_start_timeout: d.watch_start_timeout.mul_f64(factor),
            watch_idle_timeout: d.watch_idle_timeout.mul_f64(factor),
            ping_interval: d.ping_interval.mul_f64(factor),
            ping_timeout: d.ping_timeout.mul_f64(factor),
            pool_idle_timeout: d.pool_idle_timeout.mul_f64(factor),
            http_version: d.http_version,
            api_warnings: d.api_warnings,
        }
    }

    /// Checks that every bound is positive: a zero bound would fail every request, and "no
    /// bound" is not on offer (a silent partition must never hang a request).
    pub fn validate(&self) -> Result<(), ConnectError> {
        let bounds = [
            ("connect_timeout", self.connect_timeout),
            ("request_timeout", self.request_timeout),
            ("watch_start_timeout", self.watch_start_timeout),
            ("watch_idle_timeout", self.watch_idle_timeout),
            ("ping_interval", self.ping_interval),
            ("ping_timeout", self.ping_timeout),
            ("pool_idle_timeout", self.pool_idle_timeout),
        ];
        for (name, value) in bounds {
            if value.is_zero() {
                return Err(ConnectError::InvalidOptions {
                    reason: format!("{name} must be positive"),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_every_zero_bound_is_named() {
        assert!(ConnectionOptions::default().validate().is_ok());
        let zero = Duration::ZERO;
        let cases = [
            (
                ConnectionOptions::default().connect_timeout(zero),
                "connect_timeout",
            ),
            (
                ConnectionOptions::default().request_timeout(zero),
                "request_timeout",
            ),
            (
                ConnectionOptions::default().watch_start_timeout(zero),
                "watch_start_timeout",
            ),
            (
                ConnectionOptions::default().watch_idle_timeout(zero),
                "watch_idle_timeout",
            ),
            (
                ConnectionOptions::default().pings(zero, Duration::from_secs(1)),
                "ping_interval",
            ),
            (
                ConnectionOptions::default().pings(Duration::from_secs(1), zero),
                "ping_timeout",
            ),
            (
                ConnectionOptions::default().pool_idle_timeout(zero),
                "pool_idle_timeout",
            ),
        ];
        for (options, name) in cases {
            let err = options.validate().unwrap_err().to_string();
            assert!(err.contains(name), "{err}");
        }
    }

    #[test]
    fn scaled_options_keep_their_proportions() {
        let tenth = ConnectionOptions::scaled(0.1);
        assert_eq!(tenth.watch_idle_timeout, Duration::from_secs(7));
        assert_eq!(tenth.request_timeout, Duration::from_secs(3));
        assert_eq!(tenth.http_version, HttpVersion::Negotiate);
        assert!(tenth.validate().is_ok());
    }
}
