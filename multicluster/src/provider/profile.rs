//! Clusters from the Cluster Inventory API's ClusterProfiles (`multicluster.x-k8s.io/v1alpha1`).
//!
//! A ClusterProfile says how to reach its cluster in `status.credentialProviders`: each entry
//! names a credential provider and gives the cluster's connection data (a kubeconfig `Cluster`:
//! server, certificate authority). The credentials themselves are not in the profile: the
//! consumer configures, per provider name, how to obtain them (in the API's design, an exec
//! plugin such as `cp-creds`). [`ClusterProfileProvider::credentials`] maps provider names to
//! kube [`AuthInfo`]s (an `exec` plugin, a token, a client certificate); for each profile the
//! first entry whose name is mapped is used, and a profile with none is reported on the fleet.
//!
//! The API is alpha and the field was renamed during its design (`accessProviders` in later
//! drafts); both names are read, `credentialProviders` first.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use kube::Api;
use kube::api::ResourceExt;
use kube::config::{AuthInfo, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::Provider;
use super::follow::ObjectClusters;
use crate::error::FleetError;
use crate::fleet::Fleet;

/// The ClusterProfile kind.
pub fn cluster_profile_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("multicluster.x-k8s.io", "v1alpha1", "ClusterProfile"),
        "clusterprofiles",
    )
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Status {
    #[serde(default)]
    credential_providers: Vec<CredentialProvider>,
    #[serde(default)]
    access_providers: Vec<CredentialProvider>,
}

#[derive(Deserialize)]
struct CredentialProvider {
    name: String,
    #[serde(default)]
    cluster: Option<kube::config::Cluster>,
}

/// Each ClusterProfile in `namespace` is a cluster named after the profile, reached through
/// its connection data and the credentials configured for its credential provider. Profiles
/// appear, change (re-engaged when what they resolve to changes) and go at run time.
///
/// A profile says how to reach its cluster in `status.credentialProviders`: each entry names a
/// credential provider and gives the cluster's connection data (a kubeconfig `Cluster`: server,
/// certificate authority). The credentials are not in the profile: the consumer configures, per
/// provider name, how to obtain them (in the API's design, an exec plugin such as `cp-creds`).
/// [`credentials`](Self::credentials) maps provider names to kube [`AuthInfo`]s (an `exec`
/// plugin, a token, a client certificate); the first entry whose name is mapped is used, and a
/// profile with none is reported on the fleet ([`Fleet::errors`]). The API is alpha and the
/// field was renamed during its design (`accessProviders` in later drafts): both are read,
/// `credentialProviders` first.
#[must_use]
#[derive(Clone)]
pub struct ClusterProfileProvider {
    client: kube::Client,
    namespace: String,
    label_selector: Option<String>,
    credentials: BTreeMap<String, AuthInfo>,
}

