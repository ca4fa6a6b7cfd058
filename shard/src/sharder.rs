//! The sharder: one replica, elected on the Lease `kcr-sharder.<group>`, writes each object's
//! shard label.
//!
//! While it leads, it polls the member Leases every `retry_period` ([`MemberObserver`]),
//! watches the metadata of the sharded controller's objects (its primary kind and its owned
//! kinds, with the controller's own namespace and selectors) and, on every change and every
//! `retry_period`, compares each object's label with the ring's choice ([`plan`]):
//!
//! | object | write |
//! |---|---|
//! | no shard label | label := ring owner (and no drain mark) |
//! | labelled with the ring owner, drain mark set | remove the drain mark (the move is cancelled) |
//! | labelled with a live member that is not the ring owner | drain mark := that member (then wait for its acknowledgement) |
//! | labelled with a member that is not alive | label := ring owner (a dead owner cannot acknowledge) |
//!
//! Every write is a metadata merge patch with the resourceVersion the decision was based on as
//! a precondition, so two sharders (one that has not noticed it lost its Lease yet, and its
//! successor) cannot interleave writes on an object: the loser gets `409 Conflict` and decides
//! again from fresh state. A child's ring key is its controller owner's key, so children land on
//! their owner's replica.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kcr_source::WatchScope;

use crate::config::single_namespace;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::core::{DynamicObject, ObjectMeta, PartialObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::error::ShardError;
use super::gate::{Keys, ShardMeta};
use super::membership::{MemberObserver, Members};
use super::ring::HashRing;
use super::{ShardConfig, object_key};

/// Where the leading sharder publishes the live members it assigns to (`None` while it does
/// not lead).
pub(crate) type View = Arc<parking_lot::Mutex<Option<std::collections::BTreeSet<String>>>>;

/// What the sharder does with one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Write the shard label (and clear any drain mark).
    Assign(String),
    /// Mark the object as draining from its current, live owner.
    MarkDrain(String),
    /// Remove a drain mark: the object stays with its owner.
    CancelDrain,
    /// Wait for the owner to acknowledge the drain.
    Wait,
    /// Nothing to do.
    Nothing,
}

/// Decides the step for an object labelled `current` with drain mark `drain`, whose ring owner
/// is `desired`, given the live `members` (see the table in the [module docs](self)).
pub fn plan(current: Option<&str>, drain: Option<&str>, desired: &str, members: &Members) -> Step {
    match current {
        None | Some("") => Step::Assign(desired.to_string()),
        Some(owner) if owner == desired => {
            if drain.is_some() {
                Step::CancelDrain
            } else {
                Step::Nothing
            }
        }
        Some(owner) if members.is_alive(owner) => {
            if drain == Some(owner) {
                Step::Wait
            } else {
                Step::MarkDrain(owner.to_string())
            }
        }
        Some(_) => Step::Assign(desired.to_string()),
    }
}

/// What the sharder shares with the per-kind tasks while it leads.
#[derive(Clone)]
pub(crate) struct SharderContext {
    pub client: kube::Client,
    pub config: Arc<ShardConfig>,
    pub members: watch::Receiver<Option<Members>>,
}

/// One kind the sharder assigns.
pub(crate) trait KindSharder: Send + Sync + 'static {
    /// The kind's name.
    fn kind(&self) -> String;
    /// Runs until `cancel`.
    fn run(
        self: Arc<Self>,
        ctx: SharderContext,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<(), ShardError>>;
}

/// The controller owner kind whose key a child is sharded by.
#[derive(Debug, Clone)]
pub(crate) struct OwnerSpec {
    /// API group of the owner kind (`""` for the core group).
    pub group: String,
    /// Kind of the owner.
    pub kind: String,
    /// Whether the owner is cluster-scoped.
    pub cluster_scoped: bool,
}

/// A kind to shard: the primary kind (`owner: None`) or an owned kind.
pub(crate) struct KindSpec {
    pub target: crate::target::Target,
    pub scope: WatchScope,
    pub owner: Option<OwnerSpec>,
}

#[derive(Debug, Clone)]
struct Entry {
    rv: String,
    shard: ShardMeta,
    ring_key: String,
}

