//! The gateway's client towards agents: sends typed requests to one agent
//! as a bulk POST and returns one answer per request, or an error kind
//! saying why the whole exchange failed. The gateway's dispatch step is
//! built on it.
//!
//! Identical read-only exchanges in flight at once (same body, same
//! credentials) share one call to the agent: a fleet of pollers asking
//! the same thing costs the agent one answer.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt, Shared, WeakShared};
use sha2::{Digest, Sha256};

use bytes::Bytes;
use http::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE};
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use url::Url;

use super::quick_ack::QuickAck;
use crate::protocol::{Request, Response};
use crate::secret::Secret;

/// Why an exchange with an agent failed as a whole.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    #[error("cannot set up the HTTP client: {0}")]
    Setup(String),
    #[error("cannot connect to the agent: {0}")]
    Connect(String),
    #[error("the agent did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the agent answered HTTP {status}{hint}{detail}")]
    Http {
        status: u16,
        hint: &'static str,
        /// The first line of a plain-text refusal (Jolokia 2.5+ explains
        /// a 400 this way), prefixed with ": ".
        detail: String,
    },
    /// A plain-text HTTP 400 that explains itself: Jolokia 2.x refuses a
    /// structurally bad request this way (unknown type, bad ObjectName, an
    /// overloaded operation named without its signature), where 1.x
    /// answered that item with an error inside HTTP 200.
    /// Shown as Jolokia writes an error: `<error_type> : <message>`.
    #[error("{error_type} : {message}")]
    Refused {
        /// The exception class the text names, else
        /// `java.lang.IllegalArgumentException`.
        error_type: String,
        message: String,
    },
    #[error("the agent refused the whole bulk request: {0}")]
    BulkRefused(String),
    #[error("the agent's answer exceeds {0} bytes (the target's max_response_bytes)")]
    TooLarge(u64),
    #[error("the target is unavailable: it {0}")]
    Unavailable(String),
    #[error("the gateway is busy: agent answers being received already fill its {0}-byte budget (server.max_buffered_bytes); retry later")]
    Busy(u64),
    #[error("the agent's answer is not a Jolokia response: {0}")]
    BadAnswer(String),
    #[error("the exchange with the agent failed: {0}")]
    Transport(String),
}

impl ClientError {
    /// The protocol status a failed item gets: 504 for timeouts, 502 for
    /// every other fault of the agent or the path to it.
    pub fn item_status(&self) -> u16 {
        match self {
            ClientError::Timeout(_) => 504,
            ClientError::Busy(_) | ClientError::Unavailable(_) => 503,
            ClientError::Http { status: 400, .. }
            | ClientError::Refused { .. }
            | ClientError::BulkRefused(_) => 400,
            _ => 502,
        }
    }

    /// The agent rejected the request as a whole because of its content
    /// (one bad item fails a whole bulk on Jolokia agents); sending the
    /// items one by one isolates the culprit.
    pub fn is_bulk_refusal(&self) -> bool {
        matches!(
            self,
            ClientError::Http { status: 400, .. }
                | ClientError::Refused { .. }
                | ClientError::BulkRefused(_)
        )
    }

    /// A Java-style error type, so clients that branch on `error_type` can.
    pub fn error_type(&self) -> &str {
        match self {
            ClientError::Refused { error_type, .. } => error_type,
            ClientError::Setup(_) => "jmxgate.TargetSetupError",
            ClientError::Connect(_) => "jmxgate.AgentUnreachable",
            ClientError::Timeout(_) => "jmxgate.AgentTimeout",
            ClientError::Http { .. } => "jmxgate.AgentHttpError",
            ClientError::BulkRefused(_) => "jmxgate.AgentRefusedBulk",
            ClientError::TooLarge(_) => "jmxgate.AgentAnswerTooLarge",
            ClientError::Busy(_) => "jmxgate.GatewayBusy",
            ClientError::Unavailable(_) => "jmxgate.TargetUnavailable",
            ClientError::BadAnswer(_) => "jmxgate.AgentBadAnswer",
            ClientError::Transport(_) => "jmxgate.AgentTransportError",
        }
    }
}

/// Builder for [`AgentClient`].
pub struct AgentClientBuilder {
    url: Url,
    connect_timeout: Duration,
    request_timeout: Duration,
    credentials: Option<(String, Secret)>,
    ca_file: Option<PathBuf>,
    identity: Option<(PathBuf, PathBuf)>,
    max_in_flight: usize,
    max_response_bytes: u64,
    budget: Option<Arc<BufferBudget>>,
    shared: Option<Arc<SharedConnections>>,
    exchanges: Option<Arc<tokio::sync::Semaphore>>,
    max_kept_connections: usize,
}

