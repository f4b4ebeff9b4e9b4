//! An OTLP/HTTP receiver of our own, for what a real one won't do on
//! demand: it takes a request at any path, decodes it (gzip, protobuf)
//! and answers as the test's judge says (a status, an echo of the
//! request's headers, or never), keeping what it took and where it was
//! sent.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point};
use prost::Message as _;

/// How to answer one request.
pub enum Answer {
    Status(u16),
    /// This status, with every header of the request in the body
    /// (`name: value` lines), as a careless receiver's error page does.
    Echo(u16),
    /// Never: the gateway's timeout ends it.
    Stall,
}

/// One data point as the receiver took it, with what it belongs to.
#[derive(Debug, Clone)]
pub struct Point {
    pub resource: BTreeMap<String, String>,
    pub metric: String,
    /// `Some(monotonic)` for a Sum, `None` for a Gauge.
    pub monotonic: Option<bool>,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
    pub start_unix_nano: u64,
    pub time_unix_nano: u64,
}

type Judge = dyn Fn(&ExportMetricsServiceRequest) -> Answer + Send + Sync;

pub struct Receiver {
    pub url: String,
    /// Every request's answer, in order.
    answered: Arc<Mutex<Vec<u16>>>,
    /// The requests answered 200.
    taken: Arc<Mutex<Vec<ExportMetricsServiceRequest>>>,
    /// Every request, in order.
    received: Arc<Mutex<Vec<Received>>>,
}

/// One request as the receiver saw it.
#[derive(Debug, Clone)]
pub struct Received {
    /// The path and query it was sent to.
    pub path_and_query: String,
    pub request: ExportMetricsServiceRequest,
    /// The body it answered with.
    pub reply: String,
}

fn text(kv: &[KeyValue]) -> BTreeMap<String, String> {
    kv.iter()
        .map(|kv| {
            let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(any_value::Value::StringValue(s)) => s.clone(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), v)
        })
        .collect()
}

impl Receiver {
    /// Answers 200 to everything.
    pub async fn accepting() -> Receiver {
        Receiver::start(|_| Answer::Status(200)).await
    }

    pub async fn start(
        judge: impl Fn(&ExportMetricsServiceRequest) -> Answer + Send + Sync + 'static,
    ) -> Receiver {
        Receiver::serve(None, judge).await
    }

    /// Answers 200 over HTTPS with `tls` (the `[server.tls]` keys other
    /// than `listen`: certificates made by the test).
    pub async fn accepting_tls(tls: &str) -> Receiver {
        Receiver::serve(Some(tls), |_| Answer::Status(200)).await
    }

    async fn serve(
        tls: Option<&str>,
        judge: impl Fn(&ExportMetricsServiceRequest) -> Answer + Send + Sync + 'static,
    ) -> Receiver {
        let judge: Arc<Judge> = Arc::new(judge);
        let answered = Arc::new(Mutex::new(Vec::new()));
        let taken = Arc::new(Mutex::new(Vec::new()));
        let received = Arc::new(Mutex::new(Vec::new()));
        let (a, t, seen) = (answered.clone(), taken.clone(), received.clone());
        // Any path: the test asserts where requests went.
        let app = axum::Router::new().fallback(axum::routing::post(
            move |uri: axum::http::Uri, headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let (judge, a, t, seen) = (judge.clone(), a.clone(), t.clone(), seen.clone());
                async move {
                    assert_eq!(headers["content-type"], "application/x-protobuf");
                    assert_eq!(headers["content-encoding"], "gzip");
                    let mut raw = Vec::new();
                    flate2::read::GzDecoder::new(body.as_ref())
                        .read_to_end(&mut raw)
                        .expect("gzip");
                    let request =
                        ExportMetricsServiceRequest::decode(raw.as_slice()).expect("OTLP");
                    let (status, reply) = match judge(&request) {
                        Answer::Status(200) => (200, String::new()),
                        Answer::Status(s) => (s, "refused by the test's judge".to_string()),
                        Answer::Echo(s) => {
                            let echoed: Vec<String> = headers
                                .iter()
                                .map(|(k, v)| format!("{k}: {}", v.to_str().unwrap_or("?")))
                                .collect();
                            (s, format!("refused; you sent\n{}\n", echoed.join("\n")))
                        }
                        Answer::Stall => {
                            tokio::time::sleep(Duration::from_secs(3600)).await;
                            (504, String::new())
                        }
                    };
                    a.lock().unwrap().push(status);
                    seen.lock().unwrap().push(Received {
                        path_and_query: uri
                            .path_and_query()
                            .map(|p| p.to_string())
                            .unwrap_or_default(),
                        request: request.clone(),
                        reply: reply.clone(),
                    });
                    if status == 200 {
                        t.lock().unwrap().push(request);
                    }
                    let mut r = axum::response::Response::new(axum::body::Body::from(reply));
                    *r.status_mut() = axum::http::StatusCode::from_u16(status).unwrap();
                    if status == 429 {
                        r.headers_mut()
                            .insert("retry-after", axum::http::HeaderValue::from_static("1"));
                    }
                    r
                }
            },
        ));
        let url = match tls {
            Some(tls) => {
                let config: jmxgate::tls::TlsConfig =
                    toml::from_str(&format!("listen = \"127.0.0.1:0\"\n{tls}")).unwrap();
                let reloading = Arc::new(jmxgate::tls::ReloadingTls::new(config).unwrap());
                let listener = jmxgate::tls::TlsListener::bind(reloading).await.unwrap();
                let addr = axum::serve::Listener::local_addr(&listener).unwrap();
                tokio::spawn(async move { axum::serve(listener, app).await });
                format!("https://127.0.0.1:{}", addr.port())
            }
            None => {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let url = format!("http://{}", listener.local_addr().unwrap());
                tokio::spawn(async move { axum::serve(listener, app).await });
                url
            }
        };
        Receiver {
            url,
            answered,
            taken,
            received,
        }
    }

    pub fn answered(&self) -> Vec<u16> {
        self.answered.lock().unwrap().clone()
    }

    /// Every request answered so far, oldest first.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// Every point of the requests taken, oldest first.
    pub fn points(&self) -> Vec<Point> {
        points_of(&self.taken.lock().unwrap())
    }
}

