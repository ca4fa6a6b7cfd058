//! The guide's "Tutorial: a multi-version API" page (`docs/guide/src/tutorial-multiversion.md`):
//! a `Backup` kind in `v1alpha1` and `v1`, converted by kcr-webhook's hub-and-spoke conversion
//! (`v1` is the hub and the storage version). The test installs the CRD with both versions and
//! the conversion webhook, served by a Manager, on an API server of its own (a CRD's conversion
//! webhook serves every namespace), and checks that an object written in one version reads the
//! same in the other and back; `KCR_ENVTEST_BACKEND=real` runs it on kube-apiserver.

// ANCHOR: types
/// The first version: a flat spec.
pub mod v1alpha1 {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// What to back up, where, and for how long (v1alpha1).
    #[derive(
        CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema,
    )]
    #[kube(
        group = "guide.kcr.dev",
        version = "v1alpha1",
        kind = "Backup",
        namespaced
    )]
    #[serde(rename_all = "camelCase")]
    pub struct BackupSpec {
        /// The bucket the backups go to.
        pub bucket: String,
        /// How many days a backup is kept.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub retain_days: Option<u32>,
    }
}

/// The second version, the hub (and the version stored): the bucket moved under `target`,
/// `retainDays` renamed to `retention.days`, and a field that v1alpha1 does not have.
pub mod v1 {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// What to back up, where, and for how long (v1).
    #[derive(
        CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema,
    )]
    #[kube(group = "guide.kcr.dev", version = "v1", kind = "Backup", namespaced)]
    pub struct BackupSpec {
        /// Where the backups go.
        pub target: Target,
        /// How long they are kept.
        #[serde(default)]
        pub retention: Retention,
    }

    /// Where the backups go.
    #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
    pub struct Target {
        /// The bucket (v1alpha1's `spec.bucket`).
        pub bucket: String,
    }

    /// How long backups are kept.
    #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct Retention {
        /// Days (v1alpha1's `spec.retainDays`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub days: Option<u32>,
        /// How many backups are kept whatever their age (new in v1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub keep_last: Option<u32>,
    }
}
// ANCHOR_END: types

// ANCHOR: convertible
use kcr_webhook::{ConversionError, Convertible};

/// Where v1alpha1 keeps `spec.retention.keepLast`, which it has no field for, so that an
/// object read and written back in v1alpha1 loses nothing.
pub const KEEP_LAST_ANNOTATION: &str = "guide.kcr.dev/keep-last";

impl Convertible<v1::Backup> for v1alpha1::Backup {
    fn to_hub(self) -> Result<v1::Backup, ConversionError> {
        let mut metadata = self.metadata;
        let keep_last = match metadata
            .annotations
            .as_mut()
            .and_then(|a| a.remove(KEEP_LAST_ANNOTATION))
        {
            None => None,
            Some(value) => Some(value.parse().map_err(|_| {
                ConversionError::failed(format!("{KEEP_LAST_ANNOTATION}: not a number: {value}"))
            })?),
        };
        Ok(v1::Backup {
            metadata,
            spec: v1::BackupSpec {
                target: v1::Target {
                    bucket: self.spec.bucket,
                },
                retention: v1::Retention {
                    days: self.spec.retain_days,
                    keep_last,
                },
            },
        })
    }

    fn from_hub(hub: v1::Backup) -> Result<Self, ConversionError> {
        let mut metadata = hub.metadata;
        if let Some(keep_last) = hub.spec.retention.keep_last {
            let annotations = metadata.annotations.get_or_insert_default();
            annotations.insert(KEEP_LAST_ANNOTATION.into(), keep_last.to_string());
        }
        Ok(v1alpha1::Backup {
            metadata,
            spec: v1alpha1::BackupSpec {
                bucket: hub.spec.target.bucket,
                retain_days: hub.spec.retention.days,
            },
        })
    }
}
// ANCHOR_END: convertible

// ANCHOR: crd
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kcr_webhook::{ClientTarget, crd_conversion};
use kube::CustomResourceExt;
use kube::core::crd::merge_crds;

/// The CRD: both versions served, `v1` stored, converted by the webhook at `target`, whose
/// serving certificate `ca_pem` signed.
pub fn crd(target: &ClientTarget, ca_pem: &[u8]) -> anyhow::Result<CustomResourceDefinition> {
    let mut crd = merge_crds(vec![v1alpha1::Backup::crd(), v1::Backup::crd()], "v1")?;
    crd.spec.conversion = Some(crd_conversion(target, ca_pem));
    Ok(crd)
}
// ANCHOR_END: crd

// ANCHOR: server
use kcr_controller::Manager;
use kcr_webhook::{Conversion, ManagerWebhookExt, ServerOptions, WebhookServer};

