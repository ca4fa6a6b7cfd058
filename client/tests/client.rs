//! The client against kcr-envtest, on either backend (`KCR_ENVTEST_BACKEND=real`): cached reads
//! (one watch per kind, shared; label, namespace and index lookups), the typed errors of reads
//! that cannot be answered, and writes with their field owner, dry-run, field validation,
//! conflicts, subresources and namespace scoping.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcr_client::{Client, ClientError, ClientOptions, FieldValidation, ListOptions};
use kcr_envtest::{Backend, TestNamespace};
use kcr_source::{Cache, DynamicResource, WatchScope};
use kube::api::{DynamicObject, ListParams, ObjectMeta, Patch};
use kube::{CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema, Default)]
#[kube(
    group = "client.kcr.io",
    version = "v1",
    kind = "Gadget",
    namespaced,
    status = "GadgetStatus"
)]
struct GadgetSpec {
    size: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, Default)]
struct GadgetStatus {
    ready: bool,
}

/// A kind no API server serves: its CRD is never installed.
#[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema, Default)]
#[kube(group = "absent.kcr.io", version = "v1", kind = "Phantom", namespaced)]
struct PhantomSpec {
    x: u32,
}

fn client_for(test: &TestNamespace, options: ClientOptions) -> Client {
    let kube = test.client();
    Client::new(kube.clone(), Cache::new(kube), options)
}

fn config_map(name: &str, labels: &[(&str, &str)], data: &[(&str, &str)]) -> ConfigMap {
    let map = |pairs: &[(&str, &str)]| {
        (!pairs.is_empty()).then(|| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        })
    };
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: map(labels),
            ..Default::default()
        },
        data: map(data),
        ..Default::default()
    }
}

/// Polls `check` until it returns `Some`, failing after 20 s (the cache follows writes through
/// the watch: there is no other event to wait on).
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Who manages fields of the stored object (the cache drops `managedFields`: read uncached).
async fn managers(client: &Client, name: &str, ns: &str) -> Vec<String> {
    let stored: ConfigMap = client
        .api_reader()
        .get(name, Some(ns))
        .await
        .unwrap()
        .expect("stored");
    stored
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect()
}

#[tokio::test]
async fn cached_reads_share_one_watch_and_follow_writes() {
    let test = TestNamespace::new("client-reads").await.unwrap();
    let ns = test.namespace();
    let client = client_for(&test, ClientOptions::default()).in_namespace(ns);

    for (name, app) in [("a", "web"), ("b", "web"), ("c", "db")] {
        client
            .create(&config_map(name, &[("app", app)], &[("node", name)]))
            .await
            .unwrap();
    }
    // The first read starts the watch and waits for its first list.
    let web = eventually("both web ConfigMaps in the cache", || async {
        let web = client
            .list::<ConfigMap>(&ListOptions::new().labels("app=web"))
            .await
            .unwrap();
        (web.len() == 2).then_some(web)
    })
    .await;
    assert_eq!(
        web.iter().map(|c| c.name_any()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert!(client.get::<ConfigMap>("c", None).await.unwrap().is_some());
    assert!(client.get::<ConfigMap>("zz", None).await.unwrap().is_none());
    // Reads of every kind so far: ConfigMaps only, through one watch.
    assert_eq!(client.cache().informer_count(), 1);

    // A patch shows in the cache; the Arc is the cache's copy.
    client
        .patch::<ConfigMap, _>("c", None, &Patch::Merge(json!({"data": {"node": "moved"}})))
        .await
        .unwrap();
    eventually("the patch in the cache", || async {
        let c = client.get::<ConfigMap>("c", None).await.unwrap()?;
        (c.data.as_ref()?.get("node")? == "moved").then_some(())
    })
    .await;
    let again = client.get::<ConfigMap>("c", None).await.unwrap().unwrap();
    let reader = client.reader::<ConfigMap>().await.unwrap();
    assert!(Arc::ptr_eq(
        &again,
        &reader.get("c", Some(ns)).unwrap().unwrap()
    ));

    // A bad selector is a typed error, not an empty list.
    let err = client
        .list::<ConfigMap>(&ListOptions::new().labels("app in (web"))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Selector(_)), "{err}");
}

