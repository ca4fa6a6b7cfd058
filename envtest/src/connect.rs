//! The clients kcr-envtest makes, for its tests and its own requests: kcr-connect's, so that no
//! test and no helper waits on a dead connection (a request without an answer fails within
//! its deadline, a silent watch within its idle bound; see kcr-connect for the defaults).

use kcr_connect::ConnectionOptions;

/// A client for `config` with kcr-connect's default bounds. A configuration with a proxy,
/// which kcr-connect's own stack does not speak, gets kube's stack with the same deadlines in
/// front of it.
pub(crate) fn client(config: kube::Config) -> Result<kube::Client, String> {
    if config.proxy_url.is_some() {
        let host = kcr_connect::host_of(&config);
        let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
        return Ok(kcr_connect::bound(
            client,
            ConnectionOptions::default(),
            host,
        ));
    }
    kcr_connect::client(config, ConnectionOptions::default()).map_err(|e| e.to_string())
}
