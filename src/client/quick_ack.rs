//! Agent connections that acknowledge every answer segment at once.
//!
//! Jolokia 2.x's JVM agent (the JDK HTTP server) keeps connections alive
//! and writes a chunked answer in pieces with Nagle's algorithm on: its
//! last piece waits until the previous one is acknowledged. Linux delays
//! that acknowledgement by up to 40 ms on a connection it judges
//! interactive, which a kept-alive request/answer connection soon is, so
//! every answer stalled 44 ms. Turning `TCP_QUICKACK` on after every read
//! and write sends the acknowledgement now, so connections stay reusable
//! (no connect per request, no TLS handshake per request, no pressure on
//! the agent's small accept backlog). The flag is not sticky in Linux,
//! hence once per read and write: one `setsockopt`, far cheaper than a
//! connection. Elsewhere it does nothing.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// `HttpConnector` whose connections acknowledge at once.
#[derive(Clone)]
pub(super) struct QuickAckConnector(pub(super) HttpConnector);

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Connecting = Pin<Box<dyn Future<Output = Result<QuickAckStream, BoxError>> + Send>>;

impl tower::Service<Uri> for QuickAckConnector {
    type Response = QuickAckStream;
    type Error = BoxError;
    type Future = Connecting;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let connecting = self.0.call(dst);
        Box::pin(async move { connecting.await.map(QuickAckStream).map_err(Into::into) })
    }
}

/// A TCP connection to an agent; see the module documentation.
pub(super) struct QuickAckStream(TokioIo<TcpStream>);

impl QuickAckStream {
    fn quick_ack(&self) {
        #[cfg(target_os = "linux")]
        {
            // A failure only costs the delay this avoids.
            let _ = socket2::SockRef::from(self.0.inner()).set_tcp_quickack(true);
        }
    }
}

impl Read for QuickAckStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let read = Pin::new(&mut this.0).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = read {
            this.quick_ack();
        }
        read
    }
}

impl Write for QuickAckStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.0).poll_write(cx, buf);
        if let Poll::Ready(Ok(_)) = written {
            // Sending right after receiving makes Linux call the
            // connection interactive and delay acknowledgements again.
            this.quick_ack();
        }
        written
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.0).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(_)) = written {
            this.quick_ack();
        }
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

impl Connection for QuickAckStream {
    fn connected(&self) -> Connected {
        self.0.connected()
    }
}
