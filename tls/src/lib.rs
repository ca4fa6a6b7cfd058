//! # kcr-tls: serving certificates reloaded from files, and a small certificate authority
//!
//! The TLS of kcr's HTTPS servers: the webhook server (kcr-webhook, which re-exports this crate
//! as `kcr_webhook::tls`) and the manager's secured metrics endpoint (kcr-controller). It sits
//! under both so that the certificate reload exists once (kcr-webhook depends on
//! kcr-controller, so neither could own it for the other).
//!
//! A serving certificate read from files and reloaded when they change, and a small
//! certificate authority for tests and self-managed deployments.
//!
//! [`CertWatcher`] serves `tls.crt`/`tls.key` (or any two paths). At every TLS handshake (and
//! every readiness check) it resolves both paths (following symlinks) and compares each file's
//! resolved path, inode, size and modification time with those of the pair it loaded; only when
//! they differ does it read and parse the files again. This catches both an in-place rewrite
//! and the atomic swap a Kubernetes Secret volume does (`tls.crt → ..data/tls.crt`, then
//! `..data` is renamed to point at a new timestamped directory: the resolved path changes). No
//! timers or file-system notifications are involved: the first handshake after a change serves
//! the new pair.
//!
//! A pair that does not load (half-written, key and certificate not matching during a rotation)
//! is logged and the previous pair keeps serving, so a rotation never takes the server down.
//! The watcher may also start before the files exist (cert-manager writes them later): TLS
//! handshakes fail and [`CertWatcher::check`] (the readiness check) reports why until a valid
//! pair appears.
//!
//! [`CertificateAuthority`] makes a CA and serving certificates signed by it (rustls, like the
//! API server's client, refuses a self-signed end-entity certificate as its own trust anchor);
//! the CA goes into the webhook configurations' `caBundle`. It also issues client
//! certificates ([`CertificateAuthority::issue_client`]) for mutual TLS.
//!
//! # TLS options
//! [`TlsOptions`] are the settings of every kcr HTTPS server, built into a rustls configuration
//! by [`TlsOptions::server_config`]:
//! - HTTP/2 **off** by default (ALPN offers `http/1.1` only, and kcr's servers speak HTTP/1
//!   only), as kubebuilder's scaffold since CVE-2023-44487 and CVE-2023-39325;
//!   [`enable_http2(true)`](TlsOptions::enable_http2) turns it on;
//! - a minimum protocol version ([`TlsVersion`], 1.2 by default);
//! - cipher suites by name, among rustls' (unknown names are [`TlsError::UnknownCipherSuite`]);
//! - mutual TLS: a client-CA bundle file ([`TlsOptions::client_ca_file`]) re-read when it
//!   changes ([`ClientCaWatcher`], the way [`CertWatcher`] reloads the serving pair); a client
//!   without a certificate signed by it fails the handshake, and handlers see the verified
//!   certificate as a [`ClientCertificate`] (its subject, common name, organizations, chain).
//!
//! ```
//! use std::sync::Arc;
//! use kcr_tls::{CertWatcher, TlsOptions, TlsVersion};
//! let certs = Arc::new(CertWatcher::from_dir("/tmp/k8s-webhook-server/serving-certs".as_ref()));
//! let config = TlsOptions::default()
//!     .min_version(TlsVersion::Tls13)
//!     .client_ca_file("/etc/webhook/client-ca/ca.crt")
//!     .server_config(certs)?;
//! assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
//! # Ok::<(), kcr_tls::TlsError>(())
//! ```
//!
//! # Metrics
//! Every read of a serving pair is counted, with controller-runtime's certwatcher names, through
//! the `metrics` facade: `certwatcher_read_certificate_total` and
//! `certwatcher_read_certificate_errors_total` (counters without labels, registered at 0 when a
//! [`CertWatcher`] is created; see [`CertWatcher::new`] for what counts as a read).

#![forbid(unsafe_code)]

pub mod client_ca;
pub mod options;
pub mod peer;

