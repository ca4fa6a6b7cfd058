//! Acting as a ServiceAccount on the real backend (or an existing cluster), for tests of an
//! operator's RBAC.
//!
//! [`TestApiServer::client_for_service_account`] gives a client whose requests kube-apiserver
//! authorizes as the ServiceAccount `namespace/name`: the user
//! `system:serviceaccount:<namespace>:<name>` in the groups `system:serviceaccounts` and
//! `system:serviceaccounts:<namespace>` ([`service_account_user`],
//! [`service_account_groups`]), which is what the authenticator makes of the account's token
//! in a pod (`system:authenticated` is added by the server either way). RBAC bindings whose
//! subject is that ServiceAccount (or one of those groups) apply to it, and nothing else does.
//!
//! It impersonates that identity through the admin credential rather than presenting a token
//! from the TokenRequest API: the client then talks to the fault proxy like every other
//! client of the server, so a test can count the operator's requests and fail some of them
//! (a token would not pass the proxy, whose own client certificate authenticates first), and
//! the ServiceAccount need not exist for a request to be authorized. Authorization sees the
//! same user and groups as with a token.

use crate::error::EnvtestError;
use crate::server::TestApiServer;

/// The user name the API server gives the ServiceAccount `namespace/name`.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The groups the API server puts a ServiceAccount of `namespace` in (besides
/// `system:authenticated`).
pub fn service_account_groups(namespace: &str) -> [String; 2] {
    [
        "system:serviceaccounts".to_string(),
        format!("system:serviceaccounts:{namespace}"),
    ]
}

impl TestApiServer {
    /// A client (through the fault proxy, default namespace [`namespace`](Self::namespace))
    /// whose requests are authorized as the ServiceAccount `namespace/name`: as the user
    /// [`service_account_user`] in the groups [`service_account_groups`], which is what the
    /// API server makes of the account's token. It impersonates that identity through the
    /// admin credential (a token would not pass the fault proxy, whose client certificate
    /// authenticates first), so the test can still count and fail the client's requests.
    ///
    /// Real and existing backends (on an existing cluster the kubeconfig's user must be allowed
    /// to impersonate, as cluster admins are): the in-process server authorizes nothing, so a
    /// test of RBAC there would pass without proving anything ([`EnvtestError::Unsupported`]).
    /// See also [`add_user`](Self::add_user), a user with a certificate of its own.
    ///
    /// ```no_run
    /// # async fn f(server: &kcr_envtest::TestApiServer) -> Result<(), Box<dyn std::error::Error>> {
    /// use k8s_openapi::api::core::v1::Node;
    /// let operator = server.client_for_service_account("nodepool-system", "nodepool-operator")?;
    /// // 403 unless a (Cluster)RoleBinding grants the ServiceAccount `list` on nodes.
    /// let nodes = kube::Api::<Node>::all(operator).list(&Default::default()).await;
    /// # let _ = nodes;
    /// # Ok(())
    /// # }
    /// ```
    pub fn client_for_service_account(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<kube::Client, EnvtestError> {
        let groups = service_account_groups(namespace);
        let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
        self.client_as(&service_account_user(namespace, name), &groups)
            .map_err(|e| match e {
                EnvtestError::Unsupported { backend, why, .. } => EnvtestError::Unsupported {
                    helper: "TestApiServer::client_for_service_account",
                    backend,
                    why,
                },
                other => other,
            })
    }
}

impl TestApiServer {
    /// A user that authenticates with a token of the ServiceAccount `namespace/name`, issued by
    /// the TokenRequest API (one hour), straight to kube-apiserver as a pod's client would: the
    /// token authenticator, not impersonation, makes the identity, so the ServiceAccount must
    /// exist and the token stops working when it is deleted. Its requests do not pass the fault
    /// proxy; for a client whose requests can be counted and failed, use
    /// [`client_for_service_account`](Self::client_for_service_account).
    ///
    /// Real backend only ([`EnvtestError::Unsupported`] otherwise: the in-process server
    /// authenticates nothing, and on an existing cluster kube-apiserver's address and CA are
    /// the kubeconfig's business).
    pub async fn service_account_token_user(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<crate::TestUser, EnvtestError> {
        use k8s_openapi::api::authentication::v1::TokenRequest;
        use k8s_openapi::api::core::v1::ServiceAccount;
        let mut kubeconfig = self.direct_kubeconfig().map_err(|e| match e {
            EnvtestError::Unsupported { backend, .. } => EnvtestError::Unsupported {
                helper: "TestApiServer::service_account_token_user",
                backend,
                why: "only the real backend's kube-apiserver is reached directly; use \
                      client_for_service_account (impersonation)",
            },
            other => other,
        })?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig.clone(), &Default::default())
            .await
            .map_err(|e| EnvtestError::Client(format!("the admin client: {e}")))?;
        let admin = crate::connect::client(config)
            .map_err(|e| EnvtestError::Client(format!("the admin client: {e}")))?;
        let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(admin, namespace);
        // Built from JSON, and the token read from JSON: which of these fields are optional
        // differs between Kubernetes versions' types, and the user of kcr picks the version.
        let request: TokenRequest = serde_json::from_value(serde_json::json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"audiences": [], "expirationSeconds": 3600},
        }))
        .map_err(|source| EnvtestError::Serialize {
            what: "a TokenRequest".into(),
            source,
        })?;
        let issued = accounts
            .create_token_request(name, &Default::default(), &request)
            .await
            .map_err(crate::error::kube_error(format!(
                "requesting a token of the ServiceAccount {namespace}/{name}"
            )))?;
        let issued = serde_json::to_value(&issued).map_err(|source| EnvtestError::Serialize {
            what: "the issued TokenRequest".into(),
            source,
        })?;
        let token = issued["status"]["token"]
            .as_str()
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| {
                EnvtestError::Client(format!(
                    "the TokenRequest of {namespace}/{name} came back without a token"
                ))
            })?;
        for user in &mut kubeconfig.auth_infos {
            user.auth_info = Some(kube::config::AuthInfo {
                token: Some(token.clone().into()),
                ..kube::config::AuthInfo::default()
            });
        }
        for context in &mut kubeconfig.contexts {
            if let Some(context) = &mut context.context {
                context.namespace = Some(namespace.to_string());
            }
        }
        let groups = service_account_groups(namespace);
        let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
        crate::TestUser::new(&service_account_user(namespace, name), &groups, kubeconfig)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_is_the_one_a_token_of_the_account_authenticates_as() {
        assert_eq!(
            service_account_user("nodepool-system", "nodepool-operator"),
            "system:serviceaccount:nodepool-system:nodepool-operator"
        );
        assert_eq!(
            service_account_groups("nodepool-system"),
            [
                "system:serviceaccounts".to_string(),
                "system:serviceaccounts:nodepool-system".to_string()
            ]
        );
    }
}
