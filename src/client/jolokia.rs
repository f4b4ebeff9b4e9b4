//! The public Jolokia client, modelled on Jolokia's Java client: a builder,
//! typed requests ([`Request`]), GET or POST chosen per request, bulk
//! execution with per-item results, and error kinds that say what failed.
//!
//! ```no_run
//! # async fn demo() -> Result<(), jmxgate::client::JolokiaError> {
//! use jmxgate::client::JolokiaClient;
//! use jmxgate::protocol::Request;
//!
//! let client = JolokiaClient::builder("http://localhost:8080/jolokia")
//!     .user("ops", "secret")
//!     .target("kafka-1") // proxy mode: a target of the gateway's fleet
//!     .build()?;
//! let heap = client
//!     .execute(&Request::read("java.lang:type=Memory", Some("HeapMemoryUsage"))?)
//!     .await?;
//! println!("used: {}", heap.value["used"]);
//! # Ok(()) }
//! ```

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use serde::Deserialize;
use serde_json::Value;
use url::Url;

use crate::protocol::reduce::{Reduce, Reduced};
use crate::protocol::{ProtocolError, ProxyTarget, Request, Response};
use crate::secret::Secret;

/// An answer with status 200 (or 304 for `ifModifiedSince`).
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub status: u16,
    /// `Null` for a 304 answer.
    pub value: Value,
    /// The agent's clock, in seconds: the `ifModifiedSince` for next time.
    pub timestamp: u64,
}

/// An error the agent (or the gateway) answered for one request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{error_type} (status {status}): {message}")]
pub struct RemoteError {
    pub status: u16,
    pub error_type: String,
    pub message: String,
    /// The request as the server echoed it.
    pub request: Option<Value>,
    /// The remote stack trace, when the server sent one.
    pub stacktrace: Option<String>,
}

/// Why a call failed. Cloneable, so a [`Poller`](super::Poller) can hand
/// one exchange's failure to every callback of the round.
#[derive(Debug, Clone, thiserror::Error)]
pub enum JolokiaError {
    #[error("invalid client setup: {0}")]
    Setup(String),
    #[error("invalid request: {0}")]
    Request(String),
    #[error("cannot connect to {url}: {cause}")]
    Connect { url: String, cause: String },
    #[error("no answer from {url} within the timeout: {cause}")]
    Timeout { url: String, cause: String },
    #[error("{url} answered HTTP {status}{hint}")]
    Http {
        url: String,
        status: u16,
        hint: &'static str,
    },
    #[error("the answer is not Jolokia JSON: {0}")]
    BadAnswer(String),
    #[error("{0}")]
    Remote(Box<RemoteError>),
    /// Some items of a bulk failed: every item's result, in order.
    #[error("{} of {} requests failed; first: {}", .0.iter().filter(|r| r.is_err()).count(), .0.len(),
        .0.iter().find_map(|r| r.as_ref().err()).map(|e| e.to_string()).unwrap_or_default())]
    BulkRemote(Vec<Result<Reply, RemoteError>>),
    #[error("the exchange failed: {0}")]
    Transport(String),
}

impl RemoteError {
    /// The agent said the MBean, attribute or operation does not exist.
    /// The gateway's own 404s (`jmxgate.UnknownTarget`) are not that.
    pub fn is_not_found(&self) -> bool {
        self.status == 404 && !self.error_type.starts_with("jmxgate.")
    }
}

impl From<ProtocolError> for JolokiaError {
    fn from(e: ProtocolError) -> Self {
        JolokiaError::Request(e.message)
    }
}

/// How requests travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpMethod {
    /// GET where the request fits a URL, POST otherwise (bulk, several
    /// attributes, structured values, proxy mode).
    #[default]
    Auto,
    Get,
    Post,
}

/// The oldest TLS version accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsVersion {
    #[default]
    Tls12,
    Tls13,
}

