//! RBAC from what the operator does, end to end: a small controller (mark every ConfigMap,
//! tell it with an Event, under leader election) runs in a manager whose client an
//! `AccessRecorder` wraps; the record holds the operator's requests only, as RBAC authorizes
//! them, and `cargo kcr rbac` turns it into a ClusterRole and a leader election Role that pass
//! its check, which fails once a used verb is taken out. On every kcr-envtest backend
//! (`KCR_ENVTEST_BACKEND`).

use std::time::Duration;

use cargo_kcr::rbac::{RbacOptions, check, generate, write};
use cargo_kcr::{Permission, Problem};
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_controller::{Action, Context, LeaderElectionConfig, Manager, Reconciler, WatchOptions};
use kcr_envtest::TestNamespace;
use kcr_handler::Request;
use kcr_testkit::{Access, AccessRecorder, RunningManager, eventually};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::EventType;

/// Marks every ConfigMap it sees and says so with an Event.
struct Mark(kube::Client);

impl Reconciler<Request> for Mark {
    type Error = Box<dyn std::error::Error + Send + Sync>;

    async fn reconcile(&self, req: &Request, ctx: &Context) -> Result<Action, Self::Error> {
        let api: Api<ConfigMap> =
            Api::namespaced(self.0.clone(), req.namespace.as_deref().unwrap_or_default());
        let cm = api.get(&req.name).await?;
        if cm
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("seen"))
            .is_none()
        {
            let patch = serde_json::json!({"metadata": {"labels": {"seen": "yes"}}});
            api.patch(&req.name, &PatchParams::default(), &Patch::Merge(patch))
                .await?;
            ctx.event(&cm, EventType::Normal, "Marked", "labelled seen=yes")
                .await?;
        }
        Ok(Action::done())
    }
}

#[tokio::test]
async fn a_controllers_requests_are_recorded_and_become_its_roles()
-> Result<(), Box<dyn std::error::Error>> {
    let ns = TestNamespace::new("access-record").await?;
    let project = tempfile::tempdir()?;
    let record = project.path().join("record");
    let recorder = AccessRecorder::to_dir(&record)?;

    let leader_election = LeaderElectionConfig::new("access-record")
        .namespace(ns.namespace())
        .timings(
            Duration::from_secs(4),
            Duration::from_secs(3),
            Duration::from_millis(500),
        )
        .release_on_cancel(true);
    let options = kcr_testkit::options()
        .leader_election(leader_election)
        .event_reporter("mark-operator");
    let mgr = Manager::new(recorder.wrap(ns.client()), options).await?;
    mgr.controller()
        .for_kind::<ConfigMap>(WatchOptions::new().namespace(ns.namespace()))
        .complete(Mark(mgr.kube_client()))?;
    let running = RunningManager::start(mgr);

    // The test's own requests (these creates, the reads of `eventually`) go through the
    // test's client: they are not the operator's, and not recorded.
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), ns.namespace());
    for name in ["a", "b"] {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cms.create(&PostParams::default(), &cm).await?;
    }
    eventually("both ConfigMaps are marked", || async {
        for name in ["a", "b"] {
            let labels = cms.get(name).await.ok()?.metadata.labels?;
            (labels.get("seen")? == "yes").then_some(())?;
        }
        Some(())
    })
    .timeout(Duration::from_secs(60))
    .await?;
    running.stop().await?;
    recorder.check()?;

    let here = Some(ns.namespace());
    let accesses = recorder.accesses();
    let configmaps: Vec<&Access> = accesses
        .iter()
        .filter(|a| a.resource == "configmaps")
        .collect();
    let expected = ["get", "list", "patch", "watch"]
        .map(|verb| Access::new(verb, "", "configmaps", None, here));
    assert_eq!(
        configmaps,
        expected.iter().collect::<Vec<_>>(),
        "{accesses:#?}"
    );
    let leases = |verb| Access::new(verb, "coordination.k8s.io", "leases", None, here);
    for access in [
        leases("get"),
        leases("create"),
        Access::new("create", "events.k8s.io", "events", None, here),
    ] {
        assert!(accesses.contains(&access), "{access} not in {accesses:#?}");
    }

    // The roles from the record, as `cargo kcr rbac` writes them.
    let options = RbacOptions {
        records: vec![record],
        dir: project.path().join("config/rbac"),
        role_namespace: "mark-system".into(),
        ..RbacOptions::default()
    };
    let files = generate(&options)?;
    let yaml: Vec<&str> = files.iter().map(|f| f.yaml.as_str()).collect();
    assert_eq!(files.len(), 2, "{yaml:#?}");
    assert!(
        yaml[0].contains("kind: ClusterRole\nmetadata:\n  name: manager-role\nrules:\n- apiGroups:\n  - \"\"\n  resources:\n  - configmaps\n  verbs:\n  - get\n  - list\n  - watch\n  - patch\n"),
        "{}",
        yaml[0]
    );
    assert!(
        yaml[0].contains("  - events.k8s.io\n  resources:\n  - events\n  verbs:\n  - create\n"),
        "{}",
        yaml[0]
    );
    assert!(!yaml[0].contains("leases"), "{}", yaml[0]);
    assert!(
        yaml[1].contains(
            "kind: Role\nmetadata:\n  name: leader-election-role\n  namespace: mark-system\n"
        ),
        "{}",
        yaml[1]
    );
    assert!(
        yaml[1].contains("  - leases\n  verbs:\n  - get\n  - create\n"),
        "{}",
        yaml[1]
    );
    write(&files)?;
    let report = check(&options)?;
    assert!(report.is_ok(), "{report}");

    // A used verb taken out of the ClusterRole: the check names it.
    let path = options.cluster_role_path();
    let role = std::fs::read_to_string(&path)?;
    std::fs::write(&path, role.replacen("  - patch\n", "", 1))?;
    let report = check(&options)?;
    let missing: Vec<&Permission> = report.of(Problem::Missing).map(|f| &f.permission).collect();
    assert_eq!(
        missing,
        [&Permission::new("patch", "", "configmaps")],
        "{report}"
    );
    assert_eq!(report.of(Problem::Unused).count(), 0, "{report}");
    Ok(())
}
