//! Leader election on a `coordination.k8s.io/v1` `Lease`, with client-go's semantics.
//!
//! - A candidate tries to take the lease every `retry_period` (jittered by up to 1.2×, as
//!   client-go does). It may take it when the lease has no holder, or when the holder's record
//!   has not changed for `lease_duration` **as observed on this candidate's own monotonic clock**
//!   (never by comparing the API server's timestamps with the local wall clock, so clock skew
//!   between nodes does not matter).
//! - The leader renews every `retry_period`. If it cannot renew within `renew_deadline` of its last
//!   successful renewal (or finds another holder), it has lost leadership. The deadline counts
//!   from when that renewal *began* (its write reached the API server after that, and the others
//!   count `lease_duration` from when they observe the write), so since
//!   `renew_deadline < lease_duration` a leader always stops before anyone else may take over,
//!   however slow the API server's answers.
//! - Updates use the lease's `resourceVersion` (optimistic concurrency): of two candidates racing
//!   for an expired lease exactly one wins, the other gets `409 Conflict`.
//! - The leader renews on a **fast path**, as client-go does: it writes the Lease it last wrote
//!   (with that write's `resourceVersion`) without reading it first, one request per renewal.
//!   If that write fails (a `409 Conflict` because the Lease changed behind its back, or any
//!   other error), or the leader's view of the Lease is older than a lease duration, it takes
//!   the **slow path**: read the Lease, decide again, write. Each slow path taken by a candidate
//!   that finds itself the holder counts in `leader_election_slowpath_total{name}` (client-go's
//!   counter; controller-runtime defines it but registers only the status gauge, kcr exports
//!   both).
//! - **No attempt waits without a bound**, so a dead connection (a silent network partition)
//!   never holds up an election: an attempt may take half the renew deadline (at least a retry
//!   period and [`MIN_ATTEMPT_TIMEOUT`]; [`LeaderElector::attempt_timeout`]), then it is given
//!   up and the next one starts at once, on a new connection. A renew attempt also ends at the
//!   renew deadline, and a release is given up after the renew deadline. So a leader cut off
//!   from the API server stops leading at its renew deadline, before its Lease can expire for
//!   the others, and a process that starts during a partition takes the Lease about one retry
//!   period after the old holder's Lease has expired (counted, as always, from when this
//!   candidate first reads it, after the heal). Half the deadline leaves a slow but live API
//!   server time to answer, and a second attempt on a new connection time to succeed. Each
//!   attempt given up is logged at `WARN` with the Lease and the bound.
//! - [`LeaderElector::release`] clears the holder so that a successor takes over at once
//!   (used on graceful shutdown when [`LeaderElectionConfig::release_on_cancel`] is set).
//! - The gauge `leader_election_master_status{name="<lease name>"}` (client-go's) is 1 from a
//!   successful [`acquire`](LeaderElector::acquire) until
//!   [`renew_until_lost`](LeaderElector::renew_until_lost) returns (leadership lost, or the
//!   elector stopped), 0 otherwise; it is exported as 0 from the elector's creation on.
//!
//! ## Why not kube-lease-manager
//!
//! kube-lease-manager 0.13 (which tracks kube 5) was evaluated and not used:
//! - it has no renew deadline or retry period: only a lease duration and a "grace" in **whole
//!   seconds**, so controller-runtime's 15 s / 10 s / 2 s (jittered) cannot be expressed, and tests
//!   cannot use sub-second leases;
//! - it decides expiry by comparing the lease's `renewTime` with the local `SystemTime`, so clock
//!   skew between nodes shifts hand-over, and it cannot run on tokio's paused clock;
//! - it reports a lost lock only when its next renewal attempt fails, with no bound tied to the
//!   lease duration, whereas a controller must stop reconciling before a successor can start;
//! - it brings a second `rand` major version into the build.
//!
//! This module is small (one `replace` per renewal, one `get` and one `create`/`replace` per
//! other attempt) and follows client-go's
//! `leaderelection` package, which operators' users already know.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use metrics::{Counter, Gauge};
use parking_lot::Mutex;
use rand::Rng;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Default lease duration (controller-runtime's `LeaseDuration`).
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// Default renew deadline (controller-runtime's `RenewDeadline`).
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// Default retry period (controller-runtime's `RetryPeriod`).
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);
/// client-go's jitter factor for the acquire loop: waits are `retry * (1 + rand[0, 1.2))`.
pub const JITTER_FACTOR: f64 = 1.2;
/// The least time one acquire or renew attempt is given, however short the retry period (a
/// test's 250 ms), so that a slow but live API server is not mistaken for a dead connection.
pub const MIN_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(1);

