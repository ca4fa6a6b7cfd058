//! [`WatchScope`]: which objects of a type a watch covers and how its cache is filled
//! ([`InitialList`]), and [`ScopedApi`], the `Api` of a namespaced or cluster-scoped type.

use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::runtime::watcher;
use kube::{Api, Client, Resource};

use super::error::CacheError;
use super::namespaces;

/// Which objects of a type to watch (controller-runtime's `cache.Options.ByObject[..]`). Two
/// watches with equal options share one informer.
///
/// ```
/// use kcr_source::WatchScope;
///
/// // Every namespace (the default).
/// let all = WatchScope::all();
/// // Two namespaces: one watch each, one store, reads see both (see `cache::namespaces`).
/// let teams = WatchScope::all().namespaces(["team-a", "team-b"]).labels("app=web");
/// assert_eq!(teams.namespaces, Some(vec!["team-a".to_string(), "team-b".to_string()]));
/// # let _ = all;
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct WatchScope {
    /// Only these namespaces (namespaced types only): one watch per namespace, feeding one
    /// store; `None` watches all namespaces. Checked when the watch is created: not empty, no
    /// duplicates, valid names (see [`namespaces`]).
    pub namespaces: Option<Vec<String>>,
    /// A label selector such as `app=web,tier in (a,b)`; validated when the watch is created.
    pub label_selector: Option<String>,
    /// A field selector such as `spec.nodeName=n1`; validated by the API server.
    pub field_selector: Option<String>,
    /// How the cache is filled (and refilled after a lost watch); `None` takes the kind's or
    /// the cache's scope, and then [`InitialList::Paged`], the default.
    pub initial_list: Option<InitialList>,
}

/// How a cache gets its objects before it watches (see BENCHMARKS.md, section 4, for what each
/// costs at 100,000 objects).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum InitialList {
    /// A streaming list: a watch with `sendInitialEvents=true`, ended by the
    /// `k8s.io/initial-events-end` bookmark. The API server sends the objects one by one from
    /// its watch cache, so neither side holds the whole list at once; at 100,000 objects it
    /// syncs in about half the time of paged lists, with less memory on both sides. Needs an
    /// API server that serves `WatchList` (kube-apiserver 1.34 and later; kcr-envtest in
    /// process); a server without it refuses the watch (`400` or `422`), and the cache then
    /// falls back to [`Paged`](InitialList::Paged) for that watch, once, with a warning (the
    /// refusal also reaches the [watch-error hook](crate::Cache::on_watch_error)). Not the default
    /// yet: the API server authorizes it as a `watch` alone, so a controller's RBAC role
    /// keeps a `list` verb that only the fallback uses, and the NodePool operator's RBAC check
    /// (every verb of its roles needed) flags that on the real server.
    Streaming,
    /// LISTs of 500 read from etcd (`resourceVersion` unset, "most recent"; kube-rs's
    /// default, and kcr's), then a watch.
    #[default]
    Paged,
    /// One unpaged LIST the API server answers from its watch cache (`resourceVersion=0`,
    /// "any version", what client-go's reflector asks for its first list), then a watch.
    /// The cheapest for the API server, but the list may be older than the newest write (on a
    /// server that lags), and it comes whole, in one response, so the client holds the whole
    /// list's bytes while it decodes it (three to four times the paged peak at 100,000
    /// objects).
    FromCache,
}

impl WatchScope {
    /// All objects of the type.
    pub fn all() -> Self {
        Self::default()
    }
    /// Restricts to one namespace (replaces any namespaces set before).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespaces = Some(vec![namespace.into()]);
        self
    }
    /// Restricts to several namespaces, watched one watch each into one store (replaces any
    /// namespaces set before; see [`namespaces`]).
    pub fn namespaces<I>(mut self, namespaces: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.namespaces = Some(namespaces.into_iter().map(Into::into).collect());
        self
    }
    /// Restricts with a label selector.
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }
    /// Restricts with a field selector.
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }
    /// Fills the cache with a streaming list ([`InitialList::Streaming`]).
    pub fn streaming_list(mut self) -> Self {
        self.initial_list = Some(InitialList::Streaming);
        self
    }
    /// Fills the cache with paged LISTs from etcd ([`InitialList::Paged`], the default unless
    /// the kind's or the cache's scope says otherwise).
    pub fn paged_list(mut self) -> Self {
        self.initial_list = Some(InitialList::Paged);
        self
    }
    /// Fills the cache with one LIST from the API server's watch cache
    /// ([`InitialList::FromCache`]).
    pub fn list_from_cache(mut self) -> Self {
        self.initial_list = Some(InitialList::FromCache);
        self
    }

    /// This scope checked, with its namespaces sorted (the form informers are keyed by).
    pub(crate) fn normalized(&self) -> Result<WatchScope, CacheError> {
        Ok(WatchScope {
            namespaces: namespaces::normalize(&self.namespaces)?,
            ..self.clone()
        })
    }

    pub(crate) fn watcher_config(&self) -> Result<watcher::Config, CacheError> {
        let mut config = watcher::Config::default();
        if let Some(labels) = &self.label_selector {
            crate::parse_label_selector(labels)?;
            config = config.labels(labels);
        }
        if let Some(fields) = &self.field_selector {
            config = config.fields(fields);
        }
        match self.initial_list.unwrap_or_default() {
            InitialList::Streaming => config = config.streaming_lists(),
            InitialList::Paged => {}
            InitialList::FromCache => {
                // One unpaged request: paging through the watch cache costs the server a pass
                // over the whole cached list per page (quadratic in the list's length).
                config = config.any_semantic();
                config.page_size = None;
            }
        }
        Ok(config)
    }
}

/// How to build an `Api<K>` for a namespace, per resource scope (so that namespaced and
/// cluster-scoped types both work through one generic method).
pub trait ScopedApi {
    /// Whether objects of this scope live in namespaces.
    const NAMESPACED: bool;

    /// The `Api` for `namespace` (or all namespaces), or an error for a namespace on a
    /// cluster-scoped type.
    fn api<K>(client: Client, namespace: Option<&str>) -> Result<Api<K>, CacheError>
    where
        K: Resource<Scope = Self>,
        K::DynamicType: Default;
}

impl ScopedApi for NamespaceResourceScope {
    const NAMESPACED: bool = true;

    fn api<K>(client: Client, namespace: Option<&str>) -> Result<Api<K>, CacheError>
    where
        K: Resource<Scope = Self>,
        K::DynamicType: Default,
    {
        Ok(match namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        })
    }
}

impl ScopedApi for ClusterResourceScope {
    const NAMESPACED: bool = false;

    fn api<K>(client: Client, namespace: Option<&str>) -> Result<Api<K>, CacheError>
    where
        K: Resource<Scope = Self>,
        K::DynamicType: Default,
    {
        match namespace {
            Some(ns) => Err(CacheError::NamespaceOnClusterScoped {
                kind: K::kind(&Default::default()).into_owned(),
                namespace: ns.to_string(),
            }),
            None => Ok(Api::all(client)),
        }
    }
}
