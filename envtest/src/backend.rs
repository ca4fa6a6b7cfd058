//! Which API server a [`TestApiServer`](crate::TestApiServer) runs: the in-process server of
//! this crate (the default), a real kube-apiserver with etcd ([`crate::real`]), or the cluster
//! of the current kubeconfig (`existing`).
//!
//! The same test code runs on all three: [`Backend::from_env`] reads `KCR_ENVTEST_BACKEND`
//! (`in-process`, the default, `real` or `existing`), and
//! [`TestApiServer::start`](crate::TestApiServer::start) uses it unless the builder names a
//! backend explicitly.

use std::fmt;
use std::str::FromStr;

use crate::error::EnvtestError;

/// The environment variable that picks the backend of every envtest-backed test.
pub const BACKEND_ENV: &str = "KCR_ENVTEST_BACKEND";

/// The environment variable that, on the real backend, makes every test process's
/// [`TestNamespace`](crate::TestNamespace) server use one control plane instead of starting
/// its own: the path of the attachment file the process running it wrote
/// ([`TestApiServer::write_attachment`](crate::TestApiServer::write_attachment); the standalone
/// `kcr-envtest --attachment FILE`). A test runner that runs each test in a process of its own
/// (cargo-nextest, as kcr's CI) then starts one control plane per run, not one per test.
/// Servers a test starts itself ([`TestApiServer::start`](crate::TestApiServer::start)) still
/// get a control plane of their own.
pub const SHARED_CONTROL_PLANE_ENV: &str = "KCR_ENVTEST_SHARED_CONTROL_PLANE";

/// An API server implementation behind [`TestApiServer`](crate::TestApiServer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Backend {
    /// This crate's API server, in the test's own process: starts in milliseconds, fault
    /// injection in the server itself, garbage collection inside the delete request.
    #[default]
    InProcess,
    /// kube-apiserver, etcd and kube-controller-manager processes (built by
    /// `tools/control-plane/build.sh`), behind a fault-injecting proxy on loopback.
    Real,
    /// The cluster of the current kubeconfig (`KUBECONFIG`, else `~/.kube/config`, else the
    /// in-cluster configuration; or [`TestApiServerBuilder::kubeconfig_path`]), as Go envtest's
    /// `UseExistingCluster`: each server gets a fresh namespace of its own
    /// ([`TestApiServer::namespace`]), deleted when it is dropped (the drop waits, up to 10 s,
    /// for the DELETE to be answered), and the same fault proxy as the real backend in front of
    /// the cluster.
    ///
    /// [`TestApiServerBuilder::kubeconfig_path`]: crate::TestApiServerBuilder::kubeconfig_path
    /// [`TestApiServer::namespace`]: crate::TestApiServer::namespace
    Existing,
}

impl Backend {
    /// The backend `KCR_ENVTEST_BACKEND` names; [`Backend::InProcess`] when it is unset or
    /// empty, an error naming the bad value otherwise.
    pub fn from_env() -> Result<Backend, EnvtestError> {
        match std::env::var(BACKEND_ENV) {
            Ok(value) if value.trim().is_empty() => Ok(Backend::InProcess),
            Ok(value) => value.parse(),
            Err(std::env::VarError::NotPresent) => Ok(Backend::InProcess),
            Err(std::env::VarError::NotUnicode(value)) => Err(EnvtestError::UnknownBackend {
                value: value.to_string_lossy().into_owned(),
            }),
        }
    }

    /// The name used by `KCR_ENVTEST_BACKEND`: `in-process`, `real` or `existing`.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::InProcess => "in-process",
            Backend::Real => "real",
            Backend::Existing => "existing",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Backend {
    type Err = EnvtestError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "in-process" | "inprocess" | "in_process" => Ok(Backend::InProcess),
            "real" => Ok(Backend::Real),
            "existing" => Ok(Backend::Existing),
            _ => Err(EnvtestError::UnknownBackend {
                value: s.to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_bad_names_are_errors() {
        for b in [Backend::InProcess, Backend::Real, Backend::Existing] {
            assert_eq!(b.as_str().parse::<Backend>().unwrap(), b);
            assert_eq!(b.to_string(), b.as_str());
        }
        assert_eq!(" Real ".parse::<Backend>().unwrap(), Backend::Real);
        assert_eq!("EXISTING".parse::<Backend>().unwrap(), Backend::Existing);
        let err = "kind".parse::<Backend>().unwrap_err();
        assert!(err.to_string().contains("\"kind\""), "{err}");
        for name in ["in-process", "real", "existing"] {
            assert!(err.to_string().contains(name), "{err}");
        }
    }
}
