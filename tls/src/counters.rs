//! The certificate-read counters (controller-runtime's `certwatcher_*`).

/// `certwatcher_read_certificate_total`: reads of a serving certificate pair (controller-runtime's
/// name).
pub const READ_CERTIFICATE_TOTAL: &str = "certwatcher_read_certificate_total";
/// `certwatcher_read_certificate_errors_total`: reads that failed (a file missing or unreadable,
/// a pair that does not parse or match).
pub const READ_CERTIFICATE_ERRORS_TOTAL: &str = "certwatcher_read_certificate_errors_total";

/// Describes the certificate-read counters to the installed `metrics` recorder and registers
/// both at 0 (a [`CertWatcher`](crate::CertWatcher) does this when it is created; call it again after installing a
/// recorder to have them exported before the first read).
pub fn register_metrics() {
    metrics::describe_counter!(READ_CERTIFICATE_TOTAL, "Total number of certificate reads");
    metrics::describe_counter!(
        READ_CERTIFICATE_ERRORS_TOTAL,
        "Total number of certificate read errors"
    );
    metrics::counter!(READ_CERTIFICATE_TOTAL).increment(0);
    metrics::counter!(READ_CERTIFICATE_ERRORS_TOTAL).increment(0);
}

/// Counts one read of a pair, and its failure.
pub(crate) fn count_read(failed: bool) {
    metrics::counter!(READ_CERTIFICATE_TOTAL).increment(1);
    if failed {
        metrics::counter!(READ_CERTIFICATE_ERRORS_TOTAL).increment(1);
    }
}
