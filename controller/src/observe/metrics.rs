//! Every metric kcr exports, named and labelled as in controller-runtime and client-go so that
//! existing dashboards and alerts keep working.
//!
//! They are emitted through the `metrics` facade: install any recorder (the
//! [`Manager`](crate::Manager) installs metrics-exporter-prometheus and serves it on `/metrics`,
//! every histogram with buckets). The handles are registered once per controller, queue or
//! webhook, so recording costs no lookups. The process and tokio runtime metrics are read when
//! `/metrics` is scraped ([`crate::process`]).
//!
//! ## The metrics
//!
//! The `from` column names the crate that records the metric; a test scrapes a manager and
//! checks that the names, types and label names served are exactly those of this table.
//!
//! | name | type | labels | from | meaning |
//! |---|---|---|---|---|
//! | `controller_runtime_reconcile_total` | counter | `controller`, `result` | kcr-controller | reconciles, by `result`: `success`, `error` (errors, panics and timeouts) or `requeue_after` |
//! | `controller_runtime_reconcile_errors_total` | counter | `controller` | kcr-controller | reconciles that failed (an error, a panic or a timeout) |
//! | `controller_runtime_terminal_reconcile_errors_total` | counter | `controller` | kcr-controller | reconciles that returned a terminal error (not retried) |
//! | `controller_runtime_reconcile_panics_total` | counter | `controller` | kcr-controller | reconciles that panicked |
//! | `controller_runtime_reconcile_timeouts_total` | counter | `controller` | kcr-controller | reconciles that exceeded the per-reconcile timeout (a kcr addition) |
//! | `controller_runtime_reconcile_time_seconds` | histogram | `controller` | kcr-controller | how long each reconcile took |
//! | `controller_runtime_max_concurrent_reconciles` | gauge | `controller` | kcr-controller | the controller's number of workers |
//! | `controller_runtime_active_workers` | gauge | `controller` | kcr-controller | workers inside a reconcile now |
//! | `workqueue_depth` | gauge | `controller`, `name`, `priority` | kcr-queue | keys ready to be handed to a worker, per priority (controller-runtime's priority queue) |
//! | `workqueue_adds_total` | counter | `controller`, `name` | kcr-queue | adds that were not de-duplicated away |
//! | `workqueue_queue_duration_seconds` | histogram | `controller`, `name` | kcr-queue | from a key becoming ready to a worker taking it |
//! | `workqueue_work_duration_seconds` | histogram | `controller`, `name` | kcr-queue | from a worker taking a key to its being done |
//! | `workqueue_unfinished_work_seconds` | gauge | `controller`, `name` | kcr-queue | sum of the ages of the keys being worked on |
//! | `workqueue_longest_running_processor_seconds` | gauge | `controller`, `name` | kcr-queue | age of the oldest key being worked on |
//! | `workqueue_retries_total` | counter | `controller`, `name` | kcr-queue | rate-limited re-adds (retries after an error) |
//! | `leader_election_master_status` | gauge | `name` | kcr-controller | 1 while this replica leads the Lease `name`, else 0 (with leader election on) |
//! | `leader_election_slowpath_total` | counter | `name` | kcr-controller | renewals of the Lease `name` that had to read it first (the fast path, a write of the Lease as last written, failed or was not possible) |
//! | `rest_client_requests_total` | counter | `code`, `method`, `host` | kcr-controller | requests to the API server by HTTP status (`<error>` without a response), method and host |
//! | `rest_client_request_duration_seconds` | histogram | `verb`, `host` | kcr-controller | API request latency (until the response headers) by HTTP method and host |
//! | `rest_client_request_size_bytes` | histogram | `verb`, `host` | kcr-controller | API request body sizes by HTTP method and host |
//! | `rest_client_response_size_bytes` | histogram | `verb`, `host` | kcr-controller | API response body sizes by HTTP method and host (not for watches) |
//! | `kcr_client_request_timeouts_total` | counter | `host`, `what` | kcr-connect | requests and watches of the manager's client given up on because they did not answer within their bound (`what`: `response`, `body`, `watch_start`, `watch_idle`), each also a warning naming the host and the request |
//! | `kcr_client_dead_connections_total` | counter | `host`, `reason` | kcr-connect | connections closed as dead (`reason`: `no_answer`, bytes sent and nothing received within the bound; `connect`, a connect or TLS handshake that did not finish; counted by the connections of a client from `Manager::connect`), each also a warning |
//! | `kcr_client_api_warnings_total` | counter | `host` | kcr-connect | warnings the API server sent in `Warning` response headers (a deprecated API version, an unknown field), each distinct message also logged once by a client from `Manager::connect` |
//! | `controller_runtime_webhook_requests_total` | counter | `webhook`, `code` | kcr-webhook | webhook requests by path and HTTP status |
//! | `controller_runtime_webhook_latency_seconds` | histogram | `webhook` | kcr-webhook | how long each webhook request took |
//! | `controller_runtime_webhook_requests_in_flight` | gauge | `webhook` | kcr-webhook | webhook requests being served now |
//! | `controller_runtime_webhook_panics_total` | counter | none | kcr-webhook | webhook handlers (admission, raw or conversion) that panicked, each answered with HTTP 500 |
//! | `certwatcher_read_certificate_total` | counter | none | kcr-tls | reads of a serving certificate pair (webhook server, secured metrics), at start and after each change of the files |
//! | `certwatcher_read_certificate_errors_total` | counter | none | kcr-tls | reads of a serving certificate pair that failed (missing, unreadable, not a matching pair) |
//! | `process_cpu_seconds_total` | counter | none | kcr-controller | user and system CPU seconds (Linux) |
//! | `process_resident_memory_bytes` | gauge | none | kcr-controller | resident set size (Linux) |
//! | `process_virtual_memory_bytes` | gauge | none | kcr-controller | virtual memory size (Linux) |
//! | `process_open_fds` | gauge | none | kcr-controller | open file descriptors (Linux) |
//! | `process_max_fds` | gauge | none | kcr-controller | soft limit on open file descriptors (Linux) |
//! | `process_start_time_seconds` | gauge | none | kcr-controller | process start time in seconds since the Unix epoch (Linux) |
//! | `tokio_runtime_workers` | gauge | none | kcr-controller | worker threads of the runtime serving `/metrics` |
//! | `tokio_runtime_alive_tasks` | gauge | none | kcr-controller | tasks alive in that runtime |
//! | `tokio_runtime_global_queue_depth` | gauge | none | kcr-controller | tasks waiting in that runtime's global queue |
//!
//! Notes:
//! - A controller's queue is named after the controller: `controller` and `name` of
//!   `workqueue_*` are both that name, as in controller-runtime.
//! - `rest_client_*` count the requests of the manager's client (see [`crate::rest_client`]
//!   for the `host` label and for instrumenting other clients).
//! - `kcr_client_*` (kcr-connect) are kcr's own: a rise says the network or the API server
//!   stopped answering, not the controller. Both are exported at 0 from the start, per `what`
//!   and `reason`.
//! - The webhook metrics appear once a webhook server from kcr-webhook is added to the manager.
//! - Histograms use controller-runtime's buckets for reconcile time, client-go's for the queue
//!   and REST client, and Prometheus' default buckets otherwise.
//! - `leader_election_slowpath_total` is client-go's counter; controller-runtime (checked at
//!   v0.24.1 and its main branch of August 2026) defines it but registers only
//!   `leader_election_master_status`, so kcr serves one series more than it.
//! - Of client-go's `rest_client_*` metrics, controller-runtime (same version) serves
//!   `rest_client_requests_total` always and six more on request
//!   (`metrics.RegisterRESTClientMetrics`); kcr serves the four a layer around kube's client can
//!   measure, always.
//!
//! ## Left out, with reason
//!
//! - `rest_client_request_retries_total{code, verb, host}`: kube retries 429, 503 and 504
//!   answers itself (`kube::Config::default_retry`), inside its service stack, below every
//!   layer a user or the manager can add with `ClientBuilder::with_layer` or
//!   [`rest_client::instrument`](crate::rest_client::instrument): the layer sees one request
//!   and its final answer, never the retries. Counting them would mean replacing kube's retry
//!   layer with one of kcr's.
//! - `rest_client_rate_limiter_duration_seconds{verb, host}`: kube has no client-side rate
//!   limiter (client-go's QPS/burst limiter); there is no wait to measure.
//! - `rest_client_dns_resolution_duration_seconds{host}`: name resolution happens inside
//!   hyper's connector in kube's stack, which a request layer cannot time; kube exposes no hook.
//! - client-go's transport-cache and exec-plugin metrics (`rest_client_transport_*`,
//!   `rest_client_exec_plugin_*`): controller-runtime does not register them, and kube has
//!   neither a transport cache nor client-go's exec plugin machinery to observe.
//! - A profiling endpoint on the metrics server: see [`crate::http`] (add one with
//!   [`ManagerOptions::metrics_extra_handler`](crate::ManagerOptions::metrics_extra_handler)).

