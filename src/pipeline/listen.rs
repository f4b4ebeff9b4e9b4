//! Step 1, listen: accepts HTTP connections (HTTPS through
//! [`TlsListener`]) and hands each request to the pipeline. Slow clients
//! are bounded: a request head must arrive within
//! `server.header_read_timeout`, open connections are capped by
//! `server.max_connections`, idle ones making room for new ones at the cap
//! (the body's own deadline is the parse step's).
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
            bound: None,
        }
    } else {
        Connection {
            remote: req
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map(|ConnectInfo(a)| *a),
            peer_certificates: None,
            tls: false,
            bound: None,
        }
    };
    gateway.handle(req, conn).await
}

/// The gateway's listening sockets, bound before the workers start.
pub struct Sockets {
    pub http: Option<std::net::TcpListener>,
    pub https: Option<(std::net::TcpListener, Arc<crate::tls::ReloadingTls>)>,
}

/// The serving workers (`server.workers`): threads with a single-threaded
/// event loop each, all accepting from the same listening sockets, a new
/// connection going to the worker holding fewest ([`WorkerListener`]).
/// A connection and its requests stay on that worker, agent exchanges
/// included ([`crate::worker`]): no request is handed between threads,
/// which a shared work-stealing runtime does twice per request at low
/// load.
pub struct Workers {
    threads: Vec<std::thread::JoinHandle<io::Result<()>>>,
}

impl Workers {
    /// Starts `count` workers serving `sockets` until `stop` says so.
    pub fn start(
        count: usize,
        sockets: &Sockets,
        gateway: &Arc<Gateway>,
        stop: &tokio::sync::watch::Receiver<bool>,
    ) -> io::Result<Workers> {
        let count = count.max(1);
        let mut http = WorkerListener::share(sockets.http.as_ref(), count)?;
        let mut https = WorkerListener::share(sockets.https.as_ref().map(|(l, _)| l), count)?;
        let mut threads = Vec::with_capacity(count);
        for index in 1..=count {
            let http = http.pop();
            let https = https
                .pop()
                .zip(sockets.https.as_ref().map(|(_, tls)| tls.clone()));
            let (gateway, stop) = (gateway.clone(), stop.clone());
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let thread = std::thread::Builder::new()
                .name(format!("jmxgate-worker-{index}"))
                .spawn(move || {
                    crate::worker::enter(index);
                    runtime.block_on(serve_worker(http, https, gateway, stop))
                })?;
            threads.push(thread);
        }
        Ok(Workers { threads })
    }

    /// Waits until every worker has drained its requests and stopped.
    pub fn join(self) -> io::Result<()> {
        let mut result = Ok(());
        for thread in self.threads {
            match thread.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => result = Err(e),
                Err(_) => result = Err(io::Error::other("a serving worker panicked")),
            }
        }
        result
    }
}

