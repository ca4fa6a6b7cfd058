//! Creates the benchmark's namespace and `--objects` [`Bench`] objects in it, `--concurrency`
//! create requests in flight (as fast as the API server accepts them), each annotated with the
//! time its request was sent ([`CREATED_AT`]). Prints
//! `e2e-create namespace=<ns> objects=<n> secs=<s> rate=<objects/s>`.

use clap::Parser;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
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
    let api: Api<Bench> = Api::namespaced(client, &args.namespace);
    let start = std::time::Instant::now();
    futures::stream::iter(0..args.objects)
        .map(|i| {
            let api = api.clone();
            async move {
                let bench = Bench {
                    metadata: ObjectMeta {
                        name: Some(format!("bench-{i}")),
                        annotations: Some([(CREATED_AT.to_string(), now_us().to_string())].into()),
                        ..ObjectMeta::default()
                    },
                    spec: BenchSpec { value: i as i64 },
                    status: None,
                };
                api.create(&PostParams::default(), &bench).await.map(|_| ())
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
