//! End-to-end benchmark controllers for `bench/run.sh e2e`: the same controller written with kcr
//! (`kcr-bench-kcr`) and with kube-runtime's `Controller` (`kcr-bench-kube`); the Go one, written
//! with controller-runtime, is `bench/go/cmd/e2e`. `kcr-bench-create` creates the objects and the
//! `cluster` example starts the real control plane.
//!
//! Every controller watches [`Bench`] objects (`benches.bench.kcr.io`, namespaced) in one
//! namespace and reconciles each with at most one API write: when `status.observedGeneration`
//! differs from `metadata.generation`, a JSON merge patch of the status subresource with the
//! generation, the spec's value (full watch only) and the time of the write. An object already
//! reconciled is skipped without a write, so a controller restarted over reconciled objects
//! (the sync and memory runs) writes nothing.
//!
//! Each controller process is one run ([`Args`]) and ends with one [`Tracker::report`] line:
//! `e2e-run impl=<..> mode=<full|meta> objects=<n> synced_s=<..> all_reconciled_s=<..>
//! writes=<n> rss_hwm_mib=<..> cpu_s=<..>` (`cpu_s`: the process's CPU time from start to the
//! report). Latencies (one per status write, milliseconds from the creator
//! sending the create request, taken from the [`CREATED_AT`] annotation, to the status write
//! returning) go to `--latency-file`, one per line.
//!
//! The scale benchmark (`bench/run.sh scale`, [`scale`]) reuses the kind and the creator: caches
//! of up to 100,000 `Bench` objects or ConfigMaps, synced cold by `kcr-bench-scale-kcr`,
//! `kcr-bench-scale-kube` and the Go peer, and `kcr-bench-floor` for the bytes one decoded
//! object holds.

pub mod scale;

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kube::CustomResource;
use kube::api::{Api, Patch, PatchParams};
use parking_lot::Mutex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The annotation the creator sets on every object: unix time in microseconds just before it
/// sent the create request.
pub const CREATED_AT: &str = "bench.kcr.io/created-at-us";

/// The benchmark's custom resource: a value to copy into the status.
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "bench.kcr.io",
    version = "v1",
    kind = "Bench",
    plural = "benches",
    namespaced,
    status = "BenchStatus"
)]
pub struct BenchSpec {
    /// Any number; the controller copies it into the status.
    pub value: i64,
}

/// What the controller writes.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BenchStatus {
    /// The generation the status was written for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `spec.value` as seen by the controller (full watch only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<i64>,
    /// Unix time in microseconds when the controller wrote this status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconciled_at_us: Option<i64>,
}

/// Which watch a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Full objects in the cache.
    Full,
    /// Metadata-only watch (`PartialObjectMeta`): the cache keeps metadata alone.
    Meta,
}

impl Mode {
    /// `full` or `meta`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Full => "full",
            Mode::Meta => "meta",
        }
    }
}

/// Command line of a benchmark controller.
#[derive(Debug, clap::Parser)]
pub struct Args {
    /// The namespace whose objects to reconcile.
    #[arg(long)]
    pub namespace: String,
    /// The run ends once this many distinct objects are reconciled.
    #[arg(long)]
    pub objects: usize,
    /// Full or metadata-only watch.
    #[arg(long, value_enum, default_value = "full")]
    pub mode: Mode,
    /// Concurrent reconciles.
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// Where to write the latencies (milliseconds, one per line).
    #[arg(long)]
    pub latency_file: Option<PathBuf>,
    /// Give up after this many seconds (the report then says `incomplete=1`).
    #[arg(long, default_value_t = 600)]
    pub timeout_secs: u64,
}

/// Unix time in microseconds.
pub fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// The process's start as the launcher saw it: `BENCH_T0_NS` (unix nanoseconds, set by
/// `bench/run.sh` just before it starts the process), else now.
pub fn start_us() -> i64 {
    std::env::var("BENCH_T0_NS")
        .ok()
        .and_then(|t| t.parse::<i64>().ok())
        .map(|ns| ns / 1000)
        .unwrap_or_else(now_us)
}

/// Peak resident set size of this process (`VmHWM` of `/proc/self/status`), in MiB.
pub fn rss_hwm_mib() -> f64 {
    proc_status_mib("VmHWM:")
}

/// A `kB` line of `/proc/self/status` (`field` with its colon), in MiB; NaN when unreadable.
fn proc_status_mib(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map(|kib| kib / 1024.0)
        .unwrap_or(f64::NAN)
}

/// CPU time this process has used so far (user + system, `/proc/self/stat`), in seconds, at
/// the kernel's 10 ms tick. The Go controller reads it the same way.
pub fn cpu_secs() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            // Fields after the command name (which may hold spaces) in parentheses: state is
            // field 3, utime 14 and stime 15.
            let rest = &s[s.rfind(')')? + 1..];
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let ticks =
                fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
            Some(ticks as f64 / CLOCK_TICKS_PER_SEC)
        })
        .unwrap_or(f64::NAN)
}

/// `sysconf(_SC_CLK_TCK)` on Linux (fixed at 100 by the kernel's user ABI).
const CLOCK_TICKS_PER_SEC: f64 = 100.0;

