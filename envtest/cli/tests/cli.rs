//! The `kcr-envtest` binary: clear errors for a bad backend and missing binaries, kubeconfig
//! clients (and kubectl) against each backend, a clean stop on SIGTERM, and no control plane
//! left behind when the binary is killed with SIGKILL (the watchdogs).

use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kcr_envtest::eventually;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

#[path = "../../tests/stand_in/mod.rs"]
mod stand_in;
use stand_in::stand_in;

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

/// Sends SIGTERM to a process when dropped and waits (bounded) until it has exited.
struct TerminateOnDrop(Option<u32>);

impl Drop for TerminateOnDrop {
    fn drop(&mut self) {
        let Some(pid) = self.0 else { return };
        let stat = format!("/proc/{pid}/stat");
        let exited = || {
            std::fs::read_to_string(&stat)
                .map(|s| {
                    s.rsplit(')')
                        .next()
                        .unwrap_or("")
                        .trim_start()
                        .starts_with('Z')
                })
                .unwrap_or(true)
        };
        if exited() {
            return;
        }
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !exited() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

#[test]
fn a_bad_backend_name_and_missing_binaries_are_clear_errors() {
    let binary = env!("CARGO_BIN_EXE_kcr-envtest");
    let out = Command::new(binary)
        .args(["--port", "0"])
        .env("KCR_ENVTEST_BACKEND", "kind")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown kcr-envtest backend \"kind\""),
        "{stderr}"
    );

    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(binary)
        .args(["--port", "0"])
        .env("KCR_ENVTEST_BACKEND", "real")
        .env("KUBEBUILDER_ASSETS", empty.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("tools/control-plane/build.sh"), "{stderr}");
    assert!(
        stderr.contains(&empty.path().display().to_string()),
        "names where it looked: {stderr}"
    );
}

#[tokio::test]
async fn standalone_binary_serves_kubeconfig_clients() {
    use tokio::io::AsyncBufReadExt;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kc");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kcr-envtest"))
        .args(["--port", "0", "--nodes", "2", "--kubeconfig"])
        .arg(&kubeconfig)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("binary starts");
    // Should an assertion below fail, SIGTERM the binary (dropped before the child's SIGKILL)
    // so that it stops a real backend's processes instead of leaving them running.
    let _terminate = TerminateOnDrop(child.id());
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    // The binary prints the kubeconfig path, then the URL once it serves.
    let mut url = None;
    while let Some(line) =
        tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
            .await
            .expect("binary prints its URL")
            .unwrap()
    {
        if let Some(u) = line.strip_prefix("kcr-envtest serving on ") {
            url = Some(u.to_string());
            break;
        }
    }
    let url = url.expect("serving line");
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&kubeconfig).unwrap(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(config.cluster_url.to_string().trim_end_matches('/'), url);
    let client = kube::Client::try_from(config).unwrap();
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
    let list = nodes.list(&Default::default()).await.unwrap();
    assert_eq!(list.items.len(), 2);
    // SIGTERM, not a kill: the binary stops its server (on the real backend, the control
    // plane's processes) and exits.
    let pid = child.id().expect("running").to_string();
    let status = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(status.success());
    let exit = tokio::time::timeout(std::time::Duration::from_secs(30), child.wait())
        .await
        .expect("the binary exits on SIGTERM")
        .unwrap();
    assert!(exit.success(), "{exit}");
}

/// The processes whose parent is `parent`, with their command lines.
fn children_of(parent: u32) -> Vec<(u32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    let rest = &stat[stat.rfind(')')? + 1..];
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(parent)
        })
        .filter_map(|pid| {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            Some((pid, String::from_utf8_lossy(&raw).replace('\0', " ")))
        })
        .collect()
}

/// Whether `pid` runs (exists and is not a zombie waiting to be reaped).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let rest = &stat[stat.rfind(')')? + 1..];
            rest.split_whitespace().next().map(|state| state != "Z")
        })
        .unwrap_or(false)
}

