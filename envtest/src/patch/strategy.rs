//! How lists merge, per (group, kind) and field path: the strategy table used by strategic
//! merge patch and server-side apply.
//!
//! Paths are dotted field names without list positions: `spec.containers.env` is the `env`
//! list of every container. A list not in the table is **atomic** (replaced as a whole), which
//! is what the real server does for lists without a patch strategy / `listType`.
//!
//! # Built-in kinds ([`MergeStrategy::builtin`])
//!
//! Every built-in kind's list rules are part of its descriptor (the `lists` of each entry in
//! `src/resources/kinds.rs`, one entry per kind): the rows below that every kind shares, plus,
//! for kinds with a pod template, the pod spec rows under the template's path, plus the kind's
//! own rows (`status.conditions` by `type`, a Service's `spec.ports` by `port`, ...).
//!
//! | rows                                                 | path                                    | list type                      |
//! |------------------------------------------------------|-----------------------------------------|--------------------------------|
//! | every built-in kind                                  | `metadata.finalizers`                   | set (merge primitives)         |
//! | every built-in kind                                  | `metadata.ownerReferences`              | map, key `uid`                 |
//! | pod spec                                             | `containers`, `initContainers`, `ephemeralContainers` | map, key `name`  |
//! | pod spec                                             | `<containers>.env`                      | map, key `name`                |
//! | pod spec                                             | `<containers>.ports`                    | map, key `containerPort` (fields: and `protocol`) |
//! | pod spec                                             | `<containers>.volumeMounts`             | map, key `mountPath`           |
//! | pod spec                                             | `<containers>.volumeDevices`            | map, key `devicePath`          |
//! | pod spec                                             | `<containers>.resizePolicy`             | map, key `resourceName`        |
//! | pod spec                                             | `volumes`, `imagePullSecrets`, `resourceClaims`, `schedulingGates` | map, key `name` |
//! | pod spec                                             | `hostAliases`                           | map, key `ip`                  |
//! | pod spec                                             | `topologySpreadConstraints`             | map, keys `topologyKey`, `whenUnsatisfiable` |
//! | pod spec                                             | `tolerations`, `<containers>.args`/`command`/`envFrom` | atomic          |
//!
//! Node `spec.taints` is atomic, as upstream declares it (`+listType=atomic`, no patch
//! strategy): a strategic merge patch or an apply of `taints` replaces the whole list (the real
//! backend showed it; an earlier version merged by `key`+`effect`). Everything else follows the
//! upstream `patchStrategy`/`patchMergeKey` tags. Where upstream's `listMapKeys` (field sets
//! and server-side apply) differ from the `patchMergeKey`, the row says both
//! ([`MergeStrategy::field_list_type`]): container ports merge by `containerPort` and are
//! identified by `containerPort` and `protocol`, Service ports by `port` and by `port` and
//! `protocol`; a port without `protocol` is identified as `TCP`, its default.
//!
//! Kinds not in the table (custom resources) get `None`: strategic merge answers 415 as on the
//! real server; for server-side apply the server builds a strategy from the CRD schema with
//! [`MergeStrategy::from_openapi_schema`].

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// How one list merges.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ListType {
    /// Replaced as a whole (no patch strategy, `x-kubernetes-list-type: atomic`).
    #[default]
    Atomic,
    /// A set of primitives: patches add values, `$deleteFromPrimitiveList` removes them
    /// (`x-kubernetes-list-type: set`, `patchStrategy: merge` on primitives).
    Set,
    /// A list of objects identified by the values of these keys
    /// (`x-kubernetes-list-type: map`, `patchMergeKey`).
    Map(Vec<String>),
}

/// The list merge rules of one kind: a map from dotted field path (no list positions) to
/// [`ListType`]; unlisted paths are atomic.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MergeStrategy {
    lists: BTreeMap<String, ListType>,
    /// Maps compared and merged as a whole (`x-kubernetes-map-type: atomic`,
    /// `+structType=atomic`); at the path of a map list: its items.
    atomic_maps: BTreeSet<String>,
    /// Maps and lists the kind's zero value always has (non-pointer structs, lists without
    /// `omitempty`): never added or removed by a write (see
    /// [`FieldDiff`](crate::patch::fields::FieldDiff)).
    zero: BTreeSet<String>,
    /// Map lists whose items field sets and server-side apply identify by other keys than
    /// strategic merge patch does (upstream's `listMapKeys` vs `patchMergeKey`), by path.
    field_lists: BTreeMap<String, ListType>,
    /// Defaults of key fields an item may omit (`+default`), by list path: such an item is
    /// identified as if the default were set.
    key_defaults: BTreeMap<String, Vec<(String, Value)>>,
}

