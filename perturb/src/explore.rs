//! The exploration: the reference run, the perturbed runs, the comparison and the report.

use std::fmt;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use kcr_controller::Manager;
use kcr_envtest::TestApiServer;
use kube::api::ApiResource;
use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use tokio::time::Instant;

use crate::error::{BoxError, PerturbError};
use crate::incarnation::{Incarnation, StartFn};
use crate::intercept::{EventKey, Plan, RunShared, WriteRecord, one_line};
use crate::state::{Change, EndState, Exclude, Normaliser, Snapshot, diff, normalise, snapshot};

/// The environment variable that restricts an exploration to one run (plus the reference
/// run it is compared with). By number in the reference run: `crash-after:3`,
/// `crash-before:3`, `missed:2`, `stale:5`, or `reference`. By key, which stays right when
/// the reference run's numbering varies (a controller whose writes or events vary in number
/// from run to run): `crash-after=<write key>` ([`WriteRecord::key`]),
/// `crash-before=<write key>`, `missed=<event>`, `stale=<event>` (an [`EventKey`] as it
/// displays, e.g. `stale=MODIFIED /api/v1/nodes envtest-node-2 #2`). Every finding prints
/// the key form in its reproduction line.
pub const ONLY_ENV: &str = "KCR_PERTURB_ONLY";

/// The environment variable that sets the exploration's seed (overrides
/// [`Exploration::seed`]).
pub const SEED_ENV: &str = "KCR_PERTURB_SEED";

/// A class of perturbation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// The controller crashes right after one of its writes is answered (the write is
    /// durable), or right before it is sent (the write is lost); a fresh incarnation takes
    /// over. One run per write of the reference run and side.
    Crash,
    /// The controller misses an intermediate state: one `MODIFIED` watch event is held back
    /// and dropped if a newer event of the same object arrives meanwhile (what a reconnect
    /// and relist deliver), else delivered late. One run per `MODIFIED` event of the
    /// reference run.
    MissedIntermediate,
    /// The controller's cache falls behind: from one watch event on, that event's watch
    /// stream is held back for the hold window (everything it carries is queued), then
    /// released in order. One run per watch event of the reference run.
    StaleRead,
}

impl Class {
    /// Every class.
    pub const ALL: [Class; 3] = [Class::Crash, Class::MissedIntermediate, Class::StaleRead];
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Class::Crash => "crash",
            Class::MissedIntermediate => "missed-intermediate",
            Class::StaleRead => "stale-read",
        })
    }
}

/// One run of an exploration: the reference run or one perturbation point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunId {
    /// The unperturbed run.
    Reference,
    /// Crash right after the reference run's write `k` (1-based) is answered.
    CrashAfter(usize),
    /// Crash right before write `k` is sent.
    CrashBefore(usize),
    /// Hold, and drop if superseded, the reference run's `i`-th `MODIFIED` watch event.
    Missed(usize),
    /// Hold the watch stream from the reference run's `i`-th watch event on.
    Stale(usize),
}

impl RunId {
    /// The class of this run (none for the reference run).
    pub fn class(&self) -> Option<Class> {
        match self {
            RunId::Reference => None,
            RunId::CrashAfter(_) | RunId::CrashBefore(_) => Some(Class::Crash),
            RunId::Missed(_) => Some(Class::MissedIntermediate),
            RunId::Stale(_) => Some(Class::StaleRead),
        }
    }

    /// Parses the [`Display`](fmt::Display) form (`crash-after:3`, ...), one of the two
    /// forms [`ONLY_ENV`] accepts.
    pub fn parse(text: &str) -> Result<RunId, PerturbError> {
        let bad = |why: &str| PerturbError::BadOnly {
            value: text.to_owned(),
            why: why.to_owned(),
        };
        let text = text.trim();
        if text == "reference" {
            return Ok(RunId::Reference);
        }
        let (kind, n) = text
            .split_once(':')
            .ok_or_else(|| bad("no ':' between the kind of run and its point"))?;
        let n: usize = n
            .parse()
            .map_err(|_| bad("the point is not a positive number"))?;
        if n == 0 {
            return Err(bad("points count from 1"));
        }
        match kind {
            "crash-after" => Ok(RunId::CrashAfter(n)),
            "crash-before" => Ok(RunId::CrashBefore(n)),
            "missed" => Ok(RunId::Missed(n)),
            "stale" => Ok(RunId::Stale(n)),
            _ => Err(bad("unknown kind of run")),
        }
    }
}

/// What [`ONLY_ENV`] selects: a run by its number in this reference run, or by the key of
/// its write or event (stable when the reference run's numbering varies).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Only {
    Id(RunId),
    CrashAfter(String),
    CrashBefore(String),
    Missed(String),
    Stale(String),
}

