//! The blackhole fault: a silent network partition between the clients and the server.
//!
//! [`Faults::blackhole`](crate::Faults::blackhole) freezes every connection open at that moment
//! and every connection accepted while it lasts; [`Faults::heal`](crate::Faults::heal) lets new
//! connections flow again, and the frozen ones stay frozen for good, as after a real partition
//! (a dead load balancer, a vanished route, an expired NAT entry): the client recovers only if
//! it notices the dead connection by itself.
//!
//! A frozen connection is closed by neither side that the client could see: bytes the client
//! sends are read and dropped, bytes the server writes are dropped, no FIN or RST is ever sent,
//! and a client's own FIN is never answered. When the server's end of a frozen connection is
//! dropped (the HTTP server gave up on it), its socket moves to a graveyard that keeps it open
//! until the server stops, so the client still sees nothing.
//!
//! The freeze sits under TLS (the existing backend's proxy serves HTTPS), so a TLS handshake
//! on a connection accepted during the partition hangs as it would on a real network.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// The partition state of one server's listener, shared by its connections.
#[derive(Debug, Default)]
pub(crate) struct Partition {
    /// A partition is on: new connections are frozen from their first byte.
    on: AtomicBool,
    /// How many partitions have started: a connection opened before the latest start is
    /// frozen for good.
    started: AtomicU64,
    /// Connections frozen so far (open, dropped, or in the graveyard).
    frozen: AtomicUsize,
    /// Sockets of frozen connections the HTTP server let go of, kept open (never closed
    /// towards the client) until the server stops.
    graveyard: Mutex<Vec<TcpStream>>,
}

impl Partition {
    /// Starts a partition: every open connection is frozen, and so is every connection
    /// accepted until [`Partition::heal`].
    pub(crate) fn start(&self) {
        self.started.fetch_add(1, Ordering::SeqCst);
        self.on.store(true, Ordering::SeqCst);
    }

    /// Ends the partition for new connections; frozen ones stay frozen.
    pub(crate) fn heal(&self) {
        self.on.store(false, Ordering::SeqCst);
    }

    /// Whether a partition is on.
    pub(crate) fn is_on(&self) -> bool {
        self.on.load(Ordering::SeqCst)
    }

    /// How many connections have been frozen so far.
    pub(crate) fn frozen_connections(&self) -> usize {
        self.frozen.load(Ordering::SeqCst)
    }

    /// Wraps an accepted connection. One accepted during a partition is frozen at once.
    pub(crate) fn wrap(self: &Arc<Self>, stream: TcpStream) -> Freezable {
        let mut conn = Freezable {
            stream: Some(stream),
            partition: self.clone(),
            opened_in: self.started.load(Ordering::SeqCst),
            frozen: false,
            client_closed: false,
        };
        conn.check();
        conn
    }

    fn bury(&self, stream: TcpStream) {
        self.graveyard.lock().push(stream);
    }
}

/// An accepted connection that a partition can freeze.
#[derive(Debug)]
pub(crate) struct Freezable {
    /// Always `Some` until dropped.
    stream: Option<TcpStream>,
    partition: Arc<Partition>,
    /// The partition count when this connection was accepted.
    opened_in: u64,
    frozen: bool,
    /// The client closed its side of a frozen connection: nothing more to drain.
    client_closed: bool,
}

impl Freezable {
    /// Freezes this connection if a partition is on or started since it was accepted; true
    /// when frozen (for good).
    fn check(&mut self) -> bool {
        if !self.frozen
            && (self.partition.is_on()
                || self.partition.started.load(Ordering::SeqCst) != self.opened_in)
        {
            self.frozen = true;
            self.partition.frozen.fetch_add(1, Ordering::SeqCst);
        }
        self.frozen
    }

    fn stream(&mut self) -> Pin<&mut TcpStream> {
        Pin::new(
            self.stream
                .as_mut()
                .expect("the stream is taken only on drop"),
        )
    }

