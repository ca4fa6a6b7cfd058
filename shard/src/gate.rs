//! The replica side: which requests this replica may reconcile, and the drain acknowledgement.
//!
//! A replica reconciles a request only while its cache (label-selected on its own shard) holds
//! the object with this replica's shard label and no drain mark for it, the key is not being
//! drained locally, and its member Lease is not lost. The check and the in-flight count are
//! kept under one lock with the local drain state, so that a drain is acknowledged only when no
//! reconcile of the key runs and none can start any more:
//!
//! 1. the sharder sets `drain.shard.kcr.io/<group>: <this replica>` on the object;
//! 2. this replica's drain watcher sees it in its cache, marks the key draining (the gate refuses
//!    new reconciles of it from then on) and waits until the reconcile in flight, if any, ends;
//! 3. it acknowledges by removing both the shard label and the drain mark, with the
//!    resourceVersion of the drained object as a precondition (a concurrent change, such as the
//!    sharder cancelling the drain, makes it re-read and decide again);
//! 4. the object leaves this replica's selection; the sharder sees it unassigned and writes the
//!    new owner.
//!
//! A request refused by the gate is dropped (`Action::done()`): the object is someone else's, or
//! it is gone (a sharded controller learns of deletions through finalizers, see the
//! [module docs](super#limits)). When the member Lease is lost, reconciles in flight are
//! dropped at once (their futures are cancelled), before another replica may take the objects.
//!
//! Owned objects (children) are not reconciled themselves; their drain is acknowledged at once.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use kcr_controller::Key;
use kcr_controller::builder::{GatePass, MetaAccess, ReconcileGate};
use kcr_handler::Request;
use kube::api::{Patch, PatchParams};
use kube::core::{DynamicObject, ObjectMeta};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::target::Target;

/// The shard label and drain mark of an object, as this replica's cache holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ShardMeta {
    /// The value of `shard.kcr.io/<group>`.
    pub owner: Option<String>,
    /// The value of `drain.shard.kcr.io/<group>`.
    pub drain: Option<String>,
}

impl ShardMeta {
    pub(crate) fn of(meta: &ObjectMeta, label_key: &str, drain_key: &str) -> ShardMeta {
        ShardMeta {
            owner: meta
                .labels
                .as_ref()
                .and_then(|l| l.get(label_key))
                .filter(|v| !v.is_empty())
                .cloned(),
            drain: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(drain_key))
                .filter(|v| !v.is_empty())
                .cloned(),
        }
    }
}

/// Finds the cached shard metadata of a request's object.
pub(crate) type Lookup<Q> = Arc<dyn Fn(&Q) -> Option<ShardMeta> + Send + Sync>;

#[derive(Debug)]
struct State<Q> {
    in_flight: HashMap<Q, usize>,
    draining: HashSet<Q>,
}

/// This replica's local ownership state for one sharded controller.
#[derive(Debug)]
pub(crate) struct Ownership<Q> {
    identity: String,
    state: Mutex<State<Q>>,
    idle: Notify,
    /// Cancelled when the member Lease is lost.
    pub(crate) lost: CancellationToken,
}

/// A reconcile in flight; counted until dropped.
pub(crate) struct InFlight<Q: Key> {
    ownership: Arc<Ownership<Q>>,
    key: Q,
}

impl<Q: Key> Drop for InFlight<Q> {
    fn drop(&mut self) {
        let mut state = self.ownership.state.lock();
        if let Some(n) = state.in_flight.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                state.in_flight.remove(&self.key);
            }
        }
        drop(state);
        self.ownership.idle.notify_waiters();
    }
}

impl<Q: Key> Ownership<Q> {
    pub(crate) fn new(identity: impl Into<String>, lost: CancellationToken) -> Self {
        Ownership {
            identity: identity.into(),
            state: Mutex::new(State {
                in_flight: HashMap::new(),
                draining: HashSet::new(),
            }),
            idle: Notify::new(),
            lost,
        }
    }

    /// Admits a reconcile of `key` if this replica owns it (see the [module docs](self)).
    pub(crate) fn enter(
        self: &Arc<Self>,
        key: &Q,
        lookup: impl FnOnce() -> Option<ShardMeta>,
    ) -> Option<InFlight<Q>> {
        if self.lost.is_cancelled() {
            return None;
        }
        let mut state = self.state.lock();
        if state.draining.contains(key) {
            return None;
        }
        let meta = lookup()?;
        if meta.owner.as_deref() != Some(self.identity.as_str())
            || meta.drain.as_deref() == Some(self.identity.as_str())
        {
            return None;
        }
        *state.in_flight.entry(key.clone()).or_insert(0) += 1;
        Some(InFlight {
            ownership: self.clone(),
            key: key.clone(),
        })
    }

