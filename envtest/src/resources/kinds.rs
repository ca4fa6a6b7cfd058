//! Data table: one descriptor per built-in kind, the one place a built-in is registered.
//!
//! A descriptor ([`Kind`]) says how the kind is served (group, version, plural, scope, short
//! names, categories, verbs, the `status` and `scale` subresources and any other
//! ([`Subresource`]): discovery lists exactly these, with upstream's storage version hash),
//! how its lists merge under
//! strategic merge patch and server-side apply ([`Lists`], see [`crate::patch::strategy`]),
//! how `kubectl get` prints it ([`Printer`], see [`crate::table`]), which fields a field
//! selector may name besides `metadata.name` and `metadata.namespace` and what an absent one
//! reads as ([`SelectableField`]), and what the real server writes into it besides what a
//! client sent ([`Kind::defaults`], [`Kind::encoded`], [`Kind::on_create`],
//! [`Kind::on_update`], [`Kind::prepare_create`], see [`crate::defaults`]).
//!
//! Adding a built-in kind is adding one entry to [`KINDS`] (with a printer function in
//! `table/columns.rs` when it has columns of its own). A subresource other than `status` and
//! `scale` also needs its verbs' handler: `api/update.rs` (the part of the object it writes),
//! `api/computed.rs` or `api/pods.rs`. Protobuf bodies are decoded by message
//! type in `protobuf.rs`, not per kind. The unit tests check that every entry is served, has a
//! merge strategy and columns, that no two entries collide, and that verbs and subresources are
//! well formed.

use serde_json::Value;

use crate::defaults;
use crate::patch::strategy::{CONDITIONS, Lists, Row};
use crate::selector::{FieldDefault, SelectableField};
use crate::table::{Printer, columns};

/// What the server knows about one built-in kind (see the module docs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Kind {
    /// API group (`""` for the core group).
    pub group: &'static str,
    /// The one served version.
    pub version: &'static str,
    /// Plural resource name used in URLs.
    pub plural: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Short names (`po`).
    pub short_names: &'static [&'static str],
    /// Discovery categories (`all`: `kubectl get all`; `api-extensions`).
    pub categories: &'static [&'static str],
    /// The verbs of the resource itself, as discovery lists them (and the server allows).
    pub verbs: &'static [&'static str],
    /// Subresources besides `status` and `scale` (see [`Subresource`]).
    pub subresources: &'static [Subresource],
    /// Whether the `status` subresource is served.
    pub status: bool,
    /// Whether the `scale` subresource is served (replicas at `.spec.replicas`).
    pub scale: bool,
    /// How its lists merge.
    pub lists: Lists,
    /// How `kubectl get` prints it.
    pub printer: Printer,
    /// Field selector paths besides `metadata.name` and `metadata.namespace`.
    pub fields: &'static [SelectableField],
    /// What the real server writes on every write (`old`: the stored object of an update).
    pub defaults: Option<fn(Option<&Value>, &mut Value)>,
    /// The always-encoded zero-valued fields (no `omitempty` upstream) the store writes into
    /// every stored object: in every answer, owned by no field manager.
    pub encoded: Option<fn(&mut Value)>,
    /// The built-in mutating admission of a create through the API.
    pub on_create: Option<fn(&mut Value)>,
    /// The built-in mutating admission of an update through the API (`old`: the stored object).
    pub on_update: Option<fn(&Value, &mut Value)>,
    /// The strategy's `PrepareForCreate` on every create: the first status.
    pub prepare_create: Option<fn(&mut Value)>,
    /// The rule `metadata.name` follows (upstream's name validation function of the kind).
    pub name: NameRule,
    /// The metadata fields a write through the `status` subresource leaves as stored (the
    /// kind's status strategy's `PrepareForUpdate` upstream). It keeps the stored spec and the
    /// sent status and metadata otherwise: most built-in kinds reset no metadata, Deployments
    /// reset `labels`, Pods `ownerReferences`, APIServices labels, annotations, finalizers and
    /// owners. (Identity and system fields are the stored ones on every update anyway; custom
    /// resources keep only the status, see `api/update.rs`.)
    pub status_resets: &'static [&'static str],
}