/// One worker: the HTTP and HTTPS accept loops over its own handles to
/// the listening sockets.
async fn serve_worker(
    http: Option<WorkerListener<std::net::TcpListener>>,
    https: Option<(
        WorkerListener<std::net::TcpListener>,
        Arc<crate::tls::ReloadingTls>,
    )>,
    gateway: Arc<Gateway>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> io::Result<()> {
    let stopped = move || {
        let mut stop = stop.clone();
        async move {
            let _ = stop.wait_for(|stop| *stop).await;
        }
    };
    let plain = async {
        match http {
            Some(l) => serve(l.register()?, gateway.clone(), stopped()).await,
            None => Ok(()),
        }
    };
    let secure = async {
        match https {
            Some((l, tls)) => {
                // Handed over before the handshake, so TLS clients are
                // spread like plain ones.
                let listener = TlsListener::new(l.register()?, tls)?;
                serve_tls(listener, gateway.clone(), stopped()).await
            }
            None => Ok(()),
        }
    };
    let (plain, secure) = tokio::join!(plain, secure);
    plain.and(secure)
}

/// Connections handed between workers: accepted by one, served by another.
type Handoff = (std::net::TcpStream, SocketAddr, crate::worker::Held);

/// Each worker's inbox of handed-over connections.
struct Handoffs(Vec<tokio::sync::mpsc::UnboundedSender<Handoff>>);

impl Handoffs {
    fn new(
        workers: usize,
    ) -> (
        Arc<Handoffs>,
        Vec<tokio::sync::mpsc::UnboundedReceiver<Handoff>>,
    ) {
        let (senders, inboxes) = (0..workers)
            .map(|_| tokio::sync::mpsc::unbounded_channel())
            .unzip();
        (Arc::new(Handoffs(senders)), inboxes)
    }
}

/// A worker's side of a listening socket (plain HTTP, or HTTPS before the
/// handshake). Every worker is woken for a new connection and the first
/// free one accepts it; when another worker
/// holds fewer connections, it is handed there, so a burst of connections
/// (a client pool opening at once) is spread rather than taken by
/// whichever worker woke first.
pub struct WorkerListener<S> {
    socket: S,
    inbox: tokio::sync::mpsc::UnboundedReceiver<Handoff>,
    handoffs: Arc<Handoffs>,
    /// A handed-over connection's count, kept until the next accept: by
    /// then the connection counts as served here.
    carried: Option<crate::worker::Held>,
}

impl WorkerListener<std::net::TcpListener> {
    /// One share of `socket` per worker, with inboxes to hand connections
    /// between them; none without a socket. Popped from the back, for
    /// workers `1..=workers` in order.
    fn share(
        socket: Option<&std::net::TcpListener>,
        workers: usize,
    ) -> io::Result<Vec<WorkerListener<std::net::TcpListener>>> {
        let Some(socket) = socket else {
            return Ok(Vec::new());
        };
        let (handoffs, inboxes) = Handoffs::new(workers);
        let mut shares = inboxes
            .into_iter()
            .map(|inbox| {
                Ok(WorkerListener {
                    socket: socket.try_clone()?,
                    inbox,
                    handoffs: handoffs.clone(),
                    carried: None,
                })
            })
            .collect::<io::Result<Vec<_>>>()?;
        shares.reverse();
        Ok(shares)
    }

    /// Registers the socket with the calling worker's event loop.
    fn register(self) -> io::Result<WorkerListener<TcpListener>> {
        Ok(WorkerListener {
            socket: TcpListener::from_std(self.socket)?,
            inbox: self.inbox,
            handoffs: self.handoffs,
            carried: None,
        })
    }
}

impl Listener for WorkerListener<TcpListener> {
    type Io = tokio::net::TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        self.carried = None;
        loop {
            tokio::select! {
                handed = self.inbox.recv() => {
                    let Some((stream, remote, pending)) = handed else {
                        // Every worker holds the senders: not while serving.
                        std::future::pending::<()>().await;
                        continue;
                    };
                    match tokio::net::TcpStream::from_std(stream) {
                        Ok(stream) => {
                            self.carried = Some(pending);
                            return (stream, remote);
                        }
                        Err(e) => tracing::warn!(%remote, "taking over a connection: {e}"),
                    }
                }
                accepted = self.socket.accept() => {
                    let (stream, remote) = match accepted {
                        Ok(accepted) => accepted,
                        Err(e) => {
                            accept_failed(e).await;
                            continue;
                        }
                    };
                    let to = crate::worker::least_loaded(self.handoffs.0.len());
                    if to == crate::worker::current() {
                        return (stream, remote);
                    }
                    let handed = stream
                        .into_std()
                        .map(|s| (s, remote, crate::worker::Held::on(to)));
                    match handed {
                        Ok(handoff) => {
                            if let Err(tokio::sync::mpsc::error::SendError((s, remote, _))) =
                                self.handoffs.0[to - 1].send(handoff)
                            {
                                if let Ok(stream) = tokio::net::TcpStream::from_std(s) {
                                    return (stream, remote);
                                }
                            }
                        }
                        Err(e) => tracing::warn!(%remote, "handing over a connection: {e}"),
                    }
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.socket.local_addr()
    }
}

/// As axum does: errors about one connection are ignored; others (out of
/// file descriptors) are logged and slow accepting down.
async fn accept_failed(e: io::Error) {
    if matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!("accept failed: {e}");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// Serves plain HTTP until `shutdown` completes, then drains in-flight
/// requests.
pub async fn serve<L>(
    listener: L,
    gateway: Arc<Gateway>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()>
where
    L: Listener<Io = tokio::net::TcpStream, Addr = SocketAddr>,
{
    let listener = listener.tap_io(|tcp| {
        // Small JSON answers: don't let Nagle hold them back.
        let _ = tcp.set_nodelay(true);
    });
    let connection = |_: &_, remote| Connection {
        remote: Some(remote),
        peer_certificates: None,
        tls: false,
        bound: None,
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
        bound: None,
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
    // Where this listener is bound: a loopback one answers only its own
    // names unless `server.allowed_hosts` says otherwise.
    let bound = listener.local_addr().ok();
    tokio::pin!(shutdown);
    loop {
        // Accepted first, then given a place under the cap: at the cap, an
        // idle connection makes room for it (see `ConnectionCap::admit`).
        let ((io, remote), (permit, live)) = tokio::select! {
            () = &mut shutdown => break,
            accepted = async {
                let accepted = listener.accept().await;
                (accepted, gateway.limits.connections.admit().await)
            } => accepted,
        };
        let held = crate::worker::Held::here();
        let open = gateway
            .metrics
            .client_connections
            .get_or_create(&crate::metrics::WorkerLabel {
                worker: crate::worker::current().to_string(),
            })
            .clone();
        open.inc();
        let conn = Connection {
            bound,
            ..connection_of(&io, remote)
        };
        let cap = gateway.limits.connections.clone();
        let gateway = gateway.clone();
        let in_service = live.clone();
        let service = service_fn(move |req: Request<Incoming>| {
            let (gateway, conn) = (gateway.clone(), conn.clone());
            // Busy from the request's head until its answer is written.
            let busy = in_service.busy();
            async move {
                let resp = gateway.handle(req.map(Body::new), conn).await;
                Ok::<_, Infallible>(resp.map(|body| Body::new(WhileSending { body, _busy: busy })))
            }
        });
        let served = graceful.watch(http.serve_connection(TokioIo::new(io), service));
        tokio::spawn(async move {
            tokio::pin!(served);
            // Clients that go away or time out: nothing to report. An
            // eviction closes the connection only between requests.
            loop {
                tokio::select! {
                    _ = &mut served => break,
                    () = live.evicted() => if live.is_idle() { break },
                }
            }
            cap.forget(&live);
            open.dec();
            drop((permit, held));
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// A response body that keeps its connection busy until it is sent.
struct WhileSending {
    body: Body,
    _busy: Busy,
}

impl http_body::Body for WhileSending {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// How long a connection must have been idle (or open without a request)
/// before it may be closed to make room at the connection cap: a client
/// that just connected gets this long to send its request's head, and
/// sockets that send nothing hold a place this long, not a header timeout.
const EVICTION_GRACE: Duration = Duration::from_millis(500);

/// Limits on client connections, from `[server]`.
#[derive(Debug)]
pub struct ClientLimits {
    pub header_read_timeout: Duration,
    pub connections: Arc<ConnectionCap>,
}

impl ClientLimits {
    pub fn from_config(server: &super::server::ServerConfig) -> ClientLimits {
        ClientLimits {
            header_read_timeout: server.header_read_timeout,
            connections: Arc::new(ConnectionCap::new(server.max_connections)),
        }
    }
}

/// At most `max` open client connections over all listeners
/// (`server.max_connections`). At the cap, a new connection takes the
/// place of an idle one (one that never sent a request first, the oldest
/// of them; else the one idle longest), so clients that open sockets and
/// send nothing can't keep others out for a header timeout each. When
/// every connection is busy with a request, new ones wait.
#[derive(Debug)]
pub struct ConnectionCap {
    open: Arc<Semaphore>,
    max: usize,
    /// When the cap was last reported, so a flood makes one line a minute.
    reported: std::sync::Mutex<Option<Instant>>,
    /// The open connections, for choosing one to close.
    live: std::sync::Mutex<std::collections::HashMap<u64, Arc<Live>>>,
    next_id: std::sync::atomic::AtomicU64,
    /// Every connection's clock starts here.
    epoch: Instant,
}

/// One open client connection as the cap sees it.
#[derive(Debug)]
pub struct Live {
    id: u64,
    /// Requests between their head and their answer's end.
    busy: std::sync::atomic::AtomicUsize,
    /// Requests it has sent.
    served: std::sync::atomic::AtomicU64,
    /// When it was opened or last finished an answer, in milliseconds
    /// since the cap's epoch.
    idle_since: std::sync::atomic::AtomicU64,
    evict: tokio::sync::Notify,
    epoch: Instant,
}

/// A connection's request in progress; dropped when its answer is sent.
#[derive(Debug)]
pub struct Busy(Arc<Live>);

impl Drop for Busy {
    fn drop(&mut self) {
        let live = &self.0;
        live.idle_since.store(live.now_ms(), Ordering::Relaxed);
        live.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Live {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn busy(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        self.served.fetch_add(1, Ordering::Relaxed);
        Busy(self.clone())
    }

    fn is_idle(&self) -> bool {
        self.busy.load(Ordering::Acquire) == 0
    }

    /// Completes when the cap asks this connection to make room.
    async fn evicted(&self) {
        self.evict.notified().await;
    }
}

impl ConnectionCap {
    pub fn new(max: usize) -> ConnectionCap {
        ConnectionCap {
            open: Arc::new(Semaphore::new(max)),
            max,
            reported: std::sync::Mutex::new(None),
            live: std::sync::Mutex::new(std::collections::HashMap::new()),
            next_id: std::sync::atomic::AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    /// Client connections open now.
    pub fn open(&self) -> usize {
        self.max - self.open.available_permits()
    }

    /// A place for a connection just accepted: at once below the cap; at
    /// it, once an idle connection has been closed for it, or one ends.
    async fn admit(&self) -> (OwnedSemaphorePermit, Arc<Live>) {
        loop {
            if let Ok(permit) = self.open.clone().try_acquire_owned() {
                return (permit, self.register());
            }
            self.report_full();
            let evicted = self.evict_one();
            // An evicted connection closes at once unless a request began
            // on it just then; look again shortly either way.
            let again = Duration::from_millis(if evicted { 20 } else { 200 });
            tokio::select! {
                permit = self.open.clone().acquire_owned() => match permit {
                    Ok(permit) => return (permit, self.register()),
                    // Never closed; were it, waiting forever is what a full cap means.
                    Err(_) => std::future::pending().await,
                },
                () = tokio::time::sleep(again) => {}
            }
        }
    }

    fn register(&self) -> Arc<Live> {
        let live = Arc::new(Live {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            busy: std::sync::atomic::AtomicUsize::new(0),
            served: std::sync::atomic::AtomicU64::new(0),
            idle_since: std::sync::atomic::AtomicU64::new(0),
            evict: tokio::sync::Notify::new(),
            epoch: self.epoch,
        });
        live.idle_since.store(live.now_ms(), Ordering::Relaxed);
        self.lock_live().insert(live.id, live.clone());
        live
    }

    fn forget(&self, live: &Live) {
        self.lock_live().remove(&live.id);
    }

    fn lock_live(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<u64, Arc<Live>>> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks the idle connection to close that can best spare it: one that
    /// never sent a request (the oldest), else the one idle longest. Only
    /// connections idle for [`EVICTION_GRACE`]: a new client's request head
    /// is on its way. False when there is none.
    fn evict_one(&self) -> bool {
        let grace = EVICTION_GRACE.as_millis() as u64;
        let now = self.epoch.elapsed().as_millis() as u64;
        let chosen = {
            let live = self.lock_live();
            live.values()
                .filter(|l| l.is_idle())
                .filter(|l| now.saturating_sub(l.idle_since.load(Ordering::Relaxed)) >= grace)
                .min_by_key(|l| {
                    let never_used = l.served.load(Ordering::Relaxed) == 0;
                    (!never_used, l.idle_since.load(Ordering::Relaxed))
                })
                .cloned()
        };
        match chosen {
            Some(live) => {
                live.evict.notify_one();
                true
            }
            None => false,
        }
    }

    fn report_full(&self) {
        let mut reported = self.reported.lock().unwrap_or_else(|e| e.into_inner());
        if reported.is_none_or(|at| at.elapsed() >= Duration::from_secs(60)) {
            *reported = Some(Instant::now());
            tracing::warn!(
                limit = self.max,
                "server.max_connections reached: idle connections make room for new ones, \
                 which wait while every connection is busy"
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
