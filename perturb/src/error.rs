//! The crate's error type.

use std::time::Duration;

/// A boxed error from user code (the controller's start closure, a scenario).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why an exploration could not run. A perturbed run that ends differently from the reference
/// run is not an error: it is a [`Finding`](crate::Finding) in the [`Report`](crate::Report).
#[derive(Debug, thiserror::Error)]
pub enum PerturbError {
    /// The exploration was built without a controller ([`Exploration::controller`](crate::Exploration::controller)).
    #[error("exploration {exploration:?}: no controller to start (call Exploration::controller)")]
    NoController {
        /// The exploration's name.
        exploration: String,
    },
    /// The exploration was built without a scenario ([`Exploration::scenario`](crate::Exploration::scenario)).
    #[error("exploration {exploration:?}: no scenario (call Exploration::scenario)")]
    NoScenario {
        /// The exploration's name.
        exploration: String,
    },
    /// `KCR_PERTURB_ONLY` names no run this harness knows.
    #[error(
        "KCR_PERTURB_ONLY={value:?}: {why} (expected e.g. crash-after:3, crash-before:3, \
         missed:2, stale:5 or reference)"
    )]
    BadOnly {
        /// The variable's value.
        value: String,
        /// What is wrong with it.
        why: String,
    },
    /// The test API server did not start.
    #[error("run {run}: starting the test API server: {source}")]
    Server {
        /// The run (`reference`, `crash-after:3`, ...).
        run: String,
        /// The cause.
        #[source]
        source: Box<kcr_envtest::EnvtestError>,
    },
    /// Installing a CustomResourceDefinition failed.
    #[error("run {run}: installing CRD {crd}: {source}")]
    InstallCrd {
        /// The run.
        run: String,
        /// The CRD's name.
        crd: String,
        /// The cause.
        #[source]
        source: Box<kcr_envtest::EnvtestError>,
    },
    /// The client configuration for the controller could not be built.
    #[error("run {run}: building the controller's client configuration: {source}")]
    ClientConfig {
        /// The run.
        run: String,
        /// The cause.
        #[source]
        source: BoxError,
    },
    /// The controller's OS thread could not be spawned.
    #[error("spawning the thread of controller incarnation {incarnation}: {source}")]
    Thread {
        /// The incarnation's number in its run (1 is the first).
        incarnation: usize,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The controller failed in the reference run: it failed to start, or its Manager
    /// stopped with an error.
    #[error("reference run: controller incarnation {incarnation} failed: {message}")]
    ReferenceController {
        /// The incarnation's number.
        incarnation: usize,
        /// What the start closure or the Manager returned.
        message: String,
    },
    /// The scenario failed in the reference run (a perturbed run's failure is a finding).
    #[error("reference run: the scenario failed: {message}")]
    ReferenceScenario {
        /// The scenario's error.
        message: String,
    },
    /// The controller did not settle in the reference run.
    #[error(
        "reference run: the controller was still busy after {timeout:?} (settle {step}); \
         raise Exploration::settle_timeout or look for a hot loop"
    )]
    ReferenceSettle {
        /// The settle timeout.
        timeout: Duration,
        /// Which settle (1 is the scenario's first; the harness's final settle is last).
        step: usize,
    },
    /// An invariant is broken in the reference run, so it cannot judge perturbed runs.
    #[error("reference run: invariant {invariant:?} is broken after settle {step}: {message}")]
    ReferenceInvariant {
        /// The invariant's name.
        invariant: String,
        /// After which settle.
        step: usize,
        /// What the invariant said.
        message: String,
    },
    /// Two reference runs ended in different states: the controller or the scenario is not
    /// deterministic enough for a comparison (add a normaliser, or settle more).
    #[error("the reference run is not deterministic: two runs ended differently:\n{diff}")]
    NondeterministicReference {
        /// The difference, one line per change.
        diff: String,
    },
    /// Listing the objects of a compared kind failed.
    #[error("run {run}: listing {kind} for the end state: {source}")]
    List {
        /// The run.
        run: String,
        /// The kind.
        kind: String,
        /// The cause.
        #[source]
        source: Box<kube::Error>,
    },
    /// An object could not be converted to or from JSON.
    #[error("{what}: {source}")]
    Json {
        /// What was converted.
        what: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
}