/// The rule a kind's `metadata.name` follows: the name validation function upstream's
/// `ValidateObjectMeta` is given for the kind (`pkg/apis/*/validation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameRule {
    /// `NameIsDNSSubdomain`: most kinds, and every custom resource.
    Subdomain,
    /// `NameIsDNSLabel`: Namespaces (`ValidateNamespaceName`), StatefulSets, and Services
    /// since 1.37 (KEP-5311, `RelaxedServiceNameValidation` locked on; they were DNS-1035
    /// labels before).
    Label,
    /// `content.IsPathSegmentName` (`ValidateRBACName`): roles and role bindings, whose names
    /// may hold capitals and `:` (`system:controller:x`).
    PathSegment,
    /// No rule of the kind's own (`ValidateCertificateRequestName`).
    Any,
}

impl NameRule {
    /// The rule of the resource `t` (custom resources: a DNS subdomain).
    pub(crate) fn of(t: &super::ResourceType) -> NameRule {
        of(t).map_or(NameRule::Subdomain, |k| k.name)
    }

    /// The API server's messages for `name`, empty when it follows the rule.
    pub(crate) fn check(self, name: &str) -> Vec<String> {
        match self {
            NameRule::Subdomain => kcr_names::validate_dns1123_subdomain(name),
            NameRule::Label => kcr_names::validate_dns1123_label(name),
            NameRule::PathSegment => path_segment(name),
            NameRule::Any => Vec::new(),
        }
    }
}

/// Upstream's `content.IsPathSegmentName`: not `.` or `..`, no `/` or `%`.
fn path_segment(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|c| name.contains(**c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

/// A subresource besides `status` and `scale`, as discovery lists it. `group` and `version`
/// are those of its `responseKind` when that is another API's kind (`authentication.k8s.io/v1`
/// `TokenRequest` for `serviceaccounts/token`), empty for a kind of the resource's own group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subresource {
    /// The name after the object's (`token`).
    pub name: &'static str,
    /// Group of the response kind (empty: the resource's own).
    pub group: &'static str,
    /// Version of the response kind (empty: the resource's own).
    pub version: &'static str,
    /// The response kind.
    pub kind: &'static str,
    /// Its verbs.
    pub verbs: &'static [&'static str],
}

/// The verbs of an ordinary resource.
pub(crate) const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The verbs of a subresource that reads and writes a part of its object (`status`).
pub(crate) const GET_PATCH_UPDATE: &[&str] = &["get", "patch", "update"];

/// A descriptor with the common values: namespaced, no short names, not in `all`, no
/// subresources, every verb, common list rules only, NAME and AGE, no selectable fields, no defaults.
const BASE: Kind = Kind {
    group: "",
    version: "v1",
    plural: "",
    kind: "",
    namespaced: true,
    short_names: &[],
    categories: &[],
    verbs: VERBS,
    subresources: &[],
    status: false,
    scale: false,
    lists: Lists::NONE,
    printer: Printer::Columns(columns::none),
    fields: &[],
    defaults: None,
    encoded: None,
    on_create: None,
    on_update: None,
    prepare_create: None,
    name: NameRule::Subdomain,
    status_resets: &[],
};

/// The `all` category.
const ALL: &[&str] = &["all"];

/// The `api-extensions` category.
const API_EXTENSIONS: &[&str] = &["api-extensions"];

/// A selectable field that reads as the empty string when absent.
const fn field(path: &'static str) -> SelectableField {
    SelectableField {
        path,
        absent: FieldDefault::Empty,
    }
}

/// A selectable field with a value when absent.
const fn field_or(path: &'static str, value: &'static str) -> SelectableField {
    SelectableField {
        path,
        absent: FieldDefault::Value(value),
    }
}

const POD_FIELDS: &[SelectableField] = &[
    field("spec.nodeName"),
    field("status.phase"),
    field("spec.restartPolicy"),
    field("spec.schedulerName"),
    field("spec.serviceAccountName"),
    field_or("spec.hostNetwork", "false"),
    SelectableField {
        path: "status.podIP",
        absent: FieldDefault::Pointer("/status/podIPs/0/ip"),
    },
];

/// Both Event APIs accept both sets of names (core/v1's and events.k8s.io/v1's).
const EVENT_FIELDS: &[SelectableField] = &[
    field("involvedObject.kind"),
    field("involvedObject.namespace"),
    field("involvedObject.name"),
    field("involvedObject.uid"),
    field("involvedObject.apiVersion"),
    field("involvedObject.resourceVersion"),
    field("involvedObject.fieldPath"),
    field("reason"),
    field("reportingComponent"),
    field("source"),
    field("type"),
    field("regarding.kind"),
    field("regarding.name"),
    field("regarding.namespace"),
    field("regarding.uid"),
    field("regarding.apiVersion"),
    field("regarding.resourceVersion"),
    field("regarding.fieldPath"),
    field("reportingController"),
];

