//! Cached reads: [`Client::get`], [`Client::list`] with [`ListOptions`] (namespace, label
//! selector, index lookups), [`Client::index_field`] and [`Client::reader`].
//!
//! The first read of a kind starts its watch in the shared cache, in the scope the cache
//! resolves for it (its own, else the cache-wide default, else every object: see
//! [`kcr_source::defaults`]); a controller's `for_kind`/`owns` watch of the kind resolves the
//! same way, so the two share one watch. The read then waits for the watch's first complete
//! list, up to the client's sync timeout; a kind the API server does not serve fails there
//! with [`ClientError::SyncTimeout`] naming the watch's 404.

use std::collections::HashSet;
use std::sync::Arc;

use kcr_source::{CacheObject, Reader, ScopedApi, WatchScope};
use kube::ResourceExt;
use kube::core::SelectorExt;

use crate::client::Client;
use crate::error::ClientError;
use crate::target::{Target, Typed};

/// What [`Client::list`] returns: every cached object of the kind, narrowed by a namespace, a
/// label selector and index lookups (controller-runtime's `InNamespace`, `MatchingLabels` /
/// `MatchingLabelsSelector` and `MatchingFields`).
///
/// ```
/// use kcr_client::ListOptions;
///
/// let options = ListOptions::new()
///     .namespace("team-a")
///     .labels("app=web,tier!=cache")
///     .matching_field("spec.nodeName", "worker-1");
/// assert_eq!(options.matching_fields, vec![("spec.nodeName".to_string(), "worker-1".to_string())]);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use]
pub struct ListOptions {
    /// Only this namespace (else the client's namespace, else every namespace).
    pub namespace: Option<String>,
    /// A label selector such as `app=web,tier in (a,b)`.
    pub labels: Option<String>,
    /// Index lookups, all of which must match: `(index name, value)`. The cache keeps no
    /// field selectors; as in controller-runtime, a field is looked up through an index of
    /// that name registered with [`Client::index_field`].
    pub matching_fields: Vec<(String, String)>,
}

impl ListOptions {
    /// Every object.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only objects in `namespace`.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Only objects whose labels match `selector`.
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.labels = Some(selector.into());
        self
    }

    /// Only objects filed under `value` in the index `index`.
    pub fn matching_field(mut self, index: impl Into<String>, value: impl Into<String>) -> Self {
        self.matching_fields.push((index.into(), value.into()));
        self
    }
}

impl Client {
    /// The cached object `name` in `namespace` (`None` for cluster-scoped kinds, or for the
    /// client's own namespace): `Ok(None)` when the cache does not hold it. Starts the kind's
    /// watch on first use and waits for it to sync.
    ///
    /// ```no_run
    /// # async fn demo(client: kcr_client::Client) -> Result<(), kcr_client::ClientError> {
    /// use k8s_openapi::api::apps::v1::Deployment;
    ///
    /// let Some(deployment) = client.get::<Deployment>("web", Some("shop")).await? else {
    ///     return Ok(()); // gone: nothing to do (controller-runtime's IgnoreNotFound)
    /// };
    /// # let _ = deployment;
    /// # Ok(()) }
    /// ```
    pub async fn get<K>(
        &self,
        name: &str,
        namespace: Option<&str>,
    ) -> Result<Option<Arc<K>>, ClientError>
    where
        K: CacheObject,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        cached_get(self, &Typed::<K>::new(), name, namespace).await
    }

    /// The cached objects `options` select, sorted by namespace and name. Starts the kind's
    /// watch on first use and waits for it to sync.
    pub async fn list<K>(&self, options: &ListOptions) -> Result<Vec<Arc<K>>, ClientError>
    where
        K: CacheObject,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        cached_list(self, &Typed::<K>::new(), options).await
    }

    /// The cache's [`Reader`] of `K` (the one [`get`](Self::get) and [`list`](Self::list) read),
    /// synced: for callers that read one kind many times, or need its sync handle.
    pub async fn reader<K>(&self) -> Result<Reader<K>, ClientError>
    where
        K: CacheObject,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        synced_reader(self, &Typed::<K>::new()).await
    }

    /// Registers the index `name` on `K`'s cached objects (controller-runtime's
    /// `FieldIndexer.IndexField`): every object is filed under the values `extract` returns,
    /// and [`ListOptions::matching_field`] finds them by value. Starts the kind's watch if it
    /// has not started (without waiting for it to sync); registering a name twice is
    /// [`ClientError::Index`].
    ///
    /// ```no_run
    /// # fn demo(client: &kcr_client::Client) -> Result<(), kcr_client::ClientError> {
    /// use k8s_openapi::api::core::v1::Pod;
    ///
    /// client.index_field::<Pod>("spec.nodeName", |pod| {
    ///     pod.spec.iter().filter_map(|spec| spec.node_name.clone()).collect()
    /// })?;
    /// # Ok(()) }
    /// ```
    pub fn index_field<K>(
        &self,
        name: impl Into<String>,
        extract: impl Fn(&K) -> Vec<String> + Send + Sync + 'static,
    ) -> Result<(), ClientError>
    where
        K: CacheObject,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        let target = Typed::<K>::new();
        let reader = target
            .reader(&self.shared.cache, WatchScope::all())
            .map_err(|source| ClientError::Cache {
                kind: target.kind(),
                source,
            })?;
        Ok(reader.add_index(name, extract)?)
    }
}