const POD_SPEC_CONTAINERS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

/// One row of a kind's list rules: how the list at a path merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Row {
    /// A set of primitives.
    Set,
    /// A list of objects identified by these keys.
    Map(&'static [&'static str]),
    /// A list of objects that strategic merge patch merges by the `patch` keys
    /// (`patchMergeKey`) while field sets and server-side apply identify its items by the
    /// `fields` keys (`listMapKeys`), a key field with a default (`+default`) taking it when an
    /// item omits it.
    MapKeys {
        /// The strategic merge patch keys.
        patch: &'static [&'static str],
        /// The field-set and apply keys, each with its default if it has one.
        fields: &'static [(&'static str, Option<&'static str>)],
    },
}

/// A built-in kind's list rules, as its descriptor declares them: the pod spec rows under
/// `pod_spec` (a dotted prefix such as `spec.template.spec.`) when the kind has a pod template,
/// and the kind's own rows. The common metadata rows are always added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lists {
    /// Where the kind's pod spec is (`spec.`, `spec.template.spec.`), if it has one.
    pub pod_spec: Option<&'static str>,
    /// The kind's own rows.
    pub rows: &'static [(&'static str, Row)],
}

impl Lists {
    /// Only the common metadata rows.
    pub(crate) const NONE: Lists = Lists {
        pod_spec: None,
        rows: &[],
    };

    /// The kind's own rows and no pod spec.
    pub(crate) const fn rows(rows: &'static [(&'static str, Row)]) -> Lists {
        Lists {
            pod_spec: None,
            rows,
        }
    }

    /// A pod spec at `prefix` and the kind's own rows.
    pub(crate) const fn pod_spec(
        prefix: &'static str,
        rows: &'static [(&'static str, Row)],
    ) -> Lists {
        Lists {
            pod_spec: Some(prefix),
            rows,
        }
    }
}

/// The rows every kind has.
const COMMON: &[(&str, Row)] = &[
    ("metadata.finalizers", Row::Set),
    ("metadata.ownerReferences", Row::Map(&["uid"])),
];

const POD_SPEC: &[(&str, Row)] = &[
    ("volumes", Row::Map(&["name"])),
    ("imagePullSecrets", Row::Map(&["name"])),
    ("resourceClaims", Row::Map(&["name"])),
    ("schedulingGates", Row::Map(&["name"])),
    ("hostAliases", Row::Map(&["ip"])),
    (
        "topologySpreadConstraints",
        Row::Map(&["topologyKey", "whenUnsatisfiable"]),
    ),
];

const CONTAINER: &[(&str, Row)] = &[
    ("env", Row::Map(&["name"])),
    (
        "ports",
        Row::MapKeys {
            patch: &["containerPort"],
            fields: &[("containerPort", None), ("protocol", Some("TCP"))],
        },
    ),
    ("volumeMounts", Row::Map(&["mountPath"])),
    ("volumeDevices", Row::Map(&["devicePath"])),
    ("resizePolicy", Row::Map(&["resourceName"])),
];

/// `status.conditions` merged by `type`, the rows of most kinds with conditions.
pub(crate) const CONDITIONS: &[(&str, Row)] = &[("status.conditions", Row::Map(&["type"]))];

impl MergeStrategy {
    /// A strategy where every list is atomic.
    pub fn atomic() -> Self {
        Self::default()
    }

    /// The list rules of the built-in kind `(apiVersion, kind)` (see the module docs), `None`
    /// for kinds the server does not know as built-ins (custom resources).
    pub fn builtin(api_version: &str, kind: &str) -> Option<Self> {
        let group = match api_version.split_once('/') {
            Some((g, _)) => g,
            None => "",
        };
        let lists = crate::resources::kinds::lists(group, kind)?;
        let mut s = Self::from_lists(&lists);
        let shape = crate::patch::fields::zero::shape(group, kind);
        s.zero.extend(shape.zero.iter().map(|p| p.to_string()));
        s.atomic_maps
            .extend(shape.atomic.iter().map(|p| p.to_string()));
        if let Some(pod_spec) = lists.pod_spec {
            // The pod spec and, for a template, the template and its metadata are structs.
            let mut struct_path = pod_spec.trim_end_matches('.');
            while !struct_path.is_empty() {
                s.zero.insert(struct_path.to_string());
                struct_path = struct_path.rsplit_once('.').map_or("", |(head, _)| head);
            }
            if let Some(template) = pod_spec.strip_suffix("spec.") {
                s.zero.insert(format!("{template}metadata"));
                if crate::patch::fields::zero::template_is_pointer(group, kind) {
                    // The template is added by the write that sets it, with its parts.
                    let template = template.trim_end_matches('.');
                    for part in ["", ".metadata", ".spec"] {
                        s.zero.remove(&format!("{template}{part}"));
                    }
                }
            }
            for p in crate::patch::fields::zero::POD_SPEC_ZERO {
                s.zero.insert(format!("{pod_spec}{p}"));
            }
            for p in crate::patch::fields::zero::POD_SPEC_ATOMIC {
                s.atomic_maps.insert(format!("{pod_spec}{p}"));
            }
        }
        Some(s)
    }

