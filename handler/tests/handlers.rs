//! Behaviour of the built-in handlers against a real `kcr_queue::WorkQueue`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kcr_core::Event;
use kcr_handler::{
    EnqueueRequestForObject, EnqueueRequestForOwner, EnqueueRequestsFromMapFunc, EventHandler,
    Funcs, Request, enqueue_all, priority_of,
};
use kcr_queue::{DEFAULT_PRIORITY, LOW_PRIORITY, WorkQueue};

fn queue() -> WorkQueue<Request> {
    WorkQueue::builder("test").metrics(false).build()
}

/// Takes everything waiting, in hand-out order.
async fn drain(queue: &WorkQueue<Request>) -> Vec<Request> {
    let mut out = Vec::new();
    while !queue.is_empty() {
        let item = queue.get().await.expect("queue is running");
        out.push(item.item().clone());
    }
    out
}

fn owner_ref(api_version: &str, kind: &str, name: &str, controller: bool) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        controller: Some(controller),
        block_owner_deletion: None,
    }
}

fn rs(name: &str, owners: Vec<OwnerReference>) -> ReplicaSet {
    let mut rs = ReplicaSet::default();
    rs.metadata.name = Some(name.into());
    rs.metadata.namespace = Some("prod".into());
    rs.metadata.owner_references = Some(owners);
    rs
}

fn cm(name: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.namespace = Some("ns".into());
    cm
}

fn initial<K>(object: K) -> Event<K> {
    Event::Create {
        object: Arc::new(object),
        initial: true,
    }
}

#[test]
fn priority_of_each_kind() {
    assert_eq!(priority_of(&initial(1)), LOW_PRIORITY);
    assert_eq!(priority_of(&Event::create(1)), DEFAULT_PRIORITY);
    assert_eq!(priority_of(&Event::update(1, 2)), DEFAULT_PRIORITY);
    assert_eq!(priority_of(&Event::delete(1)), DEFAULT_PRIORITY);
    assert_eq!(
        priority_of(&Event::Delete {
            object: Arc::new(1),
            state_unknown: true
        }),
        DEFAULT_PRIORITY
    );
    assert_eq!(priority_of(&Event::generic(1)), DEFAULT_PRIORITY);
}

#[tokio::test]
async fn for_object_enqueues_initial_creates_behind_fresh_events() {
    let q = queue();
    let h = EnqueueRequestForObject;
    h.handle(&initial(cm("a-initial")), &q);
    h.handle(&initial(cm("b-initial")), &q);
    h.handle(&Event::create(cm("c-new")), &q);
    h.handle(&Event::update(cm("d-upd"), cm("d-upd")), &q);
    h.handle(&Event::delete(cm("e-del")), &q);
    h.handle(&Event::generic(cm("f-gen")), &q);
    let names: Vec<_> = drain(&q).await.into_iter().map(|r| r.name).collect();
    assert_eq!(
        names,
        ["c-new", "d-upd", "e-del", "f-gen", "a-initial", "b-initial"]
    );
}

#[tokio::test]
async fn for_object_uses_the_new_object_and_namespace() {
    let q = queue();
    EnqueueRequestForObject.handle(&Event::update(cm("x"), cm("x")), &q);
    let mut node = Node::default();
    node.metadata.name = Some("n1".into());
    EnqueueRequestForObject.handle(&Event::create(node), &q);
    assert_eq!(
        drain(&q).await,
        vec![Request::namespaced("x", "ns"), Request::cluster("n1")]
    );
}

#[test]
fn owner_controller_only_matches_group_and_kind_ignoring_version() {
    let h = EnqueueRequestForOwner::<Deployment>::new();
    let object = rs(
        "web-1",
        vec![
            owner_ref("apps/v1", "Deployment", "not-controller", false),
            owner_ref("apps/v1beta2", "Deployment", "web", true),
            owner_ref("extensions/v1beta1", "Deployment", "other-group", true),
            owner_ref("apps/v1", "StatefulSet", "other-kind", true),
            owner_ref("v1", "Deployment", "core-group", true),
        ],
    );
    assert_eq!(
        h.requests(&Event::create(object)),
        vec![Request::namespaced("web", "prod")]
    );
    // no owner references at all
    let mut plain = cm("x");
    assert!(h.requests(&Event::create(plain.clone())).is_empty());
    plain.metadata.owner_references = Some(vec![]);
    assert!(h.requests(&Event::generic(plain)).is_empty());
}

