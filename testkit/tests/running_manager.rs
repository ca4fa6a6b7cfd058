//! `RunningManager`: a clean stop, a manager that fails on its own, one that does not stop in
//! time, and `check` while it runs. No API server is needed: the managers run runnables only.

use std::time::Duration;

use kcr_testkit::{RunningManager, TestkitError};
use tokio_util::sync::CancellationToken;

fn offline_client() -> kube::Client {
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

async fn manager() -> kcr_controller::Manager {
    kcr_controller::Manager::new(offline_client(), kcr_testkit::options())
        .await
        .unwrap()
}

#[tokio::test]
async fn test_options_turn_the_servers_off() {
    let mgr = manager().await;
    assert_eq!(mgr.metrics_addr(), None);
    assert_eq!(mgr.health_probe_addr(), None);
}

#[tokio::test]
async fn a_running_manager_stops_cleanly() {
    let mgr = manager().await;
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    mgr.add_runnable("waits", false, |token: CancellationToken| async move {
        let _ = started_tx.send(());
        token.cancelled().await;
        Ok(())
    })
    .unwrap();
    let mut running = RunningManager::start(mgr);
    started_rx.await.unwrap();
    running.check().unwrap();
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_failed_manager_is_reported_by_check_and_stop() {
    let mgr = manager().await;
    let (failed_tx, failed_rx) = tokio::sync::oneshot::channel::<()>();
    mgr.add_runnable("fails", false, |_token| async move {
        drop(failed_tx);
        Err("the disk is on fire".into())
    })
    .unwrap();
    let mut running = RunningManager::start(mgr);
    let _ = failed_rx.await;
    kcr_testkit::eventually("the manager has returned", || {
        std::future::ready(running.check().err().map(|e| e.to_string()))
    })
    .await
    .map(|e| assert!(e.contains("the disk is on fire"), "{e}"))
    .unwrap();
    // Once reported, a stop says the manager was gone already.
    assert!(matches!(
        running.stop().await,
        Err(TestkitError::ManagerStoppedEarly)
    ));

    let mgr = manager().await;
    mgr.add_runnable("fails", false, |_token| async move {
        Err("a runnable error".into())
    })
    .unwrap();
    let running = RunningManager::start(mgr);
    // Not checked first: stop reports the manager's own error.
    tokio::task::yield_now().await;
    let err = running.stop().await.unwrap_err();
    assert!(err.to_string().contains("a runnable error"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn a_manager_that_does_not_stop_in_time_is_a_stop_timeout() {
    let mgr = manager().await;
    mgr.add_runnable("stubborn", false, |_token| async move {
        std::future::pending::<()>().await;
        Ok(())
    })
    .unwrap();
    let running = RunningManager::start(mgr);
    tokio::task::yield_now().await;
    let err = running
        .stop_within(Duration::from_secs(2))
        .await
        .unwrap_err();
    assert!(
        matches!(err, TestkitError::StopTimeout(d) if d == Duration::from_secs(2)),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_default_stop_waits_for_the_managers_own_shutdown_timeout() {
    let mgr = manager().await;
    mgr.add_runnable("stubborn", false, |_token| async move {
        std::future::pending::<()>().await;
        Ok(())
    })
    .unwrap();
    let running = RunningManager::start(mgr);
    tokio::task::yield_now().await;
    // The manager gives up on the runnable after its 10 s graceful shutdown and says so.
    let err = running.stop().await.unwrap_err();
    assert!(
        matches!(
            &err,
            TestkitError::Manager(kcr_controller::ManagerError::ShutdownTimeout { .. })
        ),
        "{err}"
    );
}
