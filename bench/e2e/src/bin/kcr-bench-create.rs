//! Creates the benchmark's namespace and `--objects` [`Bench`] objects in it (or, with `--kind
//! configmap`, the scale benchmark's ConfigMaps, [`configmap_payload`]), `--concurrency`
//! create requests in flight (as fast as the API server accepts them), each annotated with the
//! time its request was sent ([`CREATED_AT`]). Prints
//! `e2e-create namespace=<ns> objects=<n> secs=<s> rate=<objects/s>`.

use clap::Parser;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::core::v1::Namespace;
use kcr_bench::scale::{ScaleKind, configmap_payload};
use kcr_bench::{Bench, BenchSpec, CREATED_AT, now_us};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

/// Command line.
#[derive(Debug, Parser)]
struct Args {
    /// The namespace to create and fill.
    #[arg(long)]
    namespace: String,
    /// How many objects.
    #[arg(long)]
    objects: usize,
    /// Which kind (`bench` objects are named `bench-<i>`, ConfigMaps `configmap-<i>`).
    #[arg(long, value_enum, default_value = "bench")]
    kind: ScaleKind,
    /// Create requests in flight at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let client = kcr_bench::client().await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(args.namespace.clone()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    match namespaces.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    let start = std::time::Instant::now();
    let bench_api: Api<Bench> = Api::namespaced(client.clone(), &args.namespace);
    let configmap_api: Api<ConfigMap> = Api::namespaced(client, &args.namespace);
    let (kind, namespace) = (args.kind, args.namespace.clone());
    futures::stream::iter(0..args.objects)
        .map(|i| {
            let (bench_api, configmap_api, namespace) =
                (bench_api.clone(), configmap_api.clone(), namespace.clone());
            async move {
                let created_at = [(CREATED_AT.to_string(), now_us().to_string())].into();
                match kind {
                    ScaleKind::Bench => {
                        let bench = Bench {
                            metadata: ObjectMeta {
                                name: Some(kind.object_name(i)),
                                annotations: Some(created_at),
                                ..ObjectMeta::default()
                            },
                            spec: BenchSpec { value: i as i64 },
                            status: None,
                        };
                        bench_api
                            .create(&PostParams::default(), &bench)
                            .await
                            .map(|_| ())
                    }
                    ScaleKind::Configmap => {
                        let mut configmap = configmap_payload(&namespace, i);
                        configmap.metadata.annotations = Some(created_at);
                        configmap_api
                            .create(&PostParams::default(), &configmap)
                            .await
                            .map(|_| ())
                    }
                }
            }
        })
        .buffer_unordered(args.concurrency)
        .try_collect::<()>()
        .await?;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "e2e-create namespace={} objects={} secs={secs:.3} rate={:.0}",
        args.namespace,
        args.objects,
        args.objects as f64 / secs
    );
    Ok(())
}