impl std::fmt::Debug for ClusterProfileProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterProfileProvider")
            .field("namespace", &self.namespace)
            .field("label_selector", &self.label_selector)
            .field("credentials", &self.credentials.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ClusterProfileProvider {
    /// ClusterProfiles in `namespace`, read with `client` (the manager's own).
    pub fn new(client: kube::Client, namespace: impl Into<String>) -> Self {
        ClusterProfileProvider {
            client,
            namespace: namespace.into(),
            label_selector: None,
            credentials: BTreeMap::new(),
        }
    }

    /// Only profiles matching `selector` (for example
    /// `x-k8s.io/cluster-manager=my-manager`).
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// How to authenticate to clusters whose profile names the credential provider
    /// `provider`.
    pub fn credentials(mut self, provider: impl Into<String>, auth: AuthInfo) -> Self {
        self.credentials.insert(provider.into(), auth);
        self
    }
}

impl ObjectClusters for ClusterProfileProvider {
    type Object = DynamicObject;

    fn kubeconfig_of(&self, profile: &DynamicObject) -> Result<Kubeconfig, String> {
        let status: Status = match profile.data.get("status") {
            Some(status) => serde_json::from_value(status.clone())
                .map_err(|e| format!("status.credentialProviders is malformed: {e}"))?,
            None => Status::default(),
        };
        let entries = status
            .credential_providers
            .iter()
            .chain(status.access_providers.iter());
        let mut offered = Vec::new();
        for entry in entries {
            offered.push(entry.name.clone());
            let Some(auth) = self.credentials.get(&entry.name) else {
                continue;
            };
            let Some(cluster) = entry.cluster.clone().filter(|c| c.server.is_some()) else {
                return Err(format!(
                    "credential provider {} gives no cluster server",
                    entry.name
                ));
            };
            let name = profile.name_any();
            return Ok(Kubeconfig {
                clusters: vec![NamedCluster {
                    name: name.clone(),
                    cluster: Some(cluster),
                    ..Default::default()
                }],
                auth_infos: vec![NamedAuthInfo {
                    name: name.clone(),
                    auth_info: Some(auth.clone()),
                    ..Default::default()
                }],
                contexts: vec![NamedContext {
                    name: name.clone(),
                    context: Some(Context {
                        cluster: name.clone(),
                        user: Some(name.clone()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                current_context: Some(name),
                ..Default::default()
            });
        }
        Err(if offered.is_empty() {
            "the profile has no credential providers in its status yet".to_string()
        } else {
            format!(
                "none of its credential providers ({}) has credentials configured",
                offered.join(", ")
            )
        })
    }
}

impl Provider for ClusterProfileProvider {
    fn name(&self) -> String {
        format!("clusterprofiles/{}", self.namespace)
    }

    fn run(
        self: Box<Self>,
        fleet: Fleet,
        stop: CancellationToken,
    ) -> BoxFuture<'static, Result<(), FleetError>> {
        Box::pin(async move {
            let api: Api<DynamicObject> = Api::namespaced_with(
                self.client.clone(),
                &self.namespace,
                &cluster_profile_resource(),
            );
            let mut config = watcher::Config::default();
            if let Some(selector) = &self.label_selector {
                config = config.labels(selector);
            }
            super::follow::follow(&*self, &self.name(), api, config, &fleet, &stop).await;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> ClusterProfileProvider {
        let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        ClusterProfileProvider::new(kube::Client::try_from(config).unwrap(), "fleet").credentials(
            "token",
            AuthInfo {
                token: Some("t".to_string().into()),
                ..Default::default()
            },
        )
    }

    fn profile(status: serde_json::Value) -> DynamicObject {
        let mut p = DynamicObject::new("east", &cluster_profile_resource());
        p.data = serde_json::json!({"spec": {"clusterManager": {"name": "m"}}, "status": status});
        p
    }

    #[tokio::test]
    async fn a_profile_resolves_through_a_configured_credential_provider() {
        let p = provider();
        let kc = p
            .kubeconfig_of(&profile(serde_json::json!({"credentialProviders": [
                {"name": "other", "cluster": {"server": "https://other"}},
                {"name": "token", "cluster": {"server": "https://east:6443",
                                              "certificate-authority-data": "Q0E="}},
            ]})))
            .unwrap();
        let cluster = kc.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://east:6443"));
        assert_eq!(cluster.certificate_authority_data.as_deref(), Some("Q0E="));
        assert_eq!(kc.current_context.as_deref(), Some("east"));
        // The later name of the field is read too.
        assert!(
            p.kubeconfig_of(&profile(serde_json::json!({"accessProviders": [
                {"name": "token", "cluster": {"server": "https://east"}}]})))
                .is_ok()
        );
    }

    #[tokio::test]
    async fn a_profile_without_usable_access_says_why() {
        let p = provider();
        let err = p
            .kubeconfig_of(&profile(serde_json::json!({})))
            .unwrap_err();
        assert!(err.contains("no credential providers"), "{err}");
        let err = p
            .kubeconfig_of(&profile(serde_json::json!({"credentialProviders": [
                {"name": "exec-only", "cluster": {"server": "https://x"}}]})))
            .unwrap_err();
        assert!(err.contains("exec-only"), "{err}");
        let err = p
            .kubeconfig_of(&profile(serde_json::json!({"credentialProviders": [
                {"name": "token", "cluster": {}}]})))
            .unwrap_err();
        assert!(err.contains("no cluster server"), "{err}");
        let err = p
            .kubeconfig_of(&profile(serde_json::json!({"credentialProviders": "x"})))
            .unwrap_err();
        assert!(err.contains("malformed"), "{err}");
    }
}
