//! The deployment files under `config/`: every file parses, the kustomization lists exactly the
//! files that exist, the sample is a valid NodePool, and the Deployment wires the same ports and
//! paths as the code.

use std::path::{Path, PathBuf};

use nodepool_operator::crd::NodePool;
use serde_json::Value;

fn config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("config")
}

/// The YAML documents of `path`, as JSON values.
fn docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "yaml") {
            out.push(p);
        }
    }
}

#[test]
fn every_manifest_has_kind_and_name() {
    let mut files = Vec::new();
    yaml_files(&config(), &mut files);
    assert!(files.len() >= 12, "{files:?}");
    for f in files.iter().filter(|f| !f.ends_with("kustomization.yaml")) {
        for d in docs(f) {
            assert!(
                d["apiVersion"].as_str().is_some(),
                "{}: apiVersion",
                f.display()
            );
            assert!(d["kind"].as_str().is_some(), "{}: kind", f.display());
            assert!(
                d["metadata"]["name"].as_str().is_some(),
                "{}: name",
                f.display()
            );
        }
    }
}

#[test]
fn kustomization_lists_every_deployable_file() {
    let k = &docs(&config().join("kustomization.yaml"))[0];
    let listed: Vec<String> = k["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_owned())
        .collect();
    for r in &listed {
        assert!(config().join(r).is_file(), "{r} is listed but missing");
    }
    let mut files = Vec::new();
    yaml_files(&config(), &mut files);
    for f in files {
        let rel = f
            .strip_prefix(config())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if rel == "kustomization.yaml" || rel.starts_with("samples/") {
            continue;
        }
        assert!(
            listed.contains(&rel),
            "{rel} exists but is not in kustomization.yaml"
        );
    }
}

#[test]
fn sample_is_a_valid_pool() {
    let path = config().join("samples/nodes_v1_nodepool.yaml");
    let doc = &docs(&path)[0];
    let json = serde_json::to_value(doc).unwrap();
    let pool: NodePool = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(pool.metadata.name.as_deref(), Some("worker"));
    assert!(nodepool_operator::validation::validate(&json).is_empty());
}

#[test]
fn deployment_matches_the_code() {
    let d = docs(&config().join("manager/manager.yaml"));
    let deploy = d.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let c = &deploy["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[0], "run");
    assert!(args.contains(&"--leader-elect"));
    assert!(args.contains(&"--webhook-port=9443"));
    let cert_dir = args
        .iter()
        .find_map(|a| a.strip_prefix("--cert-dir="))
        .unwrap();
    assert_eq!(c["volumeMounts"][0]["mountPath"].as_str(), Some(cert_dir));
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(
        deploy["metadata"]["namespace"].as_str(),
        Some(nodepool_operator::deploy::NAMESPACE)
    );
    let svc = &docs(&config().join("webhook/service.yaml"))[0];
    assert_eq!(
        svc["metadata"]["name"].as_str(),
        Some(nodepool_operator::deploy::WEBHOOK_SERVICE)
    );
    assert_eq!(
        svc["spec"]["ports"][0]["targetPort"].as_u64(),
        Some(u64::from(nodepool_operator::webhook::DEFAULT_PORT))
    );
    let secret = deploy["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"]
        .as_str()
        .unwrap();
    let cert = docs(&config().join("certmanager/certificate.yaml"));
    let certificate = cert.iter().find(|d| d["kind"] == "Certificate").unwrap();
    assert_eq!(certificate["spec"]["secretName"].as_str(), Some(secret));
}

/// The shipped Deployment serves `/metrics` securely, so the metrics-auth binding in the
/// kustomization is used: its certificate directory is a mounted Secret that cert-manager
/// issues, and the metrics Service points at the port the operator binds.
#[test]
fn deployment_serves_metrics_securely_with_an_issued_certificate() {
    let d = docs(&config().join("manager/manager.yaml"));
    let deploy = d.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let pod = &deploy["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(args.contains(&"--metrics-secure"), "{args:?}");
    let flag = |name: &str| {
        args.iter()
            .find_map(|a| a.strip_prefix(name))
            .unwrap_or_else(|| panic!("{name} missing from {args:?}"))
    };
    let port: u64 = flag("--metrics-bind-address=:").parse().unwrap();
    let cert_dir = flag("--metrics-cert-dir=");

    // The container port named `metrics` is the bound port; the Service targets that name.
    let ports = c["ports"].as_array().unwrap();
    let named = ports.iter().find(|p| p["name"] == "metrics").unwrap();
    assert_eq!(named["containerPort"].as_u64(), Some(port));
    let svc = &docs(&config().join("manager/metrics_service.yaml"))[0];
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], "metrics");
    assert_eq!(
        svc["spec"]["selector"],
        deploy["spec"]["selector"]["matchLabels"]
    );

    // The directory is a read-only mount of a Secret a cert-manager Certificate issues, for the
    // Service's DNS name.
    let mount = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"].as_str() == Some(cert_dir))
        .unwrap_or_else(|| panic!("nothing mounted at {cert_dir}"));
    assert_eq!(mount["readOnly"], true);
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap();
    let secret = volume["secret"]["secretName"].as_str().unwrap();
    let certs = docs(&config().join("certmanager/certificate.yaml"));
    let certificate = certs
        .iter()
        .find(|d| d["kind"] == "Certificate" && d["spec"]["secretName"].as_str() == Some(secret))
        .unwrap_or_else(|| panic!("no Certificate issues Secret {secret}"));
    let dns = format!(
        "{}.{}.svc",
        svc["metadata"]["name"].as_str().unwrap(),
        svc["metadata"]["namespace"].as_str().unwrap()
    );
    assert!(
        certificate["spec"]["dnsNames"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str() == Some(dns.as_str())),
        "the metrics certificate does not name {dns}"
    );

    // The secured endpoint reviews tokens, so the operator's account is bound to the
    // metrics-auth role.
    let binding = &docs(&config().join("rbac/metrics_auth_role_binding.yaml"))[0];
    assert_eq!(binding["subjects"][0]["name"], pod["serviceAccountName"]);
}