#[tokio::test]
async fn index_lookups_narrow_lists_and_an_unknown_index_is_named() {
    let test = TestNamespace::new("client-index").await.unwrap();
    let ns = test.namespace();
    let client = client_for(&test, ClientOptions::default());
    client
        .index_field::<ConfigMap>("data.node", |cm| {
            cm.data
                .iter()
                .filter_map(|d| d.get("node").cloned())
                .collect()
        })
        .unwrap();
    let err = client
        .index_field::<ConfigMap>("data.node", |_| Vec::new())
        .unwrap_err();
    assert!(matches!(err, ClientError::Index(_)), "{err}");

    let scoped = client.in_namespace(ns);
    for (name, node, tier) in [("x", "n1", "a"), ("y", "n1", "b"), ("z", "n2", "a")] {
        scoped
            .create(&config_map(name, &[("tier", tier)], &[("node", node)]))
            .await
            .unwrap();
    }
    let on_n1 = eventually("two objects on n1", || async {
        let found = scoped
            .list::<ConfigMap>(&ListOptions::new().matching_field("data.node", "n1"))
            .await
            .unwrap();
        (found.len() == 2).then_some(found)
    })
    .await;
    assert_eq!(
        on_n1.iter().map(|c| c.name_any()).collect::<Vec<_>>(),
        ["x", "y"]
    );
    // Index and labels together; and the namespace narrows an index lookup.
    let n1_a = scoped
        .list::<ConfigMap>(
            &ListOptions::new()
                .matching_field("data.node", "n1")
                .labels("tier=a"),
        )
        .await
        .unwrap();
    assert_eq!(n1_a.len(), 1);
    let elsewhere = client
        .list::<ConfigMap>(
            &ListOptions::new()
                .namespace("kube-system")
                .matching_field("data.node", "n1"),
        )
        .await
        .unwrap();
    assert!(elsewhere.is_empty());

    let err = client
        .list::<ConfigMap>(&ListOptions::new().matching_field("spec.nodeName", "n1"))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Index(_)), "{err}");
    assert!(err.to_string().contains("spec.nodeName"), "{err}");
    assert!(err.to_string().contains("Client::index_field"), "{err}");
}

