//! The `real` backend: kube-apiserver, etcd and kube-controller-manager as child processes,
//! behind a fault-injecting proxy (`real/proxy.rs`).
//!
//! Starting one:
//! 1. finds the binaries ([`Binaries::find`]: `KUBEBUILDER_ASSETS` or the build of
//!    `tools/control-plane/build.sh`);
//! 2. generates a CA, a serving certificate, an admin client certificate (group
//!    `system:masters`) and the service-account signing key;
//! 3. starts etcd on free loopback ports with a temporary data directory;
//! 4. starts kube-apiserver with that PKI, RBAC authorization, service-account tokens
//!    (TokenRequest, TokenReview), the ServiceAccount admission plugin off (as
//!    controller-runtime's envtest: no pod needs a token) and
//!    `OwnerReferencesPermissionEnforcement` on ([`ENABLED_ADMISSION_PLUGINS`]), plus the
//!    test's own flags ([`ApiServerFlags`]: an admission control config file), and waits for
//!    `/readyz` (which covers the bootstrap RBAC policy and the local APIServices), then for
//!    what kube-apiserver writes only after it is ready (`bootstrap_objects`: the four system
//!    namespaces and the `kubernetes` Service), so that a test starts on the state the
//!    in-process server has at start;
//! 5. starts kube-controller-manager with only the controllers API objects rely on without a
//!    kubelet: the garbage collector, the namespace controller, and the service-account and
//!    token controllers (skipped when the binary directory has none, as setup-envtest's);
//! 6. starts the proxy in front.
//!
//! Dropping the handle (also while a test panics) kills the processes and removes the
//! temporary directory with its data, certificates, kubeconfigs and logs. Set
//! `KCR_ENVTEST_KEEP_LOGS=1` to keep the directory (its path is logged).

pub mod binaries;
pub(crate) mod crds;
pub(crate) mod pki;
mod process;
pub(crate) mod proxy;
pub(crate) mod request_info;
pub mod service_account;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::config::{AuthInfo, Cluster, KubeConfigOptions, Kubeconfig};
use parking_lot::Mutex;

pub use binaries::{Binaries, binaries_for_test, kubectl_for_tests, kubectl_path};
use pki::Pki;
use process::{Process, free_port};
use proxy::{Expiry, Proxy, ProxyAccess, Upstream};

use crate::error::EnvtestError;
use crate::faults::Faults;

/// How many times [`ControlPlane::start`] tries when a port it picked was taken meanwhile.
const START_ATTEMPTS: usize = 3;

/// What a process needs to use a control plane another process runs: kube-apiserver's URL,
/// its CA certificate and key (to sign users' certificates), the admin's certificate and key,
/// and whether kube-controller-manager runs. Written by
/// [`TestApiServer::write_attachment`](crate::TestApiServer::write_attachment) (JSON, readable
/// by its owner only), read by
/// [`TestApiServerBuilder::attach`](crate::TestApiServerBuilder::attach).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Attachment {
    pub apiserver: String,
    pub ca_cert: String,
    pub ca_key: String,
    pub admin_cert: String,
    pub admin_key: String,
    pub controller_manager: bool,
}

/// Whether a start failed because a process could not bind the port it was given.
fn lost_a_port(e: &EnvtestError) -> bool {
    matches!(e, EnvtestError::Startup { reason, log_tail, .. }
        if log_tail.contains("address already in use") || reason.contains("address already in use"))
}

/// How long the API server may take to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the objects of `bootstrap_objects` may take to appear once the API server is ready
/// (milliseconds on an idle machine: a safety net, not a wait).
const BOOTSTRAP_TIMEOUT: Duration = Duration::from_secs(30);
/// How often [`wait_bootstrapped`] looks again.
const BOOTSTRAP_POLL: Duration = Duration::from_millis(10);

/// What kube-apiserver writes after `/readyz` answers ok, from controllers its post-start
/// hooks only start (`start-system-namespaces-controller`, `bootstrap-controller`), as
/// `(what, path)`: the namespaces and the `kubernetes` Service the in-process server seeds
/// before it answers. (The bootstrap RBAC policy and the local APIServices are in `/readyz`
/// already: `poststarthook/rbac/bootstrap-roles`, `autoregister-completion`.)
fn bootstrap_objects() -> Vec<(String, String)> {
    crate::bootstrap::SYSTEM_NAMESPACES
        .iter()
        .map(|ns| {
            (
                format!("namespace {ns}"),
                format!("/api/v1/namespaces/{ns}"),
            )
        })
        .chain([(
            "Service default/kubernetes".to_string(),
            "/api/v1/namespaces/default/services/kubernetes".to_string(),
        )])
        .collect()
}

