//! A scaffolded project builds, passes its tests and clippy: `cargo kcr init --kcr-path
//! <this checkout>` in a temporary directory outside the workspace, then `cargo kcr create api`
//! for a namespaced kind and a cluster-scoped one, then in the project `cargo test` and
//! `cargo clippy --all-targets -- -D warnings`, and its code is as rustfmt writes it.
//!
//! The project's tests run on the backend `KCR_ENVTEST_BACKEND` names (inherited, as is
//! `KUBEBUILDER_ASSETS`): `KCR_ENVTEST_BACKEND=real cargo test -p cargo-kcr --test
//! scaffold_builds` runs them on kube-apiserver and etcd.
//!
//! The project builds in `target/scaffold/` of the workspace (`CARGO_TARGET_DIR`), kept between
//! runs: the first run compiles kube and kcr for it (minutes), later ones only the project.
//! With the workspace's `Cargo.lock` copied into the project, cargo runs `--offline` first, and
//! online only when the registry cache lacks a crate.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

/// The kcr checkout this test belongs to.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cargo-kcr is in the workspace")
        .to_path_buf()
}

/// `cargo kcr <args>` in `dir`.
fn cargo_kcr(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cargo-kcr"))
        .arg("kcr")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("cargo-kcr runs")
}

/// `cargo <args>` in the project, with the shared target directory; its output is printed.
fn cargo(project: &Path, target: &Path, args: &[&str]) -> Output {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let started = Instant::now();
    let output = Command::new(cargo)
        .args(args)
        .current_dir(project)
        .env("CARGO_TARGET_DIR", target)
        // The project's own manifest decides; none of the outer build's settings.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .env_remove("CARGO_MANIFEST_DIR")
        .output()
        .expect("cargo runs");
    println!(
        "cargo {} ({:.0?}): {}",
        args.join(" "),
        started.elapsed(),
        output.status
    );
    println!("{}", String::from_utf8_lossy(&output.stdout));
    println!("{}", String::from_utf8_lossy(&output.stderr));
    output
}

/// `cargo <args>` with `--offline` after the subcommand; again without it when cargo says it
/// would have to download a crate the registry cache lacks.
fn offline_first(project: &Path, target: &Path, args: &[&str]) -> Output {
    let mut offline = args.to_vec();
    offline.insert(1, "--offline");
    let output = cargo(project, target, &offline);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let needs_network =
        stderr.contains("--offline was specified") || stderr.contains("offline mode");
    if output.status.success() || !needs_network {
        return output;
    }
    cargo(project, target, args)
}

fn assert_ok(what: &str, output: &Output) {
    assert!(
        output.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn a_scaffolded_project_builds_passes_its_tests_fmt_and_clippy() {
    let root = workspace();
    let target = root.join("target/scaffold");
    let tmp = tempfile::Builder::new()
        .prefix("kcr-scaffold-")
        .tempdir()
        .expect("a temporary directory");
    assert!(
        !tmp.path().starts_with(&root),
        "the project must be outside the workspace"
    );

    let kcr_path = root.to_string_lossy().into_owned();
    let init = cargo_kcr(
        tmp.path(),
        &[
            "init",
            "--kcr-path",
            &kcr_path,
            "--domain",
            "example.com",
            "memcached-operator",
        ],
    );
    assert_ok("cargo kcr init", &init);
    let project = tmp.path().join("memcached-operator");
    for args in [
        &[
            "--group",
            "cache",
            "--version",
            "v1alpha1",
            "--kind",
            "Memcached",
        ][..],
        &[
            "--group",
            "infra",
            "--version",
            "v1",
            "--kind",
            "ClusterPolicy",
            "--cluster",
        ][..],
    ] {
        let create = cargo_kcr(&project, &[&["create", "api"][..], args].concat());
        assert_ok("cargo kcr create api", &create);
    }
    assert!(project.join("Cargo.lock").is_file(), "the workspace's lock");

    let test = offline_first(&project, &target, &["test"]);
    assert_ok("cargo test", &test);
    let out = String::from_utf8_lossy(&test.stdout);
    for name in [
        "a_new_memcached_becomes_ready",
        "deleting_a_memcached_runs_its_cleanup",
        "a_new_cluster_policy_becomes_ready",
        "deleting_a_cluster_policy_runs_its_cleanup",
        "the_manager_starts_and_stops",
        "the_crds_in_config_are_the_code_s",
    ] {
        assert!(
            out.contains(&format!("test {name} ... ok")),
            "{name} ran and passed"
        );
    }

    let crd = Command::new(target.join("debug/memcached-operator"))
        .arg("crd")
        .output()
        .expect("the operator runs");
    assert_ok("memcached-operator crd", &crd);
    let yaml = String::from_utf8_lossy(&crd.stdout);
    assert!(
        yaml.contains("name: memcacheds.cache.example.com"),
        "{yaml}"
    );
    assert!(
        yaml.contains("name: clusterpolicies.infra.example.com"),
        "{yaml}"
    );

    let fmt = cargo(&project, &target, &["fmt", "--check"]);
    assert_ok("cargo fmt --check", &fmt);

    let clippy = offline_first(
        &project,
        &target,
        &["clippy", "--all-targets", "--", "-D", "warnings"],
    );
    assert_ok("cargo clippy --all-targets -- -D warnings", &clippy);
}
