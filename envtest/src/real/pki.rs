//! The certificates and keys of one real control plane, generated at start: a CA, the API
//! server's serving certificate, an admin client certificate (group `system:masters`) and the
//! service-account signing key.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

use crate::error::EnvtestError;

/// The user name of the admin credential (in group `system:masters`, bound to `cluster-admin`).
pub const ADMIN_USER: &str = "kcr-envtest-admin";

/// PEM texts of one control plane's credentials.
pub(crate) struct Pki {
    pub ca_cert: String,
    pub ca_cert_der: Vec<u8>,
    pub admin_cert_der: Vec<u8>,
    pub admin_key_der: Vec<u8>,
    pub serving_cert: String,
    pub serving_key: String,
    pub admin_cert: String,
    pub admin_key: String,
    pub service_account_key: String,
    pub service_account_public_key: String,
}

/// Paths of the files [`Pki::write`] wrote.
pub(crate) struct PkiFiles {
    pub ca_cert: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub service_account_key: PathBuf,
    pub service_account_public_key: PathBuf,
}

fn prepare(what: &str) -> impl Fn(rcgen::Error) -> EnvtestError + '_ {
    move |e| EnvtestError::Prepare {
        what: what.to_string(),
        reason: e.to_string(),
    }
}

/// A fresh key and its certificate signed by `issuer`: DNS names `dns`, IP addresses `ips`,
/// subject `subject`, extended key usage `usage`. `what` names the
/// credential in errors (`the <what> key`, `the <what> certificate`).
fn signed(
    what: &str,
    issuer: &Issuer<'_, &KeyPair>,
    dns: Vec<String>,
    ips: &[&str],
    subject: &[(DnType, &str)],
    usage: ExtendedKeyUsagePurpose,
) -> Result<(KeyPair, Certificate), EnvtestError> {
    let (key_what, cert_what) = (format!("the {what} key"), format!("the {what} certificate"));
    let key = KeyPair::generate().map_err(prepare(&key_what))?;
    let mut params = CertificateParams::new(dns).map_err(prepare(&cert_what))?;
    for ip in ips {
        if let Ok(ip) = ip.parse() {
            params.subject_alt_names.push(SanType::IpAddress(ip));
        }
    }
    for (field, value) in subject {
        params.distinguished_name.push(field.clone(), *value);
    }
    params.extended_key_usages = vec![usage];
    let cert = params
        .signed_by(&key, issuer)
        .map_err(prepare(&cert_what))?;
    Ok((key, cert))
}

impl Pki {
    /// Fresh keys and certificates (ECDSA P-256).
    pub fn generate() -> Result<Pki, EnvtestError> {
        let ca_key = KeyPair::generate().map_err(prepare("the CA key"))?;
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(prepare("the CA"))?;
        ca.distinguished_name
            .push(DnType::CommonName, "kcr-envtest-ca");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key).map_err(prepare("the CA"))?;
        let issuer = Issuer::new(ca, &ca_key);

        let (serving_key, serving_cert) = signed(
            "serving",
            &issuer,
            vec![
                "localhost".to_string(),
                "kubernetes".to_string(),
                "kubernetes.default".to_string(),
                "kubernetes.default.svc".to_string(),
                "kubernetes.default.svc.cluster.local".to_string(),
            ],
            &["127.0.0.1", "10.0.0.1"],
            &[(DnType::CommonName, "kube-apiserver")],
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        let (admin_key, admin_cert) = signed(
            "admin",
            &issuer,
            Vec::new(),
            &[],
            &[
                (DnType::CommonName, ADMIN_USER),
                (DnType::OrganizationName, "system:masters"),
            ],
            ExtendedKeyUsagePurpose::ClientAuth,
        )?;

        let sa_key = KeyPair::generate().map_err(prepare("the service-account key"))?;
        Ok(Pki {
            ca_cert: ca_cert.pem(),
            ca_cert_der: ca_cert.der().to_vec(),
            admin_cert_der: admin_cert.der().to_vec(),
            admin_key_der: admin_key.serialize_der(),
            serving_cert: serving_cert.pem(),
            serving_key: serving_key.serialize_pem(),
            admin_cert: admin_cert.pem(),
            admin_key: admin_key.serialize_pem(),
            service_account_key: sa_key.serialize_pem(),
            service_account_public_key: sa_key.public_key_pem(),
        })
    }

    /// Write the files the processes read into `dir` (keys readable by the owner only).
    pub fn write(&self, dir: &Path) -> Result<PkiFiles, EnvtestError> {
        let write = |name: &str, text: &str| -> Result<PathBuf, EnvtestError> {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(|e| EnvtestError::Prepare {
                what: path.display().to_string(),
                reason: e.to_string(),
            })?;
            #[cfg(unix)]
            if name.ends_with(".key") {
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
            }
            Ok(path)
        };
        Ok(PkiFiles {
            ca_cert: write("ca.crt", &self.ca_cert)?,
            serving_cert: write("apiserver.crt", &self.serving_cert)?,
            serving_key: write("apiserver.key", &self.serving_key)?,
            service_account_key: write("sa.key", &self.service_account_key)?,
            service_account_public_key: write("sa.pub", &self.service_account_public_key)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_pem_credentials_that_write_to_files() {
        let pki = Pki::generate().unwrap();
        for pem in [&pki.ca_cert, &pki.serving_cert, &pki.admin_cert] {
            assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
        }
        for pem in [&pki.serving_key, &pki.admin_key, &pki.service_account_key] {
            assert!(pem.contains("PRIVATE KEY-----"), "{pem}");
        }
        assert!(pki.service_account_public_key.contains("PUBLIC KEY-----"));
        let dir = tempfile::tempdir().unwrap();
        let files = pki.write(dir.path()).unwrap();
        assert_eq!(std::fs::read_to_string(files.ca_cert).unwrap(), pki.ca_cert);
        assert!(files.serving_key.is_file());
        let err = match pki.write(&dir.path().join("missing")) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("writing into a missing directory succeeded"),
        };
        assert!(err.contains("missing"), "{err}");
    }
}
