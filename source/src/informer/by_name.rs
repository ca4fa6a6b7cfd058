//! [`ByName`]: a cached object as a set member keyed by its namespace and name, and
//! [`NameRef`], the borrowed key that finds it.
//!
//! The informer's store and bookkeeping (each subscriber's view, the before-and-after of a
//! relist) need objects keyed by identity. A kube `ObjectRef` key owns copies of the name, the
//! namespace, the resourceVersion and the uid: four allocations per object per map, made again
//! for every event and every read. `ByName` borrows the identity from the object it holds, so a
//! set entry is one `Arc`, and a lookup by [`NameRef`] allocates nothing. Within one informer
//! every object has the same kind, so namespace and name identify it as an `ObjectRef` does.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use hashbrown::Equivalent;
use kube::Resource;

/// An `Arc` of an object that hashes and compares by `(namespace, name)`.
pub(crate) struct ByName<K>(pub(crate) Arc<K>);

impl<K: Resource> ByName<K> {
    /// A key for `object` (an `Arc` clone: no allocation).
    pub(crate) fn of(object: &Arc<K>) -> Self {
        ByName(Arc::clone(object))
    }

    fn identity(&self) -> (Option<&str>, Option<&str>) {
        let meta = self.0.meta();
        (meta.namespace.as_deref(), meta.name.as_deref())
    }
}

impl<K: Resource> Hash for ByName<K> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.identity().hash(state);
    }
}

impl<K: Resource> PartialEq for ByName<K> {
    fn eq(&self, other: &Self) -> bool {
        self.identity() == other.identity()
    }
}

impl<K: Resource> Eq for ByName<K> {}

/// The identity of an object by reference: hashes as the [`ByName`] of that object does and
/// compares equal to it, so a set of `ByName`s can be searched without an object at hand.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NameRef<'a> {
    pub(crate) namespace: Option<&'a str>,
    pub(crate) name: &'a str,
}

impl Hash for NameRef<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // The same value `ByName::identity` hashes.
        (self.namespace, Some(self.name)).hash(state);
    }
}

impl<K: Resource> Equivalent<ByName<K>> for NameRef<'_> {
    fn equivalent(&self, key: &ByName<K>) -> bool {
        key.identity() == (self.namespace, Some(self.name))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    fn cm(namespace: Option<&str>, name: &str, rv: &str) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                namespace: namespace.map(str::to_owned),
                name: Some(name.to_owned()),
                resource_version: Some(rv.to_owned()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        })
    }

    #[test]
    fn identity_is_namespace_and_name_only() {
        let mut set = HashSet::new();
        assert!(set.insert(ByName::of(&cm(Some("a"), "x", "1"))));
        // Another version of the same object replaces it; other namespaces and names do not.
        let newer = cm(Some("a"), "x", "2");
        let old = set.replace(ByName::of(&newer)).expect("same identity");
        assert_eq!(old.0.metadata.resource_version.as_deref(), Some("1"));
        assert!(set.insert(ByName::of(&cm(Some("b"), "x", "1"))));
        assert!(set.insert(ByName::of(&cm(Some("a"), "y", "1"))));
        assert!(set.insert(ByName::of(&cm(None, "x", "1"))));
        assert_eq!(set.len(), 4);
        let found = set.get(&ByName::of(&cm(Some("a"), "x", "9"))).unwrap();
        assert_eq!(found.0.metadata.resource_version.as_deref(), Some("2"));
        assert!(set.remove(&ByName::of(&cm(Some("a"), "x", "0"))));
        assert!(!set.contains(&ByName::of(&newer)));
    }

    #[test]
    fn a_name_ref_finds_what_its_object_would() {
        let mut set: hashbrown::HashSet<ByName<ConfigMap>> = hashbrown::HashSet::new();
        set.insert(ByName::of(&cm(Some("a"), "x", "1")));
        set.insert(ByName::of(&cm(None, "x", "2")));
        let find = |namespace, name| {
            set.get(&NameRef { namespace, name }).map(|found| {
                found
                    .0
                    .metadata
                    .resource_version
                    .clone()
                    .unwrap_or_default()
            })
        };
        assert_eq!(find(Some("a"), "x").as_deref(), Some("1"));
        assert_eq!(find(None, "x").as_deref(), Some("2"));
        assert_eq!(find(Some("b"), "x"), None);
        assert_eq!(find(Some("a"), "y"), None);
    }
}
