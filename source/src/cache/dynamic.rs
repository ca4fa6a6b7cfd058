//! Kinds chosen at run time: [`DynamicObject`]s of an [`ApiResource`] in the [`Cache`].
//!
//! A typed cache entry is keyed by its Rust type. Every dynamic kind has the same Rust type,
//! `DynamicObject`, so a dynamic entry is keyed by its [`ApiResource`] (group, version, kind
//! and plural) as well: a dynamic ConfigMap watch and a dynamic Secret watch are two informers
//! with two stores that never mix, and two readers of the same resource and
//! [`WatchScope`] share one. A dynamic entry is separate from a typed entry of the same
//! resource (`Cache::reader::<ConfigMap>` and a dynamic ConfigMap reader are two watches):
//! their objects are different Rust types.
//!
//! An [`ApiResource`] does not say whether the resource is namespaced, which the cache needs
//! (to refuse namespaces for a cluster-scoped kind, as it does for typed kinds) and so does a
//! controller (a cluster-scoped owner's requests have no namespace): a [`DynamicResource`]
//! carries both, built from discovery ([`DynamicResource::from_discovery`]), from a Rust type
//! ([`DynamicResource::of`]) or by hand.
//!
//! ```no_run
//! # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use kcr_source::{Cache, DynamicResource, Source, WatchScope};
//! use kube::core::{ApiResource, GroupVersionKind};
//! use kube::discovery::Scope;
//! use std::time::Duration;
//!
//! // A custom resource known only at run time (from configuration, say).
//! let gvk = GroupVersionKind::gvk("example.com", "v1", "Gadget");
//! let gadgets = DynamicResource::new(ApiResource::from_gvk(&gvk), Scope::Namespaced);
//! let cache = Cache::new(client);
//! let reader = cache.reader_dynamic(&gadgets, WatchScope::all().namespace("default"))?;
//! reader.wait_for_sync(Duration::from_secs(30)).await?;
//! for gadget in reader.list() {
//!     println!("{:?} size={}", gadget.metadata.name, gadget.data["spec"]["size"]);
//! }
//! # Ok(()) }
//! ```

use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::core::{ApiResource, DynamicObject, TypeMeta};
use kube::discovery::{ApiCapabilities, Scope};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;

use super::{Cache, CacheError, Readable, Reader, WatchScope};
use crate::Kind;
use crate::informer::Informer;
use crate::transform::Transform;

/// A kind chosen at run time: its [`ApiResource`] and whether it is namespaced.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DynamicResource {
    /// Group, version, kind and plural.
    pub resource: ApiResource,
    /// Namespaced or cluster-scoped.
    pub scope: Scope,
}

impl DynamicResource {
    /// `resource`, of `scope`.
    pub fn new(resource: ApiResource, scope: Scope) -> Self {
        DynamicResource { resource, scope }
    }

    /// A resource as discovery describes it (`kube::discovery::Discovery`,
    /// `kube::discovery::pinned_kind`, ...).
    pub fn from_discovery(resource: ApiResource, capabilities: &ApiCapabilities) -> Self {
        Self::new(resource, capabilities.scope.clone())
    }

    /// The resource of the Rust type `K` (`ApiResource::erase::<K>` and its scope): a typed
    /// kind handled as a dynamic one.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::{ConfigMap, Node};
    /// use kcr_source::DynamicResource;
    /// use kube::discovery::Scope;
    ///
    /// let configmaps = DynamicResource::of::<ConfigMap>();
    /// assert_eq!((configmaps.resource.plural.as_str(), &configmaps.scope), ("configmaps", &Scope::Namespaced));
    /// assert_eq!(DynamicResource::of::<Node>().scope, Scope::Cluster);
    /// ```
    pub fn of<K>() -> Self
    where
        K: kube::Resource<DynamicType = ()>,
        K::Scope: 'static,
    {
        let cluster = std::any::TypeId::of::<K::Scope>()
            == std::any::TypeId::of::<k8s_openapi::ClusterResourceScope>();
        Self::new(
            ApiResource::erase::<K>(&()),
            if cluster {
                Scope::Cluster
            } else {
                Scope::Namespaced
            },
        )
    }

    /// Whether the resource is namespaced.
    pub fn is_namespaced(&self) -> bool {
        self.scope == Scope::Namespaced
    }

    /// The `Api` for `namespace` (or all namespaces), or an error for a namespace on a
    /// cluster-scoped resource.
    pub fn api(
        &self,
        client: kube::Client,
        namespace: Option<&str>,
    ) -> Result<Api<DynamicObject>, CacheError> {
        match (namespace, self.is_namespaced()) {
            (None, _) => Ok(Api::all_with(client, &self.resource)),
            (Some(ns), true) => Ok(Api::namespaced_with(client, ns, &self.resource)),
            (Some(ns), false) => Err(CacheError::NamespaceOnClusterScoped {
                kind: self.resource.kind.clone(),
                namespace: ns.to_string(),
            }),
        }
    }
}

