//! Registering typed webhooks on a [`WebhookServer`], and the [`Manager`] integration.

use std::marker::PhantomData;
use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1 as ar;
use kcr_controller::Manager;

use crate::admission::{
    Defaulter, DefaultingEndpoint, ValidatingEndpoint, Validator, WebhookObject,
};
use crate::config::{
    ClientTarget, FailurePolicy, WebhookRegistration, WebhookType, mutate_path, validate_path,
    webhook_configurations,
};
use crate::conversion::{Conversion, ConvertEndpoint};
use crate::endpoint::{CONVERT_PATH, Endpoint};
use crate::server::{WebhookError, WebhookServer, check_path};

/// Makes a webhook's endpoint for the path it is served at (known at `complete`).
type MakeEndpoint = Box<dyn FnOnce(String) -> Arc<dyn Endpoint>>;

/// Registers a defaulter and/or validator for `K`: from [`WebhookServer::webhook`] or
/// [`ManagerWebhookExt::webhook`].
#[must_use = "nothing is registered until `complete` is called"]
pub struct WebhookBuilder<'a, K> {
    server: &'a WebhookServer,
    defaulter: Option<MakeEndpoint>,
    validator: Option<MakeEndpoint>,
    defaulter_path: Option<String>,
    validator_path: Option<String>,
    failure_policy: FailurePolicy,
    timeout_seconds: i32,
    validate_delete: bool,
    _k: PhantomData<fn() -> K>,
}

impl<K> std::fmt::Debug for WebhookBuilder<'_, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookBuilder")
            .field("defaulter", &self.defaulter.is_some())
            .field("validator", &self.validator.is_some())
            .field("defaulter_path", &self.defaulter_path)
            .field("validator_path", &self.validator_path)
            .field("failure_policy", &self.failure_policy)
            .field("timeout_seconds", &self.timeout_seconds)
            .field("validate_delete", &self.validate_delete)
            .finish()
    }
}

impl<'a, K: WebhookObject> WebhookBuilder<'a, K> {
    fn new(server: &'a WebhookServer) -> Self {
        WebhookBuilder {
            server,
            defaulter: None,
            validator: None,
            defaulter_path: None,
            validator_path: None,
            failure_policy: FailurePolicy::Fail,
            timeout_seconds: 10,
            validate_delete: false,
            _k: PhantomData,
        }
    }

    /// Serves `defaulter` at [`mutate_path`] of `K` (or [`defaulter_path`](Self::defaulter_path)).
    pub fn defaulter<D: Defaulter<K>>(mut self, defaulter: D) -> Self {
        self.defaulter = Some(Box::new(move |path| {
            Arc::new(DefaultingEndpoint::<K, D> {
                path,
                defaulter: Arc::new(defaulter),
                _k: PhantomData,
            })
        }));
        self
    }

    /// Serves `validator` at [`validate_path`] of `K` (or [`validator_path`](Self::validator_path)).
    pub fn validator<V: Validator<K>>(mut self, validator: V) -> Self {
        self.validator = Some(Box::new(move |path| {
            Arc::new(ValidatingEndpoint::<K, V> {
                path,
                validator: Arc::new(validator),
                _k: PhantomData,
            })
        }));
        self
    }

    /// Serves the defaulter at `path` instead of [`mutate_path`] (controller-runtime's
    /// `WithDefaulterCustomPath`); the path goes into the generated MutatingWebhookConfiguration.
    /// Checked at [`complete`](Self::complete): it must start with `/` and hold no query.
    pub fn defaulter_path(mut self, path: impl Into<String>) -> Self {
        self.defaulter_path = Some(path.into());
        self
    }

    /// Serves the validator at `path` instead of [`validate_path`] (controller-runtime's
    /// `WithValidatorCustomPath`); the path goes into the generated
    /// ValidatingWebhookConfiguration.
    pub fn validator_path(mut self, path: impl Into<String>) -> Self {
        self.validator_path = Some(path.into());
        self
    }

