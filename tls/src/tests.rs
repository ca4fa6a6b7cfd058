use std::fs;
use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::*;

fn ca() -> CertificateAuthority {
    CertificateAuthority::generate("test CA").unwrap()
}

#[test]
fn loads_and_reloads_on_change_and_keeps_the_pair_on_a_broken_one() {
    let dir = tempfile::tempdir().unwrap();
    let ca = ca();
    let watcher = CertWatcher::from_dir(dir.path());
    // Nothing there yet: not ready, no pair.
    assert!(watcher.current().is_none());
    let err = watcher.check().unwrap_err();
    assert!(err.contains("tls.crt"), "{err}");
    assert!(matches!(watcher.load(), Err(TlsError::Io { .. })));

    ca.issue(&["localhost"])
        .unwrap()
        .write_to_dir(dir.path())
        .unwrap();
    let a = watcher.current().unwrap();
    assert_eq!(watcher.generation(), 1);
    watcher.check().unwrap();
    watcher.load().unwrap();
    // Unchanged: the same pair, no reload.
    assert!(Arc::ptr_eq(&a, &watcher.current().unwrap()));
    assert_eq!(watcher.generation(), 1);

    ca.issue(&["localhost"])
        .unwrap()
        .write_to_dir(dir.path())
        .unwrap();
    let b = watcher.current().unwrap();
    assert_eq!(watcher.generation(), 2);
    assert_ne!(a.cert[0].as_ref(), b.cert[0].as_ref());

    // A key of another certificate: refused, the previous pair keeps serving.
    let other = ca.issue(&["localhost"]).unwrap();
    fs::write(dir.path().join(KEY_FILE), &other.key_pem).unwrap();
    assert!(Arc::ptr_eq(&b, &watcher.current().unwrap()));
    assert_eq!(watcher.generation(), 2);
    // Readiness still holds: a valid pair is being served.
    watcher.check().unwrap();
    fs::write(dir.path().join(KEY_FILE), "garbage").unwrap();
    assert!(Arc::ptr_eq(&b, &watcher.current().unwrap()));
    let err = watcher.load().unwrap_err();
    assert!(
        matches!(
            err,
            TlsError::Pem {
                what: "private key",
                ..
            }
        ),
        "{err}"
    );
    // A missing file mid-rotation: still the previous pair.
    fs::remove_file(dir.path().join(KEY_FILE)).unwrap();
    assert!(Arc::ptr_eq(&b, &watcher.current().unwrap()));
    other.write_to_dir(dir.path()).unwrap();
    assert!(!Arc::ptr_eq(&b, &watcher.current().unwrap()));
    assert_eq!(watcher.generation(), 3);
}

/// The layout of a Secret volume: `tls.crt → ..data/tls.crt`, `..data → ..<timestamp>`,
/// rotated by renaming a new `..data` symlink over the old one.
#[cfg(unix)]
#[test]
fn follows_the_secret_volume_symlink_swap() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let ca = ca();
    let publish = |n: u32, cert: &ServingCert| {
        let ts = dir.path().join(format!("..2026_12_01_00_00_0{n}"));
        cert.write_to_dir(&ts).unwrap();
        let tmp = dir.path().join("..data_tmp");
        symlink(ts.file_name().unwrap(), &tmp).unwrap();
        fs::rename(&tmp, dir.path().join("..data")).unwrap();
    };
    let first = ca.issue(&["localhost"]).unwrap();
    publish(1, &first);
    for f in [CERT_FILE, KEY_FILE] {
        symlink(format!("..data/{f}"), dir.path().join(f)).unwrap();
    }
    let watcher = CertWatcher::from_dir(dir.path());
    let a = watcher.current().unwrap();
    let second = ca.issue(&["localhost"]).unwrap();
    publish(2, &second);
    let b = watcher.current().unwrap();
    assert_eq!(watcher.generation(), 2);
    assert_ne!(a.cert[0].as_ref(), b.cert[0].as_ref());
    let expected = CertificateDer::from_pem_slice(second.cert_pem.as_bytes()).unwrap();
    assert_eq!(b.cert[0].as_ref(), expected.as_ref());
}

#[test]
fn expired_certificates_are_refused() {
    use rcgen::{CertificateParams, KeyPair};
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.not_before = rcgen::date_time_ymd(2000, 1, 1);
    params.not_after = rcgen::date_time_ymd(2001, 1, 1);
    let cert = params.self_signed(&key).unwrap();
    let err = parse_pair(
        Path::new("c"),
        cert.pem().as_bytes(),
        Path::new("k"),
        key.serialize_pem().as_bytes(),
    )
    .unwrap_err();
    assert!(matches!(err, TlsError::Expired { .. }), "{err}");
    assert!(err.to_string().contains("expired at 978307200"), "{err}");
}