/// Adds the webhook server, serving the `Backup` conversion at `/convert`, to `mgr`: it runs
/// while the manager runs (on every replica, leader or not). The certificate and key are read
/// from `cert_dir` (`tls.crt`, `tls.key`) and reloaded when they change.
pub async fn add_webhooks(mgr: &Manager, options: ServerOptions) -> anyhow::Result<WebhookServer> {
    let server = WebhookServer::bind(options).await?;
    server.add_conversion(Conversion::<v1::Backup>::hub().spoke::<v1alpha1::Backup>())?;
    mgr.add_webhook_server(&server)?;
    Ok(server)
}
// ANCHOR_END: server

#[cfg(test)]
mod tests {
    // ANCHOR: test
    use std::net::SocketAddr;
    use std::time::Duration;

    use kcr_envtest::TestApiServer;
    use kcr_testkit::{RunningManager, eventually};
    use kcr_webhook::{CertificateAuthority, ClientTarget, ServerOptions};
    use kube::ResourceExt;
    use kube::api::{Api, PostParams};

    use super::{KEEP_LAST_ANNOTATION, add_webhooks, crd, v1, v1alpha1};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_backup_written_as_v1alpha1_reads_as_v1_and_back() -> anyhow::Result<()> {
        // An API server of the test's own: the conversion webhook serves the whole cluster.
        let env = TestApiServer::start().await?;

        // A CA and a serving certificate for 127.0.0.1 (in a cluster: cert-manager's).
        let ca = CertificateAuthority::generate("guide conversion CA")?;
        let cert_dir = tempfile::tempdir()?;
        ca.issue(&["127.0.0.1"])?.write_to_dir(cert_dir.path())?;
        let options = ServerOptions::default()
            .bind_address(SocketAddr::from(([127, 0, 0, 1], 0)))
            .cert_dir(cert_dir.path());

        // The manager runs the webhook server; the CRD points at it.
        let mgr = kcr_testkit::manager(&env).await?;
        let server = add_webhooks(&mgr, options).await?;
        let running = RunningManager::start(mgr);
        let target = ClientTarget::url_for(server.local_addr());
        let crd = crd(&target, ca.ca_pem().as_bytes())?;
        env.install_crd_value(serde_json::to_value(&crd)?).await?;

        let alphas: Api<v1alpha1::Backup> = Api::namespaced(env.client(), "default");
        let v1s: Api<v1::Backup> = Api::namespaced(env.client(), "default");

        // Written as v1alpha1 (stored as v1, so through the webhook). The API server may take
        // a moment to use a new CRD: retry until the create goes through.
        let nightly = v1alpha1::Backup::new(
            "nightly",
            v1alpha1::BackupSpec {
                bucket: "s3://backups/nightly".into(),
                retain_days: Some(7),
            },
        );
        eventually("a v1alpha1 Backup is created", || async {
            match alphas.create(&PostParams::default(), &nightly).await {
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                other => other.map(|_| ()),
            }
        })
        .timeout(Duration::from_secs(60))
        .await?;

        // Read as v1: the bucket moved under `target`, `retainDays` is `retention.days`.
        let as_v1 = v1s.get("nightly").await?;
        assert_eq!(as_v1.spec.target.bucket, "s3://backups/nightly");
        assert_eq!(as_v1.spec.retention.days, Some(7));
        assert_eq!(as_v1.spec.retention.keep_last, None);

        // And back as v1alpha1: what was written.
        let back = alphas.get("nightly").await?;
        assert_eq!(back.spec, nightly.spec);

        // A v1-only field survives a read and a write in v1alpha1, through the annotation.
        let mut weekly = v1::Backup::new(
            "weekly",
            v1::BackupSpec {
                target: v1::Target {
                    bucket: "s3://backups/weekly".into(),
                },
                retention: v1::Retention {
                    days: Some(30),
                    keep_last: Some(4),
                },
            },
        );
        weekly = v1s.create(&PostParams::default(), &weekly).await?;
        let mut old = alphas.get("weekly").await?;
        assert_eq!(
            old.annotations().get(KEEP_LAST_ANNOTATION),
            Some(&"4".into())
        );
        old.spec.retain_days = Some(60);
        alphas
            .replace("weekly", &PostParams::default(), &old)
            .await?;
        let new = v1s.get("weekly").await?;
        assert_eq!(new.spec.target, weekly.spec.target);
        assert_eq!(new.spec.retention.days, Some(60));
        assert_eq!(new.spec.retention.keep_last, Some(4));
        assert_eq!(new.annotations().get(KEEP_LAST_ANNOTATION), None);

        running.stop().await?;
        Ok(())
    }
    // ANCHOR_END: test
}
