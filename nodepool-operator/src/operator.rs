//! Wiring: the NodePool controller on a kcr [`Manager`], the webhook server, and the process
//! options (the seed's `main.go` as flags).
//!
//! The controller, as controller-runtime's builder would say it:
//! - `For(NodePool)` (`Builder::for_kind`: enqueue the pool itself);
//! - `Owns(RuntimeClass)` (`Builder::owns`: enqueue the controller owner), so a RuntimeClass
//!   deleted or edited by hand is repaired;
//! - `Watches(Node)` with [`EnqueueRequestsFromMapFunc`] over [`pools_of_node`] (old and new
//!   node of an update, so a node moving from pool A to pool B reconciles both; creates and
//!   deletes count too), behind [`node_predicate`], which drops updates that change none of
//!   labels, taints or allocatable (kubelet heartbeats).
//!
//! Failed reconciles are retried with the controller's default backoff capped at
//! [`MAX_RETRY_DELAY`] ([`retry_rate_limiter`]).
//!
//! All three watches come from the manager's shared [`Cache`], whose stores the reconciler reads
//! through the manager's readers (part of `/readyz`). The webhook server (kcr-webhook's, see
//! [`crate::webhook`]) runs on every replica (it needs no leadership) and is part of `/readyz`
//! until it serves a valid certificate; the controller runs only on the leader when
//! `--leader-elect` is on.

use std::net::SocketAddr;
use std::path::PathBuf;
#[cfg(test)]
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::node::v1::RuntimeClass;
use kcr_controller::{LeaderElectionConfig, Manager, ManagerError, ManagerOptions, WatchOptions};
use kcr_handler::{EnqueueRequestsFromMapFunc, Request};
use kcr_predicate::Funcs;
use kcr_queue::{DefaultControllerRateLimiter, WithMaxWait};
use kcr_source::{Cache, CacheError, WatchScope};
use kcr_webhook::{ManagerWebhookExt, ServerOptions, TlsError, WebhookError, WebhookServer};
use tokio_util::sync::CancellationToken;

use crate::crd::{NodePool, pools_of_labels};
use crate::nodes::APPLIED_ANNOTATION_PREFIX;
use crate::reconciler::NodePoolReconciler;
use crate::webhook;

/// The controller's name (metrics label, queue name, event reporter suffix).
pub const CONTROLLER_NAME: &str = "nodepool";
/// The leader election Lease name (the seed's `LeaderElectionID`).
pub const LEADER_ELECTION_ID: &str = "97acaccf.lailin.xyz";

/// The longest a pool waits for the retry of a failed reconcile.
///
/// The retry delay is controller-runtime's default (per pool: 5 ms doubling with every
/// consecutive failure; overall: a 10 qps token bucket with a burst of 100; plus up to 10 %
/// jitter) capped at this value. Uncapped, a pool that failed a few dozen times in a row during
/// a burst of genuine conflicts (nodes changing under every guarded patch) would wait up to
/// 1000 s, and if its last failure came after the last change, no event would wake it earlier:
/// it would stay unconverged that long. Capped, every pool is retried within 2 s once the churn
/// stops, well inside the 10 s in which it must have converged. Events still requeue a pool at
/// once (an immediate add cancels a pending delayed one), and the queue's one-reconcile-per-key
/// rule keeps a failing pool from being reconciled more than once at a time.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(2);

/// The rate limiter of the NodePool controller's queue: the default, capped at
/// [`MAX_RETRY_DELAY`].
pub fn retry_rate_limiter() -> WithMaxWait<DefaultControllerRateLimiter<Request>> {
    WithMaxWait::new(DefaultControllerRateLimiter::new(), MAX_RETRY_DELAY)
}

