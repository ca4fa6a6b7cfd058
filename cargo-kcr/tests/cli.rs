//! `cargo kcr rbac` as a user runs it: the binary on a record, writing roles, then checking
//! them; the check fails, naming the verb, when a role grants a verb no test used and when it
//! lacks one a test used; bad input is an error (exit 2), never a panic.

use std::path::Path;
use std::process::{Command, Output};

/// A record as kcr-testkit writes it: two test processes of one suite.
const RECORD_A: &str = r#"{"verb":"list","group":"","resource":"configmaps","subresource":null,"namespace":null}
{"verb":"watch","group":"","resource":"configmaps","subresource":null,"namespace":null}
{"verb":"patch","group":"","resource":"configmaps","subresource":null,"namespace":"test-1"}
{"verb":"get","group":"coordination.k8s.io","resource":"leases","subresource":null,"namespace":"test-1"}
{"verb":"create","group":"coordination.k8s.io","resource":"leases","subresource":null,"namespace":"test-1"}
"#;
const RECORD_B: &str = r#"{"verb":"list","group":"","resource":"configmaps","subresource":null,"namespace":null}
{"verb":"update","group":"coordination.k8s.io","resource":"leases","subresource":null,"namespace":"test-2"}
{"verb":"patch","group":"apps","resource":"deployments","subresource":"status","namespace":"test-2"}
{"verb":"create","group":"events.k8s.io","resource":"events","subresource":null,"namespace":"test-2"}
"#;

/// `cargo kcr <args>` in `dir`, as cargo runs it (`cargo-kcr kcr <args>`).
fn cargo_kcr(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cargo-kcr"))
        .arg("kcr")
        .args(args)
        .current_dir(dir)
        .env_remove("KCR_RBAC_RECORD")
        .output()
        .expect("cargo-kcr runs")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A project with the record in `target/kcr-rbac` and roles generated from it.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let record = dir.path().join("target/kcr-rbac");
    std::fs::create_dir_all(&record).expect("the record's directory");
    std::fs::write(record.join("100-a.jsonl"), RECORD_A).expect("record a");
    std::fs::write(record.join("200-b.jsonl"), RECORD_B).expect("record b");
    let out = cargo_kcr(dir.path(), &["rbac", "--role-namespace", "demo-system"]);
    assert!(out.status.success(), "{}", text(&out));
    dir
}

fn edit(path: &Path, from: &str, to: &str) {
    let role = std::fs::read_to_string(path).expect("the role");
    assert!(role.contains(from), "{role} lacks {from:?}");
    std::fs::write(path, role.replacen(from, to, 1)).expect("the edited role");
}

