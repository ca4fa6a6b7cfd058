//! Creating and replacing objects: the metadata rules (uid, creationTimestamp, generation,
//! immutable fields, finalizers of an object being deleted), the namespace check, and serving
//! the resource of a CustomResourceDefinition.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use serde_json::{Value, json};

use super::{Store, StoredObject, drop_empty_metadata, finalizers, meta_str, now_rfc3339, set_rv};
use crate::error::ApiError;
use crate::resources::{ResourceType, from_crd};

/// Whether the real API server keeps `metadata.generation` for objects of `t` (checked against
/// kube-apiserver 1.37): custom resources, CRDs, the apps and batch workloads, pods,
/// ReplicationControllers, Ingresses, EndpointSlices and the admission webhook configurations. Other kinds (ConfigMap, Secret, Service, Namespace, Node,
/// Lease, Event, ...) store whatever a create sent (usually nothing) and never change it.
pub fn tracks_generation(t: &ResourceType) -> bool {
    t.custom.is_some()
        || matches!(
            crate::convert::storage_key(t).as_str(),
            "pods"
                | "replicationcontrollers"
                | "networking.k8s.io/ingresses"
                | "discovery.k8s.io/endpointslices"
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

/// The `metadata.generation` an update of `old` to `obj` gives (`None`: none), by the
/// generation rule: one more when anything but metadata (and a status kept apart by its
/// subresource) changed, for kinds that [track it](tracks_generation). `compared` is `old` in
/// `obj`'s version. Deployments also count annotation changes (upstream copies them to
/// ReplicaSets), EndpointSlices label changes (their strategy compares the labels). Used by
/// dry-run updates too, which answer the generation a real update would store.
pub(crate) fn generation_after_update(
    t: &ResourceType,
    old: &Value,
    compared: &Value,
    obj: &Value,
) -> Option<Value> {
    let resource = crate::convert::storage_key(t);
    let changed = spec_part(compared, t.status_subresource) != spec_part(obj, t.status_subresource)
        || (resource == "apps/deployments"
            && old["metadata"]["annotations"] != obj["metadata"]["annotations"])
        || (resource == "discovery.k8s.io/endpointslices"
            && old["metadata"]["labels"] != obj["metadata"]["labels"]);
    match old["metadata"]["generation"].as_i64() {
        Some(g) if tracks_generation(t) && changed => Some(json!(g + 1)),
        None if tracks_generation(t) => Some(json!(if changed { 2 } else { 1 })),
        _ => old["metadata"].get("generation").cloned(),
    }
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
        crate::defaults::encode(t, &mut obj);
        crate::defaults::prepare_create(t, &mut obj);
        if t.key() == "services" {
            let existing = self.range("services", None, None).map(|(_, s)| &s.value);
            crate::defaults::allocate(existing, &mut obj)?;
        }
        if t.key() == "apiextensions.k8s.io/customresourcedefinitions" {
            self.serve_crd(&mut obj)?;
        }
        let stored = self.write(&crate::convert::storage_key(t), key, obj);
        if t.key() == "namespaces" {
            self.create_default_service_account(&stored.value);
        }
        Ok(stored)
    }

    /// The serviceaccount controller's work, done with the namespace's creation: a `default`
    /// ServiceAccount in every new namespace ([`crate::bootstrap::default_service_account`]).
    fn create_default_service_account(&mut self, namespace: &Value) {
        let ns = meta_str(namespace, "name").unwrap_or_default().to_string();
        if let Some(t) = self.registry.get("serviceaccounts").cloned()
            && self.get("serviceaccounts", &ns, "default").is_none()
        {
            // Cannot fail: the namespace exists and the account does not.
            let _ = self.create(&t, crate::bootstrap::default_service_account(&ns));
        }
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
        obj: Value,
        expected_rv: Option<u64>,
    ) -> Result<Arc<StoredObject>, ApiError> {
        self.update_from(t, ns, name, obj, expected_rv, None)
    }

    /// [`Store::update`] of an object that may be stored in another version than `obj` (a
    /// custom resource written before its CRD's storage version changed): `old_converted` is
    /// the stored object converted to `obj`'s version, which the generation rule compares
    /// `obj` with (as upstream compares both in the request's version).
    pub fn update_from(
        &mut self,
        t: &ResourceType,
        ns: &str,
        name: &str,
        mut obj: Value,
        expected_rv: Option<u64>,
        old_converted: Option<&Value>,
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
        crate::defaults::encode(t, &mut obj);
        let deleting = !old["metadata"]["deletionTimestamp"].is_null();
        if deleting {
            let old_f: HashSet<String> = finalizers(old).into_iter().collect();
            let mut added: Vec<String> = finalizers(&obj)
                .into_iter()
                .filter(|f| !old_f.contains(f))
                .collect();
            if !added.is_empty() {
                added.sort();
                added.dedup();
                // Go's `%#v` of the sorted set: `[]string{"a", "b"}`.
                let quoted: Vec<String> = added.iter().map(|f| format!("{f:?}")).collect();
                let cause = (
                    "metadata.finalizers".to_string(),
                    "FieldValueForbidden".to_string(),
                    format!(
                        "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                        quoted.join(", ")
                    ),
                );
                // Once: kube-apiserver 1.34 listed this cause twice (the strategy's validation
                // and the generic BeforeUpdate both checked it), 1.37 once.
                return Err(ApiError::invalid(&t.group, &t.kind, name, vec![cause]));
            }
        }
        let generation = generation_after_update(t, old, old_converted.unwrap_or(old), &obj);
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
            // Versions objects were stored in stay listed, as upstream: a new storage version
            // is added to them.
            let mut stored = crate::json::strings(&status["storedVersions"]);
            for v in crate::json::strings(&obj["status"]["storedVersions"]) {
                if !stored.contains(&v) {
                    stored.push(v);
                }
            }
            if !stored.is_empty() {
                obj["status"]["storedVersions"] = json!(stored);
            }
            if !status.is_null() && !t.status_subresource {
                obj["status"] = status;
            }
        }
        if deleting && finalizers(&obj).is_empty() {
            // As on the real server, the update that drops the last finalizer deletes the
            // object: one DELETED event, carrying the state stored before that update (with
            // the finalizers it still had) at the deletion's resourceVersion; the answer is
            // the object as written.
            let last = self
                .remove(&resource, &key)
                .ok_or_else(|| ApiError::not_found(&t.group, &t.plural, name))?;
            let rv = last.rv;
            self.cascade(vec![(resource, last)]);
            // The writer is answered the object as it wrote it (no finalizers left).
            drop_empty_metadata(&mut obj);
            set_rv(&mut obj, rv);
            return Ok(StoredObject::new(obj, rv, t.custom.is_none()));
        }
        // As etcd3's GuaranteedUpdate: an update that changes nothing is no write (same
        // resourceVersion, no watch event).
        set_rv(&mut obj, current.rv);
        drop_empty_metadata(&mut obj);
        if obj == current.value {
            return Ok(current);
        }
        Ok(self.write(&resource, key, obj))
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
