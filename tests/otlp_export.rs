//! OTLP exports against a real receiver: VictoriaMetrics (from
//! `../shared/victoriametrics/`, with OpenTelemetry's Prometheus naming),
//! fed by the gateway from real agents. What comes back over PromQL must be
//! the series `/prometheus` gives for the same target and module.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{audit_records, eventually, free_port, targets_toml, Agent, Gateway};
use serde_json::Value;

/// A VictoriaMetrics single-node server on a free port, stopped on drop.
struct Victoria {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Victoria {
    async fn start() -> Victoria {
        let bin = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/victoriametrics/victoria-metrics");
        assert!(
            bin.exists(),
            "{} is missing (../shared/victoriametrics)",
            bin.display()
        );
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let child = Command::new(bin)
            .arg(format!("-storageDataPath={}", dir.path().display()))
            .arg(format!("-httpListenAddr=127.0.0.1:{port}"))
            .args([
                "-opentelemetry.usePrometheusNaming",
                "-search.latencyOffset=0s",
                "-loggerLevel=ERROR",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let v = Victoria {
            child,
            port,
            _dir: dir,
        };
        let http = common::http_client();
        eventually(
            "VictoriaMetrics answers",
            Duration::from_secs(60),
            || async {
                match http.get(v.url("/health")).send().await {
                    Ok(r) if r.status().is_success() => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            },
        )
        .await;
        v
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn query(&self, path: &str, selector: &str) -> String {
        let q: String = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("match[]", selector)
            .finish();
        self.url(&format!("{path}?{q}"))
    }

    /// Every series of a target: its name and labels.
    async fn series(&self, instance: &str) -> Vec<BTreeMap<String, String>> {
        let http = common::http_client();
        let _ = http.get(self.url("/internal/force_flush")).send().await;
        let r: Value = http
            .get(self.query(
                "/api/v1/series",
                &format!("{{service_instance_id=\"{instance}\"}}"),
            ))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        r["data"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|s| serde_json::from_value(s).unwrap())
            .collect()
    }

    /// The raw samples of one series name, oldest first.
    async fn values(&self, name: &str, instance: &str) -> Vec<f64> {
        let http = common::http_client();
        let text = http
            .get(self.query(
                "/api/v1/export",
                &format!("{name}{{service_instance_id=\"{instance}\"}}"),
            ))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .flat_map(|v| {
                v["values"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|x| x.as_f64())
            })
            .collect()
    }
}

impl Drop for Victoria {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `/prometheus` samples as (name, labels without the target label).
fn exposition_series(text: &str) -> BTreeSet<(String, BTreeMap<String, String>)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (series, _value) = l.rsplit_once(' ')?;
            let (name, labels) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels: BTreeMap<String, String> = labels
                .split("\",")
                .filter(|p| !p.is_empty())
                .filter_map(|p| {
                    let (k, v) = p.split_once("=\"")?;
                    Some((k.to_string(), v.trim_end_matches('"').to_string()))
                })
                .filter(|(k, _)| k != "target")
                .collect();
            Some((name.to_string(), labels))
        })
        // The door's own series about each scrape are not the target's.
        .filter(|(name, _)| !name.starts_with("jmx_") && !name.starts_with("jmxgate_scrape_"))
        .collect()
}

fn rules() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otlp/threads.yml")
}

#[tokio::test(flavor = "multi_thread")]
async fn pushed_series_are_the_ones_prometheus_scrapes() {
    let vm = Victoria::start().await;
    let agent = Agent::start("otlp-a");
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        r#"{targets}
[[prometheus.modules]]
name = "threads"
rules_file = "{rules}"

[audit]
dir = "{audit}"

[[otlp.exports]]
name = "vm"
endpoint = "{endpoint}"
interval = "1s"
targets = "otlp-*"
module = "threads"
service_name_label = "role"
"#,
        targets = targets_toml(&[&agent]),
        rules = rules().display(),
        audit = dir.path().join("audit").display(),
        endpoint = vm.url("/opentelemetry"),
    );
    let gw = Gateway::start(&config).await;

    // Pushed: every series /prometheus has, with its labels, under the
    // target's resource.
    let (_, scraped) = {
        let r = gw
            .http
            .get(gw.url("/prometheus?target=otlp-a&module=threads"))
            .send()
            .await
            .unwrap();
        (r.status(), r.text().await.unwrap())
    };
    let want = exposition_series(&scraped);
    assert!(
        want.iter().any(|(n, _)| n == "jvm_threads_started_total"),
        "{scraped}"
    );
    assert!(
        want.iter().any(|(n, _)| n == "jvm_classes_loaded"),
        "{scraped}"
    );
    let got = eventually(
        "VictoriaMetrics has the target's series",
        Duration::from_secs(90),
        || async {
            let series = vm.series("otlp-a").await;
            let have: BTreeSet<(String, BTreeMap<String, String>)> = series
                .iter()
                .map(|s| {
                    let name = s["__name__"].clone();
                    let labels = s
                        .iter()
                        .filter(|(k, _)| want.iter().any(|(_, l)| l.contains_key(k.as_str())))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    (name, labels)
                })
                .collect();
            if want.is_subset(&have) && have.len() == want.len() {
                Ok(series)
            } else {
                Err(format!("want {want:?}\nhave {have:?}"))
            }
        },
    )
    .await;
    // The resource: the target's name, the service from its label, its
    // labels, and what sent it.
    let one = &got[0];
    assert_eq!(one["service_instance_id"], "otlp-a");
    assert_eq!(one["service_name"], "test");
    assert_eq!(one["role"], "test");
    assert_eq!(one["telemetry_sdk_name"], "jmxgate");
    assert_eq!(one["scope_name"], "jmxgate");

