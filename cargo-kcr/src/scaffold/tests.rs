//! The scaffolder's generation: the files written, every placeholder filled, bad input and
//! reruns refused without a change.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::scaffold::{ApiOptions, InitOptions, KcrSource, ScaffoldError, create_api, init};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Every file under `dir` and its text.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                out.insert(path, text);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, &mut out);
    out
}

/// The workspace's root: a kcr checkout.
fn kcr_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn project(tmp: &Path) -> Result<PathBuf, ScaffoldError> {
    let dir = tmp.join("memcached-operator");
    init(&InitOptions {
        dir: dir.clone(),
        domain: "example.com".into(),
        kubernetes: "1.34".into(),
        kcr: KcrSource::Path(kcr_root()),
        ..InitOptions::default()
    })?;
    Ok(dir)
}

fn api(dir: &Path, kind: &str) -> ApiOptions {
    ApiOptions {
        dir: dir.to_path_buf(),
        group: "cache".into(),
        version: "v1alpha1".into(),
        kind: kind.into(),
        namespaced: true,
        force: false,
    }
}

#[test]
fn init_writes_a_project_with_every_placeholder_filled() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let dir = project(tmp.path())?;
    let files = snapshot(&dir);
    for rel in [
        "Cargo.toml",
        "Cargo.lock",
        ".gitignore",
        "Dockerfile",
        "README.md",
        "src/main.rs",
        "src/lib.rs",
        "tests/support/mod.rs",
        "config/rbac/role.yaml",
        "config/rbac/leader_election_role.yaml",
        "config/manager/manager.yaml",
        "config/default/kustomization.yaml",
    ] {
        assert!(files.contains_key(&dir.join(rel)), "{rel} written");
    }
    for (path, text) in &files {
        assert!(
            !text.contains("{{"),
            "{} has a placeholder left",
            path.display()
        );
    }
    let manifest = &files[&dir.join("Cargo.toml")];
    assert!(
        manifest.contains("name = \"memcached-operator\""),
        "{manifest}"
    );
    assert!(
        manifest.contains(r#"features = ["v1_34", "schemars"]"#),
        "{manifest}"
    );
    let controller = kcr_root().join("controller");
    assert!(
        manifest.contains(&format!(
            "kcr-controller = {{ path = \"{}\" }}",
            controller.display()
        )),
        "{manifest}"
    );
    assert!(manifest.contains("domain = \"example.com\""), "{manifest}");
    let main = &files[&dir.join("src/main.rs")];
    for flag in [
        "leader_elect",
        "metrics_secure",
        "enable_http2",
        "health_probe_bind_address",
    ] {
        assert!(main.contains(flag), "main.rs has {flag}");
    }
    let lib = &files[&dir.join("src/lib.rs")];
    assert!(lib.contains("memcached-operator.example.com"), "the Lease");
    Ok(())
}

#[test]
fn init_with_a_version_depends_on_crates_io() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("op");
    let options = InitOptions {
        dir: dir.clone(),
        kcr: KcrSource::Version("0.3.1".into()),
        ..InitOptions::default()
    };
    init(&options)?;
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml"))?;
    assert!(
        manifest.contains("kcr-controller = \"0.3.1\""),
        "{manifest}"
    );
    assert!(manifest.contains("kcr-testkit = \"0.3.1\""), "{manifest}");
    assert!(manifest.contains("\"v1_37\""), "the newest by default");
    assert!(!dir.join("Cargo.lock").exists());
    Ok(())
}

#[test]
fn init_refuses_bad_input_and_writes_nothing() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("op");
    let base = InitOptions {
        dir: dir.clone(),
        ..InitOptions::default()
    };
    let cases = [
        (
            InitOptions {
                name: Some("My_Op".into()),
                ..base.clone()
            },
            "invalid project name \"My_Op\"",
        ),
        (
            InitOptions {
                domain: "nodot".into(),
                ..base.clone()
            },
            "invalid domain \"nodot\"",
        ),
        (
            InitOptions {
                kubernetes: "1.29".into(),
                ..base.clone()
            },
            "unsupported Kubernetes version \"1.29\"",
        ),
        (
            InitOptions {
                kcr: KcrSource::Path(tmp.path().to_path_buf()),
                ..base.clone()
            },
            "not a kcr checkout",
        ),
    ];
    for (options, message) in cases {
        let err = init(&options).unwrap_err();
        assert!(err.to_string().contains(message), "{err}");
    }
    assert!(!dir.exists(), "nothing written");
    Ok(())
}

#[test]
fn init_twice_is_refused_unless_forced() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let dir = project(tmp.path())?;
    std::fs::write(dir.join("README.md"), "mine")?;
    let before = snapshot(&dir);
    let options = InitOptions {
        dir: dir.clone(),
        kcr: KcrSource::Path(kcr_root()),
        ..InitOptions::default()
    };
    let err = init(&options).unwrap_err();
    assert!(matches!(err, ScaffoldError::Exists { .. }), "{err}");
    assert!(err.to_string().contains("--force"), "{err}");
    assert_eq!(snapshot(&dir), before, "nothing changed");
    init(&InitOptions {
        force: true,
        ..options
    })?;
    assert_ne!(std::fs::read_to_string(dir.join("README.md"))?, "mine");
    Ok(())
}

