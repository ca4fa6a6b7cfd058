//! `config/`, the deployment, kept true to the code:
//!
//! - the generated files (the CRD, the webhook configurations) are what the code generates
//!   now; `CRONJOB_UPDATE_CONFIG=1 cargo test --test config` rewrites them;
//! - every file parses, every manifest has a kind and a name, and each `kustomization.yaml`
//!   lists exactly the files of its folder (`default/` lists the folders);
//! - the webhook configurations call the paths the webhook server registers, for the
//!   resources and operations it registers them for, through the Service in front of the
//!   Deployment's webhook port, with the CA of the Certificate whose Secret the Deployment
//!   mounts where the binary reads its certificate;
//! - the binary accepts the Deployment's arguments, and the ports, probes and mounts they name
//!   are the Deployment's;
//! - the sample is a CronJob the validating webhook allows;
//! - what `kubectl apply -k config/default` sends (cert-manager's kinds aside) is accepted by
//!   the API server (on the real backend, kube-apiserver's validation of every kind).
//!
//! What the RBAC grants is proven against the controller's requests in `tests/rbac.rs`.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use cronjob_operator::manifests::{self, GENERATED_HEADER, INJECT_CA_FROM};
use cronjob_operator::webhook::{self, MUTATE_PATH, VALIDATE_PATH};
use cronjob_operator::{CronJob, api::GROUP};
use kcr_envtest::TestApiServer;
use kcr_webhook::{ServerOptions, WebhookServer, WebhookType};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use serde_json::Value;

/// The generated files, under `config/`.
const CRD_FILE: &str = "crd/bases/batch.example.kcr.dev_cronjobs.yaml";
const WEBHOOK_FILE: &str = "webhook/manifests.yaml";

fn config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("config")
}

/// The YAML documents of `config/<file>`, as JSON values.
fn docs(file: &str) -> Vec<Value> {
    let path = config().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// The one document of `file` of `kind`.
fn doc(file: &str, kind: &str) -> Value {
    let mut found: Vec<Value> = docs(file)
        .into_iter()
        .filter(|d| d["kind"] == kind)
        .collect();
    assert_eq!(found.len(), 1, "{file}: one {kind}");
    found.remove(0)
}

/// Every `.yaml` file under `config/`, relative to it, sorted.
fn yaml_files() -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "yaml") {
                let rel = p.strip_prefix(config()).unwrap();
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(&config(), &mut out);
    out.sort();
    out
}

fn strings(v: &Value) -> Vec<&str> {
    let items = v.as_array().map(Vec::as_slice).unwrap_or_default();
    items
        .iter()
        .map(|s| s.as_str().expect("a string"))
        .collect()
}