/// Builder for [`JolokiaClient`].
#[derive(Debug)]
pub struct JolokiaClientBuilder {
    url: String,
    credentials: Option<(String, Secret)>,
    bearer: Option<Secret>,
    target: Option<String>,
    target_credentials: Option<(String, Secret)>,
    connect_timeout: Duration,
    socket_timeout: Option<Duration>,
    timeout: Option<Duration>,
    pool_max_idle_per_host: usize,
    max_connections: Option<usize>,
    http_proxy: Option<String>,
    no_proxy: bool,
    headers: Vec<(String, String)>,
    ca_file: Option<PathBuf>,
    identity: Option<(PathBuf, PathBuf)>,
    min_tls: TlsVersion,
    method: HttpMethod,
    same_origin_redirects: bool,
}

impl JolokiaClientBuilder {
    /// HTTP Basic credentials for the endpoint (the gateway or an agent).
    pub fn user(mut self, user: &str, password: &str) -> Self {
        self.credentials = Some((user.into(), Secret::new(password)));
        self
    }
    /// A bearer token for the endpoint (`Authorization: Bearer`), e.g. an
    /// access token from the gateway's OpenID provider. Instead of
    /// [`user`](Self::user), not with it.
    pub fn bearer_token(mut self, token: &str) -> Self {
        self.bearer = Some(Secret::new(token));
        self
    }
    /// Proxy mode: every request names this target (a name or URL of the
    /// gateway's fleet).
    pub fn target(mut self, url: &str) -> Self {
        self.target = Some(url.into());
        self
    }
    /// Credentials for the proxy target (used where the gateway allows
    /// pass-through). Needs [`target`](Self::target), in either order.
    pub fn target_user(mut self, user: &str, password: &str) -> Self {
        self.target_credentials = Some((user.into(), Secret::new(password)));
        self
    }
    /// Longest wait for a TCP (and TLS) connection. Default 10 s.
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = d;
        self
    }
    /// Longest wait for data on an open connection.
    pub fn socket_timeout(mut self, d: Duration) -> Self {
        self.socket_timeout = Some(d);
        self
    }
    /// Deadline for a whole call.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = Some(d);
        self
    }
    /// Idle keep-alive connections kept for reuse. Default 8.
    pub fn pool_max_idle_per_host(mut self, n: usize) -> Self {
        self.pool_max_idle_per_host = n;
        self
    }
    /// At most this many calls (so HTTP/1.1 connections) open at once;
    /// further calls wait for a free one. Unbounded by default. Agents
    /// often serve with a single thread: a small number spares them.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = Some(n);
        self
    }
    /// An HTTP proxy for every call. Without it, `http_proxy`,
    /// `https_proxy` and `no_proxy` from the environment apply.
    pub fn http_proxy(mut self, url: &str) -> Self {
        self.http_proxy = Some(url.into());
        self
    }
    /// Ignore proxies, the environment's too.
    pub fn no_proxy(mut self) -> Self {
        self.no_proxy = true;
        self
    }
    /// A header sent with every call.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
    /// PEM CA bundle for HTTPS; the system roots otherwise.
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca_file = Some(path.into());
        self
    }
    /// A client certificate and key (PEM) to present.
    pub fn client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.identity = Some((cert.into(), key.into()));
        self
    }
    /// The oldest TLS version accepted. Default TLS 1.2.
    pub fn min_tls_version(mut self, v: TlsVersion) -> Self {
        self.min_tls = v;
        self
    }
    /// Follow a redirect only to the same origin (scheme, host and port)
    /// as the endpoint, so that a request body is never re-sent to another
    /// host; a redirect elsewhere fails the request with an error naming
    /// its status and where it pointed. Default: reqwest's (up to 10
    /// redirects anywhere).
    pub fn same_origin_redirects_only(mut self) -> Self {
        self.same_origin_redirects = true;
        self
    }
    /// GET, POST, or [`HttpMethod::Auto`] (the default) per request.
    pub fn method(mut self, m: HttpMethod) -> Self {
        self.method = m;
        self
    }

    /// Checks the settings and builds the client; no connection is made.
    pub fn build(self) -> Result<JolokiaClient, JolokiaError> {
        if self.credentials.is_some() && self.bearer.is_some() {
            return Err(JolokiaError::Setup(
                "give a user and password or a bearer token, not both".into(),
            ));
        }
        let target = match (self.target, self.target_credentials) {
            (None, Some(_)) => {
                return Err(JolokiaError::Setup(
                    "target_user needs a proxy target: call target() too".into(),
                ))
            }
            (None, None) => None,
            (Some(url), credentials) => {
                let (user, password) = credentials.unzip();
                Some(ProxyTarget {
                    url,
                    user,
                    password,
                })
            }
        };
        if self.max_connections == Some(0) {
            return Err(JolokiaError::Setup(
                "max_connections must be at least 1".into(),
            ));
        }
        let mut url = Url::parse(&self.url)
            .map_err(|e| JolokiaError::Setup(format!("url {:?}: {e}", self.url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(JolokiaError::Setup(format!(
                "url {:?}: only http:// and https:// are supported",
                self.url
            )));
        }
        if !url.path().ends_with('/') {
            url.set_path(&format!("{}/", url.path()));
        }
        let tls = super::agent::tls_config(
            self.ca_file.as_deref(),
            self.identity.as_ref(),
            self.min_tls == TlsVersion::Tls13,
        )
        .map_err(|e| JolokiaError::Setup(e.to_string()))?;
        let mut headers = HeaderMap::new();
        for (name, value) in &self.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| JolokiaError::Setup(format!("header {name:?}: {e}")))?;
            let value = HeaderValue::from_str(value)
                .map_err(|e| JolokiaError::Setup(format!("header {name}: {e}")))?;
            headers.insert(name, value);
        }
        let mut http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .connect_timeout(self.connect_timeout)
            .tcp_nodelay(true)
            .pool_max_idle_per_host(self.pool_max_idle_per_host)
            .default_headers(headers)
            .http1_only();
        if self.same_origin_redirects {
            http = http.redirect(same_origin_only());
        }
        if let Some(d) = self.socket_timeout {
            http = http.read_timeout(d);
        }
        if let Some(d) = self.timeout {
            http = http.timeout(d);
        }
        if self.no_proxy {
            http = http.no_proxy();
        } else if let Some(p) = &self.http_proxy {
            let proxy = reqwest::Proxy::all(p)
                .map_err(|e| JolokiaError::Setup(format!("http_proxy {p:?}: {e}")))?;
            http = http.proxy(proxy);
        }
        Ok(JolokiaClient {
            http: http
                .build()
                .map_err(|e| JolokiaError::Setup(e.to_string()))?,
            url,
            credentials: self.credentials,
            bearer: self.bearer,
            target,
            method: self.method,
            connections: self
                .max_connections
                .map(|n| Arc::new(tokio::sync::Semaphore::new(n))),
        })
    }
}