    /// Whether the map at `path` (dotted, no list positions) is atomic; for the path of a map
    /// list, whether its items are.
    pub fn is_atomic_map(&self, path: &str) -> bool {
        self.atomic_maps.contains(path)
    }

    /// Whether the kind's zero value has a map or list at `path` (see the field docs).
    pub fn zero_present(&self, path: &str) -> bool {
        self.zero.contains(path)
    }

    /// Marks the map at `path` atomic.
    pub fn with_atomic_map(mut self, path: impl Into<String>) -> Self {
        self.atomic_maps.insert(path.into());
        self
    }

    /// The strategy of a built-in kind's descriptor.
    pub(crate) fn from_lists(lists: &Lists) -> Self {
        let mut s = Self::default();
        s.add_rows("", COMMON);
        s.add_common_atomic();
        if let Some(prefix) = lists.pod_spec {
            s.add_pod_spec(prefix);
        }
        s.add_rows("", lists.rows);
        s
    }

    /// Reads `x-kubernetes-list-type` (`atomic`, `set`, `map`) and `x-kubernetes-list-map-keys`
    /// from an `openAPIV3Schema` (custom resources), plus the common metadata rows.
    pub fn from_openapi_schema(schema: &Value) -> Self {
        let mut s = Self::default();
        s.add_rows("", COMMON);
        s.add_common_atomic();
        s.walk_schema(schema, "");
        s
    }

