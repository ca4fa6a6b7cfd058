//! The operator on the embedded API server (kcr-envtest), exactly as in production: the demo,
//! the end-to-end tests and the benchmark all use this.
//!
//! [`Embedded::start`] starts an in-process API server with simulated nodes, installs the CRD
//! through the API (as `kubectl apply` would) and generates a self-signed webhook certificate.
//! [`Embedded::start_operator`] then runs the real [`Operator`] against it (manager, cache,
//! controller, HTTPS webhook server) and points the webhook configurations at that operator's
//! webhook server. [`convergence_problems`] compares the cluster with what the pools ask for.
//!
//! With `KCR_RBAC_RECORD=<dir>` in the environment, every operator started here records its
//! requests into `<dir>` (kcr-testkit's access recorder), so that a test run gives the record
//! `cargo kcr rbac --check` compares `config/rbac/` with (`.ci/check-rbac`).
//!
//! Run the operator exactly as in production against the embedded API server, create a pool and
//! put a node in it:
//!
//! ```
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::Node;
//! use kube::api::{Api, Patch, PatchParams, PostParams};
//! use nodepool_operator::crd::{NodePool, NodePoolSpec, membership_label};
//! use nodepool_operator::embedded::Embedded;
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let env = Embedded::start(2).await?; // API server, 2 nodes, CRD, webhook certificate
//! let operator = env.start_operator(&env.run_options(), true).await?;
//!
//! let mut spec = NodePoolSpec::default();
//! spec.labels.insert("node-pool.lailin.xyz/worker".into(), "10".into());
//! let pools: Api<NodePool> = Api::all(env.client.clone());
//! let created = pools.create(&PostParams::default(), &NodePool::new("worker", spec)).await?;
//! assert_eq!(created.spec.handler, "runc"); // defaulted by the mutating webhook
//!
//! let nodes: Api<Node> = Api::all(env.client.clone());
//! let join = serde_json::json!({"metadata": {"labels": {membership_label("worker"): ""}}});
//! nodes.patch("envtest-node-0", &PatchParams::default(), &Patch::Merge(&join)).await?;
//!
//! env.wait_converged(Duration::from_secs(30)).await?;
//! let node = nodes.get("envtest-node-0").await?;
//! assert_eq!(node.metadata.labels.unwrap()["node-pool.lailin.xyz/worker"], "10");
//! assert_eq!(pools.get("worker").await?.status.unwrap().node_count, 1);
//! operator.stop().await?;
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kcr_envtest::TestApiServer;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{CustomResourceExt, ResourceExt};
use tokio_util::sync::CancellationToken;

use crate::crd::{FINALIZER, NodePool, runtime_class_name};
use crate::deploy::{WebhookTarget, webhook_configurations};
use crate::nodes::{Applied, is_member, plan_node};
use crate::operator::{Operator, OperatorError, RunOptions};
use crate::runtimeclass::reconcile_runtime_class;
use kcr_webhook::{CertificateAuthority, TlsError};