#[test]
fn empty_files_are_typed_errors() {
    let err = parse_pair(Path::new("c"), b"", Path::new("k"), b"").unwrap_err();
    assert!(
        matches!(
            err,
            TlsError::Pem {
                what: "certificate",
                ..
            }
        ),
        "{err}"
    );
    let pair = ca().issue(&["localhost"]).unwrap();
    let err = parse_pair(
        Path::new("c"),
        pair.cert_pem.as_bytes(),
        Path::new("k"),
        b"",
    )
    .unwrap_err();
    assert!(
        err.to_string().starts_with("k: no private key found"),
        "{err}"
    );
}

/// Runs a handshake between `client` and `server` in memory: Ok when both finish, else the
/// first error (the server's if it failed).
fn handshake(
    client: rustls::ClientConfig,
    server: Arc<ServerConfig>,
) -> Result<(rustls::ClientConnection, rustls::ServerConnection), rustls::Error> {
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut c = rustls::ClientConnection::new(Arc::new(client), name)?;
    let mut s = rustls::ServerConnection::new(server)?;
    for _ in 0..20 {
        let mut buf = Vec::new();
        while c.wants_write() {
            c.write_tls(&mut buf).unwrap();
        }
        if !buf.is_empty() {
            s.read_tls(&mut buf.as_slice()).unwrap();
            s.process_new_packets()?;
        }
        let mut buf = Vec::new();
        while s.wants_write() {
            s.write_tls(&mut buf).unwrap();
        }
        if !buf.is_empty() {
            c.read_tls(&mut buf.as_slice()).unwrap();
            c.process_new_packets()?;
        }
        if !c.is_handshaking() && !s.is_handshaking() {
            return Ok((c, s));
        }
    }
    panic!("the handshake did not finish");
}

fn client_config(
    ca_pem: &str,
    versions: &[&'static rustls::SupportedProtocolVersion],
    client_cert: Option<&ServingCert>,
) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(versions)
    .unwrap()
    .with_root_certificates(roots);
    let mut config = match client_cert {
        Some(c) => builder
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(c.cert_pem.as_bytes())
                    .map(Result::unwrap)
                    .collect(),
                PrivateKeyDer::from_pem_slice(c.key_pem.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config
}

fn serving(dir: &Path, ca: &CertificateAuthority) -> Arc<CertWatcher> {
    ca.issue(&["localhost"]).unwrap().write_to_dir(dir).unwrap();
    Arc::new(CertWatcher::from_dir(dir))
}

const BOTH: &[&rustls::SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];
const ONLY_12: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS12];

#[test]
fn http2_is_offered_only_when_enabled() {
    let dir = tempfile::tempdir().unwrap();
    let ca = ca();
    let certs = serving(dir.path(), &ca);
    let off = TlsOptions::default().server_config(certs.clone()).unwrap();
    assert!(!http2_offered(&off));
    let (c, _) = handshake(client_config(ca.ca_pem(), BOTH, None), off).unwrap();
    assert_eq!(c.alpn_protocol(), Some(&b"http/1.1"[..]));
    // A client offering only h2 is refused by ALPN.
    let mut h2_only = client_config(ca.ca_pem(), BOTH, None);
    h2_only.alpn_protocols = vec![b"h2".to_vec()];
    let off = server_config(certs.clone()).unwrap();
    let err = handshake(h2_only.clone(), off).unwrap_err();
    assert!(matches!(err, rustls::Error::NoApplicationProtocol), "{err}");

    let on = TlsOptions::default()
        .enable_http2(true)
        .server_config(certs)
        .unwrap();
    assert!(http2_offered(&on));
    let (c, _) = handshake(h2_only, on).unwrap();
    assert_eq!(c.alpn_protocol(), Some(&b"h2"[..]));
}

#[test]
fn minimum_version_refuses_older_clients() {
    let dir = tempfile::tempdir().unwrap();
    let ca = ca();
    let certs = serving(dir.path(), &ca);
    let default = TlsOptions::default().server_config(certs.clone()).unwrap();
    let (c, _) = handshake(client_config(ca.ca_pem(), ONLY_12, None), default).unwrap();
    assert_eq!(c.protocol_version(), Some(rustls::ProtocolVersion::TLSv1_2));
    let strict = TlsOptions::default()
        .min_version(TlsVersion::Tls13)
        .server_config(certs)
        .unwrap();
    assert!(handshake(client_config(ca.ca_pem(), ONLY_12, None), strict.clone()).is_err());
    let (c, _) = handshake(client_config(ca.ca_pem(), BOTH, None), strict).unwrap();
    assert_eq!(c.protocol_version(), Some(rustls::ProtocolVersion::TLSv1_3));
}

#[test]
fn cipher_suites_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let ca = ca();
    let certs = serving(dir.path(), &ca);
    // rcgen's keys are ECDSA: the ECDSA suite for TLS 1.2, a TLS 1.3 one by Go's name.
    let options = TlsOptions::default().cipher_suites([
        "TLS_AES_128_GCM_SHA256",
        "tls_ecdhe_ecdsa_with_aes_256_gcm_sha384",
    ]);
    let names: Vec<String> = options
        .selected_cipher_suites()
        .unwrap()
        .iter()
        .map(|s| format!("{:?}", s.suite()))
        .collect();
    assert_eq!(
        names,
        [
            "TLS13_AES_128_GCM_SHA256",
            "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
        ]
    );
    let config = options.server_config(certs.clone()).unwrap();
    let (c, _) = handshake(client_config(ca.ca_pem(), ONLY_12, None), config.clone()).unwrap();
    assert_eq!(
        format!("{:?}", c.negotiated_cipher_suite().unwrap().suite()),
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
    );
    let (c, _) = handshake(client_config(ca.ca_pem(), BOTH, None), config).unwrap();
    assert_eq!(
        format!("{:?}", c.negotiated_cipher_suite().unwrap().suite()),
        "TLS13_AES_128_GCM_SHA256"
    );

    let err = TlsOptions::default()
        .cipher_suites(["TLS_RSA_WITH_AES_128_CBC_SHA"])
        .server_config(certs.clone())
        .unwrap_err();
    match &err {
        TlsError::UnknownCipherSuite { name, known } => {
            assert_eq!(name, "TLS_RSA_WITH_AES_128_CBC_SHA");
            assert!(
                known.contains(&"TLS13_AES_256_GCM_SHA384".to_string()),
                "{known:?}"
            );
        }
        other => panic!("{other}"),
    }
    assert!(matches!(
        TlsOptions::default()
            .cipher_suites(Vec::<String>::new())
            .server_config(certs.clone()),
        Err(TlsError::NoCipherSuite { .. })
    ));
    // TLS 1.3 only, with only TLS 1.2 suites: nothing left.
    let err = TlsOptions::default()
        .min_version(TlsVersion::Tls13)
        .cipher_suites(["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"])
        .server_config(certs)
        .unwrap_err();
    assert!(matches!(err, TlsError::NoCipherSuite { .. }), "{err}");
}

