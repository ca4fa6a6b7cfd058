//! What the client needs to know about a kind, for typed kinds (`Typed<K>`) and run-time kinds
//! (a [`DynamicResource`]) alike: its name, whether it is namespaced, its `Api`, and its reader
//! in the shared cache.

use std::marker::PhantomData;

use kcr_source::{Cache, CacheError, CacheObject, DynamicResource, Reader, ScopedApi, WatchScope};
use kube::api::{Api, DynamicObject};

/// A kind the client reads and writes.
pub(crate) trait Target<K: CacheObject>: Send + Sync {
    /// The kind's name, for errors.
    fn kind(&self) -> String;
    /// Whether objects of the kind live in namespaces.
    fn namespaced(&self) -> bool;
    /// The `Api` of `namespace` (given only for namespaced kinds) or of every namespace.
    fn api(&self, kube: kube::Client, namespace: Option<&str>) -> Result<Api<K>, CacheError>;
    /// The cache's reader of the kind in `scope`, its watch started if it was not.
    fn reader(&self, cache: &Cache, scope: WatchScope) -> Result<Reader<K>, CacheError>;
    /// The cache's reader of the kind in `scope`, if its watch has started.
    fn reader_if_started(
        &self,
        cache: &Cache,
        scope: &WatchScope,
    ) -> Result<Option<Reader<K>>, CacheError>;
}

/// A compiled-in kind.
pub(crate) struct Typed<K>(PhantomData<fn() -> K>);

impl<K> Typed<K> {
    pub(crate) fn new() -> Self {
        Typed(PhantomData)
    }
}

impl<K> Target<K> for Typed<K>
where
    K: CacheObject,
    K::DynamicType: Default,
    K::Scope: ScopedApi,
{
    fn kind(&self) -> String {
        K::kind(&Default::default()).into_owned()
    }

    fn namespaced(&self) -> bool {
        <K::Scope as ScopedApi>::NAMESPACED
    }

    fn api(&self, kube: kube::Client, namespace: Option<&str>) -> Result<Api<K>, CacheError> {
        <K::Scope as ScopedApi>::api::<K>(kube, namespace)
    }

    fn reader(&self, cache: &Cache, scope: WatchScope) -> Result<Reader<K>, CacheError> {
        cache.reader::<K>(scope)
    }

    fn reader_if_started(
        &self,
        cache: &Cache,
        scope: &WatchScope,
    ) -> Result<Option<Reader<K>>, CacheError> {
        cache.reader_if_started::<K>(scope)
    }
}

impl Target<DynamicObject> for DynamicResource {
    fn kind(&self) -> String {
        self.resource.kind.clone()
    }

    fn namespaced(&self) -> bool {
        self.is_namespaced()
    }

    fn api(
        &self,
        kube: kube::Client,
        namespace: Option<&str>,
    ) -> Result<Api<DynamicObject>, CacheError> {
        DynamicResource::api(self, kube, namespace)
    }

    fn reader(
        &self,
        cache: &Cache,
        scope: WatchScope,
    ) -> Result<Reader<DynamicObject>, CacheError> {
        cache.reader_dynamic(self, scope)
    }

    fn reader_if_started(
        &self,
        cache: &Cache,
        scope: &WatchScope,
    ) -> Result<Option<Reader<DynamicObject>>, CacheError> {
        cache.reader_dynamic_if_started(self, scope)
    }
}
