//! `kcr-envtest`: an in-process Kubernetes API server over real HTTP on loopback, for tests and
//! for running operators without a cluster.
//!
//! An unmodified `kube::Client`, kube-runtime's watcher and reflector, and `kubectl` work
//! against it. One call starts a server on `127.0.0.1:<random port>`; the handle gives a
//! client, a kubeconfig (value and file), fault injection and request counters, helpers for
//! simulated Nodes and CRDs, and stops the server when dropped. It is cheap enough to start one
//! per test.
//!
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, PostParams};
//! use kcr_envtest::TestApiServer;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = TestApiServer::start().await?;
//! server.add_nodes(2).await?;
//! let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("demo".into());
//! cms.create(&PostParams::default(), &cm).await?;
//! assert_eq!(cms.get("demo").await?.metadata.name.as_deref(), Some("demo"));
//!
//! // Make the next GET of configmaps fail with 500 (kube retries 429/503/504 by itself).
//! server.faults().fail_next("get", "configmaps", 1, 500);
//! assert!(cms.get("demo").await.is_err());
//! assert!(cms.get("demo").await.is_ok());
//! assert_eq!(server.faults().request_count("get", "configmaps"), 3);
//! # Ok(())
//! # }
//! ```
//!
//! The standalone binary serves the same API for kubectl:
//! `cargo run -p kcr-envtest-cli -- --port 6443 --kubeconfig /tmp/kc [--nodes N]`, then
//! `KUBECONFIG=/tmp/kc kubectl get nodes` (with `KCR_ENVTEST_BACKEND=real` it serves the real
//! backend through its proxy on that port; SIGINT or SIGTERM stops it and its processes).
//! kubectl works without extra flags: `apply -f`
//! (client- and server-side), `create -f`, `get` (server-side Table printing), `describe`,
//! `scale`, `label`, `taint`, `cordon`, `patch`, `delete`, `get -w`, `wait`, `diff`, `run`,
//! and the `create namespace|configmap|secret|serviceaccount|deployment|job|cronjob|service`
//! generators (protobuf bodies). A minimal `/openapi/v3` tells kubectl that the server validates fields itself
//! (`fieldValidation=Strict`); `/openapi/v2` is not served and `kubectl explain` shows no field
//! documentation.
//!
//! # Backends
//! [`TestApiServer::start`] runs the backend `KCR_ENVTEST_BACKEND` names ([`Backend`]): this
//! crate's in-process server (`in-process`, the default), a real kube-apiserver, etcd and
//! kube-controller-manager built by `tools/control-plane/build.sh` (`real`, see [`Binaries`]),
//! behind a loopback proxy that applies the same [`Faults`], or the cluster of the current
//! kubeconfig (`existing`, as Go envtest's `UseExistingCluster`: `KUBECONFIG`, else
//! `~/.kube/config`, or [`TestApiServerBuilder::kubeconfig_path`]) behind the same proxy. On an
//! existing cluster each server works in a fresh namespace of its own,
//! `kcr-test-<random>` ([`TestApiServer::namespace`], the default namespace of its client and
//! kubeconfig), deleted when it is dropped; its proxy serves HTTPS with a CA of its own and
//! asks for a bearer token, since it lends the kubeconfig's credentials. The same test code
//! runs on all three; the write helpers (`add_nodes`, `upsert`, `install_crd`,
//! `install_crds_from`) are `async` because on the real and existing backends they are API
//! requests. What exists on some backends only is a typed [`EnvtestError::Unsupported`]: the
//! builder's `history_window` and `bookmark_interval` on the real and existing backends, its
//! `nodes` and `add_nodes` on an existing cluster (no Nodes are created in a cluster that is
//! not the test's own), its `kubeconfig_path` on the others, its
//! `admission_control_config_file` (kube-apiserver's admission configuration, e.g. the client
//! certificates its webhook calls present) and `apiserver_flag` / `etcd_flag` (kube-apiserver's
//! and etcd's own flags: feature gates, `--runtime-config`) everywhere but the real backend;
//! `direct_kubeconfig`
//! and `add_user` everywhere but the real backend; `client_as` and `client_for_service_account`
//! in process.
//!
//! Three ways to act as someone else, for RBAC tests (real backend; the first two also on an
//! existing cluster whose kubeconfig user may impersonate):
//! [`TestApiServer::client_as`] impersonates a user and groups, and
//! [`TestApiServer::client_for_service_account`] a ServiceAccount, through the admin credential
//! and the fault proxy (faults and counters apply); [`TestApiServer::add_user`] gives a user a
//! client certificate of its own ([`TestUser`]) that goes straight to kube-apiserver, so it is
//! authenticated rather than impersonated, and the proxy's faults do not apply to it.
//!
//! # Design
//! Objects are kept as `serde_json::Value` plus pre-serialised bytes in a `BTreeMap` keyed by
//! `(namespace, name)` per resource. One global resourceVersion counter is bumped by
//! every write; each write appends to a bounded event log that watches read in batches (one
//! HTTP chunk per batch) and that paginated lists use to serve a consistent snapshot.
//! [`TestApiServer::upsert`] writes objects straight into the store (fast seeding, no HTTP).
//! Label/field selectors ([`selector`]), patches and server-side apply ([`patch`]), CRD schema
//! validation ([`schema`]) and admission webhooks ([`admission`]) are pure modules the HTTP
//! layer calls.
//!
//! # Fidelity
//!
//! | Area | Supported | Differs from the real API server | Not supported |
//! |---|---|---|---|
//! | Transport | HTTP/1.1 and h2c on 127.0.0.1, JSON | no TLS, no authentication or authorization (every request is admin; the real backend has both, see [`TestApiServer::client_as`]) | protobuf bodies of kinds outside `k8s.io/api` and `meta.k8s.io` (custom resources get 415; every built-in kind and `DeleteOptions` decode, see [`protobuf`]; a body that is not well-formed protobuf is a 400, as upstream; a client that lists protobuf first in `Accept` gets objects, lists, Status and watch frames of built-in kinds in protobuf, Tables in JSON), CBOR, websockets (exec/attach/port-forward) |
//! | Answers | JSON as kube-apiserver writes it: a built-in's `kind`, `apiVersion`, `metadata` first (serialised once per write), a custom resource's members in key order, typed list items without `kind`/`apiVersion`, Status bodies in Go field order with empty details left out, a trailing newline; a DELETE that removes the object at once answers Status Success (name, group, resource, uid), the object for pods, services, service accounts, PVCs, PVs, namespaces and CRDs, for Foreground/Orphan propagation and while finalizers hold it; writes honour `as=PartialObjectMetadata`; error texts (router 404/405/415, patch and decode errors, selector syntax) as upstream words them | nested members of built-ins in key order (upstream: Go struct order) | |
//! | Discovery | `/version`, `/api`, `/api/v1`, `/apis`, `/apis/{g}`, `/apis/{g}/{v}` with verbs, short names, categories, subresources and `storageVersionHash` (upstream's hash of group/version/kind, so the values match); aggregated discovery (`apidiscovery.k8s.io/v2`, used by kubectl and `Discovery::run_aggregated`); `/openapi/v3` index and per-group-version documents with paths and the `fieldValidation` parameter; a path in no served API group answers the plain-text `404 page not found` (no Status), as upstream | OpenAPI documents carry no schemas | `/openapi/v2`; the subresources that need a kubelet or a proxy (`pods/attach`, `exec`, `log`, `portforward`, `proxy`, `resize`, `nodes/proxy`, `services/proxy`) are neither served nor listed |
//! | Resources | namespaces, nodes, pods, configmaps, secrets, services, serviceaccounts, endpoints, replicationcontrollers, persistentvolumeclaims, core and events.k8s.io events, apps/v1 deployments, replicasets, statefulsets and daemonsets, batch/v1 jobs and cronjobs, leases, runtimeclasses, rbac.authorization.k8s.io roles, rolebindings, clusterroles and clusterrolebindings, networking.k8s.io ingresses, discovery.k8s.io endpointslices, certificates.k8s.io certificatesigningrequests (with `status` and `approval`), apiregistration.k8s.io apiservices, CRDs, mutating/validating webhook configurations; CRD resources of either scope; the `scale` subresource of deployments, replicasets, statefulsets and replicationcontrollers (`kubectl scale`, `Api::patch_scale`); `pods/ephemeralcontainers` (get, and writes that change only `spec.ephemeralContainers`); `pods/binding` (sets `spec.nodeName` and the `PodScheduled` condition once, 409 for a bound Pod) and `pods/eviction` (deletes the Pod: no PodDisruptionBudgets are served), neither through admission webhooks; `componentstatuses` (get and list, computed as upstream answers them on a control plane without scheduler or controller-manager: those two unhealthy, `etcd-0` healthy); `serviceaccounts/{name}/token` (TokenRequest: a JWT with upstream's claims, signed with a per-process HMAC key, so only this kcr-envtest can check it); `tokenreviews` (authenticates those tokens: signature, expiry, audiences, the ServiceAccount still existing with the token's uid; user `system:serviceaccount:<ns>:<name>` in upstream's groups) and `subjectaccessreviews` (RBAC evaluated over the stored roles and bindings, bootstrap policy included), as a delegating authenticator and authorizer (a secured metrics endpoint) uses them; requests to the server itself are still neither authenticated nor authorized; core/v1 and events.k8s.io/v1 Events are one set of objects (same storage, names, uids and resourceVersions; get/list/watch/write through either API, fields converted as upstream: `regarding`↔`involvedObject`, `note`↔`message`, `reportingController`↔`reportingComponent`, `deprecated*`↔`source`/`count`/`firstTimestamp`/`lastTimestamp`); verbs a resource lacks answer 405 (`namespaces` have no deletecollection, `componentstatuses` only get and list) | built-ins are defaulted as upstream where clients see it (`src/defaults/`: Pod spec, containers, tolerations, priority and first status `Pending` with its QoS class; Service spec defaults, cluster IP from `10.0.0.0/24` and node ports, status; Deployment, ReplicaSet and ReplicationController spec and template defaults; webhook configuration defaults; Event always-encoded fields; CRD `spec.conversion`; Node, Namespace and PersistentVolumeClaim fields; Secrets: `stringData` merged into `data`, `type` defaulted to `Opaque`; see the table there); not defaulted: StatefulSet, DaemonSet, Job and CronJob specs besides their pod templates; RBAC objects are stored, not enforced in process; per-type validation only where cheap and certain (`metadata.name`; a Secret's type-specific `data` keys; a RuntimeClass's `handler` is immutable; events.k8s.io/v1 Events: on create `eventTime`, `type`, the reporting fields, `action` and `reason` required and the `deprecated*` fields unset, on update only `series` may change; an Event's namespace matches its involved object's, through either API (upstream's `legacyValidateEvent`); a Job's pod template is immutable; a Service's requested cluster IP must be free and in range), unknown fields kept (also under `fieldValidation=Strict`), no controllers (pods never run, deployments create no replicasets, jobs run nothing) | other built-in resources (podtemplates, limitranges, resourcequotas, persistentvolumes, storage, policy, scheduling, flowcontrol, resource.k8s.io, ...); the kubelet and proxy subresources (`pods/log`, `exec`, `attach`, `portforward`, `proxy`, `resize`) |
//! | CRDs | served on create, unserved (objects deleted) on delete, status `Established`/`NamesAccepted`; several versions as upstream: objects stored in the storage version and converted to each request's version on reads, writes, lists and watches (`conversion.strategy: None` rewrites `apiVersion`; `Webhook` POSTs a `ConversionReview` per object to `clientConfig.url` with its `caBundle`, checks the answer as upstream and reports a failure as its 500 `conversion webhook for <gvk> failed: ...`; a stored object that cannot be converted as it is read is kube-apiserver 1.37's `StorageError: corrupt object` for a get or delete, `object not decodable` for an update, `StorageReadError` naming every such object for a list), objects keep the version they were stored in until written again (a list after a change of the storage version mixes stored versions), `status.storedVersions` gains each new storage version, each version validated with its own schema; status and scale subresources; printer columns in Table output; openAPIV3Schema pruning, defaulting and validation → 422 with causes; `fieldValidation=Strict` turns pruned unknown fields into 400 BadRequest (default/`Warn`: a `Warning` header per field; `Ignore`: silent) | `Established` at once (the real server sets it asynchronously, and deletes a CRD's objects and then the CRD in the background); a conversion webhook is reached by `clientConfig.url` only (`service` fails like an unreachable webhook); [`TestApiServer::upsert`] stores an object in the storage version as given (no conversion) | CEL validation rules, `selectableFields` |
//! | Metadata | global monotonically increasing resourceVersion; uid; creationTimestamp; generateName; `generation` for the kinds upstream keeps it for (pods, replicationcontrollers, apps and batch workloads, ingresses, endpointslices, CRDs and custom resources, webhook configurations): 1 on create, bumped when anything outside metadata (and status, with a status subresource; for Deployments also annotations) changes; other kinds keep what a create sent, unchanged; status subresource separation; 409 on stale update / AlreadyExists; managedFields via server-side apply and `Update` entries | unconditional updates (no resourceVersion) are allowed for all kinds; creating in a missing namespace is 404 and in a terminating one 403 | |
//! | List | label selectors (full syntax), field selectors (`metadata.name`, `metadata.namespace`, a few per-kind fields such as pods' `spec.nodeName`), limit/continue over a consistent snapshot, resourceVersion + resourceVersionMatch (`NotOlderThan`, `Exact`, legacy), 410 for expired continue tokens, `PartialObjectMetadataList` and `Table` output (upstream's columns for pods, the six workload kinds, replicationcontrollers, services, endpoints, endpointslices, ingresses, nodes, namespaces, configmaps, secrets, leases, events, persistentvolumeclaims, RBAC roles and bindings, certificatesigningrequests and apiservices) | `remainingItemCount` is set only when no selector filters the list, as upstream; other built-ins print only NAME and AGE; `componentstatuses` answer JSON only (no Table); a too large resourceVersion answers 504 at once (no wait) | |
//! | Watch | from a resourceVersion; from none/`0` (ADDED for the current state, with `allowWatchBookmarks` the `k8s.io/initial-events-end` bookmark as kube-apiserver 1.37 sends it, then live); bookmarks (interval configurable); `sendInitialEvents` + `k8s.io/initial-events-end`; `timeoutSeconds`; selector transitions as DELETED/ADDED; bounded history window → ERROR 410 Expired; watches of a deleted CRD end; `PartialObjectMetadata` and `Table` events | a running watch that falls behind the window gets 410 (the real server keeps a per-watcher buffer) | watch via the legacy `/watch/` paths |
//! | Patch | JSON patch, merge patch, strategic merge (built-ins; 415 for custom resources; map lists ordered as upstream: without `$setElementOrder` new items first; Node `spec.taints` atomic), server-side apply with fieldManager/force and managedFields (no fieldManager: 422); resourceVersion in a patch is a precondition | see [`patch`] for list strategies | |
//! | Delete | finalizers + deletionTimestamp (the DELETED event after the last finalizer carries the last stored state); owner-reference GC with background (default; batch/v1 Jobs orphan by default, as upstream), foreground and orphan propagation, a dependent that keeps a live owner loses its reference to the deleted one; preconditions (uid, resourceVersion); deletecollection; namespace deletion removes its contents | GC and namespace deletion run synchronously inside the request (deterministic; on the real backend kube-controller-manager does them asynchronously: wait with [`eventually()`]); grace periods are ignored (pods go at once) | |
//! | Admission | mutating and validating webhook configurations matched by rules (groups, versions, resources, operations); AdmissionReview v1 over HTTPS with caBundle; JSONPatch responses; failurePolicy; timeoutSeconds; namespaceSelector/objectSelector; dry-run vs sideEffects; webhook warnings as `Warning` headers; order mutating → schema/metadata validation → validating | see [`admission`] (validating webhooks run concurrently, reported in configuration order; `IfNeeded` reinvocation); a configuration is in effect once written (kube-apiserver picks changes up asynchronously) | `matchConditions` (CEL), `matchPolicy: Equivalent`, `clientConfig.service` (only `url`) |
//! | Faults | fail next N (verb, resource, optionally only in one namespace) with any status, 429 with Retry-After, latency, close all watches, compact history, pause/resume (with a count of held requests), request counters ([`Faults`]); the same on the real and existing backends, applied by their proxy | on the real and existing backends `compact_history` expires resourceVersions older than a Lease the proxy writes at the next resume (not the ones handed out before the call) | |
//! | Helpers | `add_nodes` (Ready nodes with capacity/allocatable and the usual labels), `install_crd`, `install_crds_from` (the CRDs of YAML/JSON files or a directory of them, as Go envtest's `CRDDirectoryPaths`), `upsert`; at start, as on a real control plane: namespaces `default`, `kube-system`, `kube-public`, `kube-node-lease`, the `kubernetes` Service in `default` (cluster IP `10.0.0.1`, port 443; kube-apiserver writes these once ready, and the real backend's start waits for them), kube-apiserver 1.37's bootstrap RBAC policy (its 73 ClusterRoles, 54 ClusterRoleBindings and the Roles and RoleBindings in `kube-system` and `kube-public`, as the real backend stores them), the local APIServices of the served groups; a `default` ServiceAccount in every namespace (kube-controller-manager's serviceaccount controller; created with the namespace in process, moments later on the real backend) | simulated nodes have no kubelet Lease | |
//!
//! ## Measured differences
//!
//! Measured, not assumed: `cargo run --release -p kcr-envtest-conformance` sends the same
//! 632 scripted exchanges, and a Go client's 46 (client-go's typed clients with protobuf and
//! with JSON), to kcr-envtest and to kube-apiserver v1.37.2 (the `real` backend) and compares
//! the answers; today `fidelity: 673 of 678 exchanges equal`. Every
//! exchange that still differs is listed in `envtest/conformance/known_differences.txt` (CI
//! fails on any other difference), and every root cause of those is a row here, with the number
//! of exchanges it appears in; `envtest/conformance/tests/fidelity_table.rs` checks this table
//! against that list (`DIFFERENCES.md` next to it names the exchanges and where each fix
//! belongs).
//!
//! | root cause | exchanges | what differs | why it remains |
//! |---|---|---|---|
//! | `KUBELET-SUBRESOURCES` | 3 | the subresources that need a kubelet or a proxy (pods/attach, exec, log, portforward, proxy, resize; nodes/proxy; services/proxy) are neither served nor listed in discovery (stays: no kubelet runs) | stays: no kubelet or proxy runs in process |
//! | `APPLY-YAML-1.1` | 1 | apply YAML is read as YAML 1.2; the real server's YAML 1.1 turns keys like y/yes/on into booleans (stays unless kcr wants 1.1 quirks) | stays: YAML 1.2 is read (kcr does not reproduce YAML 1.1's booleans) |
//! | `CONTINUE-TOKEN-FORMAT` | 1 | continue tokens are server-internal: the real server accepted a hand-made etcd-style token for an uncompacted revision, kcr-envtest rejects it (stays: tokens are opaque; an expired token of each server's own is a 410 on both) | stays: continue tokens are opaque and server-internal (an expired token is a 410 on both) |
//! | `MANAGED-FIELDS-SET` | 1 | managedFields field sets that follow another difference: the field set of the YAML 1.1 apply names its keys as parsed (see APPLY-YAML-1.1) | stays with APPLY-YAML-1.1 (the field set of a YAML 1.2 parse) |
//!
//! # Public API
//! The handle and its builder ([`TestApiServer`], [`TestApiServerBuilder`]), the backends
//! ([`Backend`]), faults ([`Faults`]), users with credentials of their own ([`TestUser`]),
//! errors ([`EnvtestError`], [`ApiError`]), the test helpers
//! ([`eventually()`], [`kubectl_path`], [`Binaries`]), and the pure engines other crates use on
//! their own: [`selector`], [`patch`], [`schema`], [`admission`] and [`protobuf`]. Everything
//! else (the HTTP layer, the store, the registry of kinds and their descriptors, printing,
//! discovery) is internal.

#![forbid(unsafe_code)]

pub mod admission;
mod api;
mod backend;
mod bootstrap;
mod connect;
mod convert;
mod crd_files;
mod defaults;
mod discovery;
mod error;
mod eventually;
mod existing;
mod faults;
mod immutable;
mod json;
mod nodes;
mod openapi;
mod partition;
pub mod patch;
pub mod protobuf;
mod real;
mod relay;
mod resources;
mod scale;
pub mod schema;
pub mod selector;
mod serve;
mod server;
mod shared;
mod store;
mod table;
mod user;

pub use backend::{BACKEND_ENV, Backend, SHARED_CONTROL_PLANE_ENV};
pub use discovery::EMULATED_KUBERNETES_VERSION;
pub use error::{ApiError, EnvtestError};
pub use eventually::{Check, eventually};
pub use faults::Faults;
pub use real::service_account::{service_account_groups, service_account_user};
pub use real::{Binaries, binaries_for_test, kubectl_for_tests, kubectl_path};
pub use relay::Relay;
pub use server::{TestApiServer, TestApiServerBuilder, kubeconfig_yaml};
pub use shared::TestNamespace;
pub use user::TestUser;