/// Errors of the embedded environment.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    /// The API server.
    #[error("embedded API server: {0}")]
    Envtest(#[from] kcr_envtest::EnvtestError),
    /// An API call.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// The error.
        source: kube::Error,
    },
    /// The NodePool CRD was created but is not served.
    #[error("the NodePool CRD is not served: {0}")]
    CrdNotServed(String),
    /// Certificates.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The operator.
    #[error(transparent)]
    Operator(#[from] OperatorError),
    /// A temporary directory.
    #[error("temporary directory: {0}")]
    Io(#[from] std::io::Error),
    /// The server's kubeconfig could not be read as a client configuration.
    #[error("the embedded server's kubeconfig: {0}")]
    Kubeconfig(String),
    /// The RBAC record (`KCR_RBAC_RECORD`) could not be written.
    #[error(transparent)]
    Record(#[from] kcr_testkit::access::RecordError),
    /// The operator task panicked or was aborted.
    #[error("operator task: {0}")]
    Join(#[from] tokio::task::JoinError),
    /// Convergence did not happen in time.
    #[error("not converged after {after:?}: {problems:?}")]
    NotConverged {
        /// How long was waited.
        after: Duration,
        /// What was still wrong.
        problems: Vec<String>,
    },
}

/// `client`, recording the operator's requests into the suite's RBAC record when
/// `KCR_RBAC_RECORD` names a directory (`kcr_testkit::access::record_from_env`: one JSON-lines
/// file per process, the input of `cargo kcr rbac`), else `client` itself. Every operator the
/// harness starts goes through it, in the tests and in `nodepool-operator demo`.
fn recorded(client: kube::Client) -> Result<kube::Client, EmbeddedError> {
    Ok(kcr_testkit::access::record_from_env(client)?)
}

pub(crate) fn api_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> EmbeddedError {
    let what = what.into();
    move |source| EmbeddedError::Api { what, source }
}

/// Every object of kind `K` in the cluster; `what` names the list in the error.
pub(crate) async fn list_all<K>(client: &kube::Client, what: &str) -> Result<Vec<K>, EmbeddedError>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Api::<K>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|list| list.items)
        .map_err(api_err(what))
}

/// An embedded API server prepared for the operator.
pub struct Embedded {
    /// The API server.
    pub server: TestApiServer,
    /// An admin client.
    pub client: kube::Client,
    /// The webhook CA (PEM).
    pub ca_pem: String,
    cert_dir: tempfile::TempDir,
}

impl std::fmt::Debug for Embedded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedded")
            .field("url", &self.server.url())
            .field("cert_dir", &self.cert_dir.path())
            .finish()
    }
}

/// A running operator (see [`Embedded::start_operator`]).
pub struct RunningOperator {
    operator: std::sync::Arc<Operator>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), OperatorError>>,
    /// `/metrics` address.
    pub metrics_addr: Option<SocketAddr>,
    /// `/healthz`, `/readyz` address.
    pub probes_addr: Option<SocketAddr>,
    /// Webhook server address.
    pub webhook_addr: Option<SocketAddr>,
}

impl std::fmt::Debug for RunningOperator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningOperator")
            .field("metrics_addr", &self.metrics_addr)
            .field("probes_addr", &self.probes_addr)
            .field("webhook_addr", &self.webhook_addr)
            .finish()
    }
}

impl RunningOperator {
    /// Graceful shutdown; returns the operator's result.
    pub async fn stop(self) -> Result<(), EmbeddedError> {
        self.stop.cancel();
        Ok(self.task.await??)
    }

    /// Stops without a graceful shutdown (a crash): the task is aborted.
    pub async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }

    /// Whether this operator currently leads (always true without leader election).
    pub fn is_leader(&self) -> bool {
        self.operator.manager().is_leader()
    }

    /// Whether the operator task has ended (for instance after losing leadership).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

/// How long [`Embedded::start`] waits for the NodePool CRD to be served.
const CRD_ESTABLISHED_TIMEOUT: Duration = Duration::from_secs(30);