#[test]
fn mutual_tls_requires_a_certificate_of_the_bundle_and_reloads_it() {
    let dir = tempfile::tempdir().unwrap();
    let ca = ca();
    let certs = serving(dir.path(), &ca);
    let clients_a = CertificateAuthority::generate("clients A").unwrap();
    let clients_b = CertificateAuthority::generate("clients B").unwrap();
    let bundle = dir.path().join("client-ca.crt");
    let options = TlsOptions::default().client_ca_file(&bundle);
    let watcher = options.client_ca_watcher().unwrap().clone();
    assert_eq!(options.client_ca_path(), Some(bundle.as_path()));
    let config = options.server_config(certs).unwrap();
    let alice = clients_a
        .issue_client("alice", Some("system:masters"))
        .unwrap();
    let bob = clients_b.issue_client("bob", None).unwrap();

    // No bundle yet: everyone is refused, and the check says why.
    assert!(watcher.check().unwrap_err().contains("client-ca.crt"));
    assert!(matches!(watcher.load(), Err(TlsError::Io { .. })));
    assert!(
        handshake(
            client_config(ca.ca_pem(), BOTH, Some(&alice)),
            config.clone()
        )
        .is_err()
    );

    fs::write(&bundle, clients_a.ca_pem()).unwrap();
    // Without a certificate, or with one of another CA: refused.
    let err = handshake(client_config(ca.ca_pem(), BOTH, None), config.clone()).unwrap_err();
    assert!(
        matches!(err, rustls::Error::NoCertificatesPresented),
        "{err:?}"
    );
    assert!(handshake(client_config(ca.ca_pem(), BOTH, Some(&bob)), config.clone()).is_err());
    // With one of the bundle's CA: served, over TLS 1.2 too; the subject is readable.
    for versions in [BOTH, ONLY_12] {
        let (_, s) = handshake(
            client_config(ca.ca_pem(), versions, Some(&alice)),
            config.clone(),
        )
        .unwrap();
        let peer = ClientCertificate::from_connection(&s).unwrap();
        assert_eq!(peer.common_name(), Some("alice"));
        assert_eq!(peer.organizations(), ["system:masters"]);
        assert_eq!(peer.subject(), "O=system:masters,CN=alice");
        assert_eq!(peer.chain().len(), 1);
    }
    assert_eq!(watcher.generation(), 1);
    watcher.check().unwrap();

    // A broken bundle keeps the previous one.
    fs::write(&bundle, "not a certificate").unwrap();
    assert!(
        handshake(
            client_config(ca.ca_pem(), BOTH, Some(&alice)),
            config.clone()
        )
        .is_ok()
    );
    assert!(matches!(watcher.load(), Err(TlsError::Pem { .. })));
    assert_eq!(watcher.generation(), 1);

    // Rotation to B's CA (by rename, as a volume does): B's clients in, A's out.
    let tmp = dir.path().join(".client-ca.tmp");
    fs::write(&tmp, clients_b.ca_pem()).unwrap();
    fs::rename(&tmp, &bundle).unwrap();
    let (_, s) = handshake(client_config(ca.ca_pem(), BOTH, Some(&bob)), config.clone()).unwrap();
    assert_eq!(
        ClientCertificate::from_connection(&s).unwrap().subject(),
        "CN=bob"
    );
    assert_eq!(watcher.generation(), 2);
    assert!(
        handshake(
            client_config(ca.ca_pem(), BOTH, Some(&alice)),
            config.clone()
        )
        .is_err()
    );
    // A bundle of both CAs: both in.
    fs::write(
        &bundle,
        format!("{}{}", clients_a.ca_pem(), clients_b.ca_pem()),
    )
    .unwrap();
    assert!(
        handshake(
            client_config(ca.ca_pem(), BOTH, Some(&alice)),
            config.clone()
        )
        .is_ok()
    );
    assert!(handshake(client_config(ca.ca_pem(), BOTH, Some(&bob)), config).is_ok());
    assert_eq!(watcher.certificates(), 2);
}