/// Configuration of leader election.
#[derive(Clone)]
pub struct LeaderElectionConfig {
    /// Name of the Lease object.
    pub lease_name: String,
    /// Namespace of the Lease; `None` uses the client's default namespace.
    pub namespace: Option<String>,
    /// This candidate's identity (unique among candidates). Default: the host name plus a random
    /// suffix.
    pub identity: String,
    /// Lease duration, renew deadline and retry period.
    pub timings: LeaseTimings,
    /// Release the lease when shutting down gracefully, so that a successor takes over at once.
    pub release_on_cancel: bool,
    /// Labels put on the Lease when it is created and on every acquire and slow-path renewal
    /// (client-go's `LeaseLock.Labels`): only these keys are set, other labels stay. Keys must
    /// be qualified names and values label values.
    pub labels: BTreeMap<String, String>,
    /// The client the Lease is read and written with; `None` (the default) uses the manager's.
    /// Another cluster's client (the Lease elsewhere than the objects, as controller-runtime's
    /// `LeaderElectionConfig` rest config allows) or another credential. The manager bounds it
    /// by its [`connection`](crate::ManagerOptions::connection) options (its metrics and logs
    /// name the host `leader-election`).
    pub client: Option<kube::Client>,
}

impl std::fmt::Debug for LeaderElectionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElectionConfig")
            .field("lease_name", &self.lease_name)
            .field("namespace", &self.namespace)
            .field("identity", &self.identity)
            .field("timings", &self.timings)
            .field("release_on_cancel", &self.release_on_cancel)
            .field("labels", &self.labels)
            .field(
                "client",
                &self.client.as_ref().map(|_| "a client of its own"),
            )
            .finish()
    }
}

impl LeaderElectionConfig {
    /// A configuration with controller-runtime's defaults (15 s / 10 s / 2 s) for the Lease named
    /// `lease_name`.
    pub fn new(lease_name: impl Into<String>) -> Self {
        LeaderElectionConfig {
            lease_name: lease_name.into(),
            namespace: None,
            identity: default_identity(),
            timings: LeaseTimings::default(),
            release_on_cancel: false,
            labels: BTreeMap::new(),
            client: None,
        }
    }