/// The controllers kube-controller-manager runs.
const CONTROLLERS: &str = "garbage-collector-controller,namespace-controller,serviceaccount-controller,serviceaccount-token-controller";

/// The processes, in the order they are stopped.
struct Processes {
    controller_manager: Option<Process>,
    apiserver: Process,
    etcd: Process,
}

impl Processes {
    /// The startup error of etcd or kube-apiserver if either has exited.
    fn exited(&mut self) -> Option<EnvtestError> {
        if let Some(status) = self.etcd.exited() {
            return Some(self.etcd.startup_error(format!("exited: {status}")));
        }
        let status = self.apiserver.exited()?;
        Some(self.apiserver.startup_error(format!("exited: {status}")))
    }

    fn stop(&mut self) {
        if let Some(p) = &mut self.controller_manager {
            p.kill();
        }
        self.apiserver.kill();
        self.etcd.kill();
    }
}

/// A running real control plane with its proxy.
pub(crate) struct ControlPlane {
    // Field order is drop order: the proxy, then the processes, then their files.
    proxy: Proxy,
    /// `None` for a control plane another process runs ([`ControlPlane::attach`]).
    processes: Mutex<Option<Processes>>,
    /// Whether kube-controller-manager runs (garbage collection, namespace deletion).
    controller_manager: bool,
    /// What another process needs to use this control plane ([`Attachment`]).
    attachment: Attachment,
    direct: kube::Client,
    direct_kubeconfig: Kubeconfig,
    /// Signs the client certificates of [`ControlPlane::user_kubeconfig`].
    ca: pki::CertificateAuthority,
    /// kube-apiserver's PEM CA certificate.
    ca_cert: String,
    dir: Option<tempfile::TempDir>,
}

fn b64(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// A kubeconfig for `server` trusting `ca_cert` that authenticates with a client certificate
/// and its key (PEM texts).
fn kubeconfig(server: &str, ca_cert: &str, cert: &str, key: &str) -> Kubeconfig {
    crate::server::envtest_kubeconfig(
        Cluster {
            server: Some(server.to_string()),
            certificate_authority_data: Some(b64(ca_cert)),
            ..Cluster::default()
        },
        AuthInfo {
            client_certificate_data: Some(b64(cert)),
            client_key_data: Some(b64(key).into()),
            ..AuthInfo::default()
        },
        "default",
    )
}

fn prepare(what: &str, reason: impl ToString) -> EnvtestError {
    EnvtestError::Prepare {
        what: what.to_string(),
        reason: reason.to_string(),
    }
}

/// The proxy's TLS client settings: trust the CA (DER), present the admin certificate and its
/// PKCS #8 key (DER).
fn tls_config(
    ca_cert_der: &[u8],
    admin_cert_der: &[u8],
    admin_key_der: &[u8],
) -> Result<rustls::ClientConfig, EnvtestError> {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(ca_cert_der.to_vec()))
        .map_err(|e| prepare("the proxy's trust store", e))?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(admin_key_der.to_vec()));
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| prepare("the proxy's TLS settings", e))?
        .with_root_certificates(roots)
        .with_client_auth_cert(vec![CertificateDer::from(admin_cert_der.to_vec())], key)
        .map_err(|e| prepare("the proxy's client certificate", e))
}

/// The admission plugins kube-apiserver runs on top of its defaults.
///
/// `OwnerReferencesPermissionEnforcement` (off upstream by default, on in OpenShift and other
/// hardened clusters) refuses an owner reference with `blockOwnerDeletion: true` from a user
/// who may not `update` the owner's `finalizers` subresource, and a change of an object's owner
/// references from a user who may not delete it: with it on, an operator's RBAC tested here
/// also holds on those clusters.
pub(crate) const ENABLED_ADMISSION_PLUGINS: &str = "OwnerReferencesPermissionEnforcement";

