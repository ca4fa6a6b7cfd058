//! The admission webhooks over real HTTPS (kcr-webhook's server with the operator's defaulter
//! and validator): AdmissionReview in, AdmissionReview out, with the validation rules as a
//! table, and certificate rotation picked up without a restart.

use std::net::SocketAddr;
use std::sync::Arc;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use kcr_webhook::{CertificateAuthority, ServerOptions, ServingCert, WebhookServer};
use nodepool_operator::webhook::{MUTATE_PATH, VALIDATE_PATH, register};
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

struct Server {
    addr: SocketAddr,
    dir: tempfile::TempDir,
    server: WebhookServer,
    _stop: tokio_util::sync::DropGuard,
}

fn self_signed(hosts: &[&str]) -> ServingCert {
    CertificateAuthority::generate("test CA")
        .unwrap()
        .issue(hosts)
        .unwrap()
}

async fn start() -> (Server, ServingCert) {
    let dir = tempfile::tempdir().unwrap();
    let pair = self_signed(&["localhost", "127.0.0.1"]);
    pair.write_to_dir(dir.path()).unwrap();
    let server = WebhookServer::bind(
        ServerOptions::default()
            .bind_address("127.0.0.1:0".parse().unwrap())
            .cert_dir(dir.path()),
    )
    .await
    .unwrap();
    server.cert_watcher().load().unwrap();
    register(&server).unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    {
        let (server, stop) = (server.clone(), stop.clone());
        tokio::spawn(async move { server.run(stop).await });
    }
    (
        Server {
            addr: server.local_addr(),
            dir,
            server,
            _stop: stop.drop_guard(),
        },
        pair,
    )
}

fn connector(ca_pem: &str) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    let ders: Vec<CertificateDer<'static>> = pem::parse_many(ca_pem)
        .unwrap()
        .into_iter()
        .map(|p| CertificateDer::from(p.into_contents()))
        .collect();
    for d in ders {
        roots.add(d).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

/// POSTs `body` to `path` over a fresh TLS connection; returns the status, the JSON reply and
/// the server certificate seen.
async fn post(
    addr: SocketAddr,
    ca_pem: &str,
    path: &str,
    body: &Value,
) -> Result<(u16, Value, Vec<u8>), String> {
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let tls = connector(ca_pem)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .map_err(|e| e.to_string())?;
    let peer = tls.get_ref().1.peer_certificates().unwrap()[0].to_vec();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let req = http::Request::post(path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(body).unwrap())))
        .unwrap();
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    Ok((status, v, peer))
}

/// A review as the API server sends it (an UPDATE carries the old object too).
fn review(op: &str, object: Value) -> Value {
    let old = if op == "UPDATE" {
        object.clone()
    } else {
        Value::Null
    };
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "3b8a-uid",
            "kind": {"group": "nodes.lailin.xyz", "version": "v1", "kind": "NodePool"},
            "resource": {"group": "nodes.lailin.xyz", "version": "v1", "resource": "nodepools"},
            "name": object["metadata"]["name"].clone(),
            "operation": op,
            "userInfo": {"username": "kubernetes-admin"},
            "object": object,
            "oldObject": old,
            "dryRun": false
        }
    })
}

fn pool(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "nodes.lailin.xyz/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec})
}

#[tokio::test]
async fn validation_rules_over_https() {
    let (server, pair) = start().await;
    // (name, spec, allowed, fields that must be listed)
    let cases: Vec<(&str, Value, bool, Vec<&str>)> = vec![
        (
            "sample",
            json!({"labels": {"node-pool.lailin.xyz/worker": "10"}, "taints": [{"key": "node-pool.lailin.xyz", "value": "worker", "effect": "NoSchedule"}], "handler": "runc"}),
            true,
            vec![],
        ),
        (
            "key xxx refused",
            json!({"labels": {"xxx": "1"}, "handler": "runc"}),
            false,
            vec!["spec.labels[xxx]"],
        ),
        (
            "empty taint key refused",
            json!({"taints": [{"key": "", "effect": "NoSchedule"}], "handler": "runc"}),
            false,
            vec!["spec.taints[0].key"],
        ),
        (
            "bare domain accepted",
            json!({"labels": {"node-pool.lailin.xyz": "x"}, "handler": "runc"}),
            true,
            vec![],
        ),
        (
            "domain/name accepted",
            json!({"labels": {"node-pool.lailin.xyz/xxx": "x"}, "handler": "runc"}),
            true,
            vec![],
        ),
        (
            "unescaped dots",
            json!({"labels": {"node-poolXlailinXxyz": "x"}, "handler": "runc"}),
            false,
            vec!["spec.labels[node-poolXlailinXxyz]"],
        ),
        (
            "double slash",
            json!({"labels": {"node-pool.lailin.xyz//x": "x"}, "handler": "runc"}),
            false,
            vec!["spec.labels[node-pool.lailin.xyz//x]"],
        ),
        (
            "bad label value",
            json!({"labels": {"node-pool.lailin.xyz": "a b"}, "handler": "runc"}),
            false,
            vec!["spec.labels[node-pool.lailin.xyz]"],
        ),
        (
            "bad effect",
            json!({"taints": [{"key": "node-pool.lailin.xyz", "effect": "Never"}], "handler": "runc"}),
            false,
            vec!["spec.taints[0].effect"],
        ),
        (
            "duplicate taint",
            json!({"taints": [{"key": "node-pool.lailin.xyz", "value": "a", "effect": "NoSchedule"}, {"key": "node-pool.lailin.xyz", "value": "b", "effect": "NoSchedule"}], "handler": "runc"}),
            false,
            vec!["spec.taints[1]"],
        ),
        (
            "bad handler",
            json!({"handler": "Kata_Containers"}),
            false,
            vec!["spec.handler"],
        ),
        (
            "everything at once",
            json!({"labels": {"xxx": "1"}, "taints": [{"key": "", "effect": "Never"}], "handler": "-"}),
            false,
            vec![
                "spec.labels[xxx]",
                "spec.taints[0].key",
                "spec.taints[0].effect",
                "spec.handler",
            ],
        ),
    ];
    for (name, spec, allowed, fields) in cases {
        for op in ["CREATE", "UPDATE"] {
            let (status, reply, _) = post(
                server.addr,
                &pair.ca_pem,
                VALIDATE_PATH,
                &review(op, pool("p", spec.clone())),
            )
            .await
            .unwrap();
            assert_eq!(status, 200, "{name}");
            assert_eq!(reply["kind"], "AdmissionReview", "{name}");
            assert_eq!(reply["apiVersion"], "admission.k8s.io/v1", "{name}");
            let resp = &reply["response"];
            assert_eq!(resp["uid"], "3b8a-uid", "{name}");
            assert_eq!(resp["allowed"], allowed, "{name} {op}: {resp}");
            let got: Vec<&str> = resp["status"]["details"]["causes"]
                .as_array()
                .map(|c| c.iter().map(|c| c["field"].as_str().unwrap()).collect())
                .unwrap_or_default();
            assert_eq!(got, fields, "{name} {op}");
            if !allowed {
                let msg = resp["status"]["message"].as_str().unwrap();
                for f in &fields {
                    assert!(msg.contains(f), "{name}: {msg} lacks {f}");
                }
            }
        }
    }
    drop(server.dir);
}

