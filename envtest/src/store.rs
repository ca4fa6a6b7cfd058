//! The object store: every object as a `serde_json::Value` plus its pre-serialised JSON bytes,
//! in a `BTreeMap` keyed by `(namespace, name)` per resource; one global resourceVersion counter
//! (like etcd's revision) bumped by every write; a bounded event log that watches and paginated
//! lists read from; owner-reference bookkeeping for garbage collection; finalizer-aware deletion.
//!
//! The store is synchronous and lives behind one mutex in the server. Every mutation goes
//! through [`Store::create`], [`Store::update`] or [`Store::delete`], which keep the metadata
//! rules (uid, creationTimestamp, generation, deletionTimestamp, finalizers) and cascade
//! deletions to dependents.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::resources::{Registry, ResourceType, from_crd, res_key};

/// `(namespace, name)`; the namespace is `""` for cluster-scoped objects.
pub type ObjKey = (String, String);

/// One stored object version: the JSON value and its serialised bytes.
#[derive(Debug)]
pub struct StoredObject {
    /// The object.
    pub value: Value,
    /// `serde_json::to_vec(&value)`, computed once per write.
    pub bytes: Bytes,
    /// The resourceVersion of this object version.
    pub rv: u64,
}

impl StoredObject {
    fn new(value: Value, rv: u64) -> Arc<Self> {
        // invariant: a serde_json::Value always serialises (keys are strings)
        let bytes = Bytes::from(serde_json::to_vec(&value).unwrap_or_default());
        Arc::new(StoredObject { value, bytes, rv })
    }

    /// `metadata.uid` (empty if absent).
    pub fn uid(&self) -> &str {
        self.value["metadata"]["uid"].as_str().unwrap_or_default()
    }
}

/// Kind of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// The object was created.
    Added,
    /// The object changed.
    Modified,
    /// The object was removed.
    Deleted,
}

impl EventKind {
    /// The wire name (`ADDED`, `MODIFIED`, `DELETED`).
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Added => "ADDED",
            EventKind::Modified => "MODIFIED",
            EventKind::Deleted => "DELETED",
        }
    }
}

/// One entry of the event log.
#[derive(Debug)]
pub struct LogEvent {
    /// The resourceVersion of the write.
    pub rv: u64,
    /// The resource key ([`ResourceType::key`]).
    pub resource: Arc<str>,
    /// Namespace and name.
    pub key: ObjKey,
    /// What happened.
    pub kind: EventKind,
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

/// Error of [`Store::events_since`]: the requested resourceVersion is older than the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expired {
    /// The oldest resourceVersion a watch can still resume from.
    pub oldest: u64,
}