impl Only {
    fn parse(text: &str) -> Result<Only, PerturbError> {
        let trimmed = text.trim();
        if let Some((kind, key)) = trimmed.split_once('=')
            && !kind.contains(':')
        {
            let key = key.trim().to_owned();
            return match kind {
                "crash-after" => Ok(Only::CrashAfter(key)),
                "crash-before" => Ok(Only::CrashBefore(key)),
                "missed" => Ok(Only::Missed(key)),
                "stale" => Ok(Only::Stale(key)),
                _ => Err(PerturbError::BadOnly {
                    value: text.to_owned(),
                    why: "unknown kind of run".into(),
                }),
            };
        }
        RunId::parse(trimmed).map(Only::Id)
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunId::Reference => write!(f, "reference"),
            RunId::CrashAfter(k) => write!(f, "crash-after:{k}"),
            RunId::CrashBefore(k) => write!(f, "crash-before:{k}"),
            RunId::Missed(i) => write!(f, "missed:{i}"),
            RunId::Stale(i) => write!(f, "stale:{i}"),
        }
    }
}

/// What went wrong in a perturbed run.
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    /// The end state differs from the reference run's.
    Diff(Vec<Change>),
    /// An invariant was broken after a settle.
    Invariant {
        /// The invariant's name.
        name: String,
        /// After which settle (1 is the scenario's first; the final one is last).
        step: usize,
        /// What the invariant said.
        message: String,
    },
    /// The controller did not settle within the timeout (a hot loop, or a stuck request).
    SettleTimeout {
        /// Which settle.
        step: usize,
        /// The timeout.
        timeout: Duration,
    },
    /// The scenario returned an error.
    Scenario(String),
    /// An incarnation of the controller failed to start, or its Manager stopped.
    Controller {
        /// Which incarnation (1 is the first).
        incarnation: usize,
        /// What it reported.
        message: String,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Diff(changes) => {
                writeln!(
                    f,
                    "end state differs from the reference run ({} changes):",
                    changes.len()
                )?;
                for c in changes {
                    writeln!(f, "    {c}")?;
                }
                Ok(())
            }
            Problem::Invariant {
                name,
                step,
                message,
            } => writeln!(
                f,
                "invariant {name:?} broken after settle {step}: {message}"
            ),
            Problem::SettleTimeout { step, timeout } => writeln!(
                f,
                "the controller was still busy {timeout:?} into settle {step}"
            ),
            Problem::Scenario(message) => writeln!(f, "the scenario failed: {message}"),
            Problem::Controller {
                incarnation,
                message,
            } => writeln!(f, "controller incarnation {incarnation}: {message}"),
        }
    }
}

/// A perturbed run that ended differently from the reference run.
#[derive(Debug, Clone)]
pub struct Finding {
    /// The run.
    pub run: RunId,
    /// The run's class.
    pub class: Class,
    /// The exploration's seed.
    pub seed: u64,
    /// What the perturbation did, as it happened.
    pub perturbation: String,
    /// What differs.
    pub problems: Vec<Problem>,
    /// The command that reproduces exactly this run.
    pub reproduce: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "finding [{}] run={} seed={}: {}",
            self.class, self.run, self.seed, self.perturbation
        )?;
        for p in &self.problems {
            write!(f, "  {p}")?;
        }
        writeln!(f, "  reproduce: {}", self.reproduce)
    }
}

/// The outcome of an exploration.
#[derive(Debug, Clone)]
pub struct Report {
    /// The exploration's name.
    pub exploration: String,
    /// The seed it ran with.
    pub seed: u64,
    /// The runs that differ from the reference run.
    pub findings: Vec<Finding>,
    /// Every run, the reference run(s) included.
    pub runs: usize,
    /// The perturbation points the reference run offered, over the exploration's classes.
    pub points: usize,
    /// The points run (fewer than `points` when the budget ran out or [`ONLY_ENV`] chose one).
    pub points_tried: usize,
    /// The points tried whose perturbation happened (a crash point beyond the writes of a
    /// run, or a held event with no successor, changes nothing).
    pub points_effective: usize,
    /// Wall-clock seconds of the whole exploration.
    pub seconds: f64,
    /// The reference run's writes, in order: the crash points.
    pub reference_writes: Vec<WriteRecord>,
    /// The reference run's watch events, in order: the stale-read points.
    pub reference_events: Vec<EventKey>,
    /// Every perturbed run, in the order run.
    pub tried: Vec<Tried>,
}

/// One perturbed run, found or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tried {
    /// The run.
    pub run: RunId,
    /// What the perturbation did; none if its point was never reached (nothing happened).
    pub effect: Option<String>,
    /// Whether the run is a finding.
    pub finding: bool,
}

impl Report {
    /// `perturbation-run controller=<name> points=P runs=R findings=F seconds=S`.
    pub fn summary_line(&self, controller: &str) -> String {
        format!(
            "perturbation-run controller={controller} points={} runs={} findings={} seconds={:.1}",
            self.points,
            self.runs,
            self.findings.len(),
            self.seconds
        )
    }

