//! [`CertWatcher`]: the serving certificate and key from files, reloaded when they change,
//! as a rustls certificate resolver; [`server_config`] serves it.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use rustls::ServerConfig;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::counters::count_read;
use crate::counters::register_metrics;
use crate::error::{TlsError, io_err};
use crate::pair::{FileStamp, check_validity, parse_pair, stamp};
use crate::{CERT_FILE, KEY_FILE, TlsOptions};

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
/// change: see the [crate docs](crate).
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
    /// The certificate-read counters ([`READ_CERTIFICATE_TOTAL`](crate::READ_CERTIFICATE_TOTAL),
    /// [`READ_CERTIFICATE_ERRORS_TOTAL`](crate::READ_CERTIFICATE_ERRORS_TOTAL)) are registered at 0 with the `metrics` recorder
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
