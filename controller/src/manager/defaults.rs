//! [`ControllerDefaults`]: controller options a [`Manager`](crate::Manager) gives every
//! controller built through it, as controller-runtime's `config.Controller` in the manager's
//! options. A controller's own setting always wins: an option set on its
//! [`Builder`](crate::Builder) (or all of them, with [`Builder::options`](crate::Builder::options))
//! is not overridden. Controllers made by hand and added with
//! [`Manager::add_controller`](crate::Manager::add_controller) keep their options as they are.
//!
//! ```
//! use std::time::Duration;
//! use kcr_controller::{ControllerDefaults, ManagerOptions};
//! let options = ManagerOptions::default().controller_defaults(
//!     ControllerDefaults::default()
//!         .max_concurrent_reconciles(2)
//!         // Deployments get 8 workers, whatever the default says.
//!         .group_kind_concurrency("Deployment.apps", 8)
//!         .cache_sync_timeout(Duration::from_secs(300))
//!         .recover_panic(true)
//!         .reconcile_timeout(Duration::from_secs(60)),
//! );
//! # let _ = options;
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use crate::controller::ControllerOptions;

/// Manager-wide controller defaults; see the [module docs](self). Every field `None` (or
/// empty) leaves the controller's own default in place.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ControllerDefaults {
    /// Workers per controller, unless [`group_kind_concurrency`](Self::group_kind_concurrency)
    /// names its primary kind.
    pub max_concurrent_reconciles: Option<usize>,
    /// Workers of the controllers of a primary kind, by `Kind.group` (`Deployment.apps`;
    /// `ConfigMap` for the core group), as controller-runtime's `GroupKindConcurrency`.
    pub group_kind_concurrency: BTreeMap<String, usize>,
    /// How long start-up waits for a controller's watches to sync.
    pub cache_sync_timeout: Option<Duration>,
    /// Whether panics in reconciles are recovered.
    pub recover_panic: Option<bool>,
    /// The per-reconcile timeout.
    pub reconcile_timeout: Option<Duration>,
    /// Whether controllers run only on the leader.
    pub needs_leader_election: Option<bool>,
    /// Whether controllers warm up before leadership ([`ControllerOptions::warmup`]).
    pub warmup: Option<bool>,
}

impl ControllerDefaults {
    /// Sets the default number of workers.
    #[must_use]
    pub fn max_concurrent_reconciles(mut self, n: usize) -> Self {
        self.max_concurrent_reconciles = Some(n);
        self
    }

    /// Sets the number of workers of controllers whose primary kind is `group_kind`
    /// (`Kind.group`, or `Kind` for the core group).
    #[must_use]
    pub fn group_kind_concurrency(mut self, group_kind: impl Into<String>, n: usize) -> Self {
        self.group_kind_concurrency.insert(group_kind.into(), n);
        self
    }

    /// Sets the default cache-sync timeout.
    #[must_use]
    pub fn cache_sync_timeout(mut self, timeout: Duration) -> Self {
        self.cache_sync_timeout = Some(timeout);
        self
    }

    /// Sets whether panics are recovered by default.
    #[must_use]
    pub fn recover_panic(mut self, recover: bool) -> Self {
        self.recover_panic = Some(recover);
        self
    }

    /// Sets the default per-reconcile timeout.
    #[must_use]
    pub fn reconcile_timeout(mut self, timeout: Duration) -> Self {
        self.reconcile_timeout = Some(timeout);
        self
    }

    /// Sets whether controllers need leadership by default.
    #[must_use]
    pub fn needs_leader_election(mut self, needs: bool) -> Self {
        self.needs_leader_election = Some(needs);
        self
    }

    /// Sets whether controllers warm up before leadership by default.
    #[must_use]
    pub fn warmup(mut self, warmup: bool) -> Self {
        self.warmup = Some(warmup);
        self
    }