    /// The findings of one class.
    pub fn findings_of(&self, class: Class) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(move |f| f.class == class)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "exploration {:?} (seed {}): {} runs, {} of {} points tried ({} took effect), \
             {} findings, {:.1} s",
            self.exploration,
            self.seed,
            self.runs,
            self.points_tried,
            self.points,
            self.points_effective,
            self.findings.len(),
            self.seconds
        )?;
        writeln!(f, "reference writes:")?;
        for w in &self.reference_writes {
            writeln!(f, "  {}: {w}", w.index)?;
        }
        writeln!(f, "reference watch events:")?;
        for (i, e) in self.reference_events.iter().enumerate() {
            writeln!(f, "  {}: {e}", i + 1)?;
        }
        for t in &self.tried {
            writeln!(
                f,
                "  run {}: {}{}",
                t.run,
                t.effect
                    .as_deref()
                    .unwrap_or("point not reached, nothing perturbed"),
                if t.finding { " [finding]" } else { "" }
            )?;
        }
        for finding in &self.findings {
            write!(f, "{finding}")?;
        }
        Ok(())
    }
}

type ScenarioFn = Arc<dyn Fn(Scenario) -> BoxFuture<'static, Result<(), BoxError>> + Send + Sync>;
type InvariantFn = Arc<dyn Fn(&Snapshot) -> Result<(), String> + Send + Sync>;
type ServerFn = Arc<
    dyn Fn() -> BoxFuture<'static, Result<TestApiServer, kcr_envtest::EnvtestError>> + Send + Sync,
>;

/// An exploration: a controller, a scenario, the kinds whose end state is compared, and
/// the classes of perturbation to try. See the [crate docs](crate).
pub struct Exploration {
    name: String,
    controller: Option<StartFn>,
    scenario: Option<ScenarioFn>,
    server: Option<ServerFn>,
    crds: Vec<Value>,
    compared: Vec<ApiResource>,
    normalisers: Vec<Normaliser>,
    excludes: Vec<Exclude>,
    invariants: Vec<(String, InvariantFn)>,
    classes: Vec<Class>,
    seed: u64,
    quiet: Duration,
    settle_timeout: Duration,
    hold: Duration,
    max_runs: Option<usize>,
    max_time: Option<Duration>,
    reproduce: Option<String>,
    check_reference: bool,
    uncounted: Vec<String>,
    only: Option<String>,
}

impl fmt::Debug for Exploration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Exploration")
            .field("name", &self.name)
            .field("classes", &self.classes)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

impl Exploration {
    /// A new exploration named `name` (the name is only for messages): every class, seed 0,
    /// a 150 ms quiet window, a 30 s settle timeout, a 1 s hold window, no budget.
    pub fn new(name: impl Into<String>) -> Exploration {
        Exploration {
            name: name.into(),
            controller: None,
            scenario: None,
            server: None,
            crds: Vec::new(),
            compared: Vec::new(),
            normalisers: Vec::new(),
            excludes: Vec::new(),
            invariants: Vec::new(),
            classes: Class::ALL.to_vec(),
            seed: 0,
            quiet: Duration::from_millis(150),
            settle_timeout: Duration::from_secs(30),
            hold: Duration::from_secs(1),
            max_runs: None,
            max_time: None,
            reproduce: None,
            check_reference: true,
            uncounted: vec![
                "events".into(),
                "events.events.k8s.io".into(),
                "leases.coordination.k8s.io".into(),
            ],
            only: None,
        }
    }

    /// How to start the controller under test: build a Manager on the client the harness
    /// hands over (every request of it goes through the harness) and register controllers
    /// on it; the harness runs it. Called once per incarnation, on the incarnation's own
    /// runtime and thread. Use [`manager_options`](crate::manager_options) (no listeners, no
    /// leader election) or options like them.
    pub fn controller<F, Fut, E>(mut self, start: F) -> Self
    where
        F: Fn(kube::Client) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Manager, E>> + Send + 'static,
        E: Into<BoxError>,
    {
        self.controller = Some(Arc::new(move |client| {
            start(client).map(|r| r.map_err(Into::into)).boxed()
        }));
        self
    }

    /// The user's actions: create, change, delete objects through [`Scenario::client`],
    /// with [`Scenario::settle`] between steps. It must be deterministic: the same steps in
    /// every run.
    pub fn scenario<F, Fut, E>(mut self, scenario: F) -> Self
    where
        F: Fn(Scenario) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Into<BoxError>,
    {
        self.scenario = Some(Arc::new(move |ctx| {
            scenario(ctx).map(|r| r.map_err(Into::into)).boxed()
        }));
        self
    }

