//! The accept loop both backends share: the in-process server and the real backend's proxy
//! serve HTTP/1.1 and h2c on a loopback listener until told to stop.

use std::convert::Infallible;
use std::future::Future;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Serve `listener` with `handle` until `shutdown` turns true, then end open connections.
/// A connection error (the client went away) ends that connection only.
pub(crate) async fn serve<H, Fut, B>(
    listener: TcpListener,
    mut shutdown: watch::Receiver<bool>,
    handle: H,
) where
    H: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut conns = JoinSet::new();
    loop {
        while conns.try_join_next().is_some() {}
        tokio::select! {
            _ = shutdown.wait_for(|s| *s) => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                let handle = handle.clone();
                conns.spawn(async move {
                    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let response = handle(req);
                        async move { Ok::<_, Infallible>(response.await) }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        }
    }
    conns.shutdown().await;
}
