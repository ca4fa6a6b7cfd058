//! A stand-in cluster for the tests of the `existing` backend and of the `kcr-envtest` binary: a
//! kcr-envtest server whose kubeconfig is written to a file, as a developer's `~/.kube/config`
//! points at a kind cluster. Shared by `envtest/tests/existing_backend.rs` and (by path)
//! `envtest/cli/tests/cli.rs`.
#![allow(dead_code)]

use std::path::PathBuf;

use kcr_envtest::{Backend, TestApiServer};

/// The backend of the stand-in cluster: the one `KCR_ENVTEST_BACKEND` names, in-process when
/// that is `existing` (there is no cluster to stand in for).
pub fn stand_in_backend() -> Backend {
    match Backend::from_env().unwrap() {
        Backend::Existing => Backend::InProcess,
        other => other,
    }
}

/// A stand-in cluster and its kubeconfig file (in the returned directory), which reaches it as
/// its own clients do (the real backend: through its proxy, so its counters see the requests).
pub async fn stand_in() -> (TestApiServer, tempfile::TempDir, PathBuf) {
    let cluster = TestApiServer::builder()
        .backend(stand_in_backend())
        .start()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig).unwrap();
    (cluster, dir, kubeconfig)
}