/// What a test adds to kube-apiserver's command line
/// ([`TestApiServerBuilder`](crate::TestApiServerBuilder)'s real-backend options).
#[derive(Debug, Clone, Default)]
pub(crate) struct ApiServerFlags {
    /// `--admission-control-config-file`
    /// ([`TestApiServerBuilder::admission_control_config_file`](crate::TestApiServerBuilder::admission_control_config_file)).
    pub admission_control_config: Option<PathBuf>,
    /// The test's own kube-apiserver flags, after kcr-envtest's
    /// ([`TestApiServerBuilder::apiserver_flag`](crate::TestApiServerBuilder::apiserver_flag)).
    pub apiserver: Vec<String>,
    /// The test's own etcd flags, after kcr-envtest's
    /// ([`TestApiServerBuilder::etcd_flag`](crate::TestApiServerBuilder::etcd_flag)).
    pub etcd: Vec<String>,
}

/// The kube-apiserver flags kcr-envtest sets and a test may not: the addresses, ports,
/// certificates and keys the control plane and its clients are wired with.
pub(crate) const OWNED_APISERVER_FLAGS: &[&str] = &[
    "etcd-servers",
    "bind-address",
    "advertise-address",
    "secure-port",
    "tls-cert-file",
    "tls-private-key-file",
    "client-ca-file",
    "service-account-key-file",
    "service-account-signing-key-file",
    "service-account-issuer",
    "cert-dir",
];

/// The etcd flags kcr-envtest sets and a test may not: its name, data directory and URLs.
pub(crate) const OWNED_ETCD_FLAGS: &[&str] = &[
    "name",
    "data-dir",
    "listen-client-urls",
    "advertise-client-urls",
    "listen-peer-urls",
    "initial-advertise-peer-urls",
    "initial-cluster",
];

/// Checks a test's flags for `binary`: each `--name` or `--name=value`, none of `owned`.
fn checked_flags(binary: &str, flags: &[String], owned: &[&str]) -> Result<(), EnvtestError> {
    for flag in flags {
        let what = format!("the {binary} flag {flag:?}");
        let Some(body) = flag.strip_prefix("--") else {
            return Err(prepare(&what, "a flag is written --name or --name=value"));
        };
        let name = body.split_once('=').map_or(body, |(n, _)| n);
        if name.is_empty() || name.starts_with('-') || name.contains(char::is_whitespace) {
            return Err(prepare(&what, "a flag is written --name or --name=value"));
        }
        if owned.contains(&name) {
            return Err(prepare(
                &what,
                format!(
                    "kcr-envtest sets --{name} itself (its control plane is wired with it); \
                     the flags it owns: --{}",
                    owned.join(", --")
                ),
            ));
        }
    }
    Ok(())
}

impl ApiServerFlags {
    /// The flags, with paths made absolute (kube-apiserver runs in another directory), after
    /// checking that the files they name can be read: a missing file is an
    /// [`EnvtestError::Prepare`] naming it, not a kube-apiserver that exits at start.
    fn args(&self) -> Result<Vec<String>, EnvtestError> {
        let mut args = Vec::new();
        if let Some(path) = &self.admission_control_config {
            let what = "the admission control config file";
            let abs = std::path::absolute(path)
                .map_err(|e| prepare(what, format!("{}: {e}", path.display())))?;
            std::fs::File::open(&abs)
                .map_err(|e| prepare(what, format!("{}: {e}", abs.display())))?;
            args.push(format!("--admission-control-config-file={}", abs.display()));
        }
        checked_flags("kube-apiserver", &self.apiserver, OWNED_APISERVER_FLAGS)?;
        args.extend(self.apiserver.iter().cloned());
        Ok(args)
    }

    /// The test's etcd flags, checked.
    fn etcd_args(&self) -> Result<Vec<String>, EnvtestError> {
        checked_flags("etcd", &self.etcd, OWNED_ETCD_FLAGS)?;
        Ok(self.etcd.clone())
    }
}

