//! The resource registry: which resources are served (built-ins plus the resources of installed
//! CustomResourceDefinitions), their scope, kinds, short names and subresources. The built-ins
//! come from their descriptors ([`kinds`]), one entry per kind.

pub(crate) mod kinds;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

/// What the server knows about one served resource (one group, one plural name).
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceType {
    /// API group (`""` for the core group).
    pub group: String,
    /// Served versions; the first one is the storage (and preferred) version.
    pub versions: Vec<String>,
    /// Plural resource name used in URLs (`pods`).
    pub plural: String,
    /// Singular name (`pod`).
    pub singular: String,
    /// Kind (`Pod`).
    pub kind: String,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Short names (`po`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// The verbs the resource itself allows (discovery lists them; others answer 405).
    pub verbs: Vec<String>,
    /// Subresources besides `status` and `scale` (built-ins only: `namespaces/finalize`,
    /// `serviceaccounts/token`, ...).
    pub subresources: &'static [kinds::Subresource],
    /// Whether the `status` subresource is served (and separates status from the rest).
    pub status_subresource: bool,
    /// Whether strategic merge patch is accepted (built-in types only, as on the real server).
    pub strategic_merge: bool,
    /// The `scale` subresource, when served (see [`crate::scale`]).
    pub scale: Option<ScaleSubresource>,
    /// For custom resources: the CRD data that drives validation and printing.
    pub custom: Option<CustomInfo>,
}

/// Where a resource keeps what its `scale` subresource shows: `.a.b` paths, as in a CRD's
/// `subresources.scale`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleSubresource {
    /// The desired replicas (`.spec.replicas`).
    pub spec_replicas_path: String,
    /// The observed replicas (`.status.replicas`).
    pub status_replicas_path: String,
    /// The label selector (a string, or a label selector object), if any.
    pub label_selector_path: Option<String>,
}

/// CRD-specific data of a custom resource.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomInfo {
    /// Name of the CRD object (`<plural>.<group>`).
    pub crd_name: String,
    /// `openAPIV3Schema` per version, when declared.
    pub schemas: BTreeMap<String, Value>,
    /// `additionalPrinterColumns` per version.
    pub printer_columns: BTreeMap<String, Vec<Value>>,
    /// `spec.conversion` with `strategy: Webhook`; `None` for `strategy: None` (only
    /// `apiVersion` is rewritten between versions).
    pub conversion: Option<crate::convert::webhook::WebhookConversion>,
}

impl ResourceType {
    /// `group/plural` (or `plural` for the core group): the key objects are stored under.
    pub fn key(&self) -> String {
        res_key(&self.group, &self.plural)
    }

    /// The storage version.
    pub fn storage_version(&self) -> &str {
        // invariant: every constructor in this module creates at least one version
        self.versions.first().map(String::as_str).unwrap_or("v1")
    }

    /// `apiVersion` for `version` (`v1` or `group/v1`).
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{}", self.group, version)
        }
    }

    /// The kind of the list type (`PodList`).
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// Whether the resource itself allows `verb` (`get`, `list`, `watch`, `create`, ...).
    pub fn allows(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }

    /// The subresource `name` besides `status` and `scale`, when served.
    pub fn subresource(&self, name: &str) -> Option<&'static kinds::Subresource> {
        self.subresources.iter().find(|s| s.name == name)
    }

    /// Whether `version` is served.
    pub fn serves(&self, version: &str) -> bool {
        self.versions.iter().any(|v| v == version)
    }
}

/// Store key for a resource.
pub fn res_key(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{group}/{plural}")
    }
}

impl ResourceType {
    /// The served resource of a built-in kind's descriptor.
    pub(crate) fn from_kind(k: &kinds::Kind) -> Self {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        ResourceType {
            group: k.group.to_string(),
            versions: vec![k.version.to_string()],
            plural: k.plural.to_string(),
            singular: k.kind.to_lowercase(),
            kind: k.kind.to_string(),
            namespaced: k.namespaced,
            short_names: strings(k.short_names),
            categories: strings(k.categories),
            verbs: strings(k.verbs),
            subresources: k.subresources,
            status_subresource: k.status,
            strategic_merge: true,
            scale: k.scale.then(crate::scale::builtin),
            custom: None,
        }
    }
}

/// The built-in resources every server starts with, one per descriptor in [`kinds::KINDS`].
pub fn builtins() -> Vec<ResourceType> {
    kinds::KINDS.iter().map(ResourceType::from_kind).collect()
}