/// The HTTP clients (connection pools with their TLS settings) of a whole
/// fleet, one per distinct set of connection settings (CA file, client
/// certificate, connect timeout): a target's own client would cost about
/// 17 KB (rustls config, pool, connector), and a fleet of 100,000 targets
/// mostly shares one. hyper keeps connections apart per host and port, so
/// sharing a pool never mixes agents.
#[derive(Default)]
pub struct SharedConnections {
    clients: Mutex<HashMap<ConnectionSettings, Arc<PerWorker>>>,
}

type ConnectionSettings = (Option<PathBuf>, Option<(PathBuf, PathBuf)>, Duration);

impl SharedConnections {
    pub fn new() -> Arc<SharedConnections> {
        Arc::new(SharedConnections::default())
    }

    fn client(&self, settings: ConnectionSettings) -> Result<Arc<PerWorker>, ClientError> {
        let mut clients = self.clients.lock().expect("connections lock");
        if let Some(c) = clients.get(&settings) {
            return Ok(c.clone());
        }
        let client = Arc::new(http_client(
            settings.0.as_deref(),
            settings.1.as_ref(),
            settings.2,
        )?);
        clients.insert(settings, client.clone());
        Ok(client)
    }
}

/// Bytes of agent answers the whole gateway holds while receiving them,
/// shared by every target's client. An answer that finds the budget spent
/// fails at once with [`ClientError::Busy`] rather than waiting, so
/// answers can't deadlock each other holding half the budget.
#[derive(Debug)]
pub struct BufferBudget {
    bytes: u64,
    /// One permit per KiB.
    permits: tokio::sync::Semaphore,
}

impl BufferBudget {
    pub fn new(bytes: u64) -> Arc<BufferBudget> {
        let kib = bytes
            .div_ceil(1024)
            .min(tokio::sync::Semaphore::MAX_PERMITS as u64);
        Arc::new(BufferBudget {
            bytes,
            permits: tokio::sync::Semaphore::new(kib as usize),
        })
    }

    /// Bytes not taken right now.
    pub fn available(&self) -> u64 {
        self.permits.available_permits() as u64 * 1024
    }

    fn take(&self, bytes: usize) -> Result<tokio::sync::SemaphorePermit<'_>, ClientError> {
        let kib = (bytes as u64).div_ceil(1024).max(1);
        u32::try_from(kib)
            .ok()
            .and_then(|n| self.permits.try_acquire_many(n).ok())
            .ok_or(ClientError::Busy(self.bytes))
    }
}

impl AgentClientBuilder {
    /// Takes the HTTP client from the fleet's shared ones.
    pub fn shared_connections(mut self, shared: Arc<SharedConnections>) -> Self {
        self.shared = Some(shared);
        self
    }

    /// Shares a gateway-wide bound on exchanges in flight
    /// (`server.max_agent_exchanges`).
    pub fn exchange_limit(mut self, exchanges: Option<Arc<tokio::sync::Semaphore>>) -> Self {
        self.exchanges = exchanges;
        self
    }

    /// Past this many agent connections open in the process, an exchange
    /// that needs a new one asks the agent to close it after the answer
    /// (`server.max_kept_agent_connections`). Default: no bound.
    pub fn max_kept_connections(mut self, n: usize) -> Self {
        self.max_kept_connections = n;
        self
    }

    /// Shares a gateway-wide budget for answers being received.
    pub fn buffer_budget(mut self, budget: Option<Arc<BufferBudget>>) -> Self {
        self.budget = budget;
        self
    }

    /// At most this many exchanges with the agent at once; more wait
    /// (within their deadline). Agents often run one worker thread and a
    /// short accept backlog.
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n.max(1);
        self
    }

    /// Answers larger than this fail with [`ClientError::TooLarge`].
    pub fn max_response_bytes(mut self, n: u64) -> Self {
        self.max_response_bytes = n;
        self
    }

    /// A client certificate and key (PEM) to present to an agent that
    /// requires one.
    pub fn identity(mut self, cert_and_key: Option<(PathBuf, PathBuf)>) -> Self {
        self.identity = cert_and_key;
        self
    }

    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = d;
        self
    }
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.request_timeout = d;
        self
    }
    /// HTTP Basic credentials sent to the agent.
    pub fn credentials(mut self, c: Option<(String, Secret)>) -> Self {
        self.credentials = c;
        self
    }
    /// PEM CA bundle for an HTTPS agent; the system roots otherwise.
    pub fn ca_file(mut self, f: Option<PathBuf>) -> Self {
        self.ca_file = f;
        self
    }

    pub fn build(self) -> Result<AgentClient, ClientError> {
        let uri: http::Uri = self
            .url
            .as_str()
            .parse()
            .map_err(|e| ClientError::Setup(format!("{}: {e}", self.url)))?;
        let settings = (self.ca_file, self.identity, self.connect_timeout);
        let http = match &self.shared {
            Some(shared) => shared.client(settings)?,
            None => Arc::new(http_client(
                settings.0.as_deref(),
                settings.1.as_ref(),
                settings.2,
            )?),
        };
        Ok(AgentClient {
            inner: Arc::new(Inner {
                uri,
                http,
                request_timeout: self.request_timeout,
                credentials: self.credentials,
                slots: super::slots::Slots::new(self.max_in_flight),
                max_response_bytes: self.max_response_bytes,
                budget: self.budget,
                exchanges: self.exchanges,
                flights: Mutex::new(HashMap::new()),
                next_flight: AtomicU64::new(0),
                connect_timeout: self.connect_timeout,
                kept_alive_at: AtomicU64::new(0),
                kept_alive_slot: AtomicUsize::new(0),
                max_kept_connections: self.max_kept_connections,
            }),
        })
    }
}