/// kube-apiserver's command line: etcd at `etcd_url`, TLS on 127.0.0.1:`secure` with the
/// generated PKI, RBAC authorization (the admin is in `system:masters`), service-account tokens
/// (issuer, verification and signing keys: the TokenRequest and TokenReview APIs work), the
/// ServiceAccount admission plugin off and [`ENABLED_ADMISSION_PLUGINS`] on, then the test's
/// `extra` flags ([`ApiServerFlags::args`]).
fn apiserver_args(
    etcd_url: &str,
    secure: u16,
    files: &pki::PkiFiles,
    cert_dir: &Path,
    extra: Vec<String>,
) -> Vec<String> {
    let p = |f: &PathBuf| f.display().to_string();
    let mut args = vec![
        format!("--etcd-servers={etcd_url}"),
        "--bind-address=127.0.0.1".into(),
        "--advertise-address=127.0.0.1".into(),
        // No Endpoints for the `kubernetes` Service: they would hold the advertise address, and
        // a loopback address is not a valid endpoint. kube-apiserver 1.37 refuses to start with
        // a loopback advertise address and the default `lease` reconciler (earlier releases
        // started, then failed every write of those Endpoints). The Service itself is still
        // created, as kcr-envtest's in-process server does.
        "--endpoint-reconciler-type=none".into(),
        format!("--secure-port={secure}"),
        format!("--tls-cert-file={}", p(&files.serving_cert)),
        format!("--tls-private-key-file={}", p(&files.serving_key)),
        format!("--client-ca-file={}", p(&files.ca_cert)),
        format!(
            "--service-account-key-file={}",
            p(&files.service_account_public_key)
        ),
        format!(
            "--service-account-signing-key-file={}",
            p(&files.service_account_key)
        ),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
        "--service-cluster-ip-range=10.0.0.0/24".into(),
        "--authorization-mode=RBAC".into(),
        "--allow-privileged=true".into(),
        "--disable-admission-plugins=ServiceAccount".into(),
        format!("--enable-admission-plugins={ENABLED_ADMISSION_PLUGINS}"),
        format!("--cert-dir={}", cert_dir.display()),
        "--v=1".into(),
    ];
    args.extend(extra);
    args
}

