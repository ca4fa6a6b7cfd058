//! Requests per second and latency of one webhook over HTTPS on this machine:
//! `cargo run --release -p kcr-webhook --example webhook_throughput [-- <seconds> <connections>]`.
//!
//! The server (the example Widget's validating webhook, with a CA-signed certificate on
//! 127.0.0.1) and the clients (HTTP/1.1 keep-alive connections, one request at a time each)
//! share the process and its cores, so the figures are a lower bound of what a server alone
//! would do. Each request is a full AdmissionReview of a valid Widget (about 600 bytes).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use kcr_webhook::example::{WidgetDefaulter, WidgetValidator, v1};
use kcr_webhook::{CertificateAuthority, ServerOptions, WebhookServer};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn review(i: usize) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": format!("uid-{i}"),
            "kind": {"group": "example.kcr.dev", "version": "v1", "kind": "Widget"},
            "resource": {"group": "example.kcr.dev", "version": "v1", "resource": "widgets"},
            "name": "w",
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:default:bench", "groups": ["system:authenticated"]},
            "object": {
                "apiVersion": "example.kcr.dev/v1", "kind": "Widget",
                "metadata": {"name": "w", "namespace": "default", "labels": {"app": "bench"},
                             "annotations": {"note": "a widget used to measure the webhook"}},
                "spec": {"replicas": 3, "appearance": {"colour": "red"}}
            },
            "oldObject": null,
            "dryRun": false
        }
    }))
    .expect("serialisable")
}

async fn client(
    addr: std::net::SocketAddr,
    ca_pem: String,
    path: &'static str,
    until: Instant,
) -> Result<Vec<Duration>, Box<dyn std::error::Error + Send + Sync>> {
    let mut roots = rustls::RootCertStore::empty();
    for der in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(der?)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost")?, tcp)
        .await?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await?;
    tokio::spawn(conn);
    let mut latencies = Vec::new();
    let mut i = 0;
    while Instant::now() < until {
        let body = Bytes::from(review(i));
        i += 1;
        let req = http::Request::post(path)
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(Full::new(body))?;
        let start = Instant::now();
        let resp = sender.send_request(req).await?;
        let status = resp.status();
        let bytes = resp.into_body().collect().await?.to_bytes();
        latencies.push(start.elapsed());
        if status != 200 || !bytes.windows(14).any(|w| w == b"\"allowed\":true") {
            return Err(format!(
                "unexpected answer {status}: {}",
                String::from_utf8_lossy(&bytes)
            )
            .into());
        }
    }
    Ok(latencies)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let mut args = std::env::args().skip(1);
    let seconds: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(5);
    let connections: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(8);

    let dir = tempfile::tempdir()?;
    let ca = CertificateAuthority::generate("throughput CA")?;
    ca.issue(&["localhost", "127.0.0.1"])?
        .write_to_dir(dir.path())?;
    let server = WebhookServer::bind(
        ServerOptions::default()
            .bind_address("127.0.0.1:0".parse()?)
            .cert_dir(dir.path()),
    )
    .await?;
    server
        .webhook::<v1::Widget>()
        .defaulter(WidgetDefaulter)
        .validator(WidgetValidator)
        .complete()?;
    let stop = CancellationToken::new();
    let run = server.clone();
    let token = stop.clone();
    tokio::spawn(async move { run.run(token).await });

    for (name, path) in [
        ("validating", "/validate-example-kcr-dev-v1-widget"),
        ("mutating", "/mutate-example-kcr-dev-v1-widget"),
    ] {
        // Warm-up, then the measured run.
        for (measure, secs) in [(false, 1), (true, seconds)] {
            let started = Instant::now();
            let until = started + Duration::from_secs(secs);
            let tasks: Vec<_> = (0..connections)
                .map(|_| {
                    tokio::spawn(client(
                        server.local_addr(),
                        ca.ca_pem().to_string(),
                        path,
                        until,
                    ))
                })
                .collect();
            let mut all = Vec::new();
            for t in tasks {
                all.extend(t.await??);
            }
            let elapsed = started.elapsed();
            if !measure {
                continue;
            }
            all.sort();
            let pct = |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)];
            println!(
                "{name} webhook {path}: {} requests in {:.1} s over {connections} connections, {} cores: {:.0} requests/s, p50 {:.0} µs, p99 {:.0} µs",
                all.len(),
                elapsed.as_secs_f64(),
                std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(1),
                all.len() as f64 / elapsed.as_secs_f64(),
                pct(0.50).as_secs_f64() * 1e6,
                pct(0.99).as_secs_f64() * 1e6,
            );
        }
    }
    stop.cancel();
    Ok(())
}