// ANCHOR: generated_test
#[tokio::test]
async fn the_generated_files_are_what_the_code_generates() {
    let webhooks = manifests::webhook_manifests_yaml().await.unwrap();
    let generated = [
        (CRD_FILE, manifests::crd_yaml().unwrap()),
        (WEBHOOK_FILE, webhooks),
    ];
    let update = std::env::var("CRONJOB_UPDATE_CONFIG").is_ok_and(|v| v == "1");
    for (file, yaml) in generated {
        let path = config().join(file);
        let want = format!("{GENERATED_HEADER}{yaml}");
        if update {
            std::fs::write(&path, &want).unwrap();
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        let first_difference = have.lines().zip(want.lines()).position(|(h, w)| h != w);
        assert!(
            have == want,
            "config/{file} is not what the code generates (first difference at line {}); \
             run CRONJOB_UPDATE_CONFIG=1 cargo test --test config",
            first_difference.map_or(have.lines().count().min(want.lines().count()), |i| i) + 1,
        );
    }
}
// ANCHOR_END: generated_test

#[test]
fn the_crd_file_installs_the_crd_of_the_rust_type() {
    let crd = doc(CRD_FILE, "CustomResourceDefinition");
    let ours = serde_json::to_value(<CronJob as kube::CustomResourceExt>::crd()).unwrap();
    assert_eq!(crd, ours);
    assert_eq!(crd["metadata"]["name"], "cronjobs.batch.example.kcr.dev");
}

#[test]
fn every_manifest_parses_and_has_a_kind_and_a_name() {
    let files = yaml_files();
    assert!(files.len() >= 20, "{files:?}");
    for file in files.iter().filter(|f| !f.ends_with("kustomization.yaml")) {
        let docs = docs(file);
        assert!(!docs.is_empty(), "{file}: no document");
        for d in docs {
            for field in ["/apiVersion", "/kind", "/metadata/name"] {
                let value = d.pointer(field).and_then(Value::as_str);
                assert!(value.is_some_and(|v| !v.is_empty()), "{file}: {field}");
            }
        }
    }
}

#[test]
fn each_kustomization_lists_the_files_of_its_folder() {
    let files = yaml_files();
    let kustomizations: Vec<&String> = files
        .iter()
        .filter(|f| f.ends_with("kustomization.yaml"))
        .collect();
    assert!(kustomizations.len() >= 7, "{kustomizations:?}");
    for k in kustomizations {
        let dir = Path::new(k.as_str()).parent().unwrap();
        let resources: BTreeSet<String> = strings(&docs(k)[0]["resources"])
            .into_iter()
            .map(|r| dir.join(r).to_string_lossy().into_owned())
            .collect();
        // Files of the folder and below, other than kustomizations.
        let own: BTreeSet<String> = files
            .iter()
            .filter(|f| {
                Path::new(f.as_str()).starts_with(dir) && !f.ends_with("kustomization.yaml")
            })
            .cloned()
            .collect();
        for r in &resources {
            let path = config().join(r);
            assert!(path.exists(), "{k} lists {r}, which does not exist");
        }
        let listed_files: BTreeSet<String> = resources
            .iter()
            .filter(|r| config().join(r).is_file())
            .cloned()
            .collect();
        assert_eq!(
            listed_files, own,
            "{k}: the files listed and the files there"
        );
    }
    // The default kustomization takes every folder but the samples.
    let default = docs("default/kustomization.yaml").remove(0);
    let default: BTreeSet<&str> = strings(&default["resources"])
        .into_iter()
        .filter(|r| r.starts_with("../"))
        .collect();
    let want: BTreeSet<&str> = [
        "../crd",
        "../rbac",
        "../manager",
        "../webhook",
        "../certmanager",
    ]
    .into();
    assert_eq!(default, want);
}

/// The Deployment's container, and its arguments as `--flag=value` pairs.
fn manager() -> (Value, Value, Vec<String>) {
    let deployment = doc("manager/manager.yaml", "Deployment");
    let pod = deployment["spec"]["template"]["spec"].clone();
    let container = pod["containers"][0].clone();
    let args = strings(&container["args"])
        .into_iter()
        .map(str::to_owned)
        .collect();
    (pod, container, args)
}

/// The value of `--<flag>=` in `args`.
fn flag<'a>(args: &'a [String], flag: &str) -> &'a str {
    let prefix = format!("--{flag}=");
    args.iter()
        .find_map(|a| a.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("--{flag} missing from {args:?}"))
}

/// The container port named `name`.
fn container_port(container: &Value, name: &str) -> u64 {
    let ports = container["ports"].as_array().unwrap();
    let port = ports.iter().find(|p| p["name"] == name);
    port.and_then(|p| p["containerPort"].as_u64())
        .unwrap_or_else(|| panic!("no container port {name}"))
}

/// The Secret mounted (read-only) at `dir` in the Deployment's pod.
fn secret_mounted_at(pod: &Value, container: &Value, dir: &str) -> String {
    let mounts = container["volumeMounts"].as_array().unwrap();
    let mount = mounts.iter().find(|m| m["mountPath"] == dir);
    let mount = mount.unwrap_or_else(|| panic!("nothing is mounted at {dir}"));
    assert_eq!(mount["readOnly"], true, "{dir} is mounted read-only");
    let volumes = pod["volumes"].as_array().unwrap();
    let volume = volumes.iter().find(|v| v["name"] == mount["name"]).unwrap();
    volume["secret"]["secretName"].as_str().unwrap().to_owned()
}

