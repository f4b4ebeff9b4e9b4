//! Step 2, authenticate: who is calling. Produces the [`Principal`] every
//! later step (authorize, audit) works with, or a 401 that says nothing
//! about which part was wrong.
//!
//! Methods: HTTP Basic against a users file ([`basic`]), bearer JWT
//! ([`bearer`]), a bearer token the Kubernetes API server reviews
//! ([`kubernetes`]), the client certificate of an mTLS connection, and
//! anonymous. Each listener accepts the methods its config lists.

pub mod basic;
pub mod bearer;
pub mod jwks_remote;
pub mod kubernetes;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::body::Body;
use http::header::{HeaderValue, AUTHORIZATION, CACHE_CONTROL, RETRY_AFTER, WWW_AUTHENTICATE};
use http::{HeaderMap, Response, StatusCode};
use rustls_pki_types::CertificateDer;
use serde::Deserialize;

use crate::tls::CertPrincipal;

pub use crate::principal::{AuthMethod, Principal};

/// `[auth.mtls]`: who a client certificate is.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MtlsConfig {
    /// Where the principal name comes from: `cn`, `san-dns`, `san-email`,
    /// `san-uri`.
    #[serde(default)]
    pub principal_from: CertPrincipal,
    /// Roles per certificate principal.
    #[serde(default)]
    pub roles: BTreeMap<String, Vec<String>>,
    /// Roles of certificate principals not listed in `roles`.
    #[serde(default)]
    pub default_roles: Vec<String>,
}

/// `[auth]`: the credential stores. Which of them a listener accepts is
/// the listener's `auth` list.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    #[serde(default)]
    pub basic: Option<basic::BasicConfig>,
    #[serde(default)]
    pub bearer: Option<bearer::BearerConfig>,
    #[serde(default)]
    pub mtls: Option<MtlsConfig>,
    #[serde(default)]
    pub kubernetes: Option<kubernetes::KubernetesAuthConfig>,
}

/// What a connection tells about its client.
#[derive(Debug, Clone, Default)]
pub struct Connection {
    pub remote: Option<std::net::SocketAddr>,
    /// Verified client certificate chain (leaf first) of a TLS connection.
    pub peer_certificates: Option<Arc<Vec<CertificateDer<'static>>>>,
    /// The listener's scheme.
    pub tls: bool,
    /// The address the listener is bound to (for the `Host` check:
    /// `server.allowed_hosts`); unknown for an embedded router.
    pub bound: Option<std::net::SocketAddr>,
}

/// Why a caller was not admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// No usable credentials; `bearer_error` when a bearer token was
    /// presented and refused.
    Unauthorized { bearer_error: bool },
    /// Too many failures recently.
    Throttled(Duration),
    /// The credentials need a password check (or a bearer token's unknown
    /// key a fetch from the provider) and there is no room for it now: the
    /// queue of checks (`auth.basic.max_queued_checks`) or the share of
    /// unauthenticated work (`server.max_anonymous_requests`) is full.
    /// Answered at once (HTTP 429, `Retry-After`), never queued.
    Busy,
    /// A bearer token for the Kubernetes API server to review, and no
    /// answer from it: HTTP 503, never a 401 (which would log a console
    /// out) and never a grant.
    Unavailable,
}

/// The credential stores, built once from the config.
#[derive(Debug, Default)]
pub struct Authenticator {
    basic: Option<Arc<basic::Basic>>,
    bearer: Option<Arc<bearer::Bearer>>,
    /// The OpenID provider's keys, fetched into `bearer`'s slot.
    provider_keys: Option<Arc<jwks_remote::RemoteJwks>>,
    mtls: Option<MtlsConfig>,
    kubernetes: Option<Arc<kubernetes::Kubernetes>>,
    metrics: Option<Arc<crate::metrics::Metrics>>,
}

impl Authenticator {
    /// Counts credential cache hits and misses there.
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> Authenticator {
        self.metrics = Some(metrics);
        self
    }