/// Redirects followed only within the first request's origin (at most
/// 10); any other is an error saying where it pointed (its origin only:
/// a `Location` may carry credentials).
fn same_origin_only() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let from = attempt.previous().first().map(|u| u.origin());
        let to = attempt.url().origin();
        let status = attempt.status().as_u16();
        if from.as_ref() != Some(&to) {
            let message = format!(
                "the server answered HTTP {status}, a redirect to another origin ({}); \
                 not followed, so nothing was sent there: use that URL yourself if you \
                 trust it",
                to.ascii_serialization()
            );
            attempt.error(message)
        } else if attempt.previous().len() > 10 {
            attempt.error(format!(
                "the server answered HTTP {status}: more than 10 redirects, not followed"
            ))
        } else {
            attempt.follow()
        }
    })
}

/// A client for one Jolokia endpoint: an agent, or the gateway (then
/// optionally in proxy mode for one target). Cheap to clone; clones share
/// connections.
///
/// ```no_run
/// # async fn demo() -> Result<(), jmxgate::client::JolokiaError> {
/// use std::time::Duration;
/// use jmxgate::client::{HttpMethod, JolokiaClient};
/// use jmxgate::protocol::Request;
///
/// let client = JolokiaClient::builder("https://gateway:8443/jolokia")
///     .user("ops", "secret")
///     .ca_file("/etc/jmxgate/ca.pem")
///     .timeout(Duration::from_secs(5))
///     .max_connections(4)
///     .method(HttpMethod::Auto)
///     .build()?;
///
/// // Typed answers for the common cases.
/// let version = client.version().await?;
/// println!("agent {} speaks protocol {}", version.agent, version.protocol);
/// let threads = client.read("java.lang:type=Threading", Some("ThreadCount")).await?;
/// let heap = client
///     .read_attributes("java.lang:type=Memory", &["HeapMemoryUsage", "Verbose"])
///     .await?;
/// let gcs = client.search("java.lang:type=GarbageCollector,*").await?;
/// let beans = client.list_mbeans(Some("java.lang")).await?;
/// for (name, info) in &beans["java.lang"] {
///     println!("{name}: {} attributes", info.attr.len());
/// }
///
/// // Several requests, one round trip, one result each, in order.
/// let results = client
///     .bulk_results(&[
///         Request::read("java.lang:type=Runtime", Some("Uptime"))?,
///         Request::read("no.such:type=MBean", Some("X"))?,
///     ])
///     .await?;
/// assert!(results[1].is_err());
///
/// // Absent MBeans as None instead of an error.
/// let maybe = client
///     .execute_validating(&Request::read("kafka.server:type=Missing", Some("Count"))?)
///     .await?;
/// # let _ = (threads, heap, gcs, maybe);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct JolokiaClient {
    bearer: Option<Secret>,
    http: reqwest::Client,
    /// Ends with `/`, so GET paths join onto it.
    url: Url,
    credentials: Option<(String, Secret)>,
    target: Option<ProxyTarget>,
    method: HttpMethod,
    /// `max_connections`: one permit per call in flight.
    connections: Option<Arc<tokio::sync::Semaphore>>,
}

