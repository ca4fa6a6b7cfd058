//! TLS for the webhook server: certificates from `--cert-dir` that are reloaded when they change,
//! and a self-signed pair for running on the embedded API server.
//!
//! [`ReloadingCertResolver`] reads `tls.crt` and `tls.key` at start (a missing or broken pair is
//! an error then) and, at every TLS handshake, reads them again and compares their bytes with
//! what it loaded (two small files per handshake cost nothing next to the handshake itself, and
//! unlike modification times they cannot miss a rotation that lands within the file system's
//! timestamp granularity); when they changed it loads them again. A pair that fails to
//! load (for instance half-written during a rotation) is logged and the previous one keeps
//! serving, so a rotation by cert-manager or a mounted Secret never takes the webhook down. No
//! timers are involved: the next handshake after a change serves the new certificate.
//!
//! [`SelfSigned::generate`] makes a small CA and a serving certificate signed by it (rustls, like
//! the API server's client, refuses a self-signed end-entity certificate as its own trust
//! anchor); the CA goes into the webhook configurations' `caBundle`.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kcr_webhook::{CertificateAuthority, ServingCert};
use parking_lot::Mutex;
use rustls::ServerConfig;
use rustls::crypto::ring::sign::any_supported_type;
use rustls::pki_types::{
    CertificateDer, PrivateKeyDer, PrivatePkcs1KeyDer, PrivatePkcs8KeyDer, PrivateSec1KeyDer,
};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

pub use kcr_webhook::tls::{CA_FILE, CERT_FILE, KEY_FILE};