    /// Marks `key` draining: no reconcile of it is admitted from now on.
    pub(crate) fn begin_drain(&self, key: &Q) {
        self.state.lock().draining.insert(key.clone());
    }

    /// Clears the local drain of `key` (the object left this replica, or its drain was
    /// cancelled).
    pub(crate) fn end_drain(&self, key: &Q) {
        self.state.lock().draining.remove(key);
    }

    /// Whether `key` is draining locally.
    pub(crate) fn is_draining(&self, key: &Q) -> bool {
        self.state.lock().draining.contains(key)
    }

    /// Number of reconciles of `key` in flight.
    pub(crate) fn in_flight(&self, key: &Q) -> usize {
        self.state.lock().in_flight.get(key).copied().unwrap_or(0)
    }

    /// Waits until no reconcile of `key` is in flight.
    pub(crate) async fn wait_idle(&self, key: &Q) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.in_flight(key) == 0 {
                return;
            }
            notified.await;
        }
    }

    /// This replica's identity.
    pub(crate) fn identity(&self) -> &str {
        &self.identity
    }
}

/// The ownership check in front of a sharded controller's reconciler (see the
/// [module docs](self)): a request runs only while this replica owns its object; when the
/// member Lease is lost, reconciles in flight are abandoned.
pub(crate) struct ShardGate<Q> {
    pub(crate) ownership: Arc<Ownership<Q>>,
    pub(crate) lookup: Lookup<Q>,
}

impl<Q: Key> ReconcileGate<Q> for ShardGate<Q> {
    fn enter(&self, key: &Q) -> Option<GatePass> {
        let in_flight = self.ownership.enter(key, || (self.lookup)(key));
        if in_flight.is_none() {
            tracing::trace!(request = %key, "not this replica's shard: skipped");
        }
        in_flight.map(GatePass::new)
    }

    fn abandon(&self) -> Option<CancellationToken> {
        Some(self.ownership.lost.clone())
    }
}

/// A drain watcher, started with the controller; runs until its token is cancelled.
pub(crate) type DrainTask = Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, ()> + Send>;

/// The keys (label and annotation) of one shard group.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    pub label: String,
    pub drain: String,
}

fn request_of(meta: &ObjectMeta) -> Request {
    Request {
        name: meta.name.clone().unwrap_or_default(),
        namespace: meta.namespace.clone(),
    }
}

/// Removes the shard label and drain mark of `request`'s object, precondition `rv`; on a lost
/// race re-reads and returns the object's current metadata (`Ok(None)` once acknowledged or
/// gone).
async fn acknowledge(
    target: &Target,
    client: &kube::Client,
    keys: &Keys,
    request: &Request,
    rv: &str,
) -> Result<Option<(String, ShardMeta)>, kube::Error> {
    let Ok(api) = target.api::<DynamicObject>(client.clone(), request.namespace.as_deref()) else {
        return Ok(None);
    };
    let patch = serde_json::json!({"metadata": {
        "resourceVersion": rv,
        "labels": {keys.label.as_str(): null},
        "annotations": {keys.drain.as_str(): null},
    }});
    match api
        .patch_metadata(
            &request.name,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(None),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            match api.get_metadata_opt(&request.name).await? {
                None => Ok(None),
                Some(current) => {
                    let rv = current
                        .metadata
                        .resource_version
                        .clone()
                        .unwrap_or_default();
                    Ok(Some((
                        rv,
                        ShardMeta::of(&current.metadata, &keys.label, &keys.drain),
                    )))
                }
            }
        }
        Err(e) => Err(e),
    }
}

/// What acknowledging a drain needs.
#[derive(Clone)]
struct Acker {
    target: Target,
    client: kube::Client,
    keys: Keys,
    ownership: Arc<Ownership<Request>>,
    /// Wait for in-flight reconciles (the primary kind) or not (children).
    gated: bool,
    /// Cap of the retry backoff.
    retry: Duration,
    cancel: CancellationToken,
}

/// Acknowledges the drain of `request` once no reconcile of it runs (gated), or at once
/// (children).
async fn ack_when_idle(acker: Acker, request: Request, mut rv: String) {
    let Acker {
        target,
        client,
        keys,
        ownership,
        gated,
        retry,
        cancel,
    } = acker;
    let me = ownership.identity().to_string();
    let mut backoff = Duration::from_millis(50);
    loop {
        if cancel.is_cancelled() || (gated && !ownership.is_draining(&request)) {
            return;
        }
        if gated {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = ownership.wait_idle(&request) => {}
            }
        }
        match acknowledge(&target, &client, &keys, &request, &rv).await {
            Ok(None) => {
                tracing::debug!(%request, "drain acknowledged");
                return;
            }
            Ok(Some((current_rv, meta))) => {
                if meta.owner.as_deref() == Some(me.as_str())
                    && meta.drain.as_deref() == Some(me.as_str())
                {
                    rv = current_rv;
                    continue;
                }
                return;
            }
            Err(e) => {
                tracing::warn!(%request, error = %e, "acknowledging a drain failed; retrying");
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(retry);
            }
        }
    }
}

