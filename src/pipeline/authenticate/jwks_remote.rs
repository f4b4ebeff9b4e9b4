//! The OpenID provider's signing keys, fetched over HTTPS into the bearer
//! verifier's [`RemoteKeySlot`]: from `jwks_url`, or from the `jwks_uri` of
//! `<issuer>/.well-known/openid-configuration`. Fetched at start, every
//! `keys_refresh`, and when a token names a `kid` the set doesn't have
//! (at most once per [`MISS_GAP`], one fetch for any number of waiting
//! requests, so a flood of forged `kid`s costs the provider nothing). A
//! failed fetch keeps the last good set and says why in the log.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::bearer::{BearerConfig, KeySet, RemoteKeySlot};

/// Shortest time between two fetches caused by unknown `kid`s.
pub const MISS_GAP: Duration = Duration::from_secs(10);
/// Largest provider document read.
const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

/// Fetches one provider's keys into a slot.
pub struct RemoteJwks {
    slot: RemoteKeySlot,
    source: Source,
    http: reqwest::Client,
    every: Duration,
    /// The last fetch's start and outcome; held while fetching, so
    /// concurrent callers wait for that one fetch.
    last: tokio::sync::Mutex<Option<(Instant, Result<(), String>)>>,
}

impl std::fmt::Debug for RemoteJwks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteJwks")
            .field("source", &self.describe())
            .field("has_keys", &self.has_keys())
            .finish()
    }
}

enum Source {
    Jwks(url::Url),
    Discovery(url::Url),
}

/// An HTTPS client for the OpenID provider (verified against `ca_file`
/// or the system roots): bounded in time, and following no redirect, so
/// it talks only to the URLs the configuration or the provider's
/// discovery names.
pub fn provider_client(ca_file: Option<&std::path::Path>) -> Result<reqwest::Client, String> {
    let tls = crate::client::tls_config(ca_file, None, false).map_err(|e| e.to_string())?;
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(15))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .map_err(|e| format!("HTTP client: {e}"))
}

impl RemoteJwks {
    /// Checks the URLs and builds the HTTPS client; fetches nothing yet.
    pub fn new(config: &BearerConfig, slot: RemoteKeySlot) -> Result<RemoteJwks, String> {
        let loopback = config.insecure_http_loopback;
        let source = match (&config.jwks_url, config.discovery, &config.issuer) {
            (Some(url), _, _) => Source::Jwks(provider_url("jwks_url", url, loopback)?),
            (None, true, Some(issuer)) => {
                let base = provider_url("issuer", issuer, loopback)?;
                let discovery = format!(
                    "{}/.well-known/openid-configuration",
                    base.as_str().trim_end_matches('/')
                );
                Source::Discovery(url::Url::parse(&discovery).map_err(|e| e.to_string())?)
            }
            _ => return Err("no jwks_url, and no discovery with issuer".into()),
        };
        let http = provider_client(config.ca_file.as_deref())?;
        let remote = RemoteJwks {
            slot,
            source,
            http,
            every: config.keys_refresh,
            last: tokio::sync::Mutex::new(None),
        };
        // A reload builds a new verifier: it starts from the keys the old one
        // had, so a provider that is down at that moment changes nothing.
        if let Some(keys) = last_good(&remote.describe(), None) {
            remote.slot.store(Some(keys));
        }
        Ok(remote)
    }

    /// Where the keys come from, for logs.
    pub fn describe(&self) -> String {
        match &self.source {
            Source::Jwks(url) => url.to_string(),
            Source::Discovery(url) => format!("discovery at {url}"),
        }
    }

    /// Whether a key set has been fetched.
    pub fn has_keys(&self) -> bool {
        self.slot.load().is_some()
    }

    /// Fetches now; keeps the last good set on failure.
    pub async fn refresh(&self) -> Result<(), String> {
        let mut last = self.last.lock().await;
        let outcome = self.fetch().await;
        match &outcome {
            Ok(kids) => {
                tracing::info!(source = %self.describe(), kids = ?kids, "bearer: provider keys fetched")
            }
            Err(e) => {
                tracing::warn!(source = %self.describe(), error = %e, kept = self.has_keys(), "bearer: provider keys could not be fetched; the last good set is kept")
            }
        }
        let outcome = outcome.map(|_| ());
        *last = Some((Instant::now(), outcome.clone()));
        outcome
    }

    /// After a token named an unknown `kid`: fetches again unless a fetch
    /// ran within [`MISS_GAP`] (or is running: this waits for it). True
    /// when a fetch ran and succeeded, so the token is worth another look.
    pub async fn refresh_after_miss(&self) -> bool {
        let started_waiting = Instant::now();
        let mut last = self.last.lock().await;
        if let Some((at, _)) = &*last {
            // One that finished while this waited, or one just before.
            if *at >= started_waiting || at.elapsed() < MISS_GAP {
                return matches!(&*last, Some((_, Ok(()))) if *at >= started_waiting);
            }
        }
        let outcome = self.fetch().await;
        if let Err(e) = &outcome {
            tracing::warn!(source = %self.describe(), error = %e, "bearer: provider keys could not be fetched after an unknown kid");
        }
        let ok = outcome.is_ok();
        *last = Some((Instant::now(), outcome.map(|_| ())));
        ok
    }