/// The cert-manager Certificate that issues `secret`.
fn certificate_of(secret: &str) -> Value {
    let mut all = docs("certmanager/certificate-webhook.yaml");
    all.extend(docs("certmanager/certificate-metrics.yaml"));
    all.into_iter()
        .find(|c| c["kind"] == "Certificate" && c["spec"]["secretName"] == secret)
        .unwrap_or_else(|| panic!("no Certificate issues the Secret {secret}"))
}

fn has_dns_name(certificate: &Value, service: &Value) -> bool {
    let name = format!(
        "{}.{}.svc",
        service["metadata"]["name"].as_str().unwrap(),
        service["metadata"]["namespace"].as_str().unwrap()
    );
    strings(&certificate["spec"]["dnsNames"]).contains(&name.as_str())
}

#[tokio::test]
async fn the_webhook_configurations_call_the_registered_webhooks() {
    // What the binary registers.
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let server = WebhookServer::bind(ServerOptions::default().bind_address(loopback))
        .await
        .unwrap();
    let paths = webhook::register(&server).unwrap();
    assert_eq!(paths, [MUTATE_PATH, VALIDATE_PATH]);

    let service = doc("webhook/service.yaml", "Service");
    let (pod, container, args) = manager();
    let mut called = Vec::new();
    for (kind, webhook_type) in [
        ("MutatingWebhookConfiguration", WebhookType::Mutating),
        ("ValidatingWebhookConfiguration", WebhookType::Validating),
    ] {
        let configuration = doc(WEBHOOK_FILE, kind);
        // cert-manager injects the CA of the webhook server's Certificate.
        let inject = configuration["metadata"]["annotations"][INJECT_CA_FROM].as_str();
        let (namespace, name) = inject.and_then(|i| i.split_once('/')).unwrap();
        let secret = secret_mounted_at(&pod, &container, flag(&args, "webhook-cert-dir"));
        let certificate = certificate_of(&secret);
        assert_eq!(certificate["metadata"]["name"], name);
        assert_eq!(certificate["metadata"]["namespace"], namespace);
        assert!(has_dns_name(&certificate, &service), "{kind}: DNS names");

        for w in configuration["webhooks"].as_array().unwrap() {
            let path = w["clientConfig"]["service"]["path"].as_str().unwrap();
            let registered = server.registrations();
            let r = registered.iter().find(|r| r.path == path);
            let r = r.unwrap_or_else(|| panic!("{kind} calls {path}, which nothing serves"));
            assert_eq!(r.webhook_type, webhook_type, "{path}");
            let rule = &w["rules"][0];
            assert_eq!(strings(&rule["apiGroups"]), [GROUP]);
            assert_eq!(strings(&rule["apiVersions"]), [r.version.as_str()]);
            assert_eq!(strings(&rule["resources"]), ["cronjobs"]);
            assert_eq!(strings(&rule["operations"]), r.operations);
            assert!(w["clientConfig"].get("caBundle").is_none(), "injected");
            // Through the Service, to the Deployment's webhook port.
            let svc = &w["clientConfig"]["service"];
            assert_eq!(svc["name"], service["metadata"]["name"]);
            assert_eq!(svc["namespace"], service["metadata"]["namespace"]);
            assert_eq!(svc["port"], service["spec"]["ports"][0]["port"]);
            called.push(path.to_owned());
        }
    }
    assert_eq!(called, paths, "every registered webhook is called, once");

    let target = service["spec"]["ports"][0]["targetPort"].as_str().unwrap();
    let port = flag(&args, "webhook-bind-address").trim_start_matches(':');
    assert_eq!(container_port(&container, target).to_string(), port);
    let labels = &pod_labels();
    for (k, v) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&labels[k], v, "the Service selects the Deployment's pods");
    }
}

fn pod_labels() -> Value {
    let deployment = doc("manager/manager.yaml", "Deployment");
    deployment["spec"]["template"]["metadata"]["labels"].clone()
}