/// TLS setup errors.
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
    /// The PEM file holds no certificate or no key.
    #[error("{path}: no {what} found in PEM file")]
    Empty {
        /// The file.
        path: PathBuf,
        /// `certificate` or `private key`.
        what: &'static str,
    },
    /// A PEM file is malformed.
    #[error("{path}: {source}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// The PEM parser's error.
        source: pem::PemError,
    },
    /// rustls refused the key or the configuration.
    #[error("TLS: {0}")]
    Rustls(#[from] rustls::Error),
    /// Certificate generation failed.
    #[error("certificate generation: {0}")]
    Generate(#[from] rcgen::Error),
    /// kcr-webhook's TLS helpers failed (generating or writing a pair, building the
    /// configuration).
    #[error(transparent)]
    Webhook(#[from] kcr_webhook::TlsError),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> TlsError + '_ {
    move |source| TlsError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Loads a certificate chain and key from PEM files.
pub fn load_certified_key(cert: &Path, key: &Path) -> Result<CertifiedKey, TlsError> {
    let cert_pem = fs::read(cert).map_err(io_err(cert))?;
    let key_pem = fs::read(key).map_err(io_err(key))?;
    parse_certified_key(cert, &cert_pem, key, &key_pem)
}

/// The PEM sections of `pem_bytes` (text around them is ignored, as `openssl` does).
fn pem_sections(path: &Path, pem_bytes: &[u8]) -> Result<Vec<pem::Pem>, TlsError> {
    pem::parse_many(pem_bytes).map_err(|source| TlsError::Pem {
        path: path.to_owned(),
        source,
    })
}

/// The first private key among `sections`: PKCS #8, PKCS #1 (RSA) or SEC1 (EC).
fn first_private_key(sections: Vec<pem::Pem>) -> Option<PrivateKeyDer<'static>> {
    sections.into_iter().find_map(|p| {
        let tag = p.tag().to_owned();
        let der = p.into_contents();
        match tag.as_str() {
            "PRIVATE KEY" => Some(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(der))),
            "RSA PRIVATE KEY" => Some(PrivateKeyDer::Pkcs1(PrivatePkcs1KeyDer::from(der))),
            "EC PRIVATE KEY" => Some(PrivateKeyDer::Sec1(PrivateSec1KeyDer::from(der))),
            _ => None,
        }
    })
}

fn parse_certified_key(
    cert: &Path,
    cert_pem: &[u8],
    key: &Path,
    key_pem: &[u8],
) -> Result<CertifiedKey, TlsError> {
    let chain: Vec<CertificateDer<'static>> = pem_sections(cert, cert_pem)?
        .into_iter()
        .filter(|p| p.tag() == "CERTIFICATE")
        .map(|p| CertificateDer::from(p.into_contents()))
        .collect();
    if chain.is_empty() {
        return Err(TlsError::Empty {
            path: cert.to_owned(),
            what: "certificate",
        });
    }
    let der = first_private_key(pem_sections(key, key_pem)?).ok_or_else(|| TlsError::Empty {
        path: key.to_owned(),
        what: "private key",
    })?;
    let signing = any_supported_type(&der)?;
    Ok(CertifiedKey::new(chain, signing))
}

#[derive(Debug)]
struct Loaded {
    key: Arc<CertifiedKey>,
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    generation: u64,
}

/// A rustls certificate resolver that serves `tls.crt`/`tls.key` from a directory and reloads
/// them when they change.
#[derive(Debug)]
pub struct ReloadingCertResolver {
    cert: PathBuf,
    key: PathBuf,
    loaded: Mutex<Loaded>,
}

impl ReloadingCertResolver {
    /// Loads `dir/tls.crt` and `dir/tls.key`.
    pub fn from_dir(dir: &Path) -> Result<Self, TlsError> {
        Self::new(dir.join(CERT_FILE), dir.join(KEY_FILE))
    }

    /// Loads the given certificate and key files.
    pub fn new(cert: PathBuf, key: PathBuf) -> Result<Self, TlsError> {
        let cert_pem = fs::read(&cert).map_err(io_err(&cert))?;
        let key_pem = fs::read(&key).map_err(io_err(&key))?;
        let loaded = parse_certified_key(&cert, &cert_pem, &key, &key_pem)?;
        Ok(ReloadingCertResolver {
            cert,
            key,
            loaded: Mutex::new(Loaded {
                key: Arc::new(loaded),
                cert_pem,
                key_pem,
                generation: 1,
            }),
        })
    }

    /// How many times a pair has been loaded (1 after start).
    pub fn generation(&self) -> u64 {
        self.loaded.lock().generation
    }

    /// The pair to serve now, reloading it first if the files changed.
    pub fn current(&self) -> Arc<CertifiedKey> {
        let (Ok(cert_pem), Ok(key_pem)) = (fs::read(&self.cert), fs::read(&self.key)) else {
            // Mid-rotation (a file briefly missing): keep serving what we have.
            return self.loaded.lock().key.clone();
        };
        let mut loaded = self.loaded.lock();
        if cert_pem != loaded.cert_pem || key_pem != loaded.key_pem {
            match parse_certified_key(&self.cert, &cert_pem, &self.key, &key_pem) {
                Ok(new) => {
                    tracing::info!(cert = %self.cert.display(), "webhook certificate reloaded");
                    loaded.key = Arc::new(new);
                    loaded.cert_pem = cert_pem;
                    loaded.key_pem = key_pem;
                    loaded.generation += 1;
                }
                Err(e) => {
                    // Keep serving the previous pair; try again at the next handshake.
                    tracing::warn!(error = %e, "webhook certificate changed but does not load; keeping the previous one");
                }
            }
        }
        loaded.key.clone()
    }
}

impl ResolvesServerCert for ReloadingCertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// A rustls server configuration (TLS 1.2 and 1.3, ALPN h2 and http/1.1) serving the
/// resolver's certificate.
pub fn server_config(resolver: Arc<ReloadingCertResolver>) -> Result<Arc<ServerConfig>, TlsError> {
    Ok(kcr_webhook::tls::server_config(resolver)?)
}

/// A generated CA and a serving certificate signed by it, in PEM.
#[derive(Debug, Clone)]
pub struct SelfSigned {
    /// The CA certificate (for `caBundle` and for clients).
    pub ca_pem: String,
    /// The serving certificate.
    pub cert_pem: String,
    /// The serving certificate's private key.
    pub key_pem: String,
}

impl SelfSigned {
    /// Generates a CA and a serving certificate valid for `hosts` (DNS names or IP addresses).
    pub fn generate(hosts: &[&str]) -> Result<SelfSigned, TlsError> {
        let ca = CertificateAuthority::generate("nodepool-operator webhook CA")?;
        let ServingCert {
            cert_pem,
            key_pem,
            ca_pem,
        } = ca.issue(hosts)?;
        Ok(SelfSigned {
            ca_pem,
            cert_pem,
            key_pem,
        })
    }

    /// Writes `tls.crt`, `tls.key` and `ca.crt` into `dir` (created if missing), each file
    /// replaced by a rename so that a reader never sees half a file.
    pub fn write_to_dir(&self, dir: &Path) -> Result<(), TlsError> {
        let pair = ServingCert {
            cert_pem: self.cert_pem.clone(),
            key_pem: self.key_pem.clone(),
            ca_pem: self.ca_pem.clone(),
        };
        Ok(pair.write_to_dir(dir)?)
    }
}

#[cfg(test)]
mod tests;
