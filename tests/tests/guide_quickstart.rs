//! The guide's quick start controller (`tests/examples/quickstart/`), run as the page says,
//! on either backend: a Greeting gets its ConfigMap, a changed message reaches it, and the
//! ConfigMap is owned by the greeting.

#[path = "../examples/quickstart/greeting.rs"]
mod greeting;

use std::time::Duration;

use greeting::{Greeting, GreetingSpec, add_greeter};
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_controller::{Manager, ManagerOptions};
use kcr_envtest::{TestNamespace, eventually};
use kube::api::{Api, Patch, PatchParams, PostParams};

#[tokio::test]
async fn a_greeting_gets_its_configmap() {
    let ns = TestNamespace::new("quickstart").await.unwrap();
    let client = ns.client();
    ns.install_crd::<Greeting>().await.unwrap();
    let options = ManagerOptions::default()
        .metrics_bind_address("0")
        .unwrap()
        .health_probe_bind_address("0")
        .unwrap()
        .field_owner("greeter");
    let mgr = Manager::new(client.clone(), options).await.unwrap();
    add_greeter(&mgr).unwrap();
    let stop = kcr_controller::CancellationToken::new();
    let run = tokio::spawn({
        let stop = stop.clone();
        async move { mgr.run(stop).await }
    });

    let greetings: Api<Greeting> = Api::namespaced(client.clone(), ns.namespace());
    let hello = Greeting::new(
        "hello",
        GreetingSpec {
            message: "Hello, kcr!".into(),
        },
    );
    greetings
        .create(&PostParams::default(), &hello)
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns.namespace());
    let message = || async {
        cms.get_opt("hello")
            .await
            .ok()
            .flatten()
            .and_then(|cm| cm.data?.get("message").cloned())
    };
    eventually(
        "the ConfigMap says hello",
        Duration::from_secs(30),
        || async { message().await.as_deref() == Some("Hello, kcr!") },
    )
    .await;
    greetings
        .patch(
            "hello",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"message": "Bye"}})),
        )
        .await
        .unwrap();
    eventually(
        "the new message reaches it",
        Duration::from_secs(30),
        || async { message().await.as_deref() == Some("Bye") },
    )
    .await;
    let cm = cms.get("hello").await.unwrap();
    let owner = &cm.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Greeting", "hello")
    );
    assert_eq!(owner.controller, Some(true));
    stop.cancel();
    run.await.unwrap().unwrap();
}
