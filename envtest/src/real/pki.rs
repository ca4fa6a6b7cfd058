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

/// The control plane's CA, kept for signing more client certificates ([`Pki::ca`]).
pub(crate) struct CertificateAuthority {
    params: CertificateParams,
    key: KeyPair,
}

impl CertificateAuthority {
    /// The CA of a control plane another process generated, from its key: the same
    /// distinguished name and usages as [`Pki::generate`] gives it, so that what it signs
    /// verifies against that process's CA certificate.
    pub fn from_key_pem(key_pem: &str) -> Result<CertificateAuthority, EnvtestError> {
        let key = KeyPair::from_pem(key_pem).map_err(prepare("the attached CA's key"))?;
        Ok(CertificateAuthority {
            params: ca_params()?,
            key,
        })
    }

    /// The CA's key (PEM).
    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// A fresh client certificate for user `name` in `groups` (the API server's x509
    /// authenticator reads CN as the user name and each O as a group), signed by this CA, and
    /// its key: `(certificate PEM, key PEM)`.
    ///
    /// rcgen keeps one value per attribute type, so the groups after the first are written
    /// under stand-in attribute types (2.5.4.64, 2.5.4.65, ...: encoded as long as O,
    /// 2.5.4.10), renamed to O afterwards, and the certificate signed again
    /// ([`rename_stand_ins`]). At most [`MAX_GROUPS`] groups.
    pub fn client_certificate(
        &self,
        name: &str,
        groups: &[&str],
    ) -> Result<(String, String), EnvtestError> {
        let what = format!("user {name}'s");
        let fail = |reason: String| EnvtestError::Prepare {
            what: format!("the {what} certificate"),
            reason,
        };
        if groups.len() > MAX_GROUPS {
            return Err(fail(format!(
                "{} groups; a user certificate carries at most {MAX_GROUPS}",
                groups.len()
            )));
        }
        let issuer = Issuer::from_params(&self.params, &self.key);
        let mut subject = vec![(DnType::CommonName, name)];
        for (i, group) in groups.iter().enumerate() {
            let ty = match i {
                0 => DnType::OrganizationName,
                i => DnType::CustomDnType(vec![2, 5, 4, STAND_IN_FIRST + i as u64 - 1]),
            };
            subject.push((ty, *group));
        }
        let (key, cert) = signed(
            &what,
            &issuer,
            Vec::new(),
            &[],
            &subject,
            ExtendedKeyUsagePurpose::ClientAuth,
        )?;
        let pem = match groups.len() {
            0 | 1 => cert.pem(),
            n => pem_certificate(&rename_stand_ins(cert.der(), n - 1, &self.key).map_err(fail)?),
        };
        Ok((pem, key.serialize_pem()))
    }
}

/// The last component of the first stand-in attribute type (2.5.4.64) for the second and later
/// organizations of a user certificate.
const STAND_IN_FIRST: u64 = 64;

/// The most groups a user certificate carries: one O, and one stand-in for each last
/// component up to 127 (encoded in one byte, as O's 10).
pub(crate) const MAX_GROUPS: usize = 1 + (128 - STAND_IN_FIRST) as usize;

/// One DER element of `bytes`: the tag at `start`, `header` bytes of tag and length, `len`
/// bytes of content.
#[derive(Debug, Clone, Copy)]
struct Element {
    tag: u8,
    start: usize,
    header: usize,
    len: usize,
}

impl Element {
    fn end(&self) -> usize {
        self.start + self.header + self.len
    }

    /// The element read at `start` of `bytes` (one-byte tags, definite lengths of up to 4
    /// bytes, as certificates have).
    fn at(bytes: &[u8], start: usize) -> Result<Element, String> {
        let truncated = || format!("the certificate is truncated at byte {start}");
        let tag = *bytes.get(start).ok_or_else(truncated)?;
        let first = *bytes.get(start + 1).ok_or_else(truncated)?;
        let (header, len) = if first < 0x80 {
            (2, first as usize)
        } else {
            let n = (first & 0x7f) as usize;
            if n == 0 || n > 4 {
                return Err(format!("unexpected DER length form at byte {start}"));
            }
            let digits = bytes.get(start + 2..start + 2 + n).ok_or_else(truncated)?;
            (
                2 + n,
                digits
                    .iter()
                    .fold(0usize, |acc, b| (acc << 8) | *b as usize),
            )
        };
        let element = Element {
            tag,
            start,
            header,
            len,
        };
        if element.end() > bytes.len() {
            return Err(truncated());
        }
        Ok(element)
    }
}

/// A DER element of `tag` holding `content`.
fn der(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    if content.len() < 0x80 {
        out.push(content.len() as u8);
    } else {
        let digits: Vec<u8> = content
            .len()
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | digits.len() as u8);
        out.extend(digits);
    }
    out.extend_from_slice(content);
    out
}