    /// Applies these defaults to `options` of a controller of the primary kind `group_kind`,
    /// skipping the options `is_set` says the controller set itself.
    pub(crate) fn apply(
        &self,
        options: &mut ControllerOptions,
        group_kind: Option<&str>,
        is_set: impl Fn(DefaultedOption) -> bool,
    ) {
        use DefaultedOption as F;
        if !is_set(F::MaxConcurrentReconciles) {
            let by_kind = group_kind.and_then(|gk| self.group_kind_concurrency.get(gk).copied());
            if let Some(n) = by_kind.or(self.max_concurrent_reconciles) {
                options.max_concurrent_reconciles = n;
            }
        }
        if !is_set(F::ReconcileTimeout)
            && let Some(t) = self.reconcile_timeout
        {
            options.reconcile_timeout = Some(t);
        }
        if !is_set(F::RecoverPanic)
            && let Some(r) = self.recover_panic
        {
            options.recover_panic = r;
        }
        if !is_set(F::CacheSyncTimeout)
            && let Some(t) = self.cache_sync_timeout
        {
            options.cache_sync_timeout = t;
        }
        if !is_set(F::NeedsLeaderElection)
            && let Some(n) = self.needs_leader_election
        {
            options.needs_leader_election = n;
        }
        if !is_set(F::Warmup)
            && let Some(w) = self.warmup
        {
            options.warmup = w;
        }
    }
}

/// An option [`ControllerDefaults`] can give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DefaultedOption {
    MaxConcurrentReconciles,
    ReconcileTimeout,
    RecoverPanic,
    CacheSyncTimeout,
    NeedsLeaderElection,
    Warmup,
}

/// `Kind.group`, or `Kind` for the core group: the key of
/// [`ControllerDefaults::group_kind_concurrency`].
pub(crate) fn group_kind(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}.{group}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_what_the_controller_did_not_set() {
        let defaults = ControllerDefaults::default()
            .max_concurrent_reconciles(3)
            .group_kind_concurrency("Deployment.apps", 8)
            .group_kind_concurrency("ConfigMap", 5)
            .reconcile_timeout(Duration::from_secs(7))
            .recover_panic(false)
            .cache_sync_timeout(Duration::from_secs(9))
            .needs_leader_election(false)
            .warmup(true);
        let mut o = ControllerOptions::default();
        defaults.apply(&mut o, Some("Deployment.apps"), |_| false);
        assert_eq!(o.max_concurrent_reconciles, 8, "by group-kind first");
        assert_eq!(o.reconcile_timeout, Some(Duration::from_secs(7)));
        assert!(!o.recover_panic);
        assert_eq!(o.cache_sync_timeout, Duration::from_secs(9));
        assert!(!o.needs_leader_election);
        assert!(o.warmup);

        let mut o = ControllerOptions::default();
        defaults.apply(&mut o, Some(&group_kind("", "ConfigMap")), |_| false);
        assert_eq!(o.max_concurrent_reconciles, 5, "core group: the bare kind");
        let mut o = ControllerOptions::default();
        defaults.apply(&mut o, Some("Secret"), |_| false);
        assert_eq!(o.max_concurrent_reconciles, 3, "other kinds: the default");
        let mut o = ControllerOptions::default();
        defaults.apply(&mut o, None, |_| false);
        assert_eq!(o.max_concurrent_reconciles, 3, "no primary kind");

        // What the controller set wins.
        let mut o = ControllerOptions {
            max_concurrent_reconciles: 2,
            recover_panic: true,
            ..ControllerOptions::default()
        };
        defaults.apply(&mut o, Some("Deployment.apps"), |f| {
            matches!(
                f,
                DefaultedOption::MaxConcurrentReconciles | DefaultedOption::RecoverPanic
            )
        });
        assert_eq!(o.max_concurrent_reconciles, 2);
        assert!(o.recover_panic);
        assert_eq!(o.reconcile_timeout, Some(Duration::from_secs(7)));

        // Empty defaults change nothing.
        let mut o = ControllerOptions::default();
        ControllerDefaults::default().apply(&mut o, Some("Deployment.apps"), |_| false);
        assert_eq!(o.max_concurrent_reconciles, 1);
        assert!(o.needs_leader_election && o.recover_panic && !o.warmup);
        assert_eq!(o.reconcile_timeout, None);
    }

    #[test]
    fn group_kinds() {
        assert_eq!(group_kind("apps", "Deployment"), "Deployment.apps");
        assert_eq!(group_kind("", "Pod"), "Pod");
    }
}
