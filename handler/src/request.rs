//! [`Request`]: the key a controller reconciles (namespace and name of an object).

use std::fmt;

use kube::Resource;
use kube::runtime::reflector::ObjectRef;

/// What a reconciler is asked to look at: an object's name and, for namespaced objects, its
/// namespace.
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

    /// A request for a namespaced object.
    pub fn namespaced(namespace: impl Into<String>, name: impl Into<String>) -> Self {
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

impl<K: Resource> From<ObjectRef<K>> for Request
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    fn from(object: ObjectRef<K>) -> Self {
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
        let a = Request::namespaced("ns", "a");
        let b = Request::cluster("b");
        assert_eq!(a.to_string(), "ns/a");
        assert_eq!(b.to_string(), "b");
        let mut v = vec![
            Request::namespaced("z", "a"),
            a.clone(),
            b.clone(),
            Request::namespaced("ns", "0"),
        ];
        v.sort();
        assert_eq!(
            v,
            vec![
                b,
                Request::namespaced("ns", "0"),
                a,
                Request::namespaced("z", "a")
            ]
        );
    }

    #[test]
    fn from_objects() {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("cm".into());
        cm.metadata.namespace = Some("default".into());
        assert_eq!(Request::from(&cm), Request::namespaced("default", "cm"));
        let mut node = Node::default();
        node.metadata.name = Some("n1".into());
        assert_eq!(Request::from_object(&node), Request::cluster("n1"));
        assert_eq!(
            Request::from(ObjectRef::from_obj(&cm)),
            Request::namespaced("default", "cm")
        );
        let mut generated = ConfigMap::default();
        generated.metadata.generate_name = Some("cm-".into());
        assert_eq!(Request::from_object(&generated).name, "cm-");
    }
}
