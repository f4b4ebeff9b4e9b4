//! A VictoriaMetrics single-node server (from `../shared/victoriametrics/`,
//! with OpenTelemetry's Prometheus naming) on a free port, for tests that
//! push OTLP into a real receiver and read it back over its API.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::{self, eventually, free_port};

/// A VictoriaMetrics single-node server on a free port, stopped on drop.
pub struct Victoria {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Victoria {
    pub async fn start() -> Victoria {
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

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn query(&self, path: &str, selector: &str) -> String {
        let q: String = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("match[]", selector)
            .finish();
        self.url(&format!("{path}?{q}"))
    }

    /// Every series of a target: its name and labels.
    pub async fn series(&self, instance: &str) -> Vec<BTreeMap<String, String>> {
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

    /// `/api/v1/export` for a series selector: one JSON object per series.
    pub async fn export(&self, selector: &str) -> Vec<Value> {
        let http = common::http_client();
        let _ = http.get(self.url("/internal/force_flush")).send().await;
        let text = http
            .get(self.query("/api/v1/export", selector))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .collect()
    }

    /// The raw samples of one series name, oldest first.
    pub async fn values(&self, name: &str, instance: &str) -> Vec<f64> {
        self.export(&format!("{name}{{service_instance_id=\"{instance}\"}}"))
            .await
            .into_iter()
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