/// Errors setting the operator up or running it.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    /// The manager failed.
    #[error(transparent)]
    Manager(#[from] ManagerError),
    /// The shared cache refused a watch.
    #[error("cache: {0}")]
    Cache(#[from] CacheError),
    /// Webhook certificates (missing or unreadable at start).
    #[error("webhook certificate: {0}")]
    Tls(#[from] TlsError),
    /// Webhook server.
    #[error(transparent)]
    Webhook(#[from] WebhookError),
    /// The client could not be built from its configuration.
    #[error(transparent)]
    Connect(#[from] kcr_connect::ConnectError),
}

/// The pools a node event concerns: every `node-role.kubernetes.io/<pool>` label key, plus every
/// pool whose applied record (`applied.node-pool.lailin.xyz/<pool>`) the node still carries (so a
/// node that left a pool while the operator was down is cleaned). Reads the object only.
pub fn pools_of_node(node: &Node) -> Vec<Request> {
    let mut pools = node
        .metadata
        .labels
        .as_ref()
        .map(pools_of_labels)
        .unwrap_or_default();
    if let Some(annotations) = &node.metadata.annotations {
        pools.extend(
            annotations
                .keys()
                .filter_map(|k| k.strip_prefix(APPLIED_ANNOTATION_PREFIX))
                .filter(|p| !p.is_empty())
                .map(str::to_owned),
        );
    }
    pools.sort();
    pools.dedup();
    pools.into_iter().map(Request::cluster).collect()
}

/// Whether a node update matters to pools: labels, taints or allocatable changed.
pub fn node_update_matters(old: &Node, new: &Node) -> bool {
    old.metadata.labels != new.metadata.labels
        || old.spec.as_ref().and_then(|s| s.taints.as_ref())
            != new.spec.as_ref().and_then(|s| s.taints.as_ref())
        || old.status.as_ref().and_then(|s| s.allocatable.as_ref())
            != new.status.as_ref().and_then(|s| s.allocatable.as_ref())
        || applied_records(old) != applied_records(new)
}

fn applied_records(node: &Node) -> Vec<(&String, &String)> {
    node.metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(APPLIED_ANNOTATION_PREFIX))
        .collect()
}

/// The Node watch's predicate: creates and deletes pass, updates only when
/// [`node_update_matters`].
pub fn node_predicate() -> Funcs<Node> {
    Funcs::new().update(|old, new| node_update_matters(old, new))
}

/// Registers the NodePool controller with `manager`; its watches and readers share the
/// manager's cache.
pub fn register_controller(
    manager: &Manager,
    max_concurrent_reconciles: usize,
) -> Result<(), OperatorError> {
    let all = WatchScope::all;
    let reconciler = NodePoolReconciler::new(
        manager.client(),
        manager.reader::<NodePool>(all())?,
        manager.reader::<Node>(all())?,
        manager.reader::<RuntimeClass>(all())?,
        Some(manager.event_recorder(CONTROLLER_NAME)),
    );
    manager
        .controller()
        .named(CONTROLLER_NAME)
        .for_kind::<NodePool>(WatchOptions::new())
        .owns::<RuntimeClass>(WatchOptions::new())
        .watches(
            manager.cache().kind::<Node>(all())?,
            EnqueueRequestsFromMapFunc::new(pools_of_node),
            WatchOptions::<Node>::new().predicate(node_predicate()),
        )
        .max_concurrent_reconciles(max_concurrent_reconciles.max(1))
        .rate_limiter(retry_rate_limiter())
        .complete(reconciler)?;
    Ok(())
}

/// Process options (`nodepool-operator run` flags).
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// `/metrics` bind address (`0` disables).
    pub metrics_bind_address: String,
    /// `/healthz` and `/readyz` bind address (`0` disables).
    pub health_probe_bind_address: String,
    /// Secured metrics: HTTPS with the pair in this directory, TokenReview and
    /// SubjectAccessReview (`kcr_controller::secure_metrics`); `None`: plain HTTP.
    pub metrics_cert_dir: Option<PathBuf>,
    /// Leader election on the Lease [`LEADER_ELECTION_ID`].
    pub leader_elect: bool,
    /// Namespace of the Lease (default: `$POD_NAMESPACE`, else the client's namespace).
    pub leader_election_namespace: Option<String>,
    /// This replica's identity in leader election (default: host name plus a random suffix).
    pub leader_election_identity: Option<String>,
    /// Lease duration, renew deadline, retry period (controller-runtime's 15 s / 10 s / 2 s).
    pub leader_election_timings: Option<(Duration, Duration, Duration)>,
    /// Webhook server bind address host (port from `webhook_port`).
    pub webhook_host: std::net::IpAddr,
    /// Whether to run the webhook server.
    pub webhook_enabled: bool,
    /// Webhook server port (0: any free port).
    pub webhook_port: u16,
    /// Directory holding `tls.crt` and `tls.key`.
    pub cert_dir: PathBuf,
    /// Number of concurrent reconciles.
    pub max_concurrent_reconciles: usize,
    /// Graceful shutdown bound.
    pub graceful_shutdown_timeout: Duration,
    /// The API server's `host:port`, the `host` label of the `rest_client_*` metrics
    /// (`kcr_controller::rest_client::host_of` a `kube::Config`); `None`: `unknown`.
    pub api_server_host: Option<String>,
    /// The bounds on every request, watch and connection of the operator's client
    /// (`kcr_connect::ConnectionOptions`; the defaults notice a silent partition and recover
    /// within about half a minute of its end).
    pub connection: kcr_connect::ConnectionOptions,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            metrics_bind_address: ":8080".into(),
            health_probe_bind_address: ":8081".into(),
            metrics_cert_dir: None,
            leader_elect: false,
            leader_election_namespace: None,
            leader_election_identity: None,
            leader_election_timings: None,
            webhook_host: std::net::IpAddr::from([0, 0, 0, 0]),
            webhook_enabled: true,
            webhook_port: webhook::DEFAULT_PORT,
            cert_dir: std::env::temp_dir().join("k8s-webhook-server/serving-certs"),
            max_concurrent_reconciles: 1,
            graceful_shutdown_timeout: Duration::from_secs(30),
            api_server_host: None,
            connection: kcr_connect::ConnectionOptions::default(),
        }
    }
}

