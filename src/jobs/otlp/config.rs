//! `[[otlp.exports]]`: where the fleet's metrics are pushed over OTLP, as
//! whom, which targets and with which rules file (a Prometheus door module).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::exporter::open_telemetry::OpenTelemetryBlock;
use crate::secret::Secret;

/// `[otlp]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtlpConfig {
    #[serde(default)]
    pub exports: Vec<ExportConfig>,
}

/// A header's value: as written, or (for secrets) from the environment or
/// a file's first line. Its `Debug` never shows a written value.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum HeaderValue {
    Text(String),
    Env { env: String },
    File { file: PathBuf },
}

impl std::fmt::Debug for HeaderValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderValue::Text(_) => f.write_str("Text(<redacted>)"),
            HeaderValue::Env { env } => f.debug_struct("Env").field("env", env).finish(),
            HeaderValue::File { file } => f.debug_struct("File").field("file", file).finish(),
        }
    }
}

impl HeaderValue {
    /// The value, read now; `Err` says what is missing (never the value).
    pub fn resolve(&self) -> Result<Secret, String> {
        match self {
            HeaderValue::Text(t) => Ok(Secret::new(t.clone())),
            HeaderValue::Env { env } => std::env::var(env)
                .map(Secret::new)
                .map_err(|_| format!("environment variable {env} is not set")),
            HeaderValue::File { file } => Secret::first_line_of(file),
        }
    }
}

/// One export. `endpoint`, `protocol`, `interval`, `timeout` and headers
/// left unset here come from the module's rules file (its
/// `openTelemetry:` block, as jmx_exporter reads it), else the defaults.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportConfig {
    /// Names it in metrics, logs and audit records; default `otlp[<i>]`.
    #[serde(default)]
    pub name: Option<String>,
    /// The receiver's base URL. OTLP/HTTP: `/v1/metrics` is appended to
    /// its path, as the OTLP exporters do (a path already ending in
    /// `/v1/metrics` is kept); gRPC: the `Export` method's path. A query
    /// stays after the path; a fragment is refused.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// `http/protobuf` or `grpc`; unset, the module block's, else
    /// `grpc` where the block gives the endpoint (jmx_exporter's default)
    /// and `http/protobuf` where the export does (OTLP's).
    #[serde(default)]
    pub protocol: Option<String>,
    /// Sent with every request; a name also in the module's block is
    /// this one.
    #[serde(default)]
    pub headers: BTreeMap<String, HeaderValue>,
    /// A PEM CA bundle for an `https://` endpoint (else the system's).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// A client certificate (PEM, with `client_key_file`) for a receiver
    /// that asks for one.
    #[serde(default)]
    pub client_cert_file: Option<PathBuf>,
    #[serde(default)]
    pub client_key_file: Option<PathBuf>,
    /// Default 60s.
    #[serde(default, with = "humantime_serde")]
    pub interval: Option<Duration>,
    /// A push's deadline for reading its targets and for each request;
    /// default 10s.
    #[serde(default, with = "humantime_serde")]
    pub timeout: Option<Duration>,
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
    /// target without the label), the block's `serviceName`, else the
    /// module's name.
    #[serde(default)]
    pub service_name_label: Option<String>,
    /// Bytes of one request before gzip; larger pushes are cut.
    #[serde(default = "default_max_request_bytes")]
    pub max_request_bytes: usize,
    /// Requests waiting to be sent; past it the oldest is dropped (counted).
    #[serde(default = "default_max_queued")]
    pub max_queued_requests: usize,
}

