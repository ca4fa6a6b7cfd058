//! The metrics and log lines of dead connections and timed-out requests, so that an operator
//! who sees them rise knows the network is at fault, not the controller.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `kcr_client_request_timeouts_total` | counter | `host`, `what` (`response`, `body`, `watch_start`, `watch_idle`; exported at 0 for each from the client's start) |
//! | `kcr_client_dead_connections_total` | counter | `host`, `reason` (exported at 0 for each from the client's start; `no_answer`: bytes were sent and nothing came back within the bound, so the connection was closed; `connect`: it never finished connecting) |
//!
//! Each is also a `WARN` log line naming the host and what was waiting (the request, or the
//! connection's silence). The metrics go to the `metrics` crate's global recorder: a kcr
//! `Manager` serving `/metrics` exports them.

use std::sync::Once;
use std::time::Duration;

use crate::error::{Timeout, TimeoutKind};

/// `kcr_client_request_timeouts_total`
pub const REQUEST_TIMEOUTS_TOTAL: &str = "kcr_client_request_timeouts_total";
/// `kcr_client_dead_connections_total`
pub const DEAD_CONNECTIONS_TOTAL: &str = "kcr_client_dead_connections_total";

/// Describes the metrics to the recorder (once per process).
pub(crate) fn describe() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        metrics::describe_counter!(
            REQUEST_TIMEOUTS_TOTAL,
            "Requests and watches kcr gave up on because they did not answer within their bound"
        );
        metrics::describe_counter!(
            DEAD_CONNECTIONS_TOTAL,
            "Connections kcr closed as dead: bytes sent and nothing received within the bound"
        );
    });
}

/// Exports `kcr_client_request_timeouts_total` at 0 for `host` and every `what` a request can
/// time out on, and `kcr_client_dead_connections_total` for every reason (a counter that appears only at its first increase hides that first increase
/// from `rate()`).
pub(crate) fn register(host: &str) {
    for kind in [
        TimeoutKind::Response,
        TimeoutKind::Body,
        TimeoutKind::WatchStart,
        TimeoutKind::WatchIdle,
    ] {
        metrics::counter!(
            REQUEST_TIMEOUTS_TOTAL,
            "host" => host.to_owned(),
            "what" => kind.label(),
        )
        .increment(0);
    }
    for reason in [DeadReason::NoAnswer, DeadReason::Connect] {
        metrics::counter!(
            DEAD_CONNECTIONS_TOTAL,
            "host" => host.to_owned(),
            "reason" => reason.label(),
        )
        .increment(0);
    }
}

/// Counts and logs a request, watch or connection attempt given up on.
pub(crate) fn timed_out(timeout: &Timeout) {
    metrics::counter!(
        REQUEST_TIMEOUTS_TOTAL,
        "host" => timeout.host.clone(),
        "what" => timeout.kind.label(),
    )
    .increment(1);
    tracing::warn!(
        host = %timeout.host,
        waiting = %timeout.what,
        bound = ?timeout.bound,
        what = timeout.kind.label(),
        "{timeout}"
    );
}

/// Why a connection was taken for dead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeadReason {
    /// Bytes went out and nothing came back within the bound.
    NoAnswer,
    /// It never finished connecting (TCP or TLS).
    Connect,
}

impl DeadReason {
    fn label(self) -> &'static str {
        match self {
            DeadReason::NoAnswer => "no_answer",
            DeadReason::Connect => "connect",
        }
    }
}

/// Counts and logs a connection closed as dead.
pub(crate) fn dead_connection(host: &str, reason: DeadReason, silence: Duration) {
    metrics::counter!(
        DEAD_CONNECTIONS_TOTAL,
        "host" => host.to_owned(),
        "reason" => reason.label(),
    )
    .increment(1);
    match reason {
        DeadReason::NoAnswer => tracing::warn!(
            host,
            silence = ?silence,
            "closed a dead connection to {host}: it sent bytes and received nothing for {silence:?} \
             (a network partition, or a server that stopped answering); what waited on it is \
             retried on a new connection"
        ),
        DeadReason::Connect => tracing::warn!(
            host,
            waited = ?silence,
            "a connection to {host} did not connect or finish its TLS handshake within {silence:?}"
        ),
    }
}
