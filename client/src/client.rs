//! [`Client`]: one handle for every kind, reads from the shared cache and writes to the API
//! server, and its wrappers (a field owner, dry-run, field validation, one namespace).

use std::sync::Arc;
use std::time::Duration;

use kcr_source::Cache;
use kube::core::params::ValidationDirective;

use crate::error::ClientError;

/// How long a cached read waits for a kind's first complete list by default.
pub const DEFAULT_SYNC_TIMEOUT: Duration = Duration::from_secs(30);

/// The field manager of writes when none is configured.
pub const DEFAULT_FIELD_OWNER: &str = "kcr";

/// Server-side field validation of a write's body (`fieldValidation`): what the API server does
/// with unknown or duplicate fields. kube's `ValidationDirective`.
pub type FieldValidation = ValidationDirective;

/// Options of a [`Client`].
#[derive(Debug, Clone)]
#[must_use]
pub struct ClientOptions {
    /// The field manager of every write unless a call or a wrapper names another (default
    /// [`DEFAULT_FIELD_OWNER`]; a [`Manager`](https://docs.rs/kcr-controller) sets its own).
    pub field_owner: String,
    /// How long a cached read waits for a kind's watch to hold its first complete list
    /// (default [`DEFAULT_SYNC_TIMEOUT`]); past it the read fails with
    /// [`ClientError::SyncTimeout`].
    pub sync_timeout: Duration,
    /// Fail a cached read of a kind nothing watches yet with [`ClientError::NoInformer`]
    /// instead of starting its watch (controller-runtime's `ReaderFailOnMissingInformer`):
    /// for operators whose RBAC allows watching only the kinds their controllers name.
    pub fail_on_missing_informer: bool,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            field_owner: DEFAULT_FIELD_OWNER.to_string(),
            sync_timeout: DEFAULT_SYNC_TIMEOUT,
            fail_on_missing_informer: false,
        }
    }
}

impl ClientOptions {
    /// Sets the default field manager.
    pub fn field_owner(mut self, owner: impl Into<String>) -> Self {
        self.field_owner = owner.into();
        self
    }

    /// Sets the sync timeout of cached reads.
    pub fn sync_timeout(mut self, timeout: Duration) -> Self {
        self.sync_timeout = timeout;
        self
    }

    /// Fails cached reads of kinds nothing watches instead of starting a watch.
    pub fn fail_on_missing_informer(mut self, fail: bool) -> Self {
        self.fail_on_missing_informer = fail;
        self
    }
}

/// Options of one write; the client's wrappers set their defaults, and each
/// [`Write`](crate::Write) may change them for its call.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// The field manager (`fieldManager`).
    pub field_owner: Option<String>,
    /// Send the write as a dry run: the API server validates, admits and answers with the
    /// result, and stores nothing.
    pub dry_run: bool,
    /// Server-side field validation (`fieldValidation`); `None` leaves the server's default
    /// (`Warn` on current servers).
    pub field_validation: Option<FieldValidation>,
    /// Server-side apply only: take fields owned by other managers (`force=true`).
    pub force: bool,
}

pub(crate) struct Shared {
    pub(crate) kube: kube::Client,
    pub(crate) cache: Cache,
    pub(crate) sync_timeout: Duration,
    pub(crate) fail_on_missing_informer: bool,
}

/// One client for every kind (controller-runtime's `client.Client`).
///
/// - **Reads** ([`get`](Client::get), [`list`](Client::list)) come from the shared [`Cache`]:
///   the first read of a kind starts its watch (shared with every controller watching the same
///   kind and scope) and waits for its first complete list, up to the sync timeout. Objects are
///   `Arc`s of the cache's copies, never cloned. [`api_reader`](Client::api_reader) reads from
///   the API server instead, for reads that must be fresh.
/// - **Writes** ([`create`](Client::create), [`update`](Client::update),
///   [`patch`](Client::patch), [`apply`](Client::apply), [`delete`](Client::delete),
///   [`delete_all_of`](Client::delete_all_of), [`update_status`](Client::update_status),
///   [`patch_status`](Client::patch_status), [`patch_subresource`](Client::patch_subresource))
///   go to the API server, under the client's field owner unless the call names another.
/// - **Run-time kinds**: [`dynamic`](Client::dynamic) gives the same calls for `DynamicObject`s
///   of an `ApiResource`.
///
/// Cloning is cheap (an `Arc` and the wrapper's options); every clone and wrapper shares the
/// cache and the connection.
#[derive(Clone)]
pub struct Client {
    pub(crate) shared: Arc<Shared>,
    pub(crate) defaults: WriteOptions,
    pub(crate) namespace: Option<String>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("defaults", &self.defaults)
            .field("namespace", &self.namespace)
            .field("sync_timeout", &self.shared.sync_timeout)
            .field(
                "fail_on_missing_informer",
                &self.shared.fail_on_missing_informer,
            )
            .finish()
    }
}