/// What one export does, its settings and its module's block merged: what
/// runs, and what a reload compares to decide whether to restart it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportSettings {
    pub name: String,
    pub protocol: Protocol,
    /// Where requests go (`…/v1/metrics`, or the gRPC method's path).
    pub url: String,
    pub headers: BTreeMap<String, HeaderValue>,
    pub ca_file: Option<PathBuf>,
    pub client_identity: Option<(PathBuf, PathBuf)>,
    pub interval: Duration,
    pub timeout: Duration,
    pub targets: String,
    pub module: String,
    pub principal: String,
    pub role: Option<String>,
    pub service_name_label: Option<String>,
    /// `service.name` where no label gives one.
    pub service_name: String,
    /// On every resource, before the target's own.
    pub resource_attributes: Vec<(String, String)>,
    pub max_request_bytes: usize,
    pub max_queued_requests: usize,
    /// A hash of the headers' values as read now, so that a secret
    /// changed in its file or environment restarts the export on reload.
    pub headers_read: u64,
}

fn default_module() -> String {
    crate::doors::prometheus::config::DEFAULT_MODULE.to_string()
}
fn default_max_request_bytes() -> usize {
    4 * 1024 * 1024
}
fn default_max_queued() -> usize {
    64
}

const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// How requests are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/HTTP with protobuf bodies (port 4318 by convention).
    HttpProtobuf,
    /// OTLP/gRPC, a unary `MetricsService/Export` call over HTTP/2 (port
    /// 4317 by convention).
    Grpc,
}

impl Protocol {
    fn parse(name: &str) -> Option<Protocol> {
        match name {
            "http/protobuf" => Some(Protocol::HttpProtobuf),
            "grpc" => Some(Protocol::Grpc),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Protocol::HttpProtobuf => "http/protobuf",
            Protocol::Grpc => "grpc",
        }
    }

    /// Where an exporter of this protocol sends metrics for a base
    /// `endpoint`: the signal's path appended to the URL's path (trailing
    /// `/` dropped), its query kept after it, as the OTLP exporters do.
    fn metrics_url(self, endpoint: &url::Url) -> String {
        let mut url = endpoint.clone();
        let base = endpoint.path().trim_end_matches('/');
        let path = match self {
            Protocol::HttpProtobuf if base.ends_with("/v1/metrics") => base.to_string(),
            Protocol::HttpProtobuf => format!("{base}/v1/metrics"),
            Protocol::Grpc => format!("{base}{}", crate::exporter::otlp_grpc::EXPORT_PATH),
        };
        url.set_path(&path);
        url.to_string()
    }
}