pub use client_ca::ClientCaWatcher;
pub use options::{ALPN_H2, ALPN_HTTP1, TlsOptions, TlsVersion, http2_offered};
pub use peer::{ClientCertificate, NameAttribute};

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// File name of the serving certificate chain in a certificate directory.
pub const CERT_FILE: &str = "tls.crt";
/// File name of the serving key in a certificate directory.
pub const KEY_FILE: &str = "tls.key";
/// File name of the CA certificate in a certificate directory.
pub const CA_FILE: &str = "ca.crt";

/// `certwatcher_read_certificate_total`: reads of a serving certificate pair (controller-runtime's
/// name).
pub const READ_CERTIFICATE_TOTAL: &str = "certwatcher_read_certificate_total";
/// `certwatcher_read_certificate_errors_total`: reads that failed (a file missing or unreadable,
/// a pair that does not parse or match).
pub const READ_CERTIFICATE_ERRORS_TOTAL: &str = "certwatcher_read_certificate_errors_total";

/// Describes the certificate-read counters to the installed `metrics` recorder and registers
/// both at 0 (a [`CertWatcher`] does this when it is created; call it again after installing a
/// recorder to have them exported before the first read).
pub fn register_metrics() {
    metrics::describe_counter!(READ_CERTIFICATE_TOTAL, "Total number of certificate reads");
    metrics::describe_counter!(
        READ_CERTIFICATE_ERRORS_TOTAL,
        "Total number of certificate read errors"
    );
    metrics::counter!(READ_CERTIFICATE_TOTAL).increment(0);
    metrics::counter!(READ_CERTIFICATE_ERRORS_TOTAL).increment(0);
}

/// Counts one read of a pair, and its failure.
fn count_read(failed: bool) {
    metrics::counter!(READ_CERTIFICATE_TOTAL).increment(1);
    if failed {
        metrics::counter!(READ_CERTIFICATE_ERRORS_TOTAL).increment(1);
    }
}

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

/// Parses a PEM certificate chain and PEM private key into a pair rustls can serve, checking
/// that the key belongs to the first certificate and that the certificate is valid now.
pub fn parse_pair(
    cert_path: &Path,
    cert_pem: &[u8],
    key_path: &Path,
    key_pem: &[u8],
) -> Result<CertifiedKey, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            path: cert_path.to_owned(),
            what: "certificate",
            detail: e.to_string(),
        })?;
    let Some(leaf) = chain.first() else {
        return Err(TlsError::Pem {
            path: cert_path.to_owned(),
            what: "certificate",
            detail: "the file holds no CERTIFICATE block".into(),
        });
    };
    check_validity(cert_path, leaf)?;
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError::Pem {
        path: key_path.to_owned(),
        what: "private key",
        detail: e.to_string(),
    })?;
    let provider = rustls::crypto::ring::default_provider();
    let pair = CertifiedKey::from_der(chain, key, &provider)?;
    Ok(pair)
}

fn check_validity(path: &Path, leaf: &CertificateDer<'_>) -> Result<(), TlsError> {
    let Some((not_before, not_after)) = der::validity(leaf.as_ref()) else {
        return Err(TlsError::Pem {
            path: path.to_owned(),
            what: "certificate",
            detail: "the certificate's validity period does not parse".into(),
        });
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    if now > not_after {
        return Err(TlsError::Expired {
            path: path.to_owned(),
            detail: format!("expired at {not_after} (unix seconds; now {now})"),
        });
    }
    if now < not_before {
        return Err(TlsError::Expired {
            path: path.to_owned(),
            detail: format!("not valid before {not_before} (unix seconds; now {now})"),
        });
    }
    Ok(())
}

/// What identifies the version of one file: its resolved path (a Secret volume's symlink swap
/// changes it), inode, size and modification time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileStamp {
    pub(crate) resolved: PathBuf,
    inode: u64,
    len: u64,
    modified: Option<SystemTime>,
}

pub(crate) fn stamp(path: &Path) -> std::io::Result<FileStamp> {
    let resolved = fs::canonicalize(path)?;
    let meta = fs::metadata(&resolved)?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Ok(FileStamp {
        resolved,
        inode,
        len: meta.len(),
        modified: meta.modified().ok(),
    })
}

