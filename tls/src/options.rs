//! [`TlsOptions`]: the TLS settings every kcr HTTPS server takes (the webhook server, the
//! secured metrics endpoint), and the rustls [`ServerConfig`] they make.
//!
//! | option | default | what it does |
//! |---|---|---|
//! | [`enable_http2`](TlsOptions::enable_http2) | off | ALPN offers `http/1.1` only and the server speaks HTTP/1 only (an HTTP/2 preface, negotiated or sent with prior knowledge, ends the connection); on: ALPN offers `h2` first |
//! | [`min_version`](TlsOptions::min_version) | TLS 1.2 | the oldest protocol version accepted |
//! | [`cipher_suites`](TlsOptions::cipher_suites) | rustls' (ring) defaults | the suites offered, by name, among the provider's |
//! | [`client_ca_file`](TlsOptions::client_ca_file) | none | mutual TLS: a client must present a certificate signed by a CA of this PEM bundle, or the handshake fails; the bundle is re-read when the file changes ([`ClientCaWatcher`]) |
//!
//! HTTP/2 is off by default as in kubebuilder's scaffold since the HTTP/2 "rapid reset"
//! attacks (CVE-2023-44487, CVE-2023-39325): the API server calls webhooks over HTTP/1.1 anyway,
//! and Prometheus scrapes over HTTP/1.1.
//!
//! Cipher suite names are those of rustls and IANA (`TLS13_AES_128_GCM_SHA256`,
//! `TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`; Go's `crypto/tls` names the TLS 1.2 suites the same
//! way, and its TLS 1.3 names `TLS_AES_128_GCM_SHA256` are accepted too). rustls implements only
//! AEAD suites with forward secrecy: the CBC and RSA key-exchange suites Go still knows are not
//! available and are refused as unknown ([`TlsError::UnknownCipherSuite`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::ResolvesServerCert;
use rustls::{ServerConfig, SupportedCipherSuite, SupportedProtocolVersion};

use crate::TlsError;
use crate::client_ca::ClientCaWatcher;

/// ALPN protocol id of HTTP/2.
pub const ALPN_H2: &[u8] = b"h2";
/// ALPN protocol id of HTTP/1.1.
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

/// A TLS protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum TlsVersion {
    /// TLS 1.2 (and 1.3): the default minimum.
    #[default]
    Tls12,
    /// TLS 1.3 only.
    Tls13,
}

static FROM_TLS12: [&SupportedProtocolVersion; 2] =
    [&rustls::version::TLS13, &rustls::version::TLS12];
static FROM_TLS13: [&SupportedProtocolVersion; 1] = [&rustls::version::TLS13];

impl TlsVersion {
    fn versions(self) -> &'static [&'static SupportedProtocolVersion] {
        match self {
            TlsVersion::Tls12 => &FROM_TLS12,
            TlsVersion::Tls13 => &FROM_TLS13,
        }
    }
}

/// The TLS settings of a kcr HTTPS server: see the [module docs](self).
///
/// ```
/// use kcr_tls::{TlsOptions, TlsVersion};
/// let options = TlsOptions::default()
///     .min_version(TlsVersion::Tls13)
///     .client_ca_file("/etc/webhook/client-ca/ca.crt");
/// assert!(!options.http2_enabled());
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct TlsOptions {
    http2: bool,
    min_version: TlsVersion,
    cipher_suites: Option<Vec<String>>,
    client_ca: Option<Arc<ClientCaWatcher>>,
}

impl TlsOptions {
    /// The defaults: HTTP/1.1 only, TLS 1.2 and 1.3, rustls' cipher suites, no client
    /// certificates.
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves HTTP/2 too (ALPN `h2`, and the HTTP/2 preface with prior knowledge); off by
    /// default.
    pub fn enable_http2(mut self, enable: bool) -> Self {
        self.http2 = enable;
        self
    }

    /// The oldest TLS version accepted (default 1.2).
    pub fn min_version(mut self, version: TlsVersion) -> Self {
        self.min_version = version;
        self
    }

    /// Offers only these cipher suites (names as in the [module docs](self)); checked when the
    /// configuration is built ([`server_config`](Self::server_config)).
    pub fn cipher_suites<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.cipher_suites = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Requires client certificates signed by a CA of the PEM bundle at `path` (mutual TLS),
    /// re-read when the file changes.
    pub fn client_ca_file(self, path: impl Into<PathBuf>) -> Self {
        self.client_ca(Arc::new(ClientCaWatcher::new(path.into())))
    }