/// Pooled HTTP/1 clients over TCP or rustls, one pool per serving worker
/// (see [`PerWorker`]).
fn http_client(
    ca_file: Option<&std::path::Path>,
    identity: Option<&(PathBuf, PathBuf)>,
    connect_timeout: Duration,
) -> Result<PerWorker, ClientError> {
    let tls = tls_config(ca_file, identity, false)?;
    let mut tcp = HttpConnector::new();
    // The URL's scheme decides; the TLS layer below handles https.
    tcp.enforce_http(false);
    // Requests leave at once; answers of agents seen to stall are
    // acknowledged at once (quick_ack.rs): both halves of the 40 ms
    // delayed-ACK stall.
    tcp.set_nodelay(true);
    tcp.set_connect_timeout(Some(connect_timeout));
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(super::quick_ack::QuickAckConnector::new(tcp));
    Ok(PerWorker {
        pools: (0..crate::worker::slots())
            .map(|_| OnceLock::new())
            .collect(),
        connector,
    })
}

/// One connection pool per serving worker ([`crate::worker`]), made on its
/// first use. A pooled connection is driven by a task on the thread that
/// opened it; were the pool shared, a request on one worker would hand
/// its exchange to the other worker's thread and wait to be woken back,
/// two cross-thread wake-ups per exchange. The connector (TLS settings,
/// quick-ACK memory) is shared by all pools.
struct PerWorker {
    pools: Box<[OnceLock<Pool>]>,
    connector: HttpsConnector<super::quick_ack::QuickAckConnector>,
}

impl PerWorker {
    /// Worker `slot`'s pool.
    fn pool_of(&self, slot: usize) -> &Pool {
        self.pools[slot].get_or_init(|| {
            // No redirects and no proxies: this client follows nothing, so
            // it only ever reaches the configured target.
            hyper_util::client::legacy::Client::builder(TokioExecutor::new())
                .pool_timer(TokioTimer::new())
                .pool_idle_timeout(Duration::from_secs(30))
                .build(self.connector.clone())
        })
    }
}

/// The system's CA certificates, read once per process and shared: every
/// target's client used to parse the whole bundle again, at each reload
/// and discovery change.
fn system_roots() -> Arc<rustls::RootCertStore> {
    static ROOTS: std::sync::OnceLock<Arc<rustls::RootCertStore>> = std::sync::OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let mut roots = rustls::RootCertStore::empty();
            for cert in rustls_native_certs::load_native_certs().certs {
                // A broken system certificate should not stop the gateway.
                let _ = roots.add(cert);
            }
            Arc::new(roots)
        })
        .clone()
}

/// TLS towards a Jolokia endpoint: verified against `ca_file` or the system
/// roots, optionally with a client certificate, TLS 1.3 only if asked.
pub(crate) fn tls_config(
    ca_file: Option<&std::path::Path>,
    identity: Option<&(PathBuf, PathBuf)>,
    tls13_only: bool,
) -> Result<rustls::ClientConfig, ClientError> {
    let roots: Arc<rustls::RootCertStore> = match ca_file {
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in crate::tls::load_certs(path, "ca_file").map_err(ClientError::Setup)? {
                roots
                    .add(cert)
                    .map_err(|e| ClientError::Setup(format!("ca_file {}: {e}", path.display())))?;
            }
            Arc::new(roots)
        }
        None => system_roots(),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&rustls::SupportedProtocolVersion] = if tls13_only {
        &[&rustls::version::TLS13]
    } else {
        rustls::DEFAULT_VERSIONS
    };
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .map_err(|e| ClientError::Setup(e.to_string()))?
        .with_root_certificates(roots);
    match identity {
        None => Ok(builder.with_no_client_auth()),
        Some((cert_file, key_file)) => {
            let certs = crate::tls::load_certs(cert_file, "client_cert_file")
                .map_err(ClientError::Setup)?;
            let key = crate::tls::load_private_key(key_file, "client_key_file")
                .map_err(ClientError::Setup)?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| ClientError::Setup(format!("client_cert_file/client_key_file: {e}")))
        }
    }
}