    fn walk_schema(&mut self, schema: &Value, path: &str) {
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            for (name, sub) in props {
                let p = if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}.{name}")
                };
                if p == "metadata" {
                    continue;
                }
                self.walk_schema(sub, &p);
            }
        }
        if schema.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic")
            && !path.is_empty()
        {
            self.atomic_maps.insert(path.to_string());
        }
        if schema.get("type").and_then(Value::as_str) == Some("array") {
            let list = match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("set") => ListType::Set,
                Some("map") => {
                    let keys: Vec<String> = schema
                        .get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(|k| k.as_str().map(str::to_string))
                                .collect()
                        })
                        .unwrap_or_default();
                    if keys.is_empty() {
                        ListType::Atomic
                    } else {
                        ListType::Map(keys)
                    }
                }
                _ => ListType::Atomic,
            };
            if list != ListType::Atomic {
                self.lists.insert(path.to_string(), list);
            }
            if let Some(items) = schema.get("items") {
                self.walk_schema(items, path);
            }
        }
    }

    /// Adds or overrides one path (a map list without keys is stored as atomic).
    pub fn with_list(mut self, path: impl Into<String>, list: ListType) -> Self {
        let list = match list {
            ListType::Map(keys) if keys.is_empty() => ListType::Atomic,
            other => other,
        };
        self.lists.insert(path.into(), list);
        self
    }

    /// How the list at `path` (dotted, no list positions) merges.
    pub fn list_type(&self, path: &str) -> &ListType {
        static ATOMIC: ListType = ListType::Atomic;
        self.lists.get(path).unwrap_or(&ATOMIC)
    }

    /// How field sets and server-side apply see the list at `path`: as [`Self::list_type`],
    /// except for map lists whose `listMapKeys` differ from their `patchMergeKey` (a Service's
    /// `spec.ports` by `port` and `protocol`; strategic merge patch by `port` alone).
    pub fn field_list_type(&self, path: &str) -> &ListType {
        self.field_lists
            .get(path)
            .unwrap_or_else(|| self.list_type(path))
    }

    /// The `k:` element of a map-list `item` at `path` under [`Self::field_list_type`]'s
    /// `keys`, a key field the item omits taking its default (`protocol: TCP` of a port).
    /// `None` when the item lacks a key field that has no default.
    pub fn field_element(&self, path: &str, item: &Value, keys: &[String]) -> Option<String> {
        let defaults = self.key_defaults.get(path);
        let missing = |obj: &serde_json::Map<String, Value>| {
            defaults
                .into_iter()
                .flatten()
                .any(|(k, _)| !obj.contains_key(k))
        };
        match item.as_object() {
            Some(obj) if missing(obj) => {
                let mut filled = obj.clone();
                for (k, v) in defaults.into_iter().flatten() {
                    filled.entry(k.clone()).or_insert_with(|| v.clone());
                }
                crate::patch::fields::key_element(&Value::Object(filled), keys)
            }
            _ => crate::patch::fields::key_element(item, keys),
        }
    }

    /// `ownerReferences` items are atomic structs (owned as a whole, by their `uid`).
    fn add_common_atomic(&mut self) {
        self.atomic_maps
            .insert("metadata.ownerReferences".to_string());
    }

    fn add_rows(&mut self, prefix: &str, rows: &[(&str, Row)]) {
        for (path, row) in rows {
            let list = match row {
                Row::Set => ListType::Set,
                Row::Map(keys) => ListType::Map(keys.iter().map(|k| k.to_string()).collect()),
                Row::MapKeys { patch, fields } => {
                    let path = format!("{prefix}{path}");
                    let keys = fields.iter().map(|(k, _)| k.to_string()).collect();
                    self.field_lists.insert(path.clone(), ListType::Map(keys));
                    let defaults: Vec<(String, Value)> = fields
                        .iter()
                        .filter_map(|(k, d)| Some((k.to_string(), Value::String((*d)?.into()))))
                        .collect();
                    if !defaults.is_empty() {
                        self.key_defaults.insert(path, defaults);
                    }
                    ListType::Map(patch.iter().map(|k| k.to_string()).collect())
                }
            };
            self.lists.insert(format!("{prefix}{path}"), list);
        }
    }

    fn add_pod_spec(&mut self, prefix: &str) {
        self.add_rows(prefix, POD_SPEC);
        for c in POD_SPEC_CONTAINERS {
            self.lists.insert(
                format!("{prefix}{c}"),
                ListType::Map(vec!["name".to_string()]),
            );
            self.add_rows(&format!("{prefix}{c}."), CONTAINER);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builtin_lookup() {
        let node = MergeStrategy::builtin("v1", "Node").unwrap();
        // Atomic upstream (`+listType=atomic`).
        assert_eq!(node.list_type("spec.taints"), &ListType::Atomic);
        assert_eq!(node.list_type("metadata.finalizers"), &ListType::Set);
        assert_eq!(node.list_type("status.images"), &ListType::Atomic);
        let pod = MergeStrategy::builtin("v1", "Pod").unwrap();
        assert_eq!(
            pod.list_type("spec.containers.env"),
            &ListType::Map(vec!["name".into()])
        );
        assert_eq!(pod.list_type("spec.tolerations"), &ListType::Atomic);
        let deploy = MergeStrategy::builtin("apps/v1", "Deployment").unwrap();
        assert_eq!(
            deploy.list_type("spec.template.spec.containers.ports"),
            &ListType::Map(vec!["containerPort".into()])
        );
        assert!(MergeStrategy::builtin("v1", "ConfigMap").is_some());
        assert!(MergeStrategy::builtin("coordination.k8s.io/v1", "Lease").is_some());
        assert!(MergeStrategy::builtin("example.com/v1", "Widget").is_none());
        assert!(MergeStrategy::builtin("apps/v1", "Pod").is_none());
    }

    #[test]
    fn from_schema_markers() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "items": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"tags": {"type": "array",
                    "x-kubernetes-list-type": "set", "items": {"type": "string"}}}}},
            "plain": {"type": "array", "items": {"type": "string"}}
        }}}});
        let s = MergeStrategy::from_openapi_schema(&schema);
        assert_eq!(
            s.list_type("spec.items"),
            &ListType::Map(vec!["name".into()])
        );
        assert_eq!(s.list_type("spec.items.tags"), &ListType::Set);
        assert_eq!(s.list_type("spec.plain"), &ListType::Atomic);
        let s = s.with_list("spec.keyless", ListType::Map(vec![]));
        assert_eq!(s.list_type("spec.keyless"), &ListType::Atomic);
        assert_eq!(
            s.list_type("metadata.ownerReferences"),
            &ListType::Map(vec!["uid".into()])
        );
    }
}