use std::collections::{BTreeMap, BTreeSet};

use ::metrics::{Counter, Gauge, Histogram, counter, describe_counter, describe_gauge};
use ::metrics::{Unit, describe_histogram, gauge, histogram};

/// `controller_runtime_reconcile_total`
pub const RECONCILE_TOTAL: &str = "controller_runtime_reconcile_total";
/// `controller_runtime_reconcile_errors_total`
pub const RECONCILE_ERRORS_TOTAL: &str = "controller_runtime_reconcile_errors_total";
/// `controller_runtime_terminal_reconcile_errors_total`
pub const TERMINAL_RECONCILE_ERRORS_TOTAL: &str =
    "controller_runtime_terminal_reconcile_errors_total";
/// `controller_runtime_reconcile_panics_total`
pub const RECONCILE_PANICS_TOTAL: &str = "controller_runtime_reconcile_panics_total";
/// `controller_runtime_reconcile_timeouts_total` (not in controller-runtime: kcr's timeouts)
pub const RECONCILE_TIMEOUTS_TOTAL: &str = "controller_runtime_reconcile_timeouts_total";
/// `controller_runtime_reconcile_time_seconds`
pub const RECONCILE_TIME_SECONDS: &str = "controller_runtime_reconcile_time_seconds";
/// `controller_runtime_max_concurrent_reconciles`
pub const MAX_CONCURRENT_RECONCILES: &str = "controller_runtime_max_concurrent_reconciles";
/// `controller_runtime_active_workers`
pub const ACTIVE_WORKERS: &str = "controller_runtime_active_workers";