fn ring_key(meta: &ObjectMeta, owner: Option<&OwnerSpec>) -> String {
    let own = || {
        object_key(
            meta.namespace.as_deref(),
            meta.name.as_deref().unwrap_or_default(),
        )
    };
    let Some(spec) = owner else {
        return own();
    };
    let found = meta.owner_references.iter().flatten().find(|r| {
        r.controller == Some(true)
            && r.kind == spec.kind
            && r.api_version.rsplit_once('/').map_or("", |(g, _)| g) == spec.group
    });
    match found {
        Some(r) if spec.cluster_scoped => object_key(None, &r.name),
        Some(r) => object_key(meta.namespace.as_deref(), &r.name),
        None => own(),
    }
}

type ObjKey = (Option<String>, String);

impl KindSpec {
    fn entry(&self, meta: &ObjectMeta, keys: &Keys) -> Entry {
        Entry {
            rv: meta.resource_version.clone().unwrap_or_default(),
            shard: ShardMeta::of(meta, &keys.label, &keys.drain),
            ring_key: ring_key(meta, self.owner.as_ref()),
        }
    }

    async fn run_inner(
        self: Arc<Self>,
        ctx: SharderContext,
        cancel: CancellationToken,
    ) -> Result<(), ShardError> {
        let kind = self.target.kind().to_string();
        let keys = ctx.config.keys();
        let api = self
            .target
            .api::<PartialObjectMeta<DynamicObject>>(
                ctx.client.clone(),
                single_namespace(&self.scope),
            )
            .map_err(|reason| ShardError::Watch {
                kind: kind.clone(),
                reason,
            })?;
        let mut config = watcher::Config::default();
        if let Some(l) = &self.scope.label_selector {
            config = config.labels(l);
        }
        if let Some(f) = &self.scope.field_selector {
            config = config.fields(f);
        }
        let mut stream = watcher(api, config).default_backoff().boxed();
        let mut store: HashMap<ObjKey, Entry> = HashMap::new();
        let mut init: Option<HashMap<ObjKey, Entry>> = None;
        let mut synced = false;
        let mut members_rx = ctx.members.clone();
        let mut ring: Option<HashRing> = None;
        // Writes made whose effect the watch has not shown yet: key → resourceVersion written on.
        let mut pending: HashMap<ObjKey, String> = HashMap::new();
        let retry = ctx.config.timings.retry_period;
        let mut tick = tokio::time::interval(retry);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let dirty;
            tokio::select! {
                biased;
                _ = cancel.cancelled() => return Ok(()),
                ev = stream.next() => {
                    let mut next = ev;
                    loop {
                        match next {
                            None => {
                                return Err(ShardError::Watch { kind, reason: "the watch ended".into() });
                            }
                            Some(Ok(event)) => {
                                self.apply(event, &keys, &mut store, &mut init, &mut synced);
                            }
                            Some(Err(e)) => {
                                tracing::warn!(kind = %kind, error = %e, "sharder watch error");
                            }
                        }
                        match stream.next().now_or_never() {
                            Some(ev) => next = ev,
                            None => break,
                        }
                    }
                    dirty = true;
                }
                changed = members_rx.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    dirty = true;
                }
                _ = tick.tick() => dirty = true,
            }
            if !dirty || !synced {
                continue;
            }
            let Some(members) = members_rx.borrow().clone() else {
                continue;
            };
            if members.alive.is_empty() {
                continue;
            }
            if ring
                .as_ref()
                .is_none_or(|r| !r.members().iter().eq(members.alive.iter()))
            {
                ring = Some(HashRing::new(
                    members.alive.iter().cloned(),
                    ctx.config.virtual_nodes,
                ));
            }
            let Some(ring) = ring.as_ref() else { continue };
            let mut writes = Vec::new();
            for (key, entry) in &store {
                if let Some(rv) = pending.get(key) {
                    if *rv == entry.rv {
                        continue;
                    }
                    pending.remove(key);
                }
                let Some(desired) = ring.owner(&entry.ring_key) else {
                    continue;
                };
                let step = plan(
                    entry.shard.owner.as_deref(),
                    entry.shard.drain.as_deref(),
                    desired,
                    &members,
                );
                let body = match step {
                    Step::Nothing | Step::Wait => continue,
                    Step::Assign(to) => serde_json::json!({"metadata": {
                        "resourceVersion": entry.rv,
                        "labels": {keys.label.as_str(): to},
                        "annotations": {keys.drain.as_str(): null},
                    }}),
                    Step::MarkDrain(from) => serde_json::json!({"metadata": {
                        "resourceVersion": entry.rv,
                        "annotations": {keys.drain.as_str(): from},
                    }}),
                    Step::CancelDrain => serde_json::json!({"metadata": {
                        "resourceVersion": entry.rv,
                        "annotations": {keys.drain.as_str(): null},
                    }}),
                };
                writes.push((key.clone(), entry.rv.clone(), body));
            }
            if writes.is_empty() {
                continue;
            }
            tracing::debug!(kind = %kind, writes = writes.len(), members = ?members.alive, "sharder pass");
            for (key, rv, _) in &writes {
                pending.insert(key.clone(), rv.clone());
            }
            let client = ctx.client.clone();
            let target = &self.target;
            let failed: Vec<ObjKey> = futures::stream::iter(writes)
                .map(|(key, _, body)| {
                    let client = client.clone();
                    async move {
                        let res = match target.api::<DynamicObject>(client, key.0.as_deref()) {
                            Ok(api) => api
                                .patch_metadata(
                                    &key.1,
                                    &PatchParams::default(),
                                    &Patch::Merge(&body),
                                )
                                .await
                                .map(|_| ()),
                            Err(_) => Ok(()),
                        };
                        (key, res)
                    }
                })
                .buffer_unordered(ctx.config.write_concurrency.max(1))
                .filter_map(|(key, res)| async move {
                    match res {
                        Ok(()) => None,
                        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => Some(key),
                        Err(e) => {
                            let err = ShardError::Write {
                                kind: target.kind().to_string(),
                                key: object_key(key.0.as_deref(), &key.1),
                                source: e,
                            };
                            tracing::warn!(error = %err, "sharder write failed; retrying later");
                            Some(key)
                        }
                    }
                })
                .collect()
                .await;
            for key in failed {
                pending.remove(&key);
            }
        }
    }

    fn apply(
        &self,
        event: watcher::Event<PartialObjectMeta<DynamicObject>>,
        keys: &Keys,
        store: &mut HashMap<ObjKey, Entry>,
        init: &mut Option<HashMap<ObjKey, Entry>>,
        synced: &mut bool,
    ) {
        let key_of = |m: &ObjectMeta| (m.namespace.clone(), m.name.clone().unwrap_or_default());
        match event {
            watcher::Event::Apply(o) => {
                store.insert(key_of(&o.metadata), self.entry(&o.metadata, keys));
            }
            watcher::Event::Delete(o) => {
                store.remove(&key_of(&o.metadata));
            }
            watcher::Event::Init => *init = Some(HashMap::new()),
            watcher::Event::InitApply(o) => {
                init.get_or_insert_with(HashMap::new)
                    .insert(key_of(&o.metadata), self.entry(&o.metadata, keys));
            }
            watcher::Event::InitDone => {
                *store = init.take().unwrap_or_default();
                *synced = true;
            }
        }
    }
}

