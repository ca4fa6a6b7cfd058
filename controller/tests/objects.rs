//! The `objects` helpers against an API server (either envtest backend): create-or-update,
//! create-or-patch, server-side apply and the finalizer, with their unhappy paths.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kcr_controller::Action;
use kcr_controller::objects::{
    Applier, Conflicts, FinalizerError, FinalizerEvent, ObjectError, OperationResult,
    create_or_patch, create_or_update, finalizer,
};
use kcr_envtest::TestNamespace;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams};
use kube::{CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// A custom resource with a status subresource.
#[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema, Default)]
#[kube(
    group = "objects.kcr.io",
    version = "v1",
    kind = "Gizmo",
    namespaced,
    status = "GizmoStatus"
)]
pub struct GizmoSpec {
    /// Anything.
    pub size: i32,
}

/// The Gizmo's status.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, Default, PartialEq)]
pub struct GizmoStatus {
    /// Anything.
    pub seen: i32,
}

fn named_configmap(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn set(cm: &mut ConfigMap, key: &str, value: &str) {
    cm.data
        .get_or_insert_with(BTreeMap::new)
        .insert(key.into(), value.into());
}

#[tokio::test]
async fn create_or_update_reports_created_updated_unchanged_and_refuses_bad_mutations() {
    let ns = TestNamespace::new("cou").await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let ok = Ok::<(), std::convert::Infallible>;

    let mut cm = named_configmap("cou");
    let r = create_or_update(&api, &mut cm, |cm| {
        set(cm, "a", "1");
        ok(())
    })
    .await
    .unwrap();
    assert_eq!(r, OperationResult::Created);
    let created_rv = cm.resource_version().unwrap();

    // The same desired state again: one read, no write.
    let mut again = named_configmap("cou");
    let r = create_or_update(&api, &mut again, |cm| {
        set(cm, "a", "1");
        ok(())
    })
    .await
    .unwrap();
    assert_eq!(r, OperationResult::Unchanged);
    assert_eq!(again.resource_version().unwrap(), created_rv);

    let mut changed = named_configmap("cou");
    let r = create_or_update(&api, &mut changed, |cm| {
        set(cm, "a", "2");
        ok(())
    })
    .await
    .unwrap();
    assert_eq!(r, OperationResult::Updated);
    assert_ne!(changed.resource_version().unwrap(), created_rv);
    assert_eq!(api.get("cou").await.unwrap().data.unwrap()["a"], "2");

    // A mutate error writes nothing.
    let mut failing = named_configmap("cou");
    let err = create_or_update(&api, &mut failing, |cm| {
        set(cm, "a", "3");
        Err(std::io::Error::other("desired state unknown"))
    })
    .await
    .unwrap_err();
    assert!(matches!(err, ObjectError::Mutate { .. }), "{err}");
    assert!(err.to_string().contains("desired state unknown"), "{err}");
    assert_eq!(api.get("cou").await.unwrap().data.unwrap()["a"], "2");

    // Renaming in mutate is refused, and nothing is created under the new name.
    let mut renamed = named_configmap("cou");
    let err = create_or_update(&api, &mut renamed, |cm| {
        cm.metadata.name = Some("other".into());
        ok(())
    })
    .await
    .unwrap_err();
    assert!(matches!(err, ObjectError::KeyChanged { .. }), "{err}");
    assert!(api.get_opt("other").await.unwrap().is_none());

    // A stale resourceVersion (a concurrent writer's) is a 409 the caller can see.
    let mut stale = named_configmap("cou");
    let err = create_or_update(&api, &mut stale, |cm| {
        cm.metadata.resource_version = Some(created_rv.clone());
        set(cm, "a", "4");
        ok(())
    })
    .await
    .unwrap_err();
    assert!(err.is_conflict(), "{err}");
    assert_eq!(api.get("cou").await.unwrap().data.unwrap()["a"], "2");

    // No name: a clear error before any request.
    let err = create_or_update(&api, &mut ConfigMap::default(), |_| ok(()))
        .await
        .unwrap_err();
    assert!(matches!(err, ObjectError::NoName { ref kind } if kind == "ConfigMap"));
}

#[tokio::test]
async fn create_or_patch_patches_spec_and_status_separately_and_keeps_other_writers_fields() {
    let ns = TestNamespace::new("cop").await.unwrap();
    ns.install_crd::<Gizmo>().await.unwrap();
    let api: Api<Gizmo> = Api::default_namespaced(ns.client());
    let ok = Ok::<(), std::convert::Infallible>;
    let fresh = || Gizmo::new("g", GizmoSpec::default());

    let r = create_or_patch(&api, &mut fresh(), |g| {
        g.spec.size = 1;
        ok(())
    })
    .await
    .unwrap();
    assert_eq!(r, OperationResult::Created);

    // Another writer adds a label: a patch of other fields keeps it.
    api.patch(
        "g",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"owner": "someone"}}})),
    )
    .await
    .unwrap();

    let mut g = fresh();
    let r = create_or_patch(&api, &mut g, |g| {
        g.spec.size = 2;
        g.status = Some(GizmoStatus { seen: 2 });
        ok(())
    })
    .await
    .unwrap();
    assert_eq!(r, OperationResult::UpdatedStatus);
    assert_eq!(g.status, Some(GizmoStatus { seen: 2 }));

    let mut g = fresh();
    let r = create_or_patch(&api, &mut g, |g| {
        g.status = Some(GizmoStatus { seen: 3 });
        ok(())
    })
    .await
    .unwrap();
    assert_eq!(r, OperationResult::UpdatedStatusOnly);

    let mut g = fresh();
    let r = create_or_patch(&api, &mut g, |g| {
        g.spec.size = 5;
        ok(())
    })
    .await
    .unwrap();
    assert_eq!(r, OperationResult::Updated);

    let mut g = fresh();
    let r = create_or_patch(&api, &mut g, |g| {
        g.spec.size = 5;
        ok(())
    })
    .await
    .unwrap();
    assert_eq!(r, OperationResult::Unchanged);

    let stored = api.get("g").await.unwrap();
    assert_eq!(stored.spec.size, 5);
    assert_eq!(stored.status, Some(GizmoStatus { seen: 3 }));
    assert_eq!(stored.labels()["owner"], "someone");
}

