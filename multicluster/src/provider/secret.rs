//! Clusters from kubeconfig Secrets in the manager's own cluster.

use std::collections::HashMap;

use futures::StreamExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::ResourceExt;
use kube::config::Kubeconfig;
use kube::runtime::{WatchStreamExt, watcher};
use tokio_util::sync::CancellationToken;

use super::Provider;
use crate::cluster::ClusterName;
use crate::error::FleetError;
use crate::fleet::Fleet;

/// The data key of the kubeconfig in a cluster Secret unless
/// [`SecretProvider::kubeconfig_key`] says otherwise (multicluster-runtime's kubeconfig
/// provider uses the same key).
pub const DEFAULT_KUBECONFIG_KEY: &str = "kubeconfig";

/// Each Secret in `namespace` matching `label_selector` is a cluster named after the Secret,
/// reached through the kubeconfig in its data. A new Secret engages its cluster, a changed
/// kubeconfig re-engages it (new client, new cache), a deleted Secret disengages it. A Secret
/// whose kubeconfig is missing or bad is reported on the fleet ([`Fleet::errors`]) and its
/// cluster is not engaged; the others are unaffected.
#[must_use]
#[derive(Clone)]
pub struct SecretProvider {
    client: kube::Client,
    namespace: String,
    label_selector: String,
    key: String,
}

impl std::fmt::Debug for SecretProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretProvider")
            .field("namespace", &self.namespace)
            .field("label_selector", &self.label_selector)
            .field("key", &self.key)
            .finish()
    }
}

impl SecretProvider {
    /// Secrets in `namespace` selected by `label_selector` (for example
    /// `kcr.io/cluster=true`), read with `client` (the manager's own).
    pub fn new(
        client: kube::Client,
        namespace: impl Into<String>,
        label_selector: impl Into<String>,
    ) -> Self {
        SecretProvider {
            client,
            namespace: namespace.into(),
            label_selector: label_selector.into(),
            key: DEFAULT_KUBECONFIG_KEY.into(),
        }
    }

    /// The data key holding the kubeconfig (default [`DEFAULT_KUBECONFIG_KEY`]).
    pub fn kubeconfig_key(mut self, key: impl Into<String>) -> Self {
        self.key = key.into();
        self
    }

    /// The kubeconfig of `secret`, or why there is none.
    fn kubeconfig_of(&self, secret: &Secret) -> Result<(Vec<u8>, Kubeconfig), String> {
        let bytes = secret
            .data
            .as_ref()
            .and_then(|d| d.get(&self.key))
            .map(|b| b.0.clone())
            .ok_or_else(|| format!("the Secret has no data key {:?}", self.key))?;
        let text = std::str::from_utf8(&bytes)
            .map_err(|e| format!("data key {:?} is not UTF-8: {e}", self.key))?;
        let kubeconfig = Kubeconfig::from_yaml(text)
            .map_err(|e| format!("data key {:?} is not a kubeconfig: {e}", self.key))?;
        Ok((bytes, kubeconfig))
    }
}

/// What the provider engaged, by cluster: the kubeconfig bytes it used (`None`: reported bad).
type Seen = HashMap<ClusterName, Option<Vec<u8>>>;

impl SecretProvider {
    async fn apply(&self, fleet: &Fleet, seen: &mut Seen, secret: &Secret) {
        let name = ClusterName::new(secret.name_any());
        match self.kubeconfig_of(secret) {
            Ok((bytes, kubeconfig)) => {
                if let Some(Some(previous)) = seen.get(&name)
                    && *previous == bytes
                    && fleet.cluster(&name).is_some()
                {
                    return;
                }
                match fleet.engage_kubeconfig(name.clone(), kubeconfig).await {
                    Ok(_) => {
                        seen.insert(name, Some(bytes));
                    }
                    Err(_) => {
                        fleet.disengage(&name);
                        seen.insert(name, None);
                    }
                }
            }
            Err(reason) => {
                fleet.disengage(&name);
                fleet.record_error(&name, reason);
                seen.insert(name, None);
            }
        }
    }

