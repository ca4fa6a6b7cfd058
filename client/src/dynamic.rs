//! [`DynamicClient`]: the client's calls for kinds known at run time, `DynamicObject`s of a
//! [`DynamicResource`] (an `ApiResource` and its scope). Reads come from the cache's dynamic
//! informer of that resource (see [`kcr_source::dynamic`]); writes go to the API server with
//! the client's options, as for compiled-in kinds.
//!
//! ```no_run
//! # async fn demo(client: kcr_client::Client) -> Result<(), kcr_client::ClientError> {
//! use kcr_source::DynamicResource;
//! use kube::core::{ApiResource, GroupVersionKind};
//! use kube::discovery::Scope;
//!
//! let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
//! let widgets = DynamicResource::new(ApiResource::from_gvk(&gvk), Scope::Namespaced);
//! let widgets = client.dynamic(widgets);
//! if let Some(widget) = widgets.get("w1", Some("shop")).await? {
//!     println!("{:?}", widget.data.get("spec"));
//! }
//! # Ok(()) }
//! ```

use std::sync::Arc;

use kcr_source::{DynamicResource, Reader};
use kube::api::{DynamicObject, ListParams, Patch};
use serde::Serialize;

use crate::api_reader::{api_get, api_list};
use crate::client::Client;
use crate::error::ClientError;
use crate::read::{ListOptions, cached_get, cached_list, synced_reader};
use crate::write::{Create, Delete, DeleteAllOf, PatchOp, Update, Write};

/// The [`Client`]'s calls for one run-time kind. Made by [`Client::dynamic`]; cheap to clone.
#[derive(Debug, Clone)]
pub struct DynamicClient {
    client: Client,
    resource: DynamicResource,
}

impl Client {
    /// The client's calls for the run-time kind `resource`.
    pub fn dynamic(&self, resource: DynamicResource) -> DynamicClient {
        DynamicClient {
            client: self.clone(),
            resource,
        }
    }
}

impl DynamicClient {
    /// The resource this client reads and writes.
    pub fn resource(&self) -> &DynamicResource {
        &self.resource
    }

    /// The cached object `name` (see [`Client::get`]).
    pub async fn get(
        &self,
        name: &str,
        namespace: Option<&str>,
    ) -> Result<Option<Arc<DynamicObject>>, ClientError> {
        cached_get(&self.client, &self.resource, name, namespace).await
    }

    /// The cached objects `options` select (see [`Client::list`]).
    pub async fn list(
        &self,
        options: &ListOptions,
    ) -> Result<Vec<Arc<DynamicObject>>, ClientError> {
        cached_list(&self.client, &self.resource, options).await
    }

    /// The cache's reader of the resource, synced (see [`Client::reader`]).
    pub async fn reader(&self) -> Result<Reader<DynamicObject>, ClientError> {
        synced_reader(&self.client, &self.resource).await
    }

    /// Registers the index `name` on the resource's cached objects (see
    /// [`Client::index_field`]).
    pub fn index_field(
        &self,
        name: impl Into<String>,
        extract: impl Fn(&DynamicObject) -> Vec<String> + Send + Sync + 'static,
    ) -> Result<(), ClientError> {
        let reader = self
            .client
            .cache()
            .reader_dynamic(&self.resource, kcr_source::WatchScope::all())
            .map_err(|source| ClientError::Cache {
                kind: self.resource.resource.kind.clone(),
                source,
            })?;
        Ok(reader.add_index(name, extract)?)
    }

    /// The object `name` as the API server has it now (see [`ApiReader`](crate::ApiReader)).
    pub async fn get_uncached(
        &self,
        name: &str,
        namespace: Option<&str>,
    ) -> Result<Option<DynamicObject>, ClientError> {
        api_get(&self.client, &self.resource, name, namespace).await
    }

    /// The objects `params` select as the API server has them now.
    pub async fn list_uncached(
        &self,
        namespace: Option<&str>,
        params: &ListParams,
    ) -> Result<Vec<DynamicObject>, ClientError> {
        api_list(&self.client, &self.resource, namespace, params).await
    }

    /// Creates `object` (see [`Client::create`]).
    pub fn create<'a>(&self, object: &'a DynamicObject) -> Write<'a, Create<'a, DynamicObject>> {
        self.client.create_in(&self.resource, object)
    }

    /// Replaces `object` (see [`Client::update`]).
    pub fn update<'a>(&self, object: &'a DynamicObject) -> Write<'a, Update<'a, DynamicObject>> {
        self.client.update_in(&self.resource, object, None)
    }

    /// Replaces the status of `object` (see [`Client::update_status`]).
    pub fn update_status<'a>(
        &self,
        object: &'a DynamicObject,
    ) -> Write<'a, Update<'a, DynamicObject>> {
        self.client
            .update_in(&self.resource, object, Some("status"))
    }

    /// Patches the object `name`, or its `subresource` (see [`Client::patch`]).
    pub fn patch<'a, P: Serialize>(
        &self,
        subresource: Option<&'a str>,
        name: &str,
        namespace: Option<&str>,
        patch: &'a Patch<P>,
    ) -> Write<'a, PatchOp<'a, DynamicObject, P>> {
        self.client
            .patch_in(&self.resource, subresource, name, namespace, patch)
    }

    /// Server-side applies `object` (see [`Client::apply`]).
    pub fn apply<'a>(
        &self,
        object: &'a DynamicObject,
    ) -> Write<'a, PatchOp<'a, DynamicObject, &'a DynamicObject>> {
        self.client.apply_in(&self.resource, object)
    }

    /// Deletes the object `name` (see [`Client::delete`]).
    pub fn delete<'a>(
        &self,
        name: &str,
        namespace: Option<&str>,
    ) -> Write<'a, Delete<DynamicObject>> {
        self.client.delete_in(&self.resource, name, namespace)
    }

    /// Deletes every object `list` selects (see [`Client::delete_all_of`]).
    pub fn delete_all_of<'a>(
        &self,
        namespace: Option<&str>,
        list: &ListParams,
    ) -> Write<'a, DeleteAllOf<DynamicObject>> {
        self.client.delete_all_in(&self.resource, namespace, list)
    }
}
