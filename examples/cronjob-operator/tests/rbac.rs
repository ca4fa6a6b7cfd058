//! The operator's RBAC (`config/rbac/`) is exactly what the controller does.
//!
//! [`the_controller_needs_exactly_what_the_roles_grant`] runs the controller (with leader
//! election, as `cronjob-operator run` does) through a client that records every request it
//! makes, as RBAC names it (API group, resource with subresource, verb), through a scenario
//! that takes every path of the reconcile that talks to the API server: the watches, a run's
//! Job (create), its status (patch), a held-back run's Event and its repeat (create, then
//! patch of the series), a finished Job beyond the history limit (delete), the Lease (get,
//! create, renewed with update). Then:
//!
//! - what it used is what `rbac/role.yaml` and `rbac/leader_election_role.yaml` grant, no verb
//!   more or less (plus `update` of `cronjobs/finalizers`, which no request names: the
//!   OwnerReferencesPermissionEnforcement admission plugin asks for it when the controller
//!   creates a Job whose owner reference blocks its CronJob's deletion);
//! - on an API server that authorizes (`KCR_ENVTEST_BACKEND=real`), the controller runs as
//!   the ServiceAccount of `rbac/service_account.yaml`, bound only by the shipped bindings, and
//!   none of its requests is refused (no 403): the roles cover it. kcr-envtest's in-process
//!   server authorizes nothing; there the test records the requests of an admin client.
//!
//! [`every_role_bound_to_the_service_account_is_checked`] makes sure no other role bound to
//! the ServiceAccount escapes the comparison (the secured metrics' delegated authentication
//! role aside).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cronjob_operator::manifests::{LEADER_ELECTION_ID, NAMESPACE, SERVICE_ACCOUNT};
use cronjob_operator::{ConcurrencyPolicy, CronJob, CronJobSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::batch::v1::Job;
use kcr_controller::{LeaderElectionConfig, Manager};
use kcr_envtest::{EnvtestError, TestApiServer, service_account_groups, service_account_user};
use kcr_testkit::{ManualClock, RunningManager, eventually, that_ok};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};
use support::{WAIT, created, finish_job, job_name, next_minute, plus};

/// The role files compared with the controller's requests.
const ROLE_FILES: [&str; 2] = ["role.yaml", "leader_election_role.yaml"];
/// The files of `config/rbac/` that give the ServiceAccount its permissions, in apply order.
const RBAC_FILES: [&str; 5] = [
    "service_account.yaml",
    "role.yaml",
    "role_binding.yaml",
    "leader_election_role.yaml",
    "leader_election_role_binding.yaml",
];

/// One verb on one resource, as RBAC names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Permission {
    group: String,
    /// The resource, with `/<subresource>`.
    resource: String,
    verb: String,
}

impl Permission {
    fn new(group: &str, resource: &str, verb: &str) -> Permission {
        Permission {
            group: group.into(),
            resource: resource.into(),
            verb: verb.into(),
        }
    }
}

impl std::fmt::Display for Permission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(f, "{} {group}/{}", self.verb, self.resource)
    }
}

/// The permission a request needs: its API group, resource (with subresource) and verb, from
/// its method, path and `watch` parameter; `None` for a request of no resource (discovery,
/// `/version`).
fn permission_of(method: &http::Method, uri: &http::Uri) -> Option<Permission> {
    let segments: Vec<&str> = uri.path().trim_matches('/').split('/').collect();
    let (group, rest) = match segments.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return None,
    };
    let rest = match rest {
        ["namespaces", _namespace, inner @ ..] if !inner.is_empty() => inner,
        all => all,
    };
    let (resource, named) = match rest {
        [] => return None,
        [resource] => (resource.to_string(), false),
        [resource, _name] => (resource.to_string(), true),
        [resource, _name, sub, ..] => (format!("{resource}/{sub}"), true),
    };
    let watch = uri
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    let verb = match *method {
        http::Method::GET if watch => "watch",
        http::Method::GET if named => "get",
        http::Method::GET => "list",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE if named => "delete",
        http::Method::DELETE => "deletecollection",
        _ => return None,
    };
    Some(Permission::new(group, &resource, verb))
}

/// The requests of a client: each permission used, with the HTTP statuses of its answers.
#[derive(Clone, Default)]
struct Recorded(Arc<Mutex<BTreeMap<Permission, Vec<u16>>>>);

impl Recorded {
    fn used(&self) -> BTreeSet<Permission> {
        self.0.lock().unwrap().keys().cloned().collect()
    }

    fn refused(&self) -> Vec<String> {
        let requests = self.0.lock().unwrap();
        let refused = requests.iter().filter(|(_, codes)| codes.contains(&403));
        refused
            .map(|(p, codes)| format!("{p}: {codes:?}"))
            .collect()
    }