    /// Sets the Lease's namespace.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Sets this candidate's identity.
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = identity.into();
        self
    }

    /// Sets lease duration, renew deadline and retry period.
    pub fn timings(mut self, lease: Duration, renew_deadline: Duration, retry: Duration) -> Self {
        self.timings = LeaseTimings::new(lease, renew_deadline, retry);
        self
    }

    /// Whether to release the lease on graceful shutdown.
    pub fn release_on_cancel(mut self, release: bool) -> Self {
        self.release_on_cancel = release;
        self
    }

    /// Adds labels to put on the Lease ([`labels`](Self::labels)).
    pub fn labels<K: Into<String>, V: Into<String>>(
        mut self,
        labels: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        self.labels
            .extend(labels.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// Reads and writes the Lease with `client` instead of the manager's
    /// ([`client`](Self::client)).
    pub fn client(mut self, client: kube::Client) -> Self {
        self.client = Some(client);
        self
    }

    /// Checks the timing invariants client-go enforces.
    pub fn validate(&self) -> Result<(), LeaderElectionError> {
        let bad = |reason: &str| {
            Err(LeaderElectionError::InvalidConfig {
                reason: reason.to_string(),
            })
        };
        if self.lease_name.is_empty() {
            return bad("lease name is empty");
        }
        if self.identity.is_empty() {
            return bad("identity is empty");
        }
        for (key, value) in &self.labels {
            if let Some(reason) = kcr_names::validate_qualified_name(key).into_iter().next() {
                return Err(LeaderElectionError::InvalidConfig {
                    reason: format!("the Lease label key {key:?}: {reason}"),
                });
            }
            if let Some(reason) = kcr_names::validate_label_value(value).into_iter().next() {
                return Err(LeaderElectionError::InvalidConfig {
                    reason: format!("the Lease label {key:?}'s value {value:?}: {reason}"),
                });
            }
        }
        self.timings.validate().or_else(|e| bad(e.reason()))
    }

    /// Sets [`labels`](Self::labels) on `meta`; whether any changed.
    fn label(&self, meta: &mut ObjectMeta) -> bool {
        if self.labels.is_empty() {
            return false;
        }
        let labels = meta.labels.get_or_insert_with(Default::default);
        let mut changed = false;
        for (k, v) in &self.labels {
            if labels.get(k) != Some(v) {
                labels.insert(k.clone(), v.clone());
                changed = true;
            }
        }
        changed
    }
}

/// How a Lease is held, by leader election and by kcr-shard's member Leases alike: a holder
/// renews every `retry_period`, gives up when it could not renew within `renew_deadline`, and
/// the others take the Lease over `lease_duration` after its last renewal as they observed it.
/// The defaults are controller-runtime's (15 s / 10 s / 2 s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTimings {
    /// How long a lease is valid after its holder's last renewal, as observed by the others.
    pub lease_duration: Duration,
    /// How long the holder keeps trying to renew before it gives the Lease up.
    pub renew_deadline: Duration,
    /// How often candidates try to acquire and the holder renews.
    pub retry_period: Duration,
}

impl Default for LeaseTimings {
    fn default() -> Self {
        LeaseTimings::new(
            DEFAULT_LEASE_DURATION,
            DEFAULT_RENEW_DEADLINE,
            DEFAULT_RETRY_PERIOD,
        )
    }
}

impl LeaseTimings {
    /// Lease duration, renew deadline and retry period.
    pub const fn new(
        lease_duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Self {
        LeaseTimings {
            lease_duration,
            renew_deadline,
            retry_period,
        }
    }

    /// Checks the invariants client-go enforces: `lease_duration > renew_deadline >
    /// 1.2 × retry_period > 0`, so that a holder always stops before another may take over.
    pub fn validate(&self) -> Result<(), InvalidLeaseTimings> {
        if self.lease_duration <= self.renew_deadline {
            return Err(InvalidLeaseTimings(
                "lease_duration must be greater than renew_deadline",
            ));
        }
        if self.renew_deadline.as_secs_f64() <= JITTER_FACTOR * self.retry_period.as_secs_f64() {
            return Err(InvalidLeaseTimings(
                "renew_deadline must be greater than retry_period * 1.2",
            ));
        }
        if self.retry_period.is_zero() {
            return Err(InvalidLeaseTimings("retry_period must be positive"));
        }
        Ok(())
    }
}

/// Why [`LeaseTimings::validate`] refused a set of timings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidLeaseTimings(&'static str);

impl InvalidLeaseTimings {
    /// The broken invariant, e.g. "lease_duration must be greater than renew_deadline".
    pub fn reason(&self) -> &'static str {
        self.0
    }
}

/// Host name (from `$HOSTNAME` or `/etc/hostname`) plus `_` and a random suffix.
fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "kcr".to_string());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

