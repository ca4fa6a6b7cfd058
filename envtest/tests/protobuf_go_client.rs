//! client-go itself against the server, in protobuf mode as Go operators run it
//! (`tools/control-plane/v1.37/cmd/protobuf-client`: create, update after reading, update status,
//! scale, list, watch, delete with preconditions and propagation, the metadata client, leader
//! election on a Lease). Built with the `go` on PATH against the module cache the control plane
//! build fills; skipped (with a printed reason) when it cannot be built, unless
//! `KCR_REQUIRE_BINARIES=1` (as in CI) makes that a failure. Runs on every backend.

use std::path::Path;

use kcr_envtest::TestNamespace;

#[tokio::test]
async fn client_go_in_protobuf_mode() {
    let require = std::env::var("KCR_REQUIRE_BINARIES").is_ok_and(|v| v == "1");
    let module = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/control-plane/v1.37");
    let scratch = tempfile::tempdir().unwrap();
    let bin = scratch.path().join("protobuf-client");
    let build = tokio::process::Command::new("go")
        .args(["build", "-o"])
        .arg(&bin)
        .arg("./cmd/protobuf-client")
        .current_dir(&module)
        .output()
        .await;
    let why = match &build {
        Err(e) => Some(format!("no go: {e}")),
        Ok(out) if !out.status.success() => Some(format!(
            "go build failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )),
        Ok(_) => None,
    };
    if let Some(why) = why {
        assert!(!require, "KCR_REQUIRE_BINARIES=1: {why}");
        println!("skipped: {why}");
        return;
    }
    let ns = TestNamespace::new("protobuf-go").await.unwrap();
    let kubeconfig = scratch.path().join("kubeconfig");
    ns.write_kubeconfig(&kubeconfig).unwrap();
    let out = tokio::process::Command::new(&bin)
        .arg(&kubeconfig)
        .arg(ns.namespace())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("ok   leader elected"), "{stdout}");
}
