//! Controller metrics, named and labelled as in controller-runtime so that existing dashboards and
//! alerts keep working. They are emitted through the `metrics` facade: install any
//! recorder (the [`Manager`](crate::Manager) installs metrics-exporter-prometheus and serves it on
//! `/metrics`). The handles are registered once per controller, so recording costs no lookups.
//!
//! | name | type | labels |
//! |---|---|---|
//! | `controller_runtime_reconcile_total` | counter | `controller`, `result` = `success` \| `error` \| `requeue_after` |
//! | `controller_runtime_reconcile_errors_total` | counter | `controller` |
//! | `controller_runtime_terminal_reconcile_errors_total` | counter | `controller` |
//! | `controller_runtime_reconcile_panics_total` | counter | `controller` |
//! | `controller_runtime_reconcile_timeouts_total` | counter | `controller` (kcr addition) |
//! | `controller_runtime_reconcile_time_seconds` | histogram | `controller` |
//! | `controller_runtime_max_concurrent_reconciles` | gauge | `controller` |
//! | `controller_runtime_active_workers` | gauge | `controller` |
//!
//! The queue's `workqueue_*` metrics carry `name` = the controller's name (the queue is named
//! after its controller).

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

/// controller-runtime's buckets for `controller_runtime_reconcile_time_seconds`.
pub const RECONCILE_TIME_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// Registers descriptions (HELP text) for the controller metrics with the installed recorder.
pub fn describe() {
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