#[test]
fn owner_every_owner_takes_all_references_of_the_type() {
    let h = EnqueueRequestForOwner::<Deployment>::new().every_owner();
    let object = rs(
        "web-1",
        vec![
            owner_ref("apps/v1", "Deployment", "a", false),
            owner_ref("apps/v1", "Deployment", "b", true),
            owner_ref("apps/v1", "StatefulSet", "c", false),
        ],
    );
    assert_eq!(
        h.requests(&Event::delete(object)),
        vec![
            Request::namespaced("a", "prod"),
            Request::namespaced("b", "prod")
        ]
    );
}

#[test]
fn owner_cluster_scoped_gives_requests_without_namespace() {
    // a namespaced Pod owned by a (cluster-scoped) Node
    let mut pod = Pod::default();
    pod.metadata.name = Some("mirror".into());
    pod.metadata.namespace = Some("kube-system".into());
    pod.metadata.owner_references = Some(vec![owner_ref("v1", "Node", "node-1", true)]);
    let h = EnqueueRequestForOwner::<Node>::new();
    assert_eq!(
        h.requests(&Event::create(pod.clone())),
        vec![Request::cluster("node-1")]
    );
    // the override works both ways
    let forced = EnqueueRequestForOwner::<Node>::new().cluster_scoped(false);
    assert_eq!(
        forced.requests(&Event::create(pod)),
        vec![Request::namespaced("node-1", "kube-system")]
    );
}

#[tokio::test]
async fn owner_update_enqueues_old_and_new_owners_once() {
    let h = EnqueueRequestForOwner::<Deployment>::new();
    let old = rs("web-1", vec![owner_ref("apps/v1", "Deployment", "a", true)]);
    let same = old.clone();
    assert_eq!(
        h.requests(&Event::update(old.clone(), same.clone())),
        vec![Request::namespaced("a", "prod")]
    );
    let reparented = rs("web-1", vec![owner_ref("apps/v1", "Deployment", "b", true)]);
    assert_eq!(
        h.requests(&Event::update(old.clone(), reparented.clone())),
        vec![
            Request::namespaced("a", "prod"),
            Request::namespaced("b", "prod")
        ]
    );
    let q = queue();
    h.handle(&Event::update(old, reparented), &q);
    assert_eq!(q.len(), 2);
    h.handle(&initial(same), &q);
    assert_eq!(
        drain(&q).await,
        vec![
            Request::namespaced("a", "prod"),
            Request::namespaced("b", "prod")
        ]
    );
}

#[tokio::test]
async fn owner_initial_create_is_low_priority() {
    let h = EnqueueRequestForOwner::<Deployment>::new();
    let q = queue();
    h.handle(
        &initial(rs(
            "x",
            vec![owner_ref("apps/v1", "Deployment", "slow", true)],
        )),
        &q,
    );
    h.handle(
        &Event::create(rs(
            "y",
            vec![owner_ref("apps/v1", "Deployment", "fast", true)],
        )),
        &q,
    );
    let names: Vec<_> = drain(&q).await.into_iter().map(|r| r.name).collect();
    assert_eq!(names, ["fast", "slow"]);
}

