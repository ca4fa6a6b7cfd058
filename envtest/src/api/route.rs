//! Routing: a request path to the document or resource it names, and the verb of a resource
//! request.

use std::sync::Arc;

use http::Method;
use serde_json::Value;

use super::query::{Query, flag};
use crate::error::ApiError;
use crate::resources::{Registry, ResourceType};

/// A resource request after routing.
#[derive(Debug, Clone)]
pub(crate) struct Route {
    pub t: Arc<ResourceType>,
    pub version: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// The request's `User-Agent` (default field manager).
    pub user_agent: String,
    /// `fieldValidation=Strict` was requested: unknown fields are an error, not pruned.
    pub strict: bool,
    /// `fieldValidation=Ignore` was requested: unknown fields are pruned without a warning.
    pub ignore_unknown: bool,
    /// Warnings for `Warning` response headers (admission, unknown fields); shared by clones.
    pub warnings: Arc<parking_lot::Mutex<Vec<String>>>,
}

impl Route {
    /// Record a warning for the response's `Warning` headers.
    pub(crate) fn warn(&self, message: impl Into<String>) {
        self.warnings.lock().push(message.into());
    }

    /// The namespace of the request (`""` for cluster-scoped ones).
    pub(crate) fn ns(&self) -> &str {
        self.namespace.as_deref().unwrap_or_default()
    }
}

/// What a request path names.
pub(crate) enum Target {
    /// A fixed JSON document (version, discovery, OpenAPI).
    Fixed(Value),
    /// The aggregated discovery document (`apidiscovery.k8s.io/v2`).
    Aggregated(Value),
    /// A plain-text answer (health checks).
    Text(String),
    /// kube-apiserver's plain-text `404 page not found` (no Status body), for paths outside
    /// every served API group.
    PageNotFound,
    /// A request on a served resource.
    Resource(Route),
}

/// Routes a request path: the fixed documents (version, discovery, OpenAPI, health), or a
/// resource request ([`Route`]) of a served resource; anything else is a 404.
pub(crate) fn route(
    reg: &Registry,
    path: &str,
    q: &Query,
    user_agent: String,
) -> Result<Target, ApiError> {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest): (&str, &str, &[&str]) = match segs.as_slice() {
        ["version"] => return Ok(Target::Fixed(crate::discovery::version())),
        ["healthz" | "readyz" | "livez", ..] => return Ok(Target::Text("ok".into())),
        ["api"] => return Ok(Target::Fixed(crate::discovery::api_versions())),
        ["apis"] => return Ok(Target::Fixed(crate::discovery::group_list(reg))),
        ["api", "v1"] => {
            return Ok(Target::Fixed(crate::discovery::resource_list(
                reg, "", "v1",
            )));
        }
        ["apis", g] => {
            return Ok(crate::discovery::group(reg, g)
                .map(Target::Fixed)
                .unwrap_or(Target::PageNotFound));
        }
        // A group nothing serves: no API handler at all.
        ["apis", g, ..] if crate::discovery::group(reg, g).is_none() => {
            return Ok(Target::PageNotFound);
        }
        ["apis", g, v] => {
            if !reg.serves_group_version(g, v) {
                return Err(ApiError::no_route());
            }
            return Ok(Target::Fixed(crate::discovery::resource_list(reg, g, v)));
        }
        ["openapi", "v3"] => return Ok(Target::Fixed(crate::openapi::root(reg))),
        ["openapi", "v3", gv @ ..] => {
            return crate::openapi::group_version(reg, &gv.join("/"))
                .map(Target::Fixed)
                .ok_or_else(ApiError::no_route);
        }
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", g, v, rest @ ..] => (g, v, rest),
        ["api", ..] => return Err(ApiError::no_route()),
        _ => return Ok(Target::PageNotFound),
    };
    // namespaces/{ns}/{resource}/... for namespaced resources.
    let (namespace, rest) = match rest {
        ["namespaces", ns, res, tail @ ..]
            if reg
                .lookup(group, version, res)
                .is_some_and(|t| t.namespaced) =>
        {
            (Some(ns.to_string()), {
                let mut v = vec![*res];
                v.extend_from_slice(tail);
                v
            })
        }
        other => (None, other.to_vec()),
    };
    let (res, name, sub) = match rest.as_slice() {
        [res] => (*res, None, None),
        [res, name] => (*res, Some(name.to_string()), None),
        [res, name, sub] => (*res, Some(name.to_string()), Some(sub.to_string())),
        _ => return Err(ApiError::no_route()),
    };
    let t = reg
        .lookup(group, version, res)
        .ok_or_else(ApiError::no_route)?;
    if t.namespaced && namespace.is_none() && name.is_some() {
        return Err(ApiError::no_route());
    }
    if let Some(sub) = &sub {
        let ok = (sub == "status" && t.status_subresource)
            || (sub == "scale" && t.scale.is_some())
            || t.subresource(sub).is_some();
        if !ok {
            // The custom resource handler answers an unserved subresource of an object as
            // the object not found.
            return Err(match (&t.custom, &name) {
                (Some(_), Some(name)) => ApiError::not_found(&t.group, &t.plural, name),
                _ => ApiError::no_route(),
            });
        }
    }
    Ok(Target::Resource(Route {
        t,
        version: version.to_string(),
        namespace,
        name,
        subresource: sub,
        user_agent,
        strict: q.get("fieldValidation").is_some_and(|v| v == "Strict"),
        ignore_unknown: q.get("fieldValidation").is_some_and(|v| v == "Ignore"),
        warnings: Arc::default(),
    }))
}

