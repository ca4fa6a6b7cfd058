//! Installing a CustomResourceDefinition on the real backend and waiting until it is served.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use serde_json::Value;

use crate::error::{EnvtestError, kube_error};

/// How long a CRD may take to be established and served.
const SERVED_TIMEOUT: Duration = Duration::from_secs(30);

/// Create or replace `crd`, then wait until it is `Established` and every served version lists
/// the resource in discovery.
pub(crate) async fn install(client: &kube::Client, crd: Value) -> Result<(), EnvtestError> {
    let name = crd["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let what = format!("CustomResourceDefinition {name}");
    let typed: CustomResourceDefinition =
        serde_json::from_value(crd).map_err(|source| EnvtestError::Serialize {
            what: what.clone(),
            source,
        })?;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pp = PostParams::default();
    let deadline = Instant::now() + SERVED_TIMEOUT;
    loop {
        match api.create(&pp, &typed).await {
            Ok(_) => break,
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let current = match api.get_opt(&name).await {
                    Ok(Some(current)) => current,
                    // Deleted in between: create again.
                    Ok(None) => continue,
                    Err(e) => return Err(kube_error(format!("reading {what}"))(e)),
                };
                if terminating(&current) {
                    // A CRD being deleted (its objects are being removed) cannot be replaced
                    // by a fresh one: wait until it is gone, then create.
                    if Instant::now() > deadline {
                        return Err(EnvtestError::Client(format!(
                            "{what} is still being deleted after {} s",
                            SERVED_TIMEOUT.as_secs()
                        )));
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                let mut replacement = typed.clone();
                replacement.metadata.resource_version = current.metadata.resource_version;
                match api.replace(&name, &pp, &replacement).await {
                    Ok(_) => break,
                    // Overtaken between the read and the replace: the API server writes a new
                    // CRD's status itself, and the tests of one binary install the same CRD
                    // concurrently on a shared server. Start over from the current state (409),
                    // or create it again (404), until the deadline.
                    Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {
                        if Instant::now() > deadline {
                            return Err(kube_error(format!(
                                "replacing {what} (overtaken by other writers for {} s)",
                                SERVED_TIMEOUT.as_secs()
                            ))(kube::Error::Api(s)));
                        }
                        continue;
                    }
                    Err(e) => return Err(kube_error(format!("replacing {what}"))(e)),
                }
            }
            Err(e) => return Err(kube_error(format!("creating {what}"))(e)),
        }
    }
    let mut last;
    loop {
        last = match served(client, &api, &typed).await {
            Ok(()) => return Ok(()),
            Err(why) => why,
        };
        if Instant::now() > deadline {
            return Err(EnvtestError::Client(format!(
                "{what} not served after {} s: {last}",
                SERVED_TIMEOUT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `Ok` when the CRD is established and discovery lists its plural in every served version.
async fn served(
    client: &kube::Client,
    api: &Api<CustomResourceDefinition>,
    crd: &CustomResourceDefinition,
) -> Result<(), String> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let current = api.get(&name).await.map_err(|e| e.to_string())?;
    let established = current
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        });
    if !established {
        return Err("not Established yet".into());
    }
    let group = &crd.spec.group;
    let plural = &crd.spec.names.plural;
    for version in crd.spec.versions.iter().filter(|v| v.served) {
        let list = client
            .list_api_group_resources(&format!("{group}/{}", version.name))
            .await
            .map_err(|e| e.to_string())?;
        if !list.resources.iter().any(|r| &r.name == plural) {
            return Err(format!(
                "{group}/{} does not list {plural} yet",
                version.name
            ));
        }
    }
    Ok(())
}

/// Whether a CRD is being deleted (kube-apiserver removes its objects, then the CRD).
fn terminating(crd: &CustomResourceDefinition) -> bool {
    crd.metadata.deletion_timestamp.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crd_with_a_deletion_timestamp_is_terminating() {
        let mut crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"}, "versions": []}
        }))
        .unwrap();
        assert!(!terminating(&crd));
        crd.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T00:00:00Z".parse().unwrap(),
            ));
        assert!(terminating(&crd));
    }
}