/// hyper's pooled client over TCP or rustls.
type Pool = hyper_util::client::legacy::Client<
    HttpsConnector<super::quick_ack::QuickAckConnector>,
    Full<Bytes>,
>;

/// One exchange several callers wait for.
type BoxedExchange = BoxFuture<'static, Result<Arc<Vec<Response>>, ClientError>>;
type Flight = Shared<BoxedExchange>;

/// Removes its flight from the map when the exchange ends or is dropped;
/// the id keeps it from removing a newer flight under the same key.
struct LeavesMap<'a> {
    client: &'a AgentClient,
    key: FlightKey,
    id: u64,
}

impl Drop for LeavesMap<'_> {
    fn drop(&mut self) {
        let mut flights = self.client.inner.flights.lock().expect("flights lock");
        if flights.get(&self.key).is_some_and(|(id, _)| *id == self.id) {
            flights.remove(&self.key);
            if flights.is_empty() {
                // An emptied map keeps its table: 100,000 targets used
                // once would each keep one. The next flight allocates anew.
                *flights = HashMap::new();
            }
        }
    }
}

/// The body and the credentials an exchange is sent with (hashed, so no
/// password sits in a map key).
type FlightKey = [u8; 32];

struct Inner {
    slots: super::slots::Slots,
    /// The gateway's bound on exchanges in flight, all agents together.
    exchanges: Option<Arc<tokio::sync::Semaphore>>,
    max_response_bytes: u64,
    budget: Option<Arc<BufferBudget>>,
    /// Weak, so a flight nobody waits for any more is dropped.
    flights: Mutex<HashMap<FlightKey, (u64, WeakShared<BoxedExchange>)>>,
    next_flight: AtomicU64,
    /// The agent's URL, as every exchange sends to it; the [`Url`] is
    /// made again when asked for (rarely: logs, the console, a probe)
    /// rather than held twice by every target of a large fleet.
    uri: http::Uri,
    /// Shared by the targets with the same connection settings.
    http: Arc<PerWorker>,
    request_timeout: Duration,
    credentials: Option<(String, Secret)>,
    /// For a probe's own connection (the pool's connector has its copy).
    connect_timeout: Duration,
    /// When a kept-alive exchange last ended (ms on [`clock_ms`], 0:
    /// never) and which worker's pool holds that connection: a probe
    /// within [`LIVE_CONNECTION`] goes through it instead of a new one.
    kept_alive_at: AtomicU64,
    kept_alive_slot: AtomicUsize,
    /// See [`AgentClientBuilder::max_kept_connections`].
    max_kept_connections: usize,
}

impl Inner {
    /// Whether an exchange through worker `slot`'s pool asks the agent to
    /// close its connection after the answer: only past the bound on kept
    /// connections, and then not where the pool likely keeps one for this
    /// agent already (that one is reused and stays). So a fan-out to
    /// 100,000 agents leaves at most the bound's worth of idle
    /// connections behind, not one per agent.
    fn closes_after(&self, slot: usize) -> bool {
        if super::quick_ack::open_connections() < self.max_kept_connections {
            return false;
        }
        self.live_connection() != Some(slot)
    }

    /// The worker whose pool likely holds a connection to the agent that
    /// a kept-alive exchange ended on within [`LIVE_CONNECTION`].
    fn live_connection(&self) -> Option<usize> {
        let at = self.kept_alive_at.load(Ordering::Relaxed);
        (at != 0 && clock_ms() - at < LIVE_CONNECTION.as_millis() as u64)
            .then(|| self.kept_alive_slot.load(Ordering::Relaxed))
    }

    /// What an exchange holds while under way: the target's own slot, then
    /// one of the gateway's exchanges (taken after the target's slot, so a
    /// busy target holds none of the gateway's).
    async fn permits(
        &self,
    ) -> Result<
        (
            super::slots::Slot<'_>,
            Option<tokio::sync::SemaphorePermit<'_>>,
        ),
        ClientError,
    > {
        let slot = self.slots.acquire().await;
        let exchange = match &self.exchanges {
            Some(bound) => Some(
                bound
                    .acquire()
                    .await
                    .map_err(|e| ClientError::Transport(e.to_string()))?,
            ),
            None => None,
        };
        Ok((slot, exchange))
    }
}

