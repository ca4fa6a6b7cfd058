//! The testing page's "A suite of tests" section (`docs/guide/src/testing.md`): the two
//! conventions of a test binary whose tests share one API server, on the quick start's
//! `Greeting` controller (`tests/examples/quickstart/greeting.rs`), unchanged: the CRD is
//! installed once per test binary, and each test's controller is scoped to the test's own
//! namespace. Two tests create a greeting of the same name at the same time; each ConfigMap is
//! written by its own test's controller only. `KCR_ENVTEST_BACKEND=real` runs them on kube-apiserver and etcd.

#[path = "../examples/quickstart/greeting.rs"]
mod greeting;

use std::time::Duration;

use greeting::GreetingSpec;
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_testkit::{consistently, eventually, that_ok};
use kube::ResourceExt;
use kube::api::{Api, PostParams};

// ANCHOR: harness
use greeting::{Greeting, add_greeter};
use kcr_envtest::TestNamespace;
use kcr_source::WatchScope;
use kcr_testkit::RunningManager;
use tokio::sync::OnceCell;

/// The controller under test, running against a namespace of the test's own.
struct Harness {
    ns: TestNamespace,
    running: RunningManager,
}

impl Harness {
    async fn start(test: &str) -> anyhow::Result<Harness> {
        // A namespace `<test>-<random>` on the API server that the binary's tests share.
        let ns = TestNamespace::new(test).await?;

        // 1. The CRD, once per test binary: CRDs are cluster-wide, so one install serves
        //    every test, and two tests installing the same CRD at once can conflict on a real
        //    API server. The first test to get here installs it; the others wait for it.
        static CRD: OnceCell<()> = OnceCell::const_new();
        CRD.get_or_try_init(|| ns.install_crd::<Greeting>()).await?;

        // 2. The controller, scoped to this namespace: the cache's default scope narrows every
        //    watch of the manager (and the client's cached reads), so the controller neither
        //    acts on the objects of the tests running beside it nor wakes for them. Set it
        //    before any watch starts, that is before the controllers are added.
        let options = kcr_testkit::options().field_owner(format!("greeter-{test}"));
        let mgr = kcr_testkit::manager_with(&ns, options).await?;
        mgr.cache()
            .set_default_scope(WatchScope::all().namespace(ns.namespace()))?;
        add_greeter(&mgr)?;
        Ok(Harness {
            running: RunningManager::start(mgr),
            ns,
        })
    }

    async fn stop(self) -> anyhow::Result<()> {
        Ok(self.running.stop().await?)
    }
}
// ANCHOR_END: harness

// ANCHOR: tests
/// The `message` of the ConfigMap `name`, if there is one.
async fn message(cms: &Api<ConfigMap>, name: &str) -> Result<Option<String>, kube::Error> {
    let cm = cms.get_opt(name).await?;
    Ok(cm.and_then(|cm| cm.data?.get("message").cloned()))
}

/// Creates the greeting `hello` saying `text` in the harness's namespace, waits for its
/// ConfigMap, and checks that it keeps that text and that no other test's controller wrote it.
async fn greet(test: &str, text: &str) -> anyhow::Result<()> {
    let h = Harness::start(test).await?;
    let greetings: Api<Greeting> = Api::default_namespaced(h.ns.client());
    let spec = GreetingSpec {
        message: text.into(),
    };
    greetings
        .create(&PostParams::default(), &Greeting::new("hello", spec))
        .await?;
    let cms: Api<ConfigMap> = Api::default_namespaced(h.ns.client());
    eventually(format!("the ConfigMap says {text:?}"), || async {
        that_ok(message(&cms, "hello").await, |m| m.as_deref() == Some(text))
    })
    .timeout(Duration::from_secs(60))
    .await?;
    consistently("it keeps saying so", || async {
        that_ok(message(&cms, "hello").await, |m| m.as_deref() == Some(text))
    })
    .for_duration(Duration::from_millis(500))
    .await?;
    // Only this test's controller wrote it (each test's manager has a field owner of its own).
    let cm = cms.get("hello").await?;
    let writers: Vec<_> = cm
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(writers, [format!("greeter-{test}")]);
    h.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_in_english() -> anyhow::Result<()> {
    greet("english", "Hello").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_in_french() -> anyhow::Result<()> {
    greet("french", "Bonjour").await
}
// ANCHOR_END: tests
