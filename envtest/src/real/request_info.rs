//! The Kubernetes verb and resource of a request, from its method, path and query, as the
//! API server's request-info resolver reads them; the proxy keys faults and counters on them.

use http::Method;

/// What a request does: `verb` as in RBAC (`get`, `list`, `watch`, `create`, `update`,
/// `patch`, `delete`, `deletecollection`), `resource` the plural with `/<subresource>`
/// appended. Requests outside resources (discovery, `/readyz`) get the lowercase method as
/// verb and the path as resource, as the in-process server counts them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestInfo {
    pub verb: String,
    pub resource: String,
    /// The namespace of `/namespaces/{ns}/{resource}...` (not of a Namespace's own path).
    pub namespace: Option<String>,
    /// Whether this is a resource request (and not discovery or a health check).
    pub is_resource: bool,
}

/// Whether a query has `name` set to true (`watch=true`, `watch=1`).
fn flag(query: Option<&str>, name: &str) -> bool {
    query_value(query, name).is_some_and(|v| v == "true" || v == "1")
}

/// The first value of `name` in a query string (not percent-decoded: the values read here are
/// plain words and numbers).
pub(crate) fn query_value<'q>(query: Option<&'q str>, name: &str) -> Option<&'q str> {
    query?.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == name).then_some(v)
    })
}

impl RequestInfo {
    /// Classify a request.
    pub fn of(method: &Method, path: &str, query: Option<&str>) -> RequestInfo {
        let other = || RequestInfo {
            verb: method.as_str().to_ascii_lowercase(),
            resource: path.to_string(),
            namespace: None,
            is_resource: false,
        };
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let rest = match segs.as_slice() {
            ["api", _version, rest @ ..] => rest,
            ["apis", _group, _version, rest @ ..] => rest,
            _ => return other(),
        };
        // namespaces/{ns}/{resource}/... except namespaces/{name}/{status|finalize}.
        let (namespace, rest) = match rest {
            ["namespaces", ns, third, ..] if *third != "status" && *third != "finalize" => {
                (Some(ns.to_string()), &rest[2..])
            }
            _ => (None, rest),
        };
        let (resource, name, sub) = match rest {
            [] => return other(),
            [resource] => (*resource, None, None),
            [resource, name] => (*resource, Some(*name), None),
            [resource, name, sub, ..] => (*resource, Some(*name), Some(*sub)),
        };
        let verb = match *method {
            Method::GET if flag(query, "watch") => "watch",
            Method::GET if name.is_some() => "get",
            Method::GET => "list",
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE if name.is_some() => "delete",
            Method::DELETE => "deletecollection",
            _ => return other(),
        };
        RequestInfo {
            verb: verb.to_string(),
            resource: match sub {
                Some(sub) => format!("{resource}/{sub}"),
                None => resource.to_string(),
            },
            namespace,
            is_resource: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: Method, path_and_query: &str) -> (String, String) {
        let (path, query) = match path_and_query.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (path_and_query, None),
        };
        let i = RequestInfo::of(&method, path, query);
        (i.verb, i.resource)
    }

    #[test]
    fn classifies_like_the_api_server() {
        let cases = [
            (Method::GET, "/api/v1/namespaces", "list", "namespaces"),
            (
                Method::GET,
                "/api/v1/namespaces/default",
                "get",
                "namespaces",
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/default/finalize",
                "update",
                "namespaces/finalize",
            ),
            (
                Method::PATCH,
                "/api/v1/namespaces/default/status",
                "patch",
                "namespaces/status",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/default/pods",
                "list",
                "pods",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/default/pods?watch=true&resourceVersion=5",
                "watch",
                "pods",
            ),
            (Method::GET, "/api/v1/pods?watch=1", "watch", "pods"),
            (Method::GET, "/api/v1/nodes/n1", "get", "nodes"),
            (
                Method::PATCH,
                "/api/v1/nodes/n1/status",
                "patch",
                "nodes/status",
            ),
            (
                Method::POST,
                "/api/v1/namespaces/a/configmaps",
                "create",
                "configmaps",
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/a/configmaps",
                "deletecollection",
                "configmaps",
            ),
            (
                Method::DELETE,
                "/apis/apps/v1/namespaces/a/deployments/d",
                "delete",
                "deployments",
            ),
            (
                Method::PUT,
                "/apis/apps/v1/namespaces/a/deployments/d/scale",
                "update",
                "deployments/scale",
            ),
            (
                Method::GET,
                "/apis/nodes.lailin.xyz/v1/nodepools",
                "list",
                "nodepools",
            ),
            (
                Method::POST,
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
                "create",
                "leases",
            ),
            (
                Method::POST,
                "/api/v1/namespaces/a/serviceaccounts/default/token",
                "create",
                "serviceaccounts/token",
            ),
        ];
        for (method, path, verb, resource) in cases {
            assert_eq!(info(method, path), (verb.into(), resource.into()), "{path}");
        }
    }

    #[test]
    fn the_namespace_is_that_of_the_objects_path() {
        let ns = |path: &str| RequestInfo::of(&Method::GET, path, None).namespace;
        assert_eq!(ns("/api/v1/namespaces/a/configmaps").as_deref(), Some("a"));
        assert_eq!(
            ns("/apis/apps/v1/namespaces/b/deployments/d/scale").as_deref(),
            Some("b")
        );
        assert_eq!(ns("/api/v1/configmaps"), None);
        assert_eq!(ns("/api/v1/namespaces/a"), None);
        assert_eq!(ns("/api/v1/namespaces/a/status"), None);
        assert_eq!(ns("/api/v1/nodes/n1"), None);
    }

    #[test]
    fn discovery_and_health_are_not_resources() {
        for path in [
            "/api",
            "/apis",
            "/api/v1",
            "/apis/apps/v1",
            "/readyz",
            "/version",
        ] {
            let i = RequestInfo::of(&Method::GET, path, None);
            assert!(!i.is_resource, "{path}");
            assert_eq!((i.verb.as_str(), i.resource.as_str()), ("get", path));
        }
    }

    #[test]
    fn query_values() {
        let q = Some("watch=true&resourceVersion=42&allowWatchBookmarks");
        assert_eq!(query_value(q, "resourceVersion"), Some("42"));
        assert_eq!(query_value(q, "allowWatchBookmarks"), Some(""));
        assert_eq!(query_value(q, "continue"), None);
        assert_eq!(query_value(None, "watch"), None);
    }
}