/// The `version` answer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "VersionAnswer")]
pub struct VersionInfo {
    /// The agent's version (or the gateway's).
    pub agent: String,
    /// The Jolokia protocol version, e.g. `7.2` or `8.2`.
    pub protocol: String,
    /// Agent details (`details` on 2.x, `info` on 1.x; empty if neither).
    pub details: Value,
    /// The agent's configuration, where it reports it.
    pub config: Value,
}

/// `version` as agents write it: 2.x sends both `details` and `info`
/// (proxy and JMX information), 1.x only `info`.
#[derive(Deserialize)]
struct VersionAnswer {
    agent: String,
    protocol: String,
    #[serde(default)]
    details: Option<Value>,
    #[serde(default)]
    info: Option<Value>,
    #[serde(default)]
    config: Value,
}

impl From<VersionAnswer> for VersionInfo {
    fn from(v: VersionAnswer) -> VersionInfo {
        VersionInfo {
            agent: v.agent,
            protocol: v.protocol,
            details: v.details.or(v.info).unwrap_or_default(),
            config: v.config,
        }
    }
}

/// One MBean of a `list` answer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct MBeanInfo {
    #[serde(default)]
    pub desc: String,
    /// The MBean's class, where the agent reports it.
    #[serde(default)]
    pub class: Option<String>,
    #[serde(default)]
    pub attr: IndexMap<String, AttributeInfo>,
    /// Operations by name; an overloaded name has several signatures.
    #[serde(default)]
    pub op: IndexMap<String, Overloads>,
    #[serde(default)]
    pub notif: IndexMap<String, Value>,
    /// Set instead of the rest when the agent could not describe the MBean.
    #[serde(default)]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AttributeInfo {
    #[serde(rename = "type")]
    pub type_name: String,
    #[serde(default)]
    pub desc: String,
    /// Writable.
    #[serde(default)]
    pub rw: bool,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct OperationInfo {
    #[serde(default)]
    pub args: Vec<ArgumentInfo>,
    #[serde(default)]
    pub ret: String,
    #[serde(default)]
    pub desc: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ArgumentInfo {
    #[serde(default)]
    pub name: String,
    #[serde(rename = "type")]
    pub type_name: String,
    #[serde(default)]
    pub desc: String,
}

/// Jolokia lists an operation as one object, or as an array when the
/// name is overloaded.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Overloads {
    One(OperationInfo),
    Many(Vec<OperationInfo>),
}

impl Overloads {
    /// Every signature of the operation.
    pub fn signatures(&self) -> &[OperationInfo] {
        match self {
            Overloads::One(op) => std::slice::from_ref(op),
            Overloads::Many(ops) => ops,
        }
    }
}