/// The kind's reader, its watch started (unless the client fails on a missing informer) and
/// synced within the client's sync timeout.
pub(crate) async fn synced_reader<K: CacheObject>(
    client: &Client,
    target: &impl Target<K>,
) -> Result<Reader<K>, ClientError> {
    let cache = &client.shared.cache;
    let scope = WatchScope::all();
    let cache_error = |source| ClientError::Cache {
        kind: target.kind(),
        source,
    };
    let reader = if client.shared.fail_on_missing_informer {
        target
            .reader_if_started(cache, &scope)
            .map_err(cache_error)?
            .ok_or_else(|| ClientError::NoInformer {
                kind: target.kind(),
            })?
    } else {
        target.reader(cache, scope).map_err(cache_error)?
    };
    if !reader.sync().is_synced() {
        let timeout = client.shared.sync_timeout;
        if reader.wait_for_sync(timeout).await.is_err() {
            return Err(ClientError::SyncTimeout {
                kind: target.kind(),
                timeout,
                last_error: reader.last_error(),
            });
        }
    }
    Ok(reader)
}

pub(crate) async fn cached_get<K: CacheObject>(
    client: &Client,
    target: &impl Target<K>,
    name: &str,
    namespace: Option<&str>,
) -> Result<Option<Arc<K>>, ClientError> {
    let namespace = client.namespace_of(&target.kind(), target.namespaced(), name, namespace)?;
    let reader = synced_reader(client, target).await?;
    Ok(reader.get(name, namespace.as_deref())?)
}

pub(crate) async fn cached_list<K: CacheObject>(
    client: &Client,
    target: &impl Target<K>,
    options: &ListOptions,
) -> Result<Vec<Arc<K>>, ClientError> {
    let namespace = client.list_namespace(
        &target.kind(),
        target.namespaced(),
        "",
        options.namespace.as_deref(),
    )?;
    let selector = options
        .labels
        .as_deref()
        .map(kcr_source::parse_label_selector)
        .transpose()?;
    let reader = synced_reader(client, target).await?;
    if let Some(ns) = &namespace {
        reader.check_namespace(ns)?;
    }
    let mut objects = match options.matching_fields.split_first() {
        None => match &namespace {
            Some(ns) => reader.list_in(ns)?,
            None => reader.list(),
        },
        Some(((index, value), rest)) => {
            let mut found = reader.by_index(index, value)?;
            for (index, value) in rest {
                let also: HashSet<(Option<String>, String)> = reader
                    .by_index(index, value)?
                    .iter()
                    .map(|o| (o.namespace(), o.name_any()))
                    .collect();
                found.retain(|o| also.contains(&(o.namespace(), o.name_any())));
            }
            if let Some(ns) = &namespace {
                found.retain(|o| o.meta().namespace.as_deref() == Some(ns.as_str()));
            }
            found
        }
    };
    if let Some(selector) = &selector {
        let empty = Default::default();
        objects.retain(|o| selector.matches(o.meta().labels.as_ref().unwrap_or(&empty)));
    }
    objects.sort_by(|a, b| {
        (a.meta().namespace.as_deref(), a.meta().name.as_deref())
            .cmp(&(b.meta().namespace.as_deref(), b.meta().name.as_deref()))
    });
    Ok(objects)
}
