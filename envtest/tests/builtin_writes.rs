//! Built-in objects are written as the real API server writes them, where clients can see it:
//! the fields it always encodes, its defaults, and how it refuses a JSON patch that does not
//! apply. Everything goes through the Kubernetes API, so these hold on a real API server too.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, NodeSpec};
use kcr_envtest::TestNamespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::ObjectMeta;
use serde_json::json;

fn named<T: Default>(name: &str, set: impl FnOnce(&mut T, ObjectMeta)) -> T {
    let mut t = T::default();
    set(
        &mut t,
        ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
    );
    t
}

fn json_patch(ops: serde_json::Value) -> Patch<()> {
    Patch::Json(serde_json::from_value(ops).unwrap())
}

fn api_err(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_node_created_without_spec_or_status_has_both() {
    let ns = TestNamespace::new("bare-node").await.unwrap();
    let nodes: Api<Node> = Api::all(ns.client());
    let name = ns.unique_name("bare");
    let bare: Node = named(&name, |n: &mut Node, m| n.metadata = m);
    assert!(serde_json::to_value(&bare).unwrap().get("spec").is_none());
    let created = nodes.create(&PostParams::default(), &bare).await.unwrap();
    let spec = created.spec.unwrap();
    // The TaintNodesByCondition admission plugin taints a new node
    // `node.kubernetes.io/not-ready:NoSchedule`; nothing else is set.
    let taints: Vec<(String, String)> = spec
        .taints
        .iter()
        .flatten()
        .map(|t| (t.key.clone(), t.effect.clone()))
        .collect();
    assert_eq!(
        taints,
        [(
            "node.kubernetes.io/not-ready".to_string(),
            "NoSchedule".to_string()
        )],
        "{spec:?}"
    );
    assert_eq!(
        NodeSpec {
            taints: None,
            ..spec
        },
        NodeSpec::default()
    );
    let status = created.status.unwrap();
    assert_eq!(
        status
            .daemon_endpoints
            .and_then(|d| d.kubelet_endpoint)
            .map(|e| e.port),
        Some(0)
    );
    let info = status.node_info.unwrap();
    assert_eq!(
        (info.machine_id.as_str(), info.kubelet_version.as_str()),
        ("", "")
    );

    // The JSON patch of issue 18 applies: /spec exists.
    let tainted = nodes
        .patch(
            &name,
            &PatchParams::default(),
            &json_patch(json!([{"op": "add", "path": "/spec/taints",
                "value": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}])),
        )
        .await
        .unwrap();
    let taints = tainted.spec.unwrap().taints.unwrap();
    assert_eq!((taints[0].key.as_str(), taints.len()), ("k", 1));

    // A replace without spec keeps it present (a struct is always encoded).
    let mut again = nodes.get(&name).await.unwrap();
    again.spec = None;
    let replaced = nodes
        .replace(&name, &PostParams::default(), &again)
        .await
        .unwrap();
    assert_eq!(replaced.spec, Some(Default::default()));
}

#[tokio::test]
async fn node_allocatable_defaults_to_capacity() {
    let ns = TestNamespace::new("allocatable").await.unwrap();
    let nodes: Api<Node> = Api::all(ns.client());
    let name = ns.unique_name("n");
    let n: Node = named(&name, |n: &mut Node, m| n.metadata = m);
    nodes.create(&PostParams::default(), &n).await.unwrap();
    let pp = PatchParams::default();
    let only_capacity = json!({"status": {"capacity": {"cpu": "2", "memory": "1Gi"}}});
    let written = nodes
        .patch_status(&name, &pp, &Patch::Merge(&only_capacity))
        .await
        .unwrap();
    let alloc = written.status.unwrap().allocatable.unwrap();
    assert_eq!(
        (alloc["cpu"].0.as_str(), alloc["memory"].0.as_str()),
        ("2", "1Gi")
    );
    // Given allocatable is kept.
    let both = json!({"status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "3"}}});
    let written = nodes
        .patch_status(&name, &pp, &Patch::Merge(&both))
        .await
        .unwrap();
    assert_eq!(written.status.unwrap().allocatable.unwrap()["cpu"].0, "3");
}

#[tokio::test]
async fn namespaces_carry_their_name_label_finalizer_and_phase() {
    let test_ns = TestNamespace::new("ns-label").await.unwrap();
    let namespaces: Api<Namespace> = Api::all(test_ns.client());
    let default = namespaces.get("default").await.unwrap();
    assert_eq!(
        default.metadata.labels.unwrap()["kubernetes.io/metadata.name"],
        "default"
    );

    let team_a = test_ns.unique_name("team-a");
    let ns: Namespace = named(&team_a, |n: &mut Namespace, m| n.metadata = m);
    let created = namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    assert_eq!(
        created.metadata.labels.as_ref().unwrap()["kubernetes.io/metadata.name"],
        team_a
    );
    assert_eq!(
        created.spec.as_ref().unwrap().finalizers,
        Some(vec!["kubernetes".to_owned()])
    );
    assert_eq!(
        created.status.as_ref().unwrap().phase.as_deref(),
        Some("Active")
    );

    // An update cannot drop the name label or change spec.finalizers.
    let mut changed = created.clone();
    changed.metadata.labels = Some([("team".to_owned(), "a".to_owned())].into());
    changed.spec = Some(Default::default());
    let updated = namespaces
        .replace(&team_a, &PostParams::default(), &changed)
        .await
        .unwrap();
    let labels = updated.metadata.labels.unwrap();
    assert_eq!(
        (
            labels["kubernetes.io/metadata.name"].as_str(),
            labels["team"].as_str()
        ),
        (team_a.as_str(), "a")
    );
    assert_eq!(
        updated.spec.unwrap().finalizers,
        Some(vec!["kubernetes".to_owned()])
    );
}

#[tokio::test]
async fn a_json_patch_that_does_not_apply_is_refused_without_detail() {
    let ns = TestNamespace::new("json-patch").await.unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let mut cm: ConfigMap = named("c", |c: &mut ConfigMap, m| c.metadata = m);
    cm.data = Some([("k".to_owned(), "v".to_owned())].into());
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let pp = PatchParams::default();
    // A failed `test` and a path that does not exist get the same answer: the real server
    // drops the JSON patch library's error.
    for ops in [
        json!([{"op": "test", "path": "/data/k", "value": "other"}]),
        json!([{"op": "remove", "path": "/data/missing"}]),
        json!([{"op": "add", "path": "/spec/taints", "value": []}]),
    ] {
        let err = api_err(
            cms.patch("c", &pp, &json_patch(ops.clone()))
                .await
                .unwrap_err(),
        );
        assert_eq!(
            (err.code, err.reason.as_str(), err.message.as_str()),
            (
                422,
                "Invalid",
                "the server rejected our request due to an error in our request"
            ),
            "{ops}"
        );
        assert!(
            err.details.as_ref().is_none_or(|d| d.causes.is_empty()),
            "{ops}: {:?}",
            err.details
        );
    }
    // Nothing of a refused patch was written.
    assert_eq!(cms.get("c").await.unwrap().data.unwrap()["k"], "v");
}

#[tokio::test]
async fn a_new_node_gets_the_not_ready_taint_once() {
    let ns = TestNamespace::new("not-ready").await.unwrap();
    let nodes: Api<Node> = Api::all(ns.client());
    let (has_it, other_effect) = (ns.unique_name("has-it"), ns.unique_name("other-effect"));
    let effects = |n: &Node| -> Vec<(String, String)> {
        let mut v: Vec<_> = n
            .spec
            .iter()
            .flat_map(|s| s.taints.iter().flatten())
            .map(|t| (t.key.clone(), t.effect.clone()))
            .collect();
        v.sort();
        v
    };
    let pair = |k: &str, e: &str| (k.to_string(), e.to_string());
    let with = |name: &str, taints: serde_json::Value| -> Node {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"taints": taints}}))
            .unwrap()
    };
    // Already tainted not-ready:NoSchedule: kept once.
    let n = nodes
        .create(
            &PostParams::default(),
            &with(
                &has_it,
                json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        effects(&n),
        [pair("node.kubernetes.io/not-ready", "NoSchedule")]
    );
    // The same key with another effect does not count; a foreign taint stays.
    let n = nodes
        .create(
            &PostParams::default(),
            &with(
                &other_effect,
                json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
                       {"key": "team", "value": "a", "effect": "NoSchedule"}]),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        effects(&n),
        [
            pair("node.kubernetes.io/not-ready", "NoExecute"),
            pair("node.kubernetes.io/not-ready", "NoSchedule"),
            pair("team", "NoSchedule"),
        ]
    );
    // Only creates are tainted: an update that removes it is kept as written.
    let mut n = nodes.get(&has_it).await.unwrap();
    n.spec.as_mut().unwrap().taints = Some(vec![]);
    let n = nodes
        .replace(&has_it, &PostParams::default(), &n)
        .await
        .unwrap();
    assert_eq!(effects(&n), Vec::<(String, String)>::new());
    // Simulated nodes look registered and Ready: no not-ready taint.
    let names = ns.add_nodes(1).await.unwrap();
    let n = nodes.get(&names[0]).await.unwrap();
    assert_eq!(effects(&n), Vec::<(String, String)>::new());
}
