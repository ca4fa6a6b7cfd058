//! Process and tokio runtime metrics, collected when `/metrics` is scraped (as Prometheus'
//! process collector does) and rendered in the text format after the recorder's metrics.
//!
//! Process metrics come from `/proc/self` and exist on Linux only; elsewhere (or if `/proc` is
//! not mounted) each one that cannot be read is left out, nothing fails. The tokio metrics are
//! those of the runtime serving `/metrics` (the manager's), from tokio's stable
//! [`RuntimeMetrics`](tokio::runtime::RuntimeMetrics): a few atomic loads. Reading and rendering
//! all of them costs 70-105 µs per scrape on the 2-core VM (four small `/proc` reads and a
//! directory listing; the `metrics_overhead` example measures it).
//!
//! | metric | type | meaning |
//! |---|---|---|
//! | `process_cpu_seconds_total` | counter | user and system CPU time |
//! | `process_resident_memory_bytes` | gauge | resident set size |
//! | `process_virtual_memory_bytes` | gauge | virtual memory size |
//! | `process_open_fds` | gauge | open file descriptors |
//! | `process_max_fds` | gauge | the soft limit on open file descriptors |
//! | `process_start_time_seconds` | gauge | start time since the Unix epoch |
//! | `tokio_runtime_workers` | gauge | worker threads |
//! | `tokio_runtime_alive_tasks` | gauge | tasks spawned and not yet finished |
//! | `tokio_runtime_global_queue_depth` | gauge | tasks waiting in the global queue |

use std::fmt::Write as _;

/// `process_cpu_seconds_total`
pub const CPU_SECONDS_TOTAL: &str = "process_cpu_seconds_total";
/// `process_resident_memory_bytes`
pub const RESIDENT_MEMORY_BYTES: &str = "process_resident_memory_bytes";
/// `process_virtual_memory_bytes`
pub const VIRTUAL_MEMORY_BYTES: &str = "process_virtual_memory_bytes";
/// `process_open_fds`
pub const OPEN_FDS: &str = "process_open_fds";
/// `process_max_fds`
pub const MAX_FDS: &str = "process_max_fds";
/// `process_start_time_seconds`
pub const START_TIME_SECONDS: &str = "process_start_time_seconds";
/// `tokio_runtime_workers`
pub const TOKIO_WORKERS: &str = "tokio_runtime_workers";
/// `tokio_runtime_alive_tasks`
pub const TOKIO_ALIVE_TASKS: &str = "tokio_runtime_alive_tasks";
/// `tokio_runtime_global_queue_depth`
pub const TOKIO_GLOBAL_QUEUE_DEPTH: &str = "tokio_runtime_global_queue_depth";

/// One sample of the process's figures; `None` where it could not be read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessStats {
    /// User plus system CPU seconds.
    pub cpu_seconds: Option<f64>,
    /// Resident set size in bytes.
    pub resident_memory_bytes: Option<u64>,
    /// Virtual memory size in bytes.
    pub virtual_memory_bytes: Option<u64>,
    /// Open file descriptors.
    pub open_fds: Option<u64>,
    /// Soft limit on open file descriptors.
    pub max_fds: Option<u64>,
    /// Start time, seconds since the Unix epoch.
    pub start_time_seconds: Option<f64>,
}

impl ProcessStats {
    /// Reads the current process's figures (Linux: `/proc/self`; elsewhere all `None`).
    pub fn read() -> ProcessStats {
        #[cfg(target_os = "linux")]
        {
            linux::read()
        }
        #[cfg(not(target_os = "linux"))]
        {
            ProcessStats::default()
        }
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use super::ProcessStats;

    /// `AT_PAGESZ` and `AT_CLKTCK` in the auxiliary vector.
    const AT_PAGESZ: usize = 6;
    const AT_CLKTCK: usize = 17;

    pub(super) fn read() -> ProcessStats {
        let auxv = std::fs::read("/proc/self/auxv").unwrap_or_default();
        let page_size = auxv_value(&auxv, AT_PAGESZ).unwrap_or(4096) as u64;
        let ticks = auxv_value(&auxv, AT_CLKTCK).unwrap_or(100) as f64;
        let stat = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|s| super::parse_stat(&s));
        let boot_time = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|s| super::parse_btime(&s));
        let open_fds = std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count() as u64);
        let max_fds = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|s| super::parse_max_open_files(&s));
        ProcessStats {
            cpu_seconds: stat.map(|s| (s.utime + s.stime) as f64 / ticks),
            resident_memory_bytes: stat.map(|s| s.rss_pages * page_size),
            virtual_memory_bytes: stat.map(|s| s.vsize),
            open_fds,
            max_fds,
            start_time_seconds: stat
                .zip(boot_time)
                .map(|(s, boot)| boot as f64 + s.starttime as f64 / ticks),
        }
    }

    /// The value of `key` in the auxiliary vector (native-endian word pairs).
    fn auxv_value(auxv: &[u8], key: usize) -> Option<usize> {
        const W: usize = std::mem::size_of::<usize>();
        auxv.chunks_exact(2 * W).find_map(|pair| {
            let k = usize::from_ne_bytes(pair[..W].try_into().ok()?);
            let v = usize::from_ne_bytes(pair[W..].try_into().ok()?);
            (k == key).then_some(v)
        })
    }
}