/// How long after its last exchange a pooled connection is taken to be
/// still open: the pool keeps an idle one 30 s (`pool_idle_timeout`),
/// agents' servers about as long (Jetty's and the JDK's default); the
/// margin keeps a probe from racing either.
const LIVE_CONNECTION: Duration = Duration::from_secs(20);

/// Milliseconds since the first call, from 1.
fn clock_ms() -> u64 {
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_millis() as u64
        + 1
}

/// A probe's body, serialised once.
fn version_body() -> Bytes {
    static BODY: OnceLock<Bytes> = OnceLock::new();
    BODY.get_or_init(|| Bytes::from(crate::protocol::serialize_bulk(&[Request::version()])))
        .clone()
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentClient")
            .field("url", &self.uri.to_string())
            .field("request_timeout", &self.request_timeout)
            .finish_non_exhaustive()
    }
}

/// A cheap-to-clone handle for one agent.
#[derive(Clone, Debug)]
pub struct AgentClient {
    inner: Arc<Inner>,
}

impl AgentClient {
    pub fn builder(url: Url) -> AgentClientBuilder {
        AgentClientBuilder {
            url,
            connect_timeout: crate::agent_settings::DEFAULT_CONNECT_TIMEOUT,
            request_timeout: crate::agent_settings::DEFAULT_REQUEST_TIMEOUT,
            credentials: None,
            ca_file: None,
            identity: None,
            max_in_flight: crate::agent_settings::DEFAULT_MAX_IN_FLIGHT,
            max_response_bytes: crate::agent_settings::DEFAULT_MAX_RESPONSE_BYTES,
            budget: None,
            shared: None,
            exchanges: None,
            max_kept_connections: usize::MAX,
        }
    }

    /// The agent's Jolokia URL.
    pub fn url(&self) -> Url {
        // `uri` was parsed from a `Url`'s text, so it reads back as one.
        Url::parse(&self.inner.uri.to_string()).expect("an agent URI is a URL")
    }

    /// Sends the requests as one bulk POST and returns the answers in the
    /// same order. The agent must answer with exactly one response per
    /// request; anything else is a [`ClientError::BadAnswer`].
    pub async fn bulk(&self, requests: &[Request]) -> Result<Vec<Response>, ClientError> {
        self.bulk_as(requests, None).await
    }

    /// [`bulk`](Self::bulk) with other Basic credentials than the
    /// configured ones (target credential pass-through).
    pub async fn bulk_as<R: std::borrow::Borrow<Request>>(
        &self,
        requests: &[R],
        credentials: Option<&(String, Secret)>,
    ) -> Result<Vec<Response>, ClientError> {
        let body = crate::protocol::serialize_bulk(requests);
        let credentials = credentials.or(self.inner.credentials.as_ref()).cloned();
        let answers = if requests.iter().all(|r| r.borrow().command.is_read_only()) {
            Arc::unwrap_or_clone(self.shared_post(body, credentials).await?)
        } else {
            self.post(body, credentials.as_ref(), false).await?
        };
        if answers.len() == 1 && requests.len() > 1 && answers[0].is_error() {
            // Jolokia answers a bulk it cannot parse with one error object.
            return Err(ClientError::BulkRefused(answers[0].error_text()));
        }
        if answers.len() != requests.len() {
            return Err(ClientError::BadAnswer(format!(
                "{} answers for {} requests",
                answers.len(),
                requests.len()
            )));
        }
        Ok(answers)
    }

    /// The `version` a health probe sends: through the pooled
    /// connection a recent exchange left open, else on a connection of its
    /// own, closed after the answer, so probing a fleet of 100,000 agents
    /// keeps no idle connection per agent. Plain HTTP takes a lean path
    /// for that ([`probe_once`](Self::probe_once)); HTTPS the pool's
    /// client, asking the agent to close.
    pub async fn probe_version(&self) -> Result<Vec<Response>, ClientError> {
        let inner = &self.inner;
        let credentials = inner.credentials.as_ref();
        let answers = if let Some(slot) = inner.live_connection() {
            self.post_via(Some(slot), version_body(), credentials, false)
                .await?
        } else if inner.uri.scheme() == Some(&http::uri::Scheme::HTTP) {
            self.probe_once(version_body()).await?
        } else {
            self.post_via(None, version_body(), credentials, true)
                .await?
        };
        if answers.len() != 1 {
            return Err(ClientError::BadAnswer(format!(
                "{} answers for 1 request",
                answers.len()
            )));
        }
        Ok(answers)
    }

