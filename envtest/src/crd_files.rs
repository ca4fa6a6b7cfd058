//! Reading CustomResourceDefinitions from YAML and JSON files, for
//! [`TestApiServer::install_crds_from`](crate::TestApiServer::install_crds_from).
//!
//! A file holds one or more YAML documents (`---` separated; empty documents are skipped) or,
//! when its name ends in `.json`, one JSON object. A directory stands for every `*.yaml`,
//! `*.yml` and `*.json` file directly in it, in the order of their names; subdirectories and
//! other files are not read (as Go envtest's `CRDInstallOptions.Paths`, which reads one level).
//! Every document must be an `apiextensions.k8s.io/v1` CustomResourceDefinition. Everything is
//! read and checked before anything is installed, so a bad file installs nothing.

use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

use crate::error::EnvtestError;

/// The file name endings a directory's CRD files have.
const EXTENSIONS: [&str; 3] = ["yaml", "yml", "json"];

/// One CRD read from a file: its name and the document.
pub(crate) struct CrdDocument {
    /// `metadata.name`.
    pub name: String,
    /// The document as JSON.
    pub value: Value,
}

fn crd_file_error(path: &Path, document: Option<usize>, reason: impl Into<String>) -> EnvtestError {
    EnvtestError::CrdFile {
        path: path.display().to_string(),
        document,
        reason: reason.into(),
    }
}

/// The CRDs of `path` (a file or a directory, see the module docs), in install order.
pub(crate) fn read(path: &Path) -> Result<Vec<CrdDocument>, EnvtestError> {
    let metadata = std::fs::metadata(path).map_err(|e| {
        crd_file_error(
            path,
            None,
            format!("cannot read it ({e}); give a CRD file or a directory of them"),
        )
    })?;
    let files = if metadata.is_dir() {
        let files = crd_files_in(path)?;
        if files.is_empty() {
            return Err(crd_file_error(
                path,
                None,
                "the directory holds no *.yaml, *.yml or *.json file (subdirectories are not read)",
            ));
        }
        files
    } else {
        vec![path.to_path_buf()]
    };
    let mut crds = Vec::new();
    for file in &files {
        crds.extend(read_file(file)?);
    }
    if crds.is_empty() {
        return Err(crd_file_error(
            path,
            None,
            "it holds no CustomResourceDefinition (every document is empty)",
        ));
    }
    Ok(crds)
}

/// The CRD files directly in `dir`, sorted by name.
fn crd_files_in(dir: &Path) -> Result<Vec<PathBuf>, EnvtestError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| crd_file_error(dir, None, format!("cannot list the directory: {e}")))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry
            .map_err(|e| crd_file_error(dir, None, format!("cannot list the directory: {e}")))?;
        let path = entry.path();
        let wanted = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()));
        // `is_file` follows symbolic links, as reading the file will.
        if wanted && path.is_file() {
            files.push(path);
        }
    }
    files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    Ok(files)
}

/// Whether `path` is read as JSON (its name ends in `.json`) rather than YAML.
fn is_json(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

/// The CRDs of one file, in document order.
fn read_file(path: &Path) -> Result<Vec<CrdDocument>, EnvtestError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| crd_file_error(path, None, format!("cannot read the file: {e}")))?;
    let documents: Vec<Value> = if is_json(path) {
        let value = serde_json::from_str(&text)
            .map_err(|e| crd_file_error(path, None, format!("not valid JSON: {e}")))?;
        vec![value]
    } else {
        serde_saphyr::from_multiple(&text)
            .map_err(|e| crd_file_error(path, None, format!("not valid YAML: {e}")))?
    };
    documents
        .into_iter()
        .filter(|d| !d.is_null())
        .enumerate()
        .map(|(i, value)| {
            let name = check_crd(&value).map_err(|why| crd_file_error(path, Some(i + 1), why))?;
            Ok(CrdDocument { name, value })
        })
        .collect()
}