/// A test process killed by a signal runs no destructor: its control plane must still go (each
/// process has a watchdog that acts when the test process is gone).
#[test]
fn a_killed_test_process_takes_its_control_plane_with_it() {
    use std::io::BufRead;
    if kcr_envtest::binaries_for_test("a_killed_test_process_takes_its_control_plane_with_it")
        .expect("KCR_REQUIRE_BINARIES=1 asks for the control plane")
        .is_none()
    {
        return;
    }
    let mut cli = Command::new(env!("CARGO_BIN_EXE_kcr-envtest"))
        .args(["--port", "0"])
        .env("KCR_ENVTEST_BACKEND", "real")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = cli.stdout.take().unwrap();
    // It prints this line once the control plane is up (and exits, closing stdout, if not).
    let ready = std::io::BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .any(|line| line.starts_with("kcr-envtest serving on"));
    assert!(ready, "the kcr-envtest server did not start");
    let control_plane: Vec<(u32, String)> = children_of(cli.id())
        .into_iter()
        .filter(|(_, cmdline)| cmdline.contains("etcd") || cmdline.contains("kube-apiserver"))
        .collect();
    assert!(
        control_plane
            .iter()
            .any(|(_, c)| c.contains("kube-apiserver")),
        "{control_plane:?}"
    );
    assert!(
        control_plane
            .iter()
            .any(|(_, c)| !c.contains("kube-apiserver")),
        "{control_plane:?}"
    );

    cli.kill().unwrap(); // SIGKILL: no destructor runs
    cli.wait().unwrap();
    // Bounded wait for the watchdogs to act (they wake as soon as the pipe closes).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let left: Vec<&(u32, String)> = control_plane
            .iter()
            .filter(|(pid, _)| running(*pid))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still running 30 s after the test process was killed: {left:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The standalone binary with `KCR_ENVTEST_BACKEND=existing` and `KUBECONFIG` (set for the
/// child only) serves the cluster through its proxy in a fresh namespace, for kubectl too, and
/// removes the namespace when stopped with SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_serves_the_kubeconfigs_cluster_and_removes_its_namespace_on_sigterm() {
    use tokio::io::AsyncBufReadExt;
    let (cluster, dir, kubeconfig) = stand_in().await;
    let out = dir.path().join("proxied-kubeconfig");
    let mut cli = tokio::process::Command::new(env!("CARGO_BIN_EXE_kcr-envtest"))
        .args(["--port", "0", "--kubeconfig"])
        .arg(&out)
        .env("KCR_ENVTEST_BACKEND", "existing")
        .env("KUBECONFIG", &kubeconfig)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(cli.stdout.take().unwrap()).lines();
    let ready = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.starts_with("kcr-envtest serving on") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(ready, Ok(true), "the kcr-envtest CLI did not start");

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&out).unwrap().permissions().mode();
        assert_eq!(
            mode & 0o777,
            0o600,
            "the kubeconfig holds a token: {mode:o}"
        );
    }
    let proxied = Kubeconfig::read_from(&out).unwrap();
    let config = kube::Config::from_custom_kubeconfig(proxied, &KubeConfigOptions::default())
        .await
        .unwrap();
    let ns = config.default_namespace.clone();
    assert!(ns.starts_with("kcr-test-"), "{ns}");
    let cms: Api<ConfigMap> = Api::default_namespaced(kube::Client::try_from(config).unwrap());
    cms.create(&PostParams::default(), &config_map("from-cli"))
        .await
        .unwrap();
    assert!(
        Api::<ConfigMap>::namespaced(cluster.client(), &ns)
            .get_opt("from-cli")
            .await
            .unwrap()
            .is_some()
    );
    // kubectl without -n works in the namespace, through the proxy (bearer token over HTTP).
    match kcr_envtest::kubectl_for_tests().unwrap() {
        Some(kubectl) => {
            let got = tokio::process::Command::new(kubectl)
                .arg("--kubeconfig")
                .arg(&out)
                .args(["get", "configmaps", "-o", "name"])
                .output()
                .await
                .unwrap();
            let stdout = String::from_utf8_lossy(&got.stdout);
            assert!(
                got.status.success(),
                "{stdout}{}",
                String::from_utf8_lossy(&got.stderr)
            );
            assert!(stdout.contains("configmap/from-cli"), "{stdout}");
        }
        None => println!("kubectl not found: its part of this test is skipped"),
    }

    let pid = cli.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(30), cli.wait())
        .await
        .expect("the CLI exits within 30 s of SIGTERM")
        .unwrap();
    assert!(status.success(), "{status}");
    eventually(
        "the CLI's namespace is deleted",
        Duration::from_secs(30),
        || async {
            Api::<Namespace>::all(cluster.client())
                .get_opt(&ns)
                .await
                .is_ok_and(|n| n.is_none())
        },
    )
    .await;
}