    /// One probe exchange on a plain-HTTP connection of its own, driven
    /// right here (no pool, no connection task): connect, send, read the
    /// answer within the same bounds as any exchange, then drop the socket
    /// with a reset (SO_LINGER 0) instead of a FIN handshake, so neither
    /// side keeps it in TIME_WAIT (health checkers such as HAProxy's close
    /// the same way). The request is kept-alive, so the agent, done with
    /// it, doesn't close first.
    async fn probe_once(&self, body: Bytes) -> Result<Vec<Response>, ClientError> {
        let inner = &self.inner;
        // Read off the parsed URI, not a `Url` made again: probes are the
        // one exchange every target has every interval. The URI came from
        // a `Url`'s text, so its authority is `host[:port]` without
        // credentials and without a default port.
        let authority = inner
            .uri
            .authority()
            .ok_or_else(|| ClientError::Setup(format!("{}: no host", inner.uri)))?;
        let port = authority.port_u16().unwrap_or(80);
        // An IPv6 literal without its brackets, which connect parses as an
        // address (a name it resolves).
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let path = inner.uri.path_and_query().map_or("/", |p| p.as_str());
        let mut req = http::Request::post(path)
            .header(http::header::HOST, authority.as_str())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(ACCEPT, HeaderValue::from_static("application/json"))
            .body(Full::new(body))
            .map_err(|e| ClientError::Transport(e.to_string()))?;
        if let Some((user, password)) = &inner.credentials {
            req.headers_mut()
                .insert(AUTHORIZATION, basic_auth(user, password));
        }
        let exchange = async {
            let _permits = inner.permits().await?;
            let connect = tokio::net::TcpStream::connect((host, port));
            let stream = tokio::time::timeout(inner.connect_timeout, connect)
                .await
                .map_err(|_| ClientError::Connect("timed out (connect_timeout)".into()))?
                .map_err(|e| ClientError::Connect(e.to_string()))?;
            // Best effort: without it the close is an ordinary FIN.
            let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
            let (mut sender, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                    .await
                    .map_err(classify_body)?;
            let answer = async {
                let resp = sender.send_request(req).await.map_err(classify_body)?;
                read_answer(resp, inner, None).await
            };
            let mut answer = std::pin::pin!(answer);
            let mut conn = std::pin::pin!(conn);
            // The connection is driven until the answer is read; ended
            // first (closed, failed), the answer says what it got.
            tokio::select! {
                biased;
                answers = &mut answer => answers,
                _ = &mut conn => answer.await,
            }
        };
        tokio::time::timeout(inner.request_timeout, exchange)
            .await
            .map_err(|_| ClientError::Timeout(inner.request_timeout))?
    }

    /// Joins an identical exchange already in flight, or starts one that
    /// others may join. The callers drive it together, without a task of
    /// its own (a spawn costs a cross-thread wake-up per exchange): it runs
    /// while anyone still waits for it and leaves the map when it ends or
    /// when the last of them gives up.
    async fn shared_post(
        &self,
        body: Vec<u8>,
        credentials: Option<(String, Secret)>,
    ) -> Result<Arc<Vec<Response>>, ClientError> {
        let key = flight_key(&body, credentials.as_ref());
        let flight = {
            let mut flights = self.inner.flights.lock().expect("flights lock");
            match flights.get(&key).and_then(|(_, f)| f.upgrade()) {
                Some(flight) => flight,
                None => {
                    let client = self.clone();
                    let id = self.inner.next_flight.fetch_add(1, Ordering::Relaxed);
                    let flight: Flight = async move {
                        let _leaves = LeavesMap {
                            client: &client,
                            key,
                            id,
                        };
                        client
                            .post(body, credentials.as_ref(), false)
                            .await
                            .map(Arc::new)
                    }
                    .boxed()
                    .shared();
                    let weak = flight.downgrade().expect("not yet polled");
                    flights.insert(key, (id, weak));
                    flight
                }
            }
        };
        flight.await
    }

    /// Exchanges of identical read-only requests in flight right now.
    pub fn flights_in_progress(&self) -> usize {
        self.inner.flights.lock().expect("flights lock").len()
    }

    /// One exchange; `close` asks for the connection to be closed after
    /// it instead of kept for reuse.
    async fn post(
        &self,
        body: Vec<u8>,
        credentials: Option<&(String, Secret)>,
        close: bool,
    ) -> Result<Vec<Response>, ClientError> {
        self.post_via(None, Bytes::from(body), credentials, close)
            .await
    }

    /// [`post`](Self::post) through worker `pool`'s connection pool (the
    /// calling worker's with `None`). Only such an exchange, kept alive,
    /// counts as leaving a live connection for probes to use.
    async fn post_via(
        &self,
        pool: Option<usize>,
        body: Bytes,
        credentials: Option<&(String, Secret)>,
        close: bool,
    ) -> Result<Vec<Response>, ClientError> {
        let inner = &self.inner;
        let slot = pool.unwrap_or_else(crate::worker::current_slot);
        let close = close || (pool.is_none() && inner.closes_after(slot));
        let mut req = http::Request::post(inner.uri.clone())
            // Jetty drops a form-encoded body silently: always JSON.
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(ACCEPT, HeaderValue::from_static("application/json"))
            .body(Full::new(body))
            .map_err(|e| ClientError::Transport(e.to_string()))?;
        if let Some((user, password)) = credentials {
            req.headers_mut()
                .insert(AUTHORIZATION, basic_auth(user, password));
        }
        if close {
            req.headers_mut()
                .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
        }
        let exchange = async {
            // Waiting for a slot counts against the deadline too.
            let _permits = inner.permits().await?;
            let resp = inner
                .http
                .pool_of(slot)
                .request(req)
                .await
                .map_err(classify)?;
            let quick_ack = resp.extensions().get::<QuickAck>().cloned();
            let answers = read_answer(resp, inner, quick_ack).await;
            if !close && pool.is_none() && answers.is_ok() {
                inner.kept_alive_slot.store(slot, Ordering::Relaxed);
                inner.kept_alive_at.store(clock_ms(), Ordering::Relaxed);
            }
            answers
        };
        tokio::time::timeout(inner.request_timeout, exchange)
            .await
            .map_err(|_| ClientError::Timeout(inner.request_timeout))?
    }
}

/// An agent's answer, from its head: the status checked, the body read
/// within bounds ([`read_bounded`]) and parsed.
async fn read_answer(
    resp: http::Response<hyper::body::Incoming>,
    inner: &Inner,
    quick_ack: Option<QuickAck>,
) -> Result<Vec<Response>, ClientError> {
    let head_at = std::time::Instant::now();
    let status = resp.status().as_u16();
    let plain_text = content_type_is(resp.headers(), "text/plain");
    let length = resp
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let incoming = resp.into_body();
    if status != 200 {
        let detail = if status == 400 {
            // A refusal's text is bounded like any answer: a
            // hostile agent's endless 400 must not be held whole.
            let (text, held) = read_bounded(incoming, length, inner).await?;
            drop(held);
            if let Some(refused) = plain_text.then(|| refusal(&text)).flatten() {
                return Err(refused);
            }
            first_text_line(&text)
        } else {
            String::new()
        };
        return Err(ClientError::Http {
            status,
            hint: http_hint(status),
            detail,
        });
    }
    let (body, held) = read_bounded(incoming, length, inner).await?;
    if let Some(quick_ack) = quick_ack {
        quick_ack.note_answer(head_at.elapsed(), body.len());
    }
    let answers = crate::protocol::parse_bulk_answer(&body).map_err(ClientError::BadAnswer);
    drop(held);
    answers
}

/// An agent's answer body, whatever its status: refused beyond the
/// target's `max_response_bytes` (by `Content-Length` before reading, or
/// as it arrives) and counted in the gateway-wide buffer budget. The
/// budget is held (the returned permits) until the caller has parsed it.
async fn read_bounded<'a>(
    mut incoming: hyper::body::Incoming,
    length: Option<u64>,
    inner: &'a Inner,
) -> Result<(Vec<u8>, Vec<tokio::sync::SemaphorePermit<'a>>), ClientError> {
    if length.is_some_and(|n| n > inner.max_response_bytes) {
        return Err(ClientError::TooLarge(inner.max_response_bytes));
    }
    let mut body = Vec::with_capacity(length.unwrap_or(0).min(1 << 20) as usize);
    let mut held = Vec::new();
    while let Some(frame) = incoming.frame().await {
        let Ok(chunk) = frame.map_err(classify_body)?.into_data() else {
            continue; // trailers
        };
        if (body.len() + chunk.len()) as u64 > inner.max_response_bytes {
            return Err(ClientError::TooLarge(inner.max_response_bytes));
        }
        if let Some(budget) = &inner.budget {
            held.push(budget.take(chunk.len())?);
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, held))
}