#[derive(Debug, Default)]
struct State {
    pair: Option<Arc<CertifiedKey>>,
    /// Stamps of the files when they were last read (loaded or not).
    seen: Option<(FileStamp, FileStamp)>,
    /// Why the files seen last did not load (cleared by a successful load).
    last_error: Option<String>,
    /// The files were missing at the last check (a read that failed, counted once).
    missing: bool,
    generation: u64,
}

/// A rustls certificate resolver serving a certificate and key from files, reloaded when they
/// change: see the [module docs](self).
#[derive(Debug)]
pub struct CertWatcher {
    cert: PathBuf,
    key: PathBuf,
    state: Mutex<State>,
}

impl CertWatcher {
    /// Watches `dir/tls.crt` and `dir/tls.key` (a Secret volume's layout).
    pub fn from_dir(dir: &Path) -> Self {
        Self::new(dir.join(CERT_FILE), dir.join(KEY_FILE))
    }

    /// Watches the given certificate and key files. Nothing is read yet: the first
    /// [`current`](Self::current) (handshake) or [`check`](Self::check) loads them.
    ///
    /// The certificate-read counters ([`READ_CERTIFICATE_TOTAL`],
    /// [`READ_CERTIFICATE_ERRORS_TOTAL`]) are registered at 0 with the `metrics` recorder
    /// installed now; every read of the files counts: the first, each one after a change, each
    /// [`load`](Self::load) that reads them again, and the first check that finds them missing.
    pub fn new(cert: PathBuf, key: PathBuf) -> Self {
        register_metrics();
        CertWatcher {
            cert,
            key,
            state: Mutex::new(State::default()),
        }
    }

    /// Loads the pair now; an error if it does not load (for a start-up that must fail fast).
    pub fn load(&self) -> Result<(), TlsError> {
        self.refresh();
        let state = self.state.lock();
        match (&state.pair, &state.last_error) {
            (Some(_), None) => Ok(()),
            _ => {
                drop(state);
                // Report the typed error of a direct load.
                let loaded =
                    fs::read(&self.cert)
                        .map_err(io_err(&self.cert))
                        .and_then(|cert_pem| {
                            let key_pem = fs::read(&self.key).map_err(io_err(&self.key))?;
                            parse_pair(&self.cert, &cert_pem, &self.key, &key_pem)
                        });
                count_read(loaded.is_err());
                loaded.map(|_| ())
            }
        }
    }

    /// The certificate file watched.
    pub fn cert_path(&self) -> &Path {
        &self.cert
    }

    /// The key file watched.
    pub fn key_path(&self) -> &Path {
        &self.key
    }

    /// How many pairs have been loaded so far (0 before the first).
    pub fn generation(&self) -> u64 {
        self.state.lock().generation
    }

    /// The pair to serve now (reloaded first if the files changed); `None` while no valid pair
    /// has ever loaded.
    pub fn current(&self) -> Option<Arc<CertifiedKey>> {
        self.refresh();
        self.state.lock().pair.clone()
    }

    /// Ok when a valid pair is being served (the files changed since are checked first); else
    /// why not. This is the webhook server's (and the secured metrics server's) readiness check.
    pub fn check(&self) -> Result<(), String> {
        self.refresh();
        let state = self.state.lock();
        match (&state.pair, &state.last_error) {
            (Some(pair), _) => match pair.end_entity_cert() {
                // The pair served may have expired since it was loaded.
                Ok(leaf) => check_validity(&self.cert, leaf).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            },
            (None, Some(e)) => Err(format!("no serving certificate: {e}")),
            (None, None) => Err(format!(
                "no serving certificate loaded yet from {}",
                self.cert.display()
            )),
        }
    }

