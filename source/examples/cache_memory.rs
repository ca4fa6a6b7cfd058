//! What the default transform (dropping `managedFields`) saves in a cache of 10,000 objects.
//!
//! ```text
//! cargo run --release -p kcr-source --example cache_memory [-- <objects>]
//! KCR_ENVTEST_BACKEND=real cargo run --release -p kcr-source --example cache_memory
//! ```
//!
//! Creates `<objects>` ConfigMaps (default 10,000; two data keys and two labels each, written
//! with an Update and then a server-side apply, so each carries two managedFields entries as
//! objects touched by a controller do) in kcr-envtest, then fills one cache with the default
//! transform and one with `keep_whole`, and prints the bytes each cache holds live: the
//! process's live heap (a counting allocator) after the cache synced minus before it started.
//! With the in-process backend the API server shares the heap; its live size is the same
//! before and after a list, so the difference is the cache's (the real backend keeps the
//! server out of the process entirely).

// The one unsafe item: a global allocator that forwards to the system allocator and counts
// live bytes (a measurement tool; no kcr library code is unsafe).
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_envtest::TestApiServer;
use kcr_source::{Cache, Source, WatchScope};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call forwards to the system allocator with the caller's layout; the counter
// only observes sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

async fn fill(client: kube::Client, objects: usize) -> anyhow::Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    futures::stream::iter(0..objects)
        .map(|i| {
            let api = api.clone();
            async move {
                let name = format!("cm-{i:05}");
                let cm: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"name": name, "labels": {"app": "bench", "shard": (i % 7).to_string()}},
                    "data": {"mode": "fast", "size": i.to_string()}
                }))?;
                api.create(&PostParams::default(), &cm).await?;
                let apply = json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "annotations": {"bench.kcr.io/applied": "yes"}}
                });
                api.patch(&name, &PatchParams::apply("bench-applier"), &Patch::Apply(&apply))
                    .await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(16)
        .try_collect::<()>()
        .await
}

/// Waits until the live heap stops moving (a stopped cache's task has ended and freed its
/// store), at most five seconds.
async fn settle() {
    for _ in 0..25 {
        let before = live();
        tokio::time::sleep(Duration::from_millis(200)).await;
        if (live() - before).abs() < 64 * 1024 {
            return;
        }
    }
}

/// Live bytes held by a cache of every ConfigMap in `default`, whole or transformed.
async fn cache_bytes(client: kube::Client, whole: bool) -> anyhow::Result<(isize, usize)> {
    settle().await;
    let before = live();
    let cache = Cache::new(client);
    if whole {
        cache.keep_whole::<ConfigMap>()?;
    }
    let reader = cache.reader::<ConfigMap>(WatchScope::all().namespace("default"))?;
    let started = cache
        .kind::<ConfigMap>(WatchScope::all().namespace("default"))?
        .start()?;
    reader.wait_for_sync(Duration::from_secs(300)).await?;
    // Let the watch settle (the list's buffers are freed once it is processed).
    settle().await;
    let held = live() - before;
    let count = reader.len();
    drop((started, reader));
    cache.stop();
    drop(cache);
    Ok((held, count))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let objects: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(10_000);
    let server = TestApiServer::start().await?;
    let t = Instant::now();
    fill(server.client(), objects).await?;
    eprintln!("created {objects} ConfigMaps in {:.1?}", t.elapsed());
    // Warm the client and the server's list path once, so neither run pays for first use.
    let _ = cache_bytes(server.client(), false).await?;
    let (stripped, n1) = cache_bytes(server.client(), false).await?;
    let (whole, n2) = cache_bytes(server.client(), true).await?;
    let mib = |b: isize| b as f64 / (1024.0 * 1024.0);
    println!(
        "cache-memory backend={:?} objects={n1} default_transform_mib={:.1} per_object_bytes={} whole_mib={:.1} per_object_bytes={} saved={:.0}%",
        server.backend(),
        mib(stripped),
        stripped / n1.max(1) as isize,
        mib(whole),
        whole / n2.max(1) as isize,
        100.0 * (1.0 - stripped as f64 / whole as f64),
    );
    server.shutdown();
    Ok(())
}