#[tokio::test]
async fn reads_that_cannot_be_answered_are_typed_errors() {
    let test = TestNamespace::new("client-read-errors").await.unwrap();
    let ns = test.namespace().to_string();

    // A kind the server does not serve: the read waits for the sync timeout and names the 404.
    let client = client_for(
        &test,
        ClientOptions::default().sync_timeout(Duration::from_secs(3)),
    );
    let err = client.get::<Phantom>("p", Some(&ns)).await.unwrap_err();
    match &err {
        ClientError::SyncTimeout {
            kind, last_error, ..
        } => {
            assert_eq!(kind, "Phantom");
            let last = last_error.as_deref().unwrap_or_default();
            assert!(last.contains("404"), "{err}");
        }
        other => panic!("expected a sync timeout, got {other}"),
    }

    // A namespace outside the cache's scope.
    let kube = test.client();
    let cache = Cache::new(kube.clone());
    cache
        .set_default_scope(WatchScope::all().namespace(&ns))
        .unwrap();
    let scoped = Client::new(kube.clone(), cache.clone(), ClientOptions::default());
    assert!(
        scoped
            .get::<ConfigMap>("x", Some(&ns))
            .await
            .unwrap()
            .is_none()
    );
    let err = scoped
        .get::<ConfigMap>("x", Some("kube-system"))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Read(_)), "{err}");
    let err = scoped
        .list::<ConfigMap>(&ListOptions::new().namespace("kube-system"))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Read(_)), "{err}");
    // Setting a default after a watch started is refused.
    assert!(cache.set_default_scope(WatchScope::all()).is_err());

    // Fail instead of starting an informer, until something watches the kind.
    let strict = Client::new(
        kube.clone(),
        Cache::new(kube),
        ClientOptions::default().fail_on_missing_informer(true),
    );
    let err = strict.get::<ConfigMap>("x", Some(&ns)).await.unwrap_err();
    assert!(matches!(err, ClientError::NoInformer { .. }), "{err}");
    assert_eq!(strict.cache().informer_count(), 0);
    let _watch = strict
        .cache()
        .reader::<ConfigMap>(WatchScope::all())
        .unwrap();
    assert!(
        strict
            .get::<ConfigMap>("x", Some(&ns))
            .await
            .unwrap()
            .is_none()
    );

    // A namespaced kind needs a namespace; a scoped client refuses another.
    let err = client.get::<ConfigMap>("x", None).await.unwrap_err();
    assert!(
        matches!(err, ClientError::NamespaceRequired { .. }),
        "{err}"
    );
    let err = client
        .in_namespace(&ns)
        .get::<ConfigMap>("x", Some("other"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClientError::NamespaceMismatch { .. }),
        "{err}"
    );
    let mut elsewhere = config_map("x", &[], &[]);
    elsewhere.metadata.namespace = Some("other".into());
    let err = client
        .in_namespace(&ns)
        .create(&elsewhere)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClientError::NamespaceMismatch { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn writes_carry_the_field_owner_and_dry_runs_store_nothing() {
    let test = TestNamespace::new("client-owner").await.unwrap();
    let ns = test.namespace();
    let client = client_for(
        &test,
        ClientOptions::default().field_owner("kcr-test-owner"),
    )
    .in_namespace(ns);

    client
        .create(&config_map("mine", &[], &[("k", "v")]))
        .await
        .unwrap();
    assert_eq!(managers(&client, "mine", ns).await, ["kcr-test-owner"]);
    client
        .create(&config_map("theirs", &[], &[("k", "v")]))
        .field_owner("someone-else")
        .await
        .unwrap();
    assert_eq!(managers(&client, "theirs", ns).await, ["someone-else"]);
    client
        .with_field_owner("wrapper")
        .patch::<ConfigMap, _>("mine", None, &Patch::Merge(json!({"data": {"w": "1"}})))
        .await
        .unwrap();
    let mut owners = managers(&client, "mine", ns).await;
    owners.sort();
    assert_eq!(owners, ["kcr-test-owner", "wrapper"]);

    // Dry runs: per call and for every call of a wrapper; the answer is the would-be object.
    let answered = client
        .create(&config_map("dry", &[], &[]))
        .dry_run()
        .await
        .unwrap();
    assert_eq!(answered.name_any(), "dry");
    let dry = client.dry_run_all();
    dry.create(&config_map("dry2", &[], &[])).await.unwrap();
    dry.delete_named::<ConfigMap>("mine", None).await.unwrap();
    let reader = client.api_reader();
    assert!(
        reader
            .get::<ConfigMap>("dry", None)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        reader
            .get::<ConfigMap>("dry2", None)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        reader
            .get::<ConfigMap>("mine", None)
            .await
            .unwrap()
            .is_some()
    );

    // A taken name, a missing object.
    let err = client
        .create(&config_map("mine", &[], &[]))
        .await
        .unwrap_err();
    assert!(err.is_already_exists(), "{err}");
    let err = client
        .delete_named::<ConfigMap>("nope", None)
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
    assert!(err.to_string().contains("delete ConfigMap"), "{err}");
}

#[tokio::test]
async fn conflicts_are_named_and_apply_can_force() {
    let test = TestNamespace::new("client-conflict").await.unwrap();
    let client = client_for(&test, ClientOptions::default()).in_namespace(test.namespace());

    let created = client
        .create(&config_map("c", &[], &[("k", "1")]))
        .await
        .unwrap();
    let mut first = created.clone();
    first.data = Some([("k".to_string(), "2".to_string())].into());
    client.update(&first).await.unwrap();
    // The same resourceVersion again: stale.
    let mut stale = created.clone();
    stale.data = Some([("k".to_string(), "3".to_string())].into());
    let err = client.update(&stale).await.unwrap_err();
    assert!(err.is_conflict(), "{err}");

    // Server-side apply: two managers on one field conflict unless forced.
    let mut applied = config_map("applied", &[], &[("owner", "a")]);
    applied.metadata.namespace = Some(test.namespace().into());
    client
        .apply(&applied)
        .field_owner("manager-a")
        .await
        .unwrap();
    let mut other = applied.clone();
    other.data = Some([("owner".to_string(), "b".to_string())].into());
    let err = client
        .apply(&other)
        .field_owner("manager-b")
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err}");
    let forced = client
        .apply(&other)
        .field_owner("manager-b")
        .force()
        .await
        .unwrap();
    assert_eq!(forced.data.unwrap()["owner"], "b");
}

