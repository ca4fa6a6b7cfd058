//! What an operator does to the API server, recorded: the input of `cargo kcr rbac`, which
//! turns it into the minimal ClusterRole and Role.
//!
//! An [`AccessRecorder`] wraps the manager's [`kube::Client`] ([`AccessRecorder::wrap`]); every
//! request through the wrapped client (the manager's cache and watches, the reconcilers' reads
//! and writes, leader election, events) is classified as the API server's request-info
//! resolver classifies it for authorization ([`Access::of_request`]): the verb (`get`, `list`,
//! `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`), the API group, the
//! resource and its subresource, and the namespace of the request's path (`None`: a
//! cluster-scoped resource, or a namespaced one across all namespaces). Discovery and other
//! requests outside resources (`/api`, `/apis/{group}`, `/version`, `/healthz`) are not
//! recorded: every authenticated user may make them (the `system:discovery` role).
//!
//! The recording is on the client side, so it is the same on every kcr-envtest backend
//! (in-process, `real`, `existing`) and holds only the operator's requests, never those the
//! test itself makes to prepare or observe the cluster.
//!
//! # A suite's record
//! With `KCR_RBAC_RECORD=<directory>` ([`RECORD_ENV`]) in the environment, [`manager()`] and
//! [`manager_with`] record by themselves: they wrap the cluster's client with the process's
//! recorder ([`AccessRecorder::from_env`]), which appends each distinct access, once, as a JSON
//! line to a file of its own in that directory (`<pid>-<uuid>.jsonl`), so the test binaries of
//! one `cargo test` accumulate one record without locks. The line format (version 1):
//!
//! ```json
//! {"verb":"patch","group":"apps","resource":"deployments","subresource":"status","namespace":"demo"}
//! ```
//!
//! `subresource` and `namespace` are `null` when absent; `group` is `""` for the core group.
//! A test that makes its manager itself (`Manager::new`, e.g. with a ServiceAccount's client
//! on the real backend) joins the record with [`record_from_env`]. Then:
//!
//! ```sh
//! rm -rf target/kcr-rbac
//! KCR_RBAC_RECORD=$PWD/target/kcr-rbac cargo test
//! cargo kcr rbac --record target/kcr-rbac            # writes config/rbac/role.yaml
//! cargo kcr rbac --record target/kcr-rbac --check    # CI: fails on missing or unused verbs
//! ```
//!
//! A recorder can also be used directly, in memory or writing to a directory chosen by the
//! test ([`AccessRecorder::new`], [`AccessRecorder::to_dir`]):
//!
//! ```
//! use kcr_testkit::access::{Access, AccessRecorder};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ns = kcr_envtest::TestNamespace::new("doc-access").await?;
//! let recorder = AccessRecorder::new();
//! let client = recorder.wrap(kcr_testkit::TestCluster::client(&ns));
//! let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
//!     kube::Api::namespaced(client, ns.namespace());
//! cms.list(&Default::default()).await?;
//! assert!(recorder.accesses().contains(&Access::new("list", "", "configmaps", None, Some(ns.namespace()))));
//! # Ok(())
//! # }
//! ```
//!
//! [`manager()`]: crate::manager()
//! [`manager_with`]: crate::manager_with

use std::collections::BTreeSet;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::{Method, Request, Response};
use kube::client::Body;

/// The environment variable that makes [`manager()`](crate::manager()) and
/// [`manager_with`](crate::manager_with) record into a directory (see the module's doc).
pub const RECORD_ENV: &str = "KCR_RBAC_RECORD";

/// One kind of request, as RBAC authorizes it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Access {
    /// The API group (`""` for the core group).
    pub group: String,
    /// The resource (plural), without subresource.
    pub resource: String,
    /// The subresource (`status`, `scale`, `finalizers`, `token`, ...), if any.
    pub subresource: Option<String>,
    /// The namespace of the request's path; `None` for a cluster-scoped resource or a
    /// namespaced one across all namespaces.
    pub namespace: Option<String>,
    /// The RBAC verb: `get`, `list`, `watch`, `create`, `update`, `patch`, `delete` or
    /// `deletecollection`.
    pub verb: String,
}

impl Access {
    /// An access; `group` is `""` for the core group.
    pub fn new(
        verb: &str,
        group: &str,
        resource: &str,
        subresource: Option<&str>,
        namespace: Option<&str>,
    ) -> Access {
        Access {
            group: group.to_owned(),
            resource: resource.to_owned(),
            subresource: subresource.map(str::to_owned),
            namespace: namespace.map(str::to_owned),
            verb: verb.to_owned(),
        }
    }

