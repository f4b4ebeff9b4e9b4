//! `[[otlp.exports]]`: where the fleet's metrics are pushed over OTLP, as
//! whom, which targets and with which rules file (a Prometheus door module).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::secret::Secret;

/// `[otlp]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtlpConfig {
    #[serde(default)]
    pub exports: Vec<ExportConfig>,
}

/// A header's value: as written, or (for secrets) from the environment or
/// a file's first line.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum HeaderValue {
    Text(String),
    Env { env: String },
    File { file: PathBuf },
}

impl HeaderValue {
    /// The value, read now; `Err` says what is missing (never the value).
    pub fn resolve(&self) -> Result<Secret, String> {
        match self {
            HeaderValue::Text(t) => Ok(Secret::new(t.clone())),
            HeaderValue::Env { env } => std::env::var(env)
                .map(Secret::new)
                .map_err(|_| format!("environment variable {env} is not set")),
            HeaderValue::File { file } => std::fs::read_to_string(file)
                .map(|t| Secret::new(t.lines().next().unwrap_or_default().to_string()))
                .map_err(|e| format!("{}: {e}", file.display())),
        }
    }
}

/// One export.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportConfig {
    /// Names it in metrics, logs and audit records; default `otlp[<i>]`.
    #[serde(default)]
    pub name: Option<String>,
    /// The OTLP/HTTP base URL; `/v1/metrics` is appended, as the OTLP
    /// exporters do (a URL already ending in `/v1/metrics` is kept).
    pub endpoint: String,
    /// `http/protobuf` (the only one).
    #[serde(default = "http_protobuf")]
    pub protocol: String,
    #[serde(default)]
    pub headers: BTreeMap<String, HeaderValue>,
    /// A PEM CA bundle for an `https://` endpoint (else the system's).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    #[serde(default = "default_interval", with = "humantime_serde")]
    pub interval: Duration,
    /// A push's deadline for reading its targets and for each request.
    #[serde(default = "default_timeout", with = "humantime_serde")]
    pub timeout: Duration,
    /// Which targets: a name, glob or label selector.
    pub targets: String,
    /// The Prometheus door's module (rules file) that makes the samples.
    #[serde(default = "default_module")]
    pub module: String,
    /// Who the export runs as (audit records' principal); default
    /// `otlp:<name>`.
    #[serde(default)]
    pub principal: Option<String>,
    /// The role whose reach and policy apply, as for a scraper holding it
    /// (required once roles are configured).
    #[serde(default)]
    pub role: Option<String>,
    /// The target label whose value is `service.name`; without it (or on a
    /// target without the label), the module's name.
    #[serde(default)]
    pub service_name_label: Option<String>,
    /// Bytes of one request before gzip; larger pushes are cut.
    #[serde(default = "default_max_request_bytes")]
    pub max_request_bytes: usize,
    /// Requests waiting to be sent; past it the oldest is dropped (counted).
    #[serde(default = "default_max_queued")]
    pub max_queued_requests: usize,
}

fn http_protobuf() -> String {
    "http/protobuf".into()
}
fn default_interval() -> Duration {
    Duration::from_secs(60)
}
fn default_timeout() -> Duration {
    Duration::from_secs(10)
}
fn default_module() -> String {
    crate::pipeline::prometheus::config::DEFAULT_MODULE.to_string()
}
fn default_max_request_bytes() -> usize {
    4 * 1024 * 1024
}
fn default_max_queued() -> usize {
    64
}

impl ExportConfig {
    pub fn name(&self, index: usize) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| format!("otlp[{index}]"))
    }

    /// Where requests go.
    pub fn url(&self) -> String {
        let base = self.endpoint.trim_end_matches('/');
        if base.ends_with("/v1/metrics") {
            base.to_string()
        } else {
            format!("{base}/v1/metrics")
        }
    }
}

impl OtlpConfig {
    /// Every problem, named by its key. `modules`: the Prometheus door's;
    /// `roles`: the configured role names.
    pub fn problems(&self, modules: &[String], roles: &[String]) -> Vec<String> {
        let mut problems = Vec::new();
        let mut names = std::collections::BTreeSet::new();
        for (i, e) in self.exports.iter().enumerate() {
            let key = format!("otlp.exports[{i}]");
            if !names.insert(e.name(i)) {
                problems.push(format!("{key}.name: \"{}\" is used twice", e.name(i)));
            }
            match url::Url::parse(&e.endpoint) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
                // Not echoed: it may carry a token.
                _ => problems.push(format!("{key}.endpoint: not an http:// or https:// URL")),
            }
            if e.protocol != "http/protobuf" {
                problems.push(format!(
                    "{key}.protocol: \"{}\" is not supported; use \"http/protobuf\"",
                    e.protocol
                ));
            }
            for (name, value) in &e.headers {
                if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                    problems.push(format!("{key}.headers: \"{name}\" is not a header name"));
                }
                if let Err(why) = value.resolve() {
                    problems.push(format!("{key}.headers.{name}: {why}"));
                }
            }
            if e.interval < Duration::from_secs(1) {
                problems.push(format!("{key}.interval: at least 1s"));
            }
            if e.timeout.is_zero() {
                problems.push(format!("{key}.timeout: at least 1ms"));
            }
            if crate::access::TargetSelector::parse(&e.targets).is_err() {
                problems.push(format!("{key}.targets: not a name, glob or label selector"));
            }
            if !modules.contains(&e.module) {
                problems.push(format!(
                    "{key}.module: no [prometheus] module is named \"{}\"",
                    e.module
                ));
            }
            match &e.role {
                Some(r) if !roles.contains(r) => {
                    problems.push(format!("{key}.role: no role is named \"{r}\""))
                }
                None if !roles.is_empty() => problems.push(format!(
                    "{key}.role: roles are configured, so say which one the export holds"
                )),
                _ => {}
            }
            if e.max_request_bytes < 1024 {
                problems.push(format!("{key}.max_request_bytes: at least 1024"));
            }
            if e.max_queued_requests == 0 {
                problems.push(format!("{key}.max_queued_requests: at least 1"));
            }
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exports(text: &str) -> OtlpConfig {
        #[derive(Deserialize)]
        struct File {
            otlp: OtlpConfig,
        }
        toml::from_str::<File>(text).unwrap().otlp
    }

    #[test]
    fn an_export_needs_a_receiver_targets_a_module_and_a_role() {
        let ok = exports(
            r#"[[otlp.exports]]
               endpoint = "http://vm:8428/opentelemetry"
               targets = "env=prod"
               role = "metrics"
               headers = { "Authorization" = { env = "PATH" } }"#,
        );
        let e = &ok.exports[0];
        assert_eq!(e.url(), "http://vm:8428/opentelemetry/v1/metrics");
        assert_eq!(e.interval, Duration::from_secs(60));
        assert!(ok
            .problems(&["default".into()], &["metrics".into()])
            .is_empty());
        let bad = exports(
            r#"[[otlp.exports]]
               endpoint = "grpc://x"
               protocol = "grpc"
               targets = "env="
               module = "none"
               interval = "100ms"
               headers = { "X-Key" = { env = "JMXGATE_TEST_NOT_SET_EVER" } }"#,
        );
        let problems = bad.problems(&["default".into()], &["metrics".into()]);
        for key in [
            "endpoint",
            "protocol",
            "targets",
            "module",
            "interval",
            "role",
            "headers.X-Key",
        ] {
            assert!(
                problems.iter().any(|p| p.contains(&format!("].{key}"))),
                "{key}: {problems:?}"
            );
        }
    }
}