    /// Starts each run's API server with `server` instead of `TestApiServer::start()` (the
    /// backend `KCR_ENVTEST_BACKEND` names). Every run gets a fresh server.
    pub fn server<F, Fut>(mut self, server: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<TestApiServer, kcr_envtest::EnvtestError>> + Send + 'static,
    {
        self.server = Some(Arc::new(move || server().boxed()));
        self
    }

    /// Installs `K`'s CustomResourceDefinition on each run's server before the controller
    /// starts.
    pub fn crd<K: kube::CustomResourceExt>(mut self) -> Self {
        self.crds
            .push(serde_json::to_value(K::crd()).unwrap_or(Value::Null));
        self
    }

    /// Compares the objects of `K` (every namespace but the system ones).
    pub fn compare<K: kube::Resource<DynamicType = ()>>(mut self) -> Self {
        self.compared.push(ApiResource::erase::<K>(&()));
        self
    }

    /// Compares the objects of a kind chosen at run time.
    pub fn compare_dynamic(mut self, resource: ApiResource) -> Self {
        self.compared.push(resource);
        self
    }

    /// Adds a normaliser of your own (after the defaults; see [`normalise`](crate::normalise)).
    pub fn normalise(mut self, normaliser: impl Fn(&mut Value) + Send + Sync + 'static) -> Self {
        self.normalisers.push(Arc::new(normaliser));
        self
    }

    /// Leaves out objects `exclude(kind, object)` says `true` for.
    pub fn exclude(
        mut self,
        exclude: impl Fn(&str, &Value) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.excludes.push(Arc::new(exclude));
        self
    }

    /// An invariant, checked after every settle (the scenario's and the final one) on a
    /// [`Snapshot`] of the compared kinds. `Err(message)` is a finding.
    pub fn invariant(
        mut self,
        name: impl Into<String>,
        check: impl Fn(&Snapshot) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.invariants.push((name.into(), Arc::new(check)));
        self
    }

    /// The classes to explore (default: all).
    pub fn classes(mut self, classes: impl IntoIterator<Item = Class>) -> Self {
        self.classes = classes.into_iter().collect();
        self
    }

    /// The seed: it picks the points run when the budget is smaller than the points, and
    /// each run's hold window (the base window ±25 %). [`SEED_ENV`] overrides it.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// How long the controller must be quiet (no request in flight, none started, no watch
    /// event delivered) for a settle to end. Default 150 ms. This is real time: the
    /// controller runs on a runtime of its own and talks to a real server.
    pub fn quiet_window(mut self, quiet: Duration) -> Self {
        self.quiet = quiet;
        self
    }

    /// How long a settle waits for quiet before reporting a timeout. Default 30 s.
    pub fn settle_timeout(mut self, timeout: Duration) -> Self {
        self.settle_timeout = timeout;
        self
    }

    /// How long the stale-read and missed-intermediate classes hold events back (±25 % by
    /// seed). It must exceed the quiet window for a hold to span a scenario step. Default 1 s.
    pub fn hold_window(mut self, hold: Duration) -> Self {
        self.hold = hold;
        self
    }

    /// At most `runs` perturbed runs.
    pub fn max_runs(mut self, runs: usize) -> Self {
        self.max_runs = Some(runs);
        self
    }

    /// No perturbed run starts after `time` has passed since the exploration started.
    pub fn max_time(mut self, time: Duration) -> Self {
        self.max_time = Some(time);
        self
    }

    /// The command a reproduction line ends with (default: derived from the running test
    /// or example, e.g. `cargo test -p <package> --test <binary> <test> -- --exact`).
    pub fn reproduce_with(mut self, command: impl Into<String>) -> Self {
        self.reproduce = Some(command.into());
        self
    }

    /// Whether to run the reference twice and fail with
    /// [`PerturbError::NondeterministicReference`] if the two end states differ (default:
    /// yes, unless [`ONLY_ENV`] is set). This guards against false findings.
    pub fn check_reference(mut self, check: bool) -> Self {
        self.check_reference = check;
        self
    }

    /// Runs only the reference run and the run `selector` names, in [`ONLY_ENV`]'s syntax
    /// (`crash-after:3`, `stale=MODIFIED /api/v1/nodes envtest-node-2 #2`, ...): what the
    /// variable does, which wins over this. A bad selector fails [`run`](Self::run).
    pub fn only(mut self, selector: impl Into<String>) -> Self {
        self.only = Some(selector.into());
        self
    }

    /// Runs the exploration: the reference run, then one run per point within the budget.
    pub async fn run(self) -> Result<Report, PerturbError> {
        let started = Instant::now();
        let start = self
            .controller
            .clone()
            .ok_or_else(|| PerturbError::NoController {
                exploration: self.name.clone(),
            })?;
        let scenario = self
            .scenario
            .clone()
            .ok_or_else(|| PerturbError::NoScenario {
                exploration: self.name.clone(),
            })?;
        let only = match std::env::var(ONLY_ENV) {
            Ok(v) if !v.trim().is_empty() => Some(Only::parse(&v)?),
            _ => self.only.as_deref().map(Only::parse).transpose()?,
        };
        let seed = std::env::var(SEED_ENV)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(self.seed);
        let mut runs = 0;
        let reference = self
            .run_once(RunId::Reference, Plan::None, &start, &scenario)
            .await?;
        runs += 1;
        reference.as_reference()?;
        if self.check_reference && only.is_none() {
            let again = self
                .run_once(RunId::Reference, Plan::None, &start, &scenario)
                .await?;
            runs += 1;
            again.as_reference()?;
            let changes = diff(&reference.end, &again.end);
            if !changes.is_empty() {
                return Err(PerturbError::NondeterministicReference {
                    diff: changes
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("\n"),
                });
            }
        }
        let counted: Vec<&WriteRecord> = reference.writes.iter().filter(|w| w.index > 0).collect();
        let modified: Vec<&EventKey> = reference
            .events
            .iter()
            .filter(|e| e.event_type == "MODIFIED")
            .collect();
        let mut points: Vec<RunId> = Vec::new();
        for class in &self.classes {
            match class {
                Class::Crash => {
                    for w in &counted {
                        points.push(RunId::CrashAfter(w.index));
                        points.push(RunId::CrashBefore(w.index));
                    }
                }
                Class::MissedIntermediate => {
                    points.extend((1..=modified.len()).map(RunId::Missed));
                }
                Class::StaleRead => {
                    points.extend((1..=reference.events.len()).map(RunId::Stale));
                }
            }
        }
        let found = points.len();
        let only = match only {
            None => None,
            Some(Only::Id(id)) => Some(id),
            Some(selector) => {
                let key_of = |key: &str| PerturbError::BadOnly {
                    value: format!("{selector:?}"),
                    why: format!("the reference run has no write or event {key:?}"),
                };
                Some(match &selector {
                    Only::CrashAfter(key) | Only::CrashBefore(key) => {
                        let w = counted
                            .iter()
                            .find(|w| w.key == *key)
                            .ok_or_else(|| key_of(key))?;
                        if matches!(selector, Only::CrashAfter(_)) {
                            RunId::CrashAfter(w.index)
                        } else {
                            RunId::CrashBefore(w.index)
                        }
                    }
                    Only::Missed(key) => RunId::Missed(
                        modified
                            .iter()
                            .position(|e| e.to_string() == *key)
                            .ok_or_else(|| key_of(key))?
                            + 1,
                    ),
                    Only::Stale(key) => RunId::Stale(
                        reference
                            .events
                            .iter()
                            .position(|e| e.to_string() == *key)
                            .ok_or_else(|| key_of(key))?
                            + 1,
                    ),
                    Only::Id(id) => *id,
                })
            }
        };
        let chosen: Vec<RunId> = match only {
            Some(RunId::Reference) => Vec::new(),
            Some(id) => {
                let available = match id {
                    RunId::CrashAfter(k) | RunId::CrashBefore(k) => k <= counted.len(),
                    RunId::Missed(i) => i <= modified.len(),
                    RunId::Stale(i) => i <= reference.events.len(),
                    RunId::Reference => true,
                };
                if !available {
                    return Err(PerturbError::BadOnly {
                        value: id.to_string(),
                        why: format!(
                            "the reference run offers {} writes, {} MODIFIED events and {} \
                             watch events",
                            counted.len(),
                            modified.len(),
                            reference.events.len()
                        ),
                    });
                }
                vec![id]
            }
            None => match self.max_runs {
                Some(max) if max < points.len() => {
                    let mut rng = SmallRng::seed_from_u64(seed);
                    let mut picked =
                        rand::seq::index::sample(&mut rng, points.len(), max).into_vec();
                    picked.sort_unstable();
                    picked.into_iter().map(|i| points[i]).collect()
                }
                _ => points.clone(),
            },
        };
        let mut findings = Vec::new();
        let mut tried = 0;
        let mut effective = 0;
        let mut tried_runs = Vec::new();
        for id in chosen {
            if let Some(max) = self.max_time
                && started.elapsed() >= max
            {
                break;
            }
            // The hold comes from the seed and the point's key, so it is the same when the
            // reference run numbers the point differently.
            let key = selector_of(id, &counted, &modified, &reference.events);
            let plan = match id {
                RunId::Reference => Plan::None,
                RunId::CrashAfter(k) => Plan::CrashAfter(k),
                RunId::CrashBefore(k) => Plan::CrashBefore(k),
                RunId::Missed(i) => Plan::Missed {
                    point: modified[i - 1].clone(),
                    hold: self.hold_for(seed, &key),
                },
                RunId::Stale(i) => Plan::Stale {
                    point: reference.events[i - 1].clone(),
                    hold: self.hold_for(seed, &key),
                },
            };
            let outcome = self.run_once(id, plan, &start, &scenario).await?;
            runs += 1;
            tried += 1;
            tried_runs.push(Tried {
                run: id,
                effect: outcome.effect.clone(),
                finding: false,
            });
            let Some(effect) = outcome.effect.clone() else {
                continue;
            };
            effective += 1;
            let mut problems = outcome.problems.clone();
            let changes = diff(&reference.end, &outcome.end);
            if !changes.is_empty() {
                problems.insert(0, Problem::Diff(changes));
            }
            if !problems.is_empty() {
                let finding = Finding {
                    run: id,
                    class: id.class().unwrap_or(Class::Crash),
                    seed,
                    perturbation: effect,
                    problems,
                    reproduce: format!(
                        "{ONLY_ENV}='{key}' {SEED_ENV}={seed} {}",
                        self.reproduce.clone().unwrap_or_else(default_reproduce)
                    ),
                };
                tracing::warn!(exploration = %self.name, "{finding}");
                findings.push(finding);
                if let Some(last) = tried_runs.last_mut() {
                    last.finding = true;
                }
            }
        }
        Ok(Report {
            exploration: self.name.clone(),
            seed,
            findings,
            runs,
            points: found,
            points_tried: tried,
            points_effective: effective,
            seconds: started.elapsed().as_secs_f64(),
            reference_writes: reference.writes.clone(),
            reference_events: reference.events.clone(),
            tried: tried_runs,
        })
    }

    fn hold_for(&self, seed: u64, key: &str) -> Duration {
        // FNV-1a: stable across Rust releases, unlike the standard library's hasher.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
        for b in key.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        let mut rng = SmallRng::seed_from_u64(h);
        self.hold.mul_f64(rng.random_range(0.75..1.25))
    }

    async fn run_once(
        &self,
        id: RunId,
        plan: Plan,
        start: &StartFn,
        scenario: &ScenarioFn,
    ) -> Result<Outcome, PerturbError> {
        let run_name = id.to_string();
        let server = match &self.server {
            Some(f) => f().await,
            None => TestApiServer::start().await,
        }
        .map_err(|source| PerturbError::Server {
            run: run_name.clone(),
            source: Box::new(source),
        })?;
        for crd in &self.crds {
            server
                .install_crd_value(crd.clone())
                .await
                .map_err(|source| PerturbError::InstallCrd {
                    run: run_name.clone(),
                    crd: crd["metadata"]["name"].as_str().unwrap_or("?").to_owned(),
                    source: Box::new(source),
                })?;
        }
        let config = kube::Config::from_custom_kubeconfig(
            server.kubeconfig(),
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .map_err(|e| PerturbError::ClientConfig {
            run: run_name.clone(),
            source: Box::new(e),
        })?;
        let run = RunShared::new(plan, self.uncounted.clone());
        let harness = Arc::new(Harness {
            run: run.clone(),
            config,
            start: start.clone(),
            current: tokio::sync::Mutex::new(None),
            incarnations: AtomicUsize::new(0),
            problems: Mutex::new(Vec::new()),
            settles: AtomicUsize::new(0),
            quiet: self.quiet,
            settle_timeout: self.settle_timeout,
            client: server.client(),
            compared: self.compared.clone(),
            excludes: self.excludes.clone(),
            invariants: self.invariants.clone(),
            run_name: run_name.clone(),
        });
        harness.start_incarnation().await?;
        // The controller's caches are listed and watching before the user acts, so the
        // user's objects arrive as watch events in every run, not in a list in some.
        harness.drive(harness.settle(SettleKind::Initial)).await;
        let ctx = Scenario {
            harness: harness.clone(),
            namespace: server.namespace().to_owned(),
            seed: self.seed,
        };
        let scenario_result = harness.drive(scenario(ctx)).await;
        if let Err(e) = scenario_result {
            harness
                .problems
                .lock()
                .push(Problem::Scenario(one_line(&e.to_string())));
        }
        // The harness's own settle: every held event released, the controller quiet.
        harness.drive(harness.settle(SettleKind::Final)).await;
        let snap = snapshot(&server.client(), &self.compared, &self.excludes, &run_name).await?;
        if let Some(incarnation) = harness.current.lock().await.take() {
            if let Some(message) = incarnation.stopped.lock().clone() {
                harness.problems.lock().push(Problem::Controller {
                    incarnation: incarnation.gate.number,
                    message,
                });
            }
            incarnation.kill().await;
        }
        let end = normalise(&snap, &self.normalisers);
        let problems = harness.problems.lock().clone();
        drop(server);
        Ok(Outcome {
            end,
            writes: run.writes(),
            events: run.events(),
            effect: run.effect(),
            problems,
        })
    }
}

/// The [`ONLY_ENV`] value that selects `id` by its write's or event's key.
fn selector_of(
    id: RunId,
    counted: &[&WriteRecord],
    modified: &[&EventKey],
    events: &[EventKey],
) -> String {
    let write = |k: usize| counted.iter().find(|w| w.index == k).map(|w| w.key.clone());
    let keyed = match id {
        RunId::Reference => None,
        RunId::CrashAfter(k) => write(k).map(|key| format!("crash-after={key}")),
        RunId::CrashBefore(k) => write(k).map(|key| format!("crash-before={key}")),
        RunId::Missed(i) => modified.get(i - 1).map(|e| format!("missed={e}")),
        RunId::Stale(i) => events.get(i - 1).map(|e| format!("stale={e}")),
    };
    keyed.unwrap_or_else(|| id.to_string())
}

/// The reproduction command of the running test or example.
fn default_reproduce() -> String {
    let package = std::env::var("CARGO_PKG_NAME").unwrap_or_else(|_| "<package>".into());
    let exe = std::env::current_exe().ok();
    let binary = exe
        .as_ref()
        .and_then(|p| p.file_stem())
        .and_then(|s| s.to_str())
        .map(|s| match s.rsplit_once('-') {
            Some((name, hash))
                if hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()) =>
            {
                name.to_owned()
            }
            _ => s.to_owned(),
        })
        .unwrap_or_else(|| "<binary>".into());
    let is_example = exe
        .as_ref()
        .is_some_and(|p| p.components().any(|c| c.as_os_str() == "examples"));
    let thread = std::thread::current().name().map(str::to_owned);
    if is_example {
        return format!("cargo run -p {package} --example {binary}");
    }
    match thread {
        Some(test) if test != "main" => {
            format!("cargo test -p {package} --test {binary} {test} -- --exact")
        }
        _ => format!("cargo run -p {package} --bin {binary}"),
    }
}

struct Outcome {
    end: EndState,
    writes: Vec<WriteRecord>,
    events: Vec<EventKey>,
    effect: Option<String>,
    problems: Vec<Problem>,
}

impl Outcome {
    /// The reference run must be clean.
    fn as_reference(&self) -> Result<(), PerturbError> {
        match self.problems.first() {
            None => Ok(()),
            Some(Problem::Scenario(message)) => Err(PerturbError::ReferenceScenario {
                message: message.clone(),
            }),
            Some(Problem::SettleTimeout { step, timeout }) => Err(PerturbError::ReferenceSettle {
                step: *step,
                timeout: *timeout,
            }),
            Some(Problem::Invariant {
                name,
                step,
                message,
            }) => Err(PerturbError::ReferenceInvariant {
                invariant: name.clone(),
                step: *step,
                message: message.clone(),
            }),
            Some(Problem::Controller {
                incarnation,
                message,
            }) => Err(PerturbError::ReferenceController {
                incarnation: *incarnation,
                message: message.clone(),
            }),
            Some(Problem::Diff(_)) => Ok(()),
        }
    }
}

/// Which settle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SettleKind {
    /// Before the scenario: the controller's start (settle 0, no invariants).
    Initial,
    /// The scenario's.
    Step,
    /// The harness's after the scenario: also waits for held events.
    Final,
}