    /// The failure policy of the generated configurations (default `Fail`).
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.failure_policy = policy;
        self
    }

    /// The API server's timeout for these webhooks, clamped to 1..=30 s (default 10 s).
    pub fn timeout_seconds(mut self, seconds: i32) -> Self {
        self.timeout_seconds = seconds.clamp(1, 30);
        self
    }

    /// Also validate `DELETE` (the validating webhook is registered for CREATE and UPDATE
    /// otherwise, as kubebuilder scaffolds it).
    pub fn validate_delete(mut self, yes: bool) -> Self {
        self.validate_delete = yes;
        self
    }

    fn paths() -> (String, String) {
        let (g, v, k) = (K::group(&()), K::version(&()), K::kind(&()));
        (mutate_path(&g, &v, &k), validate_path(&g, &v, &k))
    }

    /// Registers the webhooks; returns their paths (mutating first). Fails on a path
    /// registered already or not servable ([`WebhookError::InvalidPath`]); nothing is
    /// registered then.
    pub fn complete(self) -> Result<Vec<String>, WebhookError> {
        let (default_m, default_v) = Self::paths();
        let mpath = self.defaulter_path.clone().unwrap_or(default_m);
        let vpath = self.validator_path.clone().unwrap_or(default_v);
        let duplicate = |path: &str| -> Result<(), WebhookError> {
            if self.server.paths().iter().any(|p| p == path) {
                return Err(WebhookError::DuplicatePath {
                    path: path.to_string(),
                });
            }
            Ok(())
        };
        if self.defaulter.is_some() {
            check_path(&mpath)?;
            duplicate(&mpath)?;
        }
        if self.validator.is_some() {
            check_path(&vpath)?;
            duplicate(&vpath)?;
            if self.defaulter.is_some() && mpath == vpath {
                return Err(WebhookError::DuplicatePath { path: vpath });
            }
        }
        let registration = |webhook_type, path: &str, operations: &[&str]| WebhookRegistration {
            webhook_type,
            path: path.to_string(),
            group: K::group(&()).into_owned(),
            version: K::version(&()).into_owned(),
            kind: K::kind(&()).into_owned(),
            plural: K::plural(&()).into_owned(),
            operations: operations.iter().map(|o| o.to_string()).collect(),
            failure_policy: self.failure_policy,
            timeout_seconds: self.timeout_seconds,
        };
        let mut paths = Vec::new();
        if let Some(d) = self.defaulter {
            self.server.register(&mpath, d(mpath.clone()))?;
            self.server.add_registration(registration(
                WebhookType::Mutating,
                &mpath,
                &["CREATE", "UPDATE"],
            ));
            paths.push(mpath);
        }
        if let Some(v) = self.validator {
            self.server.register(&vpath, v(vpath.clone()))?;
            let ops: &[&str] = if self.validate_delete {
                &["CREATE", "UPDATE", "DELETE"]
            } else {
                &["CREATE", "UPDATE"]
            };
            self.server
                .add_registration(registration(WebhookType::Validating, &vpath, ops));
            paths.push(vpath);
        }
        Ok(paths)
    }
}

impl WebhookServer {
    /// Starts registering webhooks for `K`.
    pub fn webhook<K: WebhookObject>(&self) -> WebhookBuilder<'_, K> {
        WebhookBuilder::new(self)
    }

    /// Serves `conversion` at [`CONVERT_PATH`] (one endpoint for every kind).
    pub fn add_conversion<H: WebhookObject>(
        &self,
        conversion: Conversion<H>,
    ) -> Result<(), WebhookError> {
        if let Some(problem) = conversion.problems().first() {
            return Err(WebhookError::InvalidConversion {
                message: problem.clone(),
            });
        }
        let registry = self.conversions().clone();
        if registry.is_empty() {
            // First kind: the endpoint itself.
            self.register(CONVERT_PATH, Arc::new(ConvertEndpoint(registry.clone())))?;
        }
        let kind = conversion.qualified_kind();
        if !registry.add(
            H::group(&()).into_owned(),
            H::kind(&()).into_owned(),
            Arc::new(conversion),
        ) {
            return Err(WebhookError::DuplicateConversion { kind });
        }
        Ok(())
    }

    /// The MutatingWebhookConfiguration and ValidatingWebhookConfiguration for every
    /// admission webhook registered (see [`webhook_configurations`]).
    pub fn webhook_configurations(
        &self,
        name: &str,
        target: &ClientTarget,
        ca_bundle: &[u8],
    ) -> (
        ar::MutatingWebhookConfiguration,
        ar::ValidatingWebhookConfiguration,
    ) {
        webhook_configurations(name, &self.registrations(), target, ca_bundle)
    }
}

/// Webhooks on a kcr [`Manager`].
///
/// ```no_run
/// # use kcr_webhook::{ManagerWebhookExt, ServerOptions, WebhookServer};
/// # use kcr_webhook::example::v1::{Widget, WidgetDefaulter, WidgetValidator};
/// # async fn f(mgr: kcr_controller::Manager) -> Result<(), Box<dyn std::error::Error>> {
/// let server = WebhookServer::bind(ServerOptions::default().cert_dir("/certs")).await?;
/// mgr.add_webhook_server(&server)?; // runs on every replica; readiness waits for a certificate
/// mgr.webhook::<Widget>(&server)
///     .defaulter(WidgetDefaulter)
///     .validator(WidgetValidator)
///     .complete()?;
/// # Ok(()) }
/// ```
pub trait ManagerWebhookExt {
    /// Runs `server` as a runnable on every replica (leader or not: the API server calls any
    /// of them), and adds the readiness check `webhook`, failing until the server serves a
    /// valid certificate.
    fn add_webhook_server(&self, server: &WebhookServer) -> Result<(), WebhookError>;

    /// Starts registering webhooks for `K` on `server`.
    fn webhook<'a, K: WebhookObject>(&self, server: &'a WebhookServer) -> WebhookBuilder<'a, K>;
}

impl ManagerWebhookExt for Manager {
    fn add_webhook_server(&self, server: &WebhookServer) -> Result<(), WebhookError> {
        let ready = server.clone();
        self.add_readyz_check("webhook", move || ready.ready())?;
        let run = server.clone();
        self.add_runnable("webhook-server", false, move |token| async move {
            run.run(token)
                .await
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
        })?;
        Ok(())
    }

    fn webhook<'a, K: WebhookObject>(&self, server: &'a WebhookServer) -> WebhookBuilder<'a, K> {
        server.webhook::<K>()
    }
}
