//! The floor of the scale benchmark's bytes per object: object 0 of `--kind` in `--namespace`,
//! fetched as JSON and decoded as kube-rs decodes it (`serde_json` into the typed object, or
//! into `PartialObjectMeta` with `--mode meta`) under a counting allocator. Prints
//! `scale-floor kind=<..> mode=<..> json_bytes=<..> decoded_bytes=<..> stripped_bytes=<..>`:
//! the bytes the decoded object holds on the heap plus its own size in an `Arc`, with and
//! without `metadata.managedFields`. A cache cannot hold an object in fewer bytes without
//! re-encoding it.

// A global allocator is unsafe to implement by definition; this one only forwards to `System`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};

use clap::Parser;
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_bench::scale::ScaleKind;
use kcr_bench::{Bench, Mode};
use kube::core::PartialObjectMeta;
use kube::{Resource, ResourceExt};

/// The system allocator, counting the bytes live (requested sizes).
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call forwards to `System` with the caller's layout unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded as given.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded as given.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: forwarded as given.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Command line.
#[derive(Debug, Parser)]
struct Args {
    /// The namespace holding the objects.
    #[arg(long)]
    namespace: String,
    /// Which kind.
    #[arg(long, value_enum, default_value = "bench")]
    kind: ScaleKind,
    /// Full object or metadata only.
    #[arg(long, value_enum, default_value = "full")]
    mode: Mode,
}

/// Live bytes of `json` decoded as `K` and kept in an `Arc`, with and without managed fields.
fn decoded<K: Resource + serde::de::DeserializeOwned>(
    json: &str,
) -> anyhow::Result<(isize, isize)> {
    let before = LIVE.load(Ordering::Relaxed);
    let whole = Arc::new(serde_json::from_str::<K>(json)?);
    let with = LIVE.load(Ordering::Relaxed) - before;
    drop(whole);
    let before = LIVE.load(Ordering::Relaxed);
    let mut object = serde_json::from_str::<K>(json)?;
    object.managed_fields_mut().clear();
    object.managed_fields_mut().shrink_to_fit();
    let stripped = Arc::new(object);
    let without = LIVE.load(Ordering::Relaxed) - before;
    drop(stripped);
    Ok((with, without))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let client = kcr_bench::client().await?;
    let name = args.kind.object_name(0);
    let path = match args.kind {
        ScaleKind::Bench => format!(
            "/apis/bench.kcr.io/v1/namespaces/{}/benches/{name}",
            args.namespace
        ),
        ScaleKind::Configmap => format!("/api/v1/namespaces/{}/configmaps/{name}", args.namespace),
    };
    let request = http::Request::get(path).body(Vec::new())?;
    let json = client.request_text(request).await?;
    let (with, without) = match (args.kind, args.mode) {
        (ScaleKind::Bench, Mode::Full) => decoded::<Bench>(&json)?,
        (ScaleKind::Bench, Mode::Meta) => decoded::<PartialObjectMeta<Bench>>(&json)?,
        (ScaleKind::Configmap, Mode::Full) => decoded::<ConfigMap>(&json)?,
        (ScaleKind::Configmap, Mode::Meta) => decoded::<PartialObjectMeta<ConfigMap>>(&json)?,
    };
    println!(
        "scale-floor kind={} mode={} json_bytes={} decoded_bytes={with} stripped_bytes={without}",
        args.kind.as_str(),
        args.mode.as_str(),
        json.len(),
    );
    Ok(())
}