    /// Fetches at once, then every `keys_refresh`, until the verifier
    /// this serves is gone (a reload builds a new one).
    pub fn spawn(self: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak: Weak<RemoteJwks> = Arc::downgrade(self);
        let every = self.every;
        runtime.spawn(async move {
            loop {
                let Some(this) = weak.upgrade() else { return };
                // A failure is logged; the next attempt comes sooner.
                let next = match this.refresh().await {
                    Ok(()) => every,
                    Err(_) => MISS_GAP.max(Duration::from_secs(10)),
                };
                drop(this);
                tokio::time::sleep(next).await;
            }
        });
    }

    async fn fetch(&self) -> Result<Vec<String>, String> {
        let jwks_url = match &self.source {
            Source::Jwks(url) => url.clone(),
            Source::Discovery(url) => {
                let doc: serde_json::Value = serde_json::from_slice(&self.get(url).await?)
                    .map_err(|e| format!("{url}: not a JSON discovery document ({e})"))?;
                let uri = doc
                    .get("jwks_uri")
                    .and_then(|v| v.as_str())
                    .ok_or_else(|| format!("{url}: no jwks_uri"))?;
                let parsed = url::Url::parse(uri).map_err(|e| format!("jwks_uri {uri}: {e}"))?;
                if !same_origin(&parsed, url) {
                    return Err(format!(
                        "jwks_uri {uri} is not at the issuer's origin ({}): refused",
                        url.origin().ascii_serialization()
                    ));
                }
                parsed
            }
        };
        let keys = KeySet::from_jwks_json(&self.get(&jwks_url).await?)
            .map_err(|e| format!("{jwks_url}: {e}"))?;
        let kids = keys.kids();
        let keys = Arc::new(keys);
        last_good(&self.describe(), Some(keys.clone()));
        self.slot.store(Some(keys));
        Ok(kids)
    }

    async fn get(&self, url: &url::Url) -> Result<Vec<u8>, String> {
        let resp = self
            .http
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| format!("{url}: {}", crate::client::innermost_cause(&e)))?;
        if !resp.status().is_success() {
            return Err(format!("{url}: HTTP {}", resp.status().as_u16()));
        }
        let body = resp
            .bytes()
            .await
            .map_err(|e| format!("{url}: {}", crate::client::innermost_cause(&e)))?;
        if body.len() > MAX_DOCUMENT_BYTES {
            return Err(format!("{url}: more than {MAX_DOCUMENT_BYTES} bytes"));
        }
        Ok(body.to_vec())
    }
}

/// The last key set fetched from each source in this process (stored when
/// `keys` is given), so that a reload's new verifier starts with it.
fn last_good(source: &str, keys: Option<Arc<KeySet>>) -> Option<Arc<KeySet>> {
    static LAST: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<String, Arc<KeySet>>>,
    > = std::sync::OnceLock::new();
    let mut last = LAST
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    match keys {
        Some(keys) => last.insert(source.to_string(), keys),
        None => last.get(source).cloned(),
    }
}

/// An HTTPS URL, or `http://` on a loopback address with
/// `insecure_http_loopback`.
fn provider_url(key: &str, raw: &str, loopback: bool) -> Result<url::Url, String> {
    let url = url::Url::parse(raw).map_err(|e| format!("{key} {raw:?}: {e}"))?;
    match url.scheme() {
        "https" => Ok(url),
        "http" if loopback && is_loopback(&url) => Ok(url),
        "http" => Err(format!(
            "{key} {raw:?}: keys come over HTTPS only (insecure_http_loopback allows http:// on a loopback address, for development)"
        )),
        other => Err(format!("{key} {raw:?}: scheme {other} is not https")),
    }
}

fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost",
        None => false,
    }
}

/// The discovery document may only send the gateway to the issuer's own
/// scheme, host and port: a `jwks_uri` elsewhere (another port of the
/// same host included) is refused.
fn same_origin(a: &url::Url, b: &url::Url) -> bool {
    a.scheme() == b.scheme()
        && a.host() == b.host()
        && a.port_or_known_default() == b.port_or_known_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_urls_are_https_unless_loopback_development() {
        assert!(provider_url("jwks_url", "https://idp.example/keys", false).is_ok());
        let err = provider_url("jwks_url", "http://idp.example/keys", true).unwrap_err();
        assert!(err.contains("HTTPS only"), "{err}");
        assert!(provider_url("jwks_url", "http://127.0.0.1:8080/keys", false).is_err());
        assert!(provider_url("jwks_url", "http://127.0.0.1:8080/keys", true).is_ok());
        assert!(provider_url("jwks_url", "ftp://idp.example/keys", true).is_err());
    }

    #[test]
    fn a_jwks_uri_must_be_at_the_issuers_origin() {
        let issuer = url::Url::parse("https://idp.example.com/realms/x").unwrap();
        let at = |u: &str| same_origin(&url::Url::parse(u).unwrap(), &issuer);
        assert!(at("https://idp.example.com/realms/x/certs"));
        assert!(at("https://IDP.example.com:443/certs"));
        assert!(!at("https://idp.example.com:8443/certs"));
        assert!(!at("http://idp.example.com/certs"));
        assert!(!at("https://evil.example.com/certs"));
    }
}