#[test]
fn the_deployment_runs_the_binary_with_probes_secure_metrics_and_no_root() {
    let (pod, container, args) = manager();
    let deployment = doc("manager/manager.yaml", "Deployment");
    assert_eq!(
        deployment["metadata"]["namespace"],
        manifests::NAMESPACE,
        "the namespace of the leader election Role and the webhook Service"
    );
    assert_eq!(pod["serviceAccountName"], manifests::SERVICE_ACCOUNT);
    assert_eq!(args[0], "run");
    assert_eq!(
        container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
    assert_eq!(container["env"][0]["name"], "POD_NAMESPACE");

    // Probes on the probe port.
    let probes = flag(&args, "health-probe-bind-address").trim_start_matches(':');
    assert_eq!(container_port(&container, "probes").to_string(), probes);
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");

    // Metrics over HTTPS, with a certificate for the metrics Service.
    let metrics = flag(&args, "metrics-bind-address").trim_start_matches(':');
    assert_eq!(container_port(&container, "metrics").to_string(), metrics);
    let secret = secret_mounted_at(&pod, &container, flag(&args, "metrics-cert-dir"));
    let service = doc("default/metrics_service.yaml", "Service");
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "metrics");
    assert!(has_dns_name(&certificate_of(&secret), &service));

    // Not root, nothing more than it needs.
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let security = &container["securityContext"];
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(strings(&security["capabilities"]["drop"]), ["ALL"]);
}

/// Runs the binary with `args` and no cluster to reach (no kubeconfig, no in-cluster
/// configuration): the exit code and stderr. Killed, and failing the test, if it is still
/// running after 30 s (it found a cluster after all).
fn run_binary(args: &[String]) -> (Option<i32>, String) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_cronjob-operator"))
        .args(args)
        .env("KUBECONFIG", "/nonexistent/kcr-cronjob-example/kubeconfig")
        .env("HOME", "/nonexistent/kcr-cronjob-example")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("ENABLE_WEBHOOKS")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().ok();
            panic!("cronjob-operator {args:?} is still running after 30 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_binary_accepts_the_deployments_arguments() {
    let (_, _, args) = manager();
    // Past the arguments, it fails for want of a cluster (status 1), not on an argument
    // (usage, status 2).
    let (code, stderr) = run_binary(&args);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(!stderr.contains("usage:"), "{stderr}");
    // An argument it does not know is refused: the check above can fail.
    let mut bad = args.clone();
    bad.push("--webhook-port=9443".into());
    let (code, stderr) = run_binary(&bad);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("unknown option \"--webhook-port=9443\""),
        "{stderr}"
    );
}

#[test]
fn the_sample_is_a_cronjob_the_validator_allows() {
    let sample: CronJob =
        serde_json::from_value(doc("samples/batch_v1_cronjob.yaml", "CronJob")).unwrap();
    assert!(webhook::validate(&sample).is_empty());
    assert!(sample.spec.job_template.spec.is_some());
}

/// The documents of the kustomization in `config/<dir>`, following its `resources` (files and
/// folders) in order: what `kubectl kustomize` gives, as these kustomizations use no
/// transformers.
fn kustomize(dir: &Path) -> Vec<Value> {
    let kustomization = docs(&dir.join("kustomization.yaml").to_string_lossy()).remove(0);
    let mut out = Vec::new();
    for resource in strings(&kustomization["resources"]) {
        let path = dir.join(resource);
        if config().join(&path).is_dir() {
            out.extend(kustomize(&normalize(&path)));
        } else {
            out.extend(docs(&normalize(&path).to_string_lossy()));
        }
    }
    out
}