impl Embedded {
    /// Starts an API server with `nodes` simulated nodes, installs the CRD through the API and
    /// generates the webhook certificate.
    pub async fn start(nodes: usize) -> Result<Embedded, EmbeddedError> {
        let server = TestApiServer::builder().nodes(nodes).start().await?;
        let client = server.client();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        crds.create(&PostParams::default(), &NodePool::crd())
            .await
            .map_err(api_err("creating the NodePool CRD"))?;
        // A real API server serves a new CRD only once it is Established (kcr-envtest at once),
        // as `kubectl wait --for condition=established` waits for.
        let name = NodePool::crd_name();
        let established = kube::runtime::wait::await_condition(
            crds.clone(),
            name,
            kube::runtime::wait::conditions::is_crd_established(),
        );
        match tokio::time::timeout(CRD_ESTABLISHED_TIMEOUT, established).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(EmbeddedError::CrdNotServed(e.to_string())),
            Err(_) => {
                return Err(EmbeddedError::CrdNotServed(format!(
                    "not Established after {} s",
                    CRD_ESTABLISHED_TIMEOUT.as_secs()
                )));
            }
        }
        let cert_dir = tempfile::tempdir()?;
        let pair = CertificateAuthority::generate("nodepool-operator webhook CA")?
            .issue(&["127.0.0.1", "localhost"])?;
        pair.write_to_dir(cert_dir.path())?;
        Ok(Embedded {
            server,
            client,
            ca_pem: pair.ca_pem,
            cert_dir,
        })
    }

    /// Run options for an operator on this server: loopback, ephemeral ports for metrics,
    /// probes and webhooks, the generated certificate.
    pub fn run_options(&self) -> RunOptions {
        RunOptions {
            metrics_bind_address: "127.0.0.1:0".into(),
            health_probe_bind_address: "127.0.0.1:0".into(),
            webhook_host: std::net::IpAddr::from([127, 0, 0, 1]),
            webhook_port: 0,
            cert_dir: self.cert_dir.path().to_owned(),
            max_concurrent_reconciles: 2,
            graceful_shutdown_timeout: Duration::from_secs(10),
            api_server_host: Some(self.server.addr().to_string()),
            ..RunOptions::default()
        }
    }

    /// Creates (or replaces) the webhook configurations, pointing at `addr`.
    pub async fn install_webhooks(&self, addr: SocketAddr) -> Result<(), EmbeddedError> {
        let (m, v) = webhook_configurations(&WebhookTarget::Url {
            base: format!("https://{addr}"),
            ca_pem: self.ca_pem.clone(),
        });
        let mapi: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
        let vapi: Api<ValidatingWebhookConfiguration> = Api::all(self.client.clone());
        let dp = DeleteParams::default();
        let _ = mapi.delete(&m.name_any(), &dp).await;
        let _ = vapi.delete(&v.name_any(), &dp).await;
        mapi.create(&PostParams::default(), &m)
            .await
            .map_err(api_err("creating the mutating webhook configuration"))?;
        vapi.create(&PostParams::default(), &v)
            .await
            .map_err(api_err("creating the validating webhook configuration"))?;
        Ok(())
    }

    /// Starts the real operator with `options` (see [`Embedded::run_options`]) and, when
    /// `install_webhooks`, points the webhook configurations at it. The operator connects as
    /// deployed ([`Operator::connection`]: kcr's connection stack with
    /// [`RunOptions::connection`]) through the server's kubeconfig, as its admin;
    /// [`Embedded::start_operator_as`] gives it another client. With `KCR_RBAC_RECORD` set, its
    /// requests are recorded for `cargo kcr rbac` (see [`Embedded::start_operator_as`]).
    pub async fn start_operator(
        &self,
        options: &RunOptions,
        install_webhooks: bool,
    ) -> Result<RunningOperator, EmbeddedError> {
        let config =
            kube::Config::from_custom_kubeconfig(self.server.kubeconfig(), &Default::default())
                .await
                .map_err(|e| EmbeddedError::Kubeconfig(e.to_string()))?;
        let (client, options) = Operator::connection(config, options)?;
        self.start_operator_as(client, &options, install_webhooks)
            .await
    }

    /// [`Embedded::start_operator`] with the operator's requests made by `client`, for
    /// instance one acting as the operator's ServiceAccount
    /// (`TestApiServer::client_for_service_account`) to test its RBAC. The webhook
    /// configurations are still installed with the admin client (deploying them is not the
    /// operator's job). With `KCR_RBAC_RECORD=<dir>` in the environment, `client` is wrapped
    /// by kcr-testkit's access recorder, which appends every distinct request of the operator
    /// (verb, group, resource, subresource, namespace) to the process's file in `<dir>`: the
    /// record `cargo kcr rbac` makes the roles of `config/rbac/` from, or checks them against.
    pub async fn start_operator_as(
        &self,
        client: kube::Client,
        options: &RunOptions,
        install_webhooks: bool,
    ) -> Result<RunningOperator, EmbeddedError> {
        let operator = Operator::new(recorded(client)?, options).await?;
        self.run_operator(operator, install_webhooks).await
    }

    async fn run_operator(
        &self,
        operator: Operator,
        install_webhooks: bool,
    ) -> Result<RunningOperator, EmbeddedError> {
        let metrics_addr = operator.manager().metrics_addr();
        let probes_addr = operator.manager().health_probe_addr();
        let webhook_addr = operator.webhook_addr();
        if install_webhooks && let Some(addr) = webhook_addr {
            self.install_webhooks(addr).await?;
        }
        let stop = CancellationToken::new();
        let token = stop.clone();
        let operator = std::sync::Arc::new(operator);
        let running = operator.clone();
        let task = tokio::spawn(async move { running.run(token).await });
        Ok(RunningOperator {
            operator,
            stop,
            task,
            metrics_addr,
            probes_addr,
            webhook_addr,
        })
    }

    /// Waits (polling every 50 ms of real time) until [`convergence_problems`] finds nothing.
    pub async fn wait_converged(&self, timeout: Duration) -> Result<Duration, EmbeddedError> {
        wait_converged(&self.client, timeout).await
    }
}