    /// The access a request makes, as kube-apiserver's request-info resolver reads its
    /// method, path and query: a GET is `watch` with `watch=true` (or the legacy `/watch/`
    /// path), `get` with an object's name and `list` without; a DELETE without a name is
    /// `deletecollection`; `/{name}/{subresource}` names a subresource. `None` for requests
    /// outside resources (discovery, health, `/version`) and for methods RBAC has no verb for.
    /// The namespace of a Namespace's own path (`/api/v1/namespaces/{name}`) is `None`:
    /// Namespaces are cluster-scoped.
    pub fn of_request(method: &Method, path: &str, query: Option<&str>) -> Option<Access> {
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let (group, rest) = match segments.as_slice() {
            ["api", _version, rest @ ..] => ("", rest),
            ["apis", group, _version, rest @ ..] => (*group, rest),
            _ => return None,
        };
        let (legacy_watch, rest) = match rest {
            ["watch", rest @ ..] => (true, rest),
            _ => (false, rest),
        };
        let (namespace, rest) = match rest {
            ["namespaces", ns, third, ..] if !matches!(*third, "status" | "finalize") => {
                (Some(*ns), &rest[2..])
            }
            _ => (None, rest),
        };
        let (resource, name, subresource) = match rest {
            [] => return None,
            [resource] => (*resource, None, None),
            [resource, name] => (*resource, Some(*name), None),
            [resource, name, sub, ..] => (*resource, Some(*name), Some(*sub)),
        };
        let watch = legacy_watch || query_flag(query, "watch");
        let verb = match *method {
            Method::GET | Method::HEAD if watch => "watch",
            Method::GET | Method::HEAD if name.is_some() => "get",
            Method::GET | Method::HEAD => "list",
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE if name.is_some() => "delete",
            Method::DELETE => "deletecollection",
            _ => return None,
        };
        Some(Access::new(verb, group, resource, subresource, namespace))
    }

    /// The access as one line of the record (JSON, without the newline).
    pub fn to_json_line(&self) -> String {
        serde_json::json!({
            "verb": self.verb,
            "group": self.group,
            "resource": self.resource,
            "subresource": self.subresource,
            "namespace": self.namespace,
        })
        .to_string()
    }
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(f, "{} {group}/{}", self.verb, self.resource)?;
        if let Some(sub) = &self.subresource {
            write!(f, "/{sub}")?;
        }
        match &self.namespace {
            Some(ns) => write!(f, " in namespace {ns}"),
            None => write!(f, " cluster-wide"),
        }
    }
}

/// Whether `name` is true in a query string, as Go's `strconv.ParseBool` reads it.
fn query_flag(query: Option<&str>, name: &str) -> bool {
    query.is_some_and(|q| {
        q.split('&').any(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            k == name && matches!(v, "1" | "t" | "T" | "true" | "TRUE" | "True")
        })
    })
}

/// `client`, recording into the process's record when [`RECORD_ENV`] names a directory
/// ([`AccessRecorder::from_env`]), else `client` itself: the one line a test that makes its
/// manager with `Manager::new` (a client of its own, leader election) needs to join the
/// suite's record. [`manager()`](crate::manager()) and [`manager_with`](crate::manager_with)
/// call it.
pub fn record_from_env(client: kube::Client) -> Result<kube::Client, RecordError> {
    Ok(match AccessRecorder::from_env()? {
        Some(recorder) => recorder.wrap(client),
        None => client,
    })
}