impl ExportConfig {
    pub fn name(&self, index: usize) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| format!("otlp[{index}]"))
    }

    /// This export merged with its module's `openTelemetry:` block (`None`:
    /// the file has none); `Err` lists every problem, each named by key.
    pub fn settings(
        &self,
        index: usize,
        block: Option<&OpenTelemetryBlock>,
    ) -> Result<ExportSettings, Vec<String>> {
        let key = format!("otlp.exports[{index}]");
        let from_block = format!("module \"{}\"'s openTelemetry block", self.module);
        let mut problems = Vec::new();
        let endpoint = self
            .endpoint
            .clone()
            .map(|e| (e, key.clone() + ".endpoint"))
            .or_else(|| {
                let e = block?.endpoint.clone()?;
                Some((e, format!("{from_block}: endpoint")))
            });
        // Not echoed in problems: it may carry a token.
        let endpoint = match &endpoint {
            Some((e, at)) => match url::Url::parse(e) {
                Ok(u) if !matches!(u.scheme(), "http" | "https") || u.host().is_none() => {
                    problems.push(format!("{at}: not an http:// or https:// URL"));
                    None
                }
                // Never sent, so a receiver would not see what it says.
                Ok(u) if u.fragment().is_some() => {
                    problems.push(format!("{at}: a URL with a fragment (#...); remove it"));
                    None
                }
                Ok(u) => Some(u),
                Err(_) => {
                    problems.push(format!("{at}: not an http:// or https:// URL"));
                    None
                }
            },
            None => {
                problems.push(format!("{key}.endpoint: not set, here or in {from_block}"));
                None
            }
        };
        let written = self
            .protocol
            .clone()
            .map(|p| (p, key.clone() + ".protocol"))
            .or_else(|| Some((block?.protocol.clone()?, format!("{from_block}: protocol"))));
        let protocol = match &written {
            Some((p, at)) => Protocol::parse(p).unwrap_or_else(|| {
                problems.push(format!(
                    "{at}: \"{p}\" is not supported; say \"http/protobuf\" (OTLP/HTTP, \
                     port 4318 by convention) or \"grpc\" (port 4317)"
                ));
                Protocol::HttpProtobuf
            }),
            // jmx_exporter pushes gRPC unless its block says otherwise.
            None if self.endpoint.is_none() && block.is_some_and(|b| b.endpoint.is_some()) => {
                Protocol::Grpc
            }
            None => Protocol::HttpProtobuf,
        };
        let seconds = |s: Option<u64>| s.map(Duration::from_secs);
        let interval = self
            .interval
            .or_else(|| seconds(block?.interval))
            .unwrap_or(DEFAULT_INTERVAL);
        if interval < Duration::from_secs(1) {
            problems.push(format!("{key}.interval: at least 1s"));
        }
        let timeout = self
            .timeout
            .or_else(|| seconds(block?.timeout_seconds))
            .unwrap_or(DEFAULT_TIMEOUT);
        if timeout.is_zero() {
            problems.push(format!("{key}.timeout: at least 1ms"));
        }
        let mut headers: BTreeMap<String, HeaderValue> = block
            .map(|b| {
                b.headers
                    .iter()
                    .map(|(k, v)| (k.clone(), HeaderValue::Text(v.expose().to_string())))
                    .collect()
            })
            .unwrap_or_default();
        headers.extend(self.headers.clone());
        let mut read = std::collections::hash_map::DefaultHasher::new();
        for (name, value) in &headers {
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                problems.push(format!("{key}.headers: \"{name}\" is not a header name"));
            }
            match value.resolve() {
                Ok(v) => std::hash::Hash::hash(v.expose(), &mut read),
                Err(why) => problems.push(format!("{key}.headers.{name}: {why}")),
            }
        }
        if crate::access::TargetSelector::parse(&self.targets).is_err() {
            problems.push(format!("{key}.targets: not a name, glob or label selector"));
        }
        let client_identity = match (&self.client_cert_file, &self.client_key_file) {
            (Some(c), Some(k)) => Some((c.clone(), k.clone())),
            (None, None) => None,
            _ => {
                problems.push(format!(
                    "{key}.client_cert_file: set with client_key_file, or neither"
                ));
                None
            }
        };
        if self.max_request_bytes < 1024 {
            problems.push(format!("{key}.max_request_bytes: at least 1024"));
        }
        if self.max_queued_requests == 0 {
            problems.push(format!("{key}.max_queued_requests: at least 1"));
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        let name = self.name(index);
        Ok(ExportSettings {
            url: protocol.metrics_url(&endpoint.expect("checked")),
            protocol,
            principal: self
                .principal
                .clone()
                .unwrap_or_else(|| format!("otlp:{name}")),
            name,
            headers,
            ca_file: self.ca_file.clone(),
            client_identity,
            interval,
            timeout,
            targets: self.targets.clone(),
            module: self.module.clone(),
            role: self.role.clone(),
            service_name_label: self.service_name_label.clone(),
            service_name: block
                .and_then(|b| b.service_name.clone())
                .unwrap_or_else(|| self.module.clone()),
            resource_attributes: block.map(|b| b.resource_attributes()).unwrap_or_default(),
            max_request_bytes: self.max_request_bytes,
            max_queued_requests: self.max_queued_requests,
            headers_read: std::hash::Hasher::finish(&read),
        })
    }
}

