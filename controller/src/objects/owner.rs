//! Owner references: [`set_controller_reference`], [`set_owner_reference`] and
//! [`has_controller_reference`], with controller-runtime's rules.
//!
//! The API server's garbage collector deletes an object once every owner it names is gone, and
//! the `Owns` watch of a controller maps an owned object back to its controller through the one
//! reference marked `controller: true`. Both only work when the reference obeys the rules these
//! functions check before they write:
//!
//! - an object has at most one controller: a different controller already named is an
//!   [`OwnerError::AlreadyOwned`];
//! - a cluster-scoped object cannot have a namespaced owner
//!   ([`OwnerError::ClusterScopedObjectNamespacedOwner`]);
//! - a namespaced owner must be in the object's own namespace
//!   ([`OwnerError::CrossNamespace`]).
//!
//! A reference names its owner by API group, kind and name; writing a reference to an owner
//! already named replaces it (a new `uid` after the owner was re-created, another version), so
//! calling these functions on every reconcile is idempotent.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;

/// Why an owner reference was not written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OwnerError {
    /// The object already has a controller, and it is not this owner.
    #[error(
        "object {object} is already owned by another {kind} controller {name}: an object has at most one controller"
    )]
    AlreadyOwned {
        /// `namespace/name` (or `name`) of the object.
        object: String,
        /// The kind of the controller it already has.
        kind: String,
        /// The name of the controller it already has.
        name: String,
    },
    /// The reference to remove is not there (or `owner` is not the object's controller).
    #[error("{object} has no {} reference to {kind} {name}", "owner or controller")]
    NotOwned {
        /// `namespace/name` (or `name`) of the object.
        object: String,
        /// The owner's kind.
        kind: String,
        /// The owner's name.
        name: String,
    },
    /// A cluster-scoped object cannot be owned by a namespaced object.
    #[error(
        "cluster-scoped resource {object} must not have a namespace-scoped owner, owner's namespace {owner_namespace}"
    )]
    ClusterScopedObjectNamespacedOwner {
        /// The name of the object.
        object: String,
        /// The owner's namespace.
        owner_namespace: String,
    },
    /// The owner is namespaced and in another namespace than the object.
    #[error(
        "cross-namespace owner references are disallowed, owner's namespace {owner_namespace}, obj's namespace {object_namespace}"
    )]
    CrossNamespace {
        /// The owner's namespace.
        owner_namespace: String,
        /// The object's namespace.
        object_namespace: String,
    },
    /// The owner has no name or no uid yet (it was never read from or written to the API
    /// server), so a reference to it would be refused or dangle.
    #[error("the owner {kind} {name:?} has no {missing}: read or create it before referencing it")]
    OwnerNotPersisted {
        /// The owner's kind.
        kind: String,
        /// The owner's name, if any.
        name: Option<String>,
        /// `metadata.name` or `metadata.uid`.
        missing: &'static str,
    },
}

/// Make `owner` the controller of `object`: adds (or refreshes) an owner reference with
/// `controller: true` and `blockOwnerDeletion: true`, as controller-runtime's
/// `SetControllerReference` does.
///
/// Fails without touching `object` if another controller is already set, or if the scopes or
/// namespaces do not allow the reference: a cluster-scoped object with a namespaced owner, or
/// an owner in another namespace ([`OwnerError`]).
///
/// ```
/// use k8s_openapi::api::apps::v1::Deployment;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcr_controller::objects::{has_controller_reference, set_controller_reference};
///
/// let mut owner = Deployment::default();
/// owner.metadata.name = Some("web".into());
/// owner.metadata.namespace = Some("default".into());
/// owner.metadata.uid = Some("0b6f...".into());
/// let mut config = ConfigMap::default();
/// config.metadata.name = Some("web-config".into());
/// config.metadata.namespace = Some("default".into());
///
/// set_controller_reference(&owner, &mut config).unwrap();
/// assert!(has_controller_reference(&config));
/// // Idempotent: the same owner again is fine.
/// set_controller_reference(&owner, &mut config).unwrap();
/// assert_eq!(config.metadata.owner_references.as_ref().unwrap().len(), 1);
/// ```
pub fn set_controller_reference<O, K>(owner: &O, object: &mut K) -> Result<(), OwnerError>
where
    O: Resource<DynamicType = ()>,
    K: Resource,
{
    let reference = reference_to(owner, true)?;
    check_scope(owner, object)?;
    if let Some(current) = controller_of(object)
        && !same_owner(current, &reference)
    {
        return Err(OwnerError::AlreadyOwned {
            object: object_key(object),
            kind: current.kind.clone(),
            name: current.name.clone(),
        });
    }
    upsert(object, reference);
    Ok(())
}