    fn has(&self, p: &Permission) -> bool {
        self.0.lock().unwrap().contains_key(p)
    }
}

/// `client`, recording each request's permission and answer in `recorded`.
fn recording(client: kube::Client, recorded: Recorded) -> kube::Client {
    let namespace = client.default_namespace().to_string();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let (client, recorded) = (client.clone(), recorded.clone());
        async move {
            let permission = permission_of(request.method(), request.uri());
            let response = client.send(request).await;
            if let Some(p) = permission {
                let code = response.as_ref().map_or(0, |r| r.status().as_u16());
                recorded.0.lock().unwrap().entry(p).or_default().push(code);
            }
            response
        }
    });
    kube::Client::new(service, namespace)
}

/// The YAML documents of `config/rbac/<file>`.
fn rbac_docs(file: &str) -> Vec<Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("config/rbac")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn strings(v: &Value) -> Vec<String> {
    let items = v.as_array().map(Vec::as_slice).unwrap_or_default();
    items
        .iter()
        .map(|s| s.as_str().expect("a string").to_owned())
        .collect()
}

/// Every verb of every rule of [`ROLE_FILES`], with the role's namespace (`None`: a
/// ClusterRole).
fn granted() -> Vec<(Option<String>, Permission)> {
    let mut out = Vec::new();
    for file in ROLE_FILES {
        let docs = rbac_docs(file);
        assert_eq!(docs.len(), 1, "{file}: one role");
        let role = &docs[0];
        let namespace = role["metadata"]["namespace"].as_str().map(str::to_owned);
        for rule in role["rules"].as_array().expect("rules") {
            for key in ["resourceNames", "nonResourceURLs"] {
                assert!(rule.get(key).is_none(), "{file}: {key}: not compared here");
            }
            for group in strings(&rule["apiGroups"]) {
                for resource in strings(&rule["resources"]) {
                    for verb in strings(&rule["verbs"]) {
                        assert!(verb != "*" && resource != "*", "{file}: a wildcard");
                        let p = Permission::new(&group, &resource, &verb);
                        out.push((namespace.clone(), p));
                    }
                }
            }
        }
    }
    out
}

