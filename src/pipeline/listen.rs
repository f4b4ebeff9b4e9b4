//! Step 1, listen: accepts HTTP connections and hands each request to the
//! pipeline. Graceful shutdown lets in-flight requests finish.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::serve::ListenerExt;
use axum::Router;
use http::{Request, Response};
use tokio::net::TcpListener;

use super::authenticate::Connection;
use super::Gateway;
use crate::tls::TlsConnectInfo;

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

/// Serves until `shutdown` completes, then drains in-flight requests.
pub async fn serve(
    listener: TcpListener,
    gateway: Arc<Gateway>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = listener.tap_io(|tcp| {
        // Small JSON answers: don't let Nagle hold them back.
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(
        listener,
        router(gateway).into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
}
