//! Cache-wide defaults and per-kind scopes: controller-runtime's `cache.Options.DefaultNamespaces`,
//! `DefaultLabelSelector`, `DefaultFieldSelector`, `DefaultTransform` and `ByObject`.
//!
//! A namespace-scoped operator says its scope once, on the [`Cache`](crate::Cache), instead of on
//! every watch:
//!
//! ```no_run
//! # fn demo(client: kube::Client) -> Result<(), kcr_source::CacheError> {
//! use k8s_openapi::api::core::v1::{ConfigMap, Node};
//! use kcr_source::{Cache, WatchScope};
//!
//! let cache = Cache::new(client);
//! // Every namespaced kind: only these two namespaces, only objects labelled `team=a`.
//! cache.set_default_scope(WatchScope::all().namespaces(["a1", "a2"]).labels("team=a"))?;
//! // ConfigMaps: their own label selector (the namespaces still come from the default).
//! cache.set_scope::<ConfigMap>(WatchScope::all().labels("app=web"))?;
//! // `WatchScope::all()` now means the configured scope:
//! let configmaps = cache.reader::<ConfigMap>(WatchScope::all())?; // a1, a2; app=web
//! let nodes = cache.reader::<Node>(WatchScope::all())?; // cluster-scoped: every node, team=a
//! # let _ = (configmaps, nodes);
//! # Ok(()) }
//! ```
//!
//! How a watch's scope is resolved ([`Cache::scope_for`](crate::Cache::scope_for)), field by
//! field: what the watch itself asks for wins; a field it leaves unset comes from the kind's
//! scope ([`Cache::set_scope`](crate::Cache::set_scope)), and a field that leaves unset too from
//! the cache-wide default ([`Cache::set_default_scope`](crate::Cache::set_default_scope)).
//! `initial_list` too (unset everywhere: paged lists). Default namespaces apply to
//! namespaced kinds only: a cluster-scoped kind is watched whole. Because the resolution happens
//! in the cache, a controller's `for_kind`/`owns` watch and a client's read of the same kind
//! resolve to the same scope and share one watch.
//!
//! Scopes and the default transform are set before the watches they affect start: setting
//! them afterwards is [`CacheError::ScopeAfterStart`](crate::CacheError::ScopeAfterStart) (a
//! running watch cannot change what it lists). One limit, shared with controller-runtime's
//! field-by-field defaulting: a kind cannot opt back out of default namespaces into "every
//! namespace"; give it its own namespace list, or leave the default unset and scope the kinds
//! that need it.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::ApiResource;

use crate::WatchScope;

/// A transform of every cached object's metadata (the cache-wide default transform).
pub type MetaTransform = Arc<dyn Fn(&mut ObjectMeta) + Send + Sync>;

/// The configured scopes: the cache-wide default and one per resource.
#[derive(Default, Clone)]
pub(crate) struct Scopes {
    pub(crate) default: WatchScope,
    pub(crate) by_resource: HashMap<ApiResource, WatchScope>,
}

impl Scopes {
    /// `requested`, its unset fields filled from the resource's scope, then from the default.
    pub(crate) fn resolve(
        &self,
        resource: &ApiResource,
        namespaced: bool,
        requested: &WatchScope,
    ) -> WatchScope {
        let own = self.by_resource.get(resource);
        let layers = [Some(requested), own, Some(&self.default)];
        let first = |field: fn(&WatchScope) -> &Option<String>| {
            layers
                .iter()
                .flatten()
                .find_map(|scope| field(scope).clone())
        };
        let namespaces = if namespaced {
            layers
                .iter()
                .flatten()
                .find_map(|scope| scope.namespaces.clone())
        } else {
            // A namespace asked for explicitly stays, so that the cache refuses it by name.
            requested
                .namespaces
                .clone()
                .or_else(|| own.and_then(|scope| scope.namespaces.clone()))
        };
        WatchScope {
            namespaces,
            label_selector: first(|s| &s.label_selector),
            field_selector: first(|s| &s.field_selector),
            initial_list: layers.iter().flatten().find_map(|scope| scope.initial_list),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::InitialList;

    fn resource(kind: &str) -> ApiResource {
        ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: kind.into(),
            plural: format!("{}s", kind.to_lowercase()),
        }
    }

    #[test]
    fn the_watch_wins_then_the_kind_then_the_default() {
        let mut scopes = Scopes {
            default: WatchScope::all()
                .namespaces(["a", "b"])
                .labels("team=a")
                .fields("x=1"),
            ..Scopes::default()
        };
        scopes
            .by_resource
            .insert(resource("ConfigMap"), WatchScope::all().labels("app=web"));

        let cm = scopes.resolve(&resource("ConfigMap"), true, &WatchScope::all());
        assert_eq!(cm.namespaces, Some(vec!["a".into(), "b".into()]));
        assert_eq!(cm.label_selector.as_deref(), Some("app=web"));
        assert_eq!(cm.field_selector.as_deref(), Some("x=1"));

        let asked = WatchScope::all().namespace("c").labels("only=me");
        let cm = scopes.resolve(&resource("ConfigMap"), true, &asked);
        assert_eq!(cm.namespaces, Some(vec!["c".into()]));
        assert_eq!(cm.label_selector.as_deref(), Some("only=me"));

        let secret = scopes.resolve(&resource("Secret"), true, &WatchScope::all());
        assert_eq!(secret.label_selector.as_deref(), Some("team=a"));
        assert_eq!(secret.initial_list, None);
    }

    #[test]
    fn default_namespaces_skip_cluster_scoped_kinds_but_an_explicit_one_stays() {
        let scopes = Scopes {
            default: WatchScope::all().namespace("a").paged_list(),
            ..Scopes::default()
        };
        let node = scopes.resolve(&resource("Node"), false, &WatchScope::all());
        assert_eq!(node.namespaces, None);
        assert_eq!(node.initial_list, Some(InitialList::Paged));
        let asked = scopes.resolve(
            &resource("Node"),
            false,
            &WatchScope::all().list_from_cache(),
        );
        assert_eq!(asked.initial_list, Some(InitialList::FromCache));
        let asked = scopes.resolve(&resource("Node"), false, &WatchScope::all().namespace("x"));
        assert_eq!(asked.namespaces, Some(vec!["x".into()]));
    }
}