/// Whether the API server authorizes the ServiceAccount for `p` in `namespace`.
async fn allowed(
    admin: &kube::Client,
    namespace: Option<&str>,
    p: &Permission,
) -> Result<bool, kube::Error> {
    let (resource, subresource) = match p.resource.split_once('/') {
        Some((r, s)) => (r.to_owned(), Some(s.to_owned())),
        None => (p.resource.clone(), None),
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(service_account_user(NAMESPACE, SERVICE_ACCOUNT)),
            groups: Some(service_account_groups(NAMESPACE).to_vec()),
            resource_attributes: Some(ResourceAttributes {
                group: Some(p.group.clone()),
                resource: Some(resource),
                subresource,
                verb: Some(p.verb.clone()),
                namespace: namespace.map(str::to_owned),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SubjectAccessReview>::all(admin.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// The client the controller runs with: on a server that authorizes, the ServiceAccount's,
/// with `config/rbac/` applied and in effect; elsewhere the admin's.
async fn operator_client(server: &TestApiServer) -> anyhow::Result<kube::Client> {
    let admin = server.client();
    let sa = match server.client_for_service_account(NAMESPACE, SERVICE_ACCOUNT) {
        Ok(sa) => sa,
        Err(e @ EnvtestError::Unsupported { .. }) => {
            println!(
                "the {} backend authorizes nothing ({e}): recording the requests of an admin client; KCR_ENVTEST_BACKEND=real also checks that the roles cover them",
                server.backend().as_str()
            );
            return Ok(admin);
        }
        Err(e) => return Err(e.into()),
    };
    for file in RBAC_FILES {
        for doc in rbac_docs(file) {
            server.upsert(doc).await?;
        }
    }
    // kube-apiserver's authorizer learns of new roles through an informer: wait until it
    // grants every permission of the files.
    let all = granted();
    eventually("the shipped roles in effect", || async {
        for (namespace, p) in &all {
            match allowed(&admin, namespace.as_deref(), p).await {
                Ok(true) => {}
                Ok(false) => return Err(format!("{p} is not granted yet")),
                Err(e) => return Err(format!("{p}: {e}")),
            }
        }
        Ok(())
    })
    .timeout(WAIT)
    .await?;
    Ok(sa)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_needs_exactly_what_the_roles_grant() -> anyhow::Result<()> {
    // A server of its own: cluster-wide roles and a cluster-wide controller, as deployed.
    let server = TestApiServer::start().await?;
    let admin = server.client();
    let namespace =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
    server.upsert(namespace).await?;
    server.install_crd::<CronJob>().await?;
    let operator = operator_client(&server).await?;

    // The controller as `cronjob-operator run` sets it up, on a clock the test moves and
    // with short leader election timings (the Lease is renewed every half second).
    let recorded = Recorded::default();
    // With KCR_RBAC_RECORD set, the controller's requests also join the suite's record, the
    // input of `cargo kcr rbac --check` (kcr's .ci/check-rbac): this is the one test that
    // runs it with leader election and repeated Events.
    let operator = kcr_testkit::access::record_from_env(operator)?;
    let client = recording(operator, recorded.clone());
    let clock = ManualClock::starting_now();
    let leader_election = LeaderElectionConfig::new(LEADER_ELECTION_ID)
        .namespace(NAMESPACE)
        .timings(
            Duration::from_secs(4),
            Duration::from_secs(3),
            Duration::from_millis(500),
        );
    let options = kcr_testkit::options()
        .clock(clock.clock())
        .leader_election(leader_election)
        .event_reporter("cronjob-operator");
    let mgr = Manager::new(client, options).await?;
    cronjob_operator::add_to_manager(&mgr, None)?;
    let running = RunningManager::start(mgr);

    // A CronJob every minute that holds runs back while one is active and keeps no
    // successful Job.
    let cronjobs: Api<CronJob> = Api::namespaced(admin.clone(), "default");
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "default");
    let spec = CronJobSpec {
        schedule: "* * * * *".into(),
        concurrency_policy: ConcurrencyPolicy::Forbid,
        successful_jobs_history_limit: Some(0),
        job_template: support::job_template(),
        ..Default::default()
    };
    let cronjob = CronJob::new("rbac", spec);
    let cronjob = cronjobs.create(&PostParams::default(), &cronjob).await?;
    let first = next_minute(created(&cronjob));
    let job_names = || async {
        let list = jobs.list(&ListParams::default()).await?;
        Ok::<_, kube::Error>(
            list.items
                .into_iter()
                .filter_map(|j| j.metadata.name)
                .collect::<Vec<_>>(),
        )
    };

    // A run: its Job (create), the status (patch).
    clock.set(plus(first, 20))?;
    let job1 = job_name("rbac", first);
    eventually("the first run's Job", || async {
        that_ok(job_names().await, |names| *names == [job1.as_str()])
    })
    .timeout(WAIT)
    .await?;
    let status_patch = Permission::new("batch.example.kcr.dev", "cronjobs/status", "patch");
    eventually("the status written", || async {
        recorded.has(&status_patch)
    })
    .timeout(WAIT)
    .await?;

    // Two runs held back by the active Job: an Event (create), then its repeat (patch).
    for (minutes, verb) in [(1, "create"), (2, "patch")] {
        clock.set(plus(first, 60 * minutes + 20))?;
        let event = Permission::new("events.k8s.io", "events", verb);
        eventually(format!("the JobAlreadyActive Event ({verb})"), || async {
            recorded.has(&event)
        })
        .timeout(WAIT)
        .await?;
    }

    // The Job succeeds; beyond the history limit of 0 it is deleted (delete), and the
    // held-back run starts.
    finish_job(&jobs, &job1, true).await?;
    let job3 = job_name("rbac", plus(first, 120));
    eventually(
        "the first Job deleted, the latest run's Job created",
        || async { that_ok(job_names().await, |names| *names == [job3.as_str()]) },
    )
    .timeout(WAIT)
    .await?;

    // The Lease renewed (update).
    let lease_update = Permission::new("coordination.k8s.io", "leases", "update");
    eventually("the Lease renewed", || async {
        recorded.has(&lease_update)
    })
    .timeout(WAIT)
    .await?;
    running.stop().await?;

    // What it used, and what creating owned Jobs asks of the admission plugin.
    let mut used = recorded.used();
    if used.contains(&Permission::new("batch", "jobs", "create")) {
        used.insert(Permission::new(
            "batch.example.kcr.dev",
            "cronjobs/finalizers",
            "update",
        ));
    }
    let granted: BTreeSet<Permission> = granted().into_iter().map(|(_, p)| p).collect();
    let show =
        |set: &BTreeSet<Permission>| set.iter().map(|p| format!("\n  {p}")).collect::<String>();
    println!("the controller used:{}", show(&used));
    assert!(
        recorded.refused().is_empty(),
        "refused: {:?}",
        recorded.refused()
    );
    let missing: BTreeSet<Permission> = used.difference(&granted).cloned().collect();
    let unused: BTreeSet<Permission> = granted.difference(&used).cloned().collect();
    assert!(
        missing.is_empty() && unused.is_empty(),
        "config/rbac/ lacks:{}\nconfig/rbac/ grants, unused:{}",
        show(&missing),
        show(&unused)
    );
    Ok(())
}

#[test]
fn requests_are_named_as_rbac_names_them() {
    let p = |method: http::Method, uri: &str| {
        permission_of(&method, &uri.parse().unwrap()).map(|p| p.to_string())
    };
    use http::Method as M;
    let cases = [
        (
            M::GET,
            "/apis/batch/v1/namespaces/a/jobs?watch=true&resourceVersion=1",
            "watch batch/jobs",
        ),
        (M::GET, "/apis/batch/v1/jobs?limit=500", "list batch/jobs"),
        (M::GET, "/api/v1/namespaces/a", "get core/namespaces"),
        (M::GET, "/api/v1/namespaces/a/pods/p", "get core/pods"),
        (
            M::POST,
            "/apis/batch/v1/namespaces/a/jobs",
            "create batch/jobs",
        ),
        (
            M::PATCH,
            "/apis/g.io/v1/namespaces/a/cronjobs/c/status",
            "patch g.io/cronjobs/status",
        ),
        (
            M::PUT,
            "/apis/coordination.k8s.io/v1/namespaces/a/leases/l",
            "update coordination.k8s.io/leases",
        ),
        (
            M::DELETE,
            "/apis/batch/v1/namespaces/a/jobs/j",
            "delete batch/jobs",
        ),
        (
            M::DELETE,
            "/apis/batch/v1/namespaces/a/jobs",
            "deletecollection batch/jobs",
        ),
    ];
    for (method, uri, want) in cases {
        assert_eq!(p(method, uri).as_deref(), Some(want), "{uri}");
    }
    assert_eq!(p(M::GET, "/apis"), None);
    assert_eq!(p(M::GET, "/apis/batch/v1"), None);
    assert_eq!(p(M::GET, "/version"), None);
}

/// Whether every rule of `role` only lets the operator review a caller (TokenReview,
/// SubjectAccessReview): the secured metrics endpoint's delegated authentication and
/// authorization, which the scenario above does not serve.
fn only_delegated_auth(role: &Value) -> bool {
    role["rules"].as_array().is_some_and(|rules| {
        rules.iter().all(|r| {
            let rule = (
                strings(&r["apiGroups"]),
                strings(&r["resources"]),
                strings(&r["verbs"]),
            );
            rule == (
                vec!["authentication.k8s.io".into()],
                vec!["tokenreviews".into()],
                vec!["create".into()],
            ) || rule
                == (
                    vec!["authorization.k8s.io".into()],
                    vec!["subjectaccessreviews".into()],
                    vec!["create".into()],
                )
        })
    })
}

#[test]
fn every_role_bound_to_the_service_account_is_checked() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/rbac");
    let mut roles = Vec::new();
    let mut bound = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let file = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !file.ends_with(".yaml") || file == "kustomization.yaml" {
            continue;
        }
        for doc in rbac_docs(&file) {
            let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
            let name = doc["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            match kind.as_str() {
                "Role" | "ClusterRole" => roles.push((kind, name, file.clone(), doc)),
                "RoleBinding" | "ClusterRoleBinding" => {
                    let ours = doc["subjects"].as_array().into_iter().flatten().any(|s| {
                        s["kind"] == "ServiceAccount"
                            && s["name"] == SERVICE_ACCOUNT
                            && s["namespace"] == NAMESPACE
                    });
                    if ours {
                        let r = &doc["roleRef"];
                        let role = (r["kind"].as_str(), r["name"].as_str());
                        bound.push((role.0.unwrap().to_owned(), role.1.unwrap().to_owned()));
                    }
                }
                _ => {}
            }
        }
    }
    for file in ROLE_FILES {
        let role = roles.iter().find(|(_, _, f, _)| f == file).unwrap();
        assert!(
            bound.contains(&(role.0.clone(), role.1.clone())),
            "{file}: not bound to the ServiceAccount"
        );
    }
    for (kind, name) in &bound {
        let (_, _, file, role) = roles
            .iter()
            .find(|(k, n, _, _)| k == kind && n == name)
            .unwrap_or_else(|| panic!("a binding names {kind} {name}, which config/rbac/ lacks"));
        assert!(
            ROLE_FILES.contains(&file.as_str()) || only_delegated_auth(role),
            "{kind} {name} ({file}) is bound to the ServiceAccount but compared with nothing"
        );
    }
    // The check of the delegated authentication role can fail.
    let more = json!({"rules": [{"apiGroups": ["authentication.k8s.io"],
        "resources": ["tokenreviews"], "verbs": ["create", "list"]}]});
    assert!(!only_delegated_auth(&more));
}