/// A configured operator: manager, cache, controller and webhook server, ready to run.
pub struct Operator {
    manager: Manager,
    webhook: Option<WebhookServer>,
    webhook_addr: Option<SocketAddr>,
}

impl std::fmt::Debug for Operator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operator")
            .field("manager", &self.manager)
            .field("webhook", &self.webhook.as_ref().map(WebhookServer::paths))
            .field("webhook_addr", &self.webhook_addr)
            .finish()
    }
}

impl Operator {
    /// [`Operator::new`] with a client built from `config` by kcr's connection stack
    /// (`kcr_connect::client` with [`RunOptions::connection`]): the operator as deployed. Sets
    /// [`RunOptions::api_server_host`] from the config unless it is set.
    pub async fn connect(
        config: kube::Config,
        options: &RunOptions,
    ) -> Result<Operator, OperatorError> {
        let (client, options) = Operator::connection(config, options)?;
        Operator::new(client, &options).await
    }

    /// The client and options [`Operator::connect`] gives [`Operator::new`]: a client built
    /// from `config` by kcr's connection stack, and `options` with
    /// [`RunOptions::api_server_host`] set from the config unless it is set.
    pub fn connection(
        config: kube::Config,
        options: &RunOptions,
    ) -> Result<(kube::Client, RunOptions), OperatorError> {
        let mut options = options.clone();
        if options.api_server_host.is_none() {
            options.api_server_host = Some(kcr_connect::host_of(&config));
        }
        let client = kcr_connect::client(config, options.connection.clone())?;
        Ok((client, options))
    }

    /// Sets everything up: binds the HTTP and webhook listeners (a busy port fails here), loads
    /// the webhook certificate, registers the controller.
    pub async fn new(
        client: kube::Client,
        options: &RunOptions,
    ) -> Result<Operator, OperatorError> {
        let mut mopts = ManagerOptions::default()
            .metrics_bind_address(&options.metrics_bind_address)?
            .health_probe_bind_address(&options.health_probe_bind_address)?
            .graceful_shutdown_timeout(options.graceful_shutdown_timeout);
        mopts.event_reporter = "nodepool-operator".to_owned();
        // Server-side apply and managedFields name the operator as the writer of its fields.
        mopts = mopts.field_owner("nodepool-operator");
        mopts.api_server_host = options.api_server_host.clone();
        mopts.connection = options.connection.clone();
        if let Some(dir) = &options.metrics_cert_dir {
            mopts =
                mopts.secure_metrics(kcr_controller::secure_metrics::SecureMetrics::from_dir(dir));
        }
        if options.leader_elect {
            let namespace = options
                .leader_election_namespace
                .clone()
                .or_else(|| {
                    std::env::var("POD_NAMESPACE")
                        .ok()
                        .filter(|s| !s.is_empty())
                })
                .unwrap_or_else(|| client.default_namespace().to_owned());
            let mut le = LeaderElectionConfig::new(LEADER_ELECTION_ID)
                .namespace(namespace)
                .release_on_cancel(true);
            if let Some(id) = &options.leader_election_identity {
                le = le.identity(id.clone());
            }
            if let Some((lease, renew, retry)) = options.leader_election_timings {
                le = le.timings(lease, renew, retry);
            }
            mopts = mopts.leader_election(le);
        }
        let manager = Manager::new(client.clone(), mopts).await?;
        register_controller(&manager, options.max_concurrent_reconciles)?;

        let mut server = None;
        if options.webhook_enabled {
            let webhooks = WebhookServer::bind(
                ServerOptions::default()
                    .bind_address(SocketAddr::new(options.webhook_host, options.webhook_port))
                    .cert_dir(&options.cert_dir),
            )
            .await?;
            // A missing or broken pair fails here, at start; later rotations are picked up.
            webhooks.cert_watcher().load()?;
            manager.add_webhook_server(&webhooks)?;
            webhook::register(&webhooks)?;
            server = Some(webhooks);
        }
        Ok(Operator {
            manager,
            webhook_addr: server.as_ref().map(WebhookServer::local_addr),
            webhook: server,
        })
    }