    /// Builds the stores; an OpenID provider's keys start being fetched in
    /// the background (bearer tokens are refused until they arrive).
    pub fn from_config(config: &AuthConfig) -> Result<Authenticator, String> {
        Authenticator::from_config_after(config, None)
    }

    /// [`Authenticator::from_config`] for a reload: what `previous` has
    /// counted against callers (Basic failures) carries over.
    pub fn from_config_after(
        config: &AuthConfig,
        previous: Option<&Authenticator>,
    ) -> Result<Authenticator, String> {
        let bearer = config
            .bearer
            .as_ref()
            .map(|c| bearer::Bearer::from_config(c).map(Arc::new))
            .transpose()
            .map_err(|e| format!("auth.bearer: {e}"))?;
        let provider_keys = match (
            &config.bearer,
            bearer.as_ref().and_then(|b| b.remote_keys()),
        ) {
            (Some(c), Some(slot)) => {
                let remote = jwks_remote::RemoteJwks::new(c, slot.clone())
                    .map(Arc::new)
                    .map_err(|e| format!("auth.bearer: {e}"))?;
                remote.spawn();
                Some(remote)
            }
            _ => None,
        };
        Ok(Authenticator {
            basic: config
                .basic
                .as_ref()
                .map(|c| {
                    let before = previous.and_then(|p| p.basic.as_deref());
                    basic::Basic::from_config_after(c, before).map(Arc::new)
                })
                .transpose()
                .map_err(|e| format!("auth.basic: {e}"))?,
            bearer,
            provider_keys,
            mtls: config.mtls.clone(),
            kubernetes: config
                .kubernetes
                .as_ref()
                .map(|c| kubernetes::Kubernetes::from_config(c).map(Arc::new))
                .transpose()
                .map_err(|e| format!("auth.kubernetes: {e}"))?,
            metrics: None,
        })
    }

    /// Whether bearer tokens can be verified: false only while an OpenID
    /// provider's keys have never been fetched (for `/readyz`).
    pub fn bearer_keys_ready(&self) -> bool {
        self.provider_keys.as_ref().is_none_or(|p| p.has_keys())
    }

    /// Checks that every method a listener lists has its store.
    pub fn check_methods(&self, listener: &str, methods: &[AuthMethod]) -> Result<(), String> {
        for m in methods {
            let ok = match m {
                AuthMethod::Anonymous => true,
                AuthMethod::Basic => self.basic.is_some(),
                AuthMethod::Bearer => self.bearer.is_some(),
                AuthMethod::Mtls => self.mtls.is_some(),
                AuthMethod::Kubernetes => self.kubernetes.is_some(),
                // The gateway's own identity: no caller presents it.
                AuthMethod::Configured => false,
            };
            if !ok {
                return Err(format!(
                    "{listener} lists \"{}\" but [auth.{}] is not configured",
                    m.as_str(),
                    m.as_str()
                ));
            }
        }
        Ok(())
    }

