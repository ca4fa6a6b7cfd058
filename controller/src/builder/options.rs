//! [`WatchOptions`]: the per-watch predicates and, for `for_kind`/`owns`, which objects to watch.

use kcr_predicate::Predicate;

/// Per-watch predicates and, for `for_kind`/`owns`, which objects to watch (namespace, label and
/// field selectors: a kcr-source [`WatchScope`](kcr_source::WatchScope)).
pub struct WatchOptions<K> {
    pub(super) predicates: Vec<Box<dyn Predicate<K>>>,
    pub(super) scope: kcr_source::WatchScope,
}

impl<K> Default for WatchOptions<K> {
    fn default() -> Self {
        WatchOptions {
            predicates: Vec::new(),
            scope: kcr_source::WatchScope::all(),
        }
    }
}

impl<K> std::fmt::Debug for WatchOptions<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchOptions")
            .field("predicates", &self.predicates.len())
            .field("scope", &self.scope)
            .finish()
    }
}

impl<K> WatchOptions<K> {
    /// No predicates; all objects in all namespaces.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a predicate; an event must pass all of them.
    pub fn predicate(mut self, predicate: impl Predicate<K>) -> Self {
        self.predicates.push(Box::new(predicate));
        self
    }

    /// Watches only `namespace` (`for_kind`/`owns`).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.scope = self.scope.namespace(namespace);
        self
    }

    /// Watches only these namespaces (`for_kind`/`owns`): one watch per namespace into one
    /// store, controller-runtime's `ByObject[..].Namespaces` (see
    /// [`kcr_source::namespaces`]). The list is checked when the builder creates the watch: an
    /// empty list, a duplicate or a cluster-scoped kind fails the build.
    pub fn namespaces<I>(mut self, namespaces: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.scope = self.scope.namespaces(namespaces);
        self
    }

    /// Watches only objects matching the label selector (`for_kind`/`owns`).
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.scope = self.scope.labels(selector);
        self
    }

    /// Watches only objects matching the field selector (`for_kind`/`owns`).
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.scope = self.scope.fields(selector);
        self
    }

    /// Fills the cache with a streaming list (`for_kind`/`owns`; see
    /// [`kcr_source::InitialList::Streaming`]).
    pub fn streaming_list(mut self) -> Self {
        self.scope = self.scope.streaming_list();
        self
    }

    /// Fills the cache with paged LISTs from etcd, the default (`for_kind`/`owns`; see
    /// [`kcr_source::InitialList::Paged`]).
    pub fn paged_list(mut self) -> Self {
        self.scope = self.scope.paged_list();
        self
    }

    /// Lets the list that fills the cache come from the API server's watch cache
    /// (`for_kind`/`owns`; see [`kcr_source::InitialList::FromCache`]).
    pub fn list_from_cache(mut self) -> Self {
        self.scope = self.scope.list_from_cache();
        self
    }
}

pub(super) fn describe_options(options: &kcr_source::WatchScope) -> String {
    let mut parts = Vec::new();
    match options.namespaces.as_deref() {
        Some([ns]) => parts.push(format!("namespace={ns}")),
        Some(namespaces) => parts.push(format!("namespaces={}", namespaces.join("+"))),
        None => {}
    }
    if let Some(l) = &options.label_selector {
        parts.push(format!("labels={l}"));
    }
    if let Some(f) = &options.field_selector {
        parts.push(format!("fields={f}"));
    }
    match options.initial_list {
        None => {}
        Some(kcr_source::InitialList::Streaming) => parts.push("streaming-list".to_string()),
        Some(kcr_source::InitialList::Paged) => parts.push("paged-list".to_string()),
        Some(kcr_source::InitialList::FromCache) => parts.push("list-from-cache".to_string()),
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("[{}]", parts.join(","))
    }
}