/// Add (or refresh) a plain owner reference to `owner` on `object`: the garbage collector
/// deletes `object` once all its owners are gone, but `owner` does not control it. As
/// controller-runtime's `SetOwnerReference`: a reference to the same owner keeps its
/// `controller` and `blockOwnerDeletion` flags.
pub fn set_owner_reference<O, K>(owner: &O, object: &mut K) -> Result<(), OwnerError>
where
    O: Resource<DynamicType = ()>,
    K: Resource,
{
    let mut reference = reference_to(owner, false)?;
    check_scope(owner, object)?;
    if let Some(existing) = object
        .meta()
        .owner_references
        .iter()
        .flatten()
        .find(|r| same_owner(r, &reference))
    {
        reference.controller = existing.controller;
        reference.block_owner_deletion = existing.block_owner_deletion;
    }
    upsert(object, reference);
    Ok(())
}

/// [`set_controller_reference`] with a choice of `blockOwnerDeletion` (controller-runtime's
/// `WithBlockOwnerDeletion`): `false` lets a foreground deletion of the owner finish without
/// waiting for `object` (and needs no `update` permission on the owner's finalizers
/// subresource, which a `true` does).
pub fn set_controller_reference_with<O, K>(
    owner: &O,
    object: &mut K,
    block_owner_deletion: bool,
) -> Result<(), OwnerError>
where
    O: Resource<DynamicType = ()>,
    K: Resource,
{
    set_controller_reference(owner, object)?;
    let reference = reference_to(owner, true)?;
    if let Some(existing) = object
        .meta_mut()
        .owner_references
        .iter_mut()
        .flatten()
        .find(|r| same_owner(r, &reference))
    {
        existing.block_owner_deletion = Some(block_owner_deletion);
    }
    Ok(())
}

/// Whether `object` has an owner reference (controller or not) to `owner`: same group, kind
/// and name (controller-runtime's `HasOwnerReference`).
pub fn has_owner_reference<O, K>(owner: &O, object: &K) -> bool
where
    O: Resource<DynamicType = ()>,
    K: Resource,
{
    let group = O::group(&());
    let kind = O::kind(&());
    let name = owner.meta().name.as_deref();
    object.meta().owner_references.iter().flatten().any(|r| {
        group_of(&r.api_version) == group && r.kind == kind && Some(r.name.as_str()) == name
    })
}

/// Removes the owner reference to `owner` from `object` (controller-runtime's
/// `RemoveOwnerReference`); [`OwnerError::NotOwned`] when there is none. A list left empty is
/// dropped.
pub fn remove_owner_reference<O, K>(owner: &O, object: &mut K) -> Result<(), OwnerError>
where
    O: Resource<DynamicType = ()>,
    K: Resource,
{
    if !has_owner_reference(owner, object) {
        return Err(not_owned(owner, object));
    }
    let group = O::group(&()).into_owned();
    let kind = O::kind(&()).into_owned();
    let name = owner.meta().name.clone().unwrap_or_default();
    let refs = &mut object.meta_mut().owner_references;
    if let Some(list) = refs.as_mut() {
        list.retain(|r| !(group_of(&r.api_version) == group && r.kind == kind && r.name == name));
        if list.is_empty() {
            *refs = None;
        }
    }
    Ok(())
}