/// Leader election errors.
#[derive(Debug, thiserror::Error)]
pub enum LeaderElectionError {
    /// The configuration breaks a timing invariant.
    #[error("invalid leader election configuration: {reason}")]
    InvalidConfig {
        /// What is wrong.
        reason: String,
    },
    /// Leadership was lost: the lease could not be renewed in time or another candidate holds it.
    #[error(
        "leader election lost: lease {namespace}/{lease} ({identity}): {reason}; stopping all \
         controllers"
    )]
    Lost {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        lease: String,
        /// This candidate's identity.
        identity: String,
        /// Why.
        reason: String,
    },
    /// Releasing the lease got no answer within the renew deadline.
    #[error(
        "releasing lease {namespace}/{lease}: no answer within {bound:?}; it expires by itself"
    )]
    ReleaseTimeout {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        lease: String,
        /// The bound that passed.
        bound: Duration,
    },
    /// An API error while releasing the lease.
    #[error("releasing lease {namespace}/{lease}: {source}")]
    Release {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        lease: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// The parts of a Lease record whose change proves the holder is alive: an observer that sees
/// the same record for longer than its lease duration (on its own monotonic clock) may judge
/// the Lease expired, whatever the timestamps in it say. Leader election judges Leases so, and
/// so can layers that keep Leases of their own (`kcr-shard`'s member Leases).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The holder's identity (`None` when empty or released).
    pub holder: Option<String>,
    renew_time: Option<Timestamp>,
    acquire_time: Option<Timestamp>,
    /// The Lease's duration in seconds, as its holder wrote it.
    pub lease_duration_seconds: Option<i32>,
    transitions: Option<i32>,
}

impl Record {
    /// The record of a Lease's spec (`None`: a Lease without a spec).
    pub fn of(spec: Option<&LeaseSpec>) -> Record {
        let spec = spec.cloned().unwrap_or_default();
        Record {
            holder: spec.holder_identity.filter(|h| !h.is_empty()),
            renew_time: spec.renew_time.map(|t| t.0),
            acquire_time: spec.acquire_time.map(|t| t.0),
            lease_duration_seconds: spec.lease_duration_seconds,
            transitions: spec.lease_transitions,
        }
    }
}

/// What to do with a lease given what this candidate has observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// We hold it: renew.
    Renew,
    /// Free or expired: take it.
    Take,
    /// Held by someone else whose lease is still valid.
    HeldBy(String),
}

/// Decides, client-go style, from the record, when this candidate first observed that exact
/// record, and the local time.
pub(crate) fn decide(
    holder: Option<&str>,
    record_lease_seconds: Option<i32>,
    observed_at: Instant,
    now: Instant,
    me: &str,
    default_lease: Duration,
) -> Decision {
    match holder {
        None | Some("") => Decision::Take,
        Some(h) if h == me => Decision::Renew,
        Some(h) => {
            let lease = record_lease_seconds
                .filter(|s| *s > 0)
                .map(|s| Duration::from_secs(s as u64))
                .unwrap_or(default_lease);
            if now < observed_at + lease {
                Decision::HeldBy(h.to_string())
            } else {
                Decision::Take
            }
        }
    }
}

/// The outcome of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// We hold the lease (acquired or renewed).
    Held,
    /// Another candidate holds a valid lease.
    HeldBy(String),
    /// Lost a race (409 Conflict) or the API failed; try again later.
    Failed(String),
}

/// Runs leader election for one candidate on one Lease.
pub struct LeaderElector {
    api: Api<Lease>,
    namespace: String,
    config: LeaderElectionConfig,
    observed: Mutex<Option<(Record, Instant)>>,
    /// When the attempt that acquired the lease began: the renew deadline counts from there.
    acquired_at: Mutex<Option<Instant>>,
    /// `leader_election_master_status{name}`.
    status: Gauge,
    /// `leader_election_slowpath_total{name}`.
    slowpath: Counter,
    /// The Lease as this candidate last wrote it (created or replaced), for the fast path.
    written: Mutex<Option<Lease>>,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("namespace", &self.namespace)
            .field("config", &self.config)
            .finish()
    }
}