/// MBeans by domain, then by key properties (`name=x,type=y`).
pub type MBeanTree = IndexMap<String, IndexMap<String, MBeanInfo>>;

fn typed<T: serde::de::DeserializeOwned>(what: &str, value: Value) -> Result<T, JolokiaError> {
    serde_json::from_value(value).map_err(|e| {
        JolokiaError::BadAnswer(format!("a {what} answer of an unexpected shape: {e}"))
    })
}

/// What stays literal in a GET path segment (Jolokia's own `!` escapes
/// come first).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'*')
    .remove(b'=')
    .remove(b',')
    .remove(b':')
    .remove(b'/');

impl JolokiaClient {
    /// A builder for the endpoint at `url` (an agent's or the gateway's
    /// Jolokia URL, `http://` or `https://`).
    pub fn builder(url: &str) -> JolokiaClientBuilder {
        JolokiaClientBuilder {
            url: url.into(),
            credentials: None,
            bearer: None,
            target: None,
            target_credentials: None,
            connect_timeout: Duration::from_secs(10),
            socket_timeout: None,
            timeout: None,
            pool_max_idle_per_host: 8,
            max_connections: None,
            http_proxy: None,
            no_proxy: false,
            headers: Vec::new(),
            ca_file: None,
            identity: None,
            min_tls: TlsVersion::Tls12,
            method: HttpMethod::Auto,
            same_origin_redirects: false,
        }
    }