/// `cert` (DER, signed by `ca_key`) with the first `stand_ins` stand-in attribute types of its
/// subject renamed to O (2.5.4.10) and signed again by `ca_key` (ECDSA P-256 with SHA-256, as
/// [`Pki::generate`] makes it).
fn rename_stand_ins(cert: &[u8], stand_ins: usize, ca_key: &KeyPair) -> Result<Vec<u8>, String> {
    if ca_key.algorithm() != &rcgen::PKCS_ECDSA_P256_SHA256 {
        return Err("the CA key is not ECDSA P-256".into());
    }
    let outer = Element::at(cert, 0)?;
    let body = &cert[outer.start + outer.header..outer.end()];
    let tbs = Element::at(body, 0)?;
    let algorithm = Element::at(body, tbs.end())?;
    let mut tbs_bytes = body[tbs.start..tbs.end()].to_vec();
    // version [0], serialNumber, signature, issuer, validity, subject.
    let mut fields = Vec::new();
    let mut pos = tbs.header;
    while fields.len() < 6 && pos < tbs_bytes.len() {
        let field = Element::at(&tbs_bytes, pos)?;
        pos = field.end();
        fields.push(field);
    }
    let subject_index = if fields.first().is_some_and(|f| f.tag == 0xa0) {
        5
    } else {
        4
    };
    let subject = *fields
        .get(subject_index)
        .ok_or("the certificate has no subject")?;
    let region = &mut tbs_bytes[subject.start..subject.end()];
    for i in 0..stand_ins {
        // OBJECT IDENTIFIER, length 3, 2.5 (0x55), 4, the stand-in's last component.
        let needle = [0x06, 0x03, 0x55, 0x04, (STAND_IN_FIRST + i as u64) as u8];
        let hits: Vec<usize> = region
            .windows(needle.len())
            .enumerate()
            .filter(|(_, w)| *w == needle)
            .map(|(at, _)| at)
            .collect();
        let [at] = hits[..] else {
            return Err(format!(
                "the subject holds stand-in attribute 2.5.4.{} {} times",
                needle[4],
                hits.len()
            ));
        };
        region[at + 4] = 0x0a;
    }
    let rng = ring::rand::SystemRandom::new();
    let signer = ring::signature::EcdsaKeyPair::from_pkcs8(
        &ring::signature::ECDSA_P256_SHA256_ASN1_SIGNING,
        &ca_key.serialize_der(),
        &rng,
    )
    .map_err(|e| format!("the CA key: {e}"))?;
    let signature = signer
        .sign(&rng, &tbs_bytes)
        .map_err(|e| format!("signing: {e}"))?;
    let mut bits = vec![0u8];
    bits.extend_from_slice(signature.as_ref());
    let mut content = tbs_bytes;
    content.extend_from_slice(&body[algorithm.start..algorithm.end()]);
    content.extend(der(0x03, &bits));
    Ok(der(0x30, &content))
}

/// PEM text of a DER certificate.
fn pem_certificate(der: &[u8]) -> String {
    use base64::Engine;
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in text.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}

/// A CA of its own and a serving certificate for `127.0.0.1` and `localhost` it signed: the
/// HTTPS endpoint of the existing backend's proxy.
pub(crate) struct LoopbackTls {
    /// The CA certificate, PEM (for kubeconfigs).
    pub ca_cert: String,
    /// The CA certificate, DER (for clients' trust stores).
    pub ca_cert_der: Vec<u8>,
    /// The serving certificate, DER.
    pub cert_der: Vec<u8>,
    /// Its PKCS#8 key, DER.
    pub key_der: Vec<u8>,
}

impl LoopbackTls {
    /// A fresh CA and serving certificate (ECDSA P-256).
    pub fn generate() -> Result<LoopbackTls, EnvtestError> {
        let ca_key = KeyPair::generate().map_err(prepare("the proxy's CA key"))?;
        let mut ca =
            CertificateParams::new(Vec::<String>::new()).map_err(prepare("the proxy's CA"))?;
        ca.distinguished_name
            .push(DnType::CommonName, "kcr-envtest-proxy-ca");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key).map_err(prepare("the proxy's CA"))?;
        let issuer = Issuer::from_params(&ca, &ca_key);
        let (key, cert) = signed(
            "proxy's serving",
            &issuer,
            vec!["localhost".to_string()],
            &["127.0.0.1"],
            &[(DnType::CommonName, "kcr-envtest-proxy")],
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        Ok(LoopbackTls {
            ca_cert: ca_cert.pem(),
            ca_cert_der: ca_cert.der().to_vec(),
            cert_der: cert.der().to_vec(),
            key_der: key.serialize_der(),
        })
    }

