//! Kinds chosen at run time as the `For`, `Owns` and `Watches` kinds of a controller:
//! [`Builder::for_dynamic`], [`Builder::owns_dynamic`] and [`Builder::watches_dynamic`].
//!
//! Their objects are [`DynamicObject`]s of a [`DynamicResource`] (an `ApiResource` and its
//! scope): the shared cache keys their watches by the resource, so two dynamic kinds never
//! share a store (see [`kcr_source::dynamic`]). Everything else is as for typed kinds: the
//! primary kind's objects are enqueued themselves and resynced when a source lags, a child's
//! events enqueue its controller owner of the primary kind, event filters see the objects whole,
//! and an [`ObjectReconciler`](crate::ObjectReconciler) whose `Object` is `DynamicObject`
//! is handed the cached object.
//!
//! ```no_run
//! use std::sync::Arc;
//! use kcr_controller::{Action, Context, Manager, ObjectReconciler, WatchOptions};
//! use kcr_source::DynamicResource;
//! use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
//! use kube::discovery::Scope;
//! use kube::ResourceExt;
//! use k8s_openapi::api::core::v1::ConfigMap;
//!
//! /// Reconciles gadgets, a custom resource named only in configuration.
//! struct Gadgets;
//!
//! impl ObjectReconciler for Gadgets {
//!     type Object = DynamicObject;
//!     type Error = anyhow::Error;
//!     async fn reconcile(&self, gadget: Arc<DynamicObject>, _ctx: &Context) -> anyhow::Result<Action> {
//!         tracing::info!(name = %gadget.name_any(), size = %gadget.data["spec"]["size"], "reconciling");
//!         Ok(Action::done())
//!     }
//! }
//!
//! # async fn run(mgr: &Manager) -> Result<(), Box<dyn std::error::Error>> {
//! let gvk = GroupVersionKind::gvk("example.com", "v1", "Gadget");
//! let gadgets = DynamicResource::new(ApiResource::from_gvk(&gvk), Scope::Namespaced);
//! mgr.controller()
//!     .for_dynamic(gadgets, WatchOptions::new())
//!     // ConfigMaps the gadgets own, handled as a dynamic kind too.
//!     .owns_dynamic(DynamicResource::of::<ConfigMap>(), WatchOptions::new())
//!     .complete_objects(Gadgets)?;
//! # Ok(()) }
//! ```

use kcr_handler::EventHandler;
use kcr_source::{DynamicResource, Kind, Reader, Source, WatchScope};
use kube::core::{ApiResource, DynamicObject};

use std::sync::Arc;

use super::hook::{MadeWatch, TypedMeta, WatchRole};
use super::{Builder, Probe, WatchOptions, probe_dynamic};
use crate::controller::Key;

impl<'m> Builder<'m> {
    /// A cached watch and reader of the run-time kind `resource` through the shared cache,
    /// shown to the builder's hooks as `role` (before and after it is made).
    #[allow(clippy::type_complexity)]
    fn hooked_dynamic_source(
        &mut self,
        resource: &DynamicResource,
        base: &WatchScope,
        role: WatchRole,
    ) -> Option<(Kind<DynamicObject>, Reader<DynamicObject>, Option<Probe>)> {
        let scope = self.plan_with_hooks(
            &resource.resource.kind,
            &resource.resource.group,
            role,
            true,
            base,
        )?;
        let source = self.dynamic_source(resource, &scope)?;
        let (kind, reader) = (source.0.clone(), source.1.clone());
        self.made_with_hooks(|| MadeWatch {
            kind: resource.resource.kind.clone(),
            resource: resource.resource.clone(),
            cluster_scoped: !resource.is_namespaced(),
            role,
            dynamic: true,
            base: base.clone(),
            scope,
            meta: Arc::new(TypedMeta { kind, reader }),
        })
        .then_some(source)
    }

    /// A cached watch and reader of the run-time kind `resource` through the shared cache.
    fn dynamic_source(
        &mut self,
        resource: &DynamicResource,
        scope: &WatchScope,
    ) -> Option<(Kind<DynamicObject>, Reader<DynamicObject>, Option<Probe>)> {
        let kind_name = resource.resource.kind.clone();
        self.cached_source(
            &kind_name,
            scope,
            |cache| {
                let kind = cache.kind_dynamic(resource, scope.clone())?;
                let reader = cache.reader_dynamic(resource, scope.clone())?;
                Ok((kind, reader))
            },
            |client| probe_dynamic(client, resource.clone(), scope),
        )
    }

    /// The controller's primary kind, chosen at run time: [`for_kind`](Self::for_kind) for the
    /// [`DynamicObject`]s of `resource`. Its objects are enqueued themselves, resynced when a
    /// source lags, and handed to an [`ObjectReconciler`](crate::ObjectReconciler) whose
    /// `Object` is `DynamicObject`; its scope decides whether owners' requests carry a
    /// namespace.
    pub fn for_dynamic(
        self,
        resource: DynamicResource,
        options: WatchOptions<DynamicObject>,
    ) -> Self {
        let WatchOptions { predicates, scope } = options;
        self.set_primary(
            resource.resource.kind.clone(),
            resource.resource.clone(),
            !resource.is_namespaced(),
            |builder| builder.hooked_dynamic_source(&resource, &scope, WatchRole::Primary),
            predicates,
        )
    }

    /// A child kind chosen at run time: [`owns`](Self::owns) for the [`DynamicObject`]s of
    /// `resource`, whose events enqueue their controller owner of the primary kind (typed or
    /// dynamic).
    pub fn owns_dynamic(
        mut self,
        resource: DynamicResource,
        options: WatchOptions<DynamicObject>,
    ) -> Self {
        let source = self.hooked_dynamic_source(&resource, &options.scope, WatchRole::Owned);
        self.add_owned(
            resource.resource.kind.clone(),
            resource.resource,
            source,
            options.predicates,
        )
    }
}

impl<'m, Q: Key> Builder<'m, Q> {
    /// [`watches`](Self::watches) for a source of [`DynamicObject`]s of `resource` (for
    /// example [`Cache::kind_dynamic`](kcr_source::Cache::kind_dynamic)): `resource` names the
    /// kind in descriptions and gives event filters the objects' `apiVersion` and `kind`.
    pub fn watches_dynamic<S, H>(
        mut self,
        resource: &ApiResource,
        source: S,
        handler: H,
        options: WatchOptions<DynamicObject>,
    ) -> Self
    where
        S: Source<DynamicObject>,
        H: EventHandler<DynamicObject, Q>,
    {
        self.push_watch(
            resource.clone(),
            source,
            Box::new(move |_| Ok(handler)),
            options.predicates,
            None,
            None,
        );
        self
    }
}
