//! Transforms: what the [`Cache`](crate::Cache) changes in each object before it stores it
//! (controller-runtime's `cache.Options.ByObject[..].Transform`).
//!
//! The default transform of every type drops `metadata.managedFields`: server-side apply's
//! bookkeeping, often the largest part of a small object's metadata, which controllers almost
//! never read. Register another transform per type with
//! [`Cache::set_transform`](crate::Cache::set_transform) (for instance to also drop a large
//! field the controller ignores), or keep objects whole with
//! [`Cache::keep_whole`](crate::Cache::keep_whole). A transform runs on the watch's task for
//! every object listed or watched, before the object is compared, stored or sent to
//! subscribers; keep it cheap, and never change the name or namespace (the object's key).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

use kube::Resource;
use kube::core::ApiResource;

/// A per-type transform.
pub type Transform<K> = Arc<dyn Fn(&mut K) + Send + Sync>;

/// The default transform: drops `metadata.managedFields`.
pub fn strip_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// The transforms registered per type: per Rust type and resource (`ApiResource::erase` of
/// the type), so that each dynamic kind (all `DynamicObject`s) has its own.
#[derive(Default)]
pub(crate) struct Transforms {
    by_type: HashMap<(TypeId, ApiResource), Arc<dyn Any + Send + Sync>>,
    /// The cache-wide default, replacing [`strip_managed_fields`] for types without their own.
    default: Option<crate::cache::MetaTransform>,
}

impl Transforms {
    pub(crate) fn set<K: 'static>(&mut self, resource: ApiResource, transform: Transform<K>) {
        self.by_type
            .insert((TypeId::of::<K>(), resource), Arc::new(transform));
    }

    pub(crate) fn set_default(&mut self, transform: crate::cache::MetaTransform) {
        self.default = Some(transform);
    }

    /// The transform of `K` for `resource`: the registered one, else the cache-wide default,
    /// else [`strip_managed_fields`].
    pub(crate) fn get<K: Resource + 'static>(&self, resource: &ApiResource) -> Transform<K> {
        self.by_type
            .get(&(TypeId::of::<K>(), resource.clone()))
            .and_then(|t| t.downcast_ref::<Transform<K>>())
            .cloned()
            .unwrap_or_else(|| match &self.default {
                Some(default) => {
                    let default = Arc::clone(default);
                    Arc::new(move |object: &mut K| default(object.meta_mut()))
                }
                None => Arc::new(strip_managed_fields::<K>),
            })
    }
}