#[test]
fn the_generated_roles_are_minimal_and_pass_the_check() {
    let dir = project();
    let rbac = dir.path().join("config/rbac");
    let cluster = std::fs::read_to_string(rbac.join("role.yaml")).expect("role.yaml");
    let body = cluster.split_once('\n').map(|(_, rest)| rest);
    assert_eq!(
        body,
        Some(
            "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: manager-role
rules:
- apiGroups:
  - \"\"
  resources:
  - configmaps
  verbs:
  - list
  - watch
  - patch
- apiGroups:
  - apps
  resources:
  - deployments/status
  verbs:
  - patch
- apiGroups:
  - events.k8s.io
  resources:
  - events
  verbs:
  - create
"
        )
    );
    let role = std::fs::read_to_string(rbac.join("leader_election_role.yaml")).expect("the Role");
    assert!(
        role.contains(
            "kind: Role\nmetadata:\n  name: leader-election-role\n  namespace: demo-system\n"
        ),
        "{role}"
    );
    assert!(
        role.ends_with("  - leases\n  verbs:\n  - get\n  - create\n  - update\n"),
        "{role}"
    );

    let out = cargo_kcr(dir.path(), &["rbac", "--check"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("RBAC matches the record"),
        "{}",
        text(&out)
    );

    // Generating again gives the same bytes.
    let out = cargo_kcr(dir.path(), &["rbac", "--role-namespace", "demo-system"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(rbac.join("role.yaml")).ok(),
        Some(cluster)
    );
}

#[test]
fn the_check_fails_naming_a_verb_no_test_used() {
    let dir = project();
    let role = dir.path().join("config/rbac/role.yaml");
    edit(&role, "  - watch\n", "  - watch\n  - delete\n");
    let out = cargo_kcr(dir.path(), &["rbac", "--check"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "config/rbac/role.yaml: unused verbs (in the role, never used by a test):\n  delete core/configmaps\n\
         0 missing, 1 unused: regenerate with `cargo kcr rbac` (without --check), or change the tests\n"
    );
}

#[test]
fn the_check_fails_naming_a_used_verb_the_role_lacks() {
    let dir = project();
    let role = dir.path().join("config/rbac/leader_election_role.yaml");
    edit(&role, "  - create\n", "");
    let out = cargo_kcr(dir.path(), &["rbac", "--check"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let shown = String::from_utf8_lossy(&out.stderr);
    assert!(
        shown.starts_with("config/rbac/leader_election_role.yaml: missing verbs (used by a test, absent from the role):\n  create coordination.k8s.io/leases\n"),
        "{shown}"
    );
    assert!(shown.contains("1 missing, 0 unused"), "{shown}");

    // A role file deleted: everything it should grant is missing.
    std::fs::remove_file(&role).expect("removed");
    let out = cargo_kcr(dir.path(), &["rbac", "--check"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("3 missing, 0 unused"), "{}", text(&out));
}

/// The roles as checked in, the tests changed: a test that starts using a verb fails the check
/// as missing; a rule for a resource that no test touches fails it as unused.
#[test]
fn the_check_fails_when_the_tests_and_the_roles_part() {
    let dir = project();
    let new_use = dir.path().join("target/kcr-rbac/300-c.jsonl");
    std::fs::write(
        &new_use,
        "{\"verb\":\"delete\",\"group\":\"\",\"resource\":\"configmaps\",\"subresource\":null,\"namespace\":\"test-3\"}\n",
    )
    .expect("record c");
    let out = cargo_kcr(dir.path(), &["rbac", "--check"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "config/rbac/role.yaml: missing verbs (used by a test, absent from the role):\n  delete core/configmaps\n\
         1 missing, 0 unused: regenerate with `cargo kcr rbac` (without --check), or change the tests\n"
    );

    std::fs::remove_file(&new_use).expect("record c removed");
    let role = dir.path().join("config/rbac/role.yaml");
    edit(
        &role,
        "rules:\n",
        "rules:\n- apiGroups:\n  - \"\"\n  resources:\n  - secrets\n  verbs:\n  - get\n",
    );
    let out = cargo_kcr(dir.path(), &["rbac", "--check"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "config/rbac/role.yaml: unused verbs (in the role, never used by a test):\n  get core/secrets\n\
         0 missing, 1 unused: regenerate with `cargo kcr rbac` (without --check), or change the tests\n"
    );
}

#[test]
fn extra_rules_are_granted_without_a_request() {
    let dir = project();
    let extra = dir.path().join("config/rbac/extra.yaml");
    std::fs::write(
        &extra,
        "# Owner references that block deletion of a ConfigMap\nrules:\n- apiGroups: [\"\"]\n  resources: [configmaps/finalizers]\n  verbs: [update]\n",
    )
    .expect("extra");
    let out = cargo_kcr(
        dir.path(),
        &["rbac", "--check", "--extra", "config/rbac/extra.yaml"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("missing verbs (used by a test, absent from the role):\n  update core/configmaps/finalizers\n"), "{}", text(&out));
    let out = cargo_kcr(dir.path(), &["rbac", "--extra", "config/rbac/extra.yaml"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = cargo_kcr(
        dir.path(),
        &["rbac", "--check", "--extra", "config/rbac/extra.yaml"],
    );
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn bad_input_is_an_error_with_exit_code_2() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = cargo_kcr(dir.path(), &["rbac", "--check"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("no recorded request in target/kcr-rbac"),
        "{}",
        text(&out)
    );

    std::fs::create_dir_all(dir.path().join("rec")).expect("dir");
    std::fs::write(dir.path().join("rec/1.jsonl"), "{\"verb\":\"get\"}\n").expect("record");
    let out = cargo_kcr(dir.path(), &["rbac", "--record", "rec"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("rec/1.jsonl:1: not a recorded request"),
        "{}",
        text(&out)
    );

    std::fs::write(dir.path().join("rec/1.jsonl"), RECORD_A).expect("record");
    std::fs::create_dir_all(dir.path().join("config/rbac")).expect("dir");
    std::fs::write(
        dir.path().join("config/rbac/role.yaml"),
        "kind: ClusterRole\nrules: [",
    )
    .expect("role");
    let out = cargo_kcr(dir.path(), &["rbac", "--record", "rec", "--check"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("config/rbac/role.yaml: not a role"),
        "{}",
        text(&out)
    );

    let out = cargo_kcr(dir.path(), &["rbac", "--bogus"]);
    assert_eq!(out.status.code(), Some(2), "usage errors: {}", text(&out));
}

#[test]
fn kept_roles_are_left_out_of_the_written_ones_and_checked_for_unused_verbs() {
    let dir = project();
    let record = dir.path().join("target/kcr-rbac/300-c.jsonl");
    std::fs::write(
        record,
        "{\"verb\":\"create\",\"group\":\"authentication.k8s.io\",\"resource\":\"tokenreviews\",\"subresource\":null,\"namespace\":null}\n",
    )
    .expect("record c");
    std::fs::write(
        dir.path().join("config/rbac/metrics_auth_role.yaml"),
        "kind: ClusterRole\nrules:\n- apiGroups: [authentication.k8s.io]\n  resources: [tokenreviews]\n  verbs: [create]\n\
         - apiGroups: [authorization.k8s.io]\n  resources: [subjectaccessreviews]\n  verbs: [create]\n",
    )
    .expect("kept role");
    let keep = ["--keep", "config/rbac/metrics_auth_role.yaml"];

    // Without it, the written ClusterRole lacks what the kept role grants.
    let out = cargo_kcr(dir.path(), &["rbac", "--check"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("missing verbs (used by a test, absent from the role):\n  create authentication.k8s.io/tokenreviews\n"), "{}", text(&out));

    // With it, only the kept role's verb no test used is reported, against that file.
    let out = cargo_kcr(dir.path(), &[&["rbac", "--check"][..], &keep].concat());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "config/rbac/metrics_auth_role.yaml: unused verbs (in the role, never used by a test):\n  \
         create authorization.k8s.io/subjectaccessreviews\n\
         0 missing, 1 unused: regenerate with `cargo kcr rbac` (without --check), or change the tests\n"
    );

    // Writing with it leaves tokenreviews out of role.yaml.
    let out = cargo_kcr(dir.path(), &[&["rbac"][..], &keep].concat());
    assert!(out.status.success(), "{}", text(&out));
    let role = std::fs::read_to_string(dir.path().join("config/rbac/role.yaml")).expect("role");
    assert!(!role.contains("tokenreviews"), "{role}");
}
