//! "Something changed" predicates on updates: resource version, generation, labels, annotations,
//! finalizers.
//!
//! Each one filters *updates* only and accepts creates, deletes and generic events, like
//! controller-runtime's `ResourceVersionChangedPredicate`, `GenerationChangedPredicate`, ...

use std::collections::BTreeSet;
use std::sync::Arc;

use kube_core::Resource;

use crate::Predicate;

/// Accepts updates whose `metadata.resourceVersion` differs (drops the no-op updates that periodic
/// resyncs and relists can produce).
#[derive(Debug, Clone, Copy, Default)]
pub struct ResourceVersionChanged;

/// Accepts updates whose `metadata.generation` differs, i.e. spec changes for types with a status
/// subresource. Updates of objects without a generation (both `None`) are rejected, as in
/// controller-runtime; for such types use
/// [`IgnoreStatusOnlyUpdates`](crate::IgnoreStatusOnlyUpdates) instead.
#[derive(Debug, Clone, Copy, Default)]
pub struct GenerationChanged;

/// Accepts updates whose labels differ (a missing map equals an empty one).
#[derive(Debug, Clone, Copy, Default)]
pub struct LabelsChanged;

/// Accepts updates whose annotations differ (a missing map equals an empty one).
#[derive(Debug, Clone, Copy, Default)]
pub struct AnnotationsChanged;

/// Accepts updates whose set of finalizers differs (order is ignored; a missing list equals an
/// empty one).
#[derive(Debug, Clone, Copy, Default)]
pub struct FinalizersChanged;

impl<K: Resource + Send + Sync + 'static> Predicate<K> for ResourceVersionChanged {
    fn update(&self, old: &Arc<K>, new: &Arc<K>) -> bool {
        old.meta().resource_version != new.meta().resource_version
    }
}

impl<K: Resource + Send + Sync + 'static> Predicate<K> for GenerationChanged {
    fn update(&self, old: &Arc<K>, new: &Arc<K>) -> bool {
        old.meta().generation != new.meta().generation
    }
}

impl<K: Resource + Send + Sync + 'static> Predicate<K> for LabelsChanged {
    fn update(&self, old: &Arc<K>, new: &Arc<K>) -> bool {
        let empty = Default::default();
        old.meta().labels.as_ref().unwrap_or(&empty) != new.meta().labels.as_ref().unwrap_or(&empty)
    }
}

impl<K: Resource + Send + Sync + 'static> Predicate<K> for AnnotationsChanged {
    fn update(&self, old: &Arc<K>, new: &Arc<K>) -> bool {
        let empty = Default::default();
        old.meta().annotations.as_ref().unwrap_or(&empty)
            != new.meta().annotations.as_ref().unwrap_or(&empty)
    }
}

impl<K: Resource + Send + Sync + 'static> Predicate<K> for FinalizersChanged {
    fn update(&self, old: &Arc<K>, new: &Arc<K>) -> bool {
        let set =
            |k: &K| -> BTreeSet<String> { k.meta().finalizers.iter().flatten().cloned().collect() };
        set(old) != set(new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{all_kinds_accept_except_update, obj};
    use kcr_core::Event;

    #[test]
    fn resource_version_truth_table() {
        let p = ResourceVersionChanged;
        let table = [
            (Some("1"), Some("1"), false),
            (Some("1"), Some("2"), true),
            (None, Some("1"), true),
            (None, None, false),
        ];
        for (a, b, expected) in table {
            let old = obj(|m| m.resource_version = a.map(String::from));
            let new = obj(|m| m.resource_version = b.map(String::from));
            assert_eq!(
                p.evaluate(&Event::update(old, new)),
                expected,
                "{a:?}->{b:?}"
            );
        }
        all_kinds_accept_except_update(&p);
    }

    #[test]
    fn generation_truth_table() {
        let p = GenerationChanged;
        let table = [
            (Some(1), Some(1), false),
            (Some(1), Some(2), true),
            (None, Some(1), true),
            (None, None, false),
        ];
        for (a, b, expected) in table {
            // a different resource version must not matter
            let old = obj(|m| {
                m.generation = a;
                m.resource_version = Some("1".into())
            });
            let new = obj(|m| {
                m.generation = b;
                m.resource_version = Some("2".into())
            });
            assert_eq!(
                p.evaluate(&Event::update(old, new)),
                expected,
                "{a:?}->{b:?}"
            );
        }
        all_kinds_accept_except_update(&p);
    }

    fn map(pairs: &[(&str, &str)]) -> Option<std::collections::BTreeMap<String, String>> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn labels_and_annotations_truth_tables() {
        type Table = [(
            Option<std::collections::BTreeMap<String, String>>,
            Option<std::collections::BTreeMap<String, String>>,
            bool,
        ); 6];
        let table: Table = [
            (map(&[("a", "1")]), map(&[("a", "1")]), false),
            (map(&[("a", "1")]), map(&[("a", "2")]), true),
            (map(&[("a", "1")]), map(&[("a", "1"), ("b", "1")]), true),
            (map(&[("a", "1")]), None, true),
            (None, map(&[]), false),
            (None, None, false),
        ];
        for (a, b, expected) in table.clone() {
            let old = obj(|m| m.labels = a.clone());
            let new = obj(|m| {
                m.labels = b.clone();
                m.annotations = Some(Default::default())
            });
            assert_eq!(
                LabelsChanged.evaluate(&Event::update(old, new)),
                expected,
                "labels {a:?}->{b:?}"
            );
            let old = obj(|m| m.annotations = a.clone());
            let new = obj(|m| {
                m.annotations = b.clone();
                m.labels = map(&[("x", "y")])
            });
            assert_eq!(
                AnnotationsChanged.evaluate(&Event::update(old, new)),
                expected,
                "annotations {a:?}->{b:?}"
            );
        }
        all_kinds_accept_except_update(&LabelsChanged);
        all_kinds_accept_except_update(&AnnotationsChanged);
    }

    #[test]
    fn finalizers_truth_table() {
        let list = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let table = [
            (list(&["a"]), list(&["a"]), false),
            (list(&["a", "b"]), list(&["b", "a"]), false),
            (list(&["a"]), list(&["a", "b"]), true),
            (list(&["a"]), None, true),
            (None, list(&[]), false),
            (None, None, false),
        ];
        for (a, b, expected) in table {
            let old = obj(|m| m.finalizers = a.clone());
            let new = obj(|m| m.finalizers = b.clone());
            assert_eq!(
                FinalizersChanged.evaluate(&Event::update(old, new)),
                expected,
                "{a:?}->{b:?}"
            );
        }
        all_kinds_accept_except_update(&FinalizersChanged);
    }
}
