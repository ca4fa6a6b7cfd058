//! Many concurrent writers with optimistic concurrency: no lost update, one global
//! monotonically increasing resourceVersion, watch order equal to commit order.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_envtest::TestNamespace;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

const WRITERS: usize = 8;
const INCREMENTS: usize = 25;
const COUNTERS: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_optimistic_writers() {
    let ns = TestNamespace::new("writers").await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(ns.client());
    for c in 0..COUNTERS {
        let o: ConfigMap = serde_json::from_value(
            json!({"metadata": {"name": format!("counter-{c}")}, "data": {"n": "0"}}),
        )
        .unwrap();
        api.create(&PostParams::default(), &o).await.unwrap();
    }
    let start_rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut watch = api
        .watch(&WatchParams::default(), &start_rv)
        .await
        .unwrap()
        .boxed();

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let api = api.clone();
            tokio::spawn(async move {
                let mut conflicts = 0usize;
                // Deterministic spread of writers over counters.
                for i in 0..INCREMENTS {
                    let name = format!("counter-{}", (w * 7 + i * 3) % COUNTERS);
                    loop {
                        let mut cur = api.get(&name).await.unwrap();
                        let data = cur.data.get_or_insert_with(BTreeMap::new);
                        let n: usize = data["n"].parse().unwrap();
                        data.insert("n".into(), (n + 1).to_string());
                        match api.replace(&name, &PostParams::default(), &cur).await {
                            Ok(_) => break,
                            Err(kube::Error::Api(s)) if s.code == 409 => conflicts += 1,
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
                conflicts
            })
        })
        .collect();
    let mut conflicts = 0;
    for w in writers {
        conflicts += w.await.unwrap();
    }
    // No lost update.
    let total: usize = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|o| o.data.as_ref().unwrap()["n"].parse::<usize>().unwrap())
        .sum();
    assert_eq!(total, WRITERS * INCREMENTS);
    // The watch sees every successful write exactly once, RVs strictly increasing and, per
    // counter, values 1, 2, 3, ... in order.
    let mut last_rv = start_rv.parse::<u64>().unwrap();
    let mut per_counter: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..WRITERS * INCREMENTS {
        let ev = tokio::time::timeout(Duration::from_secs(20), watch.next())
            .await
            .expect("event in time")
            .unwrap()
            .unwrap();
        let WatchEvent::Modified(o) = ev else {
            panic!("unexpected {ev:?}")
        };
        let rv: u64 = o
            .metadata
            .resource_version
            .as_deref()
            .unwrap()
            .parse()
            .unwrap();
        assert!(rv > last_rv, "resourceVersions strictly increase");
        last_rv = rv;
        let n: usize = o.data.unwrap()["n"].parse().unwrap();
        let seen = per_counter.entry(o.metadata.name.unwrap()).or_default();
        assert_eq!(n, *seen + 1, "commit order");
        *seen = n;
    }
    println!("{conflicts} conflicts resolved by retries");
}
