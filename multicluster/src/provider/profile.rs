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

use std::collections::{BTreeMap, HashMap};

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::Api;
use kube::api::ResourceExt;
use kube::config::{AuthInfo, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::Provider;
use crate::cluster::ClusterName;
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

    /// The kubeconfig a profile resolves to, or why it resolves to none.
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

    async fn apply(&self, fleet: &Fleet, seen: &mut Seen, profile: &DynamicObject) {
        let name = ClusterName::new(profile.name_any());
        match self.kubeconfig_of(profile) {
            Ok(kubeconfig) => {
                let fingerprint = serde_json::to_string(&kubeconfig).unwrap_or_default();
                if seen.get(&name).and_then(|s| s.as_deref()) == Some(fingerprint.as_str())
                    && fleet.cluster(&name).is_some()
                {
                    return;
                }
                match fleet.engage_kubeconfig(name.clone(), kubeconfig).await {
                    Ok(_) => {
                        seen.insert(name, Some(fingerprint));
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
}

/// What the provider engaged, by cluster: a fingerprint of the kubeconfig used (`None`:
/// reported).
type Seen = HashMap<ClusterName, Option<String>>;

fn remove(fleet: &Fleet, seen: &mut Seen, name: &ClusterName) {
    if seen.remove(name).is_some() {
        fleet.disengage(name);
        fleet.clear_error(name);
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
            let resource = cluster_profile_resource();
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), &self.namespace, &resource);
            let mut config = watcher::Config::default();
            if let Some(selector) = &self.label_selector {
                config = config.labels(selector);
            }
            let mut events = watcher(api, config).default_backoff().boxed();
            let mut seen: Seen = HashMap::new();
            let mut listing: Option<Vec<ClusterName>> = None;
            loop {
                let event = tokio::select! {
                    _ = stop.cancelled() => break,
                    e = events.next() => e,
                };
                match event {
                    None => break,
                    Some(Err(error)) => {
                        tracing::warn!(provider = %self.name(), %error, "watching ClusterProfiles");
                    }
                    Some(Ok(watcher::Event::Init)) => listing = Some(Vec::new()),
                    Some(Ok(watcher::Event::InitApply(profile))) => {
                        if let Some(names) = &mut listing {
                            names.push(ClusterName::new(profile.name_any()));
                        }
                        self.apply(&fleet, &mut seen, &profile).await;
                    }
                    Some(Ok(watcher::Event::InitDone)) => {
                        let found = listing.take().unwrap_or_default();
                        let gone: Vec<ClusterName> = seen
                            .keys()
                            .filter(|n| !found.contains(n))
                            .cloned()
                            .collect();
                        for name in gone {
                            remove(&fleet, &mut seen, &name);
                        }
                    }
                    Some(Ok(watcher::Event::Apply(profile))) => {
                        self.apply(&fleet, &mut seen, &profile).await;
                    }
                    Some(Ok(watcher::Event::Delete(profile))) => {
                        remove(&fleet, &mut seen, &ClusterName::new(profile.name_any()));
                    }
                }
            }
            let names: Vec<ClusterName> = seen.keys().cloned().collect();
            for name in names {
                remove(&fleet, &mut seen, &name);
            }
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
