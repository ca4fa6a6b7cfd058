//! # cronjob-operator: the kubebuilder book's CronJob operator, on kcr
//!
//! A `CronJob` custom resource (`batch.example.kcr.dev/v1`) runs a Job from its template at
//! every time its cron schedule names, the way Kubernetes' own CronJob does: the
//! [kubebuilder book's tutorial](https://book.kubebuilder.io/cronjob-tutorial/cronjob-tutorial)
//! written in Rust on kcr's crates.
//!
//! - [`api`]: the `CronJob` type, its spec and status, and the CRD derived from them;
//! - [`schedule`]: cron schedules (parsing, the run that is due, the next run);
//! - [`controller`]: the reconciler and [`add_to_manager`], which registers it with a kcr
//!   [`Manager`](kcr_controller::Manager);
//! - [`webhook`]: the defaulting and validating admission webhooks ([`webhook::register`]);
//! - [`manifests`]: the files of `config/` that are generated from the code (the CRD, the
//!   webhook configurations);
//! - `main.rs`: the binary (`cronjob-operator run`, `cronjob-operator crd`).
//!
//! The tests (`tests/`) run the controller against kcr-envtest with a manual clock: they move
//! time instead of waiting for it.

pub mod api;
pub mod controller;
pub mod manifests;
pub mod schedule;
pub mod webhook;

pub use api::{ConcurrencyPolicy, CronJob, CronJobSpec, CronJobStatus};
pub use controller::add_to_manager;