#[tokio::test]
async fn apply_conflicts_fail_or_force_as_chosen_and_omission_removes() {
    let ns = TestNamespace::new("apply").await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let a = Applier::new("manager-a").unwrap();
    let b = Applier::new("manager-b").unwrap();
    let desired = |pairs: &[(&str, &str)]| {
        let mut cm = named_configmap("applied");
        for (k, v) in pairs {
            set(&mut cm, k, v);
        }
        cm
    };
    a.apply(&api, &desired(&[("x", "1"), ("y", "1")]), Conflicts::Fail)
        .await
        .unwrap();

    // B wants x with another value: refused when told to fail, with who owns what.
    let err = b
        .apply(&api, &desired(&[("x", "2")]), Conflicts::Fail)
        .await
        .unwrap_err();
    match &err {
        ObjectError::ApplyConflict {
            managers,
            fields,
            field_manager,
            ..
        } => {
            assert_eq!(managers, &["manager-a".to_string()]);
            assert_eq!(fields, &[".data.x".to_string()]);
            assert_eq!(field_manager, "manager-b");
        }
        other => panic!("expected a conflict, got {other}"),
    }
    assert!(err.is_conflict());
    assert_eq!(api.get("applied").await.unwrap().data.unwrap()["x"], "1");

    // Forced: B takes x over.
    let cm = b
        .apply(&api, &desired(&[("x", "2")]), Conflicts::Force)
        .await
        .unwrap();
    assert_eq!(cm.data.unwrap()["x"], "2");

    // A stops sending y: the server removes it (A owned it alone); x is B's now and stays.
    a.apply(&api, &desired(&[]), Conflicts::Fail).await.unwrap();
    let data = api.get("applied").await.unwrap().data.unwrap();
    assert_eq!(data.get("y"), None);
    assert_eq!(data["x"], "2");

    assert!(matches!(
        Applier::new(""),
        Err(ObjectError::InvalidFieldManager { .. })
    ));
    assert!(Applier::new("m".repeat(129)).is_err());
    assert!(Applier::new("m".repeat(128)).is_ok());
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Failed(&'static str);

const FIN: &str = "objects.kcr.io/cleanup";

#[tokio::test]
async fn finalizer_is_added_before_apply_kept_on_failed_cleanup_and_removed_after_cleanup() {
    let ns = TestNamespace::new("finalizer").await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let created = api
        .create(&Default::default(), &named_configmap("fin"))
        .await
        .unwrap();

    // Apply sees the object with the finalizer already written.
    let action = finalizer(&api, FIN, Arc::new(created), |event| async move {
        match event {
            FinalizerEvent::Apply(cm) => {
                assert!(cm.finalizers().iter().any(|f| f == FIN));
                Ok(Action::requeue_after(std::time::Duration::from_secs(7)))
            }
            FinalizerEvent::Cleanup(_) => Err(Failed("cleanup on a live object")),
        }
    })
    .await
    .unwrap();
    assert_eq!(
        action,
        Action::requeue_after(std::time::Duration::from_secs(7))
    );
    assert_eq!(api.get("fin").await.unwrap().finalizers(), [FIN]);

    api.delete("fin", &DeleteParams::default()).await.unwrap();
    let deleting = Arc::new(api.get("fin").await.unwrap());
    assert!(deleting.metadata.deletion_timestamp.is_some());

    // A failed cleanup keeps the finalizer, so the object stays.
    let err = finalizer(&api, FIN, Arc::clone(&deleting), |event| async move {
        match event {
            FinalizerEvent::Cleanup(_) => Err(Failed("bucket still in use")),
            FinalizerEvent::Apply(_) => Ok(Action::done()),
        }
    })
    .await
    .unwrap_err();
    assert!(matches!(
        err,
        FinalizerError::Cleanup(Failed("bucket still in use"))
    ));
    assert_eq!(api.get("fin").await.unwrap().finalizers(), [FIN]);

    // A successful cleanup removes it, and the API server deletes the object.
    let action = finalizer(&api, FIN, Arc::clone(&deleting), |event| async move {
        match event {
            FinalizerEvent::Cleanup(_) => Ok(Action::done()),
            FinalizerEvent::Apply(_) => Err(Failed("apply on a deleting object")),
        }
    })
    .await
    .unwrap();
    assert_eq!(action, Action::done());
    kcr_envtest::eventually(
        "the object deleted",
        std::time::Duration::from_secs(30),
        || async { api.get_opt("fin").await.unwrap().is_none() },
    )
    .await;

    // A stale cached copy of the object, already gone: cleanup runs again (it must be
    // idempotent: the helper cannot know without a read), and removing the finalizer of an
    // object that no longer exists is not an error.
    let cleaned = std::sync::atomic::AtomicBool::new(false);
    let cleaned_ref = &cleaned;
    finalizer(&api, FIN, deleting, |event| async move {
        cleaned_ref.store(
            matches!(event, FinalizerEvent::Cleanup(_)),
            std::sync::atomic::Ordering::SeqCst,
        );
        Ok::<_, Failed>(Action::done())
    })
    .await
    .unwrap();
    assert!(cleaned.load(std::sync::atomic::Ordering::SeqCst));

    // An invalid finalizer name is refused before any request.
    let err = finalizer(
        &api,
        "not/a/name",
        Arc::new(named_configmap("x")),
        |_| async { Ok::<_, Failed>(Action::done()) },
    )
    .await
    .unwrap_err();
    assert!(matches!(
        err,
        FinalizerError::Finalizer(ObjectError::InvalidFinalizer { .. })
    ));
}

#[tokio::test]
async fn a_finalizer_closure_may_fail_with_anyhow() {
    let ns = TestNamespace::new("finalizer-anyhow").await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let created = api
        .create(&Default::default(), &named_configmap("fin"))
        .await
        .unwrap();
    let err = finalizer(&api, FIN, Arc::new(created), |event| async move {
        match event {
            FinalizerEvent::Apply(cm) => Err(anyhow::anyhow!(
                "cannot reach the bucket of {}",
                cm.name_any()
            )),
            FinalizerEvent::Cleanup(_) => Ok(Action::done()),
        }
    })
    .await
    .unwrap_err();
    assert_eq!(err.to_string(), "apply: cannot reach the bucket of fin");
    let FinalizerError::Apply(inner) = &err else {
        panic!("{err:?}");
    };
    assert_eq!(inner.to_string(), "cannot reach the bucket of fin");
    // A reconciler returning anyhow::Error takes it with `?`.
    let as_anyhow: anyhow::Error = err.into();
    assert!(as_anyhow.to_string().contains("bucket"));
    // The finalizer was added before the closure ran.
    assert_eq!(api.get("fin").await.unwrap().finalizers(), [FIN]);
}

#[tokio::test]
async fn finalizer_patches_never_overwrite_a_concurrent_edit() {
    let ns = TestNamespace::new("finalizer-race").await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let stale = api
        .create(&Default::default(), &named_configmap("race"))
        .await
        .unwrap();
    // Someone else adds a finalizer after our cache saw the object without any.
    api.patch(
        "race",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": ["other.io/keep"]}})),
    )
    .await
    .unwrap();
    finalizer(&api, FIN, Arc::new(stale), |_| async {
        Ok::<_, Failed>(Action::done())
    })
    .await
    .unwrap();
    assert_eq!(
        api.get("race").await.unwrap().finalizers(),
        ["other.io/keep", FIN]
    );

    // Deleting; our cached copy has [other, ours]; the other one is removed meanwhile, so our
    // entry moved from index 1 to 0 (a blind `remove /metadata/finalizers/1` would now fail or
    // hit another entry): the guarded removal re-reads and removes the right one.
    api.delete("race", &DeleteParams::default()).await.unwrap();
    let stale = api.get("race").await.unwrap();
    api.patch(
        "race",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": [FIN]}})),
    )
    .await
    .unwrap();
    finalizer(&api, FIN, Arc::new(stale), |_| async {
        Ok::<_, Failed>(Action::done())
    })
    .await
    .unwrap();
    kcr_envtest::eventually(
        "the object deleted",
        std::time::Duration::from_secs(30),
        || async { api.get_opt("race").await.unwrap().is_none() },
    )
    .await;
}

/// Who manages fields of the stored object.
async fn managers(api: &Api<ConfigMap>, name: &str) -> std::collections::BTreeSet<String> {
    api.get(name)
        .await
        .unwrap()
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect()
}

#[tokio::test]
async fn through_the_client_writes_carry_its_field_owner_and_a_finalizer_removed_midflight_is_fine()
{
    let ns = TestNamespace::new("objects-client").await.unwrap();
    let kube = ns.client();
    let api: Api<ConfigMap> = Api::namespaced(kube.clone(), ns.namespace());
    let client = kcr_controller::Client::new(
        kube.clone(),
        kcr_source::Cache::new(kube),
        kcr_controller::ClientOptions::default().field_owner("objects-owner"),
    );
    let mut cm = named_configmap("owned");
    cm.metadata.namespace = Some(ns.namespace().into());
    let result = create_or_patch(&client, &mut cm, |cm| {
        set(cm, "a", "1");
        Ok::<_, Failed>(())
    })
    .await
    .unwrap();
    assert_eq!(result, OperationResult::Created);
    let result = create_or_update(&client, &mut cm, |cm| {
        set(cm, "b", "2");
        Ok::<_, Failed>(())
    })
    .await
    .unwrap();
    assert_eq!(result, OperationResult::Updated);
    assert_eq!(
        managers(&api, "owned").await,
        ["objects-owner".to_string()].into()
    );

    // Through a kube Api, the default field owner.
    let mut other = named_configmap("by-api");
    create_or_patch(&api, &mut other, |cm| {
        set(cm, "a", "1");
        Ok::<_, Failed>(())
    })
    .await
    .unwrap();
    assert_eq!(
        managers(&api, "by-api").await,
        ["kcr-controller".to_string()].into()
    );

    // A namespaced object without a namespace cannot be addressed through an unscoped client.
    let err = create_or_patch(&client, &mut named_configmap("nowhere"), |_| {
        Ok::<_, Failed>(())
    })
    .await
    .unwrap_err();
    assert!(matches!(err, ObjectError::Client(_)), "{err}");

    // The finalizer, through the client.
    let live = api.get("owned").await.unwrap();
    finalizer(&client, FIN, Arc::new(live), |_| async {
        Ok::<_, Failed>(Action::done())
    })
    .await
    .unwrap();
    assert_eq!(api.get("owned").await.unwrap().finalizers(), [FIN]);

    // Deleting; while our cleanup runs, someone else removes our finalizer (the object goes
    // away): the removal finds nothing to remove and the reconcile succeeds.
    api.delete("owned", &DeleteParams::default()).await.unwrap();
    let deleting = api.get("owned").await.unwrap();
    let meddler = api.clone();
    let action = finalizer(&client, FIN, Arc::new(deleting), |event| async move {
        assert!(matches!(event, FinalizerEvent::Cleanup(_)));
        meddler
            .patch(
                "owned",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await
            .unwrap();
        Ok::<_, Failed>(Action::done())
    })
    .await
    .unwrap();
    assert_eq!(action, Action::done());
    kcr_envtest::eventually(
        "the object deleted",
        std::time::Duration::from_secs(30),
        || async { api.get_opt("owned").await.unwrap().is_none() },
    )
    .await;
}

#[tokio::test]
async fn several_named_finalizers_are_one_guarded_list() {
    use kcr_controller::objects::{Finalized, Finalizers, FinalizersError};
    use std::sync::atomic::{AtomicBool, Ordering};

    let ns = TestNamespace::new("finalizers").await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.namespace());
    assert!(
        Finalizers::<ConfigMap>::new()
            .register("not a name!", |_| async { Ok::<_, Failed>(()) })
            .is_err()
    );
    let dns_ok = Arc::new(AtomicBool::new(false));
    let finalizers = Finalizers::<ConfigMap>::new()
        .register("kcr.io/bucket", |_| async { Ok::<_, Failed>(()) })
        .unwrap()
        .register("kcr.io/dns", {
            let dns_ok = Arc::clone(&dns_ok);
            move |_| {
                let ok = dns_ok.load(Ordering::SeqCst);
                async move { if ok { Ok(()) } else { Err(Failed("dns busy")) } }
            }
        })
        .unwrap();
    let err = Finalizers::<ConfigMap>::new()
        .register("kcr.io/x", |_| async { Ok::<_, Failed>(()) })
        .unwrap()
        .register("kcr.io/x", |_| async { Ok::<_, Failed>(()) })
        .unwrap_err();
    assert!(err.to_string().contains("twice"), "{err}");

    // Live: the missing names are added after someone else's, which stays.
    let mut cm = named_configmap("multi");
    cm.metadata.finalizers = Some(vec!["other.io/keep".into()]);
    let created = api.create(&Default::default(), &cm).await.unwrap();
    match finalizers.finalize(&api, Arc::new(created)).await.unwrap() {
        Finalized::Live { added, .. } => assert_eq!(added, ["kcr.io/bucket", "kcr.io/dns"]),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        api.get("multi").await.unwrap().finalizers(),
        ["other.io/keep", "kcr.io/bucket", "kcr.io/dns"]
    );
    let live = api.get("multi").await.unwrap();
    match finalizers.finalize(&api, Arc::new(live)).await.unwrap() {
        Finalized::Live { added, .. } => assert!(added.is_empty()),
        other => panic!("{other:?}"),
    }

    // Deleting: bucket's cleanup succeeds and its name goes; dns fails and its name stays.
    api.delete("multi", &DeleteParams::default()).await.unwrap();
    let deleting = api.get("multi").await.unwrap();
    match finalizers.finalize(&api, Arc::new(deleting)).await {
        Err(FinalizersError::Cleanup { failed, removed }) => {
            assert_eq!(removed, ["kcr.io/bucket"]);
            assert_eq!(failed.len(), 1);
            assert_eq!(failed[0].0, "kcr.io/dns");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        api.get("multi").await.unwrap().finalizers(),
        ["other.io/keep", "kcr.io/dns"]
    );
    // Retried once dns can go: only its name is removed; the foreign one keeps the object.
    dns_ok.store(true, Ordering::SeqCst);
    let deleting = api.get("multi").await.unwrap();
    match finalizers.finalize(&api, Arc::new(deleting)).await.unwrap() {
        Finalized::Deleting { removed } => assert_eq!(removed, ["kcr.io/dns"]),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        api.get("multi").await.unwrap().finalizers(),
        ["other.io/keep"]
    );
    api.patch(
        "multi",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    kcr_envtest::eventually(
        "the object deleted",
        std::time::Duration::from_secs(30),
        || async { api.get_opt("multi").await.unwrap().is_none() },
    )
    .await;
}
