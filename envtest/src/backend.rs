//! Which API server a [`TestApiServer`](crate::TestApiServer) runs: the in-process server of
//! this crate (the default) or a real kube-apiserver with etcd ([`crate::real`]).
//!
//! The same test code runs on both: [`Backend::from_env`] reads `KCR_ENVTEST_BACKEND`
//! (`in-process`, the default, or `real`), and [`TestApiServer::start`](crate::TestApiServer::start)
//! uses it unless the builder names a backend explicitly.

use std::fmt;
use std::str::FromStr;

use crate::error::EnvtestError;

/// The environment variable that picks the backend of every envtest-backed test.
pub const BACKEND_ENV: &str = "KCR_ENVTEST_BACKEND";

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

    /// The name used by `KCR_ENVTEST_BACKEND`: `in-process` or `real`.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::InProcess => "in-process",
            Backend::Real => "real",
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
        for b in [Backend::InProcess, Backend::Real] {
            assert_eq!(b.as_str().parse::<Backend>().unwrap(), b);
        }
        assert_eq!(" Real ".parse::<Backend>().unwrap(), Backend::Real);
        let err = "kind".parse::<Backend>().unwrap_err();
        assert!(err.to_string().contains("\"kind\""), "{err}");
        assert!(err.to_string().contains("in-process"), "{err}");
    }
}
