//! Secondary indexes of a cached store: controller-runtime's field indexer.
//!
//! An index files every cached object under the values a function of the object returns (a
//! Pod under its node's name, a NodePool under each label key it sets, ...), so that
//! [`Reader::by_index`](crate::Reader::by_index) answers "which objects have this value" from
//! a hash map instead of scanning the store. Indexes belong to the shared informer: every
//! [`Reader`](crate::Reader) of the same (type, options) sees them, and a name can be
//! registered once. They are kept up to date in the informer's event path, under the same lock
//! as the store, before the event reaches any subscriber: a reconciler triggered by an event
//! finds the object under its new values. See [`Reader::add_index`](crate::Reader::add_index)
//! for an example.

use std::collections::HashMap;
use std::sync::Arc;

use kube::runtime::reflector::ObjectRef;

use crate::Event;
use crate::object::CacheObject;

/// The function an index files objects by: the values of one object (none, one or several).
pub type IndexFn<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// Errors of registering or querying an index.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    /// An index of this name exists already on this informer.
    #[error("an index named {index:?} already exists for this type and watch options")]
    Duplicate {
        /// The index name.
        index: String,
    },
    /// No index of this name was registered.
    #[error("no index named {index:?} (registered: {known:?}); add it with Reader::add_index")]
    Unknown {
        /// The index name asked for.
        index: String,
        /// The names that exist.
        known: Vec<String>,
    },
}

/// One index: value → objects, and object → the values it is filed under.
struct Index<K: CacheObject> {
    extract: IndexFn<K>,
    entries: HashMap<String, HashMap<ObjectRef<K>, Arc<K>>>,
    values_of: HashMap<ObjectRef<K>, Vec<String>>,
}

impl<K: CacheObject> Index<K> {
    fn insert(&mut self, key: ObjectRef<K>, object: &Arc<K>) {
        let mut values = (self.extract)(object);
        values.sort();
        values.dedup();
        for value in &values {
            self.entries
                .entry(value.clone())
                .or_default()
                .insert(key.clone(), Arc::clone(object));
        }
        if values.is_empty() {
            self.values_of.remove(&key);
        } else {
            self.values_of.insert(key, values);
        }
    }

    fn remove(&mut self, key: &ObjectRef<K>) {
        let Some(values) = self.values_of.remove(key) else {
            return;
        };
        for value in values {
            if let Some(objects) = self.entries.get_mut(&value) {
                objects.remove(key);
                if objects.is_empty() {
                    self.entries.remove(&value);
                }
            }
        }
    }
}

/// The indexes of one informer.
pub(crate) struct Indexes<K: CacheObject> {
    by_name: HashMap<String, Index<K>>,
}

impl<K: CacheObject> Default for Indexes<K> {
    fn default() -> Self {
        Self {
            by_name: HashMap::new(),
        }
    }
}

impl<K: CacheObject> Indexes<K> {
    /// Registers `name`, filing the objects already cached.
    pub(crate) fn add(
        &mut self,
        name: String,
        extract: IndexFn<K>,
        current: impl IntoIterator<Item = (ObjectRef<K>, Arc<K>)>,
    ) -> Result<(), IndexError> {
        if self.by_name.contains_key(&name) {
            return Err(IndexError::Duplicate { index: name });
        }
        let mut index = Index {
            extract,
            entries: HashMap::new(),
            values_of: HashMap::new(),
        };
        for (key, object) in current {
            index.insert(key, &object);
        }
        self.by_name.insert(name, index);
        Ok(())
    }

    /// Follows the store's changes (`key` gives an object's store key).
    pub(crate) fn apply(&mut self, events: &[Event<K>], key: impl Fn(&K) -> ObjectRef<K>) {
        for event in events {
            match event {
                Event::Create { object, .. } | Event::Update { new: object, .. } => {
                    let k = key(object);
                    for index in self.by_name.values_mut() {
                        index.remove(&k);
                        index.insert(k.clone(), object);
                    }
                }
                Event::Delete { object, .. } => {
                    let k = key(object);
                    for index in self.by_name.values_mut() {
                        index.remove(&k);
                    }
                }
                Event::Generic { .. } => {}
            }
        }
    }

    /// The objects filed under `value` in `name`, by namespace then name.
    pub(crate) fn get(&self, name: &str, value: &str) -> Result<Vec<Arc<K>>, IndexError> {
        let index = self.by_name.get(name).ok_or_else(|| {
            let mut known: Vec<String> = self.by_name.keys().cloned().collect();
            known.sort();
            IndexError::Unknown {
                index: name.to_string(),
                known,
            }
        })?;
        let mut out: Vec<Arc<K>> = index
            .entries
            .get(value)
            .map(|objects| objects.values().cloned().collect())
            .unwrap_or_default();
        out.sort_by(|a, b| {
            (a.meta().namespace.as_deref(), a.meta().name.as_deref())
                .cmp(&(b.meta().namespace.as_deref(), b.meta().name.as_deref()))
        });
        Ok(out)
    }
}
