//! [`PerKind`]: one optional closure per event kind, the storage of the `Funcs` types of
//! kcr-predicate (closures that accept or reject) and kcr-handler (closures that enqueue).

use std::fmt;

/// One optional boxed closure per event kind. The four closure types are the type parameters,
/// usually `dyn Fn(..) + Send + Sync` types: `C` for creates, `U` for updates, `D` for deletes,
/// `G` for generic events. Starts empty ([`Default`]); `Debug` shows which ones are set.
///
/// ```
/// use std::sync::Arc;
/// use kcr_core::PerKind;
///
/// type OnCreate = dyn Fn(&Arc<String>, bool) -> bool + Send + Sync;
/// type OnUpdate = dyn Fn(&Arc<String>, &Arc<String>) -> bool + Send + Sync;
/// type OnGeneric = dyn Fn(&Arc<String>) -> bool + Send + Sync;
///
/// let mut fns = PerKind::<OnCreate, OnUpdate, OnCreate, OnGeneric>::default();
/// fns.create = Some(Box::new(|_object, initial| !initial));
/// assert!(fns.create.as_ref().is_some_and(|f| f(&Arc::new("a".into()), false)));
/// assert!(fns.update.is_none());
/// assert_eq!(
///     format!("{fns:?}"),
///     "PerKind { create: true, update: false, delete: false, generic: false }"
/// );
/// ```
pub struct PerKind<C: ?Sized, U: ?Sized, D: ?Sized, G: ?Sized> {
    /// The closure for creates.
    pub create: Option<Box<C>>,
    /// The closure for updates.
    pub update: Option<Box<U>>,
    /// The closure for deletes.
    pub delete: Option<Box<D>>,
    /// The closure for generic events.
    pub generic: Option<Box<G>>,
}

impl<C: ?Sized, U: ?Sized, D: ?Sized, G: ?Sized> Default for PerKind<C, U, D, G> {
    fn default() -> Self {
        Self {
            create: None,
            update: None,
            delete: None,
            generic: None,
        }
    }
}

impl<C: ?Sized, U: ?Sized, D: ?Sized, G: ?Sized> fmt::Debug for PerKind<C, U, D, G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PerKind")
            .field("create", &self.create.is_some())
            .field("update", &self.update.is_some())
            .field("delete", &self.delete.is_some())
            .field("generic", &self.generic.is_some())
            .finish()
    }
}

/// Implements `Default` (no closure set) and `Debug` (`Name(PerKind { .. })`) for a type
/// `Name<K>` whose one field `fns` is a [`PerKind`]: the shape of the `Funcs` types of
/// kcr-predicate and kcr-handler.
#[macro_export]
macro_rules! per_kind_wrapper_impls {
    ($name:ident $(, $param:ident)*) => {
        impl<K $(, $param)*> ::core::default::Default for $name<K $(, $param)*> {
            fn default() -> Self {
                Self {
                    fns: $crate::PerKind::default(),
                }
            }
        }

        impl<K $(, $param)*> ::core::fmt::Debug for $name<K $(, $param)*> {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.debug_tuple(::core::stringify!($name))
                    .field(&self.fns)
                    .finish()
            }
        }
    };
}