fn flight_key(body: &[u8], credentials: Option<&(String, Secret)>) -> FlightKey {
    exchange_key(&[], credentials, body)
}

/// One digest of what an exchange is: `scope` (e.g. target name and URL),
/// the credentials it is sent with and its body. Hashed, so no password
/// sits in a map key; shared by single-flight and the list cache.
pub(crate) fn exchange_key(
    scope: &[&str],
    credentials: Option<&(String, Secret)>,
    body: &[u8],
) -> [u8; 32] {
    let mut h = Sha256::new();
    for part in scope {
        h.update(part.as_bytes());
        h.update([0]);
    }
    if let Some((user, password)) = credentials {
        h.update(user.as_bytes());
        h.update([0]);
        h.update(password.expose().as_bytes());
    }
    h.update([1]);
    h.update(body);
    h.finalize().into()
}

/// The explanation in a plain-text error page such as Jolokia 2.5+'s
/// `400 (Bad Request)\n\nInvalid JSON request\n`, cut to one line.
fn content_type_is(headers: &http::HeaderMap, mime: &str) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with(mime))
}

/// A Jolokia 2.x plain-text refusal (`400 (Bad Request)`, a blank line,
/// the reason) as the error the agent meant; `None` when the text gives
/// no reason.
fn refusal(body: &[u8]) -> Option<ClientError> {
    const LIMIT: usize = 2000;
    let text = String::from_utf8_lossy(&body[..body.len().min(LIMIT)]);
    let reason: Vec<&str> = text
        .lines()
        .map(str::trim)
        .skip_while(|l| l.is_empty() || l.starts_with("400"))
        .filter(|l| !l.is_empty())
        .collect();
    let reason = reason.join(" ");
    if reason.is_empty() {
        return None;
    }
    // "javax.management.MalformedObjectNameException: Key properties ...":
    // the text names its exception class.
    let (error_type, message) = match reason.split_once(": ") {
        Some((class, rest)) if is_java_class_name(class) => (class.to_string(), rest.to_string()),
        _ => ("java.lang.IllegalArgumentException".to_string(), reason),
    };
    Some(ClientError::Refused {
        error_type,
        message,
    })
}

