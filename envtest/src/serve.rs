//! The accept loop the backends share: the in-process server and the proxy of the real and
//! existing backends serve HTTP/1.1 and h2c (or, given a TLS acceptor, HTTPS: the existing
//! backend's proxy) on a loopback listener until told to stop.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::partition::Partition;

/// The longest a client may take to finish its TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Serve `listener` with `handle` until `shutdown` turns true, then end open connections;
/// over TLS when `tls` is given; every connection frozen while `partition` says so. A
/// connection error (the client went away, a failed TLS handshake) ends that connection only.
pub(crate) async fn serve<H, Fut, B>(
    listener: TcpListener,
    mut shutdown: watch::Receiver<bool>,
    tls: Option<TlsAcceptor>,
    partition: Arc<Partition>,
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
                let stream = partition.wrap(stream);
                let handle = handle.clone();
                let tls = tls.clone();
                conns.spawn(async move {
                    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let response = handle(req);
                        async move { Ok::<_, Infallible>(response.await) }
                    });
                    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    match tls {
                        None => {
                            let _ = builder.serve_connection(TokioIo::new(stream), service).await;
                        }
                        Some(acceptor) => {
                            // A client that never finishes its handshake holds nothing for long.
                            let accepted =
                                tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream));
                            let Ok(Ok(stream)) = accepted.await else {
                                return;
                            };
                            let _ = builder.serve_connection(TokioIo::new(stream), service).await;
                        }
                    }
                });
            }
        }
    }
    conns.shutdown().await;
}