/// `leader_election_master_status`
pub const LEADER_ELECTION_MASTER_STATUS: &str = "leader_election_master_status";
/// `leader_election_slowpath_total`
pub const LEADER_ELECTION_SLOWPATH_TOTAL: &str = "leader_election_slowpath_total";

/// Prometheus' default buckets (client_golang's `DefBuckets`), for every histogram without
/// buckets of its own.
pub const DEFAULT_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// controller-runtime's buckets for `controller_runtime_reconcile_time_seconds`.
pub const RECONCILE_TIME_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// Registers descriptions (HELP text) for the controller, leader election and REST client
/// metrics with the installed recorder.
pub fn describe() {
    crate::rest_client::describe();
    describe_gauge!(
        LEADER_ELECTION_MASTER_STATUS,
        "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease."
    );
    describe_counter!(
        LEADER_ELECTION_SLOWPATH_TOTAL,
        "Total number of slow path exercised in renewing leader leases. 'name' is the string used to identify the lease."
    );
    describe_counter!(
        RECONCILE_TOTAL,
        "Total number of reconciliations per controller"
    );
    describe_counter!(
        RECONCILE_ERRORS_TOTAL,
        "Total number of reconciliation errors per controller"
    );
    describe_counter!(
        TERMINAL_RECONCILE_ERRORS_TOTAL,
        "Total number of terminal reconciliation errors per controller"
    );
    describe_counter!(
        RECONCILE_PANICS_TOTAL,
        "Total number of reconciliation panics per controller"
    );
    describe_counter!(
        RECONCILE_TIMEOUTS_TOTAL,
        "Total number of reconciliations that exceeded the per-reconcile timeout"
    );
    describe_histogram!(
        RECONCILE_TIME_SECONDS,
        Unit::Seconds,
        "Length of time per reconciliation per controller"
    );
    describe_gauge!(
        MAX_CONCURRENT_RECONCILES,
        "Maximum number of concurrent reconciles per controller"
    );
    describe_gauge!(
        ACTIVE_WORKERS,
        "Number of currently used workers per controller"
    );
}

/// The `leader_election_master_status` gauge of the Lease `lease`.
pub(crate) fn leader_status(lease: &str) -> Gauge {
    gauge!(LEADER_ELECTION_MASTER_STATUS, "name" => lease.to_owned())
}

/// The `leader_election_slowpath_total` counter of the Lease `lease`.
pub(crate) fn leader_slowpath(lease: &str) -> Counter {
    counter!(LEADER_ELECTION_SLOWPATH_TOTAL, "name" => lease.to_owned())
}