/// One run's harness: the incarnations, settling, invariants.
struct Harness {
    run: Arc<RunShared>,
    config: kube::Config,
    start: StartFn,
    current: tokio::sync::Mutex<Option<Incarnation>>,
    incarnations: AtomicUsize,
    problems: Mutex<Vec<Problem>>,
    settles: AtomicUsize,
    quiet: Duration,
    settle_timeout: Duration,
    client: kube::Client,
    compared: Vec<ApiResource>,
    excludes: Vec<Exclude>,
    invariants: Vec<(String, InvariantFn)>,
    run_name: String,
}

impl Harness {
    async fn start_incarnation(&self) -> Result<(), PerturbError> {
        let number = self.incarnations.fetch_add(1, Ordering::SeqCst) + 1;
        let (incarnation, ready) = Incarnation::start(
            number,
            self.config.clone(),
            self.run.clone(),
            self.start.clone(),
        )
        .await?;
        if let Err(message) = ready {
            self.problems.lock().push(Problem::Controller {
                incarnation: number,
                message: format!("failed to start: {}", one_line(&message)),
            });
        }
        *self.current.lock().await = Some(incarnation);
        self.run.touch();
        Ok(())
    }

    /// Runs `fut`; whenever the layer trips a crash, kills the incarnation and starts the
    /// next one.
    async fn drive<F: Future>(&self, fut: F) -> F::Output {
        let mut fut = pin!(fut);
        loop {
            tokio::select! {
                biased;
                () = self.run.crash.notified() => {
                    if let Some(old) = self.current.lock().await.take() {
                        old.kill().await;
                    }
                    if let Err(e) = self.start_incarnation().await {
                        self.problems.lock().push(Problem::Controller {
                            incarnation: self.incarnations.load(Ordering::SeqCst),
                            message: e.to_string(),
                        });
                    }
                }
                out = &mut fut => return out,
            }
        }
    }

