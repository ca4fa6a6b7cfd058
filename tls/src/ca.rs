//! A small certificate authority ([`CertificateAuthority`]) and the serving certificates it
//! issues ([`ServingCert`]), for tests, local runs and operators that manage their own webhook
//! certificates.

use std::fs;
use std::path::Path;

use crate::error::{TlsError, io_err};
use crate::{CA_FILE, CERT_FILE, KEY_FILE};

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
