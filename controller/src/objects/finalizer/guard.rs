//! The guarded JSON patch every finalizer write goes through: a `test` in the patch, a fresh
//! read and one more plan when the guard fails (the object changed since it was read), and the
//! check of a finalizer's name.

use kube::api::Patch;
use serde_json::Value;

use crate::objects::create_or_update::Target;
use crate::objects::error::ObjectError;
use crate::objects::object_api::{Object, Writer};

/// What [`guarded_patch`] did.
pub(crate) enum Guarded<K> {
    /// The patch was written; the object as the API server answered.
    Written(K),
    /// Nothing to patch on the object as last read.
    Unneeded(K),
    /// The object does not exist (any more).
    Gone,
}

/// Sends the JSON patch `plan` makes for `object` (none: nothing to do). When a guard fails
/// (the object changed since it was read), reads it again and plans once more on the fresh
/// copy; a second stale answer is returned as the error.
pub(crate) async fn guarded_patch<K: Object>(
    api: &Writer<K>,
    object: &K,
    plan: impl Fn(&K) -> Option<Value>,
) -> Result<Guarded<K>, ObjectError> {
    let target = Target::of(object)?;
    let mut current = object.clone();
    let mut fresh_read = false;
    loop {
        let Some(ops) = plan(&current) else {
            return Ok(Guarded::Unneeded(current));
        };
        match send(api, &target, ops).await {
            Ok(written) => return Ok(Guarded::Written(written)),
            Err(e) if e.is_not_found() => return Ok(Guarded::Gone),
            Err(e) if !fresh_read && is_stale(&e) => {
                fresh_read = true;
                match fresh(api, &target).await? {
                    Some(read) => current = read,
                    None => return Ok(Guarded::Gone),
                }
            }
            Err(e) => return Err(e),
        }
    }
}

async fn send<K: Object>(api: &Writer<K>, target: &Target, ops: Value) -> Result<K, ObjectError> {
    let patch: json_patch::Patch =
        serde_json::from_value(ops).map_err(|source| ObjectError::Serialize {
            kind: target.kind.clone(),
            key: target.key.clone(),
            source,
        })?;
    api.api
        .patch(&target.name, &api.patch_params(), &Patch::<()>::Json(patch))
        .await
        .map_err(|e| target.api_error("patch", e))
}

async fn fresh<K: Object>(api: &Writer<K>, target: &Target) -> Result<Option<K>, ObjectError> {
    api.api
        .get_opt(&target.name)
        .await
        .map_err(|e| target.api_error("get", e))
}

/// A failed `test` guard (422 without field causes) or a 409: the cached object was stale.
fn is_stale(e: &ObjectError) -> bool {
    e.api_status().is_some_and(|s| {
        s.code == 409
            || (s.code == 422
                && s.details
                    .as_ref()
                    .is_none_or(|d| d.causes.iter().all(|c| c.field.is_empty())))
    })
}

/// A finalizer name must be a qualified name (`[prefix/]name`), as the API server requires. A
/// name without a domain prefix is accepted, as the API server accepts it (with a warning
/// suggesting `example.com/name`): operators that shipped one cannot rename it without
/// stranding the objects that carry it.
pub(crate) fn check_name(name: &str) -> Result<(), ObjectError> {
    match kcr_names::validate_qualified_name(name).into_iter().next() {
        Some(reason) => Err(ObjectError::InvalidFinalizer {
            name: name.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finalizer_names_are_checked() {
        assert!(check_name("example.com/cleanup").is_ok());
        assert!(check_name("node.finalizers.node-pool.lailin.xyz").is_ok());
        let err = check_name("clean up").unwrap_err();
        assert!(
            err.to_string()
                .contains("invalid finalizer name \"clean up\""),
            "{err}"
        );
        let err = check_name("Example.com/").unwrap_err();
        assert!(matches!(err, ObjectError::InvalidFinalizer { .. }), "{err}");
        assert!(check_name("").is_err());
    }
}