impl KindSharder for KindSpec {
    fn kind(&self) -> String {
        self.target.kind().to_string()
    }

    fn run(
        self: Arc<Self>,
        ctx: SharderContext,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<(), ShardError>> {
        self.run_inner(ctx, cancel).boxed()
    }
}

/// Polls the member Leases every `retry_period` and publishes the live members; deletes Leases
/// dead for two lease durations (with their resourceVersion as a precondition).
pub(crate) async fn poll_members(
    client: kube::Client,
    config: Arc<ShardConfig>,
    namespace: String,
    tx: watch::Sender<Option<Members>>,
    view: View,
    cancel: CancellationToken,
) {
    let api: Api<Lease> = Api::namespaced(client, &namespace);
    let mut observer = MemberObserver::new(config.name.clone(), config.timings.lease_duration);
    loop {
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                let members = observer.observe(&list.items, Instant::now());
                for (name, rv) in &members.stale {
                    let dp = DeleteParams {
                        preconditions: Some(Preconditions {
                            resource_version: Some(rv.clone()),
                            uid: None,
                        }),
                        ..Default::default()
                    };
                    match api.delete(name, &dp).await {
                        Ok(_) => {
                            tracing::info!(lease = %name, "deleted the lease of a dead member")
                        }
                        Err(e) => {
                            tracing::debug!(lease = %name, error = %e, "could not delete a dead member's lease")
                        }
                    }
                }
                tx.send_if_modified(|current| {
                    let changed = current.as_ref().is_none_or(|c| c.alive != members.alive);
                    if changed {
                        tracing::info!(group = %config.name, members = ?members.alive, "shard members");
                        *view.lock() = Some(members.alive.clone());
                        *current = Some(members);
                    }
                    changed
                });
            }
            Err(source) => {
                let err = ShardError::ListMembers {
                    group: config.name.clone(),
                    namespace: namespace.clone(),
                    source,
                };
                tracing::warn!(error = %err, "sharder: listing members failed");
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(config.timings.retry_period) => {}
        }
    }
}

