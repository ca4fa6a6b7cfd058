//! [`Applier`]: server-side apply with one field manager per controller and an explicit
//! choice on conflicts.
//!
//! Server-side apply sends the fields a controller wants to own; the API server merges them,
//! records the controller (its *field manager*) as their owner in `managedFields`, and removes
//! the fields the same manager owned before and no longer sends. When another manager owns a
//! field with a different value, the server refuses with a conflict unless the apply is forced.
//! Controllers usually force (they are the authority on what they write), but the choice is
//! spelled out at each call: [`Conflicts::Force`] or [`Conflicts::Fail`].

use kube::api::{Patch, PatchParams};
use serde_json::Value;

use super::create_or_update::Target;
use super::error::ObjectError;
use super::object_api::Object;
use super::object_api::ObjectApi;
use crate::Context;

/// The longest field manager name the API server accepts.
const MAX_FIELD_MANAGER: usize = 128;

/// What an apply does when another manager owns a field it sends with another value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conflicts {
    /// Take the fields over (`force=true`).
    Force,
    /// Refuse: the apply fails with [`ObjectError::ApplyConflict`] and nothing is written.
    Fail,
}

/// Server-side apply as one field manager.
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcr_controller::objects::{Applier, Conflicts};
/// use kube::api::{Api, ObjectMeta};
///
/// # async fn run(client: kube::Client) -> Result<(), kcr_controller::objects::ObjectError> {
/// let applier = Applier::new("my-controller")?;
/// let api: Api<ConfigMap> = Api::namespaced(client, "default");
/// let desired = ConfigMap {
///     metadata: ObjectMeta { name: Some("settings".into()), ..Default::default() },
///     data: Some([("mode".to_string(), "fast".to_string())].into()),
///     ..Default::default()
/// };
/// let applied = applier.apply(&api, &desired, Conflicts::Force).await?;
/// # let _ = applied; Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applier {
    field_manager: String,
}

impl Applier {
    /// An applier writing as `field_manager` (1 to 128 characters).
    pub fn new(field_manager: impl Into<String>) -> Result<Applier, ObjectError> {
        let field_manager = field_manager.into();
        if field_manager.is_empty() || field_manager.len() > MAX_FIELD_MANAGER {
            return Err(ObjectError::InvalidFieldManager {
                name: field_manager,
            });
        }
        Ok(Applier { field_manager })
    }

    /// The applier of the controller reconciling now: its field manager is the controller's
    /// name, so each controller owns what it applies.
    pub fn for_controller(ctx: &Context) -> Result<Applier, ObjectError> {
        Applier::new(ctx.controller())
    }

    /// The field manager name.
    pub fn field_manager(&self) -> &str {
        &self.field_manager
    }

    /// Apply `object` (its name and the fields this manager owns; `apiVersion` and `kind` are
    /// written by the type's serialisation). `metadata.managedFields` and
    /// `metadata.resourceVersion` are not sent. Returns the object as stored.
    pub async fn apply<K: Object>(
        &self,
        api: &impl ObjectApi<K>,
        object: &K,
        conflicts: Conflicts,
    ) -> Result<K, ObjectError> {
        self.send(api, object, conflicts, false).await
    }

    /// Apply the `status` of `object` through the status subresource.
    pub async fn apply_status<K: Object>(
        &self,
        api: &impl ObjectApi<K>,
        object: &K,
        conflicts: Conflicts,
    ) -> Result<K, ObjectError> {
        self.send(api, object, conflicts, true).await
    }

    async fn send<K: Object>(
        &self,
        api: &impl ObjectApi<K>,
        object: &K,
        conflicts: Conflicts,
        status: bool,
    ) -> Result<K, ObjectError> {
        let target = Target::of(object)?;
        let api = api.api_for(object)?;
        let mut body = target.to_json(object)?;
        if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
            meta.remove("resourceVersion");
        }
        let mut params = PatchParams::apply(&self.field_manager);
        params.force = conflicts == Conflicts::Force;
        let patch = Patch::Apply(&body);
        let answer = if status {
            api.patch_status(&target.name, &params, &patch).await
        } else {
            api.patch(&target.name, &params, &patch).await
        };
        answer.map_err(|e| self.conflict_or(target, status, e))
    }

    fn conflict_or(&self, target: Target, status: bool, e: kube::Error) -> ObjectError {
        let verb = if status { "apply status" } else { "apply" };
        let kube::Error::Api(s) = &e else {
            return target.api_error(verb, e);
        };
        if s.code != 409 {
            return target.api_error(verb, e);
        }
        // The server lists each conflict as a cause: field `.data.a`, message
        // `conflict with "other-manager" using v1`.
        let causes = s
            .details
            .as_ref()
            .map(|d| d.causes.as_slice())
            .unwrap_or(&[]);
        let mut managers: Vec<String> = causes
            .iter()
            .filter_map(|c| c.message.split('"').nth(1).map(str::to_string))
            .collect();
        managers.sort();
        managers.dedup();
        let fields = causes
            .iter()
            .filter(|c| !c.field.is_empty())
            .map(|c| c.field.clone())
            .collect();
        ObjectError::ApplyConflict {
            kind: target.kind,
            key: target.key,
            field_manager: self.field_manager.clone(),
            managers,
            fields,
        }
    }
}