/// Why a record could not be written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The record's directory or file could not be created or written.
    #[error("the request record {path}: {source}")]
    Io {
        /// The directory or file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

#[derive(Debug, Default)]
struct State {
    seen: BTreeSet<Access>,
    file: Option<(PathBuf, File)>,
    /// The first failed write, reported by [`AccessRecorder::check`].
    failed: Option<String>,
}

/// Records the accesses of the clients it wraps; cheap to clone (clones share the record).
#[derive(Debug, Clone, Default)]
pub struct AccessRecorder {
    state: Arc<Mutex<State>>,
}

impl AccessRecorder {
    /// A recorder that keeps its record in memory ([`accesses`](Self::accesses)).
    pub fn new() -> AccessRecorder {
        AccessRecorder::default()
    }

    /// A recorder that also appends each distinct access, once, to a new file
    /// `<pid>-<uuid>.jsonl` in `dir` (created if missing), so that several processes can
    /// record into one directory.
    pub fn to_dir(dir: impl AsRef<Path>) -> Result<AccessRecorder, RecordError> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|source| RecordError::Io {
            path: dir.to_owned(),
            source,
        })?;
        let path = dir.join(format!(
            "{}-{}.jsonl",
            std::process::id(),
            uuid::Uuid::new_v4()
        ));
        let file = File::options()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(|source| RecordError::Io {
                path: path.clone(),
                source,
            })?;
        let recorder = AccessRecorder::new();
        recorder.lock().file = Some((path, file));
        Ok(recorder)
    }

    /// The process's recorder into the directory [`RECORD_ENV`] names, made on first use;
    /// `None` when the variable is unset or empty.
    pub fn from_env() -> Result<Option<AccessRecorder>, RecordError> {
        static PROCESS: OnceLock<Result<Option<AccessRecorder>, (PathBuf, String)>> =
            OnceLock::new();
        let made = PROCESS.get_or_init(|| {
            let value = std::env::var_os(RECORD_ENV);
            AccessRecorder::from_var(value.as_deref()).map_err(|e| {
                let dir = value.map(PathBuf::from).unwrap_or_default();
                (dir, e.to_string())
            })
        });
        match made {
            Ok(recorder) => Ok(recorder.clone()),
            Err((path, message)) => Err(RecordError::Io {
                path: path.clone(),
                source: std::io::Error::other(message.clone()),
            }),
        }
    }

    /// The recorder the value of [`RECORD_ENV`] asks for: `None` when unset or empty.
    fn from_var(value: Option<&std::ffi::OsStr>) -> Result<Option<AccessRecorder>, RecordError> {
        match value {
            Some(dir) if !dir.is_empty() => AccessRecorder::to_dir(dir).map(Some),
            _ => Ok(None),
        }
    }

    /// `client`, recording every request it sends; the default namespace stays the same.
    /// Call it inside a tokio runtime, as [`kube::Client::new`] (which it uses) asks.
    pub fn wrap(&self, client: kube::Client) -> kube::Client {
        let namespace = client.default_namespace().to_owned();
        kube::Client::new(
            Recording {
                client,
                recorder: self.clone(),
            },
            namespace,
        )
    }

    /// The distinct accesses recorded so far, sorted.
    pub fn accesses(&self) -> Vec<Access> {
        self.lock().seen.iter().cloned().collect()
    }

    /// The file this recorder appends to, if any.
    pub fn file(&self) -> Option<PathBuf> {
        self.lock().file.as_ref().map(|(path, _)| path.clone())
    }

    /// `Err` if a line could not be written to the record's file (the requests themselves
    /// went on: a recorder never fails a request).
    pub fn check(&self) -> Result<(), RecordError> {
        let state = self.lock();
        match (&state.failed, &state.file) {
            (Some(message), Some((path, _))) => Err(RecordError::Io {
                path: path.clone(),
                source: std::io::Error::other(message.clone()),
            }),
            _ => Ok(()),
        }
    }

    /// Records `access`; the first time it is seen, appends it to the file.
    pub fn record(&self, access: Access) {
        let mut state = self.lock();
        if state.seen.contains(&access) {
            return;
        }
        let line = format!("{}\n", access.to_json_line());
        state.seen.insert(access);
        let written = match &mut state.file {
            // One write per line on a file opened for appending: lines of concurrent writers
            // do not interleave.
            Some((_, file)) => file.write_all(line.as_bytes()),
            None => Ok(()),
        };
        if let Err(e) = written {
            tracing::warn!(error = %e, "kcr-testkit: cannot write the request record");
            state.failed.get_or_insert(e.to_string());
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the record consistent: take it over.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The wrapped client as a tower service: records, then [`kube::Client::send`].
#[derive(Clone)]
struct Recording {
    client: kube::Client,
    recorder: AccessRecorder,
}

impl tower::Service<Request<Body>> for Recording {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<Response<Body>, kube::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // `send` waits for the inner client's buffer itself.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let uri = request.uri();
        if let Some(access) = Access::of_request(request.method(), uri.path(), uri.query()) {
            self.recorder.record(access);
        }
        let client = self.client.clone();
        Box::pin(async move { client.send(request).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(method: Method, path_and_query: &str) -> Option<Access> {
        let (path, query) = match path_and_query.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (path_and_query, None),
        };
        Access::of_request(&method, path, query)
    }

    #[test]
    fn requests_are_classified_as_the_api_server_authorizes_them() {
        let cases = [
            (
                Method::GET,
                "/api/v1/namespaces/a/pods",
                "list",
                "",
                "pods",
                None,
                Some("a"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/a/pods?watch=true&resourceVersion=1",
                "watch",
                "",
                "pods",
                None,
                Some("a"),
            ),
            (
                Method::GET,
                "/api/v1/pods?watch=1",
                "watch",
                "",
                "pods",
                None,
                None,
            ),
            (
                Method::GET,
                "/api/v1/pods?watch=false",
                "list",
                "",
                "pods",
                None,
                None,
            ),
            (
                Method::GET,
                "/api/v1/watch/namespaces/a/pods",
                "watch",
                "",
                "pods",
                None,
                Some("a"),
            ),
            (
                Method::GET,
                "/api/v1/nodes/n1",
                "get",
                "",
                "nodes",
                None,
                None,
            ),
            (
                Method::PATCH,
                "/api/v1/nodes/n1/status",
                "patch",
                "",
                "nodes",
                Some("status"),
                None,
            ),
            (
                Method::POST,
                "/api/v1/namespaces/a/configmaps",
                "create",
                "",
                "configmaps",
                None,
                Some("a"),
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/a/configmaps/c",
                "update",
                "",
                "configmaps",
                None,
                Some("a"),
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/a/configmaps",
                "deletecollection",
                "",
                "configmaps",
                None,
                Some("a"),
            ),
            (
                Method::DELETE,
                "/apis/apps/v1/namespaces/a/deployments/d",
                "delete",
                "apps",
                "deployments",
                None,
                Some("a"),
            ),
            (
                Method::PUT,
                "/apis/apps/v1/namespaces/a/deployments/d/scale",
                "update",
                "apps",
                "deployments",
                Some("scale"),
                Some("a"),
            ),
            (
                Method::GET,
                "/apis/nodes.lailin.xyz/v1/nodepools",
                "list",
                "nodes.lailin.xyz",
                "nodepools",
                None,
                None,
            ),
            (
                Method::POST,
                "/apis/coordination.k8s.io/v1/namespaces/k/leases",
                "create",
                "coordination.k8s.io",
                "leases",
                None,
                Some("k"),
            ),
            (
                Method::POST,
                "/api/v1/namespaces/a/serviceaccounts/s/token",
                "create",
                "",
                "serviceaccounts",
                Some("token"),
                Some("a"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/a",
                "get",
                "",
                "namespaces",
                None,
                None,
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/a/finalize",
                "update",
                "",
                "namespaces",
                Some("finalize"),
                None,
            ),
            (
                Method::GET,
                "/api/v1/namespaces",
                "list",
                "",
                "namespaces",
                None,
                None,
            ),
        ];
        for (method, path, verb, group, resource, sub, ns) in cases {
            assert_eq!(
                of(method, path),
                Some(Access::new(verb, group, resource, sub, ns)),
                "{path}"
            );
        }
    }

    #[test]
    fn discovery_health_and_odd_methods_are_not_recorded() {
        for path in [
            "/",
            "/api",
            "/api/v1",
            "/apis",
            "/apis/apps",
            "/apis/apps/v1",
            "/version",
            "/readyz",
            "/openapi/v3",
        ] {
            assert_eq!(of(Method::GET, path), None, "{path}");
        }
        assert_eq!(of(Method::OPTIONS, "/api/v1/pods"), None);
        assert_eq!(
            of(Method::CONNECT, "/api/v1/namespaces/a/pods/p/exec"),
            None
        );
    }

    #[test]
    fn distinct_accesses_are_written_once_as_json_lines() -> Result<(), Box<dyn std::error::Error>>
    {
        let dir = tempfile::tempdir()?;
        let recorder = AccessRecorder::to_dir(dir.path().join("record"))?;
        let list = Access::new("list", "", "pods", None, Some("a"));
        recorder.record(list.clone());
        recorder.record(list.clone());
        recorder.record(Access::new(
            "patch",
            "apps",
            "deployments",
            Some("status"),
            None,
        ));
        recorder.check()?;
        let path = recorder.file().ok_or("no file")?;
        let text = std::fs::read_to_string(path)?;
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()?;
        assert_eq!(
            lines,
            vec![
                serde_json::json!({"verb": "list", "group": "", "resource": "pods", "subresource": null, "namespace": "a"}),
                serde_json::json!({"verb": "patch", "group": "apps", "resource": "deployments", "subresource": "status", "namespace": null}),
            ]
        );
        assert_eq!(recorder.accesses().len(), 2);
        Ok(())
    }

    #[test]
    fn the_variable_names_the_directory_and_unset_or_empty_records_nothing()
    -> Result<(), Box<dyn std::error::Error>> {
        assert!(AccessRecorder::from_var(None)?.is_none());
        assert!(AccessRecorder::from_var(Some("".as_ref()))?.is_none());
        let dir = tempfile::tempdir()?;
        let recorder = AccessRecorder::from_var(Some(dir.path().as_os_str()))?.ok_or("none")?;
        let file = recorder.file().ok_or("no file")?;
        assert_eq!(file.parent(), Some(dir.path()));
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        assert!(
            name.starts_with(&format!("{}-", std::process::id())),
            "{name}"
        );
        assert!(name.ends_with(".jsonl"), "{name}");
        Ok(())
    }

    #[test]
    fn a_directory_that_cannot_be_made_is_an_error_naming_it()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("a-file");
        std::fs::write(&file, "")?;
        let err = AccessRecorder::to_dir(file.join("record"))
            .err()
            .ok_or("no error")?;
        assert!(err.to_string().contains("a-file"), "{err}");
        Ok(())
    }
}
