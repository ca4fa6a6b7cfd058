//! The [`Event`] type every source emits.
//!
//! Objects are shared (`Arc<K>`): one event fanned out to several controllers never clones the
//! object itself.

use std::sync::Arc;

/// Something that happened to an object of type `K`.
///
/// The variants mirror controller-runtime's `event.CreateEvent`, `UpdateEvent`, `DeleteEvent` and
/// `GenericEvent`, with two extra facts that controller-runtime hides:
/// * whether a create was found by a *list* (the initial list or a relist) rather than seen as a
///   watch event (so handlers can enqueue it with a low priority),
/// * whether a delete was *observed* or inferred after a relist (`state_unknown`).
#[derive(Debug)]
pub enum Event<K> {
    /// The object appeared.
    Create {
        /// The new object.
        object: Arc<K>,
        /// `true` when the object was found by a list of the source: its initial list at start-up,
        /// or a relist (after a `410 Gone` or a reconnect) that found an object created while the
        /// watch was down. `false` when its creation was seen as a watch event while running.
        /// Handlers enqueue list creates at low priority, so fresh changes overtake a (re)list.
        initial: bool,
    },
    /// The object changed.
    Update {
        /// The object as it was before the change (the cached copy).
        old: Arc<K>,
        /// The object after the change.
        new: Arc<K>,
    },
    /// The object went away.
    Delete {
        /// The last known state of the object.
        object: Arc<K>,
        /// `true` when the deletion was not observed but inferred (the object was missing from a
        /// relist after a disconnect), so `object` may not be its final state.
        state_unknown: bool,
    },
    /// Anything else: an external trigger, a timer, a resync.
    Generic {
        /// The object the event is about.
        object: Arc<K>,
    },
}

// A manual impl: `#[derive(Clone)]` would require `K: Clone`, but only the `Arc`s are cloned.
impl<K> Clone for Event<K> {
    fn clone(&self) -> Self {
        match self {
            Event::Create { object, initial } => Event::Create {
                object: Arc::clone(object),
                initial: *initial,
            },
            Event::Update { old, new } => Event::Update {
                old: Arc::clone(old),
                new: Arc::clone(new),
            },
            Event::Delete {
                object,
                state_unknown,
            } => Event::Delete {
                object: Arc::clone(object),
                state_unknown: *state_unknown,
            },
            Event::Generic { object } => Event::Generic {
                object: Arc::clone(object),
            },
        }
    }
}

impl<K> PartialEq for Event<K>
where
    K: PartialEq,
{
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (
                Event::Create { object, initial },
                Event::Create {
                    object: o2,
                    initial: i2,
                },
            ) => initial == i2 && object == o2,
            (Event::Update { old, new }, Event::Update { old: o2, new: n2 }) => {
                old == o2 && new == n2
            }
            (
                Event::Delete {
                    object,
                    state_unknown,
                },
                Event::Delete {
                    object: o2,
                    state_unknown: s2,
                },
            ) => state_unknown == s2 && object == o2,
            (Event::Generic { object }, Event::Generic { object: o2 }) => object == o2,
            _ => false,
        }
    }
}

/// The kind of an [`Event`], without its payload (handy for logs, metrics and per-kind tables).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    /// [`Event::Create`].
    Create,
    /// [`Event::Update`].
    Update,
    /// [`Event::Delete`].
    Delete,
    /// [`Event::Generic`].
    Generic,
}

impl EventKind {
    /// Lower-case name (`"create"`, `"update"`, `"delete"`, `"generic"`), as used in metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Create => "create",
            EventKind::Update => "update",
            EventKind::Delete => "delete",
            EventKind::Generic => "generic",
        }
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<K> Event<K> {
    /// The object the event is about; for an update, the *new* object.
    pub fn object(&self) -> &Arc<K> {
        match self {
            Event::Create { object, .. }
            | Event::Delete { object, .. }
            | Event::Generic { object } => object,
            Event::Update { new, .. } => new,
        }
    }

    /// The previous object, for updates only.
    pub fn old_object(&self) -> Option<&Arc<K>> {
        match self {
            Event::Update { old, .. } => Some(old),
            _ => None,
        }
    }

    /// Which kind of event this is.
    pub fn kind(&self) -> EventKind {
        match self {
            Event::Create { .. } => EventKind::Create,
            Event::Update { .. } => EventKind::Update,
            Event::Delete { .. } => EventKind::Delete,
            Event::Generic { .. } => EventKind::Generic,
        }
    }

    /// A create event for an object created while running (`initial: false`).
    pub fn create(object: impl Into<Arc<K>>) -> Self {
        Event::Create {
            object: object.into(),
            initial: false,
        }
    }

    /// An update event.
    pub fn update(old: impl Into<Arc<K>>, new: impl Into<Arc<K>>) -> Self {
        Event::Update {
            old: old.into(),
            new: new.into(),
        }
    }

    /// An observed delete event (`state_unknown: false`).
    pub fn delete(object: impl Into<Arc<K>>) -> Self {
        Event::Delete {
            object: object.into(),
            state_unknown: false,
        }
    }

    /// A generic event.
    pub fn generic(object: impl Into<Arc<K>>) -> Self {
        Event::Generic {
            object: object.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_is_new_for_updates_and_payload_otherwise() {
        let e = Event::update(1, 2);
        assert_eq!(**e.object(), 2);
        assert_eq!(e.old_object().map(|o| **o), Some(1));
        assert_eq!(e.kind(), EventKind::Update);
        for (e, kind) in [
            (Event::create(7), EventKind::Create),
            (Event::delete(7), EventKind::Delete),
            (Event::generic(7), EventKind::Generic),
        ] {
            assert_eq!(**e.object(), 7);
            assert!(e.old_object().is_none());
            assert_eq!(e.kind(), kind);
        }
    }

    #[test]
    fn clone_shares_the_object() {
        let e = Event::Create {
            object: Arc::new(String::from("x")),
            initial: true,
        };
        let c = e.clone();
        assert!(Arc::ptr_eq(e.object(), c.object()));
        assert_eq!(e, c);
        assert_ne!(e, Event::create(String::from("x")));
    }

    #[test]
    fn kind_names() {
        assert_eq!(EventKind::Create.to_string(), "create");
        assert_eq!(EventKind::Update.as_str(), "update");
        assert_eq!(EventKind::Delete.as_str(), "delete");
        assert_eq!(EventKind::Generic.as_str(), "generic");
    }
}