/// Removes the controller reference to `owner` from `object` (controller-runtime's
/// `RemoveControllerReference`): [`OwnerError::NotOwned`] when `owner` is not `object`'s
/// controller (a plain owner reference to it stays untouched then).
pub fn remove_controller_reference<O, K>(owner: &O, object: &mut K) -> Result<(), OwnerError>
where
    O: Resource<DynamicType = ()>,
    K: Resource,
{
    let controls = controller_of(object).is_some_and(|r| {
        group_of(&r.api_version) == O::group(&())
            && r.kind == O::kind(&())
            && Some(r.name.as_str()) == owner.meta().name.as_deref()
    });
    if !controls {
        return Err(not_owned(owner, object));
    }
    remove_owner_reference(owner, object)
}

fn not_owned<O: Resource<DynamicType = ()>, K: Resource>(owner: &O, object: &K) -> OwnerError {
    OwnerError::NotOwned {
        object: object_key(object),
        kind: O::kind(&()).into_owned(),
        name: owner.meta().name.clone().unwrap_or_default(),
    }
}

/// Whether `object` names a controller among its owner references.
pub fn has_controller_reference<K: Resource>(object: &K) -> bool {
    controller_of(object).is_some()
}

/// The owner reference marked `controller: true`, if any.
pub fn controller_of<K: Resource>(object: &K) -> Option<&OwnerReference> {
    object
        .meta()
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

fn reference_to<O: Resource<DynamicType = ()>>(
    owner: &O,
    controller: bool,
) -> Result<OwnerReference, OwnerError> {
    let kind = O::kind(&()).into_owned();
    let meta = owner.meta();
    let name = meta
        .name
        .clone()
        .ok_or_else(|| OwnerError::OwnerNotPersisted {
            kind: kind.clone(),
            name: None,
            missing: "metadata.name",
        })?;
    let uid = meta
        .uid
        .clone()
        .ok_or_else(|| OwnerError::OwnerNotPersisted {
            kind: kind.clone(),
            name: Some(name.clone()),
            missing: "metadata.uid",
        })?;
    Ok(OwnerReference {
        api_version: O::api_version(&()).into_owned(),
        kind,
        name,
        uid,
        controller: controller.then_some(true),
        block_owner_deletion: controller.then_some(true),
    })
}

/// controller-runtime's `validateOwner`: the namespaces decide (a cluster-scoped object has
/// none).
fn check_scope<O: Resource, K: Resource>(owner: &O, object: &K) -> Result<(), OwnerError> {
    let Some(owner_namespace) = owner.meta().namespace.as_deref().filter(|n| !n.is_empty()) else {
        return Ok(());
    };
    match object.meta().namespace.as_deref().filter(|n| !n.is_empty()) {
        None => Err(OwnerError::ClusterScopedObjectNamespacedOwner {
            object: object.meta().name.clone().unwrap_or_default(),
            owner_namespace: owner_namespace.to_string(),
        }),
        Some(ns) if ns != owner_namespace => Err(OwnerError::CrossNamespace {
            owner_namespace: owner_namespace.to_string(),
            object_namespace: ns.to_string(),
        }),
        Some(_) => Ok(()),
    }
}

/// The API group of an `apiVersion` (`apps/v1` → `apps`, `v1` → ``).
fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// Two references name the same owner: same group, kind and name (the version and uid may
/// differ, as controller-runtime compares them).
fn same_owner(a: &OwnerReference, b: &OwnerReference) -> bool {
    group_of(&a.api_version) == group_of(&b.api_version) && a.kind == b.kind && a.name == b.name
}

fn upsert<K: Resource>(object: &mut K, reference: OwnerReference) {
    let refs = object
        .meta_mut()
        .owner_references
        .get_or_insert_with(Vec::new);
    match refs.iter_mut().find(|r| same_owner(r, &reference)) {
        Some(existing) => *existing = reference,
        None => refs.push(reference),
    }
}

fn object_key<K: Resource>(object: &K) -> String {
    let meta = object.meta();
    let name = meta.name.clone().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name,
    }
}

#[cfg(test)]
mod tests;