#[tokio::test]
async fn status_subresource_and_strict_field_validation() {
    let test = TestNamespace::new("client-status").await.unwrap();
    test.install_crd::<Gadget>().await.unwrap();
    let client = client_for(&test, ClientOptions::default()).in_namespace(test.namespace());

    let gadget = Gadget::new("g", GadgetSpec { size: 1 });
    let created = client.create(&gadget).await.unwrap();
    // A status patch writes the status only.
    let patched = client
        .patch_status::<Gadget, _>(
            "g",
            None,
            &Patch::Merge(json!({"spec": {"size": 9}, "status": {"ready": true}})),
        )
        .await
        .unwrap();
    assert!(patched.status.as_ref().unwrap().ready);
    assert_eq!(patched.spec.size, 1);
    // An update of the status, and of the object, each leave the other part alone.
    let mut next = patched.clone();
    next.status = Some(GadgetStatus { ready: false });
    next.spec.size = 5;
    let updated = client.update_status(&next).await.unwrap();
    assert!(!updated.status.as_ref().unwrap().ready);
    assert_eq!(updated.spec.size, 1);
    assert_ne!(created.resource_version(), updated.resource_version());

    // Strict field validation refuses an unknown field; the default lets it pass (dropped).
    let gadgets = client.dynamic(DynamicResource::of::<Gadget>());
    let mut odd: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "client.kcr.io/v1", "kind": "Gadget",
        "metadata": {"name": "odd"},
        "spec": {"size": 2, "colour": "red"},
    }))
    .unwrap();
    let err = gadgets
        .create(&odd)
        .field_validation(FieldValidation::Strict)
        .await
        .unwrap_err();
    assert!(
        err.status_code().is_some_and(|c| c == 400 || c == 422),
        "{err}"
    );
    assert!(err.to_string().contains("colour"), "{err}");
    let err = client
        .with_field_validation(FieldValidation::Strict)
        .dynamic(DynamicResource::of::<Gadget>())
        .patch(
            None,
            "g",
            None,
            &Patch::Merge(json!({"spec": {"colour": "red"}})),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("colour"), "{err}");
    odd.metadata.namespace = None;
    let stored = gadgets.create(&odd).await.unwrap();
    assert!(stored.data["spec"].get("colour").is_none(), "{stored:?}");

    // Dynamic reads come from the cache too; delete-collection by label.
    let listed = eventually("both gadgets in the dynamic cache", || async {
        let all = gadgets.list(&ListOptions::new()).await.unwrap();
        (all.len() == 2).then_some(all)
    })
    .await;
    assert_eq!(listed[0].name_any(), "g");
    client
        .patch::<Gadget, _>(
            "odd",
            None,
            &Patch::Merge(json!({"metadata": {"labels": {"sweep": "yes"}}})),
        )
        .await
        .unwrap();
    client
        .delete_all_of::<Gadget>(None, &ListParams::default().labels("sweep=yes"))
        .await
        .unwrap();
    let left: Vec<Gadget> = client
        .api_reader()
        .list(None, &ListParams::default())
        .await
        .unwrap();
    assert_eq!(left.iter().map(|g| g.name_any()).collect::<Vec<_>>(), ["g"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_rbac_refuses_is_forbidden() {
    let test = TestNamespace::new("client-rbac").await.unwrap();
    if test.backend() != Backend::Real {
        // In process nothing is authenticated (add_user is Unsupported there).
        assert!(test.add_user("nobody", &[]).is_err());
        return;
    }
    let user = test.add_user(&test.unique_name("nobody"), &[]).unwrap();
    let client = Client::new(
        user.client.clone(),
        Cache::new(user.client.clone()),
        ClientOptions::default(),
    )
    .in_namespace(test.namespace());
    let err = client
        .create(&config_map("denied", &[], &[]))
        .await
        .unwrap_err();
    assert!(err.is_forbidden(), "{err}");
    assert!(err.to_string().contains("create ConfigMap"), "{err}");
}