    /// Identifies the caller with the methods the listener accepts. An
    /// `Authorization` header, when present, must succeed: a caller with
    /// bad credentials is refused, not demoted to anonymous.
    ///
    /// `client` is the caller's address as the trusted-proxy chain tells
    /// it (`AccessControl::client_address`): login throttling counts by it.
    /// `namespaces` are the fleet's (its targets' `namespace` labels), for
    /// roles from Kubernetes RBAC.
    /// `unauthenticated` is the share of request slots callers not yet
    /// known may hold (`server.max_anonymous_requests`): a password check,
    /// work done before the caller is known, holds one of them.
    pub async fn authenticate(
        &self,
        methods: &[AuthMethod],
        headers: &HeaderMap,
        conn: &Connection,
        client: Option<IpAddr>,
        unauthenticated: &tokio::sync::Semaphore,
        namespaces: &(dyn Fn() -> Vec<String> + Sync),
    ) -> Result<Principal, Failure> {
        let presented = match credentials(headers) {
            Presented::Readable(value) => Some(value),
            Presented::Nothing => None,
            // Credentials the gateway can't read are refused, never taken
            // for none (which would make the caller anonymous).
            Presented::Unreadable => {
                tracing::info!(client = ?client, "credentials refused: the header is not readable text");
                return Err(Failure::Unauthorized {
                    bearer_error: false,
                });
            }
        };
        if let Some(value) = presented {
            let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
            if scheme.eq_ignore_ascii_case("basic") && methods.contains(&AuthMethod::Basic) {
                return self.basic(rest.to_string(), client, unauthenticated).await;
            }
            if scheme.eq_ignore_ascii_case("bearer") {
                let jwt = methods.contains(&AuthMethod::Bearer);
                let cluster = methods.contains(&AuthMethod::Kubernetes);
                // Both: a token the JWT settings refuse may still be one
                // the cluster knows.
                if jwt {
                    let verified = self.bearer(rest.trim(), unauthenticated).await;
                    if verified.is_ok() || !cluster {
                        return verified;
                    }
                }
                if cluster {
                    return self.kubernetes(rest.trim(), namespaces).await;
                }
            }
            // A scheme this listener does not take: as if absent, unless
            // nothing else could identify the caller.
        }
        if methods.contains(&AuthMethod::Mtls) {
            if let (Some(certs), Some(mtls)) = (&conn.peer_certificates, &self.mtls) {
                if let Some(leaf) = certs.first() {
                    return principal_from_certificate(mtls, leaf).ok_or(Failure::Unauthorized {
                        bearer_error: false,
                    });
                }
            }
        }
        if methods.contains(&AuthMethod::Anonymous) && presented.is_none() {
            return Ok(Principal::anonymous());
        }
        Err(Failure::Unauthorized {
            bearer_error: false,
        })
    }

    async fn basic(
        &self,
        credentials: String,
        client: Option<IpAddr>,
        unauthenticated: &tokio::sync::Semaphore,
    ) -> Result<Principal, Failure> {
        let basic = self.basic.clone().expect("checked at start-up");
        // Malformed, throttled and already verified credentials are
        // decided here, before any queue: a caller whose credentials are
        // cached never waits behind others' password checks.
        let result = match basic.verify_cheap(&credentials, client) {
            Some(decided) => decided,
            // Password hashing takes milliseconds of CPU: off the I/O
            // threads, and no more at once than there are CPUs, so a spray
            // of made-up names costs the gateway bounded CPU. Waiting for
            // it is work for a caller not yet known: it holds a slot of
            // the unauthenticated share and a place in a bounded queue,
            // and without either the caller is answered at once.
            None => {
                let Ok(_unauthenticated) = unauthenticated.try_acquire() else {
                    tracing::info!(client = ?client, "password check refused: server.max_anonymous_requests held");
                    return Err(Failure::Busy);
                };
                let Some(_queued) = basic.enter_queue() else {
                    tracing::info!(client = ?client, "password check refused: auth.basic.max_queued_checks reached");
                    return Err(Failure::Busy);
                };
                let _hashing = hashing_slots().acquire().await;
                tokio::task::spawn_blocking(move || basic.verify(&credentials, client))
                    .await
                    .unwrap_or(Err(basic::BasicFailure::Rejected))
            }
        };
        if let (Ok(id), Some(m)) = (&result, &self.metrics) {
            m.cache_lookup("basic_auth", id.from_cache);
        }
        match result {
            Ok(id) => Ok(Principal {
                name: id.name,
                method: AuthMethod::Basic,
                issuer: None,
                roles: id.roles,
                certificate_sha256: None,
                namespaced_roles: Vec::new(),
            }),
            Err(basic::BasicFailure::Throttled(d)) => {
                tracing::warn!(client = ?client, "basic authentication throttled after repeated failures");
                Err(Failure::Throttled(d))
            }
            Err(f) => {
                tracing::info!(client = ?client, failure = ?f, "basic authentication failed");
                Err(Failure::Unauthorized {
                    bearer_error: false,
                })
            }
        }
    }