/// Runs the sharder's work while this replica leads: the member poll and one task per kind.
pub(crate) async fn lead(
    client: kube::Client,
    config: Arc<ShardConfig>,
    namespace: String,
    kinds: Vec<Arc<dyn KindSharder>>,
    view: View,
    cancel: CancellationToken,
) {
    let (tx, rx) = watch::channel(None);
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(poll_members(
        client.clone(),
        config.clone(),
        namespace,
        tx,
        view.clone(),
        cancel.clone(),
    ));
    for kind in kinds {
        let ctx = SharderContext {
            client: client.clone(),
            config: config.clone(),
            members: rx.clone(),
        };
        let cancel = cancel.clone();
        tasks.spawn(async move {
            let name = kind.kind();
            // A failed watch is restarted after a pause: the sharder must not stop assigning.
            loop {
                match kind.clone().run(ctx.clone(), cancel.clone()).await {
                    Ok(()) => return,
                    Err(e) => {
                        tracing::error!(kind = %name, error = %e, "sharder task failed; restarting");
                    }
                }
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        });
    }
    drop(rx);
    while tasks.join_next().await.is_some() {}
    *view.lock() = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(alive: &[&str]) -> Members {
        Members {
            alive: alive.iter().map(|s| s.to_string()).collect(),
            stale: Vec::new(),
        }
    }

    #[test]
    fn plan_follows_the_table() {
        let m = members(&["a", "b"]);
        assert_eq!(plan(None, None, "a", &m), Step::Assign("a".into()));
        assert_eq!(plan(Some(""), Some("x"), "a", &m), Step::Assign("a".into()));
        assert_eq!(plan(Some("a"), None, "a", &m), Step::Nothing);
        assert_eq!(plan(Some("a"), Some("a"), "a", &m), Step::CancelDrain);
        assert_eq!(plan(Some("b"), None, "a", &m), Step::MarkDrain("b".into()));
        assert_eq!(
            plan(Some("b"), Some("x"), "a", &m),
            Step::MarkDrain("b".into())
        );
        assert_eq!(plan(Some("b"), Some("b"), "a", &m), Step::Wait);
        // A dead owner cannot acknowledge: the move goes ahead.
        assert_eq!(
            plan(Some("dead"), Some("dead"), "a", &m),
            Step::Assign("a".into())
        );
        assert_eq!(plan(Some("dead"), None, "a", &m), Step::Assign("a".into()));
    }

    #[test]
    fn children_follow_their_controller_owner() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let spec = OwnerSpec {
            group: "".into(),
            kind: "ConfigMap".into(),
            cluster_scoped: false,
        };
        let mut meta = ObjectMeta {
            name: Some("child".into()),
            namespace: Some("ns".into()),
            ..Default::default()
        };
        assert_eq!(
            ring_key(&meta, Some(&spec)),
            "ns/child",
            "no owner: its own key"
        );
        meta.owner_references = Some(vec![
            OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: "not-controller".into(),
                controller: None,
                ..Default::default()
            },
            OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ConfigMap".into(),
                name: "other-group".into(),
                controller: Some(true),
                ..Default::default()
            },
            OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: "parent".into(),
                controller: Some(true),
                ..Default::default()
            },
        ]);
        assert_eq!(ring_key(&meta, Some(&spec)), "ns/parent");
        assert_eq!(ring_key(&meta, None), "ns/child");
        let cluster = OwnerSpec {
            cluster_scoped: true,
            ..spec
        };
        assert_eq!(ring_key(&meta, Some(&cluster)), "parent");
    }
}