    /// The endpoint's URL.
    /// The HTTP client (TLS settings, timeouts) and the `Authorization`
    /// value this client sends: for another protocol spoken to the same
    /// gateway (`jmxgate mcp`). The value is marked sensitive.
    pub fn http_and_authorization(&self) -> (reqwest::Client, Option<HeaderValue>) {
        use base64::Engine as _;
        let value = match (&self.credentials, &self.bearer) {
            (Some((user, password)), _) => Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD
                    .encode(format!("{user}:{}", password.expose()))
            )),
            (None, Some(token)) => Some(format!("Bearer {}", token.expose())),
            (None, None) => None,
        };
        let header = value
            .and_then(|v| HeaderValue::from_str(&v).ok())
            .map(|mut h| {
                h.set_sensitive(true);
                h
            });
        (self.http.clone(), header)
    }

    pub fn url(&self) -> &Url {
        &self.url
    }

    /// Runs one request; a protocol error is [`JolokiaError::Remote`].
    pub async fn execute(&self, request: &Request) -> Result<Reply, JolokiaError> {
        let get_path = match self.method {
            HttpMethod::Post => None,
            _ if self.target.is_some() => None,
            _ => request.to_get_path(),
        };
        let answers = match (self.method, get_path) {
            (HttpMethod::Get, None) => {
                return Err(JolokiaError::Request(format!(
                    "a {} request with these arguments can't be sent by GET{}",
                    request.command.type_name(),
                    if self.target.is_some() {
                        " (proxy mode needs POST)"
                    } else {
                        ""
                    }
                )))
            }
            (_, Some(path)) => self.get(&path, request).await?,
            (_, None) => self.post(&self.body(std::slice::from_ref(request))).await?,
        };
        let answer = answers
            .into_iter()
            .next()
            .ok_or_else(|| JolokiaError::BadAnswer("an empty answer".into()))?;
        into_result(answer).map_err(|e| JolokiaError::Remote(Box::new(e)))
    }

    /// [`execute`](Self::execute), with "not found" (status 404: no such
    /// MBean, attribute or operation) as `None`. A gateway's 404 (an
    /// unknown proxy target) stays an error: it is a mistake, not absence.
    pub async fn execute_validating(
        &self,
        request: &Request,
    ) -> Result<Option<Reply>, JolokiaError> {
        match self.execute(request).await {
            Err(JolokiaError::Remote(e)) if e.is_not_found() => Ok(None),
            other => other.map(Some),
        }
    }

    /// Runs requests as one bulk POST; one result per request, in order.
    pub async fn bulk_results(
        &self,
        requests: &[Request],
    ) -> Result<Vec<Result<Reply, RemoteError>>, JolokiaError> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        let answers = self.post(&self.body(requests)).await?;
        if answers.len() != requests.len() {
            // A server that can't read the bulk answers with one error.
            if let [one] = answers.as_slice() {
                if one.is_error() {
                    return Err(JolokiaError::Remote(Box::new(
                        into_result(one.clone()).unwrap_err(),
                    )));
                }
            }
            return Err(JolokiaError::BadAnswer(format!(
                "{} answers for {} requests",
                answers.len(),
                requests.len()
            )));
        }
        Ok(answers.into_iter().map(into_result).collect())
    }

    /// Runs requests as one bulk POST; when any item failed, the error is
    /// [`JolokiaError::BulkRemote`] with every item's result.
    pub async fn bulk(&self, requests: &[Request]) -> Result<Vec<Reply>, JolokiaError> {
        let results = self.bulk_results(requests).await?;
        if results.iter().any(Result::is_err) {
            return Err(JolokiaError::BulkRemote(results));
        }
        Ok(results.into_iter().map(|r| r.expect("checked")).collect())
    }

    /// A `read` sent to the proxy target as a selector (`kafka-*`,
    /// `env=prod`) with a reduction: one answer about the group
    /// (jmxgate's own extension, see [`crate::protocol::reduce`]). Targets
    /// that fail are listed in [`Reduced::errors`], never an error here.
    pub async fn reduce(
        &self,
        request: &Request,
        reduce: &Reduce,
    ) -> Result<Reduced, JolokiaError> {
        if self.target.is_none() {
            return Err(JolokiaError::Request(
                "a reduction is of a group of targets: set the proxy target to a selector \
                 (target(\"env=prod\") or --target 'kafka-*')"
                    .into(),
            ));
        }
        let mut items: Vec<Value> =
            serde_json::from_slice(&self.body(std::slice::from_ref(request)))
                .expect("the client's own JSON");
        if let Some(Value::Object(item)) = items.first_mut() {
            item.insert("reduce".into(), reduce.to_json());
        }
        let body = serde_json::to_vec(&items).expect("JSON values serialise");
        let answer = self
            .post(&body)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| JolokiaError::BadAnswer("an empty answer".into()))?;
        let reply = into_result(answer).map_err(|e| JolokiaError::Remote(Box::new(e)))?;
        serde_json::from_value(reply.value).map_err(|e| {
            JolokiaError::BadAnswer(format!(
                "not a reduced answer ({e}): is the server a jmxgate gateway?"
            ))
        })
    }

    /// Reads one attribute (all with `None`) and returns its value.
    pub async fn read(&self, mbean: &str, attribute: Option<&str>) -> Result<Value, JolokiaError> {
        Ok(self.execute(&Request::read(mbean, attribute)?).await?.value)
    }

    /// Writes an attribute and returns its previous value.
    pub async fn write(
        &self,
        mbean: &str,
        attribute: &str,
        value: Value,
    ) -> Result<Value, JolokiaError> {
        Ok(self
            .execute(&Request::write(mbean, attribute, value)?)
            .await?
            .value)
    }

    /// Runs an operation and returns its result.
    pub async fn exec(
        &self,
        mbean: &str,
        operation: &str,
        arguments: Vec<Value>,
    ) -> Result<Value, JolokiaError> {
        Ok(self
            .execute(&Request::exec(mbean, operation, arguments)?)
            .await?
            .value)
    }

    /// The names of the MBeans matching a pattern.
    pub async fn search(&self, pattern: &str) -> Result<Vec<String>, JolokiaError> {
        let value = self.execute(&Request::search(pattern)?).await?.value;
        serde_json::from_value(value).map_err(|e| JolokiaError::BadAnswer(e.to_string()))
    }

    /// Reads several attributes of one MBean in one call: values by
    /// attribute name.
    pub async fn read_attributes(
        &self,
        mbean: &str,
        attributes: &[&str],
    ) -> Result<IndexMap<String, Value>, JolokiaError> {
        let value = self
            .execute(&Request::read_many(mbean, attributes)?)
            .await?
            .value;
        typed("read", value)
    }

    /// The MBean tree as JSON, below an inner path if given (any depth).
    pub async fn list(&self, path: Option<&str>) -> Result<Value, JolokiaError> {
        Ok(self.execute(&Request::list(path)).await?.value)
    }

    /// The MBeans of every domain, or of one, typed.
    pub async fn list_mbeans(&self, domain: Option<&str>) -> Result<MBeanTree, JolokiaError> {
        // A domain is a name, not a path: a `/` in it is escaped.
        let path = domain.map(crate::protocol::path::escape_segment);
        let value = self.execute(&Request::list(path.as_deref())).await?.value;
        match domain {
            // Below a domain the answer is that domain's MBeans only.
            Some(d) => Ok(IndexMap::from([(d.to_string(), typed("list", value)?)])),
            None => typed("list", value),
        }
    }

    /// The agent's (or gateway's) version answer.
    pub async fn version(&self) -> Result<VersionInfo, JolokiaError> {
        typed("version", self.execute(&Request::version()).await?.value)
    }

    fn body(&self, requests: &[Request]) -> Vec<u8> {
        match &self.target {
            Some(target) => crate::protocol::serialize_proxy_bulk(requests, target),
            None => crate::protocol::serialize_bulk(requests),
        }
    }

    async fn get(&self, path: &str, request: &Request) -> Result<Vec<Response>, JolokiaError> {
        let encoded = utf8_percent_encode(path, SEGMENT).to_string();
        let mut url = self
            .url
            .join(&encoded)
            .map_err(|e| JolokiaError::Request(format!("GET path {path:?}: {e}")))?;
        {
            let mut query = url.query_pairs_mut();
            for (k, v) in request.params.to_agent_config() {
                let v = match v {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                query.append_pair(&k, &v);
            }
        }
        if url.query() == Some("") {
            url.set_query(None);
        }
        self.send(self.http.get(url)).await
    }

    async fn post(&self, body: &[u8]) -> Result<Vec<Response>, JolokiaError> {
        let req = self
            .http
            .post(self.url.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_vec());
        self.send(req).await
    }

    async fn send(&self, mut req: reqwest::RequestBuilder) -> Result<Vec<Response>, JolokiaError> {
        // Held until the answer is read: the connection is busy till then.
        let _connection = match &self.connections {
            Some(permits) => Some(permits.acquire().await.expect("never closed")),
            None => None,
        };
        req = req.header(ACCEPT, "application/json");
        if let Some((user, password)) = &self.credentials {
            req = req.basic_auth(user, Some(password.expose()));
        }
        if let Some(token) = &self.bearer {
            req = req.bearer_auth(token.expose());
        }
        let url = self.url.as_str().to_string();
        let resp = req.send().await.map_err(|e| classify(&url, e))?;
        let status = resp.status().as_u16();
        if status != 200 {
            // Jolokia errors come as HTTP 200; a gateway refusal (503, 413…)
            // has a Jolokia-shaped body worth reading.
            let body = resp.bytes().await.unwrap_or_default();
            if let Ok(mut answers) = crate::protocol::parse_json_answers(&body) {
                if answers.len() == 1 && answers[0].is_error() && answers[0].status().is_some() {
                    return Err(JolokiaError::Remote(Box::new(
                        into_result(answers.remove(0)).unwrap_err(),
                    )));
                }
            }
            return Err(JolokiaError::Http {
                url,
                status,
                hint: super::agent::http_hint(status),
            });
        }
        let body = resp.bytes().await.map_err(|e| classify(&url, e))?;
        crate::protocol::parse_bulk_answer(&body).map_err(JolokiaError::BadAnswer)
    }
}