impl ControlPlane {
    /// Start a control plane whose kube-apiserver also gets `flags`, and a proxy on
    /// `127.0.0.1:proxy_port` (0 for any) that applies `faults`. A free port found for etcd or kube-apiserver can be taken by another process
    /// before they bind it (tests start control planes concurrently): such a start is retried
    /// with fresh ports, up to [`START_ATTEMPTS`] times.
    pub async fn start(
        proxy_port: u16,
        flags: &ApiServerFlags,
        faults: Faults,
        expiry: Arc<Expiry>,
    ) -> Result<ControlPlane, EnvtestError> {
        let extra = flags.args()?;
        let etcd_extra = flags.etcd_args()?;
        let mut attempt = 1;
        loop {
            match Self::start_once(
                proxy_port,
                &extra,
                &etcd_extra,
                faults.clone(),
                expiry.clone(),
            )
            .await
            {
                Err(e) if attempt < START_ATTEMPTS && lost_a_port(&e) => {
                    tracing::warn!(attempt, error = %e, "a control-plane port was taken; retrying");
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn start_once(
        proxy_port: u16,
        extra: &[String],
        etcd_extra: &[String],
        faults: Faults,
        expiry: Arc<Expiry>,
    ) -> Result<ControlPlane, EnvtestError> {
        let started = Instant::now();
        let keep = std::env::var_os("KCR_ENVTEST_KEEP_LOGS").is_some_and(|v| v == "1");
        let binaries = Binaries::find()?;
        let dir = tempfile::Builder::new()
            .prefix("kcr-envtest-real-")
            .tempdir()
            .map_err(|e| prepare("a temporary directory", e))?;
        let path = |name: &str| dir.path().join(name);
        for d in ["pki", "etcd", "logs"] {
            std::fs::create_dir_all(path(d)).map_err(|e| prepare(d, e))?;
        }
        let pki = Pki::generate()?;
        let files = pki.write(&path("pki"))?;

        let (etcd_client, etcd_peer, secure) = (free_port()?, free_port()?, free_port()?);
        let etcd_url = format!("http://127.0.0.1:{etcd_client}");
        let peer_url = format!("http://127.0.0.1:{etcd_peer}");
        let etcd = Process::spawn(
            "etcd",
            &binaries.etcd,
            &[
                vec![
                    "--name=envtest".into(),
                    format!("--data-dir={}", path("etcd").display()),
                    format!("--listen-client-urls={etcd_url}"),
                    format!("--advertise-client-urls={etcd_url}"),
                    format!("--listen-peer-urls={peer_url}"),
                    format!("--initial-advertise-peer-urls={peer_url}"),
                    format!("--initial-cluster=envtest={peer_url}"),
                    "--unsafe-no-fsync=true".into(),
                    "--log-level=warn".into(),
                ],
                etcd_extra.to_vec(),
            ]
            .concat(),
            path("logs/etcd.log"),
            // A process that dies without dropping the plane leaves no data behind.
            (!keep).then(|| dir.path()),
        )?;
        let p = |f: &PathBuf| f.display().to_string();
        let apiserver = Process::spawn(
            "kube-apiserver",
            &binaries.kube_apiserver,
            &apiserver_args(&etcd_url, secure, &files, &path("pki"), extra.to_vec()),
            path("logs/kube-apiserver.log"),
            None,
        )?;
        let mut processes = Processes {
            controller_manager: None,
            apiserver,
            etcd,
        };

        let direct_kubeconfig = kubeconfig(
            &format!("https://127.0.0.1:{secure}"),
            &pki.ca_cert,
            &pki.admin_cert,
            &pki.admin_key,
        );
        let config = kube::Config::from_custom_kubeconfig(
            direct_kubeconfig.clone(),
            &KubeConfigOptions::default(),
        )
        .await
        .map_err(|e| EnvtestError::Client(e.to_string()))?;
        let direct = crate::connect::client(config).map_err(EnvtestError::Client)?;
        wait_ready(&direct, &mut processes).await?;
        wait_bootstrapped(&direct, &mut processes).await?;

        let kcm_kubeconfig = path("pki/controller-manager.kubeconfig");
        if let Some(kcm) = &binaries.kube_controller_manager {
            let yaml = serde_saphyr::to_string(&direct_kubeconfig)
                .map_err(|e| prepare("the controller manager's kubeconfig", e))?;
            std::fs::write(&kcm_kubeconfig, yaml)
                .map_err(|e| prepare("the controller manager's kubeconfig", e))?;
            processes.controller_manager = Some(Process::spawn(
                "kube-controller-manager",
                kcm,
                &[
                    format!("--kubeconfig={}", kcm_kubeconfig.display()),
                    format!("--controllers={CONTROLLERS}"),
                    "--leader-elect=false".into(),
                    format!(
                        "--service-account-private-key-file={}",
                        p(&files.service_account_key)
                    ),
                    format!("--root-ca-file={}", p(&files.ca_cert)),
                    // No HTTPS endpoint: nothing here reads its metrics, and a port it could
                    // lose to another control plane would make it exit.
                    "--secure-port=0".into(),
                    "--v=1".into(),
                ],
                path("logs/kube-controller-manager.log"),
                None,
            )?);
        }

        let apiserver_url = format!("https://127.0.0.1:{secure}");
        let proxy = Proxy::start(
            proxy_port,
            Upstream::tls(
                apiserver_url.clone(),
                tls_config(&pki.ca_cert_der, &pki.admin_cert_der, &pki.admin_key_der)?,
            ),
            ProxyAccess {
                tls: None,
                token: None,
                lease_namespace: "kube-node-lease".to_string(),
            },
            faults,
            expiry,
        )
        .await?;
        tracing::info!(
            dir = %dir.path().display(),
            apiserver = %format!("https://127.0.0.1:{secure}"),
            proxy = %proxy.addr(),
            ms = started.elapsed().as_millis() as u64,
            "real control plane started"
        );
        let dir = if keep {
            let kept = dir.keep();
            eprintln!("kcr-envtest: keeping {}", kept.display());
            None
        } else {
            Some(dir)
        };
        let attachment = Attachment {
            apiserver: apiserver_url,
            ca_cert: pki.ca_cert.clone(),
            ca_key: pki.ca.key_pem(),
            admin_cert: pki.admin_cert.clone(),
            admin_key: pki.admin_key.clone(),
            controller_manager: processes.controller_manager.is_some(),
        };
        Ok(ControlPlane {
            proxy,
            controller_manager: processes.controller_manager.is_some(),
            processes: Mutex::new(Some(processes)),
            attachment,
            direct,
            direct_kubeconfig,
            ca_cert: pki.ca_cert,
            ca: pki.ca,
            dir,
        })
    }

    /// A control plane another process runs (the standalone `kcr-envtest --attachment FILE`
    /// on the real backend), used through a fault proxy of this process on
    /// `127.0.0.1:proxy_port` (0 for any) that applies `faults`. Its processes are not this
    /// handle's: dropping it stops the proxy only.
    pub async fn attach(
        attachment: Attachment,
        proxy_port: u16,
        faults: Faults,
        expiry: Arc<Expiry>,
    ) -> Result<ControlPlane, EnvtestError> {
        let der = |what: &str, pem_text: &str| {
            pem::parse(pem_text)
                .map(|p| p.into_contents())
                .map_err(|e| prepare(&format!("the attached control plane's {what}"), e))
        };
        let ca_cert_der = der("CA certificate", &attachment.ca_cert)?;
        let admin_cert_der = der("admin certificate", &attachment.admin_cert)?;
        let admin_key_der = der("admin key", &attachment.admin_key)?;
        let ca = pki::CertificateAuthority::from_key_pem(&attachment.ca_key)?;
        let direct_kubeconfig = kubeconfig(
            &attachment.apiserver,
            &attachment.ca_cert,
            &attachment.admin_cert,
            &attachment.admin_key,
        );
        let config = kube::Config::from_custom_kubeconfig(
            direct_kubeconfig.clone(),
            &KubeConfigOptions::default(),
        )
        .await
        .map_err(|e| EnvtestError::Client(e.to_string()))?;
        let direct = crate::connect::client(config).map_err(EnvtestError::Client)?;
        // Fail here, naming the control plane, if it is not there (any more).
        direct
            .apiserver_version()
            .await
            .map_err(|e| EnvtestError::SharedServer {
                reason: format!(
                    "the shared control plane at {} does not answer: {e}",
                    attachment.apiserver
                ),
            })?;
        let proxy = Proxy::start(
            proxy_port,
            Upstream::tls(
                attachment.apiserver.clone(),
                tls_config(&ca_cert_der, &admin_cert_der, &admin_key_der)?,
            ),
            ProxyAccess {
                tls: None,
                token: None,
                lease_namespace: "kube-node-lease".to_string(),
            },
            faults,
            expiry,
        )
        .await?;
        Ok(ControlPlane {
            proxy,
            processes: Mutex::new(None),
            controller_manager: attachment.controller_manager,
            direct,
            direct_kubeconfig,
            ca_cert: attachment.ca_cert.clone(),
            ca,
            attachment,
            dir: None,
        })
    }

    /// Whether another process runs this control plane ([`ControlPlane::attach`]).
    pub fn is_attached(&self) -> bool {
        self.processes.lock().is_none()
    }

    /// What another process needs to use this control plane.
    pub fn attachment(&self) -> &Attachment {
        &self.attachment
    }

    /// The proxy's address, where clients connect.
    pub fn proxy_addr(&self) -> std::net::SocketAddr {
        self.proxy.addr()
    }

    /// A client straight to kube-apiserver (TLS, admin certificate), past the proxy: the
    /// helpers' requests are neither counted nor failed.
    pub fn direct_client(&self) -> kube::Client {
        self.direct.clone()
    }

    /// A kubeconfig straight to kube-apiserver (TLS, admin certificate).
    pub fn direct_kubeconfig(&self) -> &Kubeconfig {
        &self.direct_kubeconfig
    }

    /// A kubeconfig straight to kube-apiserver that authenticates as user `name` in `groups`
    /// with a fresh client certificate signed by the control plane's CA.
    pub fn user_kubeconfig(&self, name: &str, groups: &[&str]) -> Result<Kubeconfig, EnvtestError> {
        let server = self
            .direct_kubeconfig
            .clusters
            .first()
            .and_then(|c| c.cluster.as_ref())
            .and_then(|c| c.server.clone())
            .ok_or_else(|| prepare("a user's kubeconfig", "the admin kubeconfig has no server"))?;
        let (cert, key) = self.ca.client_certificate(name, groups)?;
        Ok(kubeconfig(&server, &self.ca_cert, &cert, &key))
    }

    /// Whether garbage collection and namespace deletion run (kube-controller-manager does).
    pub fn has_controller_manager(&self) -> bool {
        self.controller_manager
    }

    /// Stop the proxy and kill the processes (also done on drop).
    pub fn stop(&self) {
        self.proxy.stop();
        if let Some(processes) = self.processes.lock().as_mut() {
            processes.stop();
        }
    }

    /// The temporary directory (logs under `logs/`), unless it was kept.
    pub fn dir(&self) -> Option<&std::path::Path> {
        self.dir.as_ref().map(|d| d.path())
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Wait until kube-apiserver answers `/readyz` with 200, failing early when a process exits.
async fn wait_ready(client: &kube::Client, processes: &mut Processes) -> Result<(), EnvtestError> {
    let deadline = Instant::now() + READY_TIMEOUT;
    let mut last;
    loop {
        if let Some(exited) = processes.exited() {
            return Err(exited);
        }
        let req = http::Request::get("/readyz")
            .body(Vec::new())
            .map_err(|e| EnvtestError::Client(e.to_string()))?;
        match client.request_text(req).await {
            Ok(text) if text.trim() == "ok" => return Ok(()),
            Ok(text) => last = text,
            Err(e) => last = e.to_string(),
        }
        if Instant::now() > deadline {
            return Err(processes.apiserver.startup_error(format!(
                "/readyz not ok after {} s; last answer: {last}",
                READY_TIMEOUT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Wait until every object of `bootstrap_objects` exists (a 200 to its GET), failing early when a
/// process exits and after [`BOOTSTRAP_TIMEOUT`] with the objects that never appeared.
async fn wait_bootstrapped(
    client: &kube::Client,
    processes: &mut Processes,
) -> Result<(), EnvtestError> {
    let deadline = Instant::now() + BOOTSTRAP_TIMEOUT;
    let mut missing = bootstrap_objects();
    let mut last = String::new();
    loop {
        if let Some(exited) = processes.exited() {
            return Err(exited);
        }
        let mut still = Vec::new();
        for (what, path) in missing {
            let req = http::Request::get(path.as_str())
                .body(Vec::new())
                .map_err(|e| EnvtestError::Client(e.to_string()))?;
            if let Err(e) = client.request_text(req).await {
                last = format!("{what}: {e}");
                still.push((what, path));
            }
        }
        missing = still;
        if missing.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            let names: Vec<&str> = missing.iter().map(|(what, _)| what.as_str()).collect();
            return Err(processes.apiserver.startup_error(format!(
                "ready, but {} still missing after {} s (kube-apiserver creates them once ready); \
                 last answer: {last}",
                names.join(", "),
                BOOTSTRAP_TIMEOUT.as_secs()
            )));
        }
        tokio::time::sleep(BOOTSTRAP_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn startup(reason: &str, log_tail: &str) -> EnvtestError {
        EnvtestError::Startup {
            component: "etcd",
            reason: reason.into(),
            log: "etcd.log".into(),
            log_tail: log_tail.into(),
        }
    }

    #[test]
    fn the_api_server_authorizes_with_rbac_and_issues_service_account_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let files = Pki::generate().unwrap().write(dir.path()).unwrap();
        let args = apiserver_args(
            "http://127.0.0.1:2379",
            6443,
            &files,
            dir.path(),
            Vec::new(),
        );
        let flag = |name: &str| -> Vec<&str> {
            args.iter()
                .filter_map(|a| a.strip_prefix(&format!("--{name}=")))
                .collect()
        };
        assert_eq!(flag("authorization-mode"), ["RBAC"]);
        // TokenRequest needs the issuer and the signing key; TokenReview the verification key.
        assert_eq!(
            flag("service-account-issuer"),
            ["https://kubernetes.default.svc.cluster.local"]
        );
        assert_eq!(
            flag("service-account-signing-key-file"),
            [files.service_account_key.display().to_string()]
        );
        assert_eq!(
            flag("service-account-key-file"),
            [files.service_account_public_key.display().to_string()]
        );
        // Client certificates (the admin's) are verified against the generated CA.
        assert_eq!(
            flag("client-ca-file"),
            [files.ca_cert.display().to_string()]
        );
        assert_eq!(
            flag("enable-admission-plugins"),
            ["OwnerReferencesPermissionEnforcement"]
        );
        assert_eq!(flag("disable-admission-plugins"), ["ServiceAccount"]);
        assert!(flag("admission-control-config-file").is_empty());
    }

    #[test]
    fn an_admission_config_file_is_passed_with_an_absolute_path() {
        let dir = tempfile::tempdir().unwrap();
        let files = Pki::generate().unwrap().write(dir.path()).unwrap();
        let config = dir.path().join("admission.yaml");
        std::fs::write(&config, "apiVersion: apiserver.config.k8s.io/v1\n").unwrap();
        let flags = ApiServerFlags {
            admission_control_config: Some(config.clone()),
            ..Default::default()
        };
        let args = apiserver_args(
            "http://127.0.0.1:2379",
            6443,
            &files,
            dir.path(),
            flags.args().unwrap(),
        );
        let ours: Vec<&String> = args
            .iter()
            .filter(|a| a.starts_with("--admission-control-config-file="))
            .collect();
        assert_eq!(
            ours,
            [&format!(
                "--admission-control-config-file={}",
                config.display()
            )]
        );
        // The defaults stay: the flag is added, nothing is replaced.
        assert!(args.contains(&"--authorization-mode=RBAC".to_string()));

        // A relative path is made absolute against the current directory.
        let relative = ApiServerFlags {
            admission_control_config: Some(PathBuf::from("Cargo.toml")),
            ..Default::default()
        };
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            relative.args().unwrap(),
            [format!(
                "--admission-control-config-file={}",
                cwd.join("Cargo.toml").display()
            )]
        );

        // A file that is not there fails before any process starts, naming the file.
        let missing = ApiServerFlags {
            admission_control_config: Some(dir.path().join("missing.yaml")),
            ..Default::default()
        };
        match missing.args().unwrap_err() {
            EnvtestError::Prepare { what, reason } => {
                assert_eq!(what, "the admission control config file");
                assert!(reason.contains("missing.yaml"), "{reason}");
            }
            other => panic!("expected Prepare, got {other}"),
        }
        assert!(ApiServerFlags::default().args().unwrap().is_empty());
    }

    #[test]
    fn only_a_lost_port_is_retried() {
        assert!(lost_a_port(&startup(
            "exited: exit status: 1",
            r#"{"msg":"discovery failed","error":"listen tcp 127.0.0.1:40425: bind: address already in use"}"#
        )));
        assert!(!lost_a_port(&startup(
            "exited: exit status: 1",
            "permission denied"
        )));
        assert!(!lost_a_port(&EnvtestError::KubectlNotFound));
    }

    #[test]
    fn a_tests_own_flags_follow_envtests_and_owned_ones_are_refused() {
        let flags = ApiServerFlags {
            apiserver: vec![
                "--feature-gates=SomeGate=true".into(),
                "--runtime-config=api/alpha=true".into(),
            ],
            etcd: vec!["--quota-backend-bytes=4294967296".into()],
            ..Default::default()
        };
        assert_eq!(
            flags.args().unwrap(),
            [
                "--feature-gates=SomeGate=true",
                "--runtime-config=api/alpha=true"
            ]
        );
        assert_eq!(
            flags.etcd_args().unwrap(),
            ["--quota-backend-bytes=4294967296"]
        );

        let refused = |apiserver: &[&str], etcd: &[&str]| {
            let flags = ApiServerFlags {
                apiserver: apiserver.iter().map(|s| s.to_string()).collect(),
                etcd: etcd.iter().map(|s| s.to_string()).collect(),
                ..Default::default()
            };
            flags
                .args()
                .and_then(|_| flags.etcd_args())
                .unwrap_err()
                .to_string()
        };
        let err = refused(&["--secure-port=1234"], &[]);
        assert!(
            err.contains("kcr-envtest sets --secure-port itself"),
            "{err}"
        );
        let err = refused(&[], &["--data-dir=/tmp/x"]);
        assert!(err.contains("etcd flag \"--data-dir=/tmp/x\""), "{err}");
        assert!(err.contains("kcr-envtest sets --data-dir itself"), "{err}");
        for bad in ["feature-gates=X=true", "-v=2", "--", "---x", "--a b"] {
            let err = refused(&[bad], &[]);
            assert!(err.contains("--name or --name=value"), "{bad}: {err}");
        }
    }
}
