//! SIGTERM / SIGINT handling: the first signal starts a graceful shutdown (the returned token is
//! cancelled); a second one exits the process at once with status 1, as controller-runtime's
//! `SetupSignalHandler` does.

use tokio_util::sync::CancellationToken;

/// Returns a token cancelled on the first SIGTERM or SIGINT. A second signal exits the process.
/// Must be called inside a tokio runtime.
pub fn shutdown_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    // Register before returning, so that a signal sent right after this call is not missed
    // (and does not kill the process with the default disposition).
    let mut signals = Signals::new();
    tokio::spawn(async move {
        let first = signals.next().await;
        tracing::info!(
            signal = first,
            "received signal; starting graceful shutdown"
        );
        t.cancel();
        let second = signals.next().await;
        tracing::error!(
            signal = second,
            "received second signal; exiting immediately"
        );
        std::process::exit(1);
    });
    token
}

#[cfg(unix)]
struct Signals {
    handlers: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

#[cfg(unix)]
impl Signals {
    fn new() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        // Registering fails only if the signal driver cannot be set up; then fall back to Ctrl-C.
        let handlers = match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(term), Ok(int)) => Some((term, int)),
            _ => None,
        };
        Signals { handlers }
    }

    async fn next(&mut self) -> &'static str {
        match &mut self.handlers {
            Some((term, int)) => tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            },
            None => {
                let _ = tokio::signal::ctrl_c().await;
                "SIGINT"
            }
        }
    }
}

#[cfg(not(unix))]
struct Signals;

#[cfg(not(unix))]
impl Signals {
    fn new() -> Self {
        Signals
    }
    async fn next(&mut self) -> &'static str {
        let _ = tokio::signal::ctrl_c().await;
        "SIGINT"
    }
}
