//! [`ClientCaWatcher`]: the client-CA bundle of mutual TLS, re-read when its file changes.
//!
//! It is a rustls client-certificate verifier: every client must present a certificate that
//! chains to a CA of the bundle (and is valid now, for client authentication), or the handshake
//! fails. The bundle file is checked at each handshake the way [`CertWatcher`](crate::CertWatcher)
//! checks the serving pair (resolved path, inode, size, modification time; a Secret or
//! ConfigMap volume's `..data` swap included) and read again only when it changed. A bundle that
//! does not load (no certificate in it, half-written) is logged and the previous bundle keeps
//! verifying; until a bundle has loaded, every client is refused and
//! [`check`](ClientCaWatcher::check) says why.
//!
//! The server sends no list of acceptable CA names in its certificate request (the list may
//! change with the bundle): clients send the certificate they have, as Go's and rustls' clients
//! do when the list is empty.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};

use crate::error::{TlsError, io_err};
use crate::pair::{FileStamp, stamp};

#[derive(Debug, Default)]
struct State {
    verifier: Option<Arc<dyn ClientCertVerifier>>,
    seen: Option<FileStamp>,
    last_error: Option<String>,
    generation: u64,
    certificates: usize,
}

/// A client-certificate verifier over a CA bundle file, reloaded when it changes: see the
/// [module docs](self).
#[derive(Debug)]
pub struct ClientCaWatcher {
    path: PathBuf,
    state: Mutex<State>,
}

/// Parses a PEM bundle of CA certificates into a verifier requiring a client certificate.
fn parse_bundle(path: &Path, pem: &[u8]) -> Result<(Arc<dyn ClientCertVerifier>, usize), TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            path: path.to_owned(),
            what: "certificate",
            detail: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            path: path.to_owned(),
            what: "certificate",
            detail: "the CA bundle holds no CERTIFICATE block".into(),
        });
    }
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots.add(cert).map_err(|e| TlsError::ClientCa {
            path: path.to_owned(),
            detail: format!("a CA certificate is not usable: {e}"),
        })?;
    }
    let count = roots.len();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| TlsError::ClientCa {
            path: path.to_owned(),
            detail: e.to_string(),
        })?;
    Ok((verifier, count))
}

impl ClientCaWatcher {
    /// Watches the PEM bundle at `path`. Nothing is read yet: the first handshake (or
    /// [`check`](Self::check), [`load`](Self::load)) reads it.
    pub fn new(path: PathBuf) -> Self {
        ClientCaWatcher {
            path,
            state: Mutex::new(State::default()),
        }
    }

    /// The bundle file watched.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many bundles have loaded so far (0 before the first).
    pub fn generation(&self) -> u64 {
        self.state.lock().generation
    }

    /// How many CA certificates the bundle in use holds (0 before the first load).
    pub fn certificates(&self) -> usize {
        self.state.lock().certificates
    }

    /// Loads the bundle now; an error if it does not load (for a start-up that must fail
    /// fast).
    pub fn load(&self) -> Result<(), TlsError> {
        self.refresh();
        let state = self.state.lock();
        if state.verifier.is_some() && state.last_error.is_none() {
            return Ok(());
        }
        drop(state);
        let pem = fs::read(&self.path).map_err(io_err(&self.path))?;
        parse_bundle(&self.path, &pem).map(|_| ())
    }

    /// Ok when a bundle is in use (the file is checked for changes first); else why not.
    pub fn check(&self) -> Result<(), String> {
        self.refresh();
        let state = self.state.lock();
        match (&state.verifier, &state.last_error) {
            (Some(_), _) => Ok(()),
            (None, Some(e)) => Err(format!("no client CA bundle: {e}")),
            (None, None) => Err(format!(
                "no client CA bundle loaded yet from {}",
                self.path.display()
            )),
        }
    }

    fn current(&self) -> Option<Arc<dyn ClientCertVerifier>> {
        self.refresh();
        self.state.lock().verifier.clone()
    }

    fn refresh(&self) {
        let seen = match stamp(&self.path) {
            Ok(s) => s,
            Err(e) => {
                let mut state = self.state.lock();
                if state.verifier.is_none() {
                    state.last_error = Some(format!("{}: {e}", self.path.display()));
                }
                // Mid-rotation: keep verifying with the bundle we have.
                return;
            }
        };
        let mut state = self.state.lock();
        if state.seen.as_ref() == Some(&seen) {
            return;
        }
        let loaded = fs::read(&seen.resolved)
            .map_err(io_err(&self.path))
            .and_then(|pem| parse_bundle(&self.path, &pem));
        state.seen = Some(seen);
        match loaded {
            Ok((verifier, count)) => {
                state.verifier = Some(verifier);
                state.certificates = count;
                state.last_error = None;
                state.generation += 1;
                tracing::info!(
                    path = %self.path.display(),
                    certificates = count,
                    generation = state.generation,
                    "client CA bundle loaded"
                );
            }
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    "client CA bundle changed but does not load; keeping the previous one"
                );
                state.last_error = Some(e.to_string());
            }
        }
    }
}

impl ClientCertVerifier for ClientCaWatcher {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        match self.current() {
            Some(verifier) => verifier.verify_client_cert(end_entity, intermediates, now),
            None => Err(rustls::Error::General(format!(
                "no client CA bundle loaded from {}",
                self.path.display()
            ))),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &rustls::crypto::ring::default_provider().signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &rustls::crypto::ring::default_provider().signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}
