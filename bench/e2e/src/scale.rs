//! The scale benchmark (`bench/run.sh scale`): what a synced cache of N objects costs.
//!
//! Each run is one process (`kcr-bench-scale-kcr`, `kcr-bench-scale-kube`, or the Go peer
//! `bench/go/cmd/scale`) that starts one cache of one kind in one namespace, cold, waits until
//! it holds its first complete list, then sits for `--steady-secs` and prints one line:
//!
//! ```text
//! scale-bench impl=<kcr|kube-runtime|controller-runtime> objects=N mode=<full|meta> kind=<bench|configmap>
//!   list=<paginated|streaming> managed_fields=<keep|strip> sync_s= peak_rss_mib= steady_rss_mib=
//!   cpu_s= bytes_per_object= base_rss_mib=
//! ```
//!
//! (one line in the output). `sync_s`: from the launcher's `BENCH_T0_NS` (just before the
//! process starts) to the cache's sync; `peak_rss_mib`: `VmHWM` at the sync (the list and the
//! store at their largest); `steady_rss_mib`: `VmRSS` after the steady wait; `cpu_s`: the
//! process's CPU time at the sync; `base_rss_mib`: `VmRSS` with the client made and no watch
//! started; `bytes_per_object`: `(steady - base) / N`, what each cached object costs the
//! process. The floor it is compared with comes from `kcr-bench-floor` (one object decoded
//! under a counting allocator).
//!
//! The objects are made by `kcr-bench-create --kind <bench|configmap>`: [`Bench`](crate::Bench)
//! custom resources as in the e2e benchmark, and ConfigMaps with [`configmap_payload`]
//! (about 1 KiB of data and a few labels).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;

use crate::{Mode, cpu_secs, rss_hwm_mib, start_us};

/// The kind a scale run caches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ScaleKind {
    /// The e2e benchmark's custom resource, [`Bench`](crate::Bench).
    Bench,
    /// ConfigMaps with [`configmap_payload`].
    Configmap,
}

impl ScaleKind {
    /// `bench` or `configmap`.
    pub fn as_str(self) -> &'static str {
        match self {
            ScaleKind::Bench => "bench",
            ScaleKind::Configmap => "configmap",
        }
    }
    /// The name of object `i` of this kind.
    pub fn object_name(self, i: usize) -> String {
        format!("{}-{i}", self.as_str())
    }
}

/// How the cache is filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ListMode {
    /// Paged LISTs read from etcd (`resourceVersion` unset), then a watch: kube-rs's default.
    Paginated,
    /// One unpaged LIST the API server answers from its watch cache (`resourceVersion=0`),
    /// then a watch: what client-go's reflector's first list gets.
    Cache,
    /// A streaming list (`WatchList`: a watch with `sendInitialEvents=true`).
    Streaming,
}

impl ListMode {
    /// `paginated` or `streaming`.
    pub fn as_str(self) -> &'static str {
        match self {
            ListMode::Paginated => "paginated",
            ListMode::Cache => "cache",
            ListMode::Streaming => "streaming",
        }
    }
}

/// Whether the cache keeps `metadata.managedFields`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ManagedFields {
    /// Kept (kube-runtime's and controller-runtime's default).
    Keep,
    /// Dropped before caching (kcr's default).
    Strip,
}

impl ManagedFields {
    /// `keep` or `strip`.
    pub fn as_str(self) -> &'static str {
        match self {
            ManagedFields::Keep => "keep",
            ManagedFields::Strip => "strip",
        }
    }
}

/// Command line of a scale run.
#[derive(Debug, clap::Parser)]
pub struct ScaleArgs {
    /// The namespace whose objects to cache.
    #[arg(long)]
    pub namespace: String,
    /// How many objects the namespace holds (the run checks the synced cache holds them all).
    #[arg(long)]
    pub objects: usize,
    /// Which kind.
    #[arg(long, value_enum, default_value = "bench")]
    pub kind: ScaleKind,
    /// Full objects or metadata only.
    #[arg(long, value_enum, default_value = "full")]
    pub mode: Mode,
    /// Paged lists from etcd, lists from the watch cache, or a streaming list.
    #[arg(long, value_enum, default_value = "paginated")]
    pub list: ListMode,
    /// Keep or strip `managedFields`; unset, the implementation's default.
    #[arg(long, value_enum)]
    pub managed_fields: Option<ManagedFields>,
    /// Seconds to sit after the sync before the steady RSS is read.
    #[arg(long, default_value_t = 5)]
    pub steady_secs: u64,
    /// Give up when the cache has not synced after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout_secs: u64,
}