/// The `created-at` annotation of an object, if it has one.
pub fn created_at(meta: &kube::api::ObjectMeta) -> Option<i64> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(CREATED_AT))
        .and_then(|v| v.parse().ok())
}

#[derive(Default)]
struct State {
    done: HashSet<String>,
    latencies_ms: Vec<f64>,
    first_created_us: Option<i64>,
    last_done_us: i64,
    writes: u64,
}

/// Counts what a run reconciled and reports it.
pub struct Tracker {
    implementation: &'static str,
    args: Args,
    start_us: i64,
    synced_us: Mutex<Option<i64>>,
    state: Mutex<State>,
    finished: tokio::sync::Notify,
}

impl Tracker {
    /// A tracker for one run of `implementation` (`kcr`, `kube-runtime`).
    pub fn new(implementation: &'static str, args: Args) -> Self {
        Tracker {
            implementation,
            args,
            start_us: start_us(),
            synced_us: Mutex::new(None),
            state: Mutex::default(),
            finished: tokio::sync::Notify::new(),
        }
    }

    /// A tracker for one run of `implementation`, from the command line's arguments, with a
    /// client from `KUBECONFIG`: how each controller binary starts.
    pub async fn from_command_line(
        implementation: &'static str,
    ) -> anyhow::Result<(std::sync::Arc<Tracker>, kube::Client)> {
        let args = <Args as clap::Parser>::parse();
        let client = client().await?;
        Ok((
            std::sync::Arc::new(Tracker::new(implementation, args)),
            client,
        ))
    }

    /// The run's arguments.
    pub fn args(&self) -> &Args {
        &self.args
    }

    /// The caches are synced now.
    pub fn synced(&self) {
        self.synced_us.lock().get_or_insert_with(now_us);
    }

    /// One object reconciled: `wrote` says whether this reconcile wrote its status (then
    /// `created_us`, its creation annotation, gives a latency). Only an object's first reconcile
    /// counts.
    pub fn reconciled(&self, name: &str, created_us: Option<i64>, wrote: bool) {
        let now = now_us();
        let mut state = self.state.lock();
        if wrote {
            state.writes += 1;
        }
        if !state.done.insert(name.to_string()) {
            return;
        }
        if let Some(created) = created_us {
            state.first_created_us =
                Some(state.first_created_us.map_or(created, |c| c.min(created)));
            if wrote {
                state.latencies_ms.push((now - created) as f64 / 1000.0);
            }
        }
        state.last_done_us = now;
        if state.done.len() >= self.args.objects {
            self.finished.notify_one();
        }
    }

    /// Waits until every object is reconciled or the timeout passes; `true` when complete.
    pub async fn wait(&self) -> bool {
        tokio::time::timeout(
            Duration::from_secs(self.args.timeout_secs),
            self.finished.notified(),
        )
        .await
        .is_ok()
    }

    /// Prints the `e2e-run` line and writes the latency file.
    pub fn report(&self, complete: bool) -> anyhow::Result<()> {
        let state = self.state.lock();
        let synced = self
            .synced_us
            .lock()
            .map_or(f64::NAN, |s| (s - self.start_us) as f64 / 1e6);
        // With objects created while the controller runs, from the first create request;
        // otherwise (the restart runs) from the process start.
        let from = match state.first_created_us {
            Some(created) if created > self.start_us => created,
            _ => self.start_us,
        };
        let all = (state.last_done_us - from) as f64 / 1e6;
        println!(
            "e2e-run impl={} mode={} objects={} synced_s={synced:.3} all_reconciled_s={all:.3} writes={} rss_hwm_mib={:.1} cpu_s={:.2}{}",
            self.implementation,
            self.args.mode.as_str(),
            state.done.len(),
            state.writes,
            rss_hwm_mib(),
            cpu_secs(),
            if complete { "" } else { " incomplete=1" },
        );
        if let Some(path) = &self.args.latency_file {
            let text: String = state
                .latencies_ms
                .iter()
                .map(|l| format!("{l:.3}\n"))
                .collect();
            std::fs::write(path, text)?;
        }
        Ok(())
    }
}

/// The status patch for an object whose status is not current: `None` when
/// `status.observedGeneration` already equals `metadata.generation` (nothing to write).
pub fn status_patch(
    generation: Option<i64>,
    observed: Option<i64>,
    value: Option<i64>,
) -> Option<serde_json::Value> {
    let generation = generation.unwrap_or(0);
    if observed == Some(generation) {
        return None;
    }
    let mut status = serde_json::json!({
        "observedGeneration": generation,
        "reconciledAtUs": now_us(),
    });
    if let Some(value) = value {
        status["value"] = value.into();
    }
    Some(serde_json::json!({ "status": status }))
}

/// Writes a status patch made by [`status_patch`] (one API request).
pub async fn write_status(
    api: &Api<Bench>,
    name: &str,
    patch: &serde_json::Value,
) -> Result<(), kube::Error> {
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map(|_| ())
}

/// A `kube::Client` from `KUBECONFIG` (or the default locations).
pub async fn client() -> anyhow::Result<kube::Client> {
    Ok(kube::Client::try_default().await?)
}
