//! A certificate and its key read from PEM files ([`parse_pair`]), checked for validity now,
//! and the stamp that tells whether a file changed.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

use crate::der;
use crate::error::TlsError;

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

pub(crate) fn check_validity(path: &Path, leaf: &CertificateDer<'_>) -> Result<(), TlsError> {
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
