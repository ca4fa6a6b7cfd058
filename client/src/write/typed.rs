//! The [`Client`]'s write calls for compiled-in kinds, each one line on the verbs of
//! [`super::verbs`]; each returns a [`Write`] to await (see [`crate::write`] for the per-call
//! options).

use kcr_source::{CacheObject, ScopedApi};
use kube::api::{ListParams, Patch};
use serde::Serialize;

use super::{Create, Delete, DeleteAllOf, PatchOp, Update, Write};
use crate::client::Client;
use crate::error::ClientError;
use crate::target::Typed;

impl Client {
    /// The kube `Api` of `K` in `namespace` (else the client's namespace; cluster-scoped kinds
    /// take none), on the client's connection: for calls the client does not wrap (logs,
    /// eviction, scale). Writes through it carry no field owner unless the call sets one.
    pub fn api<K>(&self, namespace: Option<&str>) -> Result<kube::Api<K>, ClientError>
    where
        K: CacheObject,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        Ok(self.address(&Typed::<K>::new(), None, namespace)?.api)
    }

    /// Creates `object` in its namespace (else the client's); returns it as stored. A name
    /// taken is [`ClientError::is_already_exists`]; `metadata.generateName` works.
    pub fn create<'a, K>(&self, object: &'a K) -> Write<'a, Create<'a, K>>
    where
        K: CacheObject + Serialize,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        self.create_in(&Typed::<K>::new(), object)
    }

    /// Replaces `object` (a PUT; its `resourceVersion`, if set, must be current, else
    /// [`ClientError::is_conflict`]); returns it as stored.
    pub fn update<'a, K>(&self, object: &'a K) -> Write<'a, Update<'a, K>>
    where
        K: CacheObject + Serialize,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        self.update_in(&Typed::<K>::new(), object, None)
    }

    /// Replaces the status of `object` (the `status` subresource; controller-runtime's
    /// `Status().Update`).
    pub fn update_status<'a, K>(&self, object: &'a K) -> Write<'a, Update<'a, K>>
    where
        K: CacheObject + Serialize,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        self.update_subresource("status", object)
    }

    /// Replaces the subresource `subresource` of `object`.
    pub fn update_subresource<'a, K>(
        &self,
        subresource: &'a str,
        object: &'a K,
    ) -> Write<'a, Update<'a, K>>
    where
        K: CacheObject + Serialize,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        self.update_in(&Typed::<K>::new(), object, Some(subresource))
    }

    /// Patches the object `name` in `namespace` with a merge, JSON, strategic merge or apply
    /// patch; returns the object as stored.
    ///
    /// ```no_run
    /// # async fn demo(client: kcr_client::Client) -> Result<(), kcr_client::ClientError> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kube::api::Patch;
    ///
    /// let patch = Patch::Merge(serde_json::json!({"data": {"mode": "blue"}}));
    /// client.patch::<ConfigMap, _>("settings", Some("shop"), &patch).await?;
    /// # Ok(()) }
    /// ```
    pub fn patch<'a, K, P>(
        &self,
        name: &str,
        namespace: Option<&str>,
        patch: &'a Patch<P>,
    ) -> Write<'a, PatchOp<'a, K, P>>
    where
        K: CacheObject,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
        P: Serialize,
    {
        self.patch_in(&Typed::<K>::new(), None, name, namespace, patch)
    }

    /// Patches the status of the object `name` (controller-runtime's `Status().Patch`).
    pub fn patch_status<'a, K, P>(
        &self,
        name: &str,
        namespace: Option<&str>,
        patch: &'a Patch<P>,
    ) -> Write<'a, PatchOp<'a, K, P>>
    where
        K: CacheObject,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
        P: Serialize,
    {
        self.patch_in(&Typed::<K>::new(), Some("status"), name, namespace, patch)
    }

    /// Patches the subresource `subresource` (`status`, `scale`, ...) of the object `name`.
    pub fn patch_subresource<'a, K, P>(
        &self,
        subresource: &'a str,
        name: &str,
        namespace: Option<&str>,
        patch: &'a Patch<P>,
    ) -> Write<'a, PatchOp<'a, K, P>>
    where
        K: CacheObject,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
        P: Serialize,
    {
        self.patch_in(
            &Typed::<K>::new(),
            Some(subresource),
            name,
            namespace,
            patch,
        )
    }

    /// Server-side applies `object` (its name and namespace address it) as the client's field
    /// owner; a field another manager owns is [`ClientError::is_conflict`] unless the call
    /// [forces](Write::force) it.
    pub fn apply<'a, K>(&self, object: &'a K) -> Write<'a, PatchOp<'a, K, &'a K>>
    where
        K: CacheObject + Serialize,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        self.apply_in(&Typed::<K>::new(), object)
    }

    /// Deletes `object` (by its name and namespace). Not found is
    /// [`ClientError::is_not_found`]; an object with finalizers stays until they are removed.
    pub fn delete<'a, K>(&self, object: &K) -> Write<'a, Delete<K>>
    where
        K: CacheObject,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        let meta = object.meta();
        self.delete_named::<K>(
            meta.name.as_deref().unwrap_or(""),
            meta.namespace.as_deref(),
        )
    }

    /// Deletes the object `name` in `namespace`.
    pub fn delete_named<'a, K>(&self, name: &str, namespace: Option<&str>) -> Write<'a, Delete<K>>
    where
        K: CacheObject,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        self.delete_in(&Typed::<K>::new(), name, namespace)
    }

    /// Deletes every object of `K` in `namespace` (else the client's, else every namespace)
    /// that `list` selects (controller-runtime's `DeleteAllOf`).
    pub fn delete_all_of<'a, K>(
        &self,
        namespace: Option<&str>,
        list: &ListParams,
    ) -> Write<'a, DeleteAllOf<K>>
    where
        K: CacheObject,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        self.delete_all_in(&Typed::<K>::new(), namespace, list)
    }
}
