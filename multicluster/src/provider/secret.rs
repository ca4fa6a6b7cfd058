//! Clusters from kubeconfig Secrets in the manager's own cluster.

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::config::Kubeconfig;
use kube::runtime::watcher;
use tokio_util::sync::CancellationToken;

use super::Provider;
use super::follow::ObjectClusters;
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
}

impl ObjectClusters for SecretProvider {
    type Object = Secret;

    fn kubeconfig_of(&self, secret: &Secret) -> Result<Kubeconfig, String> {
        let bytes = secret
            .data
            .as_ref()
            .and_then(|d| d.get(&self.key))
            .map(|b| b.0.clone())
            .ok_or_else(|| format!("the Secret has no data key {:?}", self.key))?;
        let text = std::str::from_utf8(&bytes)
            .map_err(|e| format!("data key {:?} is not UTF-8: {e}", self.key))?;
        Kubeconfig::from_yaml(text)
            .map_err(|e| format!("data key {:?} is not a kubeconfig: {e}", self.key))
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
            super::follow::follow(&*self, &self.name(), api, config, &fleet, &stop).await;
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