fn classify(url: &str, e: reqwest::Error) -> JolokiaError {
    let (timeout, connect) = (e.is_timeout(), e.is_connect());
    let cause = super::agent::innermost_cause(&e.without_url());
    let url = url.to_string();
    if timeout {
        JolokiaError::Timeout { url, cause }
    } else if connect {
        JolokiaError::Connect { url, cause }
    } else {
        JolokiaError::Transport(cause)
    }
}

/// One answer as a reply or the error it carries (unboxed: bulk results
/// hold them side by side).
#[allow(clippy::result_large_err)]
fn into_result(answer: Response) -> Result<Reply, RemoteError> {
    let field = |k: &str| answer.field::<Value>(k);
    let status = answer.status().unwrap_or(0);
    if status == 200 || status == 304 {
        return Ok(Reply {
            status,
            value: field("value").unwrap_or(Value::Null),
            timestamp: answer.timestamp().unwrap_or(0),
        });
    }
    let text = |k: &str| field(k).and_then(|v| v.as_str().map(str::to_string));
    Err(RemoteError {
        status,
        error_type: text("error_type").unwrap_or_else(|| "unknown".into()),
        message: text("error").unwrap_or_else(|| "no error message".into()),
        request: field("request"),
        stacktrace: text("stacktrace"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn version_answers_of_both_generations_parse() {
        // 2.x sends details and info; 1.x only info.
        let v2: VersionInfo = serde_json::from_value(serde_json::json!({
            "agent": "2.6.0", "protocol": "8.2", "id": "x",
            "details": {"agent_id": "x"}, "info": {"proxy": {}, "jmx": {}}, "config": {"maxDepth": "15"}
        }))
        .unwrap();
        assert_eq!(v2.details["agent_id"], "x");
        assert_eq!(v2.config["maxDepth"], "15");
        let v1: VersionInfo = serde_json::from_value(serde_json::json!({
            "agent": "1.7.1", "protocol": "7.2", "info": {"product": "jetty"}
        }))
        .unwrap();
        assert_eq!(v1.details["product"], "jetty");
        assert_eq!(v1.config, Value::Null);
    }

    #[test]
    fn get_paths_escape_and_fall_back_to_post() {
        let r = Request::read("java.lang:type=Memory", Some("HeapMemoryUsage")).unwrap();
        assert_eq!(
            r.to_get_path().unwrap(),
            "read/java.lang:type=Memory/HeapMemoryUsage"
        );
        let w = Request::write("a:b=c", "Name", json!("x/y!")).unwrap();
        assert_eq!(w.to_get_path().unwrap(), "write/a:b=c/Name/x!/y!!");
        let e = Request::exec("a:b=c", "add", vec![json!(1), json!(2)]).unwrap();
        assert_eq!(e.to_get_path().unwrap(), "exec/a:b=c/add/1/2");
        assert_eq!(
            Request::list(Some("java.lang")).to_get_path().unwrap(),
            "list/java.lang"
        );
        assert_eq!(Request::version().to_get_path().unwrap(), "version");
        // Only POST carries these.
        assert!(Request::read_many("a:b=c", &["X", "Y"])
            .unwrap()
            .to_get_path()
            .is_none());
        assert!(Request::write("a:b=c", "M", json!({"k": 1}))
            .unwrap()
            .to_get_path()
            .is_none());
        assert!(Request::exec("a:b=c", "f", vec![json!([1])])
            .unwrap()
            .to_get_path()
            .is_none());
    }

    #[test]
    fn answers_become_replies_or_remote_errors() {
        let ok: Response =
            serde_json::from_str(r#"{"value":{"a":1},"timestamp":5,"status":200}"#).unwrap();
        assert_eq!(
            into_result(ok).unwrap(),
            Reply {
                status: 200,
                value: json!({"a":1}),
                timestamp: 5
            }
        );
        let err: Response = serde_json::from_str(
            r#"{"request":{"type":"read"},"error_type":"javax.management.InstanceNotFoundException","error":"no such MBean","status":404,"stacktrace":"at X"}"#,
        )
        .unwrap();
        let e = into_result(err).unwrap_err();
        assert_eq!(e.status, 404);
        assert_eq!(e.error_type, "javax.management.InstanceNotFoundException");
        assert_eq!(e.request, Some(json!({"type":"read"})));
        assert_eq!(e.stacktrace.as_deref(), Some("at X"));
    }

    #[test]
    fn bad_setups_are_named() {
        let e = JolokiaClient::builder("ftp://x").build().unwrap_err();
        assert!(e.to_string().contains("only http"), "{e}");
        let e = JolokiaClient::builder("http://x/jolokia")
            .header("bad header", "v")
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("bad header"), "{e}");
    }
}
