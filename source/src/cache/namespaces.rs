//! Several namespaces per type: controller-runtime's `cache.Options.ByObject[..].Namespaces`
//! (and `DefaultNamespaces`).
//!
//! A [`WatchScope`](crate::WatchScope) may name several namespaces
//! ([`WatchScope::namespaces`](crate::WatchScope::namespaces)). The cache then runs one watch
//! per namespace, all feeding the one store of the type (see the informer's partitions): reads
//! see the objects of every listed namespace, a relist of one namespace's watch (after a `410
//! Gone`) replaces that namespace's objects only, each namespace's events reach every
//! subscriber exactly once, and the cache counts as synced once every namespace's watch holds
//! its first complete list.
//!
//! The list is checked when the watch is created: an empty list, a duplicate, a name that is
//! not a namespace name (a DNS-1123 label) or any namespace for a cluster-scoped type is a
//! [`CacheError`]. The order does not matter: `["a", "b"]` and `["b", "a"]` share one watch.
//!
//! A [`Reader`](crate::Reader) of a namespace-restricted scope refuses to read a namespace
//! outside it with a [`ReadError`] (controller-runtime's "unable to get: ns/name because of
//! unknown namespace for the cache") instead of answering "not found" for an object it could
//! never have seen.

use std::sync::Arc;

use super::CacheError;

/// Errors of reading a [`Reader`](crate::Reader).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The namespace asked for is not one the cache watches for this type: the cache cannot
    /// know whether the object exists.
    #[error(
        "unable to {}: namespace {namespace:?} is unknown to the cache of {kind}, which watches only {}",
        what(name.as_deref(), namespace),
        watched.join(", ")
    )]
    UnknownNamespace {
        /// The type's kind.
        kind: String,
        /// The namespace asked for.
        namespace: String,
        /// The object's name (`None` for a list).
        name: Option<String>,
        /// The namespaces the cache watches, sorted.
        watched: Vec<String>,
    },
}

fn what(name: Option<&str>, namespace: &str) -> String {
    match name {
        Some(name) => format!("get {namespace}/{name}"),
        None => format!("list namespace {namespace}"),
    }
}

/// The namespaces a scope names, checked and sorted (`None`: all namespaces).
pub(crate) fn normalize(
    namespaces: &Option<Vec<String>>,
) -> Result<Option<Vec<String>>, CacheError> {
    let Some(list) = namespaces else {
        return Ok(None);
    };
    if list.is_empty() {
        return Err(CacheError::NoNamespaces);
    }
    for namespace in list {
        let problems = kcr_names::validate_dns1123_label(namespace);
        if !problems.is_empty() {
            return Err(CacheError::InvalidNamespace {
                namespace: namespace.clone(),
                reason: problems.join("; "),
            });
        }
    }
    let mut sorted = list.clone();
    sorted.sort();
    if let Some(pair) = sorted.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(CacheError::DuplicateNamespace {
            namespace: pair[0].clone(),
        });
    }
    Ok(Some(sorted))
}

/// What a [`Reader`](crate::Reader) may read: every namespace, or a sorted set of them.
#[derive(Debug, Clone)]
pub(crate) struct Readable {
    kind: String,
    /// Sorted; `None`: every namespace.
    namespaces: Option<Arc<[String]>>,
}

impl Readable {
    pub(crate) fn new(kind: String, namespaces: Option<Vec<String>>) -> Self {
        Readable {
            kind,
            namespaces: namespaces.map(Arc::from),
        }
    }

    /// `Ok` if `namespace` is one the cache watches.
    pub(crate) fn check(&self, namespace: &str, name: Option<&str>) -> Result<(), ReadError> {
        match &self.namespaces {
            Some(watched)
                if watched
                    .binary_search_by(|n| n.as_str().cmp(namespace))
                    .is_err() =>
            {
                Err(ReadError::UnknownNamespace {
                    kind: self.kind.clone(),
                    namespace: namespace.to_string(),
                    name: name.map(str::to_string),
                    watched: watched.to_vec(),
                })
            }
            _ => Ok(()),
        }
    }

    /// The namespaces, if restricted (sorted).
    pub(crate) fn namespaces(&self) -> Option<&[String]> {
        self.namespaces.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn some(list: &[&str]) -> Option<Vec<String>> {
        Some(list.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn lists_are_checked_and_sorted() {
        assert_eq!(normalize(&None), Ok(None));
        assert_eq!(normalize(&some(&["b", "a"])), Ok(some(&["a", "b"])));
        assert_eq!(normalize(&some(&[])), Err(CacheError::NoNamespaces));
        assert_eq!(
            normalize(&some(&["a", "b", "a"])),
            Err(CacheError::DuplicateNamespace {
                namespace: "a".into()
            })
        );
        for bad in ["", "Team-A", "a_b", "-a"] {
            match normalize(&some(&["ok", bad])) {
                Err(CacheError::InvalidNamespace { namespace, reason }) => {
                    assert_eq!(namespace, bad);
                    assert!(!reason.is_empty());
                }
                other => panic!("{bad:?} was accepted: {other:?}"),
            }
        }
        let message = CacheError::NoNamespaces.to_string();
        assert!(message.contains("empty"), "{message}");
    }

    #[test]
    fn reads_outside_the_set_are_errors_that_say_why() {
        let all = Readable::new("ConfigMap".into(), None);
        assert_eq!(all.check("anything", Some("x")), Ok(()));
        let two = Readable::new("ConfigMap".into(), some(&["a", "b"]));
        assert_eq!(two.check("a", Some("x")), Ok(()));
        assert_eq!(two.check("b", None), Ok(()));
        let error = two.check("c", Some("x")).expect_err("c is not watched");
        assert_eq!(
            error,
            ReadError::UnknownNamespace {
                kind: "ConfigMap".into(),
                namespace: "c".into(),
                name: Some("x".into()),
                watched: vec!["a".into(), "b".into()],
            }
        );
        assert_eq!(
            error.to_string(),
            "unable to get c/x: namespace \"c\" is unknown to the cache of ConfigMap, which watches only a, b"
        );
        let error = two.check("c", None).expect_err("c is not watched");
        assert!(
            error.to_string().starts_with("unable to list namespace c:"),
            "{error}"
        );
    }
}
