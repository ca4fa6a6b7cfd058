//! [`create_or_update`] and [`create_or_patch`]: make an object in the cluster look like a
//! mutate function says, creating it when it is missing, and report what happened.
//!
//! Both read the object by the key of the one passed in, run `mutate` on what they read (or,
//! when nothing exists, on the object as passed), and write only when `mutate` changed
//! something, so calling them on every reconcile costs one read and no write in the steady
//! state. `create_or_update` writes the whole object with a PUT that carries the
//! `resourceVersion` it read (a concurrent write makes it fail with a 409: read again and
//! retry, or return the error and let the controller requeue). `create_or_patch` sends a JSON
//! merge patch of only the changed fields, and writes a changed `status` through the status
//! subresource, as controller-runtime's `CreateOrPatch` does.

use std::error::Error as StdError;
use std::fmt::Debug;

use kube::Resource;
use kube::api::Patch;
use serde::Serialize;
use serde_json::{Map, Value};

use super::error::ObjectError;
use super::object_api::{Object, ObjectApi, Writer};

/// What [`create_or_update`] or [`create_or_patch`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OperationResult {
    /// The object did not exist and was created.
    Created,
    /// The object existed and was written (for `create_or_patch`: its main resource only).
    Updated,
    /// `create_or_patch` only: both the main resource and the status were patched.
    UpdatedStatus,
    /// `create_or_patch` only: only the status was patched.
    UpdatedStatusOnly,
    /// The object existed and `mutate` changed nothing: no write.
    Unchanged,
}

/// A mutate function of [`create_or_update`] and [`create_or_patch`]: sets what the object
/// should hold, in place, or fails (then nothing is written). Implemented by every
/// `FnOnce(&mut K) -> Result<(), E>` whose error converts into a boxed error.
pub trait Mutate<K>: FnOnce(&mut K) -> Result<(), Self::Error> {
    /// The error the function may return.
    type Error: Into<Box<dyn StdError + Send + Sync + 'static>>;
}

impl<K, F, E> Mutate<K> for F
where
    F: FnOnce(&mut K) -> Result<(), E>,
    E: Into<Box<dyn StdError + Send + Sync + 'static>>,
{
    type Error = E;
}

/// Create `object` if it does not exist, else update it, after `mutate` has set what it should
/// hold. On return `object` is what the API server answered (or, when unchanged, what it
/// read).
///
/// `object` needs its name (and its namespace, or the `Api`'s: see [`ObjectApi`]); `mutate`
/// must not change them. Every write carries the field owner of `api`. `mutate` runs once, on the object read from the server, or on `object` itself when
/// there is none.
///
/// ```no_run
/// use std::collections::BTreeMap;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcr_controller::objects::{OperationResult, create_or_update};
/// use kube::api::{Api, ObjectMeta};
///
/// # async fn run(client: kube::Client) -> Result<(), kcr_controller::objects::ObjectError> {
/// let api: Api<ConfigMap> = Api::namespaced(client, "default");
/// let mut config = ConfigMap {
///     metadata: ObjectMeta { name: Some("settings".into()), ..Default::default() },
///     ..Default::default()
/// };
/// let result = create_or_update(&api, &mut config, |cm| {
///     cm.data.get_or_insert_with(BTreeMap::new).insert("mode".into(), "fast".into());
///     Ok::<_, std::convert::Infallible>(())
/// })
/// .await?;
/// assert_ne!(result, OperationResult::UpdatedStatus);
/// # Ok(()) }
/// ```
pub async fn create_or_update<K: Object>(
    api: &impl ObjectApi<K>,
    object: &mut K,
    mutate: impl Mutate<K>,
) -> Result<OperationResult, ObjectError> {
    let target = Target::of(object)?;
    let writer = Writer::new(api, object)?;
    let Some(before) = target.read_and_mutate(&writer, object, mutate).await? else {
        return Ok(OperationResult::Created);
    };
    if target.to_json(object)? == before {
        return Ok(OperationResult::Unchanged);
    }
    *object = writer
        .api
        .replace(&target.name, &writer.post_params(), object)
        .await
        .map_err(|e| target.api_error("update", e))?;
    Ok(OperationResult::Updated)
}

