//! One controller incarnation: the user's Manager on a tokio runtime of its own, on an OS
//! thread of its own, so that a crash can end every task it started at once.

use std::sync::Arc;

use futures::future::BoxFuture;
use kcr_controller::{CancellationToken, Manager};
use kube::client::ClientBuilder;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::error::{BoxError, PerturbError};
use crate::intercept::{Gate, InterceptLayer, RunShared};

/// The user's closure that builds the controller under test on a client the harness made.
pub(crate) type StartFn =
    Arc<dyn Fn(kube::Client) -> BoxFuture<'static, Result<Manager, BoxError>> + Send + Sync>;

/// A running incarnation.
pub(crate) struct Incarnation {
    pub(crate) gate: Arc<Gate>,
    kill: Option<oneshot::Sender<()>>,
    dead: Option<oneshot::Receiver<()>>,
    /// Set when the Manager stopped by itself (with its error, if any).
    pub(crate) stopped: Arc<Mutex<Option<String>>>,
}

impl Incarnation {
    /// Starts incarnation `number` on a new thread and waits until its Manager is built (or
    /// failed to build: the error's text).
    pub(crate) async fn start(
        number: usize,
        config: kube::Config,
        run: Arc<RunShared>,
        start: StartFn,
    ) -> Result<(Incarnation, Result<(), String>), PerturbError> {
        let gate = Gate::new(number);
        let layer = InterceptLayer {
            run,
            gate: gate.clone(),
        };
        let (kill_tx, kill_rx) = oneshot::channel::<()>();
        let (dead_tx, dead_rx) = oneshot::channel::<()>();
        let (ready_tx, ready_rx) = oneshot::channel::<Result<(), String>>();
        let stopped = Arc::new(Mutex::new(None));
        let stopped_in = stopped.clone();
        std::thread::Builder::new()
            .name(format!("kcr-perturb-incarnation-{number}"))
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("building its tokio runtime: {e}")));
                        let _ = dead_tx.send(());
                        return;
                    }
                };
                runtime.block_on(async move {
                    let body = async move {
                        let client = match ClientBuilder::try_from(config) {
                            Ok(builder) => builder.with_layer(&layer).build(),
                            Err(e) => {
                                let _ = ready_tx.send(Err(format!("building its client: {e}")));
                                return futures::future::pending().await;
                            }
                        };
                        let manager = match start(client).await {
                            Ok(m) => m,
                            Err(e) => {
                                let _ = ready_tx.send(Err(e.to_string()));
                                return futures::future::pending().await;
                            }
                        };
                        let _ = ready_tx.send(Ok(()));
                        let result = manager.run(CancellationToken::new()).await;
                        *stopped_in.lock() = Some(match result {
                            Ok(()) => "the Manager stopped by itself".to_owned(),
                            Err(e) => format!("the Manager stopped with an error: {e}"),
                        });
                        futures::future::pending::<()>().await
                    };
                    tokio::select! {
                        _ = kill_rx => {}
                        () = body => {}
                    }
                });
                // A crash: every task of this incarnation ends here, none gracefully.
                runtime.shutdown_background();
                let _ = dead_tx.send(());
            })
            .map_err(|source| PerturbError::Thread {
                incarnation: number,
                source,
            })?;
        let ready = ready_rx
            .await
            .unwrap_or_else(|_| Err("its thread ended before the Manager was built".into()));
        Ok((
            Incarnation {
                gate,
                kill: Some(kill_tx),
                dead: Some(dead_rx),
                stopped,
            },
            ready,
        ))
    }

    /// Trips its gate (nothing more is sent or answered) and shuts its runtime down without
    /// waiting for its tasks; returns once the runtime is gone.
    pub(crate) async fn kill(mut self) {
        self.gate.trip();
        if let Some(kill) = self.kill.take() {
            let _ = kill.send(());
        }
        if let Some(dead) = self.dead.take() {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(10), dead).await;
        }
    }
}

impl Drop for Incarnation {
    fn drop(&mut self) {
        self.gate.trip();
        if let Some(kill) = self.kill.take() {
            let _ = kill.send(());
        }
    }
}
