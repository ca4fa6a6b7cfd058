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