    // A counter stays a counter, and never goes down across pushes.
    let counted = eventually("several pushes", Duration::from_secs(90), || async {
        let v = vm.values("jvm_threads_started_total", "otlp-a").await;
        if v.len() >= 3 {
            Ok(v)
        } else {
            Err(format!("{v:?}"))
        }
    })
    .await;
    assert!(counted.windows(2).all(|w| w[0] <= w[1]), "{counted:?}");
    // Its value is the agent's own.
    let direct = common::direct(
        &agent,
        &serde_json::json!({"type":"read","mbean":"java.lang:type=Threading","attribute":"TotalStartedThreadCount"}),
    )
    .await["value"]
        .as_f64()
        .unwrap();
    assert!(
        counted.iter().all(|v| *v <= direct),
        "{counted:?} vs {direct}"
    );

    // Audited: one record per push and target.
    let pushes = audit_records(&dir.path().join("audit"))
        .into_iter()
        .filter(|r| r["channel"] == "otlp" && r["target"] == "otlp-a")
        .count();
    assert!(pushes >= 3, "{pushes} push records");
    let metrics = gw.gateway.metrics().encode();
    assert!(
        metrics.contains("jmxgate_otlp_points_total{export=\"vm\",outcome=\"sent\"}"),
        "{metrics}"
    );
}

/// A receiver of our own for what VictoriaMetrics won't do: it answers
/// each request with the next status of `script` (then 200), and keeps
/// the bodies it took.
async fn scripted_receiver(
    script: Vec<u16>,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<u16>>>) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let script = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::from(
        script,
    )));
    let s = seen.clone();
    let app = axum::Router::new().route(
        "/v1/metrics",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let (s, script) = (s.clone(), script.clone());
                async move {
                    let status = script.lock().unwrap().pop_front().unwrap_or(200);
                    assert_eq!(headers["content-encoding"], "gzip");
                    assert_eq!(headers["content-type"], "application/x-protobuf");
                    assert!(!body.is_empty());
                    s.lock().unwrap().push(status);
                    let mut r = axum::response::Response::new(axum::body::Body::empty());
                    *r.status_mut() = axum::http::StatusCode::from_u16(status).unwrap();
                    if status == 429 {
                        r.headers_mut()
                            .insert("retry-after", axum::http::HeaderValue::from_static("1"));
                    }
                    r
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refusing_receiver_is_retried_or_given_up_on_and_the_gateway_keeps_serving() {
    let agent = Agent::start("otlp-hostile");
    // 429 and 503 are retried; a 400 is not (the request is dropped and
    // counted as failed), and the next push goes out as usual.
    let (busy, busy_seen) = scripted_receiver(vec![429, 503]).await;
    let (picky, picky_seen) = scripted_receiver(vec![400]).await;
    let config = format!(
        r#"{targets}
[[prometheus.modules]]
name = "threads"
rules_file = "{rules}"

[[otlp.exports]]
name = "busy"
endpoint = "{busy}"
interval = "60s"
targets = "otlp-*"
module = "threads"

[[otlp.exports]]
name = "picky"
endpoint = "{picky}"
interval = "2s"
targets = "otlp-*"
module = "threads"
"#,
        targets = targets_toml(&[&agent]),
        rules = rules().display(),
    );
    let gw = Gateway::start(&config).await;
    let metric = |name: &str| {
        let text = gw.gateway.metrics().encode();
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    eventually(
        "the busy receiver takes it on the third try",
        Duration::from_secs(60),
        || async {
            let seen = busy_seen.lock().unwrap().clone();
            if seen == [429, 503, 200] {
                Ok(())
            } else {
                Err(format!("{seen:?}"))
            }
        },
    )
    .await;
    assert!(metric("jmxgate_otlp_points_total{export=\"busy\",outcome=\"sent\"}") > 0.0);
    assert_eq!(
        metric("jmxgate_otlp_points_total{export=\"busy\",outcome=\"failed\"}"),
        0.0
    );
    eventually(
        "the picky receiver refuses one and takes the next",
        Duration::from_secs(60),
        || async {
            let seen = picky_seen.lock().unwrap().clone();
            if seen.len() >= 2 && seen[0] == 400 && seen[1] == 200 {
                Ok(())
            } else {
                Err(format!("{seen:?}"))
            }
        },
    )
    .await;
    assert!(metric("jmxgate_otlp_points_total{export=\"picky\",outcome=\"failed\"}") > 0.0);
    // Requests are served all along.
    let (status, v) = gw
        .post(
            "/jolokia",
            &serde_json::json!({"type":"version","target":{"url":"otlp-hostile"}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
}
