//! The benchmark's floor: a bare HTTP/1 pass-through built from the same
//! parts as jmxgate (tokio's multi-threaded runtime, hyper's server,
//! hyper-util's pooled client, mimalloc) that does no work at all: no
//! authentication, parsing, policy, audit or re-serialisation. Whatever it
//! costs on a machine, any gateway built on these parts costs at least as
//! much; `bench/run.sh` measures it next to jmxgate and nginx.
//!
//! ```sh
//! cargo run --release --example passthrough -- 127.0.0.1:8080 http://127.0.0.1:8778
//! ```
//! forwards `POST /jolokia` to `http://127.0.0.1:8778/jolokia`.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioIo};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

type Upstream = Client<HttpConnector, Full<Bytes>>;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(listen), Some(upstream)) = (args.next(), args.next()) else {
        eprintln!("usage: passthrough LISTEN_ADDR UPSTREAM_BASE_URL");
        std::process::exit(2);
    };
    let upstream = upstream.trim_end_matches('/').to_string();
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: Upstream = Client::builder(TokioExecutor::new()).build(connector);
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .unwrap_or_else(|e| panic!("cannot listen on {listen}: {e}"));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (client, upstream) = (client.clone(), upstream.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                forward(client.clone(), upstream.clone(), req)
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The request's method, path and body to the upstream; its status and
/// body back. Failures become a 502 so the load generator counts them.
async fn forward(
    client: Upstream,
    upstream: String,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let bad_gateway = |e: String| {
        let mut r = Response::new(Full::new(Bytes::from(e)));
        *r.status_mut() = StatusCode::BAD_GATEWAY;
        Ok(r)
    };
    let (parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return bad_gateway(e.to_string()),
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let Ok(out) = Request::builder()
        .method(parts.method)
        .uri(format!("{upstream}{path}"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(body))
    else {
        return bad_gateway("bad upstream URL".into());
    };
    let answer = match client.request(out).await {
        Ok(a) => a,
        Err(e) => return bad_gateway(e.to_string()),
    };
    let status = answer.status();
    match answer.into_body().collect().await {
        Ok(b) => {
            let mut r = Response::new(Full::new(b.to_bytes()));
            *r.status_mut() = status;
            Ok(r)
        }
        Err(e) => bad_gateway(e.to_string()),
    }
}
