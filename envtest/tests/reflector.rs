//! kube-runtime's watcher and reflector reach exactly the server's state through forced 410
//! relists, dropped watches, failing requests and small page sizes.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_envtest::{TestApiServer, eventually};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

/// Deterministic pseudo-random numbers (xorshift), seeded per test.
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn state_of(items: impl IntoIterator<Item = ConfigMap>) -> BTreeMap<String, String> {
    items
        .into_iter()
        .map(|o| {
            (
                o.metadata.name.unwrap_or_default(),
                o.metadata.resource_version.unwrap_or_default(),
            )
        })
        .collect()
}

fn reader_state(store: &Store<ConfigMap>) -> BTreeMap<String, String> {
    state_of(store.state().into_iter().map(|o| (*o).clone()))
}

/// Wait (bounded) until the reflector's view equals the server's list for `lp`.
async fn converge(api: &Api<ConfigMap>, lp: &ListParams, store: &Store<ConfigMap>) {
    // The test's own list may hit an injected failure too: retry it.
    let want = loop {
        if let Ok(list) = api.list(lp).await {
            break state_of(list.items);
        }
    };
    eventually("the reflector converges", Duration::from_secs(30), || {
        let got = reader_state(store);
        std::future::ready(if got == want {
            Ok(())
        } else {
            Err(format!("\n got {got:?}\nwant {want:?}"))
        })
    })
    .await;
}

/// On both backends: 410s come from forced compaction (`Faults::compact_history`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_converges_through_faults() {
    // Own server: injects faults, compacts history and reads request counters.
    let server = TestApiServer::start().await.unwrap();
    converges_through_faults(&server).await;
}

/// Pinned to the in-process backend: a 40-event history window (an in-process option;
/// kube-apiserver sizes its watch cache itself) adds 410s from watches that fall behind, on top
/// of the forced compactions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_converges_through_a_small_history_window() {
    // Own server: builder options (backend, history_window); injects faults.
    let server = TestApiServer::builder()
        .backend(kcr_envtest::Backend::InProcess)
        .history_window(40)
        .start()
        .await
        .unwrap();
    converges_through_faults(&server).await;
}

async fn converges_through_faults(server: &TestApiServer) {
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for i in 0..25 {
        let o: ConfigMap = serde_json::from_value(json!({"metadata": {"name": format!("o{i}"), "labels": {"keep": if i % 2 == 0 { "yes" } else { "no" }}}})).unwrap();
        api.create(&PostParams::default(), &o).await.unwrap();
    }

    // One reflector over everything (page size 4), one with a label selector using streaming
    // lists.
    let (all_reader, all_writer) = reflector::store();
    let all_stream = reflector::reflector(
        all_writer,
        watcher(api.clone(), watcher::Config::default().page_size(4)),
    )
    .applied_objects();
    let (sel_reader, sel_writer) = reflector::store();
    let sel_cfg = watcher::Config::default()
        .labels("keep=yes")
        .streaming_lists();
    let sel_stream =
        reflector::reflector(sel_writer, watcher(api.clone(), sel_cfg)).applied_objects();
    let drive = |s: futures::stream::BoxStream<'static, Result<ConfigMap, watcher::Error>>| {
        tokio::spawn(async move {
            // Errors are part of the protocol (410, injected failures): keep polling.
            s.for_each(|_| async {}).await;
        })
    };
    let t1 = drive(all_stream.boxed());
    let t2 = drive(sel_stream.boxed());
    all_reader.wait_until_ready().await.unwrap();
    sel_reader.wait_until_ready().await.unwrap();

    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut next_name = 100;
    let mut existing: Vec<String> = (0..25).map(|i| format!("o{i}")).collect();
    for step in 0..300 {
        match rng.next(10) {
            0..=2 => {
                let o: ConfigMap = serde_json::from_value(json!({"metadata": {"name": format!("n{next_name}"), "labels": {"keep": "yes"}}})).unwrap();
                existing.push(format!("n{next_name}"));
                next_name += 1;
                api.create(&PostParams::default(), &o).await.unwrap();
            }
            3..=6 if !existing.is_empty() => {
                let name = &existing[rng.next(existing.len() as u64) as usize];
                let keep = if rng.next(2) == 0 { "yes" } else { "no" };
                api.patch(name, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"keep": keep}}, "data": {"step": step.to_string()}})))
                    .await
                    .unwrap();
            }
            7..=8 if !existing.is_empty() => {
                let name = existing.remove(rng.next(existing.len() as u64) as usize);
                api.delete(&name, &DeleteParams::default()).await.unwrap();
            }
            _ => {}
        }
        match rng.next(25) {
            0 => server.faults().close_watches(),
            1 => server.faults().compact_history(),
            2 => server.faults().fail_next("list", "configmaps", 1, 500),
            3 => server.faults().fail_next("watch", "configmaps", 1, 500),
            _ => {}
        }
        if step % 100 == 99 {
            converge(&api, &ListParams::default(), &all_reader).await;
        }
    }
    converge(&api, &ListParams::default(), &all_reader).await;
    converge(&api, &ListParams::default().labels("keep=yes"), &sel_reader).await;
    // The faults were really exercised: relists happened.
    assert!(server.faults().request_count("list", "configmaps") > 3);
    assert!(server.faults().request_count("watch", "configmaps") > 3);
    t1.abort();
    t2.abort();
}
