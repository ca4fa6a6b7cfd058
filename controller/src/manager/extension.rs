//! Manager extensions: state that a layer built outside the manager (sharding, multi-cluster,
//! your own) sets up once per [`Manager`](crate::Manager), from the manager's client, and finds
//! again later, for example from a [`Builder`](crate::Builder) extension trait.
//!
//! An extension is given to [`ManagerOptions::extension`](crate::ManagerOptions::extension).
//! [`Manager::new`](crate::Manager::new) calls its [`init`](ManagerExtension::init) with the
//! manager's client; a failure fails `Manager::new` with
//! [`ManagerError::Extension`](crate::ManagerError::Extension) naming the extension. The state
//! it returns is read back by type with [`Manager::extension`](crate::Manager::extension).
//!
//! ```
//! use std::any::Any;
//! use std::sync::Arc;
//! use kcr_controller::extension::ManagerExtension;
//! use kcr_controller::{BoxError, ManagerOptions};
//!
//! /// The state a layer keeps per manager.
//! struct Greeter {
//!     namespace: String,
//! }
//!
//! struct GreeterExtension;
//!
//! impl ManagerExtension for GreeterExtension {
//!     fn name(&self) -> &str {
//!         "greeter"
//!     }
//!     fn init(&self, client: &kube::Client) -> Result<Arc<dyn Any + Send + Sync>, BoxError> {
//!         Ok(Arc::new(Greeter { namespace: client.default_namespace().to_string() }))
//!     }
//! }
//!
//! let options = ManagerOptions::default().extension(GreeterExtension);
//! // Later, with the manager: `manager.extension::<Greeter>()` is `Some(Arc<Greeter>)`.
//! # let _ = options;
//! ```

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

use crate::watch::BoxError;

/// A layer's per-manager set-up (see the [module docs](self)).
pub trait ManagerExtension: Send + Sync + 'static {
    /// The extension's name, for errors and logs.
    fn name(&self) -> &str;

    /// Builds the extension's state from the manager's client (the one
    /// [`Manager::kube_client`](crate::Manager::kube_client) returns). Called once, by
    /// [`Manager::new`](crate::Manager::new); must not block on the network. The value is
    /// stored under its concrete type, which [`Manager::extension`](crate::Manager::extension)
    /// asks for.
    fn init(&self, client: &kube::Client) -> Result<Arc<dyn Any + Send + Sync>, BoxError>;
}

/// The extensions of a [`ManagerOptions`](crate::ManagerOptions), in the order they were added.
#[derive(Clone, Default)]
pub struct Extensions(Vec<Arc<dyn ManagerExtension>>);

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|e| e.name()))
            .finish()
    }
}

impl Extensions {
    /// Adds an extension.
    pub fn push(&mut self, extension: impl ManagerExtension) {
        self.0.push(Arc::new(extension));
    }

    /// The extensions' names.
    pub fn names(&self) -> Vec<String> {
        self.0.iter().map(|e| e.name().to_string()).collect()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Initialises every extension; the first failure names its extension.
    pub(crate) fn init(
        &self,
        client: &kube::Client,
    ) -> Result<ExtensionStates, crate::ManagerError> {
        let mut states = HashMap::new();
        for extension in &self.0 {
            let state =
                extension
                    .init(client)
                    .map_err(|source| crate::ManagerError::Extension {
                        name: extension.name().to_string(),
                        source,
                    })?;
            let type_id = (*state).type_id();
            if states.insert(type_id, state).is_some() {
                return Err(crate::ManagerError::Extension {
                    name: extension.name().to_string(),
                    source:
                        "another extension of this manager already stored state of the same type"
                            .into(),
                });
            }
        }
        Ok(ExtensionStates(states))
    }
}

/// The states of a manager's extensions, by type.
#[derive(Default)]
pub(crate) struct ExtensionStates(HashMap<TypeId, Arc<dyn Any + Send + Sync>>);

impl ExtensionStates {
    pub(crate) fn get<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.0
            .get(&TypeId::of::<T>())
            .cloned()
            .and_then(|state| state.downcast::<T>().ok())
    }
}
