//! The object store: every object as a `serde_json::Value` plus its pre-serialised JSON bytes,
//! in a `BTreeMap` keyed by `(namespace, name)` per resource; one global resourceVersion counter
//! (like etcd's revision) bumped by every write; a bounded event log that watches and paginated
//! lists read from; owner-reference bookkeeping for garbage collection; finalizer-aware deletion.
//!
//! The store is synchronous and lives behind one mutex in the server. Every mutation goes
//! through [`Store::create`], [`Store::update`] or [`Store::delete`], which keep the metadata
//! rules (uid, creationTimestamp, generation, deletionTimestamp, finalizers) and cascade
//! deletions to dependents.

mod delete;
mod log;
#[cfg(test)]
mod tests;
mod write;

pub(crate) use write::{generation_after_update, tracks_generation};

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use crate::resources::Registry;

/// `(namespace, name)`; the namespace is `""` for cluster-scoped objects.
pub type ObjKey = (String, String);

/// One stored object version: the JSON value and its serialised bytes.
#[derive(Debug)]
pub struct StoredObject {
    /// The object.
    pub value: Value,
    /// The object's JSON as kube-apiserver writes it, followed by a newline (a response body
    /// as is), computed once per write: a built-in's `kind`, `apiVersion` and `metadata`
    /// first, a custom resource's members in key order (as Go writes a map).
    pub bytes: Bytes,
    /// The resourceVersion of this object version.
    pub rv: u64,
    /// Whether the object is of a built-in (typed) kind.
    typed: bool,
    /// Offset in `bytes` of the members after `kind` and `apiVersion` (see
    /// [`TypedJson::after_type`](crate::json::TypedJson)); 1 when a list item keeps them.
    item_start: usize,
}

impl StoredObject {
    /// A stored version of `value` at `rv`; `typed` for a built-in kind.
    pub(crate) fn new(value: Value, rv: u64, typed: bool) -> Arc<Self> {
        let (mut out, item_start) = if typed {
            let json = crate::json::typed(&value);
            (json.bytes, json.after_type.max(1))
        } else {
            // invariant: a serde_json::Value always serialises (keys are strings)
            (serde_json::to_vec(&value).unwrap_or_default(), 1)
        };
        out.push(b'\n');
        Arc::new(StoredObject {
            value,
            bytes: Bytes::from(out),
            rv,
            typed,
            item_start,
        })
    }

    /// The members of the object as a list item, without the opening brace: a built-in's
    /// list items carry no `kind` and `apiVersion` (typed list items have an empty
    /// `TypeMeta`); a custom resource's keep them.
    pub fn list_item_members(&self) -> &[u8] {
        let end = self.bytes.len().saturating_sub(1);
        self.bytes.get(self.item_start..end).unwrap_or_default()
    }

    /// This version relabelled with resourceVersion `rv` (a watch's DELETED event for an
    /// object that left its selector carries the last matching state at the new version).
    pub(crate) fn at_rv(&self, rv: u64) -> Arc<Self> {
        let mut value = self.value.clone();
        set_rv(&mut value, rv);
        StoredObject::new(value, rv, self.typed)
    }

    /// `metadata.uid` (empty if absent).
    pub fn uid(&self) -> &str {
        self.value["metadata"]["uid"].as_str().unwrap_or_default()
    }
}

/// The type of a watch event on the wire (`ADDED`, `MODIFIED`, `DELETED`). Not a controller's
/// event kind: that is `kcr_core::EventKind`, the one type of that name in kcr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchEventType {
    /// The object was created.
    Added,
    /// The object changed.
    Modified,
    /// The object was removed.
    Deleted,
}

impl WatchEventType {
    /// The wire name (`ADDED`, `MODIFIED`, `DELETED`).
    pub fn as_str(self) -> &'static str {
        match self {
            WatchEventType::Added => "ADDED",
            WatchEventType::Modified => "MODIFIED",
            WatchEventType::Deleted => "DELETED",
        }
    }
}

