//! [`EnqueueRequestForOwner`]: the requests for an object's owners of a chosen type.

use std::any::TypeId;
use std::marker::PhantomData;

use k8s_openapi::ClusterResourceScope;
use kcr_core::Event;
use kcr_queue::WorkQueue;
use kube_core::Resource;

use crate::{EventHandler, Request, enqueue_all};

/// Enqueues the owners of type `Owner` of the event's object, found through
/// `metadata.ownerReferences` (used for a controller's owned types, `Owns`).
///
/// * Only the *controller* owner reference (`controller: true`) counts by default;
///   [`EnqueueRequestForOwner::every_owner`] takes every owner reference of type `Owner`.
/// * References are matched on API group and kind; the version is ignored (an owner reference
///   written as `apps/v1beta2` still matches `apps/v1`).
/// * A cluster-scoped owner type gives requests without a namespace; a namespaced owner lives in
///   the object's namespace (Kubernetes forbids cross-namespace owners).
/// * For an update, the owners of the old and of the new object are enqueued, each once (so the
///   old owner hears about an object that was re-parented).
pub struct EnqueueRequestForOwner<Owner> {
    group: String,
    kind: String,
    cluster_scoped: bool,
    every_owner: bool,
    _owner: PhantomData<fn() -> Owner>,
}

impl<Owner> std::fmt::Debug for EnqueueRequestForOwner<Owner> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnqueueRequestForOwner")
            .field("group", &self.group)
            .field("kind", &self.kind)
            .field("cluster_scoped", &self.cluster_scoped)
            .field("every_owner", &self.every_owner)
            .finish()
    }
}

impl<Owner> Clone for EnqueueRequestForOwner<Owner> {
    fn clone(&self) -> Self {
        Self {
            group: self.group.clone(),
            kind: self.kind.clone(),
            cluster_scoped: self.cluster_scoped,
            every_owner: self.every_owner,
            _owner: PhantomData,
        }
    }
}

impl<Owner> EnqueueRequestForOwner<Owner>
where
    Owner: Resource,
    Owner::DynamicType: Default,
    Owner::Scope: 'static,
{
    /// Controller owners of type `Owner` only. Whether `Owner` is cluster-scoped is read from
    /// its `Resource::Scope`.
    pub fn new() -> Self {
        Self::with_dynamic_type(&Default::default())
    }
}

impl<Owner> Default for EnqueueRequestForOwner<Owner>
where
    Owner: Resource,
    Owner::DynamicType: Default,
    Owner::Scope: 'static,
{
    fn default() -> Self {
        Self::new()
    }
}

impl<Owner> EnqueueRequestForOwner<Owner>
where
    Owner: Resource,
    Owner::Scope: 'static,
{
    /// Like [`EnqueueRequestForOwner::new`] for a type with a runtime type description (such as
    /// `DynamicObject`). Dynamic types count as namespaced; use
    /// [`EnqueueRequestForOwner::cluster_scoped`] to say otherwise.
    pub fn with_dynamic_type(dt: &Owner::DynamicType) -> Self {
        Self {
            group: Owner::group(dt).into_owned(),
            kind: Owner::kind(dt).into_owned(),
            cluster_scoped: TypeId::of::<Owner::Scope>() == TypeId::of::<ClusterResourceScope>(),
            every_owner: false,
            _owner: PhantomData,
        }
    }
}

impl<Owner> EnqueueRequestForOwner<Owner> {
    /// Take every owner reference of the owner type, not only the controller.
    pub fn every_owner(mut self) -> Self {
        self.every_owner = true;
        self
    }

    /// Overrides whether the owner type is cluster-scoped.
    pub fn cluster_scoped(mut self, cluster_scoped: bool) -> Self {
        self.cluster_scoped = cluster_scoped;
        self
    }

    fn owners_of<K: Resource>(&self, object: &K, out: &mut Vec<Request>) {
        let meta = object.meta();
        for reference in meta.owner_references.iter().flatten() {
            if !self.every_owner && reference.controller != Some(true) {
                continue;
            }
            let group = match reference.api_version.split_once('/') {
                Some((group, _version)) => group,
                None => "", // core group: apiVersion is just the version
            };
            if group != self.group || reference.kind != self.kind {
                continue;
            }
            let namespace = if self.cluster_scoped {
                None
            } else {
                meta.namespace.clone()
            };
            out.push(Request::new(reference.name.clone(), namespace));
        }
    }

    /// The requests `event` maps to, without duplicates, in owner-reference order (old object's
    /// owners first for updates).
    pub fn requests<K: Resource>(&self, event: &Event<K>) -> Vec<Request> {
        let mut out = Vec::new();
        if let Event::Update { old, .. } = event {
            self.owners_of(old.as_ref(), &mut out);
        }
        self.owners_of(event.object().as_ref(), &mut out);
        let mut unique = Vec::with_capacity(out.len());
        for r in out {
            if !unique.contains(&r) {
                unique.push(r);
            }
        }
        unique
    }
}

impl<K, Owner> EventHandler<K> for EnqueueRequestForOwner<Owner>
where
    K: Resource + Send + Sync + 'static,
    Owner: 'static,
{
    fn handle(&self, event: &Event<K>, queue: &WorkQueue<Request>) {
        enqueue_all(event, queue, self.requests(event));
    }
}