#[tokio::test]
async fn defaulting_over_https() {
    let (server, pair) = start().await;
    let (status, reply, _) = post(
        server.addr,
        &pair.ca_pem,
        MUTATE_PATH,
        &review("CREATE", pool("gpu", json!({}))),
    )
    .await
    .unwrap();
    assert_eq!(status, 200);
    let resp = &reply["response"];
    assert_eq!(resp["allowed"], true);
    assert_eq!(resp["patchType"], "JSONPatch");
    let patch = base64::engine::general_purpose::STANDARD
        .decode(resp["patch"].as_str().expect("base64 patch"))
        .unwrap();
    let patch: json_patch::Patch = serde_json::from_slice(&patch).unwrap();
    let mut obj = pool("gpu", json!({}));
    json_patch::patch(&mut obj, &patch).unwrap();
    assert_eq!(
        obj["metadata"]["labels"],
        json!({"node-pool.lailin.xyz": "gpu"})
    );
    assert_eq!(obj["spec"]["handler"], "runc");
}

#[tokio::test]
async fn rotated_certificate_is_served_without_restart() {
    let (server, first) = start().await;
    let body = review("CREATE", pool("p", json!({"handler": "runc"})));
    let (_, _, cert_a) = post(server.addr, &first.ca_pem, VALIDATE_PATH, &body)
        .await
        .unwrap();
    // Rotate to a pair from another CA.
    let second = self_signed(&["localhost"]);
    second.write_to_dir(server.dir.path()).unwrap();
    let (_, reply, cert_b) = post(server.addr, &second.ca_pem, VALIDATE_PATH, &body)
        .await
        .unwrap();
    assert_eq!(reply["response"]["allowed"], true);
    assert_ne!(cert_a, cert_b);
    assert_eq!(server.server.cert_watcher().generation(), 2);
    // Clients that only trust the old CA are now refused at the handshake.
    let err = post(server.addr, &first.ca_pem, VALIDATE_PATH, &body)
        .await
        .unwrap_err();
    assert!(err.to_lowercase().contains("certificate"), "{err}");
}

#[tokio::test]
async fn untrusted_clients_fail_the_handshake_and_the_server_survives() {
    let (server, pair) = start().await;
    let stranger = self_signed(&["localhost"]);
    assert!(
        post(server.addr, &stranger.ca_pem, VALIDATE_PATH, &json!({}))
            .await
            .is_err()
    );
    // A plain-text client gets nowhere either.
    let mut tcp = TcpStream::connect(server.addr).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    tcp.write_all(b"POST / HTTP/1.1\r\n\r\n").await.unwrap();
    let mut buf = Vec::new();
    let _ = tcp.read_to_end(&mut buf).await;
    assert!(!String::from_utf8_lossy(&buf).contains("AdmissionReview"));
    // Still serving: a body that is not an AdmissionReview is refused (kcr-webhook answers
    // 400 with a Status, there being no uid to answer to), a review is answered.
    let (status, reply, _) = post(
        server.addr,
        &pair.ca_pem,
        VALIDATE_PATH,
        &json!({"garbage": true}),
    )
    .await
    .unwrap();
    assert_eq!(status, 400);
    assert_eq!(reply["kind"], "Status", "{reply}");
    let body = review("CREATE", pool("p", json!({"handler": "runc"})));
    let (status, reply, _) = post(server.addr, &pair.ca_pem, VALIDATE_PATH, &body)
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(reply["response"]["allowed"], true);
}