/// One entry of the event log.
#[derive(Debug)]
pub struct LogEvent {
    /// The resourceVersion of the write.
    pub rv: u64,
    /// The resource key ([`ResourceType::key`](crate::resources::ResourceType::key)).
    pub resource: Arc<str>,
    /// Namespace and name.
    pub key: ObjKey,
    /// What happened.
    pub kind: WatchEventType,
    /// The object after the write (for deletions: the last state, with the deletion's RV).
    pub object: Arc<StoredObject>,
    /// The object before the write (`None` for creations).
    pub prev: Option<Arc<StoredObject>>,
}

/// How dependents are treated when their owner is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Propagation {
    /// Delete the owner now, its dependents right after (the default).
    #[default]
    Background,
    /// Delete dependents first; the owner stays (deletionTimestamp + `foregroundDeletion`
    /// finalizer) until they are gone.
    Foreground,
    /// Remove the owner's reference from its dependents and keep them.
    Orphan,
}

/// Options of a delete.
#[derive(Debug, Clone, Default)]
pub struct DeleteOpts {
    /// Propagation policy.
    pub propagation: Propagation,
    /// Precondition: the object's uid.
    pub uid: Option<String>,
    /// Precondition: the object's resourceVersion.
    pub resource_version: Option<String>,
}

/// Error of [`Store::events_since_live`]: the requested resourceVersion is older than the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expired {
    /// The oldest resourceVersion a watch can still resume from.
    pub oldest: u64,
}

/// The store. See the module docs.
#[derive(Debug)]
pub struct Store {
    /// Served resources.
    pub registry: Registry,
    rv: u64,
    objects: HashMap<String, BTreeMap<ObjKey, Arc<StoredObject>>>,
    log: VecDeque<Arc<LogEvent>>,
    window: usize,
    /// Events with rv <= compacted are gone: a resume needs rv >= compacted.
    compacted: u64,
    /// rv of the newest event dropped from the log (a live watcher behind it lost events).
    dropped: u64,
    /// uid -> (resource key, object key) of every stored object.
    uids: HashMap<String, (String, ObjKey)>,
    /// owner uid -> dependents (resource key, object key).
    dependents: HashMap<String, HashSet<(String, ObjKey)>>,
    resource_names: HashMap<String, Arc<str>>,
}

/// Current time in RFC 3339 with second precision, as Kubernetes writes timestamps.
pub fn now_rfc3339() -> String {
    let now = jiff::Timestamp::now();
    jiff::Timestamp::from_second(now.as_second())
        .map(|t| t.to_string())
        .unwrap_or_else(|_| now.to_string())
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj["metadata"][field].as_str()
}

fn owner_uids(obj: &Value) -> Vec<String> {
    obj["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["uid"].as_str().map(str::to_string))
        .collect()
}

fn finalizers(obj: &Value) -> Vec<String> {
    crate::json::strings(&obj["metadata"]["finalizers"])
}

fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

/// Remove empty `metadata` collections, as the real server's `omitempty` serialisation does
/// (`labels: {}`, `annotations: {}`, `finalizers: []`, `ownerReferences: []`, `managedFields: []`).
pub(crate) fn drop_empty_metadata(obj: &mut Value) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "labels",
            "annotations",
            "finalizers",
            "ownerReferences",
            "managedFields",
        ] {
            let empty = match meta.get(field) {
                Some(Value::Object(m)) => m.is_empty(),
                Some(Value::Array(a)) => a.is_empty(),
                Some(Value::Null) => true,
                _ => false,
            };
            if empty {
                meta.remove(field);
            }
        }
    }
}

impl Store {
    /// An empty store with the built-in resources and an event window of `window` entries.
    pub fn new(window: usize) -> Self {
        Store {
            registry: Registry::with_builtins(),
            rv: 0,
            objects: HashMap::new(),
            log: VecDeque::new(),
            window: window.max(1),
            compacted: 0,
            dropped: 0,
            uids: HashMap::new(),
            dependents: HashMap::new(),
            resource_names: HashMap::new(),
        }
    }

    /// The current (latest) resourceVersion.
    pub fn rv(&self) -> u64 {
        self.rv
    }

    /// The oldest resourceVersion a watch or continue token can still start from.
    pub fn oldest_rv(&self) -> u64 {
        self.compacted
    }