/// The verb of a resource request, as fault injection and request counters name it.
pub(crate) fn verb_of(method: &Method, r: &Route, q: &Query) -> &'static str {
    match *method {
        Method::GET if r.name.is_some() => "get",
        Method::GET if flag(q, "watch") => "watch",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if r.name.is_some() => "delete",
        Method::DELETE => "deletecollection",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::query::parse_query;

    fn resource(path: &str, query: &str) -> Result<Route, ApiError> {
        let reg = Registry::with_builtins();
        match route(
            &reg,
            path,
            &parse_query(Some(query)),
            "kubectl/v1.34".into(),
        )? {
            Target::Resource(r) => Ok(r),
            _ => panic!("{path} is not a resource request"),
        }
    }

    #[test]
    fn namespaced_and_cluster_scoped_paths() {
        let r = resource("/api/v1/namespaces/team/pods/p1/status", "").unwrap();
        assert_eq!(r.t.plural, "pods");
        assert_eq!(r.version, "v1");
        assert_eq!(r.ns(), "team");
        assert_eq!(r.name.as_deref(), Some("p1"));
        assert_eq!(r.subresource.as_deref(), Some("status"));
        assert_eq!(r.user_agent, "kubectl/v1.34");
        let r = resource("/apis/apps/v1/deployments", "fieldValidation=Strict").unwrap();
        assert_eq!(
            (r.t.key().as_str(), r.namespace.as_deref()),
            ("apps/deployments", None)
        );
        assert!(r.strict && !r.ignore_unknown);
        // A cluster-scoped resource: `namespaces/{name}` is the object, not a scope.
        let r = resource("/api/v1/namespaces/team", "fieldValidation=Ignore").unwrap();
        assert_eq!(
            (r.t.plural.as_str(), r.name.as_deref()),
            ("namespaces", Some("team"))
        );
        assert!(r.ignore_unknown);
        let r = resource("/api/v1/nodes/n1", "").unwrap();
        assert_eq!((r.ns(), r.name.as_deref()), ("", Some("n1")));
    }

    #[test]
    fn subresources_are_checked() {
        assert!(resource("/apis/apps/v1/namespaces/d/deployments/web/scale", "").is_ok());
        assert!(resource("/api/v1/namespaces/ns1/finalize", "").is_ok());
        for bad in [
            "/api/v1/namespaces/d/configmaps/c/status",
            "/api/v1/namespaces/d/pods/p/scale",
            "/api/v1/namespaces/d/pods/p/log",
            "/api/v1/pods/p",
            "/api/v1/namespaces/d/pods/p/status/extra",
            "/api/v1/widgets",
            "/apis/apps/v2/deployments",
        ] {
            let err = resource(bad, "").unwrap_err();
            assert_eq!(err.code, 404, "{bad}");
        }
    }

    #[test]
    fn fixed_documents_and_unknown_groups() {
        let reg = Registry::with_builtins();
        let q = Query::new();
        let target = |path: &str| route(&reg, path, &q, String::new());
        assert!(matches!(target("/version"), Ok(Target::Fixed(_))));
        assert!(matches!(target("/healthz"), Ok(Target::Text(_))));
        assert!(matches!(target("/readyz/ping"), Ok(Target::Text(_))));
        assert!(matches!(target("/api"), Ok(Target::Fixed(_))));
        assert!(matches!(target("/apis/apps"), Ok(Target::Fixed(_))));
        assert!(matches!(target("/apis/apps/v1"), Ok(Target::Fixed(_))));
        assert!(matches!(target("/openapi/v3"), Ok(Target::Fixed(_))));
        assert!(matches!(
            target("/apis/example.com"),
            Ok(Target::PageNotFound)
        ));
        assert!(matches!(
            target("/apis/example.com/v1/widgets"),
            Ok(Target::PageNotFound)
        ));
        assert!(matches!(target("/metrics"), Ok(Target::PageNotFound)));
        assert!(matches!(target("/apis/apps/v9"), Err(e) if e.code == 404));
        assert!(matches!(target("/api/v2"), Err(e) if e.code == 404));
    }

    #[test]
    fn verbs() {
        let named = resource("/api/v1/namespaces/d/pods/p", "").unwrap();
        let collection = resource("/api/v1/namespaces/d/pods", "").unwrap();
        let q = Query::new();
        let watch = parse_query(Some("watch=true"));
        assert_eq!(verb_of(&Method::GET, &named, &q), "get");
        assert_eq!(verb_of(&Method::GET, &collection, &q), "list");
        assert_eq!(verb_of(&Method::GET, &collection, &watch), "watch");
        assert_eq!(verb_of(&Method::POST, &collection, &q), "create");
        assert_eq!(verb_of(&Method::PUT, &named, &q), "update");
        assert_eq!(verb_of(&Method::PATCH, &named, &q), "patch");
        assert_eq!(verb_of(&Method::DELETE, &named, &q), "delete");
        assert_eq!(
            verb_of(&Method::DELETE, &collection, &q),
            "deletecollection"
        );
        assert_eq!(verb_of(&Method::OPTIONS, &collection, &q), "unknown");
    }
}
