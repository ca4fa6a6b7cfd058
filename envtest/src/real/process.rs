//! One control-plane process: started with its output in a log file, killed (and waited for)
//! when dropped, so a test that panics takes its processes with it.
//!
//! A test process killed by a signal (Ctrl-C on `cargo test`, a timeout) runs no destructor, so
//! each process also has a *watchdog*: a `sh` that blocks reading a pipe whose only writer is
//! this process, and kills the control-plane process when the pipe closes, which the kernel
//! does however this process ends. A normal drop stops the watchdog first, then the process.

use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use crate::error::EnvtestError;

/// A running child process of the control plane.
pub(crate) struct Process {
    component: &'static str,
    child: Child,
    log: PathBuf,
    /// Kills `child` if this process dies without dropping it (see the module docs); `None`
    /// when no `sh` could be started (then only a drop stops the child).
    watchdog: Option<Watchdog>,
}

/// The watchdog of one child: the `sh` and the write end of the pipe it reads.
struct Watchdog {
    shell: Child,
    _pipe: ChildStdin,
}

impl Watchdog {
    /// A watchdog for the process `pid`. The pipe is close-on-exec (as every pipe std makes),
    /// so no other child holds its write end open.
    /// With `remove`, the watchdog also deletes that directory a second after the kill (the control
    /// plane's temporary directory, which no destructor removes when the process dies first).
    fn start(pid: u32, remove: Option<&Path>) -> Option<Watchdog> {
        let remove = remove.map(|d| d.display().to_string()).unwrap_or_default();
        let mut shell = Command::new("/bin/sh")
            .args([
                "-c",
                "read -r line; kill -9 \"$0\" 2>/dev/null; [ -n \"$1\" ] && sleep 1 && rm -rf -- \"$1\"",
                &pid.to_string(),
                &remove,
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let pipe = shell.stdin.take()?;
        Some(Watchdog { shell, _pipe: pipe })
    }

    /// Stops the watchdog without letting it act (before the child is reaped and its pid could
    /// be reused).
    fn stop(mut self) {
        let _ = self.shell.kill();
        let _ = self.shell.wait();
    }
}

impl Process {
    /// Start `binary` with `args`; stdout and stderr go to `log`. When this process dies
    /// without dropping the handle, the watchdog kills the child and, with `orphan_cleanup`,
    /// removes that directory.
    pub fn spawn(
        component: &'static str,
        binary: &Path,
        args: &[String],
        log: PathBuf,
        orphan_cleanup: Option<&Path>,
    ) -> Result<Process, EnvtestError> {
        let startup = |reason: String| EnvtestError::Startup {
            component,
            reason,
            log: log.display().to_string(),
            log_tail: String::new(),
        };
        let out = std::fs::File::create(&log)
            .map_err(|e| startup(format!("cannot create its log file: {e}")))?;
        let err = out
            .try_clone()
            .map_err(|e| startup(format!("cannot share its log file: {e}")))?;
        let child = Command::new(binary)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| startup(format!("cannot run {}: {e}", binary.display())))?;
        let watchdog = Watchdog::start(child.id(), orphan_cleanup);
        Ok(Process {
            component,
            child,
            log,
            watchdog,
        })
    }

    /// The process id.
    #[cfg(test)]
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// `Some(description)` when the process has exited.
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(e) => Some(format!("cannot be waited for: {e}")),
        }
    }

    /// A startup error for this process with the last lines of its log.
    pub fn startup_error(&self, reason: impl Into<String>) -> EnvtestError {
        EnvtestError::Startup {
            component: self.component,
            reason: reason.into(),
            log: self.log.display().to_string(),
            log_tail: log_tail(&self.log, 30),
        }
    }

    /// Kill the process and wait for it (idempotent).
    pub fn kill(&mut self) {
        if let Some(watchdog) = self.watchdog.take() {
            watchdog.stop();
        }
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `n` lines of a file (empty when it cannot be read).
pub(crate) fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A free TCP port on 127.0.0.1 (bound, read and released: another process could take it
/// before the control plane does; a start that then fails to bind reports it).
pub(crate) fn free_port() -> Result<u16, EnvtestError> {
    let listener =
        std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(|source| EnvtestError::Bind {
            addr: "127.0.0.1:0".into(),
            source,
        })?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|source| EnvtestError::Bind {
            addr: "127.0.0.1:0".into(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_killed_on_drop_and_its_log_kept() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("sleep.log");
        let mut p = Process::spawn(
            "etcd",
            Path::new("/bin/sh"),
            &["-c".into(), "echo started; exec sleep 600".into()],
            log.clone(),
            None,
        )
        .unwrap();
        let pid = p.id();
        // Wait (bounded) for the child to have written its first line.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while log_tail(&log, 5) != "started" {
            assert!(
                std::time::Instant::now() < deadline,
                "the child never wrote its log"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(p.exited(), None);
        drop(p);
        // The pid is gone (or reused by an unrelated process, which /proc/<pid>/cmdline shows).
        let cmdline = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        assert!(
            !cmdline.contains("sleep"),
            "process {pid} still runs: {cmdline}"
        );
        assert_eq!(log_tail(&log, 5), "started");
    }

    #[test]
    fn a_missing_binary_is_a_startup_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let err = match Process::spawn(
            "kube-apiserver",
            Path::new("/nonexistent/kube-apiserver"),
            &[],
            dir.path().join("x.log"),
            None,
        ) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("spawned a missing binary"),
        };
        assert!(err.contains("kube-apiserver did not start"), "{err}");
        assert!(err.contains("/nonexistent/kube-apiserver"), "{err}");
    }

    /// A found port is one a server can bind. Not every time: the port is released when it is
    /// returned, and the other tests of this binary bind ports of their own concurrently, one of
    /// which the kernel may hand the same port (a CI run saw exactly that). So of several found
    /// ports each must be real (not 0) and bind or be in use (taken in between), and most must
    /// bind; a `free_port` that returned a port it had not found free would fail.
    #[test]
    fn free_ports_are_bindable() {
        let mut bound = 0;
        for _ in 0..8 {
            let port = free_port().unwrap();
            assert_ne!(port, 0);
            match std::net::TcpListener::bind(("127.0.0.1", port)) {
                Ok(_) => bound += 1,
                Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{e}"),
            }
        }
        assert!(bound >= 6, "only {bound} of 8 found ports could be bound");
    }
}