/// Every point of these requests, in order.
pub fn points_of(requests: &[ExportMetricsServiceRequest]) -> Vec<Point> {
    let mut out = Vec::new();
    for request in requests {
        for rm in &request.resource_metrics {
            let resource = text(
                rm.resource
                    .as_ref()
                    .map(|r| r.attributes.as_slice())
                    .unwrap_or_default(),
            );
            for m in rm.scope_metrics.iter().flat_map(|s| &s.metrics) {
                let (monotonic, points) = match &m.data {
                    Some(metric::Data::Sum(s)) => (Some(s.is_monotonic), &s.data_points),
                    Some(metric::Data::Gauge(g)) => (None, &g.data_points),
                    other => panic!("unexpected metric data {other:?}"),
                };
                for p in points {
                    out.push(Point {
                        resource: resource.clone(),
                        metric: m.name.clone(),
                        monotonic,
                        labels: text(&p.attributes),
                        value: match p.value {
                            Some(number_data_point::Value::AsDouble(d)) => d,
                            Some(number_data_point::Value::AsInt(i)) => i as f64,
                            None => panic!("a point without a value"),
                        },
                        start_unix_nano: p.start_time_unix_nano,
                        time_unix_nano: p.time_unix_nano,
                    });
                }
            }
        }
    }
    out
}

/// The data points in a request.
pub fn points_in(request: &ExportMetricsServiceRequest) -> usize {
    request
        .resource_metrics
        .iter()
        .flat_map(|rm| &rm.scope_metrics)
        .flat_map(|s| &s.metrics)
        .map(|m| match &m.data {
            Some(metric::Data::Sum(s)) => s.data_points.len(),
            Some(metric::Data::Gauge(g)) => g.data_points.len(),
            _ => 0,
        })
        .sum()
}

/// Whether any point of a request has a NaN value.
pub fn has_nan(request: &ExportMetricsServiceRequest) -> bool {
    request
        .resource_metrics
        .iter()
        .flat_map(|rm| &rm.scope_metrics)
        .flat_map(|s| &s.metrics)
        .flat_map(|m| match &m.data {
            Some(metric::Data::Sum(s)) => s.data_points.clone(),
            Some(metric::Data::Gauge(g)) => g.data_points.clone(),
            _ => Vec::new(),
        })
        .any(|p| matches!(p.value, Some(number_data_point::Value::AsDouble(d)) if d.is_nan()))
}

/// A listener that takes every connection and closes it at once.
pub async fn hanging_up() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            drop(socket);
        }
    });
    url
}

/// A real OTLP/gRPC receiver: grpcio with the official OpenTelemetry
/// protos (`tests/clients/otlp-grpc/receiver.py`), stopped on drop.
pub struct GrpcReceiver {
    child: std::process::Child,
    pub port: u16,
    out: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

/// One call a [`GrpcReceiver`] answered.
#[derive(Debug, Clone)]
pub struct GrpcCall {
    /// The status code's name it answered.
    pub answered: String,
    pub points: usize,
    pub metadata: BTreeMap<String, String>,
    /// The request as grpcio decoded it (answered `OK` only).
    pub request: Option<ExportMetricsServiceRequest>,
}

impl GrpcReceiver {
    /// Started with receiver.py's arguments (`--script …`, `--tls …`).
    pub async fn start(args: &[&str]) -> GrpcReceiver {
        use std::io::BufRead as _;
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/otlp-grpc");
        let python = dir.join(".venv/bin/python");
        assert!(
            python.exists(),
            "{} is missing: run scripts/install-deps.sh",
            python.display()
        );
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("calls.jsonl");
        let mut child = std::process::Command::new(python)
            .arg(dir.join("receiver.py"))
            .arg("--out")
            .arg(&out)
            .args(args)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let port = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            std::io::BufReader::new(stdout)
                .read_line(&mut line)
                .unwrap();
            line.trim()
                .strip_prefix("listening ")
                .map(|p| p.parse::<u16>().unwrap())
        })
        .await
        .unwrap()
        .expect("receiver.py says where it listens");
        GrpcReceiver {
            child,
            port,
            out,
            _dir: tmp,
        }
    }

    /// Every call answered so far, oldest first.
    pub fn calls(&self) -> Vec<GrpcCall> {
        use base64::Engine as _;
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        text.lines()
            .filter(|l| l.ends_with('}'))
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                GrpcCall {
                    answered: v["answered"].as_str().unwrap().to_string(),
                    points: v["points"].as_u64().unwrap() as usize,
                    metadata: serde_json::from_value(v["metadata"].clone()).unwrap(),
                    request: v["request"].as_str().map(|b| {
                        let bytes = base64::engine::general_purpose::STANDARD.decode(b).unwrap();
                        ExportMetricsServiceRequest::decode(bytes.as_slice()).unwrap()
                    }),
                }
            })
            .collect()
    }

    /// Every point of the requests it took.
    pub fn points(&self) -> Vec<Point> {
        let taken: Vec<_> = self.calls().into_iter().filter_map(|c| c.request).collect();
        points_of(&taken)
    }
}

impl Drop for GrpcReceiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