    fn refresh(&self) {
        let stamps = match (stamp(&self.cert), stamp(&self.key)) {
            (Ok(c), Ok(k)) => (c, k),
            (Err(e), _) | (_, Err(e)) => {
                let mut state = self.state.lock();
                if !state.missing {
                    state.missing = true;
                    count_read(true);
                }
                if state.pair.is_none() {
                    state.last_error = Some(format!(
                        "{} / {}: {e}",
                        self.cert.display(),
                        self.key.display()
                    ));
                }
                // Mid-rotation (a file briefly missing): keep serving what we have.
                return;
            }
        };
        let mut state = self.state.lock();
        state.missing = false;
        if state.seen.as_ref() == Some(&stamps) {
            return;
        }
        let loaded = fs::read(&stamps.0.resolved)
            .map_err(io_err(&self.cert))
            .and_then(|cert_pem| {
                let key_pem = fs::read(&stamps.1.resolved).map_err(io_err(&self.key))?;
                parse_pair(&self.cert, &cert_pem, &self.key, &key_pem)
            });
        count_read(loaded.is_err());
        state.seen = Some(stamps);
        match loaded {
            Ok(pair) => {
                state.pair = Some(Arc::new(pair));
                state.last_error = None;
                state.generation += 1;
                tracing::info!(
                    cert = %self.cert.display(),
                    generation = state.generation,
                    "serving certificate loaded"
                );
            }
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    "serving certificate files changed but do not load; keeping the previous pair"
                );
                state.last_error = Some(e.to_string());
            }
        }
    }
}

impl ResolvesServerCert for CertWatcher {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current()
    }
}

/// A rustls server configuration with the default [`TlsOptions`] (TLS 1.2 and 1.3, ALPN
/// http/1.1 only, no client certificates) serving the resolver's certificate (a
/// [`CertWatcher`]'s, for instance).
pub fn server_config(resolver: Arc<dyn ResolvesServerCert>) -> Result<Arc<ServerConfig>, TlsError> {
    TlsOptions::default().server_config(resolver)
}

/// A serving certificate and its key, in PEM.
#[derive(Debug, Clone)]
pub struct ServingCert {
    /// The certificate.
    pub cert_pem: String,
    /// The private key.
    pub key_pem: String,
    /// The issuing CA's certificate (for `caBundle` and clients).
    pub ca_pem: String,
}

impl ServingCert {
    /// Writes `tls.crt`, `tls.key` and `ca.crt` into `dir` (created if missing), each file
    /// replaced by a rename so that a reader never sees half a file.
    pub fn write_to_dir(&self, dir: &Path) -> Result<(), TlsError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        for (name, body) in [
            (CERT_FILE, &self.cert_pem),
            (KEY_FILE, &self.key_pem),
            (CA_FILE, &self.ca_pem),
        ] {
            let path = dir.join(name);
            let tmp = dir.join(format!(".{name}.tmp"));
            fs::write(&tmp, body).map_err(io_err(&tmp))?;
            fs::rename(&tmp, &path).map_err(io_err(&path))?;
        }
        Ok(())
    }
}

/// A certificate authority that issues serving certificates (for tests, local runs and
/// operators that manage their own webhook certificates).
pub struct CertificateAuthority {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    ca_pem: String,
}

impl std::fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAuthority")
            .finish_non_exhaustive()
    }
}

impl CertificateAuthority {
    /// Generates a CA named `common_name`.
    pub fn generate(common_name: &str) -> Result<Self, TlsError> {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key)?;
        Ok(CertificateAuthority {
            issuer: rcgen::Issuer::new(params, key),
            ca_pem: cert.pem(),
        })
    }

    /// The CA certificate in PEM (the `caBundle`).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// Issues a serving certificate for `hosts` (DNS names or IP addresses, e.g.
    /// `webhook.ns.svc`, `127.0.0.1`).
    pub fn issue(&self, hosts: &[&str]) -> Result<ServingCert, TlsError> {
        use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyPair};
        let key = KeyPair::generate()?;
        let mut params =
            CertificateParams::new(hosts.iter().map(|h| (*h).to_owned()).collect::<Vec<_>>())?;
        params.distinguished_name.push(
            DnType::CommonName,
            hosts.first().copied().unwrap_or("localhost"),
        );
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(ServingCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            ca_pem: self.ca_pem.clone(),
        })
    }
}