/// What a drain watcher follows: the kind, and its label-selected watch's metadata.
pub(crate) struct DrainSource {
    pub(crate) target: Target,
    pub(crate) meta: Arc<dyn MetaAccess>,
}

/// A drain watcher for the objects of one kind in this replica's shard (`source.meta` is the
/// label-selected watch). With `gated`, the kind is the primary kind: acknowledgement waits for
/// in-flight reconciles; otherwise (children) it is immediate.
pub(crate) fn drain_watcher(
    source: DrainSource,
    client: kube::Client,
    keys: Keys,
    ownership: Arc<Ownership<Request>>,
    gated: bool,
    retry: Duration,
) -> DrainTask {
    Box::new(move |cancel: CancellationToken| {
        Box::pin(async move {
            let DrainSource { target, meta } = source;
            let kind_name = target.kind().to_string();
            let mut events = match meta.events() {
                Ok(events) => events,
                Err(e) => {
                    tracing::error!(kind = %kind_name, error = %e, "the drain watcher could not start");
                    return;
                }
            };
            let me = ownership.identity().to_string();
            let acker = Acker {
                target,
                client,
                keys: keys.clone(),
                ownership: ownership.clone(),
                gated,
                retry,
                cancel: cancel.clone(),
            };
            let mut acks = tokio::task::JoinSet::new();
            loop {
                let event = tokio::select! {
                    _ = cancel.cancelled() => break,
                    Some(_) = acks.join_next(), if !acks.is_empty() => continue,
                    e = events.next() => match e {
                        Some(e) => e,
                        None => break,
                    },
                };
                let event = match event {
                    Ok(e) => e,
                    Err(e) => {
                        tracing::warn!(kind = %kind_name, error = %e, "drain watcher: source error");
                        continue;
                    }
                };
                let deleted = event.deleted;
                let meta = &event.meta;
                let request = request_of(meta);
                if deleted {
                    ownership.end_drain(&request);
                    continue;
                }
                let shard = ShardMeta::of(meta, &keys.label, &keys.drain);
                if shard.owner.as_deref() != Some(me.as_str()) {
                    continue;
                }
                if shard.drain.as_deref() == Some(me.as_str()) {
                    let already = gated && ownership.is_draining(&request);
                    ownership.begin_drain(&request);
                    if already {
                        continue;
                    }
                    let rv = meta.resource_version.clone().unwrap_or_default();
                    acks.spawn(ack_when_idle(acker.clone(), request, rv));
                } else {
                    ownership.end_drain(&request);
                }
            }
            acks.abort_all();
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(owner: Option<&str>, drain: Option<&str>) -> Option<ShardMeta> {
        Some(ShardMeta {
            owner: owner.map(Into::into),
            drain: drain.map(Into::into),
        })
    }

    #[test]
    fn admits_only_owned_undrained_keys() {
        let o = Arc::new(Ownership::<String>::new("me", CancellationToken::new()));
        let k = "ns/a".to_string();
        assert!(o.enter(&k, || meta(Some("me"), None)).is_some());
        assert!(o.enter(&k, || meta(Some("other"), None)).is_none());
        assert!(o.enter(&k, || meta(None, None)).is_none());
        assert!(o.enter(&k, || None).is_none(), "not cached");
        assert!(o.enter(&k, || meta(Some("me"), Some("me"))).is_none());
        // A stale drain mark naming someone else does not stop the owner.
        assert!(o.enter(&k, || meta(Some("me"), Some("x"))).is_some());
        o.begin_drain(&k);
        assert!(o.enter(&k, || meta(Some("me"), None)).is_none(), "draining");
        o.end_drain(&k);
        assert!(o.enter(&k, || meta(Some("me"), None)).is_some());
        o.lost.cancel();
        assert!(o.enter(&k, || meta(Some("me"), None)).is_none(), "lost");
    }

    #[tokio::test(start_paused = true)]
    async fn a_drain_waits_for_the_reconcile_in_flight() {
        let o = Arc::new(Ownership::<String>::new("me", CancellationToken::new()));
        let k = "ns/a".to_string();
        let guard = o.enter(&k, || meta(Some("me"), None)).unwrap();
        assert_eq!(o.in_flight(&k), 1);
        o.begin_drain(&k);
        let waiter = tokio::spawn({
            let (o, k) = (o.clone(), k.clone());
            async move { o.wait_idle(&k).await }
        });
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!waiter.is_finished(), "acknowledged while a reconcile runs");
        drop(guard);
        tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("idle after the reconcile ended")
            .unwrap();
        assert_eq!(o.in_flight(&k), 0);
    }
}
