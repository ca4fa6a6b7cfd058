//! [`ObjectStore`]: the informer's cache, every object once, found by namespace and name.
//!
//! Entries are the cached `Arc`s themselves ([`ByName`]): no key copies the name, namespace,
//! resourceVersion or uid, a read by [`NameRef`] allocates nothing, and an applied watch event
//! is stored as it came, never cloned. Only the informer writes, holding its state lock, so the
//! store changes in step with the events its subscribers get; readers take a shared lock.

use std::sync::Arc;

use hashbrown::HashSet;
use kube::Resource;
use parking_lot::RwLock;

use super::by_name::{ByName, NameRef};

/// The objects of one informer.
pub(crate) struct ObjectStore<K> {
    objects: RwLock<HashSet<ByName<K>>>,
}

impl<K: Resource> Default for ObjectStore<K> {
    fn default() -> Self {
        ObjectStore {
            objects: RwLock::new(HashSet::new()),
        }
    }
}

impl<K: Resource> ObjectStore<K> {
    /// The object `name` in `namespace` (`None`: cluster-scoped).
    pub(crate) fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        self.objects
            .read()
            .get(&NameRef { namespace, name })
            .map(|found| Arc::clone(&found.0))
    }

    /// The cached object with the identity of `object`.
    pub(crate) fn get_like(&self, object: &K) -> Option<Arc<K>> {
        let meta = object.meta();
        self.get(
            meta.namespace.as_deref(),
            meta.name.as_deref().unwrap_or_default(),
        )
    }

    /// Stores `object`, returning the version it replaces.
    pub(crate) fn insert(&self, object: Arc<K>) -> Option<Arc<K>> {
        self.objects
            .write()
            .replace(ByName(object))
            .map(|old| old.0)
    }

    /// Removes the object with the identity of `object`, returning it.
    pub(crate) fn remove_like(&self, object: &K) -> Option<Arc<K>> {
        let meta = object.meta();
        let key = NameRef {
            namespace: meta.namespace.as_deref(),
            name: meta.name.as_deref().unwrap_or_default(),
        };
        self.objects.write().take(&key).map(|old| old.0)
    }

    /// Replaces every object with `objects` (the result of a list).
    pub(crate) fn replace_all(&self, objects: impl IntoIterator<Item = Arc<K>>) {
        let set: HashSet<ByName<K>> = objects.into_iter().map(ByName).collect();
        *self.objects.write() = set;
    }

    /// Every object.
    pub(crate) fn state(&self) -> Vec<Arc<K>> {
        self.objects
            .read()
            .iter()
            .map(|o| Arc::clone(&o.0))
            .collect()
    }

    /// The objects `keep` accepts.
    pub(crate) fn state_filter(&self, mut keep: impl FnMut(&K) -> bool) -> Vec<Arc<K>> {
        self.objects
            .read()
            .iter()
            .filter(|o| keep(&o.0))
            .map(|o| Arc::clone(&o.0))
            .collect()
    }

    /// Number of objects.
    pub(crate) fn len(&self) -> usize {
        self.objects.read().len()
    }

    /// Whether the store holds no object.
    pub(crate) fn is_empty(&self) -> bool {
        self.objects.read().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    fn cm(namespace: &str, name: &str, rv: &str) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                namespace: Some(namespace.to_owned()),
                name: Some(name.to_owned()),
                resource_version: Some(rv.to_owned()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        })
    }

    fn rv(object: Option<Arc<ConfigMap>>) -> Option<String> {
        object.and_then(|o| o.metadata.resource_version.clone())
    }

    #[test]
    fn objects_are_stored_replaced_and_removed_by_identity() {
        let store = ObjectStore::default();
        assert!(store.is_empty());
        assert_eq!(rv(store.insert(cm("a", "x", "1"))), None);
        assert_eq!(rv(store.insert(cm("a", "x", "2"))).as_deref(), Some("1"));
        store.insert(cm("b", "x", "3"));
        assert_eq!(store.len(), 2);
        assert_eq!(rv(store.get(Some("a"), "x")).as_deref(), Some("2"));
        assert_eq!(rv(store.get_like(&cm("b", "x", "0"))).as_deref(), Some("3"));
        assert_eq!(store.get(Some("c"), "x").map(|_| ()), None);
        assert_eq!(store.get(None, "x").map(|_| ()), None);
        assert_eq!(
            rv(store.remove_like(&cm("a", "x", "9"))).as_deref(),
            Some("2")
        );
        assert_eq!(store.remove_like(&cm("a", "x", "9")).map(|_| ()), None);
        assert_eq!(
            store
                .state_filter(|o| o.metadata.namespace.as_deref() == Some("b"))
                .len(),
            1
        );
        store.replace_all([cm("c", "y", "4"), cm("c", "z", "5")]);
        let mut names: Vec<_> = store
            .state()
            .iter()
            .map(|o| o.metadata.name.clone().unwrap_or_default())
            .collect();
        names.sort();
        assert_eq!(names, ["y", "z"]);
    }
}