/// Waits (polling every 50 ms of real time) until [`convergence_problems`] finds nothing.
pub async fn wait_converged(
    client: &kube::Client,
    timeout: Duration,
) -> Result<Duration, EmbeddedError> {
    let start = std::time::Instant::now();
    loop {
        let problems = convergence_problems(client).await?;
        if problems.is_empty() {
            return Ok(start.elapsed());
        }
        if start.elapsed() > timeout {
            return Err(EmbeddedError::NotConverged {
                after: start.elapsed(),
                problems: problems.into_iter().take(10).collect(),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Everything that differs between the cluster and what its pools ask for (empty: converged):
/// member nodes missing a label or taint or carrying a stale one, records of deleted pools,
/// RuntimeClasses missing or drifted, statuses that are not Ready with the right count for the
/// current generation, finalizers missing.
pub async fn convergence_problems(client: &kube::Client) -> Result<Vec<String>, EmbeddedError> {
    let pools: Vec<NodePool> = list_all(client, "listing pools").await?;
    let nodes: Vec<Node> = list_all(client, "listing nodes").await?;
    let rcs: BTreeMap<String, RuntimeClass> =
        list_all::<RuntimeClass>(client, "listing runtimeclasses")
            .await?
            .into_iter()
            .map(|r| (r.name_any(), r))
            .collect();
    let mut problems = Vec::new();
    let live: Vec<String> = pools
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(ResourceExt::name_any)
        .collect();
    for pool in &pools {
        let name = pool.name_any();
        if pool.metadata.deletion_timestamp.is_some() {
            problems.push(format!("pool {name} is still being deleted"));
            continue;
        }
        if !pool.finalizers().iter().any(|f| f == FINALIZER) {
            problems.push(format!("pool {name} has no finalizer"));
        }
        let desired = Applied::from_spec(&pool.spec);
        let members: Vec<&Node> = nodes.iter().filter(|n| is_member(n, &name)).collect();
        for n in &members {
            let plan = plan_node(&name, Some(&desired), n);
            if !plan.is_noop() {
                problems.push(format!(
                    "node {} not converged for pool {name}: {:?}",
                    n.name_any(),
                    plan.changes
                ));
            }
        }
        for n in nodes.iter().filter(|n| !is_member(n, &name)) {
            if !plan_node(&name, None, n).is_noop() {
                problems.push(format!(
                    "node {} left pool {name} but is not cleaned",
                    n.name_any()
                ));
            }
        }
        match rcs.get(&runtime_class_name(&name)) {
            None => problems.push(format!("RuntimeClass of pool {name} missing")),
            Some(rc) => {
                // Drifted: the operator's own mutate function would change it (or cannot).
                let mut repaired = rc.clone();
                if reconcile_runtime_class(&mut repaired, pool).is_err() || repaired != *rc {
                    problems.push(format!("RuntimeClass of pool {name} drifted"));
                }
            }
        }
        let status = pool.status.clone().unwrap_or_default();
        let ready = status.ready_condition().map(|c| c.status.as_str());
        if ready != Some("True")
            || status.status != 200
            || status.observed_generation != pool.metadata.generation
            || status.node_count != i32::try_from(members.len()).unwrap_or(-1)
        {
            problems.push(format!(
                "pool {name} status not converged: ready={ready:?} status={} nodeCount={} (want {}) observedGeneration={:?} (want {:?})",
                status.status,
                status.node_count,
                members.len(),
                status.observed_generation,
                pool.metadata.generation
            ));
        }
    }
    // Records of pools that no longer exist.
    for n in &nodes {
        for key in n.annotations().keys() {
            if let Some(p) = key.strip_prefix(crate::nodes::APPLIED_ANNOTATION_PREFIX)
                && !live.iter().any(|l| l == p)
                && !pools.iter().any(|x| x.name_any() == p)
            {
                problems.push(format!(
                    "node {} still carries a record of deleted pool {p}",
                    n.name_any()
                ));
            }
        }
    }
    Ok(problems)
}
