//! `kcr-envtest-conformance`: kcr-envtest's fidelity, measured. The same scripted requests
//! ([`exchange::Exchange`], grouped by area in [`areas`]) go to kcr-envtest's in-process server
//! and to a real kube-apiserver (the `real` backend), and the answers are compared after
//! normalising what may legitimately differ ([`normalise`]).
//!
//! Run it with `cargo run --release -p kcr-envtest-conformance` (`-- --check` exits non-zero
//! on a difference that `known_differences.txt` does not list; `-- --area NAME` runs one area;
//! `-- --verbose` prints the known differences' details too; `-- --known PATH` compares with
//! another list, as `.ci/matrix-oldest` does for the oldest supported release). The last line it
//! prints is `fidelity: E of N exchanges equal (against kube-apiserver vX.Y.Z)`.
//!
//! Known differences: `known_differences.txt` lists every exchange expected to differ today,
//! as `name | root causes | fingerprint | reason`. The fingerprint hashes the differing paths
//! ([`run::Outcome::fingerprint`]), so a new difference inside a listed exchange is reported
//! `CHANGED` and fails `--check` like an unlisted one (`DIFF`); a listed exchange that is
//! equal now is reported `FIXED` (remove its line). `tools/classify.py` groups a verbose run's
//! lines by root cause and regenerates the list.
//!
//! The Go client section ([`goclient`]): a small Go program on client-go (`goclient/`, test
//! tooling) runs typed-client exchanges with protobuf and with JSON bodies against both
//! servers; its exchanges count in the fidelity line as `goclient/...` (`-- --area goclient`
//! runs it alone; `-- --no-goclient` leaves it out, e.g. without Go).
//!
//! `tests/random.rs` is the randomised differential test (seeded sequences of writes with
//! watchers; `KCR_CONFORMANCE_SEEDS`, default 50), with its own known differences in
//! `tests/random_known.txt`.
//!
//! Determinism: each area runs in a fresh namespace `conf-<area>` with fixed object names;
//! what the real backend does asynchronously (garbage collection, CRD establishment) is
//! waited for with bounded polling ([`exchange::Step::WaitFor`]) before the next exchange.

pub mod areas;
pub mod exchange;
pub mod goclient;
pub mod http;
pub mod normalise;
pub mod run;

/// The known-differences list: `name | cause | reason` a line.
pub const KNOWN_DIFFERENCES: &str = include_str!("../known_differences.txt");
