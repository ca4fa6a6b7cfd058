//! Deletion: preconditions, finalizers and deletionTimestamp, propagation (background,
//! foreground, orphan), namespace termination, and the garbage collection of dependents and
//! of a removed CRD's objects.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{
    DeleteOpts, ObjKey, Propagation, Store, StoredObject, finalizers, meta_str, now_rfc3339,
    owner_uids,
};
use crate::error::ApiError;
use crate::resources::{ResourceType, res_key};

const FOREGROUND: &str = "foregroundDeletion";

/// Stamp a graceful deletion: `deletionTimestamp` now, grace period 0.
fn mark_deleted(obj: &mut Value) {
    // As upstream's markAsDeleting: the generation moves when the deletion starts.
    if obj["metadata"]["deletionTimestamp"].is_null()
        && let Some(g) = obj["metadata"]["generation"].as_i64().filter(|g| *g > 0)
    {
        obj["metadata"]["generation"] = json!(g + 1);
    }
    obj["metadata"]["deletionTimestamp"] = Value::String(now_rfc3339());
    obj["metadata"]["deletionGracePeriodSeconds"] = json!(0);
}

/// What a delete that removed the object at once answers, as the real server does:
///
/// - a pod (deleted gracefully with grace period 0, having no node): the pod marked deleted
///   (its generation bumped, as every object's is when its deletion starts);
/// - orphan propagation: the object marked deleted and carrying the `orphan` finalizer, which
///   the real garbage collector removes once it has orphaned the dependents. Here the
///   dependents are orphaned inside the request and the object is gone already (synchronous
///   garbage collection): only the answer is the real server's.
fn removal_answer(resource: &str, opts: &DeleteOpts, last: Arc<StoredObject>) -> Arc<StoredObject> {
    let pod = resource == "pods";
    let orphan = opts.propagation == Propagation::Orphan;
    if !pod && !orphan {
        return last;
    }
    let mut obj = last.value.clone();
    mark_deleted(&mut obj);
    if orphan {
        obj["metadata"]["finalizers"] = json!(["orphan"]);
    }
    StoredObject::new(obj, last.rv, last.typed)
}

impl Store {
    /// The dependents (resource key, object key) of the owner with `uid`.
    fn dependents_of(&self, uid: &str) -> Vec<(String, ObjKey)> {
        self.dependents
            .get(uid)
            .map(|d| d.iter().cloned().collect())
            .unwrap_or_default()
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
                // As upstream's BeforeDelete: the conflict names the kind, not the resource.
                &t.kind,
                name,
                &format!(
                    "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
                    current.uid()
                ),
            ));
        }
        if let Some(rv) = &opts.resource_version
            && *rv != current.rv.to_string()
        {
            return Err(ApiError::conflict(
                &t.group,
                &t.kind,
                name,
                &format!(
                    "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
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
            let last = self
                .finish_removal(&resource, &key)
                .ok_or_else(|| ApiError::not_found(&t.group, &t.plural, name))?;
            return Ok(removal_answer(&resource, opts, last));
        }
        // Graceful deletion: mark and keep until the finalizers are gone.
        let mut obj = current.value.clone();
        let mut newly_marked = false;
        if obj["metadata"]["deletionTimestamp"].is_null() {
            mark_deleted(&mut obj);
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
    pub(super) fn cascade(&mut self, mut removed: Vec<(String, Arc<StoredObject>)>) {
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
            let deps = self.dependents_of(&uid);
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
            mark_deleted(&mut obj);
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
        let deps = self.dependents_of(uid);
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
        let deps = self.dependents_of(uid);
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
}
