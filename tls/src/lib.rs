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

mod ca;
pub mod client_ca;
mod counters;
mod der;
mod error;
pub mod options;
mod pair;
pub mod peer;
pub mod serve;
mod watcher;

pub use ca::{CertificateAuthority, ServingCert};
pub use client_ca::ClientCaWatcher;
pub use counters::{READ_CERTIFICATE_ERRORS_TOTAL, READ_CERTIFICATE_TOTAL, register_metrics};
pub use error::TlsError;
pub use options::{ALPN_H2, ALPN_HTTP1, TlsOptions, TlsVersion, http2_offered};
pub use pair::parse_pair;
pub use peer::{ClientCertificate, NameAttribute};
pub use serve::{Connection, ServeOptions, serve_https};
pub use watcher::{CertWatcher, server_config};

/// File name of the serving certificate chain in a certificate directory.
pub const CERT_FILE: &str = "tls.crt";
/// File name of the serving key in a certificate directory.
pub const KEY_FILE: &str = "tls.key";
/// File name of the CA certificate in a certificate directory.
pub const CA_FILE: &str = "ca.crt";

#[cfg(test)]
mod tests;