    /// The manager (bound addresses, leadership).
    pub fn manager(&self) -> &Manager {
        &self.manager
    }

    /// The shared cache.
    pub fn cache(&self) -> &Cache {
        self.manager.cache()
    }

    /// Where the webhook server listens, if enabled.
    pub fn webhook_addr(&self) -> Option<SocketAddr> {
        self.webhook_addr
    }

    /// The webhook server, if enabled (its paths, certificate, webhook configurations).
    pub fn webhook_server(&self) -> Option<&WebhookServer> {
        self.webhook.as_ref()
    }

    /// Runs until `shutdown` is cancelled (graceful), a runnable fails or leadership is lost.
    pub async fn run(&self, shutdown: CancellationToken) -> Result<(), OperatorError> {
        self.manager
            .run(shutdown)
            .await
            .map_err(OperatorError::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcr_queue::RateLimiter;

    #[test]
    fn retries_back_off_but_never_beyond_the_maximum_delay() {
        let limiter = retry_rate_limiter();
        let pool = Request::cluster("p");
        let delays: Vec<Duration> = (0..40).map(|_| limiter.when(&pool)).collect();
        assert!(delays[0] < Duration::from_millis(10), "{:?}", delays[0]);
        assert!(delays[5] > delays[0], "backs off: {delays:?}");
        assert!(delays.iter().all(|d| *d <= MAX_RETRY_DELAY), "{delays:?}");
        assert_eq!(delays[39], MAX_RETRY_DELAY);
        // Another pool is not delayed by this one's failures; a success resets.
        assert!(limiter.when(&Request::cluster("q")) < Duration::from_millis(10));
        limiter.forget(&pool);
        assert!(limiter.when(&pool) < Duration::from_millis(10));
    }
    use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus, Taint};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kcr_predicate::Predicate;
    use kcr_source::Event;

    fn node(labels: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            spec: Some(NodeSpec::default()),
            status: Some(NodeStatus::default()),
        }
    }

    #[test]
    fn node_maps_to_its_pools() {
        let mut n = node(&[
            ("node-role.kubernetes.io/a", ""),
            ("node-role.kubernetes.io/b", "x"),
            ("kubernetes.io/hostname", "n1"),
        ]);
        n.metadata.annotations = Some(
            [
                (
                    "applied.node-pool.lailin.xyz/old".to_owned(),
                    "{}".to_owned(),
                ),
                ("applied.node-pool.lailin.xyz/a".to_owned(), "{}".to_owned()),
                ("other".to_owned(), "x".to_owned()),
            ]
            .into_iter()
            .collect(),
        );
        let names: Vec<String> = pools_of_node(&n).into_iter().map(|r| r.name).collect();
        assert_eq!(names, vec!["a", "b", "old"]);
        assert!(pools_of_node(&node(&[])).is_empty());
        assert!(
            pools_of_node(&node(&[]))
                .iter()
                .all(|r| r.namespace.is_none())
        );
    }

    #[test]
    fn predicate_truth_table() {
        let p = node_predicate();
        let base = node(&[("node-role.kubernetes.io/a", "")]);
        let upd = |new: Node| Event::Update {
            old: Arc::new(base.clone()),
            new: Arc::new(new),
        };
        // Heartbeat: only conditions / resourceVersion change.
        let mut heartbeat = base.clone();
        heartbeat.metadata.resource_version = Some("99".into());
        heartbeat.status.as_mut().unwrap().conditions = Some(vec![]);
        heartbeat
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert("node.alpha.kubernetes.io/ttl".into(), "0".into());
        assert!(!p.evaluate(&upd(heartbeat)));
        // Labels.
        let mut relabel = base.clone();
        relabel
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("node-role.kubernetes.io/b".into(), "".into());
        assert!(p.evaluate(&upd(relabel)));
        // Taints.
        let mut tainted = base.clone();
        tainted.spec.as_mut().unwrap().taints = Some(vec![Taint {
            key: "k".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]);
        assert!(p.evaluate(&upd(tainted)));
        // Allocatable.
        let mut grown = base.clone();
        grown.status.as_mut().unwrap().allocatable = Some(
            [("cpu".to_owned(), Quantity("4".into()))]
                .into_iter()
                .collect(),
        );
        assert!(p.evaluate(&upd(grown)));
        // A record changed (someone edited it by hand).
        let mut record = base.clone();
        record
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert("applied.node-pool.lailin.xyz/a".into(), "{}".into());
        assert!(p.evaluate(&upd(record)));
        // Creates and deletes always pass.
        assert!(p.evaluate(&Event::Create {
            object: Arc::new(base.clone()),
            initial: true
        }));
        assert!(p.evaluate(&Event::Delete {
            object: Arc::new(base),
            state_unknown: true
        }));
    }
}
