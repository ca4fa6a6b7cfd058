//! What the README tells a person to `curl`: `nodepool-operator demo --keep-running` prints the
//! metrics and probe addresses it serves; `/healthz` and `/readyz` answer `ok`, and `/metrics`
//! serves every metric of the table in `kcr_controller::metrics` (controller, queue, leader
//! election, REST client, webhook, process and runtime) with exactly the labels named there, and
//! nothing the table does not list.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kcr_controller::metrics::{documented, parse_exposition};

/// `GET path` with `Connection: close`: (status, body).
fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("the printed address accepts connections");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// The address in a printed line like `metrics      http://127.0.0.1:4000/metrics`.
fn printed_addr(line: &str) -> SocketAddr {
    let url = line.split_whitespace().nth(1).expect("an address follows");
    let host_port = url.trim_start_matches("http://").split('/').next().unwrap();
    host_port.parse().unwrap_or_else(|e| panic!("{line}: {e}"))
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_running_demo_serves_every_documented_metric() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("demo.kubeconfig");
    let mut child = Killed(
        Command::new(env!("CARGO_BIN_EXE_nodepool-operator"))
            .env("RUST_LOG", "warn")
            .args(["demo", "--nodes", "3", "--keep-running", "--kubeconfig-out"])
            .arg(&kubeconfig)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let (mut metrics, mut probes, mut printed) = (None, None, Vec::new());
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx.recv_timeout(left).unwrap_or_else(|_| {
            panic!(
                "the demo did not get to Ctrl-C; printed:\n{}",
                printed.join("\n")
            )
        });
        if line.starts_with("metrics ") {
            metrics = Some(printed_addr(&line));
        }
        if line.starts_with("probes ") {
            probes = Some(printed_addr(&line));
        }
        let done = line.contains("press Ctrl-C to stop");
        printed.push(line);
        if done {
            break;
        }
    }
    let output = printed.join("\n");
    let metrics = metrics.unwrap_or_else(|| panic!("no metrics address printed:\n{output}"));
    let probes = probes.unwrap_or_else(|| panic!("no probes address printed:\n{output}"));
    // The curl lines of the keep-running hint name the same addresses.
    assert!(
        output.contains(&format!("curl -s http://{metrics}/metrics")),
        "{output}"
    );
    assert!(
        output.contains(&format!("curl -s http://{probes}/healthz")),
        "{output}"
    );

    assert_eq!(get(probes, "/healthz"), (200, "ok".to_owned()));
    let (code, body) = get(probes, "/readyz?verbose");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("[+]caches-synced ok"), "{body}");

    let (code, text) = get(metrics, "/metrics");
    assert_eq!(code, 200, "{text}");
    let scraped = parse_exposition(&text);
    let table = documented();
    let mut problems = Vec::new();
    for row in &table {
        if !cfg!(target_os = "linux") && row.name.starts_with("process_") {
            continue;
        }
        match scraped.get(&row.name) {
            None => problems.push(format!("{} is documented but not served", row.name)),
            Some(f) if f.kind != row.kind || f.labels != row.labels => problems.push(format!(
                "{}: documented {} {:?}, served {} {:?}",
                row.name, row.kind, row.labels, f.kind, f.labels
            )),
            Some(_) => {}
        }
    }
    for name in scraped.keys() {
        if !table.iter().any(|r| &r.name == name) {
            problems.push(format!("{name} is served but not in the table"));
        }
    }
    assert!(
        problems.is_empty(),
        "the demo's /metrics and the table in controller/src/observe/metrics.rs disagree:\n{}\n\n{text}",
        problems.join("\n")
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("leader_election_master_status{") && l.ends_with(" 1")),
        "the demo leads its Lease: {text}"
    );

    let status = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let start = Instant::now();
    let exit = loop {
        if let Some(exit) = child.0.try_wait().unwrap() {
            break exit;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no exit 30 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "exit status {exit}");
}