#[tokio::test]
async fn map_func_dedups_within_and_across_old_and_new() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    // every ConfigMap concerns the Deployments named in its data keys, plus "all"
    let h = EnqueueRequestsFromMapFunc::new(move |cm: &ConfigMap| {
        counter.fetch_add(1, Ordering::SeqCst);
        let ns = cm.metadata.namespace.clone();
        cm.data
            .iter()
            .flatten()
            .map(|(k, _)| Request::new(k.clone(), ns.clone()))
            .chain([
                Request::new("all", ns.clone()),
                Request::new("all", ns.clone()),
            ])
            .collect::<Vec<_>>()
    });
    let mut old = cm("settings");
    old.data = Some([("a".into(), "1".into()), ("b".into(), "1".into())].into());
    let mut new = old.clone();
    new.data = Some([("b".into(), "2".into()), ("c".into(), "1".into())].into());

    let q = queue();
    h.handle(&Event::update(old, new.clone()), &q);
    assert_eq!(calls.load(Ordering::SeqCst), 2, "old and new both mapped");
    let mut got = drain(&q).await;
    got.sort();
    assert_eq!(
        got,
        ["a", "all", "b", "c"]
            .map(|n| Request::namespaced(n, "ns"))
            .to_vec()
    );

    h.handle(&initial(new.clone()), &q);
    h.handle(&Event::generic(cm("other")), &q);
    let order: Vec<_> = drain(&q).await.into_iter().map(|r| r.name).collect();
    // the generic event's request overtakes the initial create's ones
    assert_eq!(order, ["all", "b", "c"]);
}

#[tokio::test]
async fn enqueue_all_dedups_large_fan_outs() {
    let q = queue();
    let requests = (0..100)
        .chain(0..100)
        .map(|i| Request::cluster(format!("n{i}")));
    enqueue_all(&Event::generic(()), &q, requests);
    let mut got = drain(&q).await;
    assert_eq!(got.len(), 100);
    got.dedup();
    assert_eq!(got.len(), 100);
}

#[tokio::test]
async fn funcs_calls_the_closure_for_the_kind_only() {
    let h = Funcs::<ConfigMap>::new()
        .create(|o, initial, q| {
            if !initial {
                q.add(Request::from_object(o.as_ref()))
            }
        })
        .update(|old, new, q| {
            if old.data != new.data {
                q.add(Request::from_object(new.as_ref()))
            }
        })
        .delete(|o, state_unknown, q| {
            q.add(Request::new(
                format!(
                    "{}-{state_unknown}",
                    o.metadata.name.as_deref().unwrap_or("")
                ),
                None,
            ))
        });
    let q = queue();
    h.handle(&initial(cm("ignored")), &q);
    h.handle(&Event::create(cm("created")), &q);
    h.handle(&Event::update(cm("same"), cm("same")), &q);
    let mut changed = cm("changed");
    changed.data = Some([("k".into(), "v".into())].into());
    h.handle(&Event::update(cm("changed"), changed), &q);
    h.handle(
        &Event::Delete {
            object: Arc::new(cm("gone")),
            state_unknown: true,
        },
        &q,
    );
    h.handle(&Event::generic(cm("no-generic-closure")), &q);
    assert_eq!(
        drain(&q).await,
        vec![
            Request::namespaced("created", "ns"),
            Request::namespaced("changed", "ns"),
            Request::cluster("gone-true"),
        ]
    );
    assert!(format!("{h:?}").contains("generic: false"));
}

#[tokio::test]
async fn closures_and_boxed_handlers() {
    let q = queue();
    let closure = |e: &Event<ConfigMap>, q: &WorkQueue<Request>| {
        q.add(Request::cluster(format!("{}", e.kind())))
    };
    let boxed: Box<dyn EventHandler<ConfigMap>> = Box::new(closure);
    let shared: Arc<dyn EventHandler<ConfigMap>> = Arc::new(EnqueueRequestForObject);
    boxed.handle(&Event::delete(cm("x")), &q);
    shared.handle(&Event::delete(cm("x")), &q);
    assert_eq!(
        drain(&q).await,
        vec![Request::cluster("delete"), Request::namespaced("x", "ns")]
    );
}

#[test]
fn request_from_a_reflector_object_ref() {
    // `From<ObjectRef<K>>` needs kcr-core's `kube-runtime` feature (on in this crate's tests).
    let cm = cm("cm");
    assert_eq!(
        Request::from(kube::runtime::reflector::ObjectRef::from_obj(&cm)),
        Request::namespaced("cm", "ns")
    );
}
