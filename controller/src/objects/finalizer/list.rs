//! [`add_finalizer`], [`remove_finalizer`], [`contains_finalizer`]: a finalizer name in the
//! object's `metadata.finalizers`, in memory (controller-runtime's `controllerutil.AddFinalizer`,
//! `RemoveFinalizer`, `ContainsFinalizer`). Nothing is written: update or patch the object after
//! (or use [`finalizer`](super::finalizer), which writes with guards).

use kube::Resource;

/// Adds `name` to the object's finalizers unless it is there; `true` when it was added.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcr_controller::objects::{add_finalizer, contains_finalizer, remove_finalizer};
///
/// let mut cm = ConfigMap::default();
/// assert!(add_finalizer(&mut cm, "example.com/cleanup"));
/// assert!(!add_finalizer(&mut cm, "example.com/cleanup")); // once only
/// assert!(contains_finalizer(&cm, "example.com/cleanup"));
/// assert!(remove_finalizer(&mut cm, "example.com/cleanup"));
/// assert!(!contains_finalizer(&cm, "example.com/cleanup"));
/// assert_eq!(cm.metadata.finalizers, None); // an emptied list is dropped
/// ```
pub fn add_finalizer<K: Resource>(object: &mut K, name: &str) -> bool {
    if contains_finalizer(object, name) {
        return false;
    }
    object
        .meta_mut()
        .finalizers
        .get_or_insert_with(Vec::new)
        .push(name.to_string());
    true
}

/// Removes every occurrence of `name` from the object's finalizers; `true` when one was
/// removed. A list left empty is dropped (`None`), as the API server stores it.
pub fn remove_finalizer<K: Resource>(object: &mut K, name: &str) -> bool {
    let finalizers = &mut object.meta_mut().finalizers;
    let Some(list) = finalizers.as_mut() else {
        return false;
    };
    let before = list.len();
    list.retain(|f| f != name);
    let removed = list.len() != before;
    if list.is_empty() {
        *finalizers = None;
    }
    removed
}

/// Whether the object's finalizers hold `name`.
pub fn contains_finalizer<K: Resource>(object: &K, name: &str) -> bool {
    object.meta().finalizers.iter().flatten().any(|f| f == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn keeps_others_and_removes_duplicates() {
        let mut cm = ConfigMap::default();
        cm.metadata.finalizers = Some(vec!["a".into(), "mine".into(), "b".into(), "mine".into()]);
        assert!(!add_finalizer(&mut cm, "a"));
        assert!(remove_finalizer(&mut cm, "mine"));
        assert_eq!(cm.metadata.finalizers, Some(vec!["a".into(), "b".into()]));
        assert!(!remove_finalizer(&mut cm, "mine"));
        assert!(add_finalizer(&mut cm, "c"));
        assert_eq!(
            cm.metadata.finalizers,
            Some(vec!["a".into(), "b".into(), "c".into()])
        );
        let mut empty = ConfigMap::default();
        assert!(!remove_finalizer(&mut empty, "x"));
        assert!(!contains_finalizer(&empty, "x"));
    }
}