/// Build the served resource of a CustomResourceDefinition object (apiextensions.k8s.io/v1).
/// Returns a list of `(field, reason, message)` causes when the CRD is malformed.
pub fn from_crd(crd: &Value) -> Result<ResourceType, Vec<(String, String, String)>> {
    let mut causes = Vec::new();
    let spec = &crd["spec"];
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let group = text(&spec["group"]);
    let names = &spec["names"];
    let plural = text(&names["plural"]);
    let kind = text(&names["kind"]);
    if group.is_empty() {
        causes.push(required("spec.group"));
    }
    if plural.is_empty() {
        causes.push(required("spec.names.plural"));
    }
    if kind.is_empty() {
        causes.push(required("spec.names.kind"));
    }
    let name = text(&crd["metadata"]["name"]);
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        causes.push((
            "metadata.name".to_string(),
            "FieldValueInvalid".to_string(),
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let scope = text(&spec["scope"]);
    let namespaced = match scope.as_str() {
        "Namespaced" => true,
        "Cluster" => false,
        _ => {
            causes.push((
                "spec.scope".to_string(),
                "FieldValueNotSupported".to_string(),
                format!(
                    "Unsupported value: \"{scope}\": supported values: \"Cluster\", \"Namespaced\""
                ),
            ));
            true
        }
    };
    let mut versions = Vec::new();
    let mut storage = None;
    let mut schemas = BTreeMap::new();
    let mut printer_columns = BTreeMap::new();
    let mut status_subresource = false;
    let mut scale = None;
    for v in spec["versions"].as_array().into_iter().flatten() {
        let vname = text(&v["name"]);
        if vname.is_empty() {
            causes.push(required("spec.versions[].name"));
            continue;
        }
        if v["storage"].as_bool() == Some(true) {
            storage = Some(vname.clone());
        }
        if v["served"].as_bool() != Some(false) {
            versions.push(vname.clone());
        }
        if let Some(schema) = v["schema"].get("openAPIV3Schema") {
            schemas.insert(vname.clone(), schema.clone());
        }
        if let Some(cols) = v["additionalPrinterColumns"].as_array() {
            printer_columns.insert(vname.clone(), cols.clone());
        }
        if v["subresources"].get("status").is_some() {
            status_subresource = true;
        }
        if v["subresources"].get("scale").is_some() {
            match crate::scale::from_crd_version(v) {
                Some(s) => scale = scale.or(Some(s)),
                None => causes.push(required(
                    "spec.versions[].subresources.scale.specReplicasPath/statusReplicasPath",
                )),
            }
        }
    }
    // Upstream: exactly one storage version, unique names; with no single storage version
    // the strategy's first `status.storedVersions` stays empty, which is refused too.
    let all_versions = spec["versions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let storage_flags = all_versions
        .iter()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .count();
    let mut seen = std::collections::BTreeSet::new();
    if !all_versions.iter().all(|v| seen.insert(text(&v["name"]))) {
        causes.push(invalid_versions(spec, "must contain unique version names"));
    }
    if storage_flags != 1 {
        causes.push(invalid_versions(
            spec,
            "must have exactly one version marked as storage version",
        ));
        causes.push((
            "status.storedVersions".to_string(),
            "FieldValueInvalid".to_string(),
            "Invalid value: null: must have at least one stored version".to_string(),
        ));
    } else if versions.is_empty() {
        causes.push(required("spec.versions"));
    }
    let conversion = match crate::convert::webhook::from_crd_spec(spec) {
        Ok(c) => c,
        Err(mut c) => {
            causes.append(&mut c);
            None
        }
    };
    if !causes.is_empty() {
        return Err(causes);
    }
    if let Some(storage) = storage
        && let Some(pos) = versions.iter().position(|v| *v == storage)
    {
        let v = versions.remove(pos);
        versions.insert(0, v);
    }
    let singular = match text(&names["singular"]) {
        s if s.is_empty() => kind.to_lowercase(),
        s => s,
    };
    Ok(ResourceType {
        group,
        versions,
        plural,
        singular,
        kind,
        namespaced,
        short_names: crate::json::strings(&names["shortNames"]),
        categories: crate::json::strings(&names["categories"]),
        verbs: kinds::VERBS.iter().map(|v| v.to_string()).collect(),
        subresources: &[],
        status_subresource,
        strategic_merge: false,
        scale,
        custom: Some(CustomInfo {
            crd_name: name,
            schemas,
            printer_columns,
            conversion,
        }),
    })
}

/// A cause on `spec.versions` showing its value as upstream's field errors do (JSON).
fn invalid_versions(spec: &Value, message: &str) -> (String, String, String) {
    let shown = match &spec["versions"] {
        Value::Null => "null".to_string(),
        v => v.to_string(),
    };
    (
        "spec.versions".to_string(),
        "FieldValueInvalid".to_string(),
        format!("Invalid value: {shown}: {message}"),
    )
}

fn required(field: &str) -> (String, String, String) {
    (
        field.to_string(),
        "FieldValueRequired".to_string(),
        "Required value".to_string(),
    )
}

/// Registry of served resources keyed by [`ResourceType::key`].
#[derive(Debug, Clone, Default)]
pub struct Registry {
    types: BTreeMap<String, Arc<ResourceType>>,
}

impl Registry {
    /// A registry with the built-in resources.
    pub fn with_builtins() -> Self {
        let mut registry = Registry::default();
        for t in builtins() {
            registry.insert(t);
        }
        registry
    }

    /// Add or replace a resource.
    pub fn insert(&mut self, t: ResourceType) {
        self.types.insert(t.key(), Arc::new(t));
    }

    /// Remove a resource by key.
    pub fn remove(&mut self, key: &str) -> Option<Arc<ResourceType>> {
        self.types.remove(key)
    }

    /// Look a resource up by group, version and plural.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.types
            .get(&res_key(group, plural))
            .filter(|t| t.serves(version))
            .cloned()
    }

    /// Look a resource up by key.
    pub fn get(&self, key: &str) -> Option<&Arc<ResourceType>> {
        self.types.get(key)
    }

    /// All served resources.
    pub fn all(&self) -> impl Iterator<Item = &Arc<ResourceType>> {
        self.types.values()
    }

    /// Look a resource up by `apiVersion` and kind.
    pub fn lookup_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceType>> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        self.types
            .values()
            .find(|t| t.group == group && t.kind == kind && t.serves(version))
            .cloned()
    }

    /// Whether some resource serves `group` at `version`.
    pub fn serves_group_version(&self, group: &str, version: &str) -> bool {
        self.types
            .values()
            .any(|t| t.group == group && t.serves(version))
    }
}
