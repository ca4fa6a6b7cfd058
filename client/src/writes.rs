//! The [`Client`]'s write calls for compiled-in kinds; each returns a [`Write`] to await
//! (see [`crate::write`] for the per-call options).

use kcr_source::{CacheObject, ScopedApi};
use kube::api::{DeleteParams, ListParams, Patch};
use serde::Serialize;

use crate::client::Client;
use crate::error::ClientError;
use crate::target::{Target, Typed};
use crate::write::{Addressed, Create, Delete, DeleteAllOf, PatchBody, PatchOp, Update, Write};

impl Client {
    /// Where a write of the object `name` in `namespace` goes.
    pub(crate) fn address<K: CacheObject>(
        &self,
        target: &impl Target<K>,
        name: Option<&str>,
        namespace: Option<&str>,
    ) -> Result<Addressed<K>, ClientError> {
        let kind = target.kind();
        let namespace =
            self.namespace_of(&kind, target.namespaced(), name.unwrap_or(""), namespace)?;
        Ok(Addressed {
            api: target
                .api(self.kube_client(), namespace.as_deref())
                .map_err(|source| ClientError::Cache {
                    kind: kind.clone(),
                    source,
                })?,
            kind,
            namespace,
            name: name.map(str::to_string),
        })
    }

    /// Where a list or collection write in `namespace` (or every namespace) goes.
    pub(crate) fn address_all<K: CacheObject>(
        &self,
        target: &impl Target<K>,
        namespace: Option<&str>,
    ) -> Result<Addressed<K>, ClientError> {
        let kind = target.kind();
        let namespace = self.list_namespace(&kind, target.namespaced(), "", namespace)?;
        Ok(Addressed {
            api: target
                .api(self.kube_client(), namespace.as_deref())
                .map_err(|source| ClientError::Cache {
                    kind: kind.clone(),
                    source,
                })?,
            kind,
            namespace,
            name: None,
        })
    }

    pub(crate) fn address_object<K: CacheObject>(
        &self,
        target: &impl Target<K>,
        object: &K,
    ) -> Result<Addressed<K>, ClientError> {
        let meta = object.meta();
        self.address(target, meta.name.as_deref(), meta.namespace.as_deref())
    }

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
        let at = self.address_object(&Typed::<K>::new(), object);
        Write::new(self.defaults.clone(), Create { at, object })
    }

    /// Replaces `object` (a PUT; its `resourceVersion`, if set, must be current, else
    /// [`ClientError::is_conflict`]); returns it as stored.
    pub fn update<'a, K>(&self, object: &'a K) -> Write<'a, Update<'a, K>>
    where
        K: CacheObject + Serialize,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        let at = self.address_object(&Typed::<K>::new(), object);
        Write::new(
            self.defaults.clone(),
            Update {
                at,
                object,
                subresource: None,
            },
        )
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
        let at = self.address_object(&Typed::<K>::new(), object);
        Write::new(
            self.defaults.clone(),
            Update {
                at,
                object,
                subresource: Some(subresource),
            },
        )
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
        self.patch_subresource_opt(None, name, namespace, patch)
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
        self.patch_subresource_opt(Some("status"), name, namespace, patch)
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
        self.patch_subresource_opt(Some(subresource), name, namespace, patch)
    }

    fn patch_subresource_opt<'a, K, P>(
        &self,
        subresource: Option<&'a str>,
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
        let at = self.address(&Typed::<K>::new(), Some(name), namespace);
        Write::new(
            self.defaults.clone(),
            PatchOp {
                at,
                patch: PatchBody::Borrowed(patch),
                subresource,
            },
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
        let at = self.address_object(&Typed::<K>::new(), object);
        Write::new(
            self.defaults.clone(),
            PatchOp {
                at,
                patch: PatchBody::Owned(Patch::Apply(object)),
                subresource: None,
            },
        )
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
        let name = (!name.is_empty()).then_some(name);
        let at = self.address(&Typed::<K>::new(), name, namespace);
        Write::new(
            self.defaults.clone(),
            Delete {
                at,
                params: DeleteParams::default(),
            },
        )
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
        let at = self.address_all(&Typed::<K>::new(), namespace);
        Write::new(
            self.defaults.clone(),
            DeleteAllOf {
                at,
                list: list.clone(),
                params: DeleteParams::default(),
            },
        )
    }
}