/// `java.lang.IllegalStateException`, not a sentence that has a colon.
fn is_java_class_name(s: &str) -> bool {
    s.contains('.')
        && s.split('.').all(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
        })
}

fn first_text_line(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(512)]);
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('<') && !l.starts_with("400"))
        .map(|l| format!(": {}", l.chars().take(200).collect::<String>()))
        .next()
        .unwrap_or_default()
}

pub(super) fn http_hint(status: u16) -> &'static str {
    match status {
        401 => " (authentication failed: check the target's user and password)",
        403 => " (forbidden by the agent)",
        404 => " (no Jolokia agent at that URL: check the target's url)",
        405 => " (method not allowed: is this a Jolokia URL?)",
        400 => " (the agent refused the request)",
        _ => "",
    }
}

/// The innermost cause of an error is what a user needs ("Connection
/// refused"), not the layers above it.
pub(crate) fn innermost_cause(e: &dyn std::error::Error) -> String {
    let mut cause = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        cause = s.to_string();
        source = s.source();
    }
    cause
}

fn classify(e: hyper_util::client::legacy::Error) -> ClientError {
    if !e.is_connect() {
        return ClientError::Transport(innermost_cause(&e));
    }
    // The connector's own deadline (connect_timeout) says only "deadline
    // has elapsed".
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        if s.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return ClientError::Connect("timed out (connect_timeout)".into());
        }
        source = s.source();
    }
    ClientError::Connect(innermost_cause(&e))
}

fn classify_body(e: hyper::Error) -> ClientError {
    ClientError::Transport(innermost_cause(&e))
}

/// `Authorization: Basic …`, marked sensitive so no log or debug output
/// of the headers shows it.
fn basic_auth(user: &str, password: &Secret) -> HeaderValue {
    use base64::Engine;
    let token =
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{}", password.expose()));
    let mut value = HeaderValue::from_str(&format!("Basic {token}"))
        .expect("base64 is made of valid header characters");
    value.set_sensitive(true);
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_text_refusal_becomes_the_error_the_agent_meant() {
        // As Jolokia 2.6.0 words them.
        let e = refusal(b"400 (Bad Request)\n\nOperation add on MBean x:type=O is overloaded. Use a signature.\n")
            .unwrap();
        assert_eq!(e.error_type(), "java.lang.IllegalArgumentException");
        assert_eq!(e.item_status(), 400);
        assert!(e.is_bulk_refusal());
        assert_eq!(
            e.to_string(),
            "java.lang.IllegalArgumentException : Operation add on MBean x:type=O is overloaded. Use a signature."
        );
        let e = refusal(b"400 (Bad Request)\n\njavax.management.MalformedObjectNameException: Key properties cannot be empty").unwrap();
        assert_eq!(
            e.error_type(),
            "javax.management.MalformedObjectNameException"
        );
        assert!(e.to_string().ends_with(" : Key properties cannot be empty"));
        // A colon in a sentence names no class.
        let e = refusal(b"Can't process request: For input string: \"abc\"").unwrap();
        assert_eq!(e.error_type(), "java.lang.IllegalArgumentException");
        assert!(refusal(b"400 (Bad Request)\n\n").is_none());
        assert!(refusal(b"").is_none());
    }
}
