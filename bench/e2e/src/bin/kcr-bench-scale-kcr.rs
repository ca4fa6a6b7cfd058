//! The scale benchmark's kcr run: one [`Cache`] with one [`Reader`] of the kind (or its
//! metadata) in one namespace, cold; kcr's default transform (drop `managedFields`) unless
//! `--managed-fields keep`. See [`kcr_bench::scale`].

use std::time::Duration;

use clap::Parser;
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_bench::Bench;
use kcr_bench::Mode;
use kcr_bench::scale::{ListMode, ManagedFields, ScaleArgs, ScaleKind, ScaleRun};
use kcr_source::{Cache, CacheObject, Reader, ScopedApi, WatchScope};
use kube::core::PartialObjectMeta;

/// Starts the reader of `K`, waits for its sync and finishes the run.
async fn cache_of<K>(cache: Cache, args: &ScaleArgs, mut run: ScaleRun) -> anyhow::Result<()>
where
    K: CacheObject,
    K::DynamicType: Default,
    K::Scope: ScopedApi,
{
    if args.managed_fields == Some(ManagedFields::Keep) {
        cache.keep_whole::<K>()?;
    }
    let mut scope = WatchScope::all().namespace(&args.namespace);
    match args.list {
        ListMode::Paginated => scope = scope.paged_list(),
        ListMode::Cache => scope = scope.list_from_cache(),
        ListMode::Streaming => scope = scope.streaming_list(),
    }
    let reader: Reader<K> = cache.reader::<K>(scope)?;
    if reader
        .sync()
        .wait_timeout(Duration::from_secs(args.timeout_secs))
        .await
        .is_ok()
    {
        run.synced();
    }
    let cached = reader.list().len();
    run.finish(args, cached).await
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = ScaleArgs::parse();
    let client = kcr_bench::client().await?;
    let run = ScaleRun::new("kcr", args.managed_fields.unwrap_or(ManagedFields::Strip));
    let cache = Cache::new(client);
    match (args.kind, args.mode) {
        (ScaleKind::Bench, Mode::Full) => cache_of::<Bench>(cache, &args, run).await,
        (ScaleKind::Bench, Mode::Meta) => {
            cache_of::<PartialObjectMeta<Bench>>(cache, &args, run).await
        }
        (ScaleKind::Configmap, Mode::Full) => cache_of::<ConfigMap>(cache, &args, run).await,
        (ScaleKind::Configmap, Mode::Meta) => {
            cache_of::<PartialObjectMeta<ConfigMap>>(cache, &args, run).await
        }
    }
}