    /// Get one object.
    pub fn get(&self, resource: &str, ns: &str, name: &str) -> Option<Arc<StoredObject>> {
        self.objects
            .get(resource)?
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
    }

    /// Objects of `resource` (in `ns` if given) with keys strictly after `after`, in key order.
    pub fn range<'a>(
        &'a self,
        resource: &str,
        ns: Option<&'a str>,
        after: Option<&'a ObjKey>,
    ) -> impl Iterator<Item = (&'a ObjKey, &'a Arc<StoredObject>)> + 'a {
        use std::ops::Bound;
        let map = self.objects.get(resource);
        let lower = match (after, ns) {
            (Some(k), _) => Bound::Excluded(k.clone()),
            (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
            (None, None) => Bound::Unbounded,
        };
        map.into_iter()
            .flat_map(move |m| m.range((lower.clone(), Bound::Unbounded)))
            .take_while(move |(k, _)| ns.is_none_or(|ns| k.0 == ns))
    }

    /// Number of objects of a resource.
    pub fn count(&self, resource: &str) -> usize {
        self.objects.get(resource).map_or(0, BTreeMap::len)
    }

    fn resource_name(&mut self, key: &str) -> Arc<str> {
        if let Some(name) = self.resource_names.get(key) {
            return name.clone();
        }
        let name: Arc<str> = Arc::from(key);
        self.resource_names.insert(key.to_string(), name.clone());
        name
    }

    fn index(&mut self, resource: &str, key: &ObjKey, old: Option<&Value>, new: Option<&Value>) {
        let entry = (resource.to_string(), key.clone());
        if let Some(old) = old {
            for owner in owner_uids(old) {
                if let Some(set) = self.dependents.get_mut(&owner) {
                    set.remove(&entry);
                    if set.is_empty() {
                        self.dependents.remove(&owner);
                    }
                }
            }
            if let Some(uid) = meta_str(old, "uid") {
                self.uids.remove(uid);
            }
        }
        if let Some(new) = new {
            for owner in owner_uids(new) {
                self.dependents
                    .entry(owner)
                    .or_default()
                    .insert(entry.clone());
            }
            if let Some(uid) = meta_str(new, "uid") {
                self.uids.insert(uid.to_string(), entry.clone());
            }
        }
    }

    /// Low-level write: store `value` (RV set here) and log the event.
    fn write(&mut self, resource: &str, key: ObjKey, mut value: Value) -> Arc<StoredObject> {
        self.rv += 1;
        let rv = self.rv;
        set_rv(&mut value, rv);
        drop_empty_metadata(&mut value);
        let typed = self
            .registry
            .get(resource)
            .is_none_or(|t| t.custom.is_none());
        let stored = StoredObject::new(value, rv, typed);
        let prev = self
            .objects
            .entry(resource.to_string())
            .or_default()
            .insert(key.clone(), stored.clone());
        self.index(
            resource,
            &key,
            prev.as_ref().map(|p| &p.value),
            Some(&stored.value),
        );
        let name = self.resource_name(resource);
        let kind = if prev.is_some() {
            WatchEventType::Modified
        } else {
            WatchEventType::Added
        };
        self.push_event(LogEvent {
            rv,
            resource: name,
            key,
            kind,
            object: stored.clone(),
            prev,
        });
        stored
    }

    /// Low-level removal with a DELETED event; returns the last state (with the deletion RV).
    /// The DELETED event carries the stored state, as etcd's watch does.
    fn remove(&mut self, resource: &str, key: &ObjKey) -> Option<Arc<StoredObject>> {
        let prev = self.objects.get_mut(resource)?.remove(key)?;
        self.rv += 1;
        let rv = self.rv;
        let mut last = prev.value.clone();
        drop_empty_metadata(&mut last);
        set_rv(&mut last, rv);
        let last = StoredObject::new(last, rv, prev.typed);
        self.index(resource, key, Some(&prev.value), None);
        let name = self.resource_name(resource);
        self.push_event(LogEvent {
            rv,
            resource: name,
            key: key.clone(),
            kind: WatchEventType::Deleted,
            object: last.clone(),
            prev: Some(prev),
        });
        Some(last)
    }
}