const FOREGROUND: &str = "foregroundDeletion";

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
    obj["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect()
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

/// Whether the real API server keeps `metadata.generation` for objects of `t` (checked against
/// kube-apiserver 1.34): custom resources, CRDs, the apps and batch workloads, pods and the
/// admission webhook configurations. Other kinds (ConfigMap, Secret, Service, Namespace, Node,
/// Lease, Event, ...) store whatever a create sent (usually nothing) and never change it.
pub fn tracks_generation(t: &ResourceType) -> bool {
    t.custom.is_some()
        || matches!(
            crate::convert::storage_key(t).as_str(),
            "pods"
                | "apps/deployments"
                | "apps/replicasets"
                | "apps/statefulsets"
                | "apps/daemonsets"
                | "batch/jobs"
                | "batch/cronjobs"
                | "apiextensions.k8s.io/customresourcedefinitions"
                | "admissionregistration.k8s.io/mutatingwebhookconfigurations"
                | "admissionregistration.k8s.io/validatingwebhookconfigurations"
        )
}

/// Everything except metadata (and status when `ignore_status`), for the generation rule.
fn spec_part(obj: &Value, ignore_status: bool) -> BTreeMap<&String, &Value> {
    obj.as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| {
            k.as_str() != "metadata"
                && k.as_str() != "apiVersion"
                && k.as_str() != "kind"
                && !(ignore_status && k.as_str() == "status")
        })
        .collect()
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

    /// The state of `resource` objects at resourceVersion `at` that changed after it: for each
    /// key touched by a later write, its value at `at` (`None` = absent). Used for consistent
    /// pagination and exact-RV lists. Fails when `at` is older than the window.
    pub fn overlay_at(
        &self,
        resource: &str,
        at: u64,
    ) -> Result<BTreeMap<ObjKey, Option<Arc<StoredObject>>>, Expired> {
        if at < self.compacted {
            return Err(Expired {
                oldest: self.compacted,
            });
        }
        let mut overlay = BTreeMap::new();
        let start = self.log.partition_point(|e| e.rv <= at);
        for event in self.log.range(start..).rev() {
            if &*event.resource == resource {
                overlay.insert(event.key.clone(), event.prev.clone());
            }
        }
        Ok(overlay)
    }

    /// Events with rv > `after`, in order (all resources). Fails when `after` is older than
    /// the window.
    #[cfg(test)]
    pub fn events_since(&self, after: u64, max: usize) -> Result<Vec<Arc<LogEvent>>, Expired> {
        if after < self.compacted {
            return Err(Expired {
                oldest: self.compacted,
            });
        }
        let start = self.log.partition_point(|e| e.rv <= after);
        Ok(self.log.range(start..).take(max).cloned().collect())
    }

    /// Like [`Store::events_since`] for a watch that is already running: fails only when
    /// events it has not read yet were dropped (window overflow or compaction).
    pub fn events_since_live(&self, after: u64, max: usize) -> Result<Vec<Arc<LogEvent>>, Expired> {
        if after < self.dropped {
            return Err(Expired {
                oldest: self.compacted,
            });
        }
        let start = self.log.partition_point(|e| e.rv <= after);
        Ok(self.log.range(start..).take(max).cloned().collect())
    }

    /// Drop the whole history: every resume from a resourceVersion handed out so far gets 410.
    /// Running watches that have read everything keep going.
    pub fn compact(&mut self) {
        if let Some(last) = self.log.back() {
            self.dropped = last.rv;
        }
        self.rv += 1;
        self.compacted = self.rv;
        self.log.clear();
    }

    fn resource_name(&mut self, key: &str) -> Arc<str> {
        if let Some(name) = self.resource_names.get(key) {
            return name.clone();
        }
        let name: Arc<str> = Arc::from(key);
        self.resource_names.insert(key.to_string(), name.clone());
        name
    }

    fn push_event(&mut self, event: LogEvent) {
        self.log.push_back(Arc::new(event));
        while self.log.len() > self.window {
            if let Some(old) = self.log.pop_front() {
                self.compacted = old.rv;
                self.dropped = old.rv;
            }
        }
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
        let stored = StoredObject::new(value, rv);
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
            EventKind::Modified
        } else {
            EventKind::Added
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
        let last = StoredObject::new(last, rv);
        self.index(resource, key, Some(&prev.value), None);
        let name = self.resource_name(resource);
        self.push_event(LogEvent {
            rv,
            resource: name,
            key: key.clone(),
            kind: EventKind::Deleted,
            object: last.clone(),
            prev: Some(prev),
        });
        Some(last)
    }

    fn namespace_check(&self, t: &ResourceType, ns: &str) -> Result<(), ApiError> {
        if !t.namespaced {
            return Ok(());
        }
        match self.get("namespaces", "", ns) {
            None => Err(ApiError::not_found("", "namespaces", ns)),
            Some(n) if !n.value["metadata"]["deletionTimestamp"].is_null() => Err(ApiError::new(
                403,
                "Forbidden",
                format!(
                    "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                    t.plural,
                    meta_str(&n.value, "name").unwrap_or_default()
                ),
            )),
            Some(_) => Ok(()),
        }
    }

    /// Create an object. `obj` must carry its final name/namespace; uid, creationTimestamp,
    /// generation and resourceVersion are set here.
    pub fn create(&mut self, t: &ResourceType, obj: Value) -> Result<Arc<StoredObject>, ApiError> {
        let ns = if t.namespaced {
            meta_str(&obj, "namespace").unwrap_or_default().to_string()
        } else {
            String::new()
        };
        let name = meta_str(&obj, "name").unwrap_or_default().to_string();
        self.namespace_check(t, &ns)?;
        let mut obj = crate::convert::to_storage(t, obj);
        let key = (ns, name);
        if self
            .objects
            .get(&crate::convert::storage_key(t))
            .is_some_and(|m| m.contains_key(&key))
        {
            return Err(ApiError::already_exists(&t.group, &t.plural, &key.1));
        }
        {
            let meta = obj
                .as_object_mut()
                .and_then(|o| o.get_mut("metadata"))
                .and_then(Value::as_object_mut)
                .ok_or_else(|| ApiError::bad_request("object has no metadata"))?;
            meta.insert(
                "uid".into(),
                Value::String(uuid::Uuid::new_v4().to_string()),
            );
            meta.insert("creationTimestamp".into(), Value::String(now_rfc3339()));
            if tracks_generation(t) {
                meta.insert("generation".into(), json!(1));
            }
            meta.remove("deletionTimestamp");
            meta.remove("deletionGracePeriodSeconds");
        }
        crate::defaults::apply(t, None, &mut obj);
        if t.key() == "apiextensions.k8s.io/customresourcedefinitions" {
            self.serve_crd(&mut obj)?;
        }
        Ok(self.write(&crate::convert::storage_key(t), key, obj))
    }

    /// Register the resource of a CRD object and mark it Established.
    fn serve_crd(&mut self, crd: &mut Value) -> Result<(), ApiError> {
        let name = meta_str(crd, "name").unwrap_or_default().to_string();
        let served = from_crd(crd).map_err(|causes| {
            ApiError::invalid(
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                &name,
                causes,
            )
        })?;
        if let Some(existing) = self.registry.get(&served.key())
            && existing.custom.is_none()
        {
            return Err(ApiError::invalid(
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                &name,
                vec![(
                    "spec.names.plural".into(),
                    "FieldValueInvalid".into(),
                    "conflicts with a built-in resource".into(),
                )],
            ));
        }
        let now = now_rfc3339();
        crd["status"] = json!({
            "acceptedNames": crd["spec"]["names"].clone(),
            "storedVersions": [served.storage_version()],
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found", "lastTransitionTime": now},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted", "lastTransitionTime": now},
            ],
        });
        self.registry.insert(served);
        Ok(())
    }

    /// Replace an object. `expected_rv` is the resourceVersion the caller based its change on
    /// (409 Conflict if stale). Keeps immutable metadata, applies the generation rule and
    /// completes a pending deletion when the last finalizer goes.
    pub fn update(
        &mut self,
        t: &ResourceType,
        ns: &str,
        name: &str,
        mut obj: Value,
        expected_rv: Option<u64>,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let resource = crate::convert::storage_key(t);
        obj = crate::convert::to_storage(t, obj);
        let key = (ns.to_string(), name.to_string());
        let current = self
            .get(&resource, ns, name)
            .ok_or_else(|| ApiError::not_found(&t.group, &t.plural, name))?;
        if let Some(expected) = expected_rv
            && expected != current.rv
        {
            return Err(ApiError::conflict(
                &t.group,
                &t.plural,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            ));
        }
        let old = &current.value;
        crate::defaults::apply(t, Some(old), &mut obj);
        let deleting = !old["metadata"]["deletionTimestamp"].is_null();
        if deleting {
            let old_f: HashSet<String> = finalizers(old).into_iter().collect();
            if let Some(added) = finalizers(&obj).into_iter().find(|f| !old_f.contains(f)) {
                return Err(ApiError::invalid(
                    &t.group,
                    &t.kind,
                    name,
                    vec![(
                        "metadata.finalizers".into(),
                        "FieldValueForbidden".into(),
                        format!(
                            "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers [\"{added}\"]"
                        ),
                    )],
                ));
            }
        }
        // Deployments also count annotation changes (upstream copies them to ReplicaSets).
        let changed = spec_part(old, t.status_subresource) != spec_part(&obj, t.status_subresource)
            || (resource == "apps/deployments"
                && old["metadata"]["annotations"] != obj["metadata"]["annotations"]);
        let generation = match old["metadata"]["generation"].as_i64() {
            Some(g) if tracks_generation(t) && changed => Some(json!(g + 1)),
            None if tracks_generation(t) => Some(json!(if changed { 2 } else { 1 })),
            _ => old["metadata"].get("generation").cloned(),
        };
        {
            let meta = obj
                .as_object_mut()
                .and_then(|o| o.get_mut("metadata"))
                .and_then(Value::as_object_mut)
                .ok_or_else(|| ApiError::bad_request("object has no metadata"))?;
            for field in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "name",
                "namespace",
            ] {
                match old["metadata"].get(field) {
                    Some(v) => {
                        meta.insert(field.into(), v.clone());
                    }
                    None => {
                        meta.remove(field);
                    }
                }
            }
            match generation {
                Some(g) => meta.insert("generation".into(), g),
                None => meta.remove("generation"),
            };
            if meta
                .get("finalizers")
                .is_some_and(|f| f.as_array().is_some_and(Vec::is_empty))
            {
                meta.remove("finalizers");
            }
        }
        if resource == "apiextensions.k8s.io/customresourcedefinitions" {
            let status = old["status"].clone();
            self.serve_crd(&mut obj)?;
            if !status.is_null() && !t.status_subresource {
                obj["status"] = status;
            }
        }
        if deleting && finalizers(&obj).is_empty() {
            // As on the real server, the update that drops the last finalizer deletes the
            // object: one DELETED event, carrying the state stored before that update (with
            // the finalizers it still had) at the deletion's resourceVersion.
            let last = self
                .remove(&resource, &key)
                .ok_or_else(|| ApiError::not_found(&t.group, &t.plural, name))?;
            self.cascade(vec![(resource, last.clone())]);
            return Ok(last);
        }
        Ok(self.write(&resource, key, obj))
    }

    /// Delete an object: honours preconditions, finalizers (deletionTimestamp) and the
    /// propagation policy. Returns the object's last state.
    pub fn delete(
        &mut self,
        t: &ResourceType,
        ns: &str,
        name: &str,
        opts: &DeleteOpts,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let resource = crate::convert::storage_key(t);
        let key = (ns.to_string(), name.to_string());
        let current = self
            .get(&resource, ns, name)
            .ok_or_else(|| ApiError::not_found(&t.group, &t.plural, name))?;
        if let Some(uid) = &opts.uid
            && uid != current.uid()
        {
            return Err(ApiError::conflict(
                &t.group,
                &t.plural,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    current.uid()
                ),
            ));
        }
        if let Some(rv) = &opts.resource_version
            && *rv != current.rv.to_string()
        {
            return Err(ApiError::conflict(
                &t.group,
                &t.plural,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    current.rv
                ),
            ));
        }
        let uid = current.uid().to_string();
        if opts.propagation == Propagation::Orphan {
            self.orphan_dependents(&uid);
        }
        let mut fins = finalizers(&current.value);
        let foreground = opts.propagation == Propagation::Foreground
            && self.dependents.get(&uid).is_some_and(|d| !d.is_empty());
        if foreground && !fins.iter().any(|f| f == FOREGROUND) {
            fins.push(FOREGROUND.to_string());
        }
        let is_namespace = resource == "namespaces";
        if fins.is_empty() && !is_namespace {
            return self
                .finish_removal(&resource, &key)
                .ok_or_else(|| ApiError::not_found(&t.group, &t.plural, name));
        }
        // Graceful deletion: mark and keep until the finalizers are gone.
        let mut obj = current.value.clone();
        let mut newly_marked = false;
        if obj["metadata"]["deletionTimestamp"].is_null() {
            obj["metadata"]["deletionTimestamp"] = Value::String(now_rfc3339());
            obj["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            newly_marked = true;
        }
        if !fins.is_empty() {
            obj["metadata"]["finalizers"] = json!(fins);
        }
        if is_namespace {
            obj["status"]["phase"] = json!("Terminating");
        }
        let stored = if newly_marked || foreground {
            self.write(&resource, key.clone(), obj)
        } else {
            current
        };
        if is_namespace {
            self.drain_namespace(name);
            if fins.is_empty() && self.namespace_is_empty(name) {
                return Ok(self.finish_removal(&resource, &key).unwrap_or(stored));
            }
        }
        if foreground {
            self.delete_dependents(&uid);
            self.settle_foreground(&uid);
        }
        Ok(self.get(&resource, ns, name).unwrap_or(stored))
    }

    fn namespace_is_empty(&self, ns: &str) -> bool {
        self.objects.iter().all(|(resource, map)| {
            resource == "namespaces"
                || map
                    .range((ns.to_string(), String::new())..)
                    .next()
                    .is_none_or(|(k, _)| k.0 != ns)
        })
    }

    fn drain_namespace(&mut self, ns: &str) {
        let mut victims = Vec::new();
        for (resource, map) in &self.objects {
            if resource == "namespaces" {
                continue;
            }
            for (k, _) in map
                .range((ns.to_string(), String::new())..)
                .take_while(|(k, _)| k.0 == ns)
            {
                victims.push((resource.clone(), k.clone()));
            }
        }
        for (resource, key) in victims {
            if let Some(t) = self.registry.get(&resource).cloned() {
                // Errors here mean the object vanished meanwhile (cascade): nothing to do.
                let _ = self.delete(&t, &key.0, &key.1, &DeleteOpts::default());
            }
        }
    }

    /// Remove now (no finalizers left) and cascade.
    fn finish_removal(&mut self, resource: &str, key: &ObjKey) -> Option<Arc<StoredObject>> {
        let last = self.remove(resource, key)?;
        self.cascade(vec![(resource.to_string(), last.clone())]);
        Some(last)
    }

    /// Consequences of removals: CRD contents, terminating namespaces, background GC of
    /// dependents, foreground owners waiting for their dependents.
    fn cascade(&mut self, mut removed: Vec<(String, Arc<StoredObject>)>) {
        while let Some((res, obj)) = removed.pop() {
            let uid = obj.uid().to_string();
            if res == "apiextensions.k8s.io/customresourcedefinitions" {
                self.unserve_crd(&obj.value, &mut removed);
            }
            // Namespaced object gone: its namespace may be waiting for it.
            if let Some(ns) = meta_str(&obj.value, "namespace")
                && !ns.is_empty()
                && let Some(n) = self.get("namespaces", "", ns)
                && !n.value["metadata"]["deletionTimestamp"].is_null()
                && finalizers(&n.value).is_empty()
                && self.namespace_is_empty(ns)
                && let Some(last) = self.remove("namespaces", &(String::new(), ns.to_string()))
            {
                removed.push(("namespaces".to_string(), last));
            }
            // Background GC: dependents whose owners are all gone.
            let deps: Vec<(String, ObjKey)> = self
                .dependents
                .get(&uid)
                .map(|d| d.iter().cloned().collect())
                .unwrap_or_default();
            for (dres, dkey) in deps {
                let Some(dep) = self.get(&dres, &dkey.0, &dkey.1) else {
                    continue;
                };
                let alive = owner_uids(&dep.value)
                    .iter()
                    .any(|o| self.uids.contains_key(o));
                if alive {
                    // Upstream's garbage collector keeps a dependent that still has a live
                    // owner and removes its dangling reference to the deleted one.
                    self.drop_owner_reference(&dres, dkey, &uid);
                    continue;
                }
                if let Some(last) = self.gc_delete(&dres, &dkey) {
                    removed.push((dres, last));
                }
            }
            // Foreground owners waiting for this object.
            for owner in owner_uids(&obj.value) {
                self.settle_foreground_collect(&owner, &mut removed);
            }
        }
    }

    /// Delete a dependent during GC: finalizers respected. Returns the last state if removed.
    fn gc_delete(&mut self, resource: &str, key: &ObjKey) -> Option<Arc<StoredObject>> {
        let current = self.get(resource, &key.0, &key.1)?;
        if finalizers(&current.value).is_empty() {
            return self.remove(resource, key);
        }
        if current.value["metadata"]["deletionTimestamp"].is_null() {
            let mut obj = current.value.clone();
            obj["metadata"]["deletionTimestamp"] = Value::String(now_rfc3339());
            obj["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            self.write(resource, key.clone(), obj);
        }
        None
    }

    fn unserve_crd(&mut self, crd: &Value, removed: &mut Vec<(String, Arc<StoredObject>)>) {
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
        let key = res_key(group, plural);
        if self.registry.get(&key).is_some_and(|t| t.custom.is_some()) {
            self.registry.remove(&key);
            let keys: Vec<ObjKey> = self
                .objects
                .get(&key)
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
            for k in keys {
                if let Some(last) = self.remove(&key, &k) {
                    removed.push((key.clone(), last));
                }
            }
            self.objects.remove(&key);
        }
    }

    fn orphan_dependents(&mut self, uid: &str) {
        let deps: Vec<(String, ObjKey)> = self
            .dependents
            .get(uid)
            .map(|d| d.iter().cloned().collect())
            .unwrap_or_default();
        for (res, key) in deps {
            self.drop_owner_reference(&res, key, uid);
        }
    }

    /// Remove the owner reference to `uid` from one dependent (a write).
    fn drop_owner_reference(&mut self, res: &str, key: ObjKey, uid: &str) {
        if let Some(dep) = self.get(res, &key.0, &key.1) {
            let mut obj = dep.value.clone();
            if let Some(refs) = obj["metadata"]["ownerReferences"].as_array_mut() {
                refs.retain(|r| r["uid"].as_str() != Some(uid));
                if refs.is_empty()
                    && let Some(m) = obj["metadata"].as_object_mut()
                {
                    m.remove("ownerReferences");
                }
            }
            self.write(res, key, obj);
        }
    }

    fn delete_dependents(&mut self, uid: &str) {
        let deps: Vec<(String, ObjKey)> = self
            .dependents
            .get(uid)
            .map(|d| d.iter().cloned().collect())
            .unwrap_or_default();
        for (res, key) in deps {
            if let Some(current) = self.get(&res, &key.0, &key.1) {
                if finalizers(&current.value).is_empty() {
                    self.finish_removal(&res, &key);
                } else {
                    self.gc_delete(&res, &key);
                }
            }
        }
    }

    fn settle_foreground(&mut self, uid: &str) {
        let mut removed = Vec::new();
        self.settle_foreground_collect(uid, &mut removed);
        self.cascade(removed);
    }

    /// If `owner_uid` is in foreground deletion and has no dependents left, drop its
    /// `foregroundDeletion` finalizer (removing it if that was the last one).
    fn settle_foreground_collect(
        &mut self,
        owner_uid: &str,
        removed: &mut Vec<(String, Arc<StoredObject>)>,
    ) {
        if self
            .dependents
            .get(owner_uid)
            .is_some_and(|d| !d.is_empty())
        {
            return;
        }
        let Some((res, key)) = self.uids.get(owner_uid).cloned() else {
            return;
        };
        let Some(owner) = self.get(&res, &key.0, &key.1) else {
            return;
        };
        let fins = finalizers(&owner.value);
        if !fins.iter().any(|f| f == FOREGROUND) {
            return;
        }
        let rest: Vec<String> = fins.into_iter().filter(|f| f != FOREGROUND).collect();
        if rest.is_empty() {
            if let Some(last) = self.remove(&res, &key) {
                removed.push((res, last));
            }
        } else {
            let mut obj = owner.value.clone();
            obj["metadata"]["finalizers"] = json!(rest);
            self.write(&res, key, obj);
        }
    }

    /// Write an object directly (helpers such as simulated nodes): create or replace,
    /// bypassing admission but keeping the metadata rules.
    pub fn upsert(&mut self, t: &ResourceType, obj: Value) -> Result<Arc<StoredObject>, ApiError> {
        let ns = meta_str(&obj, "namespace").unwrap_or_default().to_string();
        let name = meta_str(&obj, "name").unwrap_or_default().to_string();
        if self
            .get(&crate::convert::storage_key(t), &ns, &name)
            .is_some()
        {
            self.update(t, &ns, &name, obj, None)
        } else {
            self.create(t, obj)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(name: &str, data: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default"}, "data": {"v": data}})
    }

    fn setup(window: usize) -> (Store, Arc<ResourceType>) {
        let mut store = Store::new(window);
        let ns = store.registry.get("namespaces").cloned().unwrap();
        store
            .create(&ns, json!({"metadata": {"name": "default"}}))
            .unwrap();
        let t = store.registry.get("configmaps").cloned().unwrap();
        (store, t)
    }

    #[test]
    fn generation_only_for_the_kinds_upstream_keeps_it_for() {
        let (mut s, cms) = setup(100);
        let deployments = s.registry.get("apps/deployments").cloned().unwrap();
        let d = |annotations: Value, replicas: i64| {
            json!({"metadata": {"name": "d", "namespace": "default", "annotations": annotations},
                "spec": {"replicas": replicas}})
        };
        let created = s.create(&deployments, d(json!({}), 1)).unwrap();
        assert_eq!(created.value["metadata"]["generation"], 1);
        let up = |s: &mut Store, obj| s.update(&deployments, "default", "d", obj, None).unwrap();
        assert_eq!(
            up(&mut s, d(json!({}), 2)).value["metadata"]["generation"],
            2
        );
        // Deployments count annotation changes too.
        assert_eq!(
            up(&mut s, d(json!({"a": "b"}), 2)).value["metadata"]["generation"],
            3
        );
        // A client cannot set the generation of a tracked kind, nor change it on any kind.
        let mut sent = d(json!({"a": "b"}), 2);
        sent["metadata"]["generation"] = json!(9);
        assert_eq!(up(&mut s, sent).value["metadata"]["generation"], 3);
        let mut c = cm("g", "1");
        c["metadata"]["generation"] = json!(5);
        assert_eq!(
            s.create(&cms, c).unwrap().value["metadata"]["generation"],
            5
        );
        let mut c = cm("g", "2");
        c["metadata"]["generation"] = json!(7);
        let updated = s.update(&cms, "default", "g", c, None).unwrap();
        assert_eq!(updated.value["metadata"]["generation"], 5);
    }

    #[test]
    fn every_write_bumps_one_global_rv() {
        let (mut s, t) = setup(100);
        let a = s.create(&t, cm("a", "1")).unwrap();
        let b = s
            .update(&t, "default", "a", cm("a", "2"), Some(a.rv))
            .unwrap();
        assert_eq!(b.rv, a.rv + 1);
        // ConfigMaps have no generation on the real server.
        assert_eq!(b.value["metadata"].get("generation"), None);
        assert_eq!(b.value["metadata"]["uid"], a.value["metadata"]["uid"]);
        // Stale expected rv.
        let err = s
            .update(&t, "default", "a", cm("a", "3"), Some(a.rv))
            .unwrap_err();
        assert_eq!(err.code, 409);
        let gone = s
            .delete(&t, "default", "a", &DeleteOpts::default())
            .unwrap();
        assert_eq!(gone.rv, b.rv + 1);
        assert_eq!(s.rv(), gone.rv);
        // Empty metadata collections are not stored.
        let mut with_empty = cm("e", "1");
        with_empty["metadata"]["labels"] = json!({});
        with_empty["metadata"]["finalizers"] = json!([]);
        let e = s.create(&t, with_empty).unwrap();
        assert!(e.value["metadata"].get("labels").is_none());
        assert!(e.value["metadata"].get("finalizers").is_none());
    }

    #[test]
    fn window_overflow_and_overlay() {
        let (mut s, t) = setup(3);
        let first = s.create(&t, cm("a", "1")).unwrap();
        for i in 2..6 {
            s.update(&t, "default", "a", cm("a", &i.to_string()), None)
                .unwrap();
        }
        // Only the last 3 events are kept.
        assert!(s.events_since(first.rv, 10).is_err());
        let recent = s.rv() - 3;
        assert_eq!(s.events_since(recent, 10).unwrap().len(), 3);
        // State at `recent` for the changed key: the value before the 3 newest writes.
        let overlay = s.overlay_at("configmaps", recent).unwrap();
        let at = overlay[&("default".to_string(), "a".to_string())]
            .clone()
            .unwrap();
        assert_eq!(at.value["data"]["v"], "2");
        assert!(s.overlay_at("configmaps", first.rv).is_err());
    }

    #[test]
    fn compaction_expires_resumes_but_not_caught_up_watchers() {
        let (mut s, t) = setup(100);
        s.create(&t, cm("a", "1")).unwrap();
        let now = s.rv();
        s.compact();
        assert!(s.events_since(now, 10).is_err(), "a new resume gets 410");
        assert!(
            s.events_since_live(now, 10).is_ok(),
            "a caught-up watch goes on"
        );
        assert!(
            s.events_since_live(now - 1, 10).is_err(),
            "a lagging watch lost events"
        );
    }
}
