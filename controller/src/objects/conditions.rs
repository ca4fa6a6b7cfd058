//! Status conditions, as apimachinery's `meta.SetStatusCondition` and its friends keep them:
//! one condition per type in a `Vec<Condition>` (`metav1.Condition`), whose
//! `lastTransitionTime` moves only when its status changes.
//!
//! ```
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
//! use kcr_controller::objects::conditions::{
//!     find_condition, is_condition_true, new_condition, set_condition,
//! };
//!
//! let mut conditions: Vec<Condition> = Vec::new();
//! assert!(set_condition(&mut conditions, new_condition("Ready", "False", "Creating", "creating the Deployment").observed_generation(Some(1))));
//! let created = find_condition(&conditions, "Ready").unwrap().last_transition_time.clone();
//!
//! // Same status, new reason: the condition changes, its transition time does not.
//! assert!(set_condition(&mut conditions, new_condition("Ready", "False", "Scaling", "1 of 3 replicas")));
//! assert_eq!(find_condition(&conditions, "Ready").unwrap().last_transition_time, created);
//! // Nothing new: no change to write.
//! assert!(!set_condition(&mut conditions, new_condition("Ready", "False", "Scaling", "1 of 3 replicas")));
//!
//! assert!(set_condition(&mut conditions, new_condition("Ready", "True", "Available", "3 of 3 replicas")));
//! assert!(is_condition_true(&conditions, "Ready"));
//! ```

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// `True`.
pub const TRUE: &str = "True";
/// `False`.
pub const FALSE: &str = "False";
/// `Unknown`.
pub const UNKNOWN: &str = "Unknown";

/// A condition of `type_` with `status` (`True`, `False` or `Unknown`), `reason` (CamelCase)
/// and `message`, its transition time now; [`NewCondition::observed_generation`] sets the
/// generation it describes. Pass it to [`set_condition`].
pub fn new_condition(
    type_: impl Into<String>,
    status: impl Into<String>,
    reason: impl Into<String>,
    message: impl Into<String>,
) -> NewCondition {
    NewCondition(Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: None,
        last_transition_time: now(),
    })
}

/// A condition to set, from [`new_condition`].
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct NewCondition(pub Condition);

impl NewCondition {
    /// Sets the generation of the object the condition describes
    /// (`metadata.generation` when the reconcile read it).
    pub fn observed_generation(mut self, generation: Option<i64>) -> Self {
        self.0.observed_generation = generation;
        self
    }

    /// The condition.
    pub fn into_inner(self) -> Condition {
        self.0
    }
}

impl From<NewCondition> for Condition {
    fn from(c: NewCondition) -> Condition {
        c.0
    }
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Sets `condition` in `conditions`, as `meta.SetStatusCondition`: a condition of a new type
/// is added (its transition time kept as given); for an existing type, the transition time
/// moves (to the given one) only when the status changes, and reason, message and observed
/// generation are updated. Returns whether anything changed, that is whether the status needs
/// writing.
pub fn set_condition(conditions: &mut Vec<Condition>, condition: impl Into<Condition>) -> bool {
    let condition = condition.into();
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == condition.type_) else {
        conditions.push(condition);
        return true;
    };
    let mut changed = false;
    if existing.status != condition.status {
        existing.status = condition.status;
        existing.last_transition_time = condition.last_transition_time;
        changed = true;
    }
    if existing.reason != condition.reason {
        existing.reason = condition.reason;
        changed = true;
    }
    if existing.message != condition.message {
        existing.message = condition.message;
        changed = true;
    }
    if existing.observed_generation != condition.observed_generation {
        existing.observed_generation = condition.observed_generation;
        changed = true;
    }
    changed
}

/// The condition of `type_`, if there is one.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Removes the condition of `type_`; returns whether there was one.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// Whether the condition of `type_` is `True`.
pub fn is_condition_true(conditions: &[Condition], type_: &str) -> bool {
    is_condition(conditions, type_, TRUE)
}

/// Whether the condition of `type_` is `False`.
pub fn is_condition_false(conditions: &[Condition], type_: &str) -> bool {
    is_condition(conditions, type_, FALSE)
}

/// Whether the condition of `type_` has `status`.
pub fn is_condition(conditions: &[Condition], type_: &str, status: &str) -> bool {
    find_condition(conditions, type_).is_some_and(|c| c.status == status)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(seconds).unwrap())
    }

    fn cond(type_: &str, status: &str, reason: &str, t: i64) -> Condition {
        let mut c = new_condition(type_, status, reason, "m").into_inner();
        c.last_transition_time = at(t);
        c
    }

    #[test]
    fn the_transition_time_moves_with_the_status_only() {
        let mut conditions = Vec::new();
        assert!(set_condition(
            &mut conditions,
            cond("Ready", FALSE, "A", 10)
        ));
        assert!(set_condition(
            &mut conditions,
            cond("Ready", FALSE, "B", 20)
        ));
        assert_eq!(conditions[0].last_transition_time, at(10), "same status");
        assert_eq!(conditions[0].reason, "B");
        assert!(set_condition(&mut conditions, cond("Ready", TRUE, "B", 30)));
        assert_eq!(
            conditions[0].last_transition_time,
            at(30),
            "the status changed"
        );
        assert!(!set_condition(
            &mut conditions,
            cond("Ready", TRUE, "B", 40)
        ));
        assert_eq!(
            conditions[0].last_transition_time,
            at(30),
            "nothing changed"
        );
        assert_eq!(conditions.len(), 1, "one condition per type");
    }

    #[test]
    fn types_are_kept_apart_and_removed() {
        let mut conditions = Vec::new();
        set_condition(&mut conditions, cond("Ready", TRUE, "A", 1));
        set_condition(&mut conditions, cond("Degraded", FALSE, "A", 1));
        assert!(is_condition_true(&conditions, "Ready"));
        assert!(is_condition_false(&conditions, "Degraded"));
        assert!(!is_condition_true(&conditions, "Missing"));
        assert!(!is_condition_false(&conditions, "Missing"));
        assert!(remove_condition(&mut conditions, "Ready"));
        assert!(!remove_condition(&mut conditions, "Ready"));
        assert!(find_condition(&conditions, "Ready").is_none());
        assert_eq!(conditions.len(), 1);
    }

    #[test]
    fn a_new_observed_generation_is_a_change() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            new_condition("Ready", TRUE, "A", "m").observed_generation(Some(1)),
        );
        assert!(set_condition(
            &mut conditions,
            new_condition("Ready", TRUE, "A", "m").observed_generation(Some(2))
        ));
        assert_eq!(conditions[0].observed_generation, Some(2));
    }
}