    /// Reads and drops whatever the client sends, until nothing is ready (the waker is then
    /// registered with the socket). Never reports anything to the reader.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.client_closed {
            // The client's FIN: a partition never delivers it. Nothing will wake this read.
            return Poll::Pending;
        }
        let mut scratch = [0u8; 4096];
        loop {
            let mut buf = ReadBuf::new(&mut scratch);
            match self.stream().poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if buf.filled().is_empty() => {
                    self.client_closed = true;
                    return Poll::Pending;
                }
                Poll::Ready(Ok(())) => continue,
                // A reset from the client: as silent as its FIN.
                Poll::Ready(Err(_)) => {
                    self.client_closed = true;
                    return Poll::Pending;
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl AsyncRead for Freezable {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.check() {
            return self.drain(cx);
        }
        let filled = buf.filled().len();
        let res = self.stream().poll_read(cx, buf);
        if self.check() {
            // Frozen while the bytes were in flight: the server never sees them.
            buf.set_filled(filled);
            return self.drain(cx);
        }
        res
    }
}

impl AsyncWrite for Freezable {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.check() {
            return Poll::Ready(Ok(buf.len()));
        }
        self.stream().poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.check() {
            return Poll::Ready(Ok(()));
        }
        self.stream().poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.check() {
            // No FIN towards the client.
            return Poll::Ready(Ok(()));
        }
        self.stream().poll_shutdown(cx)
    }
}

impl Drop for Freezable {
    fn drop(&mut self) {
        if let Some(stream) = self.stream.take()
            && self.check()
        {
            self.partition.bury(stream);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// A listener whose accepted connections go through `partition`, echoing what they read.
    async fn echo_server(partition: Arc<Partition>) -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let mut conn = partition.wrap(stream);
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    loop {
                        match conn.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                if conn.write_all(&buf[..n]).await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
        addr
    }

    async fn echo(stream: &mut TcpStream, byte: u8) -> Option<u8> {
        stream.write_all(&[byte]).await.unwrap();
        let mut buf = [0u8; 1];
        // A bound for a loopback echo; a frozen connection answers never.
        match tokio::time::timeout(Duration::from_millis(300), stream.read(&mut buf)).await {
            Ok(Ok(1)) => Some(buf[0]),
            Ok(Ok(_)) => panic!("the connection was closed: a partition must close nothing"),
            Ok(Err(e)) => panic!("the connection failed: {e}"),
            Err(_) => None,
        }
    }

    #[tokio::test]
    async fn open_and_new_connections_freeze_and_only_new_ones_heal() {
        let partition = Arc::new(Partition::default());
        let addr = echo_server(partition.clone()).await;
        let mut before = TcpStream::connect(addr).await.unwrap();
        assert_eq!(echo(&mut before, 1).await, Some(1));

        partition.start();
        assert_eq!(
            echo(&mut before, 2).await,
            None,
            "an open connection freezes"
        );
        let mut during = TcpStream::connect(addr).await.unwrap();
        assert_eq!(
            echo(&mut during, 3).await,
            None,
            "a new one is frozen at once"
        );

        partition.heal();
        let mut after = TcpStream::connect(addr).await.unwrap();
        assert_eq!(echo(&mut after, 4).await, Some(4), "new connections flow");
        assert_eq!(echo(&mut before, 5).await, None, "old ones stay frozen");
        assert_eq!(
            echo(&mut during, 6).await,
            None,
            "so do those of the partition"
        );
        assert_eq!(partition.frozen_connections(), 2);
    }

    #[tokio::test]
    async fn a_frozen_connection_the_server_drops_is_never_closed() {
        let partition = Arc::new(Partition::default());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = TcpStream::connect(addr).await.unwrap();
        let (stream, _) = listener.accept().await.unwrap();
        let conn = partition.wrap(stream);
        partition.start();
        let mut conn = conn;
        // The server writes, shuts its side down and drops the connection.
        conn.write_all(b"lost").await.unwrap();
        conn.shutdown().await.unwrap();
        drop(conn);
        let mut buf = [0u8; 8];
        let read = tokio::time::timeout(Duration::from_millis(300), client.read(&mut buf)).await;
        assert!(
            read.is_err(),
            "no byte and no FIN reach the client: {read:?}"
        );
        assert_eq!(partition.graveyard.lock().len(), 1);
    }
}