/// Whether the current recorder (local, else global) is a real one rather than the `metrics`
/// crate's zero-sized no-op recorder.
pub(crate) fn recorder_installed() -> bool {
    ::metrics::with_recorder(|recorder| std::mem::size_of_val(recorder) != 0)
}

/// The registered metric handles of one controller.
#[derive(Clone)]
pub(crate) struct ControllerMetrics {
    /// Whether a real recorder was installed when the controller started; without one, the
    /// workers skip the clock reads for the histogram.
    pub enabled: bool,
    /// `controller_runtime_reconcile_total{result="success"}`.
    pub result_success: Counter,
    /// `controller_runtime_reconcile_total{result="error"}`: moves with `errors` (see
    /// [`ControllerMetrics::count_error`]).
    pub result_error: Counter,
    /// `controller_runtime_reconcile_total{result="requeue_after"}`.
    pub result_requeue_after: Counter,
    /// `controller_runtime_reconcile_errors_total`.
    pub errors: Counter,
    pub terminal_errors: Counter,
    pub panics: Counter,
    pub timeouts: Counter,
    pub reconcile_time: Histogram,
    pub max_concurrent: Gauge,
    pub active_workers: Gauge,
}

impl ControllerMetrics {
    /// Registers the handles for `controller` and initialises every counter at zero (as
    /// controller-runtime does), so that they are exported before the first reconcile.
    pub fn new(controller: &str) -> Self {
        describe();
        let name = controller.to_string();
        let result = |r: &'static str| counter!(RECONCILE_TOTAL, "controller" => name.clone(), "result" => r);
        let m = ControllerMetrics {
            enabled: recorder_installed(),
            result_success: result("success"),
            result_error: result("error"),
            result_requeue_after: result("requeue_after"),
            errors: counter!(RECONCILE_ERRORS_TOTAL, "controller" => name.clone()),
            terminal_errors: counter!(TERMINAL_RECONCILE_ERRORS_TOTAL, "controller" => name.clone()),
            panics: counter!(RECONCILE_PANICS_TOTAL, "controller" => name.clone()),
            timeouts: counter!(RECONCILE_TIMEOUTS_TOTAL, "controller" => name.clone()),
            reconcile_time: histogram!(RECONCILE_TIME_SECONDS, "controller" => name.clone()),
            max_concurrent: gauge!(MAX_CONCURRENT_RECONCILES, "controller" => name.clone()),
            active_workers: gauge!(ACTIVE_WORKERS, "controller" => name),
        };
        for c in [
            &m.result_success,
            &m.result_error,
            &m.result_requeue_after,
            &m.errors,
            &m.terminal_errors,
            &m.panics,
            &m.timeouts,
        ] {
            c.increment(0);
        }
        m.active_workers.set(0.0);
        m
    }

    /// Counts a failed reconcile (an error, a panic or a timeout): in both
    /// `controller_runtime_reconcile_errors_total` and `reconcile_total{result="error"}`.
    pub fn count_error(&self) {
        self.errors.increment(1);
        self.result_error.increment(1);
    }
}

/// One row of the [table of metrics](self#the-metrics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentedMetric {
    /// The metric's name.
    pub name: String,
    /// `counter`, `gauge` or `histogram`.
    pub kind: String,
    /// Its label names.
    pub labels: BTreeSet<String>,
    /// The crate recording it.
    pub from: String,
}

/// The [table of metrics](self#the-metrics), read from this module's documentation (so the
/// table stays the one list, and tests can hold the served metrics against it).
pub fn documented() -> Vec<DocumentedMetric> {
    include_str!("metrics.rs")
        .lines()
        .filter_map(|line| line.strip_prefix("//! | `"))
        .filter_map(|row| {
            let cells: Vec<&str> = row.split(" | ").map(str::trim).collect();
            let [name, kind, labels, from, ..] = cells.as_slice() else {
                return None;
            };
            Some(DocumentedMetric {
                name: name.trim_end_matches('`').to_owned(),
                kind: (*kind).to_owned(),
                labels: backticked(labels).map(str::to_owned).collect(),
                from: (*from).to_owned(),
            })
        })
        .collect()
}

fn backticked(cell: &str) -> impl Iterator<Item = &str> {
    cell.split('`').skip(1).step_by(2)
}

/// One metric family of a Prometheus text exposition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScrapedFamily {
    /// The `# TYPE` (`counter`, `gauge`, `histogram`, `summary`, `untyped` when none was given).
    pub kind: String,
    /// The label names of its samples (without a histogram's `le` or a summary's `quantile`).
    pub labels: BTreeSet<String>,
    /// How many sample lines it has.
    pub samples: usize,
}