/// The fields of `/proc/<pid>/stat` the process metrics use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    pub utime: u64,
    pub stime: u64,
    pub starttime: u64,
    pub vsize: u64,
    pub rss_pages: u64,
}

/// Parses `/proc/<pid>/stat`; the command name (field 2) may hold spaces and parentheses, so
/// fields are counted from its last `)`.
pub(crate) fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `fields[0]` is field 3 (state): field N is `fields[N - 3]`.
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(Stat {
        utime: field(14)?,
        stime: field(15)?,
        starttime: field(22)?,
        vsize: field(23)?,
        rss_pages: field(24)?,
    })
}

/// The `btime` line of `/proc/stat`: boot time in seconds since the epoch.
pub(crate) fn parse_btime(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// The soft limit of `Max open files` in `/proc/<pid>/limits` (`None` if unlimited).
pub(crate) fn parse_max_open_files(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn sample(out: &mut String, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
    let _ = write!(
        out,
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n\n"
    );
}

/// Appends the process metrics (those that could be read) and, inside a tokio runtime, that
/// runtime's metrics to `out`, in the Prometheus text format.
pub fn render(out: &mut String) {
    let p = ProcessStats::read();
    if let Some(v) = p.cpu_seconds {
        sample(
            out,
            CPU_SECONDS_TOTAL,
            "counter",
            "Total user and system CPU time spent in seconds.",
            v,
        );
    }
    if let Some(v) = p.resident_memory_bytes {
        sample(
            out,
            RESIDENT_MEMORY_BYTES,
            "gauge",
            "Resident memory size in bytes.",
            v,
        );
    }
    if let Some(v) = p.virtual_memory_bytes {
        sample(
            out,
            VIRTUAL_MEMORY_BYTES,
            "gauge",
            "Virtual memory size in bytes.",
            v,
        );
    }
    if let Some(v) = p.open_fds {
        sample(
            out,
            OPEN_FDS,
            "gauge",
            "Number of open file descriptors.",
            v,
        );
    }
    if let Some(v) = p.max_fds {
        sample(
            out,
            MAX_FDS,
            "gauge",
            "Maximum number of open file descriptors.",
            v,
        );
    }
    if let Some(v) = p.start_time_seconds {
        sample(
            out,
            START_TIME_SECONDS,
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            v,
        );
    }
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        let m = handle.metrics();
        sample(
            out,
            TOKIO_WORKERS,
            "gauge",
            "Number of worker threads of the tokio runtime.",
            m.num_workers(),
        );
        sample(
            out,
            TOKIO_ALIVE_TASKS,
            "gauge",
            "Number of alive tasks in the tokio runtime.",
            m.num_alive_tasks(),
        );
        sample(
            out,
            TOKIO_GLOBAL_QUEUE_DEPTH,
            "gauge",
            "Number of tasks in the tokio runtime's global queue.",
            m.global_queue_depth(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_parses_with_odd_command_names() {
        let line = "10878 (my (odd) cmd) R 10874 10874 4497 0 -1 4194304 101 0 0 0 7 3 0 0 20 0 1 0 24939 3133440 411 18446744073709551615 1 2 3";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                utime: 7,
                stime: 3,
                starttime: 24939,
                vsize: 3133440,
                rss_pages: 411,
            })
        );
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) R 1 2"), None);
    }

    #[test]
    fn btime_and_limits_parse() {
        assert_eq!(
            parse_btime("cpu  1 2 3\nbtime 1796167466\nprocesses 5\n"),
            Some(1_796_167_466)
        );
        assert_eq!(parse_btime("cpu 1\n"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \nMax open files            20000                40000                files     \n";
        assert_eq!(parse_max_open_files(limits), Some(20000));
        assert_eq!(
            parse_max_open_files(
                "Max open files            unlimited            unlimited            files\n"
            ),
            None
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reads_this_process() {
        let before = ProcessStats::read();
        let file = std::fs::File::open("/proc/self/stat").unwrap();
        let after = ProcessStats::read();
        drop(file);
        assert!(before.resident_memory_bytes.unwrap() > 0);
        assert!(before.virtual_memory_bytes.unwrap() >= before.resident_memory_bytes.unwrap());
        assert!(before.cpu_seconds.unwrap() >= 0.0);
        // The file just opened is one of them (other tests' descriptors come and go).
        assert!(after.open_fds.unwrap() >= 1);
        assert!(before.max_fds.unwrap() >= before.open_fds.unwrap());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = before.start_time_seconds.unwrap();
        assert!(
            start <= now + 1.0 && start > now - 24.0 * 3600.0,
            "{start} vs {now}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn renders_the_text_format() {
        let mut out = String::new();
        render(&mut out);
        assert!(out.contains("# TYPE tokio_runtime_workers gauge\ntokio_runtime_workers 2\n"));
        #[cfg(target_os = "linux")]
        assert!(
            out.contains("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total ")
        );
    }
}
