//! kubectl against the kept-running demo (what the README tells a newcomer to do): nodes show
//! their pool as role, `kubectl get np` prints the printer columns, labelling a node brings it
//! into a pool, and `kubectl apply` of an invalid pool is refused with the webhook's message.
//! Uses the kubectl of `tools/control-plane/build.sh`, else the one on PATH; without either it
//! says SKIPPED, or fails when `KCR_REQUIRE_BINARIES=1` (as in CI).

use std::process::Command;
use std::time::{Duration, Instant};

use nodepool_operator::demo::{DemoOptions, run_demo};
use tokio_util::sync::CancellationToken;

fn kubectl(kubeconfig: &std::path::Path, args: &[&str], stdin: Option<&str>) -> (bool, String) {
    use std::io::Write;
    let path = kcr_envtest::kubectl_path().expect("kubectl was found before the test started");
    let mut cmd = Command::new(path);
    cmd.env("KUBECONFIG", kubeconfig)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("kubectl runs");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_against_the_kept_running_demo() {
    if kcr_envtest::kubectl_for_tests().unwrap().is_none() {
        println!(
            "SKIPPED kubectl_against_the_kept_running_demo: no kubectl (build one with tools/control-plane/build.sh)"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("demo.kubeconfig");
    let options = DemoOptions {
        nodes: 6,
        keep_running: true,
        kubeconfig_out: Some(kubeconfig.clone()),
        timeout: Duration::from_secs(30),
    };
    let stop = CancellationToken::new();
    let demo = tokio::spawn({
        let stop = stop.clone();
        async move { run_demo(&options, stop).await }
    });
    let start = Instant::now();
    while !kubeconfig.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "demo did not write its kubeconfig"
        );
        assert!(!demo.is_finished(), "demo ended early");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let kc = kubeconfig.clone();
    tokio::task::spawn_blocking(move || {
        let (ok, out) = kubectl(&kc, &["get", "nodes"], None);
        assert!(ok, "{out}");
        assert!(out.lines().any(|l| l.starts_with("envtest-node-0") && l.contains("worker")), "{out}");
        let (ok, out) = kubectl(&kc, &["get", "np"], None);
        assert!(ok, "{out}");
        assert!(out.contains("NODECOUNT") && out.contains("READY"), "{out}");
        assert!(out.lines().any(|l| l.starts_with("gpu") && l.contains(" 2 ")), "{out}");

        let (ok, out) = kubectl(&kc, &["label", "node", "envtest-node-5", "node-role.kubernetes.io/gpu="], None);
        assert!(ok, "{out}");
        let start = Instant::now();
        loop {
            let (_, out) = kubectl(&kc, &["get", "np", "gpu", "-o", "jsonpath={.status.nodeCount}"], None);
            if out.trim() == "3" {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(30), "gpu never reached 3 nodes: {out}");
            std::thread::sleep(Duration::from_millis(100));
        }
        let (_, taints) = kubectl(&kc, &["get", "node", "envtest-node-5", "-o", "jsonpath={.spec.taints}"], None);
        assert!(taints.contains("node-pool.lailin.xyz/gpu"), "{taints}");

        let bad = "apiVersion: nodes.lailin.xyz/v1\nkind: NodePool\nmetadata: {name: bad}\nspec:\n  labels: {\"xxx\": \"1\"}\n  taints: [{key: \"\", effect: NoSchedule}]\n";
        let (ok, out) = kubectl(&kc, &["apply", "-f", "-"], Some(bad));
        assert!(!ok, "the invalid pool was accepted: {out}");
        // The webhook denies with 422 Invalid and field causes; the API server passes its details
        // through and kubectl prints the causes (the webhook's own wording proves who refused).
        assert!(out.contains("The NodePool \"bad\" is invalid"), "{out}");
        assert!(out.contains("spec.labels[xxx]") && out.contains("spec.taints[0].key"), "{out}");
        assert!(out.contains("must be node-pool.lailin.xyz or node-pool.lailin.xyz/<name>"), "{out}");
    })
    .await
    .unwrap();
    stop.cancel();
    demo.await.unwrap().unwrap();
}
