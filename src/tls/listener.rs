//! An axum listener that hands out established TLS connections. Handshakes
//! run in their own tasks with a time limit, so a slow or broken client
//! never holds up the next accept.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use rustls_pki_types::CertificateDer;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use super::reload::ReloadingTls;

/// How long a client has to complete the handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Handshakes in progress at most; connections beyond are closed at once.
const MAX_PENDING_HANDSHAKES: usize = 1024;

/// Established connections waiting for axum to pick them up.
const QUEUE: usize = 64;

type Established = (TlsStream<TcpStream>, SocketAddr);

/// A TCP listener that yields connections after a successful TLS handshake
/// with the newest configuration of its [`ReloadingTls`].
#[derive(Debug)]
pub struct TlsListener {
    local_addr: SocketAddr,
    tls: Arc<ReloadingTls>,
    established: mpsc::Receiver<Established>,
    acceptor: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    /// Starts accepting TCP connections from `tcp` (a listening socket,
    /// or a serving worker's share of one); must run inside a Tokio
    /// runtime.
    pub fn new<L>(tcp: L, tls: Arc<ReloadingTls>) -> io::Result<TlsListener>
    where
        L: Listener<Io = TcpStream, Addr = SocketAddr>,
    {
        let local_addr = tcp.local_addr()?;
        let (tx, established) = mpsc::channel(QUEUE);
        let acceptor = tokio::spawn(accept_loop(tcp, tls.clone(), tx));
        Ok(TlsListener {
            local_addr,
            tls,
            established,
            acceptor,
        })
    }

    /// Binds `tls.config().listen` and starts accepting.
    pub async fn bind(tls: Arc<ReloadingTls>) -> io::Result<TlsListener> {
        let tcp = TcpListener::bind(tls.config().listen).await?;
        TlsListener::new(tcp, tls)
    }

    /// The configuration source, e.g. to run [`ReloadingTls::watch`].
    pub fn tls(&self) -> &Arc<ReloadingTls> {
        &self.tls
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        // Closes the listening socket; handshakes under way finish or fail
        // on their own.
        self.acceptor.abort();
    }
}

impl Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.established.recv().await {
            Some(conn) => conn,
            // The accept task is gone (it only ends with this listener).
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local_addr)
    }
}

/// Accept errors are the TCP listener's to handle (axum's `TcpListener`
/// logs them and slows down).
async fn accept_loop<L>(mut tcp: L, tls: Arc<ReloadingTls>, tx: mpsc::Sender<Established>)
where
    L: Listener<Io = TcpStream, Addr = SocketAddr>,
{
    let pending = Arc::new(Semaphore::new(MAX_PENDING_HANDSHAKES));
    loop {
        let (stream, remote) = tokio::select! {
            () = tx.closed() => return,
            accepted = tcp.accept() => accepted,
        };
        let Ok(permit) = pending.clone().try_acquire_owned() else {
            tracing::debug!(%remote, "too many TLS handshakes in progress, connection closed");
            continue;
        };
        // Small JSON answers: don't let Nagle hold them back.
        let _ = stream.set_nodelay(true);
        let acceptor = TlsAcceptor::from(tls.current());
        let tx = tx.clone();
        tokio::spawn(async move {
            let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await;
            drop(permit);
            match handshake {
                Ok(Ok(conn)) => {
                    let _ = tx.send((conn, remote)).await;
                }
                Ok(Err(e)) => tracing::debug!(%remote, "TLS handshake failed: {e}"),
                Err(_) => tracing::debug!(%remote, "TLS handshake timed out"),
            }
        });
    }
}

/// What a handler learns about the connection, via
/// `axum::extract::ConnectInfo<TlsConnectInfo>`.
#[derive(Clone, Debug)]
pub struct TlsConnectInfo {
    pub remote: SocketAddr,
    /// The verified client certificate chain, end-entity first; `None`
    /// when the client presented none.
    pub peer_certificates: Option<Arc<Vec<CertificateDer<'static>>>>,
}

impl TlsConnectInfo {
    /// What an established connection tells about its client.
    pub fn of(stream: &TlsStream<TcpStream>, remote: SocketAddr) -> TlsConnectInfo {
        TlsConnectInfo {
            remote,
            peer_certificates: stream
                .get_ref()
                .1
                .peer_certificates()
                .filter(|certs| !certs.is_empty())
                .map(|certs| Arc::new(certs.to_vec())),
        }
    }

    /// The client's own (end-entity) certificate.
    pub fn client_certificate(&self) -> Option<&CertificateDer<'static>> {
        self.peer_certificates.as_ref()?.first()
    }
}

impl Connected<IncomingStream<'_, TlsListener>> for TlsConnectInfo {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Self {
        TlsConnectInfo::of(stream.io(), *stream.remote_addr())
    }
}
