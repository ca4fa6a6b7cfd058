//! Each write verb once, for any kind the client knows ([`Target`]: a compiled-in kind or a
//! run-time one): where the write goes ([`Addressed`]) and the [`Write`] to await. The typed
//! calls on [`Client`] ([`super::typed`]) and the dynamic ones on
//! [`DynamicClient`](crate::dynamic::DynamicClient) are one line each on top of these, so a
//! new verb is one operation ([`super`]) and one function here.

use kcr_source::CacheObject;
use kube::api::{DeleteParams, ListParams, Patch};
use serde::Serialize;

use super::{Addressed, Create, Delete, DeleteAllOf, PatchBody, PatchOp, Update, Write};
use crate::client::Client;
use crate::error::ClientError;
use crate::target::Target;

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

    /// Where a write of `object` goes (its name and namespace).
    pub(crate) fn address_object<K: CacheObject>(
        &self,
        target: &impl Target<K>,
        object: &K,
    ) -> Result<Addressed<K>, ClientError> {
        let meta = object.meta();
        self.address(target, meta.name.as_deref(), meta.namespace.as_deref())
    }

    /// Creates `object`.
    pub(crate) fn create_in<'a, K: CacheObject + Serialize>(
        &self,
        target: &impl Target<K>,
        object: &'a K,
    ) -> Write<'a, Create<'a, K>> {
        let at = self.address_object(target, object);
        Write::new(self.defaults.clone(), Create { at, object })
    }

    /// Replaces `object`, or its `subresource`.
    pub(crate) fn update_in<'a, K: CacheObject + Serialize>(
        &self,
        target: &impl Target<K>,
        object: &'a K,
        subresource: Option<&'a str>,
    ) -> Write<'a, Update<'a, K>> {
        let at = self.address_object(target, object);
        Write::new(
            self.defaults.clone(),
            Update {
                at,
                object,
                subresource,
            },
        )
    }

    /// Patches the object `name`, or its `subresource`.
    pub(crate) fn patch_in<'a, K: CacheObject, P: Serialize>(
        &self,
        target: &impl Target<K>,
        subresource: Option<&'a str>,
        name: &str,
        namespace: Option<&str>,
        patch: &'a Patch<P>,
    ) -> Write<'a, PatchOp<'a, K, P>> {
        let at = self.address(target, Some(name), namespace);
        Write::new(
            self.defaults.clone(),
            PatchOp {
                at,
                patch: PatchBody::Borrowed(patch),
                subresource,
            },
        )
    }

    /// Server-side applies `object`.
    pub(crate) fn apply_in<'a, K: CacheObject + Serialize>(
        &self,
        target: &impl Target<K>,
        object: &'a K,
    ) -> Write<'a, PatchOp<'a, K, &'a K>> {
        let at = self.address_object(target, object);
        Write::new(
            self.defaults.clone(),
            PatchOp {
                at,
                patch: PatchBody::Owned(Patch::Apply(object)),
                subresource: None,
            },
        )
    }

    /// Deletes the object `name` (an empty name addresses none: the write fails naming it).
    pub(crate) fn delete_in<'a, K: CacheObject>(
        &self,
        target: &impl Target<K>,
        name: &str,
        namespace: Option<&str>,
    ) -> Write<'a, Delete<K>> {
        let name = (!name.is_empty()).then_some(name);
        let at = self.address(target, name, namespace);
        Write::new(
            self.defaults.clone(),
            Delete {
                at,
                params: DeleteParams::default(),
            },
        )
    }

    /// Deletes every object `list` selects in `namespace` (else the client's, else every
    /// namespace).
    pub(crate) fn delete_all_in<'a, K: CacheObject>(
        &self,
        target: &impl Target<K>,
        namespace: Option<&str>,
        list: &ListParams,
    ) -> Write<'a, DeleteAllOf<K>> {
        let at = self.address_all(target, namespace);
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