/// The name of `doc` when it is an `apiextensions.k8s.io/v1` CustomResourceDefinition,
/// otherwise what it is instead.
fn check_crd(doc: &Value) -> Result<String, String> {
    if !doc.is_object() {
        return Err(format!(
            "the document is not an object but {}",
            match doc {
                Value::Array(_) => "a list",
                Value::String(_) => "a string",
                Value::Number(_) => "a number",
                Value::Bool(_) => "a boolean",
                _ => "something else",
            }
        ));
    }
    let api_version = doc["apiVersion"].as_str().unwrap_or_default();
    let kind = doc["kind"].as_str().unwrap_or_default();
    if kind != "CustomResourceDefinition" {
        let what = if kind.is_empty() {
            "an object without a kind".to_string()
        } else {
            format!("a {api_version} {kind}")
        };
        return Err(format!(
            "the document is {what}, not an apiextensions.k8s.io/v1 CustomResourceDefinition \
             (install other objects with TestApiServer::upsert)"
        ));
    }
    if api_version != "apiextensions.k8s.io/v1" {
        return Err(format!(
            "the CustomResourceDefinition is {api_version:?}; only apiextensions.k8s.io/v1 is \
             served (v1beta1 was removed in Kubernetes 1.22)"
        ));
    }
    let name = doc["metadata"]["name"].as_str().unwrap_or_default();
    if name.is_empty() {
        return Err("the CustomResourceDefinition has no metadata.name".to_string());
    }
    serde_json::from_value::<CustomResourceDefinition>(doc.clone()).map_err(|e| {
        format!("CustomResourceDefinition {name} does not have the fields of one: {e}")
    })?;
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd_yaml(plural: &str) -> String {
        format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: {plural}.example.com\nspec:\n  group: example.com\n  scope: Namespaced\n  names:\n    plural: {plural}\n    kind: K{plural}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n"
        )
    }

    fn names(crds: &[CrdDocument]) -> Vec<&str> {
        crds.iter().map(|c| c.name.as_str()).collect()
    }

    fn message(result: Result<Vec<CrdDocument>, EnvtestError>) -> (EnvtestError, String) {
        match result {
            Ok(crds) => panic!("read {:?}", names(&crds)),
            Err(e) => {
                let text = e.to_string();
                (e, text)
            }
        }
    }

    #[test]
    fn a_directory_is_its_crd_files_in_name_order_one_level_deep() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        write(
            "b.yaml",
            &format!("---\n{}---\n\n---\n{}", crd_yaml("bees"), crd_yaml("bats")),
        );
        write("a.YML", &crd_yaml("ants"));
        let json: Value = serde_saphyr::from_str(&crd_yaml("cats")).unwrap();
        write("c.json", &json.to_string());
        write("README.md", "not a CRD");
        std::fs::create_dir(dir.path().join("nested")).unwrap();
        std::fs::write(dir.path().join("nested/d.yaml"), crd_yaml("dogs")).unwrap();
        let crds = read(dir.path()).unwrap();
        assert_eq!(
            names(&crds),
            [
                "ants.example.com",
                "bees.example.com",
                "bats.example.com",
                "cats.example.com"
            ]
        );
        assert_eq!(crds[3].value["spec"]["names"]["kind"], "Kcats");
        // A file is read whatever its name.
        let single = read(&dir.path().join("nested/d.yaml")).unwrap();
        assert_eq!(names(&single), ["dogs.example.com"]);
    }

    #[test]
    fn a_document_that_is_no_v1_crd_names_its_file_and_index() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mixed.yaml");
        std::fs::write(
            &file,
            format!(
                "{}---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
                crd_yaml("ants")
            ),
        )
        .unwrap();
        let (err, text) = message(read(&file));
        assert!(
            matches!(
                err,
                EnvtestError::CrdFile {
                    document: Some(2),
                    ..
                }
            ),
            "{text}"
        );
        assert!(text.contains("mixed.yaml (document 2)"), "{text}");
        assert!(text.contains("a v1 ConfigMap"), "{text}");

        std::fs::write(&file, crd_yaml("ants").replace("/v1\n", "/v1beta1\n")).unwrap();
        let (_, text) = message(read(&file));
        assert!(text.contains("apiextensions.k8s.io/v1beta1"), "{text}");
        assert!(text.contains("(document 1)"), "{text}");

        std::fs::write(&file, "- a\n- b\n").unwrap();
        let (_, text) = message(read(&file));
        assert!(text.contains("not an object but a list"), "{text}");

        std::fs::write(
            &file,
            crd_yaml("ants").replace("  name: ants.example.com\n", ""),
        )
        .unwrap();
        let (_, text) = message(read(&file));
        assert!(text.contains("no metadata.name"), "{text}");

        std::fs::write(
            &file,
            crd_yaml("ants").replace("scope: Namespaced", "scope: [1]"),
        )
        .unwrap();
        let (_, text) = message(read(&file));
        assert!(text.contains("does not have the fields of one"), "{text}");
    }

    #[test]
    fn unreadable_and_unparsable_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let (err, text) = message(read(&dir.path().join("missing.yaml")));
        assert!(
            matches!(err, EnvtestError::CrdFile { document: None, .. }),
            "{text}"
        );
        assert!(text.contains("missing.yaml"), "{text}");

        let (_, text) = message(read(dir.path()));
        assert!(text.contains("no *.yaml, *.yml or *.json file"), "{text}");

        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, "a: [1, 2\nb: }\n").unwrap();
        let (_, text) = message(read(&bad));
        assert!(
            text.contains("bad.yaml") && text.contains("not valid YAML"),
            "{text}"
        );

        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{\"apiVersion\": ").unwrap();
        let (_, text) = message(read(&bad));
        assert!(
            text.contains("bad.json") && text.contains("not valid JSON"),
            "{text}"
        );

        let empty = dir.path().join("empty.yaml");
        std::fs::write(&empty, "---\n---\n").unwrap();
        let (_, text) = message(read(&empty));
        assert!(text.contains("no CustomResourceDefinition"), "{text}");
    }
}
