//! [`ApiReader`]: reads that go to the API server, for the few that must not be a cache's
//! (controller-runtime's `mgr.GetAPIReader()`): reading back one's own write at once, reading
//! a kind too large or too rarely read to cache, or a kind the operator may get but not watch.

use kcr_source::{CacheObject, ScopedApi};
use kube::api::ListParams;

use crate::client::Client;
use crate::error::{ClientError, Verb};
use crate::target::{Target, Typed};

/// Uncached reads through the [`Client`]'s connection, in its namespace scope. Made by
/// [`Client::api_reader`].
#[derive(Debug, Clone)]
pub struct ApiReader {
    client: Client,
}

impl Client {
    /// Reads that go to the API server instead of the cache.
    pub fn api_reader(&self) -> ApiReader {
        ApiReader {
            client: self.clone(),
        }
    }
}

impl ApiReader {
    /// The object `name` in `namespace` as the API server has it now: `Ok(None)` on 404.
    pub async fn get<K>(
        &self,
        name: &str,
        namespace: Option<&str>,
    ) -> Result<Option<K>, ClientError>
    where
        K: CacheObject,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        api_get(&self.client, &Typed::<K>::new(), name, namespace).await
    }

    /// The objects of `namespace` (or every namespace) that `params` select (label and field
    /// selectors the API server evaluates, limits), as the API server has them now.
    pub async fn list<K>(
        &self,
        namespace: Option<&str>,
        params: &ListParams,
    ) -> Result<Vec<K>, ClientError>
    where
        K: CacheObject,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        api_list(&self.client, &Typed::<K>::new(), namespace, params).await
    }
}

pub(crate) async fn api_get<K: CacheObject>(
    client: &Client,
    target: &impl Target<K>,
    name: &str,
    namespace: Option<&str>,
) -> Result<Option<K>, ClientError> {
    let kind = target.kind();
    let namespace = client.namespace_of(&kind, target.namespaced(), name, namespace)?;
    let api = target
        .api(client.kube_client(), namespace.as_deref())
        .map_err(|source| ClientError::Cache {
            kind: kind.clone(),
            source,
        })?;
    api.get_opt(name).await.map_err(|source| ClientError::Api {
        verb: Verb::Get,
        kind,
        name: Some(name.to_string()),
        namespace,
        source: Box::new(source),
    })
}

pub(crate) async fn api_list<K: CacheObject>(
    client: &Client,
    target: &impl Target<K>,
    namespace: Option<&str>,
    params: &ListParams,
) -> Result<Vec<K>, ClientError> {
    let kind = target.kind();
    let namespace = client.list_namespace(&kind, target.namespaced(), "", namespace)?;
    let api = target
        .api(client.kube_client(), namespace.as_deref())
        .map_err(|source| ClientError::Cache {
            kind: kind.clone(),
            source,
        })?;
    api.list(params)
        .await
        .map(|list| list.items)
        .map_err(|source| ClientError::Api {
            verb: Verb::List,
            kind,
            name: None,
            namespace,
            source: Box::new(source),
        })
}