    /// Waits until the controller is quiet; then checks the invariants.
    async fn settle(&self, kind: SettleKind) {
        let final_settle = kind == SettleKind::Final;
        let step = match kind {
            SettleKind::Initial => 0,
            _ => self.settles.fetch_add(1, Ordering::SeqCst) + 1,
        };
        let started = Instant::now();
        let poll = Duration::from_millis(10).min(self.quiet);
        loop {
            tokio::time::sleep(poll).await;
            let now = Instant::now();
            let in_flight = match self.current.try_lock() {
                Ok(current) => current.as_ref().map_or(0, |i| i.gate.in_flight()),
                // An incarnation is being replaced: busy.
                Err(_) => 1,
            };
            let busy = in_flight > 0 || (final_settle && self.run.held() > 0);
            if !busy
                && now.duration_since(started) >= self.quiet
                && now.duration_since(self.run.last_activity()) >= self.quiet
            {
                break;
            }
            if now.duration_since(started) >= self.settle_timeout {
                self.problems.lock().push(Problem::SettleTimeout {
                    step,
                    timeout: self.settle_timeout,
                });
                break;
            }
        }
        if self.invariants.is_empty() || kind == SettleKind::Initial {
            return;
        }
        match snapshot(&self.client, &self.compared, &self.excludes, &self.run_name).await {
            Ok(snap) => {
                for (name, check) in &self.invariants {
                    if let Err(message) = check(&snap) {
                        let mut problems = self.problems.lock();
                        let already = problems
                            .iter()
                            .any(|p| matches!(p, Problem::Invariant { name: n, .. } if n == name));
                        if !already {
                            problems.push(Problem::Invariant {
                                name: name.clone(),
                                step,
                                message,
                            });
                        }
                    }
                }
            }
            Err(e) => self.problems.lock().push(Problem::Scenario(format!(
                "snapshot for the invariants: {e}"
            ))),
        }
    }
}

