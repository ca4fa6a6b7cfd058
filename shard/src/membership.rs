//! Membership: each replica holds a `coordination.k8s.io/v1` Lease of its own, named
//! `kcr-shard.<group>.<identity>` and renewed as in leader election ([`kcr_controller::leader`], with its
//! timings and renew deadline). The members of a group are the holders of the unexpired Leases
//! of that group.
//!
//! Expiry is judged as leader election judges it: a Lease is alive while its record (holder,
//! renew and acquire times, duration) has changed within its `leaseDurationSeconds`, **as
//! observed on the observer's own monotonic clock** ([`MemberObserver`]). A Lease seen for the
//! first time counts as freshly renewed, so an observer that just started (a new sharder) waits a
//! full lease duration before it declares anyone dead. A released Lease (no holder) is dead at
//! once: its replica released it only after its controller stopped.
//!
//! A member that cannot renew within its renew deadline stops reconciling at once (the gate
//! drops in-flight reconciles, see [`gate`](super::gate)) and its manager stops; since
//! `renew_deadline < lease_duration`, it has stopped before any observer may declare it dead.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use tokio::time::Instant;

use kcr_controller::leader::Record;

/// Prefix of member Lease names: `kcr-shard.<group>.<identity>`.
pub const MEMBER_LEASE_PREFIX: &str = "kcr-shard.";
/// Prefix of the sharder's election Lease: `kcr-sharder.<group>`.
pub const SHARDER_LEASE_PREFIX: &str = "kcr-sharder.";

/// The name of the member Lease of `identity` in `group`. Group and identity are DNS labels
/// (no dots), so the name is unambiguous.
pub fn member_lease_name(group: &str, identity: &str) -> String {
    format!("{MEMBER_LEASE_PREFIX}{group}.{identity}")
}

/// The identity a member Lease of `group` belongs to, if `lease_name` is one.
pub fn member_of_lease<'a>(group: &str, lease_name: &'a str) -> Option<&'a str> {
    let rest = lease_name.strip_prefix(MEMBER_LEASE_PREFIX)?;
    let identity = rest.strip_prefix(group)?.strip_prefix('.')?;
    (!identity.is_empty() && !identity.contains('.')).then_some(identity)
}

/// The name of the sharder's election Lease of `group`.
pub fn sharder_lease_name(group: &str) -> String {
    format!("{SHARDER_LEASE_PREFIX}{group}")
}

/// The live members of a group, as one observer sees them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Members {
    /// Identities of the members whose Lease is alive, sorted.
    pub alive: BTreeSet<String>,
    /// Lease names (with their resourceVersion) that have been dead for at least another lease
    /// duration: safe to delete.
    pub stale: Vec<(String, String)>,
}

impl Members {
    /// Whether `identity` is a live member.
    pub fn is_alive(&self, identity: &str) -> bool {
        self.alive.contains(identity)
    }
}

/// Turns successive listings of Leases into [`Members`], judging expiry on the local monotonic
/// clock (see the [module docs](self)).
#[derive(Debug)]
pub struct MemberObserver {
    group: String,
    default_lease: Duration,
    /// Lease name → (record, when this exact record was first observed).
    observed: HashMap<String, (Record, Instant)>,
}

impl MemberObserver {
    /// An observer of `group`'s Leases; `default_lease` applies to a Lease that states no
    /// duration.
    pub fn new(group: impl Into<String>, default_lease: Duration) -> Self {
        MemberObserver {
            group: group.into(),
            default_lease,
            observed: HashMap::new(),
        }
    }

    /// The members given the Leases listed `now` (Leases of other groups are ignored).
    pub fn observe(&mut self, leases: &[Lease], now: Instant) -> Members {
        let mut members = Members::default();
        let mut seen = HashMap::with_capacity(self.observed.len());
        for lease in leases {
            let Some(name) = lease.metadata.name.as_deref() else {
                continue;
            };
            let Some(identity) = member_of_lease(&self.group, name) else {
                continue;
            };
            let record = Record::of(lease.spec.as_ref());
            let observed_at = match self.observed.remove(name) {
                Some((r, at)) if r == record => at,
                _ => now,
            };
            let lease_len = record
                .lease_duration_seconds
                .filter(|s| *s > 0)
                .map(|s| Duration::from_secs(s as u64))
                .unwrap_or(self.default_lease);
            let alive = record.holder.as_deref() == Some(identity) && now < observed_at + lease_len;
            if alive {
                members.alive.insert(identity.to_string());
            } else if now >= observed_at + lease_len + lease_len
                && let Some(rv) = lease.metadata.resource_version.clone()
            {
                members.stale.push((name.to_string(), rv));
            }
            seen.insert(name.to_string(), (record, observed_at));
        }
        self.observed = seen;
        members
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn lease(name: &str, holder: Option<&str>, renew_secs: i64) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                resource_version: Some("7".into()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(Into::into),
                lease_duration_seconds: Some(2),
                renew_time: Some(MicroTime(Timestamp::from_second(renew_secs).unwrap())),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn lease_names_are_unambiguous() {
        assert_eq!(member_lease_name("web", "r-1"), "kcr-shard.web.r-1");
        assert_eq!(member_of_lease("web", "kcr-shard.web.r-1"), Some("r-1"));
        assert_eq!(member_of_lease("we", "kcr-shard.web.r-1"), None);
        assert_eq!(member_of_lease("web", "kcr-shard.web-x.r-1"), None);
        assert_eq!(member_of_lease("web", "kcr-shard.web."), None);
        assert_eq!(member_of_lease("web", "kcr-sharder.web"), None);
        assert_eq!(sharder_lease_name("web"), "kcr-sharder.web");
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_dies_when_unchanged_for_its_duration_on_the_local_clock() {
        let mut obs = MemberObserver::new("g", Duration::from_secs(15));
        let t0 = Instant::now();
        let a = lease("kcr-shard.g.a", Some("a"), 100);
        let b = lease("kcr-shard.g.b", Some("b"), 100);
        let other = lease("kcr-shard.h.c", Some("c"), 100);
        let m = obs.observe(&[a.clone(), b.clone(), other.clone()], t0);
        assert_eq!(m.alive.iter().collect::<Vec<_>>(), ["a", "b"]);
        // b renews, a does not: after 2 s (the leases' duration) only b is alive, whatever the
        // timestamps in the records say.
        let b2 = lease("kcr-shard.g.b", Some("b"), 101);
        let m = obs.observe(&[a.clone(), b2.clone()], t0 + Duration::from_millis(1999));
        assert!(m.is_alive("a") && m.is_alive("b"));
        let m = obs.observe(&[a.clone(), b2.clone()], t0 + Duration::from_secs(2));
        assert!(!m.is_alive("a"));
        assert!(m.is_alive("b"));
        assert!(m.stale.is_empty(), "dead, but not yet for two durations");
        let m = obs.observe(&[a.clone(), b2.clone()], t0 + Duration::from_secs(4));
        assert_eq!(
            m.stale,
            vec![("kcr-shard.g.a".to_string(), "7".to_string())]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn released_and_foreign_holders_are_not_members() {
        let mut obs = MemberObserver::new("g", Duration::from_secs(15));
        let now = Instant::now();
        let released = lease("kcr-shard.g.a", None, 100);
        let stolen = lease("kcr-shard.g.b", Some("someone-else"), 100);
        let m = obs.observe(&[released, stolen], now);
        assert!(m.alive.is_empty());
    }
}
