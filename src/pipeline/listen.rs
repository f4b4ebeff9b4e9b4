//! Step 1, listen: accepts HTTP connections (HTTPS through
//! [`TlsListener`]) and hands each request to the pipeline. Slow clients
//! are bounded: a request head must arrive within
//! `server.header_read_timeout`, open connections are capped by
//! `server.max_connections` (the body's own deadline is the parse step's).
//! Graceful shutdown lets in-flight requests finish.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::serve::{Listener, ListenerExt};
use axum::Router;
use bytes::Bytes;
use http::header::CONNECTION;
use http::{HeaderValue, Request, Response};
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::authenticate::Connection;
use super::Gateway;
use crate::tls::{TlsConnectInfo, TlsListener};

/// The gateway as an axum router: every path goes through the pipeline,
/// which answers unknown paths itself.
pub fn router(gateway: Arc<Gateway>) -> Router {
    Router::new().fallback(handle).with_state(gateway)
}

async fn handle(State(gateway): State<Arc<Gateway>>, req: Request<Body>) -> Response<Body> {
    let conn = if let Some(ConnectInfo(tls)) = req.extensions().get::<ConnectInfo<TlsConnectInfo>>()
    {
        Connection {
            remote: Some(tls.remote),
            peer_certificates: tls.peer_certificates.clone(),
            tls: true,
        }
    } else {
        Connection {
            remote: req
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map(|ConnectInfo(a)| *a),
            peer_certificates: None,
            tls: false,
        }
    };
    gateway.handle(req, conn).await
}

/// Serves plain HTTP until `shutdown` completes, then drains in-flight
/// requests.
pub async fn serve(
    listener: TcpListener,
    gateway: Arc<Gateway>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let listener = listener.tap_io(|tcp| {
        // Small JSON answers: don't let Nagle hold them back.
        let _ = tcp.set_nodelay(true);
    });
    let connection = |_: &_, remote| Connection {
        remote: Some(remote),
        peer_certificates: None,
        tls: false,
    };
    serve_on(listener, gateway, connection, shutdown).await
}

/// Serves HTTPS connections (handshakes done by [`TlsListener`]) until
/// `shutdown` completes, then drains in-flight requests.
pub async fn serve_tls(
    listener: TlsListener,
    gateway: Arc<Gateway>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let connection = |stream: &_, remote| Connection {
        remote: Some(remote),
        peer_certificates: TlsConnectInfo::of(stream, remote).peer_certificates,
        tls: true,
    };
    serve_on(listener, gateway, connection, shutdown).await
}

/// The accept loop: one hyper HTTP/1 connection per client, under the
/// gateway's connection cap and header timeout.
async fn serve_on<L>(
    mut listener: L,
    gateway: Arc<Gateway>,
    connection_of: impl Fn(&L::Io, SocketAddr) -> Connection,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()>
where
    L: Listener<Addr = SocketAddr>,
{
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(gateway.limits.header_read_timeout);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (permit, (io, remote)) = tokio::select! {
            () = &mut shutdown => break,
            accepted = async {
                let permit = gateway.limits.connections.admit().await;
                (permit, listener.accept().await)
            } => accepted,
        };
        let conn = connection_of(&io, remote);
        let gateway = gateway.clone();
        let service = service_fn(move |req: Request<Incoming>| {
            let (gateway, conn) = (gateway.clone(), conn.clone());
            async move { Ok::<_, Infallible>(gateway.handle(req.map(Body::new), conn).await) }
        });
        let served = graceful.watch(http.serve_connection(TokioIo::new(io), service));
        tokio::spawn(async move {
            // Clients that go away or time out: nothing to report.
            let _ = served.await;
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Limits on client connections, from `[server]`.
#[derive(Debug)]
pub struct ClientLimits {
    pub header_read_timeout: Duration,
    pub connections: ConnectionCap,
}

impl ClientLimits {
    pub fn from_config(server: &crate::config::ServerConfig) -> ClientLimits {
        ClientLimits {
            header_read_timeout: server.header_read_timeout,
            connections: ConnectionCap::new(server.max_connections),
        }
    }
}

/// At most `max` open client connections over all listeners
/// (`server.max_connections`). At the cap, accepting pauses: new clients
/// wait in the kernel's listen backlog until a connection closes.
#[derive(Debug)]
pub struct ConnectionCap {
    open: Arc<Semaphore>,
    max: usize,
    /// When the cap was last reported, so a flood makes one line a minute.
    reported: std::sync::Mutex<Option<Instant>>,
}

impl ConnectionCap {
    pub fn new(max: usize) -> ConnectionCap {
        ConnectionCap {
            open: Arc::new(Semaphore::new(max)),
            max,
            reported: std::sync::Mutex::new(None),
        }
    }

    /// Client connections open now.
    pub fn open(&self) -> usize {
        self.max - self.open.available_permits()
    }

    /// A slot for one connection, waiting for one if all are taken.
    async fn admit(&self) -> OwnedSemaphorePermit {
        if let Ok(permit) = self.open.clone().try_acquire_owned() {
            return permit;
        }
        self.report_full();
        match self.open.clone().acquire_owned().await {
            Ok(permit) => permit,
            // Never closed; were it, waiting forever is what a full cap means.
            Err(_) => std::future::pending().await,
        }
    }

    fn report_full(&self) {
        let mut reported = self.reported.lock().unwrap_or_else(|e| e.into_inner());
        if reported.is_none_or(|at| at.elapsed() >= Duration::from_secs(60)) {
            *reported = Some(Instant::now());
            tracing::warn!(
                limit = self.max,
                "server.max_connections reached: new client connections wait until one closes"
            );
        }
    }
}

/// Whether reading a body failed on `server.max_body_bytes`.
pub fn is_too_large(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if err.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = err.source();
    }
    false
}

/// Whether a request's body has been read to its end.
#[derive(Clone, Debug)]
pub struct BodyRead(Arc<AtomicBool>);

impl BodyRead {
    /// An answer given before the body was read (a refused login, a busy
    /// gateway) closes the connection and says so: hyper would otherwise
    /// close it anyway when the rest of the body isn't there yet, and the
    /// client's next request on it would fail without an answer.
    pub fn close_unless_read(&self, response: &mut Response<Body>) {
        if !self.0.load(Ordering::Acquire) {
            response
                .headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
        }
    }
}

/// Wraps a request body so that reading it to its end is noted.
pub fn track_body(body: Body) -> (Body, BodyRead) {
    let read = BodyRead(Arc::new(AtomicBool::new(http_body::Body::is_end_stream(
        &body,
    ))));
    let tracked = TrackedBody {
        inner: body,
        read: read.clone(),
    };
    (Body::new(tracked), read)
}

struct TrackedBody {
    inner: Body,
    read: BodyRead,
}

impl http_body::Body for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.read.0.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn a_body_counts_as_read_only_at_its_end() {
        let (body, read) = track_body(Body::from("{\"type\":\"version\"}"));
        let mut early = Response::new(Body::empty());
        read.close_unless_read(&mut early);
        assert_eq!(early.headers()[CONNECTION], "close");

        body.collect().await.unwrap();
        let mut late = Response::new(Body::empty());
        read.close_unless_read(&mut late);
        assert!(late.headers().get(CONNECTION).is_none());
    }

    #[test]
    fn no_body_is_read_from_the_start() {
        let (_, read) = track_body(Body::empty());
        let mut r = Response::new(Body::empty());
        read.close_unless_read(&mut r);
        assert!(r.headers().get(CONNECTION).is_none());
    }
}