    /// Requires client certificates verified by `watcher` (shared, e.g. to read its
    /// [`generation`](ClientCaWatcher::generation) or use it as a readiness check).
    pub fn client_ca(mut self, watcher: Arc<ClientCaWatcher>) -> Self {
        self.client_ca = Some(watcher);
        self
    }

    /// Whether HTTP/2 is served.
    pub fn http2_enabled(&self) -> bool {
        self.http2
    }

    /// The minimum TLS version.
    pub fn min_tls_version(&self) -> TlsVersion {
        self.min_version
    }

    /// The client CA watcher, when mutual TLS is on.
    pub fn client_ca_watcher(&self) -> Option<&Arc<ClientCaWatcher>> {
        self.client_ca.as_ref()
    }

    /// The client CA bundle file, when mutual TLS is on.
    pub fn client_ca_path(&self) -> Option<&Path> {
        self.client_ca.as_deref().map(ClientCaWatcher::path)
    }

    /// The cipher suites these options select from the ring provider, in the provider's order
    /// of preference.
    pub fn selected_cipher_suites(&self) -> Result<Vec<SupportedCipherSuite>, TlsError> {
        let all = rustls::crypto::ring::default_provider().cipher_suites;
        let Some(names) = &self.cipher_suites else {
            return Ok(all);
        };
        if names.is_empty() {
            return Err(TlsError::NoCipherSuite {
                reason: "the list of cipher suites is empty".into(),
            });
        }
        let mut wanted = Vec::with_capacity(names.len());
        for name in names {
            let found = all.iter().find(|s| suite_matches(s, name)).ok_or_else(|| {
                TlsError::UnknownCipherSuite {
                    name: name.clone(),
                    known: all.iter().map(suite_name).collect(),
                }
            })?;
            wanted.push(found.suite());
        }
        Ok(all
            .into_iter()
            .filter(|s| wanted.contains(&s.suite()))
            .collect())
    }

    /// The rustls configuration serving the resolver's certificate (a
    /// [`CertWatcher`](crate::CertWatcher)'s) with these options.
    pub fn server_config(
        &self,
        resolver: Arc<dyn ResolvesServerCert>,
    ) -> Result<Arc<ServerConfig>, TlsError> {
        let suites = self.selected_cipher_suites()?;
        let versions = self.min_version.versions();
        if !suites.iter().any(|s| versions.contains(&s.version())) {
            return Err(TlsError::NoCipherSuite {
                reason: format!(
                    "none of the cipher suites chosen works with {:?} or later",
                    self.min_version
                ),
            });
        }
        let provider = Arc::new(CryptoProvider {
            cipher_suites: suites,
            ..rustls::crypto::ring::default_provider()
        });
        let builder =
            ServerConfig::builder_with_provider(provider).with_protocol_versions(versions)?;
        let builder = match &self.client_ca {
            Some(ca) => builder.with_client_cert_verifier(ca.clone()),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(resolver);
        config.alpn_protocols = if self.http2 {
            vec![ALPN_H2.to_vec(), ALPN_HTTP1.to_vec()]
        } else {
            vec![ALPN_HTTP1.to_vec()]
        };
        Ok(Arc::new(config))
    }
}

/// Whether a server with `config` should speak HTTP/2: when its ALPN list offers `h2` (so a
/// server given a configuration by [`TlsOptions::server_config`] follows
/// [`TlsOptions::enable_http2`]).
pub fn http2_offered(config: &ServerConfig) -> bool {
    config.alpn_protocols.iter().any(|p| p == ALPN_H2)
}

fn suite_name(suite: &SupportedCipherSuite) -> String {
    format!("{:?}", suite.suite())
}

fn suite_matches(suite: &SupportedCipherSuite, name: &str) -> bool {
    let own = suite_name(suite);
    if own.eq_ignore_ascii_case(name) {
        return true;
    }
    // Go's (and IANA's) TLS 1.3 names: TLS_AES_128_GCM_SHA256 for rustls' TLS13_AES_128_GCM_SHA256.
    own.strip_prefix("TLS13_").is_some_and(|rest| {
        name.strip_prefix("TLS_")
            .is_some_and(|n| n.eq_ignore_ascii_case(rest))
    })
}
