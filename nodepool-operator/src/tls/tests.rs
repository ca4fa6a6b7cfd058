use super::*;

#[test]
fn generated_pair_loads_and_reloads_on_change() {
    let dir = tempfile::tempdir().unwrap();
    let first = SelfSigned::generate(&["localhost", "127.0.0.1"]).unwrap();
    first.write_to_dir(dir.path()).unwrap();
    let resolver = ReloadingCertResolver::from_dir(dir.path()).unwrap();
    assert_eq!(resolver.generation(), 1);
    let a = resolver.current();
    // Unchanged files: same key object, no reload.
    assert!(Arc::ptr_eq(&a, &resolver.current()));
    assert_eq!(resolver.generation(), 1);

    // Rotation.
    let second = SelfSigned::generate(&["localhost"]).unwrap();
    second.write_to_dir(dir.path()).unwrap();
    let b = resolver.current();
    assert_eq!(resolver.generation(), 2);
    assert_ne!(a.cert[0].as_ref(), b.cert[0].as_ref());

    // A broken rotation keeps the previous pair.
    fs::write(dir.path().join(KEY_FILE), "garbage").unwrap();
    let c = resolver.current();
    assert!(Arc::ptr_eq(&b, &c));
    assert_eq!(resolver.generation(), 2);
    // Restoring the pair being served is no change at all.
    second.write_to_dir(dir.path()).unwrap();
    assert!(Arc::ptr_eq(&b, &resolver.current()));
    assert_eq!(resolver.generation(), 2);
    // ...and a good new pair is picked up.
    SelfSigned::generate(&["localhost"])
        .unwrap()
        .write_to_dir(dir.path())
        .unwrap();
    assert!(!Arc::ptr_eq(&b, &resolver.current()));
    assert_eq!(resolver.generation(), 3);
}

#[test]
fn missing_or_empty_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let err = ReloadingCertResolver::from_dir(dir.path()).unwrap_err();
    assert!(matches!(err, TlsError::Io { .. }), "{err}");
    assert!(err.to_string().contains("tls.crt"));
    fs::write(dir.path().join(CERT_FILE), "").unwrap();
    fs::write(dir.path().join(KEY_FILE), "").unwrap();
    let err = ReloadingCertResolver::from_dir(dir.path()).unwrap_err();
    assert!(
        matches!(
            err,
            TlsError::Empty {
                what: "certificate",
                ..
            }
        ),
        "{err}"
    );
    let pair = SelfSigned::generate(&["localhost"]).unwrap();
    fs::write(dir.path().join(CERT_FILE), &pair.cert_pem).unwrap();
    let err = ReloadingCertResolver::from_dir(dir.path()).unwrap_err();
    assert!(
        matches!(
            err,
            TlsError::Empty {
                what: "private key",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn server_config_builds() {
    let dir = tempfile::tempdir().unwrap();
    SelfSigned::generate(&["localhost"])
        .unwrap()
        .write_to_dir(dir.path())
        .unwrap();
    let resolver = Arc::new(ReloadingCertResolver::from_dir(dir.path()).unwrap());
    let config = server_config(resolver).unwrap();
    assert_eq!(config.alpn_protocols.len(), 2);
}
