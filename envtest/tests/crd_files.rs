//! `TestApiServer::install_crds_from` on the backend `KCR_ENVTEST_BACKEND` names: CRDs from
//! YAML (several documents per file), YAML with the `.yml` ending and JSON files, one by one
//! or a directory at a time (one level, sorted by file name), are served when it returns; a
//! file that is not all v1 CRDs, bad YAML and a missing path are typed errors naming the file,
//! and then nothing is installed.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kcr_envtest::{EnvtestError, TestApiServer};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};

const GROUP: &str = "files.kcr.example.com";

/// A namespaced v1 CRD `<plural>.files.kcr.example.com` of kind `kind`.
fn crd(plural: &str, kind: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind,
                "listKind": format!("{kind}List")},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    })
}

fn yaml(value: &Value) -> String {
    serde_saphyr::to_string(value).unwrap()
}

/// Whether `plural` is served: an object of it can be created in the server's namespace.
async fn create_one(server: &TestApiServer, plural: &str, kind: &str) -> Result<(), kube::Error> {
    let resource = ApiResource {
        group: GROUP.into(),
        version: "v1".into(),
        api_version: format!("{GROUP}/v1"),
        kind: kind.into(),
        plural: plural.into(),
    };
    let api: Api<DynamicObject> =
        Api::namespaced_with(server.client(), server.namespace(), &resource);
    let obj = DynamicObject::new("one", &resource).data(json!({"spec": {"size": 1}}));
    api.create(&PostParams::default(), &obj).await.map(|_| ())
}

async fn crd_exists(server: &TestApiServer, plural: &str) -> bool {
    Api::<CustomResourceDefinition>::all(server.client())
        .get_opt(&format!("{plural}.{GROUP}"))
        .await
        .unwrap()
        .is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crds_are_installed_from_a_directory_of_yaml_and_json_files_and_from_one_file() {
    let server = TestApiServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: String| std::fs::write(dir.path().join(name), text).unwrap();
    // Two documents, an empty one between them.
    write(
        "10-widgets.yaml",
        format!(
            "# widgets and gadgets\n---\n{}---\n---\n{}",
            yaml(&crd("widgets", "Widget")),
            yaml(&crd("gadgets", "Gadget"))
        ),
    );
    write("20-gizmos.json", crd("gizmos", "Gizmo").to_string());
    write("30-doodads.yml", yaml(&crd("doodads", "Doodad")));
    write("notes.txt", "not read".into());
    std::fs::create_dir(dir.path().join("nested")).unwrap();
    std::fs::write(
        dir.path().join("nested/extras.yaml"),
        yaml(&crd("extras", "Extra")),
    )
    .unwrap();

    let installed = server.install_crds_from(dir.path()).await.unwrap();
    assert_eq!(
        installed,
        [
            format!("widgets.{GROUP}"),
            format!("gadgets.{GROUP}"),
            format!("gizmos.{GROUP}"),
            format!("doodads.{GROUP}"),
        ]
    );
    for (plural, kind) in [
        ("widgets", "Widget"),
        ("gadgets", "Gadget"),
        ("gizmos", "Gizmo"),
        ("doodads", "Doodad"),
    ] {
        create_one(&server, plural, kind)
            .await
            .unwrap_or_else(|e| panic!("{plural} is not served: {e}"));
    }
    // Subdirectories are not read...
    assert!(!crd_exists(&server, "extras").await);
    // ...but a file can be named on its own; installing again replaces.
    let installed = server
        .install_crds_from(dir.path().join("nested/extras.yaml"))
        .await
        .unwrap();
    assert_eq!(installed, [format!("extras.{GROUP}")]);
    create_one(&server, "extras", "Extra").await.unwrap();
    let again = server
        .install_crds_from(dir.path().join("30-doodads.yml"))
        .await
        .unwrap();
    assert_eq!(again, [format!("doodads.{GROUP}")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_file_is_an_error_naming_it_and_nothing_is_installed() {
    let server = TestApiServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.yaml"), yaml(&crd("alphas", "Alpha"))).unwrap();
    std::fs::write(
        dir.path().join("b.yaml"),
        format!(
            "{}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: not-a-crd\n",
            yaml(&crd("betas", "Beta"))
        ),
    )
    .unwrap();
    let err = server.install_crds_from(dir.path()).await.unwrap_err();
    assert!(
        matches!(
            err,
            EnvtestError::CrdFile {
                document: Some(2),
                ref path,
                ..
            } if path.ends_with("b.yaml")
        ),
        "{err}"
    );
    let text = err.to_string();
    assert!(text.contains("b.yaml (document 2)"), "{text}");
    assert!(text.contains("v1 ConfigMap"), "{text}");
    // The good file before it was not installed either.
    assert!(!crd_exists(&server, "alphas").await);
    assert!(!crd_exists(&server, "betas").await);

    let bad = dir.path().join("bad.yml");
    std::fs::write(&bad, "apiVersion: [unclosed\n").unwrap();
    let err = server.install_crds_from(&bad).await.unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, EnvtestError::CrdFile { document: None, .. }),
        "{text}"
    );
    assert!(
        text.contains("bad.yml") && text.contains("not valid YAML"),
        "{text}"
    );

    let missing = dir.path().join("no-such-dir");
    let err = server.install_crds_from(&missing).await.unwrap_err();
    assert!(matches!(err, EnvtestError::CrdFile { .. }), "{err}");
    assert!(err.to_string().contains("no-such-dir"), "{err}");
}
