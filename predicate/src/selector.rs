//! [`LabelSelectorPredicate`]: accept events for objects whose labels match a selector.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as MetaLabelSelector;
use kube_core::Resource;
use kube_core::{Selector, SelectorExt};

use crate::{Predicate, PredicateError};

/// Accepts events whose object's labels match a label selector.
///
/// An update passes when the old *or* the new object matches, so that an object that stops
/// matching is still seen once (controller-runtime looks at the new object only, which hides the
/// moment an object leaves the selected set).
#[derive(Debug, Clone)]
pub struct LabelSelectorPredicate {
    selector: Selector,
}

impl LabelSelectorPredicate {
    /// Parses a selector string such as `app=web,tier in (a,b),!legacy`.
    ///
    /// ```
    /// use kcr_predicate::{LabelSelectorPredicate, PredicateError};
    /// assert!(LabelSelectorPredicate::parse("app=web").is_ok());
    /// assert!(matches!(LabelSelectorPredicate::parse("app in (web"), Err(PredicateError::Selector(_))));
    /// ```
    pub fn parse(selector: &str) -> Result<Self, PredicateError> {
        Ok(Self {
            selector: kcr_core::parse_label_selector(selector)?,
        })
    }

    /// Uses an already built selector.
    pub fn new(selector: Selector) -> Self {
        Self { selector }
    }

    /// Converts a `metav1.LabelSelector` (as found in specs); rejects unknown operators.
    pub fn from_label_selector(selector: &MetaLabelSelector) -> Result<Self, PredicateError> {
        let selector =
            Selector::try_from(selector.clone()).map_err(|e| PredicateError::LabelSelector(e.0))?;
        Ok(Self { selector })
    }

    /// The selector.
    pub fn selector(&self) -> &Selector {
        &self.selector
    }

    fn matches<K: Resource>(&self, object: &K) -> bool {
        match &object.meta().labels {
            Some(labels) => self.selector.matches(labels),
            None => self.selector.matches(&Default::default()),
        }
    }
}

impl<K: Resource + Send + Sync + 'static> Predicate<K> for LabelSelectorPredicate {
    fn create(&self, object: &Arc<K>, _initial: bool) -> bool {
        self.matches(object.as_ref())
    }
    fn update(&self, old: &Arc<K>, new: &Arc<K>) -> bool {
        self.matches(old.as_ref()) || self.matches(new.as_ref())
    }
    fn delete(&self, object: &Arc<K>, _state_unknown: bool) -> bool {
        self.matches(object.as_ref())
    }
    fn generic(&self, object: &Arc<K>) -> bool {
        self.matches(object.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::obj;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    use kcr_core::Event;

    fn labelled(pairs: &[(&str, &str)]) -> k8s_openapi::api::core::v1::ConfigMap {
        obj(|m| {
            if !pairs.is_empty() {
                m.labels = Some(
                    pairs
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                )
            }
        })
    }

    #[test]
    fn truth_table_per_kind() {
        let p = LabelSelectorPredicate::parse("app=web").expect("valid");
        let yes = labelled(&[("app", "web")]);
        let no = labelled(&[("app", "db")]);
        let none = labelled(&[]);
        for (o, expected) in [(&yes, true), (&no, false), (&none, false)] {
            for e in [
                Event::create(o.clone()),
                Event::Create {
                    object: Arc::new(o.clone()),
                    initial: true,
                },
                Event::delete(o.clone()),
                Event::Delete {
                    object: Arc::new(o.clone()),
                    state_unknown: true,
                },
                Event::generic(o.clone()),
            ] {
                assert_eq!(
                    p.evaluate(&e),
                    expected,
                    "{:?} {:?}",
                    e.kind(),
                    o.metadata.labels
                );
            }
        }
        for (old, new, expected) in [
            (&yes, &yes, true),
            (&yes, &no, true),
            (&no, &yes, true),
            (&no, &no, false),
            (&none, &no, false),
        ] {
            assert_eq!(
                p.evaluate(&Event::update(old.clone(), new.clone())),
                expected
            );
        }
    }

    #[test]
    fn negative_selector_matches_unlabelled_objects() {
        let p = LabelSelectorPredicate::parse("!legacy").expect("valid");
        assert!(p.evaluate(&Event::create(labelled(&[]))));
        assert!(!p.evaluate(&Event::create(labelled(&[("legacy", "")]))));
    }

    #[test]
    fn bad_selectors_are_errors() {
        let err = LabelSelectorPredicate::parse("app in (web").expect_err("unbalanced");
        assert!(matches!(err, PredicateError::Selector(_)), "{err:?}");
        assert!(err.to_string().contains("app in (web"), "{err}");
        let bad = MetaLabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "a".into(),
                operator: "Bogus".into(),
                values: None,
            }]),
            match_labels: None,
        };
        assert!(matches!(
            LabelSelectorPredicate::from_label_selector(&bad),
            Err(PredicateError::LabelSelector(_))
        ));
    }

    #[test]
    fn from_meta_label_selector() {
        let sel = MetaLabelSelector {
            match_labels: Some([("app".to_string(), "web".to_string())].into()),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: "In".into(),
                values: Some(vec!["a".into(), "b".into()]),
            }]),
        };
        let p = LabelSelectorPredicate::from_label_selector(&sel).expect("valid");
        assert!(p.evaluate(&Event::create(labelled(&[("app", "web"), ("tier", "a")]))));
        assert!(!p.evaluate(&Event::create(labelled(&[("app", "web"), ("tier", "c")]))));
        assert!(!p.selector().selects_all());
    }
}