    /// The rustls configuration that serves the certificate (HTTP/2 and HTTP/1.1 by ALPN).
    pub fn server_config(&self) -> Result<rustls::ServerConfig, EnvtestError> {
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
        let fail = |e: rustls::Error| EnvtestError::Prepare {
            what: "the proxy's TLS settings".into(),
            reason: e.to_string(),
        };
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()));
        let mut config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(fail)?
        .with_no_client_auth()
        .with_single_cert(vec![CertificateDer::from(self.cert_der.clone())], key)
        .map_err(fail)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// The parameters of a control plane's CA certificate.
fn ca_params() -> Result<CertificateParams, EnvtestError> {
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(prepare("the CA"))?;
    ca.distinguished_name
        .push(DnType::CommonName, "kcr-envtest-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(ca)
}

/// PEM texts of one control plane's credentials.
pub(crate) struct Pki {
    pub ca: CertificateAuthority,
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
        let ca = ca_params()?;
        let ca_cert = ca.self_signed(&ca_key).map_err(prepare("the CA"))?;
        let issuer = Issuer::from_params(&ca, &ca_key);

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
        drop(issuer);
        Ok(Pki {
            ca: CertificateAuthority {
                params: ca,
                key: ca_key,
            },
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

    /// The DER of a PEM certificate.
    fn der_of(pem: &str) -> Vec<u8> {
        use base64::Engine;
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap()
    }

    #[test]
    fn a_user_certificate_carries_every_group_as_an_organization_and_a_valid_signature() {
        let pki = Pki::generate().unwrap();
        let groups = ["team-a", "readers", "system:masters"];
        let (pem, key) = pki.ca.client_certificate("alice", &groups).unwrap();
        assert!(key.contains("PRIVATE KEY-----"), "{key}");
        assert_eq!(pem_certificate(&der_of(&pem)), pem);
        let cert = der_of(&pem);
        let outer = Element::at(&cert, 0).unwrap();
        assert_eq!(outer.end(), cert.len());
        let body = &cert[outer.start + outer.header..];
        let tbs = Element::at(body, 0).unwrap();
        let algorithm = Element::at(body, tbs.end()).unwrap();
        let bits = Element::at(body, algorithm.end()).unwrap();
        assert_eq!(bits.end(), body.len());
        // Signed by the CA over the renamed subject.
        let signature = &body[bits.start + bits.header + 1..bits.end()];
        ring::signature::UnparsedPublicKey::new(
            &ring::signature::ECDSA_P256_SHA256_ASN1,
            pki.ca.key.public_key_raw(),
        )
        .verify(&body[tbs.start..tbs.end()], signature)
        .expect("the CA's signature verifies");
        // Three O attributes, in order, and no stand-in left.
        let tbs_bytes = &body[tbs.start..tbs.end()];
        let organization = [0x06, 0x03, 0x55, 0x04, 0x0a];
        let at: Vec<usize> = tbs_bytes
            .windows(5)
            .enumerate()
            .filter(|(_, w)| *w == organization)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(at.len(), 3, "{at:?}");
        for (i, group) in groups.iter().enumerate() {
            let value = Element::at(tbs_bytes, at[i] + 5).unwrap();
            let text = &tbs_bytes[value.start + value.header..value.end()];
            assert_eq!(text, group.as_bytes());
        }
        for stand_in in STAND_IN_FIRST..128 {
            assert!(
                !tbs_bytes
                    .windows(5)
                    .any(|w| w == [0x06, 0x03, 0x55, 0x04, stand_in as u8]),
                "2.5.4.{stand_in} left"
            );
        }

        let many: Vec<String> = (0..=MAX_GROUPS).map(|i| format!("g{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let err = pki.ca.client_certificate("bob", &many).unwrap_err();
        assert!(err.to_string().contains("at most 65"), "{err}");
        assert!(
            pki.ca
                .client_certificate("bob", &many[..MAX_GROUPS])
                .is_ok()
        );
        // No group or one: rcgen's certificate as it is.
        assert!(pki.ca.client_certificate("carol", &[]).is_ok());
        assert!(pki.ca.client_certificate("dave", &["one"]).is_ok());
    }

    #[test]
    fn der_lengths_round_trip() {
        for len in [0usize, 1, 127, 128, 255, 256, 70_000] {
            let content = vec![7u8; len];
            let encoded = der(0x04, &content);
            let e = Element::at(&encoded, 0).unwrap();
            assert_eq!((e.tag, e.len, e.end()), (0x04, len, encoded.len()));
        }
        assert!(Element::at(&[0x30, 0x05, 1, 2], 0).is_err());
        assert!(Element::at(&[0x30], 0).is_err());
    }

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
