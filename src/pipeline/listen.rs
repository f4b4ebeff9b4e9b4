//! Step 1, listen: accepts HTTP connections and hands each request to the
//! pipeline. Graceful shutdown lets in-flight requests finish.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::serve::ListenerExt;
use axum::Router;
use bytes::Bytes;
use http::header::CONNECTION;
use http::{HeaderValue, Request, Response};
use http_body::{Frame, SizeHint};
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