/// What a scenario gets: a client that acts as the user (its requests are not intercepted),
/// and [`settle`](Scenario::settle).
#[derive(Clone)]
pub struct Scenario {
    harness: Arc<Harness>,
    namespace: String,
    seed: u64,
}

impl fmt::Debug for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scenario")
            .field("run", &self.harness.run_name)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl Scenario {
    /// The user's client (default namespace: [`namespace`](Self::namespace)).
    pub fn client(&self) -> kube::Client {
        self.harness.client.clone()
    }

    /// The server's test namespace (`default` on the in-process and real backends).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The exploration's seed, for scenarios that vary their steps by seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Which run this is (`reference`, `crash-after:3`, ...).
    pub fn run(&self) -> &str {
        &self.harness.run_name
    }

    /// Waits until the controller is quiet: no request of it in flight and none started and
    /// no watch event delivered to it for the quiet window (events the stale-read and
    /// missed-intermediate classes hold back do not count here; the harness's final settle
    /// waits for them). Then checks the invariants. A timeout is recorded as a problem of
    /// the run, not returned.
    pub async fn settle(&self) {
        self.harness.settle(SettleKind::Step).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_round_trip() {
        for id in [
            RunId::Reference,
            RunId::CrashAfter(3),
            RunId::CrashBefore(1),
            RunId::Missed(2),
            RunId::Stale(10),
        ] {
            assert_eq!(RunId::parse(&id.to_string()).unwrap(), id);
        }
        assert!(RunId::parse("crash-after:0").is_err());
        assert!(RunId::parse("crash-after").is_err());
        assert!(RunId::parse("stale:x").is_err());
    }

    #[test]
    fn selectors_parse_by_number_and_by_key() {
        assert_eq!(
            Only::parse(" missed:2 ").unwrap(),
            Only::Id(RunId::Missed(2))
        );
        assert_eq!(
            Only::parse("stale=MODIFIED /api/v1/nodes n #2").unwrap(),
            Only::Stale("MODIFIED /api/v1/nodes n #2".into())
        );
        assert_eq!(
            Only::parse("crash-before=patch nodes n #1").unwrap(),
            Only::CrashBefore("patch nodes n #1".into())
        );
        assert!(Only::parse("sideways=x").is_err());
    }

    #[test]
    fn summary_line_has_the_agreed_shape() {
        let report = Report {
            exploration: "x".into(),
            seed: 0,
            findings: Vec::new(),
            runs: 12,
            points: 10,
            points_tried: 10,
            points_effective: 9,
            seconds: 3.04,
            reference_writes: Vec::new(),
            reference_events: Vec::new(),
            tried: Vec::new(),
        };
        assert_eq!(
            report.summary_line("demo"),
            "perturbation-run controller=demo points=10 runs=12 findings=0 seconds=3.0"
        );
    }
}