/// `path` without `..` components.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_default_applies_to_the_api_server() -> anyhow::Result<()> {
    let all = kustomize(Path::new("default"));
    let (certmanager, mut ours): (Vec<Value>, Vec<Value>) = all.into_iter().partition(|d| {
        d["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("cert-manager.io/"))
    });
    // cert-manager's Issuer and Certificates need cert-manager's CRDs, which this server lacks.
    assert_eq!(certmanager.len(), 3);
    // kubectl's order: the Namespace and the CRD before what lives in or uses them.
    let rank = |d: &Value| match d["kind"].as_str() {
        Some("Namespace") => 0,
        Some("CustomResourceDefinition") => 1,
        _ => 2,
    };
    ours.sort_by_key(rank);

    // A server of its own: the files make cluster-wide objects with fixed names.
    let server = TestApiServer::start().await?;
    let client = server.client();
    let mut created = Vec::new();
    for doc in ours {
        let object: DynamicObject = serde_json::from_value(doc)?;
        let types = object.types.clone().unwrap_or_default();
        let (group, version) = types
            .api_version
            .rsplit_once('/')
            .unwrap_or(("", &types.api_version));
        let gvk = GroupVersionKind::gvk(group, version, &types.kind);
        let (resource, _) = kube::discovery::pinned_kind(&client, &gvk).await?;
        let api: Api<DynamicObject> = match object.metadata.namespace.as_deref() {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        let name = object.metadata.name.clone().unwrap_or_default();
        // `kubectl apply --server-side`, refusing unknown fields (a misspelt one included).
        let params = PatchParams::apply("kubectl").validation_strict();
        api.patch(&name, &params, &Patch::Apply(&object))
            .await
            .map_err(|e| anyhow::anyhow!("applying {} {name}: {e}", types.kind))?;
        created.push(format!("{} {name}", types.kind));
    }
    assert_eq!(created.len(), 15, "{created:#?}");
    Ok(())
}

/// `(kind, namespace, name)` of each document, with the document, sorted.
fn by_id(docs: Vec<Value>) -> Vec<((String, String, String), Value)> {
    let field = |d: &Value, pointer: &str| {
        d.pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut out: Vec<_> = docs
        .into_iter()
        .map(|d| {
            let id = (
                field(&d, "/kind"),
                field(&d, "/metadata/namespace"),
                field(&d, "/metadata/name"),
            );
            (id, d)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// kubectl's kustomize builds `config/default` and `config/samples` into the documents the
/// other tests read (so they test what `kubectl apply -k` applies). kubectl is the control
/// plane's (`KUBEBUILDER_ASSETS`) or the first on `PATH`; without one the test says it is
/// skipped, unless `KCR_REQUIRE_BINARIES=1` (CI) makes that a failure.
#[test]
fn kubectl_kustomize_builds_what_the_tests_read() {
    let kubectl = match kcr_envtest::kubectl_for_tests() {
        Ok(Some(path)) => path,
        Ok(None) => {
            println!("SKIPPED kubectl_kustomize_builds_what_the_tests_read: no kubectl");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    for dir in ["default", "samples"] {
        let out = std::process::Command::new(&kubectl)
            .arg("kustomize")
            .arg(config().join(dir))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "kubectl kustomize config/{dir}: {stderr}"
        );
        let built: Vec<Value> =
            serde_saphyr::from_multiple(&String::from_utf8_lossy(&out.stdout)).unwrap();
        let read = kustomize(Path::new(dir));
        let (built, read) = (by_id(built), by_id(read));
        let ids = |docs: &[((String, String, String), Value)]| -> Vec<String> {
            docs.iter().map(|(id, _)| format!("{id:?}")).collect()
        };
        assert_eq!(ids(&built), ids(&read), "config/{dir}");
        for ((id, b), (_, r)) in built.iter().zip(&read) {
            let difference = first_difference(&integral(b), &integral(r), String::new());
            assert_eq!(
                difference, None,
                "config/{dir}: {id:?}: kustomize's and the file's"
            );
        }
    }
}

/// `v` with every float that is a whole number as an integer: kustomize writes the CRD's
/// `minimum: 0.0` as `0`, the same number.
fn integral(v: &Value) -> Value {
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9e15 => Value::from(f as i64),
            _ => v.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(integral).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), integral(v))).collect())
        }
        other => other.clone(),
    }
}

/// The JSON pointer of the first place where `a` and `b` differ, with both values there.
fn first_difference(a: &Value, b: &Value, at: String) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| {
                let (x, y) = (&x.get(k), &y.get(k));
                match (x, y) {
                    (Some(x), Some(y)) => first_difference(x, y, format!("{at}/{k}")),
                    _ => Some(format!("{at}/{k}: {x:?} vs {y:?}")),
                }
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (x, y))| first_difference(x, y, format!("{at}/{i}"))),
        _ if a == b => None,
        _ => Some(format!("{at}: {a} vs {b}")),
    }
}
