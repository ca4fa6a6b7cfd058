//! The benchmark controller written with kcr: a [`Manager`] (metrics on a free loopback port,
//! no health endpoint, no leader election), one controller `for_kind::<Bench>` (or
//! `PartialObjectMeta<Bench>` with `--mode meta`) in one namespace, `--workers` concurrent
//! reconciles reading the object from the manager's cache. See the crate docs.

use std::sync::Arc;
use std::time::Duration;

use kcr_bench::{Bench, Mode, Tracker, created_at, status_patch, write_status};
use kcr_controller::{
    Action, BindAddress, Context, Manager, ManagerOptions, Reconciler, WatchOptions,
};
use kcr_handler::Request;
use kcr_source::Reader;
use kube::Api;
use kube::core::PartialObjectMeta;
use tokio_util::sync::CancellationToken;

/// Full watch: write the status when it is not current.
struct Full {
    reader: Reader<Bench>,
    api: Api<Bench>,
    tracker: Arc<Tracker>,
}

impl Reconciler<Request> for Full {
    type Error = kube::Error;
    async fn reconcile(&self, request: &Request, _ctx: &Context) -> Result<Action, kube::Error> {
        // Requests come from the watch of the reader's namespace: never an unknown one.
        let Some(bench) = self
            .reader
            .get(&request.name, request.namespace.as_deref())
            .unwrap_or_default()
        else {
            return Ok(Action::done());
        };
        let observed = bench.status.as_ref().and_then(|s| s.observed_generation);
        let patch = status_patch(bench.metadata.generation, observed, Some(bench.spec.value));
        if let Some(patch) = &patch {
            write_status(&self.api, &request.name, patch).await?;
        }
        self.tracker
            .reconciled(&request.name, created_at(&bench.metadata), patch.is_some());
        Ok(Action::done())
    }
}

/// Metadata-only watch: the status is not in the cache, so nothing is written (this run
/// measures the cache).
struct Meta {
    reader: Reader<PartialObjectMeta<Bench>>,
    tracker: Arc<Tracker>,
}

impl Reconciler<Request> for Meta {
    type Error = kube::Error;
    async fn reconcile(&self, request: &Request, _ctx: &Context) -> Result<Action, kube::Error> {
        if let Ok(Some(meta)) = self.reader.get(&request.name, request.namespace.as_deref()) {
            self.tracker
                .reconciled(&request.name, created_at(&meta.metadata), false);
        }
        Ok(Action::done())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (tracker, client) = Tracker::from_command_line("kcr").await?;
    let args = tracker.args();
    let options = ManagerOptions {
        metrics_bind_address: BindAddress::Addr(([127, 0, 0, 1], 0).into()),
        health_probe_bind_address: BindAddress::Disabled,
        ..ManagerOptions::default()
    };
    let mgr = Manager::new(client.clone(), options).await?;
    let cache_options = kcr_source::WatchScope::all().namespace(&args.namespace);
    let builder = mgr
        .controller()
        .named("bench")
        .max_concurrent_reconciles(args.workers);
    // The reconciler's reader has the watch's options, so it is the controller's informer: its
    // sync is the controller's cache sync.
    let sync = match args.mode {
        Mode::Full => {
            let reader = mgr.reader::<Bench>(cache_options)?;
            let sync = reader.sync();
            builder
                .for_kind::<Bench>(WatchOptions::new().namespace(&args.namespace))
                .complete(Full {
                    reader,
                    api: Api::namespaced(client, &args.namespace),
                    tracker: tracker.clone(),
                })?;
            sync
        }
        Mode::Meta => {
            let reader = mgr.reader::<PartialObjectMeta<Bench>>(cache_options)?;
            let sync = reader.sync();
            builder
                .for_kind::<PartialObjectMeta<Bench>>(
                    WatchOptions::new().namespace(&args.namespace),
                )
                .complete(Meta {
                    reader,
                    tracker: tracker.clone(),
                })?;
            sync
        }
    };
    let mgr = Arc::new(mgr);
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });
    let timeout = Duration::from_secs(args.timeout_secs);
    if sync.wait_timeout(timeout).await.is_ok() {
        tracker.synced();
    }
    let complete = tracker.wait().await;
    tracker.report(complete)?;
    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(5), run).await;
    Ok(())
}
