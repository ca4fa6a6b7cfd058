//! Error type of kcr-predicate.

/// Errors building a predicate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PredicateError {
    /// A label selector string did not parse.
    #[error(transparent)]
    Selector(#[from] kcr_core::SelectorError),
    /// A `metav1.LabelSelector` could not be converted (for example an unknown operator).
    #[error("invalid label selector: {0}")]
    LabelSelector(String),
}
