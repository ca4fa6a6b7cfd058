//! Perturbation testing for kcr controllers: crash at every write, stale caches, missed
//! intermediate states, each run compared with an unperturbed one.
//!
//! Controllers fail in ways their authors' tests never reach: a crash between two writes
//! leaves a half-done state the next incarnation does not recognise; a cache behind the API
//! server makes a controller delete what is still wanted or create what already exists; a
//! watch that reconnects delivers only the latest state, so a controller that waits for an
//! intermediate one never acts. An [`Exploration`] finds these bugs by itself, as an
//! ordinary test on kcr-envtest (ideas from Sieve, OSDI '22; the code is this crate's own).
//!
//! ```
//! # use k8s_openapi::api::core::v1::ConfigMap;
//! # use kcr_perturb::{Class, Exploration};
//! # mod controller {
//! #     use std::sync::Arc;
//! #     use k8s_openapi::api::core::v1::ConfigMap;
//! #     use kcr_controller::{Action, Client, Context, Manager, ObjectReconciler, WatchOptions};
//! #     use kube::{Api, ResourceExt, api::{ObjectMeta, Patch, PatchParams, PostParams}};
//! #     struct Copier(Client);
//! #     impl ObjectReconciler for Copier {
//! #         type Object = ConfigMap;
//! #         type Error = anyhow::Error;
//! #         async fn reconcile(&self, cm: Arc<ConfigMap>, _: &Context) -> anyhow::Result<Action> {
//! #             let copy = ConfigMap {
//! #                 metadata: ObjectMeta {
//! #                     name: Some(format!("{}-copy", cm.name_any())),
//! #                     namespace: cm.namespace(),
//! #                     ..ObjectMeta::default()
//! #                 },
//! #                 data: cm.data.clone(),
//! #                 ..ConfigMap::default()
//! #             };
//! #             self.0.apply(&copy).force().await?;
//! #             Ok(Action::done())
//! #         }
//! #     }
//! #     pub async fn start(client: kube::Client) -> anyhow::Result<Manager> {
//! #         let mgr = Manager::new(client, kcr_perturb::manager_options()).await?;
//! #         mgr.controller()
//! #             .for_kind::<ConfigMap>(WatchOptions::new().labels("copy=yes"))
//! #             .complete_objects(Copier(mgr.client()))?;
//! #         Ok(mgr)
//! #     }
//! #     pub async fn scenario(ctx: kcr_perturb::Scenario) -> anyhow::Result<()> {
//! #         let cms: Api<ConfigMap> = Api::namespaced(ctx.client(), ctx.namespace());
//! #         let cm: ConfigMap = serde_json::from_value(serde_json::json!({
//! #             "metadata": {"name": "a", "labels": {"copy": "yes"}}, "data": {"x": "1"}}))?;
//! #         cms.create(&PostParams::default(), &cm).await?;
//! #         ctx.settle().await;
//! #         let patch = Patch::Merge(serde_json::json!({"data": {"x": "2"}}));
//! #         cms.patch("a", &PatchParams::default(), &patch).await?;
//! #         ctx.settle().await;
//! #         Ok(())
//! #     }
//! # }
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
//! let report = Exploration::new("copier")
//!     .controller(controller::start)       // builds a Manager on the client it is given
//!     .scenario(controller::scenario)      // creates and changes objects, settling between
//!     .compare::<ConfigMap>()              // the end state to compare
//!     .classes([Class::Crash, Class::MissedIntermediate])
//!     .run()
//!     .await?;
//! println!("{report}");
//! assert!(report.findings.is_empty());
//! println!("{}", report.summary_line("copier"));
//! # Ok(()) }
//! ```
//!
//! (`controller` is hidden above: it copies each ConfigMap labelled `copy=yes` into
//! `<name>-copy` with server-side apply; the scenario creates one and changes it.)
//!
//! # How it works
//!
//! **The harness owns the controller's client.** Your start closure gets a `kube::Client`
//! whose tower stack has an interception layer on top of the real connection (on every
//! backend of kcr-envtest: it needs no hook in the server). The layer records every write
//! (POST, PUT, PATCH, DELETE: verb, resource, namespace, name, order, status) and every watch
//! event the controller's cache receives (watch bodies are read as newline-delimited JSON
//! frames), counts requests in flight, and applies the run's perturbation.
//!
//! **A crash kills everything.** Each incarnation of the controller (one call of the start
//! closure and the Manager it returns) runs on a tokio runtime of its own, on an OS thread
//! of its own. A crash trips the incarnation's layer (nothing more it sends is forwarded or
//! answered: its requests stay pending) and then shuts its runtime down with
//! `shutdown_background`, so no task of the old Manager survives and nothing shuts down
//! gracefully. A fresh incarnation with a fresh client takes over at once.
//!
//! **Runs.** Every run starts from scratch: a fresh API server (`TestApiServer::start()`,
//! or [`Exploration::server`]), the CRDs of [`Exploration::crd`], the first incarnation, then
//! the scenario. The reference run has no perturbation; by default it runs twice, and two
//! different end states fail the exploration
//! ([`PerturbError::NondeterministicReference`]) rather than produce false findings. Its
//! writes and watch events are the points of the perturbed runs:
//!
//! | class | runs | what the controller sees |
//! |---|---|---|
//! | [`Class::Crash`] | `crash-after:k`, `crash-before:k` for each write k | a crash right after write k is answered (durable), or right before it is sent (lost); then a new incarnation |
//! | [`Class::MissedIntermediate`] | `missed:i` for each `MODIFIED` event i | event i held back for the hold window and dropped if a newer event of the same object arrives meanwhile (what a relist delivers); else delivered late |
//! | [`Class::StaleRead`] | `stale:i` for each watch event i | from event i on, event i's watch stream lags: everything on it is queued for the hold window, then released in order, so that cache is behind the server and the controller's other caches |
//!
//! Writes to Events and Leases are not crash points. Points are numbered in the reference
//! run's order; a watch event is identified by its stream, type, object and occurrence, so
//! the same event is found in a perturbed run even if other streams interleave differently.
//! Only events of watch streams are perturbed, not the objects of an initial list.
//!
//! **Settling.** The harness settles once before the scenario starts (so the controller is
//! watching before the user acts). [`Scenario::settle`] waits until the controller is quiet:
//! no request of it in flight, and no request started and no watch event delivered for the
//! quiet window
//! ([`Exploration::quiet_window`], 150 ms by default), bounded by
//! [`Exploration::settle_timeout`]; a timeout is a [`Problem`] of the run, never hidden.
//! Events held back by a perturbation do not count, so a hold spans the scenario's next
//! step; the harness's own final settle waits for them. This is real time, by necessity:
//! the controller runs on another runtime and talks to a real server over TCP. A
//! controller that requeues after a delay longer than the quiet window is seen as settled
//! before it acts.
//!
//! **The end state.** After the final settle the harness lists every kind of
//! [`Exploration::compare`] in every namespace (except `kube-system`, `kube-public`,
//! `kube-node-lease`, the `kube-root-ca.crt` ConfigMaps and `default` ServiceAccounts) and
//! [`normalise`]s them: uid, resourceVersion, creationTimestamp, managedFields, generation
//! and selfLink dropped, a deletionTimestamp's value and condition times replaced, empty
//! lists and maps and nulls dropped (Kubernetes treats them as absent), every uid
//! replaced by the identity of its object (so an owner reference names its owner), names
//! made from a `generateName` replaced by `<prefix><n>` in the order of the objects' content,
//! then your [`Exploration::normalise`] closures. [`diff`] lists the objects only in one run
//! and every changed JSON pointer with both values. [`Exploration::invariant`]s are checked
//! on a [`Snapshot`] after every settle.
//!
//! **Findings and reproduction.** A perturbed run whose perturbation happened and whose end
//! state differs, or that broke an invariant, timed out settling, failed its scenario or
//! stopped its controller, is a [`Finding`]. It prints the perturbation, the problems and a
//! one-line reproduction: `KCR_PERTURB_ONLY=crash-after:3 KCR_PERTURB_SEED=0 cargo test -p
//! <package> --test <binary> <test> -- --exact` runs that reference and that one run
//! ([`ONLY_ENV`], [`SEED_ENV`]). The seed picks the points when
//! [`Exploration::max_runs`] is smaller than the points, and each run's hold window (±25 %).
//! [`Report::summary_line`] gives
//! `perturbation-run controller=<name> points=P runs=R findings=F seconds=S`.
//!
//! # Proof
//!
//! The crate's tests run deliberately buggy controllers, each with a correct counterpart,
//! and assert that each buggy one is found by its class (with the expected difference) and
//! each correct one is clean, so a regression of the harness fails them:
//!
//! | test | buggy controller | found as | correct counterpart |
//! |---|---|---|---|
//! | `tests/crash.rs` | books an order (`total += amount`), then marks it processed: two non-idempotent writes, no marker between | `crash-after:1`, `crash-before:2`, `crash-after:3`, `crash-before:4`: `/data/total: "7" -> "10"` | books under the order's own key (idempotent) |
//! | `tests/crash.rs` | creates a child with a generated name, records it in the parent's status afterwards | `crash-after:1`: a second child, invariant "one child per parent" | a name derived from the parent |
//! | `tests/crash.rs` | removes its finalizer, then deletes the (unowned) data it guards | after the finalizer's removal, and before the delete: the data stays | deletes the data, then removes the finalizer |
//! | `tests/missed.rs` | counts the flips of `spec.on` it sees | `missed:1`, `missed:3`: `/status/flips: 3 -> 1` | derives the count from `metadata.generation` |
//! | `tests/missed.rs` | removes the child on the `draining` phase only | `missed:1`: the child stays | removes it in every phase from `draining` on |
//! | `tests/stale.rs` | deletes a ConfigMap whose tenant is not in its cache | `stale:i` at the tenant's `ADDED`: the ConfigMap is gone | checks with the API server before the delete |
//! | `tests/stale.rs` | creates a child when its cached list of children is empty | `stale:i` at the child's `ADDED`: a second child | lists the children from the API server |
//!
//! Measured here (debug build, 2 cores shared with other builds), test time of each binary:
//! `tests/crash.rs` 18 to 28 s, `tests/missed.rs` 10 to 12 s, `tests/stale.rs` 12 to 13 s
//! in-process. With `KCR_ENVTEST_BACKEND=real` (kube-apiserver 1.37.2 and etcd behind
//! kcr-envtest's proxy; a fresh control plane per run, 3 to 6 s of each run) the same tests
//! passed with the same findings: 247 s, 83 s and 86 s. Since then `tests/missed.rs` and
//! `tests/stale.rs` run in process on every backend (their perturbations are made in the
//! controller's client, the same on any server), so that CI's real-backend pass spends its
//! minutes on the crash class and the NodePool sample.
//!
//! # The NodePool operator
//!
//! `examples/nodepool` explores the NodePool operator (3 nodes; pools `a` and `b` created,
//! three nodes joining, one leaving, pool `a` changed, pool `b` deleted; the NodePools, Nodes
//! and RuntimeClasses compared; an invariant that no node keeps the labels of a pool it is not
//! in and that is gone). In one reference run the operator made 23 counted writes and its caches
//! saw 27 watch events (21 of them `MODIFIED`); these vary a little, so a run offers 90 to 98
//! points; all of them take about 135 s in-process
//! (`KCR_PERTURB_MAX_SECONDS` / `KCR_PERTURB_MAX_RUNS` set a budget). `tests/nodepool.rs` runs
//! a seeded sample of 24 of them in CI (about 36 s in-process) and asserts no finding; on the
//! real backend it runs 8 crash points (`points=40 runs=10 findings=0 seconds=72.5`; 24
//! points of every class took 184 s there, without a finding).
//!
//! The first full run reported 9 findings, all of the stale-read class. Seven were `taints: []`
//! against no `taints` on a node: the same to Kubernetes, so the default normaliser now drops
//! empty lists, maps and nulls. Two were a real bug: a pool's cleanup planned its node patches
//! from the node cache, so when that cache lagged the operator's own patch that had put the
//! pool's labels and taints on a node, the cleanup saw nothing to remove, the finalizer went,
//! and the node kept them for good. The operator's cleanup now lists the nodes from the API
//! server; the finding (`KCR_PERTURB_ONLY='stale=MODIFIED /api/v1/nodes envtest-node-2 #2'`)
//! reproduced 3 times of 3 before the fix and not after, and a full run since reports
//! `perturbation-run controller=nodepool points=92 runs=94 findings=0 seconds=133.4`.
//!
//! # Limits
//!
//! - Settling is real time (see above): a controller that acts after a delay longer than the
//!   quiet window (a `requeue_after`) acts after the harness took its end state.
//! - Only watch events are perturbed, not the objects of a list; the stale-read class makes a
//!   watch stream lag, it does not restart the controller against a second endpoint that
//!   serves an older resourceVersion (the harness owns the client, not a second server).
//! - A crash point is a write's number in the reference run; a controller whose writes vary
//!   from run to run reaches some points in some runs only (`Report::tried` says which took
//!   effect). Reproduction lines therefore name the write or event by key.
//! - Every run starts a fresh API server: a few milliseconds in-process, 3 to 6 s on the real
//!   backend.

mod error;
mod explore;
mod incarnation;
mod intercept;
mod state;

pub use error::{BoxError, PerturbError};
pub use explore::{
    Class, Exploration, Finding, ONLY_ENV, Problem, Report, RunId, SEED_ENV, Scenario, Tried,
};
pub use intercept::{EventKey, WriteRecord};
pub use state::{Change, EndState, Exclude, Normaliser, Snapshot, diff, normalise};

use kcr_controller::{BindAddress, ManagerOptions};

/// Manager options for a controller under test: no metrics or health listeners, no leader
/// election, no `rest_client_*` layer, field owner `kcr-perturb`.
#[must_use]
pub fn manager_options() -> ManagerOptions {
    let mut options = ManagerOptions::default()
        .field_owner("kcr-perturb")
        .rest_client_metrics(false);
    options.metrics_bind_address = BindAddress::Disabled;
    options.health_probe_bind_address = BindAddress::Disabled;
    options
}
