//! [`Request`]: the key a controller reconciles (namespace and name of an object).

use std::fmt;

use kube_core::Resource;

/// What a reconciler is asked to look at: an object's name and, for namespaced objects, its
/// namespace.
///
/// Constructors take the name first, then the namespace, as kube's
/// `ObjectRef::new(name).within(namespace)` does: [`Request::new`]`(name, namespace)`,
/// [`Request::namespaced`]`(name, namespace)`, [`Request::cluster`]`(name)`.
///
/// Ordered by namespace (cluster-scoped first), then name. Displays as `namespace/name`, or just
/// `name` for cluster-scoped objects, like controller-runtime's `types.NamespacedName`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Request {
    /// The object's name.
    pub name: String,
    /// The object's namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
}

impl Request {
    /// A request for `name` in `namespace` (`None` for cluster-scoped objects).
    pub fn new(name: impl Into<String>, namespace: Option<String>) -> Self {
        Self {
            name: name.into(),
            namespace,
        }
    }

    /// A request for the namespaced object `name` in `namespace` (name first, like
    /// [`Request::new`]).
    ///
    /// ```
    /// use kcr_core::Request;
    /// let request = Request::namespaced("web", "prod");
    /// assert_eq!(request.to_string(), "prod/web");
    /// assert_eq!(request, Request::new("web", Some("prod".to_string())));
    /// ```
    pub fn namespaced(name: impl Into<String>, namespace: impl Into<String>) -> Self {
        Self::new(name, Some(namespace.into()))
    }

    /// A request for a cluster-scoped object.
    pub fn cluster(name: impl Into<String>) -> Self {
        Self::new(name, None)
    }

    /// The request for `object` (its `metadata.name`, or `generateName` when it has no name yet,
    /// and `metadata.namespace`).
    pub fn from_object<K: Resource>(object: &K) -> Self {
        let meta = object.meta();
        let name = meta
            .name
            .clone()
            .or_else(|| meta.generate_name.clone())
            .unwrap_or_default();
        Self::new(name, meta.namespace.clone())
    }
}

impl<K: Resource> From<&K> for Request {
    fn from(object: &K) -> Self {
        Request::from_object(object)
    }
}

/// With the `kube-runtime` feature: the request for a reflector's object reference.
#[cfg(feature = "kube-runtime")]
impl<K: Resource> From<kube_runtime::reflector::ObjectRef<K>> for Request
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    fn from(object: kube_runtime::reflector::ObjectRef<K>) -> Self {
        Request::new(object.name, object.namespace)
    }
}

impl PartialOrd for Request {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Request {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (&self.namespace, &self.name).cmp(&(&other.namespace, &other.name))
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Node};

    #[test]
    fn display_and_order() {
        let a = Request::namespaced("a", "ns");
        let b = Request::cluster("b");
        assert_eq!(a.to_string(), "ns/a");
        assert_eq!(b.to_string(), "b");
        let mut v = vec![
            Request::namespaced("a", "z"),
            a.clone(),
            b.clone(),
            Request::namespaced("0", "ns"),
        ];
        v.sort();
        assert_eq!(
            v,
            vec![
                b,
                Request::namespaced("0", "ns"),
                a,
                Request::namespaced("a", "z")
            ]
        );
    }

    #[test]
    fn from_objects() {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("cm".into());
        cm.metadata.namespace = Some("default".into());
        assert_eq!(Request::from(&cm), Request::namespaced("cm", "default"));
        let mut node = Node::default();
        node.metadata.name = Some("n1".into());
        assert_eq!(Request::from_object(&node), Request::cluster("n1"));
        let mut generated = ConfigMap::default();
        generated.metadata.generate_name = Some("cm-".into());
        assert_eq!(Request::from_object(&generated).name, "cm-");
    }
}