/// core/v1 Events; events.k8s.io/v1 Events are the same objects ([`crate::convert`]).
const EVENTS: Kind = Kind {
    plural: "events",
    kind: "Event",
    short_names: &["ev"],
    printer: Printer::Complete(columns::events),
    fields: EVENT_FIELDS,
    encoded: Some(defaults::event),
    ..BASE
};

/// A workload kind of the `all` category with a pod template at `spec.template` and
/// `status.conditions`.
const fn workload(group: &'static str, plural: &'static str, kind: &'static str) -> Kind {
    Kind {
        group,
        plural,
        kind,
        categories: ALL,
        status: true,
        lists: Lists::pod_spec("spec.template.spec.", CONDITIONS),
        ..BASE
    }
}

/// Every built-in kind the server serves.
pub(crate) const KINDS: &[Kind] = &[
    Kind {
        plural: "namespaces",
        kind: "Namespace",
        namespaced: false,
        short_names: &["ns"],
        verbs: &[
            "create", "delete", "get", "list", "patch", "update", "watch",
        ],
        subresources: &[Subresource {
            name: "finalize",
            group: "",
            version: "",
            kind: "Namespace",
            verbs: &["update"],
        }],
        status: true,
        lists: Lists::rows(CONDITIONS),
        printer: Printer::Columns(columns::namespace),
        fields: &[field("status.phase")],
        defaults: Some(defaults::namespace),
        name: NameRule::Label,
        ..BASE
    },
    Kind {
        plural: "nodes",
        kind: "Node",
        namespaced: false,
        short_names: &["no"],
        status: true,
        lists: Lists::rows(&[
            ("spec.podCIDRs", Row::Set),
            ("status.conditions", Row::Map(&["type"])),
            ("status.addresses", Row::Map(&["type"])),
        ]),
        printer: Printer::Columns(columns::node),
        fields: &[field_or("spec.unschedulable", "false")],
        defaults: Some(defaults::node),
        on_create: Some(defaults::taint_not_ready),
        ..BASE
    },
    Kind {
        plural: "pods",
        kind: "Pod",
        short_names: &["po"],
        categories: ALL,
        subresources: &[
            Subresource {
                name: "binding",
                group: "",
                version: "",
                kind: "Binding",
                verbs: &["create"],
            },
            Subresource {
                name: "ephemeralcontainers",
                group: "",
                version: "",
                kind: "Pod",
                verbs: GET_PATCH_UPDATE,
            },
            Subresource {
                name: "eviction",
                group: "policy",
                version: "v1",
                kind: "Eviction",
                verbs: &["create"],
            },
        ],
        status: true,
        lists: Lists::pod_spec(
            "spec.",
            &[
                ("status.conditions", Row::Map(&["type"])),
                ("status.podIPs", Row::Map(&["ip"])),
                ("status.hostIPs", Row::Map(&["ip"])),
            ],
        ),
        printer: Printer::Columns(columns::pod),
        fields: POD_FIELDS,
        defaults: Some(defaults::pod),
        on_create: Some(defaults::admit_pod),
        on_update: Some(defaults::admit_pod_update),
        prepare_create: Some(defaults::pod_status),
        status_resets: &["ownerReferences"],
        ..BASE
    },
    Kind {
        plural: "configmaps",
        kind: "ConfigMap",
        short_names: &["cm"],
        printer: Printer::Columns(columns::config_map),
        defaults: Some(defaults::config_map),
        ..BASE
    },
    Kind {
        plural: "secrets",
        kind: "Secret",
        printer: Printer::Columns(columns::secret),
        fields: &[field("type")],
        ..BASE
    },
    EVENTS,
    Kind {
        plural: "services",
        kind: "Service",
        short_names: &["svc"],
        categories: ALL,
        status: true,
        lists: Lists::rows(&[
            (
                "spec.ports",
                Row::MapKeys {
                    patch: &["port"],
                    fields: &[("port", None), ("protocol", Some("TCP"))],
                },
            ),
            ("status.conditions", Row::Map(&["type"])),
        ]),
        printer: Printer::Columns(columns::service),
        defaults: Some(defaults::service),
        prepare_create: Some(defaults::service_status),
        name: NameRule::Label,
        ..BASE
    },
    Kind {
        plural: "serviceaccounts",
        kind: "ServiceAccount",
        short_names: &["sa"],
        subresources: &[Subresource {
            name: "token",
            group: "authentication.k8s.io",
            version: "v1",
            kind: "TokenRequest",
            verbs: &["create"],
        }],
        ..BASE
    },
    Kind {
        plural: "persistentvolumeclaims",
        kind: "PersistentVolumeClaim",
        short_names: &["pvc"],
        status: true,
        lists: Lists::rows(CONDITIONS),
        printer: Printer::Columns(columns::persistent_volume_claim),
        defaults: Some(defaults::persistent_volume_claim),
        on_create: Some(defaults::protect_claim),
        ..BASE
    },
    Kind {
        short_names: &["deploy"],
        scale: true,
        printer: Printer::Columns(columns::deployment),
        defaults: Some(defaults::deployment),
        prepare_create: Some(defaults::empty_status),
        status_resets: &["labels"],
        ..workload("apps", "deployments", "Deployment")
    },
    Kind {
        short_names: &["rs"],
        scale: true,
        printer: Printer::Columns(columns::replica_set),
        defaults: Some(defaults::replicated),
        ..workload("apps", "replicasets", "ReplicaSet")
    },
    Kind {
        short_names: &["sts"],
        scale: true,
        printer: Printer::Columns(columns::stateful_set),
        defaults: Some(defaults::templated),
        name: NameRule::Label,
        ..workload("apps", "statefulsets", "StatefulSet")
    },
    Kind {
        short_names: &["ds"],
        printer: Printer::Columns(columns::daemon_set),
        defaults: Some(defaults::templated),
        ..workload("apps", "daemonsets", "DaemonSet")
    },
    Kind {
        printer: Printer::Columns(columns::job),
        defaults: Some(defaults::job),
        prepare_create: Some(defaults::job_selector),
        ..workload("batch", "jobs", "Job")
    },
    Kind {
        short_names: &["cj"],
        lists: Lists::pod_spec("spec.jobTemplate.spec.template.spec.", &[]),
        printer: Printer::Columns(columns::cron_job),
        ..workload("batch", "cronjobs", "CronJob")
    },
    Kind {
        group: "events.k8s.io",
        ..EVENTS
    },
    Kind {
        group: "coordination.k8s.io",
        plural: "leases",
        kind: "Lease",
        printer: Printer::Columns(columns::lease),
        ..BASE
    },
    Kind {
        group: "node.k8s.io",
        plural: "runtimeclasses",
        kind: "RuntimeClass",
        namespaced: false,
        printer: Printer::Columns(columns::runtime_class),
        ..BASE
    },
    Kind {
        group: "apiextensions.k8s.io",
        plural: "customresourcedefinitions",
        kind: "CustomResourceDefinition",
        namespaced: false,
        short_names: &["crd", "crds"],
        defaults: Some(defaults::custom_resource_definition),
        categories: API_EXTENSIONS,
        status: true,
        lists: Lists::rows(CONDITIONS),
        ..BASE
    },
    Kind {
        group: "admissionregistration.k8s.io",
        plural: "mutatingwebhookconfigurations",
        kind: "MutatingWebhookConfiguration",
        namespaced: false,
        defaults: Some(defaults::mutating_webhooks),
        categories: API_EXTENSIONS,
        lists: Lists::rows(WEBHOOKS),
        ..BASE
    },
    Kind {
        group: "admissionregistration.k8s.io",
        plural: "validatingwebhookconfigurations",
        kind: "ValidatingWebhookConfiguration",
        namespaced: false,
        defaults: Some(defaults::validating_webhooks),
        categories: API_EXTENSIONS,
        lists: Lists::rows(WEBHOOKS),
        ..BASE
    },
    Kind {
        plural: "endpoints",
        kind: "Endpoints",
        short_names: &["ep"],
        defaults: Some(defaults::endpoints),
        printer: Printer::Columns(columns::endpoints),
        ..BASE
    },
    Kind {
        short_names: &["rc"],
        scale: true,
        defaults: Some(defaults::replication_controller),
        printer: Printer::Columns(columns::replication_controller),
        prepare_create: Some(defaults::no_replicas),
        fields: &[field_or("status.replicas", "0")],
        ..workload("", "replicationcontrollers", "ReplicationController")
    },
    Kind {
        plural: "componentstatuses",
        kind: "ComponentStatus",
        namespaced: false,
        short_names: &["cs"],
        verbs: &["get", "list"],
        lists: Lists::rows(CONDITIONS),
        ..BASE
    },
    Kind {
        group: "authentication.k8s.io",
        plural: "tokenreviews",
        kind: "TokenReview",
        namespaced: false,
        verbs: &["create"],
        ..BASE
    },
    Kind {
        group: "authorization.k8s.io",
        plural: "subjectaccessreviews",
        kind: "SubjectAccessReview",
        namespaced: false,
        verbs: &["create"],
        ..BASE
    },
    Kind {
        group: "rbac.authorization.k8s.io",
        plural: "roles",
        kind: "Role",
        printer: Printer::Complete(columns::role),
        name: NameRule::PathSegment,
        ..BASE
    },
    Kind {
        group: "rbac.authorization.k8s.io",
        plural: "rolebindings",
        kind: "RoleBinding",
        printer: Printer::Complete(columns::role_binding),
        name: NameRule::PathSegment,
        ..BASE
    },
    Kind {
        group: "rbac.authorization.k8s.io",
        plural: "clusterroles",
        kind: "ClusterRole",
        printer: Printer::Complete(columns::role),
        namespaced: false,
        name: NameRule::PathSegment,
        ..BASE
    },
    Kind {
        group: "rbac.authorization.k8s.io",
        plural: "clusterrolebindings",
        kind: "ClusterRoleBinding",
        printer: Printer::Complete(columns::role_binding),
        namespaced: false,
        name: NameRule::PathSegment,
        ..BASE
    },
    Kind {
        group: "networking.k8s.io",
        plural: "ingresses",
        kind: "Ingress",
        printer: Printer::Columns(columns::ingress),
        short_names: &["ing"],
        status: true,
        prepare_create: Some(defaults::service_status),
        ..BASE
    },
    Kind {
        group: "discovery.k8s.io",
        plural: "endpointslices",
        kind: "EndpointSlice",
        defaults: Some(defaults::endpoint_slice),
        printer: Printer::Columns(columns::endpoint_slice),
        ..BASE
    },
    Kind {
        group: "certificates.k8s.io",
        plural: "certificatesigningrequests",
        kind: "CertificateSigningRequest",
        namespaced: false,
        printer: Printer::Complete(columns::certificate_signing_request),
        short_names: &["csr"],
        subresources: &[Subresource {
            name: "approval",
            group: "",
            version: "",
            kind: "CertificateSigningRequest",
            verbs: GET_PATCH_UPDATE,
        }],
        status: true,
        lists: Lists::rows(CONDITIONS),
        fields: &[field("spec.signerName")],
        name: NameRule::Any,
        ..BASE
    },
    Kind {
        group: "apiregistration.k8s.io",
        plural: "apiservices",
        kind: "APIService",
        printer: Printer::Columns(columns::api_service),
        namespaced: false,
        categories: API_EXTENSIONS,
        status: true,
        lists: Lists::rows(CONDITIONS),
        status_resets: &["labels", "annotations", "finalizers", "ownerReferences"],
        ..BASE
    },
];