#[test]
fn create_api_adds_the_kind_and_registers_it() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let dir = project(tmp.path())?;
    let written = create_api(&api(&dir, "CacheEntry"))?;
    assert!(written.contains(&dir.join("src/api/cache_entry.rs")));
    let files = snapshot(&dir);
    for (path, text) in &files {
        assert!(
            !text.contains("{{"),
            "{} has a placeholder left",
            path.display()
        );
    }
    let kind = &files[&dir.join("src/api/cache_entry.rs")];
    assert!(kind.contains("group = \"cache.example.com\""), "{kind}");
    assert!(kind.contains("plural = \"cacheentries\""), "{kind}");
    assert!(kind.contains("namespaced,"), "{kind}");
    assert!(kind.contains("pub conditions: Vec<Condition>"), "{kind}");
    let controller = &files[&dir.join("src/controller/cache_entry.rs")];
    for used in ["finalizer(", "set_condition(", "ctx.event("] {
        assert!(controller.contains(used), "the controller uses {used}");
    }
    let lib = &files[&dir.join("src/lib.rs")];
    assert!(
        lib.contains(
            "    controller::cache_entry::add_to_manager(mgr)?;\n    // +kcr:scaffold:controllers"
        ),
        "{lib}"
    );
    assert!(
        lib.contains("<api::cache_entry::CacheEntry as kube::CustomResourceExt>::crd(),"),
        "{lib}"
    );
    assert!(files[&dir.join("src/api/mod.rs")].contains("pub mod cache_entry;\n"));
    assert!(files[&dir.join("src/controller/mod.rs")].contains("pub mod cache_entry;\n"));
    let crd_file = "config/crd/bases/cache.example.com_cacheentries.yaml";
    let crd = &files[&dir.join(crd_file)];
    assert!(
        crd.contains("name: cacheentries.cache.example.com"),
        "{crd}"
    );
    assert!(crd.contains("scope: Namespaced"), "{crd}");
    let kustomization = &files[&dir.join("config/crd/kustomization.yaml")];
    assert!(
        kustomization.contains("- bases/cache.example.com_cacheentries.yaml\n"),
        "{kustomization}"
    );
    let role = &files[&dir.join("config/rbac/role.yaml")];
    assert!(
        role.contains("  - cacheentries/status\n  verbs:\n  - patch\n"),
        "{role}"
    );
    assert!(files.contains_key(&dir.join("tests/cache_entry.rs")));
    assert!(files.contains_key(&dir.join("config/samples/cache_v1alpha1_cache_entry.yaml")));

    // A second kind, cluster-scoped, beside the first.
    create_api(&ApiOptions {
        namespaced: false,
        group: "infra.example.org".into(),
        ..api(&dir, "Policy")
    })?;
    let lib = std::fs::read_to_string(dir.join("src/lib.rs"))?;
    assert!(lib.contains("controller::cache_entry::add_to_manager(mgr)?;\n    controller::policy::add_to_manager(mgr)?;"), "{lib}");
    let kind = std::fs::read_to_string(dir.join("src/api/policy.rs"))?;
    assert!(!kind.contains("    namespaced,"), "{kind}");
    let crd =
        std::fs::read_to_string(dir.join("config/crd/bases/infra.example.org_policies.yaml"))?;
    assert!(crd.contains("scope: Cluster"), "{crd}");
    Ok(())
}

#[test]
fn create_api_refuses_bad_input_reruns_and_strangers_without_a_change() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let dir = project(tmp.path())?;
    create_api(&api(&dir, "Memcached"))?;
    let before = snapshot(&dir);
    let cases = [
        (api(&dir, "memcached"), "invalid kind \"memcached\""),
        (api(&dir, "Mem_Cached"), "invalid kind"),
        (
            ApiOptions {
                group: "Cache".into(),
                ..api(&dir, "Other")
            },
            "invalid group \"Cache.example.com\"",
        ),
        (
            ApiOptions {
                version: "1".into(),
                ..api(&dir, "Other")
            },
            "invalid version \"1\"",
        ),
        (api(&dir, "Memcached"), "exists already"),
        (api(tmp.path(), "Other"), "is not a kcr project"),
    ];
    for (options, message) in cases {
        let err = create_api(&options).unwrap_err();
        assert!(err.to_string().contains(message), "{message}: {err}");
    }
    assert_eq!(snapshot(&dir), before, "nothing changed");

    // Forced, the kind's files are rewritten and nothing is registered twice.
    create_api(&ApiOptions {
        force: true,
        ..api(&dir, "Memcached")
    })?;
    assert_eq!(snapshot(&dir), before);
    Ok(())
}

#[test]
fn create_api_needs_the_markers() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let dir = project(tmp.path())?;
    let lib = dir.join("src/lib.rs");
    let text = std::fs::read_to_string(&lib)?.replace("// +kcr:scaffold:crds", "");
    std::fs::write(&lib, text)?;
    let err = create_api(&api(&dir, "Memcached")).unwrap_err();
    assert!(
        matches!(
            err,
            ScaffoldError::MissingMarker {
                marker: "// +kcr:scaffold:crds",
                ..
            }
        ),
        "{err}"
    );
    assert!(
        !dir.join("src/api/memcached.rs").exists(),
        "nothing written"
    );

    // A role written by `cargo kcr rbac` (no marker) is left alone.
    let project2 = tempfile::tempdir()?;
    let dir = project(project2.path())?;
    std::fs::write(dir.join("config/rbac/role.yaml"), "kind: ClusterRole\n")?;
    create_api(&api(&dir, "Memcached"))?;
    assert_eq!(
        std::fs::read_to_string(dir.join("config/rbac/role.yaml"))?,
        "kind: ClusterRole\n"
    );
    Ok(())
}
