//! [`ObjectApi`]: where the helpers of this module read and write an object, a
//! [`kcr_client::Client`] or a kube `Api`, and under which field owner.

use kcr_source::{CacheObject, ScopedApi};
use std::fmt::Debug;

use kube::Resource;
use kube::api::{Api, PatchParams, PostParams};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::ObjectError;
use crate::manager::DEFAULT_FIELD_OWNER;

/// Bounds of the objects these helpers read and write.
pub trait Object:
    Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug + Send + Sync
{
}
impl<K> Object for K where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug + Send + Sync
{
}

/// Where the `objects` helpers send an object's reads and writes.
///
/// - A [`kcr_client::Client`] (the manager's, [`Manager::client`](crate::Manager::client)):
///   the object's own namespace (else the client's), and the client's field owner on every
///   write.
/// - A kube `Api<K>`: the `Api`'s namespace (the object must be in it), and
///   [`DEFAULT_FIELD_OWNER`] on every write.
pub trait ObjectApi<K: Object>: Send + Sync {
    /// The `Api` that addresses `object`.
    fn api_for(&self, object: &K) -> Result<Api<K>, ObjectError>;
    /// The field manager of the writes.
    fn field_owner(&self) -> String;
}

impl<K: Object> ObjectApi<K> for Api<K> {
    fn api_for(&self, _object: &K) -> Result<Api<K>, ObjectError> {
        Ok(self.clone())
    }

    fn field_owner(&self) -> String {
        DEFAULT_FIELD_OWNER.to_string()
    }
}

impl<K> ObjectApi<K> for kcr_client::Client
where
    K: Object + CacheObject,
    K::Scope: ScopedApi,
{
    fn api_for(&self, object: &K) -> Result<Api<K>, ObjectError> {
        Ok(self.api::<K>(object.meta().namespace.as_deref())?)
    }

    fn field_owner(&self) -> String {
        self.write_defaults()
            .field_owner
            .clone()
            .unwrap_or_else(|| DEFAULT_FIELD_OWNER.to_string())
    }
}

/// An `Api` and the field owner of its writes.
pub(crate) struct Writer<K> {
    pub(crate) api: Api<K>,
    pub(crate) field_owner: String,
}

impl<K: Object> Writer<K> {
    pub(crate) fn new(target: &impl ObjectApi<K>, object: &K) -> Result<Self, ObjectError> {
        Ok(Writer {
            api: target.api_for(object)?,
            field_owner: target.field_owner(),
        })
    }

    pub(crate) fn post_params(&self) -> PostParams {
        PostParams {
            field_manager: Some(self.field_owner.clone()),
            ..PostParams::default()
        }
    }

    pub(crate) fn patch_params(&self) -> PatchParams {
        PatchParams {
            field_manager: Some(self.field_owner.clone()),
            ..PatchParams::default()
        }
    }
}