    async fn bearer(
        &self,
        token: &str,
        unauthenticated: &tokio::sync::Semaphore,
    ) -> Result<Principal, Failure> {
        let bearer = self.bearer.as_ref().expect("checked at start-up");
        let mut verified = bearer.verify(token, SystemTime::now());
        // An unknown kid may be a key the provider just rotated in. Waiting
        // for the provider is work for a caller not yet known: it holds a
        // slot of the unauthenticated share, and without one the caller is
        // answered at once, as for a password check.
        if let (Err(e), Some(provider)) = (&verified, &self.provider_keys) {
            if e.kind() == bearer::BearerErrorKind::UnknownKey {
                let Ok(_unauthenticated) = unauthenticated.try_acquire() else {
                    tracing::info!(
                        "bearer key refresh refused: server.max_anonymous_requests held"
                    );
                    return Err(Failure::Busy);
                };
                if provider.refresh_after_miss().await {
                    verified = bearer.verify(token, SystemTime::now());
                }
            }
        }
        match verified {
            Ok(id) => Ok(Principal {
                name: id.principal,
                method: AuthMethod::Bearer,
                issuer: id.issuer,
                roles: id.roles,
                certificate_sha256: None,
                namespaced_roles: Vec::new(),
            }),
            Err(e) => {
                tracing::info!(reason = e.description(), "bearer token refused");
                Err(Failure::Unauthorized { bearer_error: true })
            }
        }
    }

    async fn kubernetes(
        &self,
        token: &str,
        namespaces: &(dyn Fn() -> Vec<String> + Sync),
    ) -> Result<Principal, Failure> {
        let k = self.kubernetes.as_ref().expect("checked at start-up");
        let (review, cached) = k.review(token).await;
        if let Some(m) = &self.metrics {
            m.cache_lookup("kubernetes_auth", cached);
        }
        match review {
            kubernetes::Review::Accepted { name, roles, user } => {
                let namespaced_roles = if k.has_access_rules() {
                    k.grants(token, &user, &namespaces())
                        .await
                        .ok_or(Failure::Unavailable)?
                } else {
                    Vec::new()
                };
                Ok(Principal {
                    name,
                    method: AuthMethod::Kubernetes,
                    issuer: None,
                    roles,
                    certificate_sha256: None,
                    namespaced_roles,
                })
            }
            kubernetes::Review::Refused => Err(Failure::Unauthorized { bearer_error: true }),
            kubernetes::Review::Unavailable => Err(Failure::Unavailable),
        }
    }

    /// The listener's methods as a protocol 8 `config` answer lists them
    /// (`security.authentication`): what a client must present, nothing
    /// about who may pass. Anonymous access lists nothing.
    pub fn advertised(&self, methods: &[AuthMethod]) -> Vec<serde_json::Value> {
        methods
            .iter()
            .filter_map(|m| match m {
                AuthMethod::Anonymous | AuthMethod::Configured => None,
                AuthMethod::Basic => Some(serde_json::json!({
                    "method": "basic",
                    "realm": self.basic.as_ref().map_or("jmxgate", |b| b.realm()),
                })),
                AuthMethod::Bearer => {
                    Some(serde_json::json!({"method": "bearer", "realm": "jmxgate"}))
                }
                AuthMethod::Mtls => Some(serde_json::json!({"method": "mtls"})),
                AuthMethod::Kubernetes if methods.contains(&AuthMethod::Bearer) => None,
                AuthMethod::Kubernetes => {
                    Some(serde_json::json!({"method": "bearer", "realm": "jmxgate"}))
                }
            })
            .collect()
    }