const WEBHOOKS: &[(&str, Row)] = &[("webhooks", Row::Map(&["name"]))];

/// Core kinds the server does not serve whose list rules [`crate::patch::MergeStrategy::builtin`]
/// knows all the same (for callers of the patch engine).
const UNSERVED_LISTS: &[(&str, Lists)] = &[(
    "PodTemplate",
    Lists::pod_spec("spec.template.spec.", CONDITIONS),
)];

/// The descriptor of a served resource, `None` for custom resources.
pub(crate) fn of(t: &super::ResourceType) -> Option<&'static Kind> {
    if t.custom.is_some() {
        return None;
    }
    KINDS
        .iter()
        .find(|k| k.group == t.group && k.plural == t.plural)
}

/// The descriptor of core/v1 Events (events.k8s.io Events are stored as those).
pub(crate) fn core_events() -> Option<&'static Kind> {
    KINDS
        .iter()
        .find(|k| k.group.is_empty() && k.plural == "events")
}

/// The list rules of the built-in kind `kind` in `group`.
pub(crate) fn lists(group: &str, kind: &str) -> Option<Lists> {
    KINDS
        .iter()
        .find(|k| k.group == group && k.kind == kind)
        .map(|k| k.lists)
        .or_else(|| {
            UNSERVED_LISTS
                .iter()
                .find(|(k, _)| group.is_empty() && *k == kind)
                .map(|(_, lists)| *lists)
        })
}

#[cfg(test)]
mod tests;
