//! [`TlsError`]: what can go wrong reading, parsing, serving or issuing certificates.

use std::path::{Path, PathBuf};

/// TLS errors.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A PEM file holds no usable certificate or key.
    #[error("{path}: no {what} found: {detail}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// `certificate` or `private key`.
        what: &'static str,
        /// What the PEM parser said.
        detail: String,
    },
    /// The certificate is not valid now.
    #[error("{path}: certificate {detail}")]
    Expired {
        /// The certificate file.
        path: PathBuf,
        /// `expired at <unix seconds>` or `not valid before <unix seconds>`.
        detail: String,
    },
    /// rustls refused the key, the pair or the configuration.
    #[error("TLS: {0}")]
    Rustls(#[from] rustls::Error),
    /// Certificate generation failed.
    #[error("certificate generation: {0}")]
    Generate(#[from] rcgen::Error),
    /// A cipher suite name the provider does not implement.
    #[error("unknown cipher suite {name:?}; rustls (ring) offers {}", known.join(", "))]
    UnknownCipherSuite {
        /// The name asked for.
        name: String,
        /// The names available.
        known: Vec<String>,
    },
    /// The cipher suites chosen leave nothing to negotiate.
    #[error("no usable cipher suite: {reason}")]
    NoCipherSuite {
        /// Why.
        reason: String,
    },
    /// A client CA bundle that cannot verify clients.
    #[error("client CA bundle {path}: {detail}")]
    ClientCa {
        /// The bundle file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> TlsError + '_ {
    move |source| TlsError::Io {
        path: path.to_owned(),
        source,
    }
}
