//! Shared helpers of the envtest-backed tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kcr_controller::{Action, Context, Manager, ManagerOptions, Reconciler};
use kcr_handler::Request;
use kcr_source::Reader;
use kube::api::{Api, PostParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{CustomResource, Resource, ResourceExt};
use parking_lot::Mutex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A custom resource for CRD tests.
#[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema, Default)]
#[kube(group = "test.kcr.io", version = "v1", kind = "Widget", namespaced)]
pub struct WidgetSpec {
    /// Anything.
    pub size: i32,
}

/// Runs `mgr` on the runtime until the returned token is cancelled: the shared manager, the
/// token, and the task whose output is `Manager::run`'s result.
pub fn spawn_manager(
    mgr: Manager,
) -> (
    Arc<Manager>,
    tokio_util::sync::CancellationToken,
    tokio::task::JoinHandle<Result<(), kcr_controller::ManagerError>>,
) {
    let mgr = Arc::new(mgr);
    let stop = tokio_util::sync::CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });
    (mgr, stop, run)
}

/// Options with both servers on ephemeral loopback ports.
pub fn manager_options() -> ManagerOptions {
    ManagerOptions::default()
        .metrics_bind_address("127.0.0.1:0")
        .unwrap()
        .health_probe_bind_address("127.0.0.1:0")
        .unwrap()
        .graceful_shutdown_timeout(Duration::from_secs(10))
}

/// An owner reference making `cm` the controller of the object that carries it.
pub fn controlled_by(cm: &ConfigMap) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: cm.name_any(),
        uid: cm.uid().unwrap_or_default(),
        controller: Some(true),
        ..Default::default()
    }
}

/// A config map with `data.value = value`.
pub fn configmap(name: &str, value: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_string());
    cm.data = Some(BTreeMap::from([("value".to_string(), value.to_string())]));
    cm
}

#[allow(unused_imports)]
pub use kcr_envtest::eventually;

/// A minimal HTTP/1.1 GET: `(status, body)`, or `None` if the connection fails.
pub async fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut response))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&response).to_string();
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    Some((status, body))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// The value of the sample line starting with `series` in a Prometheus text exposition.
pub fn metric_value(text: &str, series: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Whether `n` secrets `cm-<i>-copy` exist with `value`.
pub async fn all_copied(secrets: &Api<Secret>, n: usize, value: &str) -> bool {
    for i in 0..n {
        match secrets.get_opt(&format!("cm-{i}-copy")).await {
            Ok(Some(s)) => {
                let got = s
                    .string_data
                    .as_ref()
                    .and_then(|d| d.get("value").cloned())
                    .or_else(|| {
                        s.data
                            .as_ref()
                            .and_then(|d| d.get("value"))
                            .map(|b| String::from_utf8_lossy(&b.0).to_string())
                    });
                if got.as_deref() != Some(value) {
                    return false;
                }
            }
            _ => return false,
        }
    }
    true
}

/// Copies each config map's data into a secret `<name>-copy` owned by it; reads config maps from
/// the manager's cache. Records who reconciled what.
#[derive(Clone)]
pub struct CopyToSecret {
    client: kube::Client,
    reader: Reader<ConfigMap>,
    recorder: Option<Recorder>,
    identity: String,
    /// (identity, request) of every successful reconcile.
    pub log: Arc<Mutex<Vec<(String, String)>>>,
    errors: Arc<AtomicU64>,
}

impl CopyToSecret {
    /// A reconciler using `mgr`'s client and a cache reader of the `default` namespace.
    pub fn new(mgr: &Manager, controller: &str, identity: &str) -> Self {
        Self::in_namespace(mgr, "default", controller, identity)
    }

    /// A reconciler using `mgr`'s client and a cache reader of `namespace`.
    pub fn in_namespace(mgr: &Manager, namespace: &str, _controller: &str, identity: &str) -> Self {
        CopyToSecret {
            client: mgr.kube_client(),
            reader: mgr
                .reader::<ConfigMap>(kcr_source::WatchScope::all().namespace(namespace))
                .unwrap(),
            recorder: None,
            identity: identity.to_string(),
            log: Arc::default(),
            errors: Arc::default(),
        }
    }

    /// Also records an event per reconcile through the manager's recorder.
    pub fn with_events(mut self, mgr: &Manager) -> Self {
        self.recorder = Some(mgr.event_recorder("copier"));
        self
    }

    /// Number of failed reconciles.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::SeqCst)
    }

    async fn copy(&self, request: &Request) -> anyhow::Result<Action> {
        let ns = request.namespace.as_deref().unwrap_or("default");
        let Some(cm) = self.reader.get(&request.name, Some(ns))? else {
            return Ok(Action::done());
        };
        let data = cm.data.clone().unwrap_or_default();
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), ns);
        let name = format!("{}-copy", request.name);
        let owner = controlled_by(&cm);
        let desired_data: BTreeMap<String, k8s_openapi::ByteString> = data
            .iter()
            .map(|(k, v)| (k.clone(), k8s_openapi::ByteString(v.clone().into_bytes())))
            .collect();
        match secrets.get_opt(&name).await? {
            None => {
                let mut s = Secret::default();
                s.metadata.name = Some(name.clone());
                s.metadata.owner_references = Some(vec![owner]);
                s.data = Some(desired_data);
                secrets.create(&PostParams::default(), &s).await?;
            }
            Some(mut s) => {
                if s.data.as_ref() != Some(&desired_data) {
                    s.data = Some(desired_data);
                    secrets.replace(&name, &PostParams::default(), &s).await?;
                }
            }
        }
        if let Some(recorder) = &self.recorder {
            recorder
                .publish(
                    &Event {
                        type_: EventType::Normal,
                        reason: "Copied".into(),
                        note: Some(format!("copied into secret {name}")),
                        action: "Copy".into(),
                        secondary: None,
                    },
                    &cm.object_ref(&()),
                )
                .await?;
        }
        Ok(Action::done())
    }
}

impl Reconciler<Request> for CopyToSecret {
    type Error = anyhow::Error;
    async fn reconcile(&self, request: &Request, _ctx: &Context) -> anyhow::Result<Action> {
        match self.copy(request).await {
            Ok(action) => {
                self.log
                    .lock()
                    .push((self.identity.clone(), request.to_string()));
                Ok(action)
            }
            Err(e) => {
                self.errors.fetch_add(1, Ordering::SeqCst);
                Err(e)
            }
        }
    }
}