impl Client {
    /// A client reading from `cache` and writing through `kube` (normally the client the cache
    /// watches with). Writes wait as long as `kube` lets them: a kcr `Manager`'s client, or one
    /// from kcr-connect (`kcr_connect::client`), bounds each request.
    pub fn new(kube: kube::Client, cache: Cache, options: ClientOptions) -> Self {
        Client {
            shared: Arc::new(Shared {
                kube,
                cache,
                sync_timeout: options.sync_timeout,
                fail_on_missing_informer: options.fail_on_missing_informer,
            }),
            defaults: WriteOptions {
                field_owner: Some(options.field_owner),
                ..WriteOptions::default()
            },
            namespace: None,
        }
    }

    /// The kube client writes go through.
    pub fn kube_client(&self) -> kube::Client {
        self.shared.kube.clone()
    }

    /// The cache reads come from.
    pub fn cache(&self) -> &Cache {
        &self.shared.cache
    }

    /// The default options of this client's writes.
    pub fn write_defaults(&self) -> &WriteOptions {
        &self.defaults
    }

    /// The namespace this client is scoped to, if any.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// This client with another default field owner (controller-runtime's
    /// `client.WithFieldOwner`).
    #[must_use]
    pub fn with_field_owner(&self, owner: impl Into<String>) -> Client {
        let mut client = self.clone();
        client.defaults.field_owner = Some(owner.into());
        client
    }

    /// This client with every write a dry run (controller-runtime's `client.NewDryRunClient`):
    /// the API server validates and admits each write and stores nothing. Reads are unchanged.
    #[must_use]
    pub fn dry_run_all(&self) -> Client {
        let mut client = self.clone();
        client.defaults.dry_run = true;
        client
    }

    /// This client with a field validation on every write (controller-runtime's
    /// `client.WithFieldValidation`).
    #[must_use]
    pub fn with_field_validation(&self, validation: FieldValidation) -> Client {
        let mut client = self.clone();
        client.defaults.field_validation = Some(validation);
        client
    }

    /// This client scoped to `namespace` (controller-runtime's `client.NewNamespacedClient`):
    /// calls on namespaced kinds that name no namespace use it, calls (and objects) that name
    /// another fail with [`ClientError::NamespaceMismatch`], and lists list only it.
    /// Cluster-scoped kinds are unaffected.
    #[must_use]
    pub fn in_namespace(&self, namespace: impl Into<String>) -> Client {
        let mut client = self.clone();
        client.namespace = Some(namespace.into());
        client
    }

    /// The namespace of a call on the object `name` of a kind: `None` for cluster-scoped
    /// kinds; for namespaced ones the call's, else the client's.
    pub(crate) fn namespace_of(
        &self,
        kind: &str,
        namespaced: bool,
        name: &str,
        asked: Option<&str>,
    ) -> Result<Option<String>, ClientError> {
        if !namespaced {
            return Ok(None);
        }
        match self.list_namespace(kind, namespaced, name, asked)? {
            Some(ns) => Ok(Some(ns)),
            None => Err(ClientError::NamespaceRequired {
                kind: kind.to_string(),
                name: name.to_string(),
            }),
        }
    }

    /// The namespace of a list: as [`namespace_of`](Self::namespace_of), except that none
    /// means every namespace.
    pub(crate) fn list_namespace(
        &self,
        kind: &str,
        namespaced: bool,
        name: &str,
        asked: Option<&str>,
    ) -> Result<Option<String>, ClientError> {
        if !namespaced {
            return Ok(None);
        }
        match (asked, self.namespace.as_deref()) {
            (Some(asked), Some(client)) if asked != client => Err(ClientError::NamespaceMismatch {
                kind: kind.to_string(),
                name: name.to_string(),
                client: client.to_string(),
                asked: asked.to_string(),
            }),
            (Some(ns), _) | (None, Some(ns)) => Ok(Some(ns.to_string())),
            (None, None) => Ok(None),
        }
    }
}
