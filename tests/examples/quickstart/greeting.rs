//! The quick start's kind and controller (the guide's `quickstart.md` shows it; the test
//! `tests/tests/guide_quickstart.rs` runs it on both backends).

// ANCHOR: types
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kcr_controller::objects::set_controller_reference;
use kcr_controller::{
    Action, Client, Context, Manager, ManagerError, ObjectReconciler, WatchOptions,
};
use kube::api::ObjectMeta;
use kube::{CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A greeting: the controller writes its message into a ConfigMap of the same name.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "quickstart.kcr.dev",
    version = "v1",
    kind = "Greeting",
    namespaced
)]
pub struct GreetingSpec {
    /// What to say.
    pub message: String,
}
// ANCHOR_END: types

// ANCHOR: controller
/// Keeps a ConfigMap `<greeting>` with `message` in it, owned by the greeting (so it goes
/// when the greeting goes).
pub struct Greeter {
    client: Client,
}

impl ObjectReconciler for Greeter {
    type Object = Greeting;
    type Error = anyhow::Error;

    async fn reconcile(&self, greeting: Arc<Greeting>, _ctx: &Context) -> anyhow::Result<Action> {
        let mut cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(greeting.name_any()),
                namespace: greeting.namespace(),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(
                "message".to_string(),
                greeting.spec.message.clone(),
            )])),
            ..ConfigMap::default()
        };
        set_controller_reference(&*greeting, &mut cm)?;
        self.client.apply(&cm).force().await?;
        Ok(Action::done())
    }
}

/// Registers the controller: greetings, and the ConfigMaps they own.
pub fn add_greeter(mgr: &Manager) -> Result<(), ManagerError> {
    mgr.controller()
        .for_kind::<Greeting>(WatchOptions::new())
        .owns::<ConfigMap>(WatchOptions::new())
        .complete_objects(Greeter {
            client: mgr.client(),
        })
}
// ANCHOR_END: controller