impl LeaderElector {
    /// An elector using `client`.
    pub fn new(client: kube::Client, config: LeaderElectionConfig) -> Self {
        let namespace = config
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string());
        let status = crate::metrics::leader_status(&config.lease_name);
        // Exported (as 0) from now on, without clobbering another elector's value in this
        // process for the same lease.
        status.increment(0.0);
        let slowpath = crate::metrics::leader_slowpath(&config.lease_name);
        slowpath.increment(0);
        LeaderElector {
            api: Api::namespaced(client, &namespace),
            namespace,
            config,
            observed: Mutex::new(None),
            acquired_at: Mutex::new(None),
            status,
            slowpath,
            written: Mutex::new(None),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LeaderElectionConfig {
        &self.config
    }

    /// The Lease's namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The Lease this candidate last wrote, if it still leads by its own observation: the
    /// record it observed names it and is younger than that record's lease duration.
    fn fast_path_lease(&self) -> Option<Lease> {
        let observed = self.observed.lock();
        let (record, observed_at) = observed.as_ref()?;
        let valid = decide(
            record.holder.as_deref(),
            record.lease_duration_seconds,
            *observed_at,
            Instant::now(),
            "",
            self.config.timings.lease_duration,
        ) != Decision::Take;
        if record.holder.as_deref() != Some(self.config.identity.as_str()) || !valid {
            return None;
        }
        let written = self.written.lock().clone()?;
        (Record::of(written.spec.as_ref()) == *record).then_some(written)
    }

    /// Remembers `lease` as written by this candidate (and observed).
    fn wrote(&self, lease: Lease) {
        self.observe(Record::of(lease.spec.as_ref()));
        *self.written.lock() = Some(lease);
    }

    /// One acquire-or-renew attempt: the fast path (one `replace` of the Lease as last written)
    /// while this candidate leads, else (or if that fails) the slow path (`get`, decide,
    /// `create` or `replace`).
    pub async fn try_acquire_or_renew(&self) -> Attempt {
        let me = &self.config.identity;
        let now_wall = MicroTime(Timestamp::now());
        let lease_seconds = self.config.timings.lease_duration.as_secs().max(1) as i32;
        if let Some(mut lease) = self.fast_path_lease() {
            let spec = lease.spec.get_or_insert_with(Default::default);
            spec.renew_time = Some(now_wall.clone());
            spec.lease_duration_seconds = Some(lease_seconds);
            // The resourceVersion of our last write: anyone else's write since makes this 409.
            match self
                .api
                .replace(&self.config.lease_name, &PostParams::default(), &lease)
                .await
            {
                Ok(updated) => {
                    self.wrote(updated);
                    return Attempt::Held;
                }
                Err(e) => {
                    tracing::debug!(lease = %self.config.lease_name, error = %e,
                        "failed to renew the lease on the fast path, falling back to the slow path");
                }
            }
        }
        let current = match self.api.get_opt(&self.config.lease_name).await {
            Ok(c) => c,
            Err(e) => return Attempt::Failed(format!("get lease: {e}")),
        };
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.lease_name.clone()),
                    namespace: Some(self.namespace.clone()),
                    labels: (!self.config.labels.is_empty()).then(|| self.config.labels.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me.clone()),
                    lease_duration_seconds: Some(lease_seconds),
                    acquire_time: Some(now_wall.clone()),
                    renew_time: Some(now_wall),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.wrote(created);
                    Attempt::Held
                }
                Err(e) => Attempt::Failed(format!("create lease: {e}")),
            };
        };

        let record = Record::of(lease.spec.as_ref());
        let observed_at = self.observe(record.clone());
        let decision = decide(
            record.holder.as_deref(),
            record.lease_duration_seconds,
            observed_at,
            Instant::now(),
            me,
            self.config.timings.lease_duration,
        );
        if !matches!(decision, Decision::HeldBy(_)) {
            self.config.label(&mut lease.metadata);
        }
        let spec = lease.spec.get_or_insert_with(Default::default);
        match decision {
            Decision::HeldBy(holder) => return Attempt::HeldBy(holder),
            Decision::Renew => {
                // We hold it, yet had to read it first: client-go's slow path.
                self.slowpath.increment(1);
                spec.renew_time = Some(now_wall);
                spec.lease_duration_seconds = Some(lease_seconds);
            }
            Decision::Take => {
                spec.holder_identity = Some(me.clone());
                spec.acquire_time = Some(now_wall.clone());
                spec.renew_time = Some(now_wall);
                spec.lease_duration_seconds = Some(lease_seconds);
                spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            }
        }
        // `lease` still carries the resourceVersion we read: a concurrent writer makes this 409.
        match self
            .api
            .replace(&self.config.lease_name, &PostParams::default(), &lease)
            .await
        {
            Ok(updated) => {
                self.wrote(updated);
                Attempt::Held
            }
            Err(e) => Attempt::Failed(format!("update lease: {e}")),
        }
    }

    /// Records `record` as observed; returns when this exact record was first observed.
    fn observe(&self, record: Record) -> Instant {
        let mut observed = self.observed.lock();
        match &*observed {
            Some((r, at)) if *r == record => *at,
            _ => {
                let now = Instant::now();
                *observed = Some((record, now));
                now
            }
        }
    }

    /// The longest one acquire or renew attempt may take: half the renew deadline, at least a
    /// retry period and [`MIN_ATTEMPT_TIMEOUT`] (5 s with the defaults).
    pub fn attempt_timeout(&self) -> Duration {
        (self.config.timings.renew_deadline / 2)
            .max(self.config.timings.retry_period)
            .max(MIN_ATTEMPT_TIMEOUT)
    }

    fn jittered_retry(&self) -> Duration {
        let factor = 1.0 + rand::rng().random_range(0.0..JITTER_FACTOR);
        self.config.timings.retry_period.mul_f64(factor)
    }

    /// Tries until this candidate holds the lease (`true`) or `cancel` fires (`false`).
    pub async fn acquire(&self, cancel: &CancellationToken) -> bool {
        tracing::info!(lease = %self.config.lease_name, namespace = %self.namespace,
            identity = %self.config.identity, "attempting to acquire leader lease");
        loop {
            let started = Instant::now();
            // One round of client-go's cadence; an attempt that has not finished within its
            // bound waits on a dead connection, and the next one starts at once (on a new
            // connection) instead of waiting behind it.
            let round = self.jittered_retry();
            let bound = round.max(self.attempt_timeout());
            let attempt = tokio::select! {
                _ = cancel.cancelled() => return false,
                a = tokio::time::timeout(bound, self.try_acquire_or_renew()) => a,
            };
            let Ok(attempt) = attempt else {
                tracing::warn!(lease = %self.config.lease_name, namespace = %self.namespace,
                    bound = ?bound, "an attempt to acquire the lease got no answer within its bound; trying again");
                continue;
            };
            match attempt {
                Attempt::Held => {
                    *self.acquired_at.lock() = Some(started);
                    tracing::info!(lease = %self.config.lease_name, identity = %self.config.identity,
                        "successfully acquired lease");
                    self.status.set(1.0);
                    return true;
                }
                Attempt::HeldBy(holder) => {
                    tracing::debug!(%holder, "lease is held by another candidate");
                }
                Attempt::Failed(reason) => {
                    // As client-go, at error level: an API failure (a 403 when RBAC lacks a
                    // verb on leases) would otherwise keep a replica waiting without a word.
                    tracing::warn!(lease = %self.config.lease_name, namespace = %self.namespace,
                        %reason, "failed to acquire lease");
                }
            }
            tokio::select! {
                _ = cancel.cancelled() => return false,
                _ = tokio::time::sleep_until(started + round) => {}
            }
        }
    }

    /// Keeps renewing every `retry_period` until `cancel` fires (`Ok`) or leadership is lost
    /// (`Err`): no successful renewal within `renew_deadline` of the previous one, or another
    /// holder in the lease. Either way this candidate no longer leads when it returns
    /// (`leader_election_master_status` drops to 0).
    pub async fn renew_until_lost(
        &self,
        cancel: &CancellationToken,
    ) -> Result<(), LeaderElectionError> {
        let res = self.renew_loop(cancel).await;
        self.status.set(0.0);
        res
    }

    /// The renew deadline counts from the *start* of the last successful attempt, not from its
    /// answer: the write reached the API server between the two, and the other candidates count
    /// their `lease_duration` from when they observe it, so the margin `lease_duration -
    /// renew_deadline` stays whole however slowly the answer came back.
    async fn renew_loop(&self, cancel: &CancellationToken) -> Result<(), LeaderElectionError> {
        let mut last_renew = self.acquired_at.lock().take().unwrap_or_else(Instant::now);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return Ok(()),
                _ = tokio::time::sleep(self.config.timings.retry_period) => {}
            }
            let deadline = last_renew + self.config.timings.renew_deadline;
            // What the last attempt that got an answer said (an API error says why, so it
            // outranks an attempt cut short at the deadline).
            let mut last_failure: Option<String> = None;
            loop {
                let started = Instant::now();
                // An attempt on a dead connection would otherwise hold the whole deadline: give
                // it half of it, then try again on a new connection.
                let bound = deadline.min(started + self.attempt_timeout());
                let attempt = tokio::select! {
                    _ = cancel.cancelled() => return Ok(()),
                    a = tokio::time::timeout_at(bound, self.try_acquire_or_renew()) => a,
                };
                let timed_out = attempt.is_err();
                match attempt {
                    Ok(Attempt::Held) => {
                        last_renew = started;
                        break;
                    }
                    Ok(Attempt::HeldBy(holder)) => {
                        return Err(self.lost(format!("the lease is now held by {holder}")));
                    }
                    Ok(Attempt::Failed(reason)) => last_failure = Some(reason),
                    Err(_) => {
                        if last_failure.is_none() {
                            last_failure = Some(format!("no answer within {:?}", bound - started));
                        }
                        tracing::warn!(lease = %self.config.lease_name, namespace = %self.namespace,
                            bound = ?(bound - started), "an attempt to renew the lease got no answer within its bound");
                    }
                }
                let now = Instant::now();
                if now >= deadline {
                    let last_failure = last_failure.unwrap_or_else(|| "no attempt finished".into());
                    return Err(self.lost(format!(
                        "failed to renew within the renew deadline of {:?}; last failure: {last_failure}",
                        self.config.timings.renew_deadline
                    )));
                }
                if timed_out {
                    // The attempt used its time already.
                    continue;
                }
                let wait = self.config.timings.retry_period.min(deadline - now);
                tokio::select! {
                    _ = cancel.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(wait) => {}
                }
            }
        }
    }

    fn lost(&self, reason: String) -> LeaderElectionError {
        tracing::error!(lease = %self.config.lease_name, identity = %self.config.identity, %reason,
            "leader election lost");
        LeaderElectionError::Lost {
            namespace: self.namespace.clone(),
            lease: self.config.lease_name.clone(),
            identity: self.config.identity.clone(),
            reason,
        }
    }

    /// Gives the lease up if this candidate holds it (clears the holder, as client-go does), so
    /// that a successor can take it at once. Does nothing if someone else holds it. Gives up
    /// after the renew deadline ([`LeaderElectionError::ReleaseTimeout`]): the Lease then
    /// expires by itself.
    pub async fn release(&self) -> Result<(), LeaderElectionError> {
        let bound = self.config.timings.renew_deadline;
        tokio::time::timeout(bound, self.release_unbounded())
            .await
            .unwrap_or_else(|_| {
                Err(LeaderElectionError::ReleaseTimeout {
                    namespace: self.namespace.clone(),
                    lease: self.config.lease_name.clone(),
                    bound,
                })
            })
    }

    async fn release_unbounded(&self) -> Result<(), LeaderElectionError> {
        let err = |source| LeaderElectionError::Release {
            namespace: self.namespace.clone(),
            lease: self.config.lease_name.clone(),
            source,
        };
        let Some(mut lease) = self
            .api
            .get_opt(&self.config.lease_name)
            .await
            .map_err(err)?
        else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        let now = MicroTime(Timestamp::now());
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.acquire_time = Some(now.clone());
        spec.renew_time = Some(now);
        self.api
            .replace(&self.config.lease_name, &PostParams::default(), &lease)
            .await
            .map_err(err)?;
        tracing::info!(lease = %self.config.lease_name, identity = %self.config.identity,
            "released leader lease");
        Ok(())
    }
}

#[cfg(test)]
mod tests;