impl OtlpConfig {
    /// Every problem, named by its key. `modules`: the Prometheus door's,
    /// each with its rules file's `openTelemetry:` block; `roles`: the
    /// configured role names.
    pub fn problems(
        &self,
        modules: &BTreeMap<String, Option<OpenTelemetryBlock>>,
        roles: &[String],
    ) -> Vec<String> {
        let mut problems = Vec::new();
        let mut names = std::collections::BTreeSet::new();
        for (i, e) in self.exports.iter().enumerate() {
            let key = format!("otlp.exports[{i}]");
            if !names.insert(e.name(i)) {
                problems.push(format!("{key}.name: \"{}\" is used twice", e.name(i)));
            }
            let block = match modules.get(&e.module) {
                Some(block) => block.as_ref(),
                None => {
                    problems.push(format!(
                        "{key}.module: no [prometheus] module is named \"{}\"",
                        e.module
                    ));
                    None
                }
            };
            if let Err(found) = e.settings(i, block) {
                problems.extend(found);
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

    fn modules(block: Option<&str>) -> BTreeMap<String, Option<OpenTelemetryBlock>> {
        let block = block.map(|yaml| {
            let root: serde_json::Value = serde_saphyr::from_str(yaml).unwrap();
            OpenTelemetryBlock::from_value(&root["openTelemetry"])
                .unwrap()
                .unwrap()
        });
        BTreeMap::from([("default".to_string(), block)])
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
        let e = ok.exports[0].settings(0, None).unwrap();
        assert_eq!(e.url, "http://vm:8428/opentelemetry/v1/metrics");
        assert_eq!(e.interval, Duration::from_secs(60));
        assert_eq!(e.principal, "otlp:otlp[0]");
        assert_eq!(e.service_name, "default");
        assert!(ok.problems(&modules(None), &["metrics".into()]).is_empty());
        let bad = exports(
            r#"[[otlp.exports]]
               endpoint = "grpc://x"
               protocol = "http/json"
               targets = "env="
               module = "none"
               interval = "100ms"
               headers = { "X-Key" = { env = "JMXGATE_TEST_NOT_SET_EVER" } }"#,
        );
        let problems = bad.problems(&modules(None), &["metrics".into()]);
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
        let none = exports("[[otlp.exports]]\ntargets = \"*\"");
        let problems = none.problems(&modules(None), &[]);
        assert!(
            problems[0].contains("endpoint: not set, here or in module"),
            "{problems:?}"
        );
    }

    #[test]
    fn what_an_export_leaves_unset_comes_from_the_rules_files_block() {
        let block = "openTelemetry:\n  endpoint: http://collector:4318\n  \
                     protocol: http/protobuf\n  interval: 15\n  \
                     timeoutSeconds: 5\n  headers: {X-Team: jvm, X-Scope: a}\n  \
                     serviceName: orders\n  resourceAttributes: {deployment.environment: prod}\n";
        let plain = exports("[[otlp.exports]]\ntargets = \"*\"");
        let s = plain.exports[0]
            .settings(0, modules(Some(block))["default"].as_ref())
            .unwrap();
        assert_eq!(s.url, "http://collector:4318/v1/metrics");
        assert_eq!(s.interval, Duration::from_secs(15));
        assert_eq!(s.timeout, Duration::from_secs(5));
        assert_eq!(s.service_name, "orders");
        assert_eq!(s.headers.len(), 2);
        assert_eq!(
            s.resource_attributes,
            [("deployment.environment".to_string(), "prod".to_string())]
        );
        // The export's own keys win, key by key.
        let own = exports(
            "[[otlp.exports]]\ntargets = \"*\"\nendpoint = \"http://vm:8428/opentelemetry\"\n\
             interval = \"30s\"\nheaders = { X-Team = \"ops\" }",
        );
        let s = own.exports[0]
            .settings(0, modules(Some(block))["default"].as_ref())
            .unwrap();
        assert_eq!(s.url, "http://vm:8428/opentelemetry/v1/metrics");
        assert_eq!(s.interval, Duration::from_secs(30));
        assert_eq!(s.timeout, Duration::from_secs(5));
        assert_eq!(s.headers["X-Team"], HeaderValue::Text("ops".into()));
        assert_eq!(s.headers["X-Scope"], HeaderValue::Text("a".into()));
        assert!(
            !format!("{s:?}").contains("ops"),
            "a header's value in Debug"
        );
        assert_eq!(s.protocol, Protocol::HttpProtobuf, "the block says so");
        // jmx_exporter's default protocol is gRPC, so a block's endpoint
        // without a protocol is a gRPC one; the export's own is OTLP/HTTP.
        let grpc = modules(Some("openTelemetry:\n  endpoint: http://c:4317/\n"));
        let s = plain.exports[0]
            .settings(0, grpc["default"].as_ref())
            .unwrap();
        assert_eq!(s.protocol, Protocol::Grpc);
        assert_eq!(
            s.url,
            "http://c:4317/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"
        );
        let s = own.exports[0]
            .settings(0, grpc["default"].as_ref())
            .unwrap();
        assert_eq!(s.protocol, Protocol::HttpProtobuf);
        // Another protocol is named, with the ones there are.
        let json = modules(Some(
            "openTelemetry:\n  endpoint: http://c:4318\n  protocol: http/json\n",
        ));
        let problems = plain.problems(&json, &[]);
        assert!(
            problems[0].contains("module \"default\"'s openTelemetry block: protocol")
                && problems[0].contains("\"grpc\""),
            "{problems:?}"
        );
    }

    #[test]
    fn the_signals_path_goes_on_the_endpoints_path_before_its_query() {
        let url = |endpoint: &str, protocol: &str| {
            exports(&format!(
                "[[otlp.exports]]\ntargets = \"*\"\nendpoint = \"{endpoint}\"\nprotocol = \"{protocol}\""
            ))
            .exports[0]
                .settings(0, None)
                .map(|s| s.url)
        };
        let http = "http/protobuf";
        for (endpoint, want) in [
            ("http://h:4318", "http://h:4318/v1/metrics"),
            ("http://h:4318/", "http://h:4318/v1/metrics"),
            (
                "http://h:4318/otlp?tenant=a",
                "http://h:4318/otlp/v1/metrics?tenant=a",
            ),
            (
                "http://h:4318/otlp/?tenant=a",
                "http://h:4318/otlp/v1/metrics?tenant=a",
            ),
            (
                "http://h:4318/otlp/v1/metrics?tenant=a",
                "http://h:4318/otlp/v1/metrics?tenant=a",
            ),
            (
                "http://h:4318/otlp/v1/metrics/",
                "http://h:4318/otlp/v1/metrics",
            ),
            (
                "https://u:p@h/a%20b?k=v&x",
                "https://u:p@h/a%20b/v1/metrics?k=v&x",
            ),
        ] {
            assert_eq!(url(endpoint, http).as_deref(), Ok(want), "{endpoint}");
        }
        assert_eq!(
            url("http://h:4317/p?x=1", "grpc").as_deref(),
            Ok("http://h:4317/p/opentelemetry.proto.collector.metrics.v1.MetricsService/Export?x=1")
        );
        // A fragment is never sent: refused, with the key, not the URL.
        let problems = url("http://h:4318/otlp#token-in-fragment", http).unwrap_err();
        assert!(
            problems[0].starts_with("otlp.exports[0].endpoint: a URL with a fragment"),
            "{problems:?}"
        );
        assert!(!problems[0].contains("token-in-fragment"));
        let block = modules(Some("openTelemetry:\n  endpoint: http://c:4318/#x\n"));
        let plain = exports("[[otlp.exports]]\ntargets = \"*\"");
        let problems = plain.problems(&block, &[]);
        assert!(
            problems[0].contains("openTelemetry block: endpoint: a URL with a fragment"),
            "{problems:?}"
        );
    }
}
