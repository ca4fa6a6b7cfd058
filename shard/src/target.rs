//! A sharded kind as the builder's hooks show it, type-erased: its API resource and scope.

use kube::Api;
use kube::core::ApiResource;
#[cfg(test)]
use kube::core::DynamicObject;

/// One kind of a sharded controller, by its [`ApiResource`].
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// Group, version, kind and plural.
    pub resource: ApiResource,
    /// Whether its objects live outside namespaces.
    pub cluster_scoped: bool,
}

impl Target {
    /// The kind's name.
    pub(crate) fn kind(&self) -> &str {
        &self.resource.kind
    }

    /// The API of the kind in `namespace` (or in all namespaces), as `DynamicObject`s (or their
    /// `PartialObjectMeta`, for metadata-only requests); an error
    /// for a namespace on a cluster-scoped kind.
    pub(crate) fn api<K>(
        &self,
        client: kube::Client,
        namespace: Option<&str>,
    ) -> Result<Api<K>, String>
    where
        K: kube::Resource<DynamicType = ApiResource, Scope = kube::core::DynamicResourceScope>,
    {
        match (self.cluster_scoped, namespace) {
            (true, Some(ns)) if !ns.is_empty() => Err(format!(
                "{} is cluster-scoped: it has no namespace {ns}",
                self.resource.kind
            )),
            (true, _) | (false, None) => Ok(Api::all_with(client, &self.resource)),
            (false, Some(ns)) => Ok(Api::namespaced_with(client, ns, &self.resource)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(kind: &str, plural: &str, cluster_scoped: bool) -> Target {
        Target {
            resource: ApiResource {
                group: String::new(),
                version: "v1".into(),
                api_version: "v1".into(),
                kind: kind.into(),
                plural: plural.into(),
            },
            cluster_scoped,
        }
    }

    #[tokio::test]
    async fn apis_follow_the_scope() {
        let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let nodes = target("Node", "nodes", true);
        let err = nodes
            .api::<DynamicObject>(client.clone(), Some("ns"))
            .unwrap_err();
        assert!(err.contains("Node is cluster-scoped"), "{err}");
        assert_eq!(
            nodes
                .api::<DynamicObject>(client.clone(), None)
                .unwrap()
                .resource_url(),
            "/api/v1/nodes"
        );
        let cms = target("ConfigMap", "configmaps", false);
        assert_eq!(
            cms.api::<DynamicObject>(client.clone(), Some("a"))
                .unwrap()
                .resource_url(),
            "/api/v1/namespaces/a/configmaps"
        );
        assert_eq!(
            cms.api::<DynamicObject>(client, None)
                .unwrap()
                .resource_url(),
            "/api/v1/configmaps"
        );
    }
}