impl CertificateAuthority {
    /// Issues a client certificate (extended key usage `clientAuth`) for mutual TLS, with
    /// subject `CN=<common_name>` and, if given, `O=<organization>` (how Kubernetes reads a
    /// user name and a group from a client certificate). The pair comes in a [`ServingCert`]
    /// (`cert_pem`, `key_pem`, and this CA in `ca_pem`).
    pub fn issue_client(
        &self,
        common_name: &str,
        organization: Option<&str>,
    ) -> Result<ServingCert, TlsError> {
        use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyPair};
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        if let Some(org) = organization {
            params
                .distinguished_name
                .push(DnType::OrganizationName, org);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(ServingCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            ca_pem: self.ca_pem.clone(),
        })
    }
}

/// Just enough DER to read a certificate's validity period and subject.
mod der {
    /// One TLV: (tag, contents, rest).
    fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
        let (&tag, rest) = input.split_first()?;
        let (&first, rest) = rest.split_first()?;
        let (len, rest) = if first < 0x80 {
            (usize::from(first), rest)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return None;
            }
            let len = rest[..n]
                .iter()
                .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
            (len, &rest[n..])
        };
        if rest.len() < len {
            return None;
        }
        Some((tag, &rest[..len], &rest[len..]))
    }

    /// `(notBefore, notAfter)` in unix seconds.
    pub(super) fn validity(cert: &[u8]) -> Option<(i64, i64)> {
        let (0x30, cert, _) = tlv(cert)? else {
            return None;
        };
        let (0x30, tbs, _) = tlv(cert)? else {
            return None;
        };
        let mut rest = tbs;
        // [0] EXPLICIT version, optional.
        if rest.first() == Some(&0xa0) {
            rest = tlv(rest)?.2;
        }
        // serialNumber, signature, issuer.
        for _ in 0..3 {
            rest = tlv(rest)?.2;
        }
        let (0x30, validity, _) = tlv(rest)? else {
            return None;
        };
        let (t1, nb, rest) = tlv(validity)?;
        let (t2, na, _) = tlv(rest)?;
        Some((time(t1, nb)?, time(t2, na)?))
    }

    /// The subject of a certificate: its relative distinguished names in order, each with its
    /// attributes.
    pub(super) fn subject(cert: &[u8]) -> Option<Vec<Vec<crate::peer::NameAttribute>>> {
        let (0x30, cert, _) = tlv(cert)? else {
            return None;
        };
        let (0x30, tbs, _) = tlv(cert)? else {
            return None;
        };
        let mut rest = tbs;
        if rest.first() == Some(&0xa0) {
            rest = tlv(rest)?.2;
        }
        // serialNumber, signature, issuer, validity.
        for _ in 0..4 {
            rest = tlv(rest)?.2;
        }
        let (0x30, mut name, _) = tlv(rest)? else {
            return None;
        };
        let mut rdns = Vec::new();
        while !name.is_empty() {
            let (0x31, mut set, after) = tlv(name)? else {
                return None;
            };
            name = after;
            let mut rdn = Vec::new();
            while !set.is_empty() {
                let (0x30, atv, after) = tlv(set)? else {
                    return None;
                };
                set = after;
                let (0x06, oid, value) = tlv(atv)? else {
                    return None;
                };
                let (tag, text, _) = tlv(value)?;
                let (value, hex) = match tag {
                    // UTF8String, PrintableString, TeletexString, IA5String.
                    0x0c | 0x13 | 0x14 | 0x16 => {
                        (String::from_utf8_lossy(text).into_owned(), false)
                    }
                    // BMPString.
                    0x1e => {
                        let units: Vec<u16> = text
                            .chunks(2)
                            .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))
                            .collect();
                        (String::from_utf16_lossy(&units), false)
                    }
                    _ => {
                        let whole = &value[..value.len() - tlv(value)?.2.len()];
                        let hex: String = whole.iter().map(|b| format!("{b:02x}")).collect();
                        (format!("#{hex}"), true)
                    }
                };
                rdn.push(crate::peer::NameAttribute {
                    kind: attribute_kind(oid)?,
                    value,
                    hex,
                });
            }
            rdns.push(rdn);
        }
        Some(rdns)
    }

    /// The short name of an attribute type (RFC 4514's, plus `SERIALNUMBER`), else its dotted
    /// OID.
    fn attribute_kind(oid: &[u8]) -> Option<String> {
        let short = match oid {
            [0x55, 0x04, 0x03] => "CN",
            [0x55, 0x04, 0x05] => "SERIALNUMBER",
            [0x55, 0x04, 0x06] => "C",
            [0x55, 0x04, 0x07] => "L",
            [0x55, 0x04, 0x08] => "ST",
            [0x55, 0x04, 0x09] => "STREET",
            [0x55, 0x04, 0x0a] => "O",
            [0x55, 0x04, 0x0b] => "OU",
            [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19] => "DC",
            [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01] => "UID",
            _ => return dotted(oid),
        };
        Some(short.to_owned())
    }

    fn dotted(oid: &[u8]) -> Option<String> {
        let mut arcs: Vec<u64> = Vec::new();
        let mut acc: u64 = 0;
        for (i, b) in oid.iter().enumerate() {
            acc = acc.checked_mul(128)? | u64::from(b & 0x7f);
            if b & 0x80 == 0 {
                if arcs.is_empty() {
                    let first = (acc / 40).min(2);
                    arcs.push(first);
                    arcs.push(acc - first * 40);
                } else {
                    arcs.push(acc);
                }
                acc = 0;
            } else if i == oid.len() - 1 {
                return None;
            }
        }
        (!arcs.is_empty()).then(|| {
            arcs.iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(".")
        })
    }

    fn digits(s: &[u8]) -> Option<i64> {
        s.iter().try_fold(0i64, |acc, b| {
            b.is_ascii_digit().then(|| acc * 10 + i64::from(b - b'0'))
        })
    }

    /// UTCTime (`YYMMDDHHMMSSZ`) or GeneralizedTime (`YYYYMMDDHHMMSSZ`) to unix seconds.
    fn time(tag: u8, s: &[u8]) -> Option<i64> {
        let (year, rest) = match tag {
            0x17 if s.len() == 13 => {
                let yy = digits(s.get(..2)?)?;
                (if yy >= 50 { 1900 + yy } else { 2000 + yy }, s.get(2..)?)
            }
            0x18 if s.len() == 15 => (digits(s.get(..4)?)?, s.get(4..)?),
            _ => return None,
        };
        if rest.last() != Some(&b'Z') {
            return None;
        }
        let f = |i: usize| digits(rest.get(i..i + 2)?);
        let (month, day, h, m, sec) = (f(0)?, f(2)?, f(4)?, f(6)?, f(8)?);
        if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
            return None;
        }
        Some(days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + sec)
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date.
    fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
        let y = if m <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let mp = (m + 9) % 12;
        let doy = (153 * mp + 2) / 5 + d - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146_097 + doe - 719_468
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn times_parse() {
            assert_eq!(time(0x17, b"700101000000Z"), Some(0));
            assert_eq!(time(0x18, b"20000301000000Z"), Some(951_868_800));
            assert_eq!(time(0x17, b"491231235959Z"), Some(2_524_607_999));
            assert_eq!(time(0x17, b"70010100000Z"), None);
            assert_eq!(time(0x17, b"701301000000Z"), None);
            assert_eq!(time(0x18, b"2000030100000xZ"), None);
            assert_eq!(time(0x02, b"700101000000Z"), None);
        }

        #[test]
        fn garbage_does_not_parse() {
            for input in [&b""[..], b"\x30", b"\x30\x84\xff\xff\xff\xff", b"\x30\x00"] {
                assert_eq!(validity(input), None);
                assert_eq!(subject(input), None);
            }
        }

        #[test]
        fn oids_print_dotted() {
            assert_eq!(attribute_kind(&[0x55, 0x04, 0x0a]).as_deref(), Some("O"));
            // 1.2.840.113549.1.9.1 (emailAddress)
            assert_eq!(
                attribute_kind(&[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01]).as_deref(),
                Some("1.2.840.113549.1.9.1")
            );
            assert_eq!(dotted(&[0x2a, 0x86]), None);
        }
    }
}

#[cfg(test)]
mod tests;