/// Create `object` if it does not exist, else patch what `mutate` changed: a JSON merge patch
/// of the main resource, then one of the status subresource when `mutate` changed `status`.
/// On return `object` is what the API server last answered.
///
/// The patches carry no `resourceVersion`: fields `mutate` did not touch are left as other
/// writers set them. A kind without a status subresource must not change `status` in
/// `mutate` (the status patch would answer 404).
pub async fn create_or_patch<K: Object>(
    api: &impl ObjectApi<K>,
    object: &mut K,
    mutate: impl Mutate<K>,
) -> Result<OperationResult, ObjectError> {
    let target = Target::of(object)?;
    let writer = Writer::new(api, object)?;
    let Some(mut before) = target.read_and_mutate(&writer, object, mutate).await? else {
        return Ok(OperationResult::Created);
    };
    let mut after = target.to_json(object)?;
    let status_before = take_status(&mut before);
    let status_after = take_status(&mut after);
    let main = merge_patch(&before, &after);
    let status = merge_patch(&status_before, &status_after);
    let params = writer.patch_params();
    if let Some(patch) = &main {
        *object = writer
            .api
            .patch(&target.name, &params, &Patch::Merge(patch))
            .await
            .map_err(|e| target.api_error("patch", e))?;
    }
    if let Some(patch) = status {
        let body = Value::Object(Map::from_iter([("status".to_string(), patch)]));
        *object = writer
            .api
            .patch_status(&target.name, &params, &Patch::Merge(&body))
            .await
            .map_err(|e| target.api_error("patch status", e))?;
    }
    Ok(match (main.is_some(), status_after != status_before) {
        (false, false) => OperationResult::Unchanged,
        (true, false) => OperationResult::Updated,
        (true, true) => OperationResult::UpdatedStatus,
        (false, true) => OperationResult::UpdatedStatusOnly,
    })
}

fn take_status(value: &mut Value) -> Value {
    value
        .as_object_mut()
        .and_then(|o| o.remove("status"))
        .unwrap_or(Value::Null)
}

/// The JSON merge patch (RFC 7386) that turns `before` into `after`, or `None` when they are
/// equal. Removed keys become `null`; arrays and scalars are replaced whole.
pub(crate) fn merge_patch(before: &Value, after: &Value) -> Option<Value> {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            let mut patch = Map::new();
            for (key, old) in b {
                match a.get(key) {
                    None => {
                        patch.insert(key.clone(), Value::Null);
                    }
                    Some(new) => {
                        if let Some(p) = merge_patch(old, new) {
                            patch.insert(key.clone(), p);
                        }
                    }
                }
            }
            for (key, new) in a {
                if !b.contains_key(key) {
                    patch.insert(key.clone(), new.clone());
                }
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        _ if before == after => None,
        _ => Some(after.clone()),
    }
}

/// The kind and key of the object a helper works on, for its requests and its errors.
pub(crate) struct Target {
    pub(crate) kind: String,
    pub(crate) name: String,
    pub(crate) key: String,
}

impl Target {
    pub(crate) fn of<K: Resource<DynamicType = ()>>(object: &K) -> Result<Target, ObjectError> {
        let kind = K::kind(&()).into_owned();
        let Some(name) = object.meta().name.clone().filter(|n| !n.is_empty()) else {
            return Err(ObjectError::NoName { kind });
        };
        let key = key_of(object.meta().namespace.as_deref(), &name);
        Ok(Target { kind, name, key })
    }

    pub(crate) fn api_error(&self, verb: &'static str, source: kube::Error) -> ObjectError {
        ObjectError::Api {
            verb,
            kind: self.kind.clone(),
            key: self.key.clone(),
            source: Box::new(source),
        }
    }

    /// The common start of both helpers: reads the object; when there is none, runs `mutate`
    /// on `object` and creates it (`None`: created, `object` is the answer); else puts what it
    /// read into `object`, runs `mutate` on it and returns the JSON from before `mutate`.
    async fn read_and_mutate<K: Object>(
        &self,
        writer: &Writer<K>,
        object: &mut K,
        mutate: impl Mutate<K>,
    ) -> Result<Option<Value>, ObjectError> {
        let current = writer
            .api
            .get_opt(&self.name)
            .await
            .map_err(|e| self.api_error("get", e))?;
        let Some(current) = current else {
            self.run_mutate(object, mutate)?;
            *object = writer
                .api
                .create(&writer.post_params(), object)
                .await
                .map_err(|e| self.api_error("create", e))?;
            return Ok(None);
        };
        *object = current;
        let before = self.to_json(object)?;
        self.run_mutate(object, mutate)?;
        Ok(Some(before))
    }

    fn run_mutate<K: Resource>(
        &self,
        object: &mut K,
        mutate: impl Mutate<K>,
    ) -> Result<(), ObjectError> {
        let namespace = object.meta().namespace.clone();
        mutate(object).map_err(|e| ObjectError::Mutate {
            kind: self.kind.clone(),
            key: self.key.clone(),
            source: e.into(),
        })?;
        let meta = object.meta();
        if meta.name.as_deref() != Some(self.name.as_str()) || meta.namespace != namespace {
            return Err(ObjectError::KeyChanged {
                kind: self.kind.clone(),
                before: self.key.clone(),
                after: key_of(
                    meta.namespace.as_deref(),
                    meta.name.as_deref().unwrap_or(""),
                ),
            });
        }
        Ok(())
    }

    pub(crate) fn to_json<K: Serialize>(&self, object: &K) -> Result<Value, ObjectError> {
        serde_json::to_value(object).map_err(|source| ObjectError::Serialize {
            kind: self.kind.clone(),
            key: self.key.clone(),
            source,
        })
    }
}

fn key_of(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}