#[test]
fn subjects_render_as_rfc_4514() {
    let ca = ca();
    let c = ca.issue_client("a,b+c", Some("#x ")).unwrap();
    let der = CertificateDer::from_pem_slice(c.cert_pem.as_bytes()).unwrap();
    let peer = ClientCertificate::from_chain(vec![der]).unwrap();
    assert_eq!(peer.subject(), "O=\\#x\\ ,CN=a\\,b\\+c");
    assert_eq!(peer.common_name(), Some("a,b+c"));
    assert!(ClientCertificate::from_chain(Vec::new()).is_none());
    assert!(ClientCertificate::from_chain(vec![CertificateDer::from(vec![0x30, 0x00])]).is_none());
}

#[test]
fn certificate_reads_are_counted() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    // A snapshot drains the counters: add up what each one saw.
    let seen = std::cell::Cell::new((None::<u64>, None::<u64>));
    let counts = || {
        let (mut total, mut errors) = seen.get();
        for (key, _, _, value) in snapshotter.snapshot().into_vec() {
            let DebugValue::Counter(n) = value else {
                continue;
            };
            match key.key().name() {
                READ_CERTIFICATE_TOTAL => total = Some(total.unwrap_or(0) + n),
                READ_CERTIFICATE_ERRORS_TOTAL => errors = Some(errors.unwrap_or(0) + n),
                _ => {}
            }
        }
        seen.set((total, errors));
        (total.expect("registered"), errors.expect("registered"))
    };
    metrics::with_local_recorder(&recorder, || {
        let dir = tempfile::tempdir().unwrap();
        let ca = ca();
        let watcher = CertWatcher::from_dir(dir.path());
        // Registered at 0 when the watcher is created.
        assert_eq!(counts(), (0, 0));
        // Missing files: one failed read, however often it is checked.
        assert!(watcher.current().is_none());
        assert!(watcher.check().is_err());
        assert_eq!(counts(), (1, 1));
        ca.issue(&["localhost"])
            .unwrap()
            .write_to_dir(dir.path())
            .unwrap();
        watcher.current().unwrap();
        watcher.current().unwrap();
        watcher.check().unwrap();
        assert_eq!(counts(), (2, 1), "unchanged files are not read again");
        fs::write(dir.path().join(KEY_FILE), "garbage").unwrap();
        watcher.current().unwrap();
        assert_eq!(counts(), (3, 2));
        assert!(watcher.load().is_err());
        assert_eq!(counts(), (4, 3), "load reads again for its typed error");
        ca.issue(&["localhost"])
            .unwrap()
            .write_to_dir(dir.path())
            .unwrap();
        watcher.load().unwrap();
        assert_eq!(counts(), (5, 3));
    });
}
