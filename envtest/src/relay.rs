//! [`Relay`]: a TCP relay in front of a server that one client at a time can be partitioned
//! through, for tests where some clients lose the server and others keep it (a leader cut off
//! while another replica takes over).
//!
//! [`Faults::blackhole`](crate::Faults::blackhole) freezes every client of a server; a relay
//! freezes only the clients that connect through it, with the same semantics: every open
//! connection and every new one while the partition lasts is frozen for good, nothing is
//! closed. It relays bytes, so TLS (the existing backend's HTTPS proxy) passes through it
//! unchanged; the server's certificate names `127.0.0.1`, which the relay's address shares.

use std::net::SocketAddr;
use std::sync::Arc;

use kube::config::Kubeconfig;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::error::EnvtestError;
use crate::partition::Partition;

/// A TCP relay to a server that can be partitioned on its own: [`Relay::blackhole`] freezes
/// the connections of its clients only, as [`Faults::blackhole`](crate::Faults::blackhole)
/// freezes every client of a server.
/// Stops when dropped.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcr_envtest::{Relay, TestApiServer};
///
/// let server = TestApiServer::start().await?;
/// let relay = Relay::start(server.addr()).await?;
/// let config = kube::Config::from_custom_kubeconfig(
///     relay.kubeconfig(&server)?,
///     &Default::default(),
/// )
/// .await?;
/// let through_relay: kube::Api<ConfigMap> = kube::Api::default_namespaced(kube::Client::try_from(config)?);
/// through_relay.list(&Default::default()).await?;
///
/// relay.blackhole(); // clients through the relay lose the server; server.client() does not
/// let direct: kube::Api<ConfigMap> = kube::Api::default_namespaced(server.client());
/// direct.list(&Default::default()).await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Relay {
    addr: SocketAddr,
    partition: Arc<Partition>,
    task: JoinHandle<()>,
}

impl Relay {
    /// Starts a relay on a free loopback port to `target`.
    pub async fn start(target: SocketAddr) -> Result<Relay, EnvtestError> {
        let bind_addr = SocketAddr::from(([127, 0, 0, 1], 0));
        let bind = |source| EnvtestError::Bind {
            addr: bind_addr.to_string(),
            source,
        };
        let listener = TcpListener::bind(bind_addr).await.map_err(bind)?;
        let addr = listener.local_addr().map_err(bind)?;
        let partition = Arc::new(Partition::default());
        let task = tokio::spawn(relay(listener, target, partition.clone()));
        Ok(Relay {
            addr,
            partition,
            task,
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `server`'s kubeconfig ([`TestApiServer::kubeconfig`](crate::TestApiServer::kubeconfig))
    /// with its server URL pointing at this relay.
    pub fn kubeconfig(&self, server: &crate::TestApiServer) -> Result<Kubeconfig, EnvtestError> {
        let mut kubeconfig = server.kubeconfig();
        let server_url = server.url();
        let (base, _port) = server_url
            .rsplit_once(':')
            .ok_or_else(|| EnvtestError::Client(format!("no port in {server_url}")))?;
        let url = format!("{base}:{}", self.addr.port());
        for cluster in &mut kubeconfig.clusters {
            if let Some(c) = cluster.cluster.as_mut() {
                c.server = Some(url.clone());
            }
        }
        Ok(kubeconfig)
    }

    /// Starts a partition between this relay's clients and the server: every open connection
    /// and every one accepted until [`Relay::heal`] is frozen for good (as
    /// [`Faults::blackhole`](crate::Faults::blackhole)).
    pub fn blackhole(&self) {
        tracing::info!(relay = %self.addr, "relay: blackhole");
        self.partition.start();
    }

    /// Lets new connections through again; frozen ones stay frozen.
    pub fn heal(&self) {
        tracing::info!(relay = %self.addr, "relay: heal");
        self.partition.heal();
    }

    /// How many connections partitions have frozen so far.
    pub fn frozen_connections(&self) -> usize {
        self.partition.frozen_connections()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn relay(listener: TcpListener, target: SocketAddr, partition: Arc<Partition>) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        while conns.try_join_next().is_some() {}
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let mut client = partition.wrap(stream);
        conns.spawn(async move {
            let Ok(mut upstream) = TcpStream::connect(target).await else {
                return;
            };
            let _ = upstream.set_nodelay(true);
            let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
        });
    }
}
