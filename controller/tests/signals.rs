//! SIGTERM starts a graceful shutdown of a manager (alone in this test binary: it signals its
//! own process).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kcr_controller::{Manager, ManagerOptions};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_shuts_the_manager_down_gracefully() {
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    let options = ManagerOptions::default()
        .metrics_bind_address("0")
        .unwrap()
        .health_probe_bind_address("0")
        .unwrap()
        .graceful_shutdown_timeout(Duration::from_secs(10));
    let mgr = Manager::new(client, options).await.unwrap();
    let started = Arc::new(tokio::sync::Notify::new());
    let finished_cleanly = Arc::new(AtomicBool::new(false));
    {
        let (started, finished) = (started.clone(), finished_cleanly.clone());
        mgr.add_runnable(
            "slow-to-stop",
            false,
            move |token: CancellationToken| async move {
                started.notify_one();
                token.cancelled().await;
                // in-flight work finishes after the signal
                tokio::time::sleep(Duration::from_millis(200)).await;
                finished.store(true, Ordering::SeqCst);
                Ok(())
            },
        )
        .unwrap();
    }
    let run = tokio::spawn(async move { mgr.run_until_signal().await });
    started.notified().await;
    let t0 = Instant::now();
    let status = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(std::process::id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("shut down after SIGTERM")
        .unwrap()
        .unwrap();
    assert!(finished_cleanly.load(Ordering::SeqCst));
    assert!(t0.elapsed() >= Duration::from_millis(200));
}
