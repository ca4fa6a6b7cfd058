//! [`TestUser`]: a user of the real backend with a client certificate of its own, made by
//! [`TestApiServer::add_user`](crate::TestApiServer::add_user).

use std::path::Path;

use kube::config::Kubeconfig;

use crate::error::EnvtestError;

/// A user that authenticates with a client certificate of its own, straight to kube-apiserver
/// (see [`TestApiServer::add_user`](crate::TestApiServer::add_user)): its client and its
/// kubeconfig (for kubectl or another process), which both present the certificate.
#[non_exhaustive]
pub struct TestUser {
    /// The user name (the certificate's common name).
    pub name: String,
    /// The groups (the certificate's organizations), as given.
    pub groups: Vec<String>,
    /// A client that authenticates as this user (default namespace `default`). Its requests
    /// do not pass the fault proxy.
    pub client: kube::Client,
    /// A kubeconfig with the server's address and CA and this user's certificate and key.
    pub kubeconfig: Kubeconfig,
}

impl std::fmt::Debug for TestUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestUser")
            .field("name", &self.name)
            .field("groups", &self.groups)
            .finish_non_exhaustive()
    }
}

impl TestUser {
    /// The user `name` in `groups` whose credentials `kubeconfig` holds.
    pub(crate) fn new(
        name: &str,
        groups: &[&str],
        kubeconfig: Kubeconfig,
    ) -> Result<TestUser, EnvtestError> {
        let config = kube::Config::try_from(kubeconfig.clone())
            .map_err(|e| EnvtestError::Client(format!("user {name}: {e}")))?;
        let client = crate::connect::client(config)
            .map_err(|e| EnvtestError::Client(format!("user {name}: {e}")))?;
        Ok(TestUser {
            name: name.to_string(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            client,
            kubeconfig,
        })
    }

    /// The kubeconfig as YAML text (it holds the user's private key).
    pub fn kubeconfig_yaml(&self) -> Result<String, EnvtestError> {
        serde_saphyr::to_string(&self.kubeconfig).map_err(|e| EnvtestError::Prepare {
            what: format!("user {}'s kubeconfig", self.name),
            reason: e.to_string(),
        })
    }

    /// Write the kubeconfig (YAML; it holds the user's private key, so the file is readable by
    /// its owner only) to `path`, for kubectl or other processes.
    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> Result<(), EnvtestError> {
        write_owner_only(path.as_ref(), &self.kubeconfig_yaml()?)
    }
}

/// Write `text` (credentials) to `path`, readable and writable by its owner only (on Unix).
pub(crate) fn write_owner_only(path: &Path, text: &str) -> Result<(), EnvtestError> {
    use std::io::Write as _;
    let error = |source| EnvtestError::WriteKubeconfig {
        path: path.display().to_string(),
        source,
    };
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(0o600);
        // An existing file keeps its mode on open: narrow it before writing the credentials.
        if path.exists() {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                .map_err(error)?;
        }
    }
    let mut file = options.open(path).map_err(error)?;
    file.write_all(text.as_bytes()).map_err(error)
}
