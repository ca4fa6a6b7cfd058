//! The guide's quick start (`docs/guide/src/quickstart.md`): a Greeting kind and its controller.
//!
//! ```sh
//! cargo run -p kcr-envtest-cli -- --port 6443 --kubeconfig /tmp/kc.yaml &   # an API server
//! export KUBECONFIG=/tmp/kc.yaml
//! cargo run -p kcr-tests --example quickstart -- crd | kubectl apply -f -
//! cargo run -p kcr-tests --example quickstart
//! ```

mod greeting;

// ANCHOR: main
use greeting::{Greeting, add_greeter};
use kcr_controller::{Manager, ManagerOptions};
use kube::CustomResourceExt;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_env_filter("info").init();
    // `quickstart crd` prints the CustomResourceDefinition, for `kubectl apply -f -`.
    if std::env::args().nth(1).as_deref() == Some("crd") {
        println!("{}", serde_json::to_string_pretty(&Greeting::crd())?);
        return Ok(());
    }
    let client = kube::Client::try_default().await?;
    let options = ManagerOptions::default()
        .metrics_bind_address("127.0.0.1:8080")?
        .health_probe_bind_address("127.0.0.1:8081")?
        .field_owner("greeter");
    let mgr = Manager::new(client, options).await?;
    add_greeter(&mgr)?;
    mgr.run_until_signal().await?;
    Ok(())
}
// ANCHOR_END: main
