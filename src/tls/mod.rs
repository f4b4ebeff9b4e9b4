//! The HTTPS listener: TLS with optional or required client certificates,
//! certificate/key/CA reload without a restart, and the client certificate
//! handed to request handlers.
//!
//! ```text
//! TlsConfig ──server_config──▶ ReloadingTls (ArcSwap, watch: interval + SIGHUP)
//!                                   │ newest config per new connection
//! TcpListener ──▶ TlsListener (handshake tasks, 10 s limit) ──▶ pipeline::listen::serve_tls
//!                                                              (or `serve` below, for any router)
//!                                   │
//!                 ConnectInfo<TlsConnectInfo> + ConnectInfo<SocketAddr>
//! ```

mod cert;
mod config;
mod listener;
mod reload;

use std::future::Future;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request};
use axum::Router;

pub use cert::{fingerprint_sha256, principal_from_cert, CertPrincipal};
pub(crate) use config::{load_certs, load_private_key};
pub use config::{server_config, ClientAuth, TlsConfig, TlsVersion, DEFAULT_RELOAD_INTERVAL};
pub use listener::{TlsConnectInfo, TlsListener, HANDSHAKE_TIMEOUT};
pub use reload::ReloadingTls;

/// Serves any `router` over TLS (for embedding; the gateway's own
/// listener is `pipeline::listen::serve_tls`) until `shutdown` completes,
/// then drains in-flight requests. Handlers see `ConnectInfo<TlsConnectInfo>` and, for
/// code written for the plain listener, `ConnectInfo<SocketAddr>`.
pub async fn serve(
    listener: TlsListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let router = router.layer(tower::util::MapRequestLayer::new(add_socket_addr));
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<TlsConnectInfo>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
}

fn add_socket_addr(mut req: Request) -> Request {
    if let Some(ConnectInfo(info)) = req.extensions().get::<ConnectInfo<TlsConnectInfo>>() {
        let remote: SocketAddr = info.remote;
        req.extensions_mut().insert(ConnectInfo(remote));
    }
    req
}