impl Cache {
    /// The informer of the dynamic `resource` for `options` (normalized).
    fn dynamic_informer(
        &self,
        resource: &DynamicResource,
        options: &WatchScope,
    ) -> Result<Arc<Informer<DynamicObject>>, CacheError> {
        let client = self.inner.client.clone();
        let backoff = self.watch_backoff();
        let types = TypeMeta {
            api_version: resource.resource.api_version.clone(),
            kind: resource.resource.kind.clone(),
        };
        self.informer::<DynamicObject, _>(
            options,
            resource.resource.clone(),
            |config: watcher::Config, namespace| {
                let api = resource.api(client.clone(), namespace)?;
                let types = types.clone();
                // List items of built-in kinds come without `apiVersion` and `kind`: every
                // cached dynamic object names its kind.
                Ok(watcher(api, config)
                    .backoff(backoff.build())
                    .map(move |event| {
                        event.map(|e| {
                            e.modify(|object| {
                                if object.types.is_none() {
                                    object.types = Some(types.clone());
                                }
                            })
                        })
                    })
                    .boxed())
            },
        )
    }

    /// A [`Kind`] source of the run-time kind `resource`, sharing the watch with every other
    /// user of the same resource and options (see the [module docs](self)).
    pub fn kind_dynamic(
        &self,
        resource: &DynamicResource,
        options: WatchScope,
    ) -> Result<Kind<DynamicObject>, CacheError> {
        let options = self.scope_for_dynamic(resource, &options).normalized()?;
        let informer = self.dynamic_informer(resource, &options)?;
        let r = &resource.resource;
        let name = format!("kind<DynamicObject {}/{}>", r.api_version, r.kind);
        Ok(Kind::from_parts(
            informer,
            Arc::clone(&self.inner.lifetime),
            name,
        ))
    }

    /// A [`Reader`] of the run-time kind `resource`, sharing the store with the
    /// [`kind_dynamic`](Self::kind_dynamic) sources of the same resource and options.
    pub fn reader_dynamic(
        &self,
        resource: &DynamicResource,
        options: WatchScope,
    ) -> Result<Reader<DynamicObject>, CacheError> {
        let options = self.scope_for_dynamic(resource, &options).normalized()?;
        let informer = self.dynamic_informer(resource, &options)?;
        Ok(Reader {
            informer,
            readable: Readable::new(resource.resource.kind.clone(), options.namespaces),
            _lifetime: Arc::clone(&self.inner.lifetime),
        })
    }

    /// Sets the transform of the run-time kind `resource` (see
    /// [`set_transform`](Self::set_transform); the default drops `metadata.managedFields`).
    /// Other dynamic kinds keep theirs. Fails once a watch of `resource` has started.
    pub fn set_transform_dynamic(
        &self,
        resource: &ApiResource,
        transform: impl Fn(&mut DynamicObject) + Send + Sync + 'static,
    ) -> Result<(), CacheError> {
        let transform: Transform<DynamicObject> = Arc::new(transform);
        self.register_transform::<DynamicObject>(resource.clone(), transform)
    }

    /// Sets the scope of the run-time kind `resource` (see [`set_scope`](Self::set_scope)).
    /// Fails once a watch of `resource` has started.
    pub fn set_scope_dynamic(
        &self,
        resource: &DynamicResource,
        scope: WatchScope,
    ) -> Result<(), CacheError> {
        self.register_scope::<DynamicObject>(resource.resource.clone(), scope)
    }

    /// The scope a watch of `resource` asking for `requested` gets (see
    /// [`scope_for`](Self::scope_for)).
    pub fn scope_for_dynamic(
        &self,
        resource: &DynamicResource,
        requested: &WatchScope,
    ) -> WatchScope {
        self.inner
            .scopes
            .lock()
            .resolve(&resource.resource, resource.is_namespaced(), requested)
    }

    /// The [`Reader`] of `resource` for `options` if its watch has started, without starting
    /// one (see [`reader_if_started`](Self::reader_if_started)).
    pub fn reader_dynamic_if_started(
        &self,
        resource: &DynamicResource,
        options: &WatchScope,
    ) -> Result<Option<Reader<DynamicObject>>, CacheError> {
        let options = self.scope_for_dynamic(resource, options).normalized()?;
        let key = super::InformerKey {
            type_id: std::any::TypeId::of::<DynamicObject>(),
            resource: resource.resource.clone(),
            options: options.clone(),
        };
        Ok(self
            .started_informer::<DynamicObject>(&key)
            .map(|informer| Reader {
                informer,
                readable: Readable::new(resource.resource.kind.clone(), options.namespaces),
                _lifetime: Arc::clone(&self.inner.lifetime),
            }))
    }

    /// Removes the watch of `resource` in `options` (see
    /// [`remove_informer`](Self::remove_informer)).
    pub fn remove_informer_dynamic(
        &self,
        resource: &DynamicResource,
        options: &WatchScope,
    ) -> Result<bool, CacheError> {
        let options = self.scope_for_dynamic(resource, options).normalized()?;
        Ok(self.remove_key(&super::InformerKey {
            type_id: std::any::TypeId::of::<DynamicObject>(),
            resource: resource.resource.clone(),
            options,
        }))
    }
}