    /// The 401 (or 429) answer: challenges for the listener's methods, no
    /// body, nothing about which part was wrong, never stored
    /// (`Cache-Control: no-store`). A script with a login of
    /// its own (Hawtio; any AJAX call saying `X-Requested-With`) gets its
    /// Basic challenge as Hawtio's own servers write it, `Hawtio
    /// original-scheme="Basic"`: a plain `Basic` would make the browser
    /// pop up its own login dialog over the application's.
    pub fn refusal(
        &self,
        methods: &[AuthMethod],
        failure: &Failure,
        request_headers: &HeaderMap,
    ) -> Response<Body> {
        let mut resp = Response::new(Body::empty());
        resp.headers_mut()
            .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        match failure {
            Failure::Throttled(d) => {
                *resp.status_mut() = StatusCode::TOO_MANY_REQUESTS;
                if let Ok(v) = HeaderValue::from_str(&d.as_secs().max(1).to_string()) {
                    resp.headers_mut().insert(RETRY_AFTER, v);
                }
            }
            Failure::Busy => {
                *resp.status_mut() = StatusCode::TOO_MANY_REQUESTS;
                resp.headers_mut()
                    .insert(RETRY_AFTER, HeaderValue::from_static("1"));
            }
            Failure::Unavailable => {
                *resp.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                resp.headers_mut()
                    .insert(RETRY_AFTER, HeaderValue::from_static("5"));
            }
            Failure::Unauthorized { bearer_error } => {
                *resp.status_mut() = StatusCode::UNAUTHORIZED;
                let headers = resp.headers_mut();
                if let (true, Some(b)) = (methods.contains(&AuthMethod::Basic), &self.basic) {
                    let scheme = if from_browser_script(request_headers) {
                        "Hawtio original-scheme=\"Basic\","
                    } else {
                        "Basic"
                    };
                    let v = format!("{scheme} realm=\"{}\", charset=\"UTF-8\"", b.realm());
                    if let Ok(v) = HeaderValue::from_str(&v) {
                        headers.append(WWW_AUTHENTICATE, v);
                    }
                }
                let jwt = methods.contains(&AuthMethod::Bearer) && self.bearer.is_some();
                let cluster =
                    methods.contains(&AuthMethod::Kubernetes) && self.kubernetes.is_some();
                if jwt || cluster {
                    let v = if *bearer_error {
                        "Bearer realm=\"jmxgate\", error=\"invalid_token\""
                    } else {
                        "Bearer realm=\"jmxgate\""
                    };
                    headers.append(WWW_AUTHENTICATE, HeaderValue::from_static(v));
                }
            }
        }
        resp
    }
}

/// Names an mTLS principal after its certificate and maps its roles.
pub fn principal_from_certificate(
    mtls: &MtlsConfig,
    leaf: &CertificateDer<'_>,
) -> Option<Principal> {
    let name = crate::tls::principal_from_cert(leaf, mtls.principal_from)?;
    let roles = mtls
        .roles
        .get(&name)
        .cloned()
        .unwrap_or_else(|| mtls.default_roles.clone());
    Some(Principal {
        name,
        method: AuthMethod::Mtls,
        issuer: None,
        roles,
        certificate_sha256: Some(crate::tls::fingerprint_sha256(leaf)),
        namespaced_roles: Vec::new(),
    })
}

/// Password hashes computed at once, process-wide: one per CPU.
fn hashing_slots() -> &'static tokio::sync::Semaphore {
    static SLOTS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    SLOTS.get_or_init(|| {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        tokio::sync::Semaphore::new(cpus)
    })
}

/// Hawtio's header for credentials towards a Jolokia endpoint, which
/// leaves `Authorization` to the server that serves the console.
pub const X_JOLOKIA_AUTHORIZATION: &str = "x-jolokia-authorization";

/// What a request presents as credentials.
enum Presented<'h> {
    Nothing,
    Readable(&'h str),
    /// A header that is not visible ASCII (a non-ASCII `Authorization`).
    Unreadable,
}

