//! `cronjob-operator run`, the binary as the Deployment runs it, against the test binary's API
//! server: the webhook server of `main.rs` serves the certificate of `--webhook-cert-dir`,
//! `/readyz` answers once it does, the API server calls its webhooks (defaults applied, an
//! invalid schedule refused), the controller runs (leader elected on the Lease in
//! `$POD_NAMESPACE`), and SIGTERM stops it with status 0.

mod support;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cronjob_operator::api::SCHEDULE_VALID;
use cronjob_operator::{CronJob, CronJobSpec};
use k8s_openapi::api::admissionregistration::v1 as ar;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kcr_envtest::TestNamespace;
use kcr_testkit::{eventually, that_ok};
use kcr_webhook::{CertificateAuthority, ClientTarget, ServerOptions, WebhookServer};
use kube::api::{Api, DeleteParams, PostParams};
use support::WAIT;

/// A loopback port nothing listens on now.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// The status line of `GET <path>` on `addr` (plain HTTP), or the error.
fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer.lines().next().unwrap_or_default().to_owned())
}

/// The binary, stopped with SIGTERM (or killed) when dropped.
struct Operator(Child);

impl Operator {
    /// Sends SIGTERM and waits (up to [`WAIT`]) for the exit status.
    fn terminate(mut self) -> anyhow::Result<std::process::ExitStatus> {
        let pid = self.0.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status()?;
        anyhow::ensure!(sent.success(), "kill -TERM {pid} failed");
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            if let Some(status) = self.0.try_wait()? {
                return Ok(status);
            }
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "still running {WAIT:?} after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            self.0.kill().ok();
            self.0.wait().ok();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_the_webhooks_and_runs_the_controller() -> anyhow::Result<()> {
    let ns = TestNamespace::new("binary").await?;
    ns.install_crd::<CronJob>().await?;
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(ns.namespace());
    std::fs::create_dir_all(&dir)?;
    let kubeconfig = dir.join("kubeconfig");
    ns.write_kubeconfig(&kubeconfig)?;
    // The serving certificate where cert-manager's Secret would be mounted.
    let ca = CertificateAuthority::generate("cronjob-operator test CA")?;
    let certs = dir.join("serving-certs");
    std::fs::create_dir_all(&certs)?;
    ca.issue(&["127.0.0.1"])?.write_to_dir(&certs)?;

    let (webhook_port, probe_port) = (free_port(), free_port());
    let webhook = SocketAddr::from(([127, 0, 0, 1], webhook_port));
    let probes = SocketAddr::from(([127, 0, 0, 1], probe_port));
    let args = [
        "run".to_string(),
        format!("--namespace={}", ns.namespace()),
        "--metrics-bind-address=0".into(),
        format!("--health-probe-bind-address={probes}"),
        format!("--webhook-bind-address={webhook}"),
        format!("--webhook-cert-dir={}", certs.display()),
    ];
    let log = std::fs::File::create(dir.join("operator.log"))?;
    let operator = Operator(
        Command::new(env!("CARGO_BIN_EXE_cronjob-operator"))
            .args(&args)
            .env("KUBECONFIG", &kubeconfig)
            .env("POD_NAMESPACE", ns.namespace())
            .env_remove("ENABLE_WEBHOOKS")
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?,
    );
    let log = || std::fs::read_to_string(dir.join("operator.log")).unwrap_or_default();

    // Ready once the webhook server serves its certificate (and the probes listen).
    let ready = eventually("/readyz answers 200", || async {
        that_ok(http_get(probes, "/readyz"), |line| line.contains(" 200 "))
    })
    .timeout(WAIT)
    .await;
    if let Err(e) = ready {
        anyhow::bail!("{e}\noperator log:\n{}", log());
    }

    // The webhook configurations for the webhooks the binary registers, at its address, with
    // the CA that signed its certificate, limited to this test's namespace.
    let local = WebhookServer::bind(
        ServerOptions::default().bind_address(SocketAddr::from(([127, 0, 0, 1], 0))),
    )
    .await?;
    cronjob_operator::webhook::register(&local)?;
    let name = ns.unique_name("cronjob-operator-binary");
    let target = ClientTarget::url_for(webhook);
    let (mut mutating, mut validating) =
        local.webhook_configurations(&name, &target, ca.ca_pem().as_bytes());
    let selector = LabelSelector {
        match_labels: Some(
            [(
                "kubernetes.io/metadata.name".to_string(),
                ns.namespace().to_string(),
            )]
            .into(),
        ),
        ..Default::default()
    };
    for w in mutating.webhooks.iter_mut().flatten() {
        w.namespace_selector = Some(selector.clone());
    }
    for w in validating.webhooks.iter_mut().flatten() {
        w.namespace_selector = Some(selector.clone());
    }
    let mutating_api: Api<ar::MutatingWebhookConfiguration> = Api::all(ns.client());
    let validating_api: Api<ar::ValidatingWebhookConfiguration> = Api::all(ns.client());
    mutating_api
        .create(&PostParams::default(), &mutating)
        .await?;
    validating_api
        .create(&PostParams::default(), &validating)
        .await?;

    // The API server applies configurations asynchronously: wait until it calls the
    // validating webhook (a dry-run create of a CronJob with a bad schedule is refused).
    let cronjobs: Api<CronJob> = Api::default_namespaced(ns.client());
    let cronjob = |name: &str, schedule: &str| {
        CronJob::new(
            name,
            CronJobSpec {
                schedule: schedule.into(),
                job_template: support::job_template(),
                ..Default::default()
            },
        )
    };
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let bad = cronjob("bad", "61 * * * *");
    let refused = eventually("the binary's validating webhook refuses", || async {
        match cronjobs.create(&dry_run, &bad).await {
            Err(kube::Error::Api(status)) if status.message.contains("denied the request") => {
                Ok(status.message)
            }
            other => Err(format!("{other:?}")),
        }
    })
    .timeout(WAIT)
    .await;
    let message = match refused {
        Ok(message) => message,
        Err(e) => anyhow::bail!("{e}\noperator log:\n{}", log()),
    };
    assert!(
        message.contains("spec.schedule: Invalid value: \"61 * * * *\""),
        "{message}"
    );

    // The defaults come from the binary's mutating webhook.
    let created = cronjobs
        .create(&PostParams::default(), &cronjob("hello", "*/5 * * * *"))
        .await?;
    assert_eq!(created.spec.suspend, Some(false));
    assert_eq!(created.spec.successful_jobs_history_limit, Some(3));
    assert_eq!(created.spec.failed_jobs_history_limit, Some(1));

    // The controller runs: it is the leader, and it reports the schedule valid.
    eventually("ScheduleValid=True on the CronJob", || async {
        let status = cronjobs.get("hello").await.ok()?.status?;
        let conditions = status.conditions.iter();
        let valid = conditions.filter(|c| c.type_ == SCHEDULE_VALID && c.status == "True");
        valid.count().eq(&1).then_some(())
    })
    .timeout(WAIT)
    .await?;
    let leases: Api<Lease> = Api::default_namespaced(ns.client());
    let lease = leases
        .get(cronjob_operator::manifests::LEADER_ELECTION_ID)
        .await?;
    let holder = lease.spec.and_then(|s| s.holder_identity);
    assert!(holder.is_some_and(|h| !h.is_empty()));

    // SIGTERM: a graceful stop, status 0.
    let status = operator.terminate()?;
    assert!(status.success(), "{status}\noperator log:\n{}", log());

    let dp = DeleteParams::default();
    mutating_api.delete(&name, &dp).await?;
    validating_api.delete(&name, &dp).await?;
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}
