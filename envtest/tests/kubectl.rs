//! kubectl smoke test against the in-process server: apply -f, get -o json, label,
//! patch --type=merge, delete, get -w bounded by a timeout; also a CRD with printer columns.
//! Uses the kubectl of `tools/control-plane/build.sh`, else the one on PATH; skipped (with a
//! printed reason) without either, unless `KCR_REQUIRE_BINARIES=1` (as in CI) makes that a
//! failure.

use std::process::Output;

use kcr_envtest::TestApiServer;
use serde_json::Value;

fn kubectl_available() -> bool {
    kcr_envtest::kubectl_for_tests()
        .expect("KCR_REQUIRE_BINARIES=1 and no kubectl")
        .is_some()
}

fn kubectl_bin() -> std::path::PathBuf {
    kcr_envtest::kubectl_path().expect("kubectl was found before the test started")
}

struct Kubectl {
    kubeconfig: std::path::PathBuf,
}

impl Kubectl {
    async fn run(&self, args: &[&str]) -> Output {
        tokio::process::Command::new(kubectl_bin())
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .output()
            .await
            .expect("kubectl runs")
    }

    async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

const MANIFEST: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: smoke
  labels:
    app: smoke
data:
  greeting: hello
"#;

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo, shortNames: [gz]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer}
---
apiVersion: example.com/v1
kind: Gizmo
metadata: {name: g1}
spec: {size: 42}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_smoke() {
    if !kubectl_available() {
        println!("SKIPPED kubectl_smoke: no kubectl (build one with tools/control-plane/build.sh)");
        return;
    }
    // Own server: reads request counters (`faults()`), starts with nodes (a builder option)
    // and expects `envtest-node-0`.
    let server = TestApiServer::builder().nodes(2).start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let manifest = dir.path().join("cm.yaml");
    std::fs::write(&manifest, MANIFEST).unwrap();
    let k = Kubectl { kubeconfig };

    // Generator commands send protobuf bodies (decoded for the kinds they create).
    k.ok(&["create", "namespace", "team1"]).await;
    k.ok(&[
        "-n",
        "team1",
        "create",
        "configmap",
        "gen",
        "--from-literal=a=b",
    ])
    .await;
    k.ok(&[
        "-n",
        "team1",
        "create",
        "secret",
        "generic",
        "sec",
        "--from-literal=k=v",
    ])
    .await;
    let generated: Value = serde_json::from_str(
        &k.ok(&["-n", "team1", "get", "cm", "gen", "-o", "json"])
            .await,
    )
    .unwrap();
    assert_eq!(generated["data"]["a"], "b");
    let sec: Value = serde_json::from_str(
        &k.ok(&["-n", "team1", "get", "secret", "sec", "-o", "json"])
            .await,
    )
    .unwrap();
    assert_eq!(
        (sec["data"]["k"].as_str(), sec["type"].as_str()),
        (Some("dg=="), Some("Opaque"))
    );

    // Workload and Service generators (protobuf too); each object read back as JSON.
    k.ok(&[
        "-n",
        "team1",
        "create",
        "deployment",
        "web",
        "--image=nginx:1.27",
        "--port=8080",
        "--replicas=0",
    ])
    .await;
    k.ok(&[
        "-n",
        "team1",
        "create",
        "job",
        "once",
        "--image=busybox",
        "--",
        "echo",
        "hi",
    ])
    .await;
    k.ok(&[
        "-n",
        "team1",
        "create",
        "cronjob",
        "tick",
        "--image=busybox",
        "--schedule=*/5 * * * *",
    ])
    .await;
    k.ok(&[
        "-n",
        "team1",
        "create",
        "service",
        "nodeport",
        "web",
        "--tcp=80:8080",
        "--node-port=30080",
    ])
    .await;
    let get = |what: &'static str| {
        let k = &k;
        async move {
            let out = k.ok(&["-n", "team1", "get", what, "-o", "json"]).await;
            serde_json::from_str::<Value>(&out).unwrap()
        }
    };
    let deploy = get("deployment/web").await;
    assert_eq!(deploy["spec"]["replicas"], 0, "an explicit zero is kept");
    // kubectl scale goes through the scale subresource (found by discovery).
    k.ok(&["-n", "team1", "scale", "deployment/web", "--replicas=3"])
        .await;
    assert_eq!(get("deployment/web").await["spec"]["replicas"], 3);
    assert_eq!(
        deploy["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
        8080
    );
    assert_eq!(deploy["spec"]["selector"]["matchLabels"]["app"], "web");
    let job = get("job/once").await;
    let pod_spec = &job["spec"]["template"]["spec"];
    assert_eq!(
        (
            &pod_spec["containers"][0]["command"],
            &pod_spec["restartPolicy"]
        ),
        (
            &serde_json::json!(["echo", "hi"]),
            &serde_json::json!("Never")
        )
    );
    let cron = get("cronjob/tick").await;
    assert_eq!(cron["spec"]["schedule"], "*/5 * * * *");
    let svc = get("service/web").await;
    assert_eq!(
        svc["spec"]["ports"][0],
        serde_json::json!({"name": "80-8080", "protocol": "TCP", "port": 80,
                           "targetPort": 8080, "nodePort": 30080})
    );
    assert_eq!(svc["spec"]["type"], "NodePort");

    let nodes = k.ok(&["get", "nodes"]).await;
    assert!(
        nodes.contains("envtest-node-0") && nodes.contains("Ready"),
        "{nodes}"
    );

    // No OpenAPI document is served: client-side validation must be turned off.
    let out = k
        .ok(&[
            "apply",
            "--validate=false",
            "-f",
            manifest.to_str().unwrap(),
        ])
        .await;
    assert!(out.contains("configmap/smoke created"), "{out}");
    // Re-apply is a no-op patch.
    let out = k
        .ok(&[
            "apply",
            "--validate=false",
            "-f",
            manifest.to_str().unwrap(),
        ])
        .await;
    assert!(out.contains("configmap/smoke"), "{out}");

    let json: Value =
        serde_json::from_str(&k.ok(&["get", "configmap", "smoke", "-o", "json"]).await).unwrap();
    assert_eq!(json["data"]["greeting"], "hello");
    assert_eq!(json["metadata"]["labels"]["app"], "smoke");

    k.ok(&["label", "configmap", "smoke", "tier=backend"]).await;
    k.ok(&[
        "patch",
        "configmap",
        "smoke",
        "--type=merge",
        "-p",
        r#"{"data":{"extra":"1"}}"#,
    ])
    .await;
    let json: Value =
        serde_json::from_str(&k.ok(&["get", "cm", "smoke", "-o", "json"]).await).unwrap();
    assert_eq!(json["metadata"]["labels"]["tier"], "backend");
    assert_eq!(json["data"]["extra"], "1");

    // get -w bounded by the server-side timeout: sees the delete that happens meanwhile.
    let watch = tokio::spawn({
        let kubeconfig = k.kubeconfig.clone();
        async move {
            tokio::process::Command::new(kubectl_bin())
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args([
                    "get",
                    "configmaps",
                    "-w",
                    "--request-timeout=3s",
                    "-o",
                    "json",
                    "--output-watch-events",
                ])
                .output()
                .await
                .expect("kubectl runs")
        }
    });
    // Wait until the watch is registered by the server before deleting.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while server.faults().request_count("watch", "configmaps") == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "kubectl never started watching"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let out = k.ok(&["delete", "configmap", "smoke"]).await;
    assert!(out.contains("deleted"), "{out}");
    let watched = watch.await.unwrap();
    let text = String::from_utf8_lossy(&watched.stdout);
    let compact: String = text.split_whitespace().collect();
    assert!(
        compact.contains(r#""type":"ADDED""#) && compact.contains(r#""name":"smoke""#),
        "{text}"
    );
    assert!(compact.contains(r#""type":"DELETED""#), "{text}");
    let out = k.run(&["get", "configmap", "smoke"]).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("NotFound"));

    // CRD + custom object in one apply; printer columns show up in kubectl get.
    let crd = dir.path().join("crd.yaml");
    std::fs::write(&crd, CRD).unwrap();
    // The CRD must exist before its object can be mapped: apply twice like users do.
    let _ = k
        .run(&["apply", "--validate=false", "-f", crd.to_str().unwrap()])
        .await;
    k.ok(&["apply", "--validate=false", "-f", crd.to_str().unwrap()])
        .await;
    let table = k.ok(&["get", "gz"]).await;
    assert!(
        table.contains("SIZE") && table.contains("42") && table.contains("g1"),
        "{table}"
    );
    // Unknown fields: kubectl asks for strict validation and gets a BadRequest...
    let bogus = dir.path().join("bogus.yaml");
    std::fs::write(&bogus, "apiVersion: example.com/v1\nkind: Gizmo\nmetadata: {name: g2}\nspec: {size: 1, bogus: 2}\n").unwrap();
    let out = k.run(&["apply", "-f", bogus.to_str().unwrap()]).await;
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown field \"spec.bogus\""),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // ...and with --validate=false the field is pruned.
    k.ok(&["apply", "--validate=false", "-f", bogus.to_str().unwrap()])
        .await;
    let g2: Value =
        serde_json::from_str(&k.ok(&["get", "gizmo", "g2", "-o", "json"]).await).unwrap();
    assert_eq!(g2["spec"], serde_json::json!({"size": 1}));
    // Schema validation reaches kubectl as an error.
    let out = k
        .run(&[
            "patch",
            "gizmo",
            "g1",
            "--type=merge",
            "-p",
            r#"{"spec":{"size":"big"}}"#,
        ])
        .await;
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("spec.size"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
