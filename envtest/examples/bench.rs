//! Benchmark of the test API server: a 10,000-node list, one watch delivering 100,000 events,
//! and 10 concurrent watchers. Run with
//! `cargo run --release -p kcr-envtest --example bench`.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kcr_envtest::TestApiServer;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use serde_json::json;

const NODES: usize = 10_000;
const EVENTS: usize = 100_000;
const WATCHERS: usize = 10;

/// Consume `n` events of a watch from `rv`; returns the elapsed time.
async fn drain(api: Api<ConfigMap>, rv: String, n: usize) -> Duration {
    let started = Instant::now();
    let mut stream = api
        .watch(&WatchParams::default().timeout(290), &rv)
        .await
        .expect("watch starts")
        .boxed();
    let mut seen = 0;
    while seen < n {
        match stream.next().await {
            Some(Ok(WatchEvent::Added(_) | WatchEvent::Modified(_) | WatchEvent::Deleted(_))) => {
                seen += 1
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => panic!("watch error after {seen} events: {e}"),
            None => panic!("watch ended after {seen} events"),
        }
    }
    started.elapsed()
}

/// Consume `n` events as raw newline-delimited JSON (no decoding): the server's delivery rate.
async fn drain_raw(client: kube::Client, rv: String, n: usize) -> Duration {
    use futures::AsyncBufReadExt;
    let started = Instant::now();
    let req = http::Request::get(format!(
        "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=290"
    ))
    .body(vec![])
    .expect("valid request");
    let mut body = std::pin::pin!(client.request_stream(req).await.expect("watch starts"));
    let mut seen = 0;
    let mut line = Vec::new();
    while seen < n {
        line.clear();
        let read = body.read_until(b'\n', &mut line).await.expect("read");
        assert!(read > 0, "watch ended after {seen} events");
        if !line.starts_with(b"{\"type\":\"BOOKMARK") {
            seen += 1;
        }
    }
    started.elapsed()
}

/// Run `WATCHERS` concurrent drains and print the slowest per-watcher rate.
async fn concurrent(label: &str, raw: bool, client: &kube::Client, rv0: &str) {
    let started = Instant::now();
    let handles: Vec<_> = (0..WATCHERS)
        .map(|_| {
            let (client, rv) = (client.clone(), rv0.to_string());
            tokio::spawn(async move {
                if raw {
                    drain_raw(client, rv, EVENTS).await
                } else {
                    drain(Api::namespaced(client, "default"), rv, EVENTS).await
                }
            })
        })
        .collect();
    let mut per = Vec::new();
    for h in handles {
        per.push(h.await.expect("watcher task"));
    }
    let wall = started.elapsed();
    let slowest = per.iter().max().copied().unwrap_or_default();
    println!(
        "{WATCHERS} concurrent watchers x {EVENTS} events ({label}): wall {:.0} ms, slowest watcher {:.0} events/s, aggregate {:.0} events/s",
        wall.as_secs_f64() * 1e3,
        EVENTS as f64 / slowest.as_secs_f64(),
        (EVENTS * WATCHERS) as f64 / wall.as_secs_f64()
    );
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = TestApiServer::builder()
        .history_window(EVENTS + NODES + 100)
        .start()
        .await?;
    let client = server.client();

    // 1. List of 10,000 nodes (typed kube list: HTTP + JSON decoding into k8s-openapi Nodes).
    server.add_nodes(NODES).await?;
    let nodes: Api<Node> = Api::all(client.clone());
    let mut times = Vec::new();
    for _ in 0..7 {
        let started = Instant::now();
        let list = nodes.list(&ListParams::default()).await?;
        times.push(started.elapsed());
        assert_eq!(list.items.len(), NODES);
    }
    times.sort();
    println!(
        "list {NODES} nodes (kube::Api::list, typed): median {:.1} ms, best {:.1} ms",
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3
    );

    // 2. One watch delivering 100,000 events (1,000 configmaps, each written 100 times).
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let rv0 = server.resource_version().await?.to_string();
    let written = Instant::now();
    for round in 0..EVENTS / 1000 {
        for i in 0..1000 {
            server.upsert(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i}"), "namespace": "default", "labels": {"app": "bench"}},
                "data": {"round": round.to_string()},
            })).await?;
        }
    }
    let write_rate = EVENTS as f64 / written.elapsed().as_secs_f64();
    let one = drain(cms.clone(), rv0.clone(), EVENTS).await;
    println!(
        "1 watcher, {EVENTS} events (typed kube watch stream): {:.0} ms, {:.0} events/s  [store writes: {:.0}/s]",
        one.as_secs_f64() * 1e3,
        EVENTS as f64 / one.as_secs_f64(),
        write_rate
    );

    let raw = drain_raw(client.clone(), rv0.clone(), EVENTS).await;
    println!(
        "1 watcher, {EVENTS} events (raw bytes, no decoding): {:.0} ms, {:.0} events/s",
        raw.as_secs_f64() * 1e3,
        EVENTS as f64 / raw.as_secs_f64()
    );

    // 3. Ten concurrent watchers over the same 100,000 events.
    concurrent("raw bytes", true, &client, &rv0).await;
    concurrent("typed kube watch streams", false, &client, &rv0).await;

    // Server-side cost of the node list alone (raw bytes, no decoding).
    let mut times = Vec::new();
    for _ in 0..7 {
        let started = Instant::now();
        let text = client
            .request_text(
                http::Request::get("/api/v1/nodes")
                    .body(vec![])
                    .expect("valid request"),
            )
            .await?;
        times.push(started.elapsed());
        assert!(text.len() > NODES * 100);
    }
    times.sort();
    println!(
        "list {NODES} nodes (raw bytes, no decoding): median {:.1} ms",
        times[times.len() / 2].as_secs_f64() * 1e3
    );
    Ok(())
}
