//! The bounds an object type needs to be watched and cached ([`CacheObject`]), and those of
//! its run-time type ([`CacheDynamicType`]).

use std::fmt::Debug;
use std::hash::Hash;

use kube::Resource;
use serde::de::DeserializeOwned;

/// The bounds a [`CacheObject`]'s `DynamicType` needs (it is part of every cached object's
/// key): `()` for typed kinds, [`ApiResource`](kube::core::ApiResource) for
/// [`DynamicObject`](kube::core::DynamicObject)s (see [`crate::dynamic`]).
///
/// Implemented for every type that satisfies them.
pub trait CacheDynamicType: Eq + Hash + Clone + Send + Sync {}

impl<T: Eq + Hash + Clone + Send + Sync> CacheDynamicType for T {}

/// The bounds an object type needs to be watched and cached.
///
/// Implemented for every type that satisfies them (all `k8s-openapi` types, `kube::CustomResource`
/// types, `PartialObjectMeta<K>`, and `DynamicObject`, whose run-time type the informer
/// carries).
pub trait CacheObject:
    Resource<DynamicType: CacheDynamicType> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

impl<K> CacheObject for K
where
    K: Resource<DynamicType: CacheDynamicType> + Clone + DeserializeOwned + Debug,
    K: Send + Sync + 'static,
{
}