    fn remove(fleet: &Fleet, seen: &mut Seen, name: &ClusterName) {
        if seen.remove(name).is_some() {
            fleet.disengage(name);
            fleet.clear_error(name);
        }
    }
}

impl Provider for SecretProvider {
    fn name(&self) -> String {
        format!("secrets/{}", self.namespace)
    }

    fn run(
        self: Box<Self>,
        fleet: Fleet,
        stop: CancellationToken,
    ) -> BoxFuture<'static, Result<(), FleetError>> {
        Box::pin(async move {
            let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
            let config = watcher::Config::default().labels(&self.label_selector);
            let mut events = watcher(api, config).default_backoff().boxed();
            let mut seen: Seen = HashMap::new();
            // Names found by the list in progress (a relist drops the Secrets it does not find).
            let mut listing: Option<Vec<ClusterName>> = None;
            loop {
                let event = tokio::select! {
                    _ = stop.cancelled() => break,
                    e = events.next() => e,
                };
                match event {
                    None => break,
                    Some(Err(error)) => {
                        tracing::warn!(provider = %self.name(), %error, "watching cluster Secrets");
                    }
                    Some(Ok(watcher::Event::Init)) => listing = Some(Vec::new()),
                    Some(Ok(watcher::Event::InitApply(secret))) => {
                        if let Some(names) = &mut listing {
                            names.push(ClusterName::new(secret.name_any()));
                        }
                        self.apply(&fleet, &mut seen, &secret).await;
                    }
                    Some(Ok(watcher::Event::InitDone)) => {
                        let found = listing.take().unwrap_or_default();
                        let gone: Vec<ClusterName> = seen
                            .keys()
                            .filter(|n| !found.contains(n))
                            .cloned()
                            .collect();
                        for name in gone {
                            Self::remove(&fleet, &mut seen, &name);
                        }
                    }
                    Some(Ok(watcher::Event::Apply(secret))) => {
                        self.apply(&fleet, &mut seen, &secret).await;
                    }
                    Some(Ok(watcher::Event::Delete(secret))) => {
                        Self::remove(&fleet, &mut seen, &ClusterName::new(secret.name_any()));
                    }
                }
            }
            let names: Vec<ClusterName> = seen.keys().cloned().collect();
            for name in names {
                Self::remove(&fleet, &mut seen, &name);
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use std::collections::BTreeMap;

    fn provider() -> SecretProvider {
        let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        SecretProvider::new(kube::Client::try_from(config).unwrap(), "fleet", "a=b")
    }

    fn secret(data: Option<(&str, &[u8])>) -> Secret {
        let mut s = Secret::default();
        s.metadata.name = Some("east".into());
        s.data = data.map(|(k, v)| BTreeMap::from([(k.to_string(), ByteString(v.to_vec()))]));
        s
    }

    #[tokio::test]
    async fn a_secret_without_a_good_kubeconfig_says_why() {
        let p = provider();
        let err = p.kubeconfig_of(&secret(None)).unwrap_err();
        assert!(err.contains("no data key \"kubeconfig\""), "{err}");
        let err = p
            .kubeconfig_of(&secret(Some(("kubeconfig", b"\xff\xfe"))))
            .unwrap_err();
        assert!(err.contains("not UTF-8"), "{err}");
        let err = p
            .kubeconfig_of(&secret(Some(("kubeconfig", b"clusters: 7"))))
            .unwrap_err();
        assert!(err.contains("not a kubeconfig"), "{err}");
        let ok = "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n";
        assert!(
            p.kubeconfig_of(&secret(Some(("kubeconfig", ok.as_bytes()))))
                .is_ok()
        );
        let other = p.clone().kubeconfig_key("value");
        assert!(
            other
                .kubeconfig_of(&secret(Some(("value", ok.as_bytes()))))
                .is_ok()
        );
    }
}
