//! The scale benchmark's kube-runtime run: a `reflector` store fed by `watcher` (or
//! `Api<PartialObjectMeta<K>>` with `--mode meta`) on one namespace, cold; kube-runtime keeps
//! `managedFields` unless `--managed-fields strip` (then a `modify` step clears them). See
//! [`kcr_bench::scale`].

use std::time::Duration;

use clap::Parser;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_bench::scale::{ListMode, ManagedFields, ScaleArgs, ScaleKind, ScaleRun};
use kcr_bench::{Bench, Mode};
use kube::api::Api;
use kube::core::{NamespaceResourceScope, PartialObjectMeta};
use kube::{Client, Resource, ResourceExt};
use kube_runtime::WatchStreamExt;
use kube_runtime::reflector::{self, Store};
use kube_runtime::watcher::{self, watcher};

/// Feeds a store of `K` from `events`, waits for its first complete list and finishes the run.
async fn reflect<K, S>(events: S, args: &ScaleArgs, mut run: ScaleRun) -> anyhow::Result<()>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    S: Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static,
{
    let strip = args.managed_fields == Some(ManagedFields::Strip);
    let (store, writer): (Store<K>, _) = reflector::store();
    let events = events.default_backoff().modify(move |object: &mut K| {
        if strip {
            object.managed_fields_mut().clear();
        }
    });
    let driver = tokio::spawn(events.reflect(writer).for_each(|_| std::future::ready(())));
    let timeout = Duration::from_secs(args.timeout_secs);
    if tokio::time::timeout(timeout, store.wait_until_ready())
        .await
        .is_ok_and(|ready| ready.is_ok())
    {
        run.synced();
    }
    let cached = store.len();
    let result = run.finish(args, cached).await;
    driver.abort();
    result
}

fn config(args: &ScaleArgs) -> watcher::Config {
    match args.list {
        ListMode::Paginated => watcher::Config::default(),
        ListMode::Cache => {
            // As kcr's `list_from_cache`: one unpaged request at resourceVersion=0.
            let mut config = watcher::Config::default().any_semantic();
            config.page_size = None;
            config
        }
        ListMode::Streaming => watcher::Config::default().streaming_lists(),
    }
}

/// The run for `K`, full or metadata-only.
async fn run_kind<K>(client: Client, args: &ScaleArgs, run: ScaleRun) -> anyhow::Result<()>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let api: Api<K> = Api::namespaced(client, &args.namespace);
    match args.mode {
        Mode::Full => reflect::<K, _>(watcher(api, config(args)), args, run).await,
        Mode::Meta => {
            // kube 5: an `Api<PartialObjectMeta<K>>` lists and watches metadata only.
            let api: Api<PartialObjectMeta<K>> =
                Api::namespaced(api.into_client(), &args.namespace);
            reflect::<PartialObjectMeta<K>, _>(watcher(api, config(args)), args, run).await
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = ScaleArgs::parse();
    let client = kcr_bench::client().await?;
    let run = ScaleRun::new(
        "kube-runtime",
        args.managed_fields.unwrap_or(ManagedFields::Keep),
    );
    match args.kind {
        ScaleKind::Bench => run_kind::<Bench>(client, &args, run).await,
        ScaleKind::Configmap => run_kind::<ConfigMap>(client, &args, run).await,
    }
}
