//! The watch loop of the providers whose clusters are objects of the manager's own cluster
//! (kubeconfig Secrets, ClusterProfiles): each object is a cluster named after it, engaged
//! with the kubeconfig it resolves to, re-engaged when that changes, reported when it resolves
//! to none, and disengaged when the object goes (or a relist no longer finds it).

use std::collections::HashMap;
use std::fmt::Debug;

use futures::StreamExt;
use kube::api::ResourceExt;
use kube::config::Kubeconfig;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::cluster::ClusterName;
use crate::fleet::Fleet;

/// A provider whose clusters are objects of one kind.
pub(crate) trait ObjectClusters {
    /// The kind of the objects.
    type Object: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static;

    /// The kubeconfig `object` resolves to, or why it resolves to none.
    fn kubeconfig_of(&self, object: &Self::Object) -> Result<Kubeconfig, String>;
}

/// What was engaged, by cluster: the kubeconfig used, as JSON (`None`: reported).
type Seen = HashMap<ClusterName, Option<String>>;

/// Follows `api`'s objects selected by `config` until `stop` (or the watch ends), engaging and
/// disengaging their clusters on `fleet`; disengages them all at the end.
pub(crate) async fn follow<S: ObjectClusters>(
    source: &S,
    provider: &str,
    api: Api<S::Object>,
    config: watcher::Config,
    fleet: &Fleet,
    stop: &CancellationToken,
) {
    let mut events = watcher(api, config).default_backoff().boxed();
    let mut seen: Seen = HashMap::new();
    // Names found by the list in progress (a relist drops the objects it does not find).
    let mut listing: Option<Vec<ClusterName>> = None;
    loop {
        let event = tokio::select! {
            _ = stop.cancelled() => break,
            e = events.next() => e,
        };
        match event {
            None => break,
            Some(Err(error)) => {
                tracing::warn!(%provider, %error, "watching the provider's objects");
            }
            Some(Ok(watcher::Event::Init)) => listing = Some(Vec::new()),
            Some(Ok(watcher::Event::InitApply(object))) => {
                if let Some(names) = &mut listing {
                    names.push(ClusterName::new(object.name_any()));
                }
                apply(source, fleet, &mut seen, &object).await;
            }
            Some(Ok(watcher::Event::InitDone)) => {
                let found = listing.take().unwrap_or_default();
                let gone: Vec<ClusterName> = seen
                    .keys()
                    .filter(|n| !found.contains(n))
                    .cloned()
                    .collect();
                for name in gone {
                    remove(fleet, &mut seen, &name);
                }
            }
            Some(Ok(watcher::Event::Apply(object))) => {
                apply(source, fleet, &mut seen, &object).await;
            }
            Some(Ok(watcher::Event::Delete(object))) => {
                remove(fleet, &mut seen, &ClusterName::new(object.name_any()));
            }
        }
    }
    let names: Vec<ClusterName> = seen.keys().cloned().collect();
    for name in names {
        remove(fleet, &mut seen, &name);
    }
}

async fn apply<S: ObjectClusters>(source: &S, fleet: &Fleet, seen: &mut Seen, object: &S::Object) {
    let name = ClusterName::new(object.name_any());
    match source.kubeconfig_of(object) {
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

fn remove(fleet: &Fleet, seen: &mut Seen, name: &ClusterName) {
    if seen.remove(name).is_some() {
        fleet.disengage(name);
        fleet.clear_error(name);
    }
}