/// The metric families of a Prometheus text exposition, by name: what a scrape of `/metrics`
/// serves. Sample lines of a histogram (`_bucket`, `_sum`, `_count`) or summary (`_sum`,
/// `_count`) count for their family.
pub fn parse_exposition(text: &str) -> BTreeMap<String, ScrapedFamily> {
    let mut families: BTreeMap<String, ScrapedFamily> = BTreeMap::new();
    for line in text.lines().map(str::trim) {
        if let Some(decl) = line.strip_prefix("# TYPE ") {
            let mut parts = decl.split_whitespace();
            if let (Some(name), Some(kind)) = (parts.next(), parts.next()) {
                families.entry(name.to_owned()).or_default().kind = kind.to_owned();
            }
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let sample = &line[..name_end];
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .filter_map(|suffix| sample.strip_suffix(suffix))
            .find(|base| {
                families
                    .get(*base)
                    .is_some_and(|f| f.kind == "histogram" || f.kind == "summary")
            })
            .unwrap_or(sample)
            .to_owned();
        let entry = families.entry(family).or_insert_with(|| ScrapedFamily {
            kind: "untyped".to_owned(),
            ..ScrapedFamily::default()
        });
        entry.samples += 1;
        if line[name_end..].starts_with('{') {
            for label in label_names(&line[name_end + 1..]) {
                if label != "le" && label != "quantile" {
                    entry.labels.insert(label);
                }
            }
        }
    }
    families
}

/// The label names of `a="x",b="y\"z"} 1` (escapes inside values honoured).
fn label_names(mut rest: &str) -> Vec<String> {
    let mut names = Vec::new();
    loop {
        rest = rest.trim_start_matches([',', ' ']);
        if rest.starts_with('}') || rest.is_empty() {
            return names;
        }
        let Some((name, after)) = rest.split_once('=') else {
            return names;
        };
        names.push(name.trim().to_owned());
        let Some(value) = after.strip_prefix('"') else {
            return names;
        };
        let mut escaped = false;
        let mut end = None;
        for (i, c) in value.char_indices() {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => {
                    end = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let Some(end) = end else {
            return names;
        };
        rest = &value[end + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_parses() {
        let rows = documented();
        assert!(rows.len() >= 30, "{rows:?}");
        let reconcile = rows
            .iter()
            .find(|r| r.name == RECONCILE_TOTAL)
            .expect("reconcile_total documented");
        assert_eq!(reconcile.kind, "counter");
        assert_eq!(
            reconcile.labels,
            BTreeSet::from(["controller".to_owned(), "result".to_owned()])
        );
        assert_eq!(reconcile.from, "kcr-controller");
        let cpu = rows
            .iter()
            .find(|r| r.name == "process_cpu_seconds_total")
            .unwrap();
        assert!(cpu.labels.is_empty());
        for r in &rows {
            assert!(
                ["counter", "gauge", "histogram"].contains(&r.kind.as_str()),
                "{r:?}"
            );
            assert!(
                [
                    "kcr-controller",
                    "kcr-queue",
                    "kcr-webhook",
                    "kcr-tls",
                    "kcr-connect"
                ]
                .contains(&r.from.as_str()),
                "{r:?}"
            );
        }
        let mut names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), rows.len(), "a metric documented twice");
    }

    #[test]
    fn expositions_parse() {
        let text = "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\",y=\"q\\\"u,o=te\"} 3\na_total{z=\"\"} 1\n\
            # TYPE h histogram\nh_bucket{c=\"a\",le=\"0.1\"} 1\nh_bucket{c=\"a\",le=\"+Inf\"} 1\nh_sum{c=\"a\"} 0.05\nh_count{c=\"a\"} 1\n\
            # TYPE g gauge\ng 2\nloose_count 4\n";
        let f = parse_exposition(text);
        assert_eq!(f.len(), 4, "{f:?}");
        assert_eq!(f["a_total"].kind, "counter");
        assert_eq!(
            f["a_total"].labels,
            BTreeSet::from(["x".into(), "y".into(), "z".into()])
        );
        assert_eq!(f["h"].kind, "histogram");
        assert_eq!(f["h"].labels, BTreeSet::from(["c".into()]));
        assert_eq!(f["h"].samples, 4);
        assert!(f["g"].labels.is_empty());
        assert_eq!(f["loose_count"].kind, "untyped");
    }
}