/// Resident set size of this process now (`VmRSS` of `/proc/self/status`), in MiB.
pub fn rss_mib() -> f64 {
    crate::proc_status_mib("VmRSS:")
}

/// One scale run: made before the watch starts (it reads the base RSS then), told of the sync,
/// then [`finish`](ScaleRun::finish)ed.
pub struct ScaleRun {
    implementation: &'static str,
    managed_fields: ManagedFields,
    start_us: i64,
    base_rss_mib: f64,
    synced: Option<(i64, f64, f64)>,
}

impl ScaleRun {
    /// A run of `implementation` whose cache keeps or strips managed fields as `managed_fields`
    /// says; reads the base RSS now.
    pub fn new(implementation: &'static str, managed_fields: ManagedFields) -> Self {
        ScaleRun {
            implementation,
            managed_fields,
            start_us: start_us(),
            base_rss_mib: rss_mib(),
            synced: None,
        }
    }

    /// The cache is synced now: reads the time, peak RSS and CPU.
    pub fn synced(&mut self) {
        self.synced = Some((crate::now_us(), rss_hwm_mib(), cpu_secs()));
    }

    /// Waits the steady time, then prints the `scale-bench` line. `cached` is how many objects
    /// the synced cache held; a run whose cache did not sync or holds fewer than asked is an
    /// error (after the line, which then says `incomplete=1`).
    pub async fn finish(self, args: &ScaleArgs, cached: usize) -> anyhow::Result<()> {
        tokio::time::sleep(Duration::from_secs(args.steady_secs)).await;
        let steady = rss_mib();
        let (sync_s, peak, cpu) = match self.synced {
            Some((at, peak, cpu)) => ((at - self.start_us) as f64 / 1e6, peak, cpu),
            None => (f64::NAN, rss_hwm_mib(), cpu_secs()),
        };
        let per_object =
            (steady - self.base_rss_mib) * 1024.0 * 1024.0 / args.objects.max(1) as f64;
        let complete = self.synced.is_some() && cached >= args.objects;
        println!(
            "scale-bench impl={} objects={} mode={} kind={} list={} managed_fields={} sync_s={sync_s:.3} peak_rss_mib={peak:.1} steady_rss_mib={steady:.1} cpu_s={cpu:.2} bytes_per_object={per_object:.0} base_rss_mib={:.1}{}",
            self.implementation,
            args.objects,
            args.mode.as_str(),
            args.kind.as_str(),
            args.list.as_str(),
            self.managed_fields.as_str(),
            self.base_rss_mib,
            if complete { "" } else { " incomplete=1" },
        );
        anyhow::ensure!(
            complete,
            "the cache of {} did not sync with {} objects within {} s (it holds {cached})",
            args.namespace,
            args.objects,
            args.timeout_secs
        );
        Ok(())
    }
}

/// ConfigMap number `i` of the scale benchmark: about 1 KiB of data in eight keys and three
/// labels, in `namespace`.
pub fn configmap_payload(namespace: &str, i: usize) -> ConfigMap {
    // A fixed, varied text (not one repeated byte), different per object.
    let line = |key: usize| -> String {
        (0..128)
            .map(|c| {
                let n = (i * 31 + key * 17 + c * 7) % 62;
                char::from(match n {
                    0..=9 => b'0' + n as u8,
                    10..=35 => b'a' + (n - 10) as u8,
                    _ => b'A' + (n - 36) as u8,
                })
            })
            .collect()
    };
    let data: BTreeMap<String, String> = (0..8).map(|k| (format!("key-{k}"), line(k))).collect();
    let labels: BTreeMap<String, String> = [
        ("app.kubernetes.io/name", "scale-bench".to_string()),
        ("app.kubernetes.io/part-of", "kcr".to_string()),
        ("bench.kcr.io/shard", (i % 16).to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(ScaleKind::Configmap.object_name(i)),
            namespace: Some(namespace.to_string()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..ConfigMap::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configmap_payload_is_about_one_kib_and_differs_per_object() {
        let a = configmap_payload("ns", 0);
        let b = configmap_payload("ns", 1);
        let bytes: usize = a
            .data
            .as_ref()
            .unwrap()
            .iter()
            .map(|(k, v)| k.len() + v.len())
            .sum();
        assert!((1000..1200).contains(&bytes), "{bytes}");
        assert_ne!(a.data, b.data);
        assert_eq!(a.metadata.name.as_deref(), Some("configmap-0"));
        assert_eq!(a.metadata.labels.as_ref().unwrap().len(), 3);
    }
}