/// The caller's credentials: `Authorization`, else Hawtio's
/// `X-Jolokia-Authorization` (same schemes, same checks and throttling).
fn credentials(headers: &HeaderMap) -> Presented<'_> {
    match headers
        .get(AUTHORIZATION)
        .or_else(|| headers.get(X_JOLOKIA_AUTHORIZATION))
    {
        None => Presented::Nothing,
        Some(v) => v
            .to_str()
            .map_or(Presented::Unreadable, Presented::Readable),
    }
}

/// A script that handles logins itself, as Hawtio's own servers tell it:
/// Hawtio's credentials header, or an AJAX request marked
/// `X-Requested-With: XMLHttpRequest`. Every other request (a page, a
/// same-origin console's `fetch()` relying on the browser's own login)
/// gets the plain `Basic` challenge, so the browser can ask for it.
fn from_browser_script(headers: &HeaderMap) -> bool {
    headers.contains_key(X_JOLOKIA_AUTHORIZATION)
        || headers
            .get("x-requested-with")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("XMLHttpRequest"))
}

/// Which method a refused caller tried, for audit and metrics (a fixed
/// set of values: `basic`, `bearer`, `other`, `mtls`, `none`).
pub fn attempted_method(headers: &HeaderMap, conn: &Connection) -> &'static str {
    match credentials(headers) {
        Presented::Readable(v) => match v.split(' ').next().map(str::to_ascii_lowercase).as_deref()
        {
            Some("basic") => "basic",
            Some("bearer") => "bearer",
            _ => "other",
        },
        Presented::Unreadable => "other",
        Presented::Nothing if conn.peer_certificates.is_some() => "mtls",
        Presented::Nothing => "none",
    }
}

/// Whether authentication is on for a listener (reported by `version`
/// as `details.secured`).
pub fn is_secured(methods: &[AuthMethod]) -> bool {
    methods.iter().any(|m| *m != AuthMethod::Anonymous)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    fn basic_header(user: &str, password: &str) -> HeaderMap {
        let v = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, format!("Basic {v}").parse().unwrap());
        h
    }

    #[tokio::test]
    async fn password_checks_need_room_and_verified_credentials_never_do() {
        let dir = tempfile::tempdir().unwrap();
        let users = dir.path().join("users.toml");
        let hash = basic::hash_password("pw").unwrap();
        std::fs::write(
            &users,
            format!("[[users]]\nname = \"u\"\npassword_hash = \"{hash}\"\n"),
        )
        .unwrap();
        let config: AuthConfig =
            toml::from_str(&format!("[basic]\nusers_file = \"{}\"\n", users.display())).unwrap();
        let auth = Authenticator::from_config(&config).unwrap();
        let methods = [AuthMethod::Basic];
        let conn = Connection::default();
        let (room, full) = (
            tokio::sync::Semaphore::new(1),
            tokio::sync::Semaphore::new(0),
        );
        let check = |user: &str, password: &str, share| {
            let headers = basic_header(user, password);
            let auth = &auth;
            let conn = &conn;
            async move {
                auth.authenticate(&methods, &headers, conn, None, share, &Vec::new)
                    .await
            }
        };
        // No room in the unauthenticated share: answered at once.
        assert_eq!(check("u", "pw", &full).await, Err(Failure::Busy));
        assert_eq!(check("nobody", "x", &full).await, Err(Failure::Busy));
        // With room: checked, and the slot is given back.
        assert_eq!(check("u", "pw", &room).await.unwrap().name, "u");
        assert_eq!(room.available_permits(), 1);
        // Verified credentials need no room at all.
        assert_eq!(check("u", "pw", &full).await.unwrap().name, "u");
        // The answer to a busy check: 429, Retry-After, never stored.
        let resp = auth.refusal(&methods, &Failure::Busy, &HeaderMap::new());
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(resp.headers()[RETRY_AFTER], "1");
        assert_eq!(resp.headers()[CACHE_CONTROL], "no-store");
        let resp = auth.refusal(
            &methods,
            &Failure::Unauthorized {
                bearer_error: false,
            },
            &HeaderMap::new(),
        );
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(resp.headers()[CACHE_CONTROL], "no-store");
    }
}
