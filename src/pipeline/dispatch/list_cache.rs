//! One shared copy of each agent's `list` answer (per target, credentials
//! and request), so a fleet of consoles opening at once costs the agent one
//! full answer. A cached answer is revalidated with `ifModifiedSince`: the
//! agent says 304 when no MBean was registered or unregistered since, which
//! costs it almost nothing. The cache holds the unfiltered answer; each
//! caller's policy filters its own copy afterwards.
//!
//! A client's own `ifModifiedSince` is answered by the gateway: 304 when
//! the cached answer is current and no older than the client's time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::fleet::Target;
use crate::metrics::Metrics;
use crate::protocol::{Request, Response};
use crate::secret::Secret;

use super::{exchange_error, measured};

/// `[list_cache]`: one shared copy of each agent's `list` answer,
/// revalidated with `ifModifiedSince` and filtered per caller afterwards.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListCacheConfig {
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Bytes of cached answers kept, all targets together; the least
    /// used go first.
    #[serde(default = "default_list_cache_bytes")]
    pub max_bytes: u64,
    /// How long a cached answer is served without asking the agent
    /// whether its MBeans changed. `0s` (the default) asks every time;
    /// the question is cheap (the agent answers 304 without a body).
    #[serde(default, with = "humantime_serde")]
    pub fresh_for: Duration,
}

impl Default for ListCacheConfig {
    fn default() -> Self {
        ListCacheConfig {
            enabled: true,
            max_bytes: default_list_cache_bytes(),
            fresh_for: Duration::ZERO,
        }
    }
}

fn default_true() -> bool {
    true
}

fn default_list_cache_bytes() -> u64 {
    256 * 1024 * 1024
}

/// A cached answer.
#[derive(Debug, Clone)]
pub struct Entry {
    value: Arc<RawValue>,
    /// The agent's clock when it produced the value: nothing changed on
    /// the agent after it, as of `confirmed`.
    produced: u64,
    /// The agent's clock at the last answer (full or 304) that vouched
    /// for the value.
    confirmed: u64,
    /// When the gateway last asked.
    checked: Instant,
}

pub struct ListCache {
    entries: moka::sync::Cache<[u8; 32], Arc<Entry>>,
    fresh_for: Duration,
}

impl ListCache {
    pub fn new(config: &ListCacheConfig) -> Option<ListCache> {
        config.enabled.then(|| ListCache {
            entries: moka::sync::Cache::builder()
                .max_capacity(config.max_bytes)
                .weigher(|_, e: &Arc<Entry>| u32::try_from(e.value.get().len()).unwrap_or(u32::MAX))
                .build(),
            fresh_for: config.fresh_for,
        })
    }

    /// Answers one list request for `target`, from the cache when it is
    /// current. Agent failures come back as the item's error answer.
    pub async fn answer(
        &self,
        target: &Target,
        request: &Request,
        credentials: Option<&(String, Secret)>,
        metrics: &Metrics,
    ) -> Response {
        let (base, client_since) = split_if_modified_since(request);
        let key = cache_key(target, &base, credentials);
        let cached = self.entries.get(&key);
        let ask = match &cached {
            Some(e) if e.checked.elapsed() < self.fresh_for => None,
            Some(e) => Some(revalidation(&base, e.produced)),
            None => Some(base.clone()),
        };
        let entry = match ask {
            None => {
                metrics.cache_lookup("list", true);
                cached.expect("fresh entries exist")
            }
            Some(ask) => {
                let sent = measured(
                    metrics,
                    target,
                    target
                        .client
                        .bulk_as(std::slice::from_ref(&ask), credentials),
                )
                .await;
                let answer = match sent {
                    Ok(mut answers) => answers.swap_remove(0),
                    Err(e) => return Response::error(&exchange_error(target, &e)),
                };
                match updated(cached.as_deref(), answer) {
                    Ok((entry, from_cache)) => {
                        metrics.cache_lookup("list", from_cache);
                        let entry = Arc::new(entry);
                        self.entries.insert(key, entry.clone());
                        entry
                    }
                    Err(error) => {
                        self.entries.invalidate(&key);
                        return error;
                    }
                }
            }
        };
        reply(&entry, client_since)
    }
}

/// The request without the client's `ifModifiedSince`, and that time.
pub fn split_if_modified_since(request: &Request) -> (Request, Option<u64>) {
    let since = request
        .params
        .get("ifModifiedSince")
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|t| *t > 0);
    let mut base = request.clone();
    base.params.remove("ifModifiedSince");
    (base, since)
}

fn revalidation(base: &Request, produced: u64) -> Request {
    let mut ask = base.clone();
    ask.params.set("ifModifiedSince", &produced.to_string());
    ask
}

/// Target, credentials and request, hashed: no password in a map key.
fn cache_key(target: &Target, base: &Request, credentials: Option<&(String, Secret)>) -> [u8; 32] {
    crate::client::exchange_key(
        &[&target.name, target.url().as_str()],
        credentials,
        &serde_json::to_vec(&crate::protocol::AgentForm(base)).expect("requests serialise"),
    )
}

/// The entry after the agent's answer, and whether the cached value was
/// still good; an error answer is returned as the item's answer.
pub fn updated(cached: Option<&Entry>, mut answer: Response) -> Result<(Entry, bool), Response> {
    let now = answer.timestamp();
    match (answer.status(), cached) {
        (Some(304), Some(old)) => Ok((
            Entry {
                confirmed: now.unwrap_or(old.confirmed).max(old.confirmed),
                checked: Instant::now(),
                ..old.clone()
            },
            true,
        )),
        (Some(200), _) => {
            let Some(value) = answer.remove("value") else {
                return Err(answer);
            };
            let produced = now.unwrap_or(0);
            Ok((
                Entry {
                    value: value.into_shared(),
                    produced,
                    confirmed: produced,
                    checked: Instant::now(),
                },
                false,
            ))
        }
        // An error, or a 304 to a question not asked.
        _ => Err(answer),
    }
}

/// The client's answer: 304 when it already has the cached value (its
/// `ifModifiedSince` is no older than the value), else the value.
pub fn reply(entry: &Entry, client_since: Option<u64>) -> Response {
    let mut r = Response::default();
    if client_since.is_some_and(|t| t >= entry.produced) {
        r.set("status", &304);
        r.set("timestamp", &entry.confirmed);
        return r;
    }
    // The cached text itself: every client's answer shares it.
    r.set_shared("value", entry.value.clone());
    r.set("timestamp", &entry.confirmed);
    r.set("status", &200);
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Command, List};

    fn list(since: Option<u64>) -> Request {
        let mut r = Request::new(Command::List(List { path: None }));
        r.params.set("maxDepth", "3");
        if let Some(t) = since {
            r.params.set("ifModifiedSince", &t.to_string());
        }
        r
    }

    fn answer(json: &str) -> Response {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn the_clients_time_is_taken_off_and_other_params_kept() {
        let (base, since) = split_if_modified_since(&list(Some(1700)));
        assert_eq!(since, Some(1700));
        assert_eq!(base, list(None));
        assert_eq!(split_if_modified_since(&list(Some(0))).1, None);
        let ask = revalidation(&base, 42);
        assert_eq!(ask.params.get("ifModifiedSince"), Some("42"));
        assert_eq!(ask.params.get("maxDepth"), Some("3"));
    }

    #[test]
    fn a_full_answer_fills_and_a_304_confirms() {
        let (fresh, from_cache) = updated(
            None,
            answer(r#"{"value":{"java.lang":{}},"timestamp":100,"status":200}"#),
        )
        .unwrap();
        assert!(!from_cache);
        assert_eq!((fresh.produced, fresh.confirmed), (100, 100));
        let (kept, from_cache) =
            updated(Some(&fresh), answer(r#"{"status":304,"timestamp":160}"#)).unwrap();
        assert!(from_cache);
        assert_eq!((kept.produced, kept.confirmed), (100, 160));
        assert_eq!(kept.value.get(), r#"{"java.lang":{}}"#);
    }

    #[test]
    fn errors_and_unasked_304s_are_the_answer() {
        let err = answer(r#"{"error":"x","error_type":"y","status":500}"#);
        assert_eq!(updated(None, err).unwrap_err().status(), Some(500));
        let stray = answer(r#"{"status":304,"timestamp":1}"#);
        assert_eq!(updated(None, stray).unwrap_err().status(), Some(304));
    }

    #[test]
    fn clients_that_have_the_value_get_304() {
        let (entry, _) = updated(
            None,
            answer(r#"{"value":{"a":1},"timestamp":100,"status":200}"#),
        )
        .unwrap();
        assert_eq!(reply(&entry, Some(100)).status(), Some(304));
        assert_eq!(reply(&entry, Some(250)).status(), Some(304));
        let full = reply(&entry, Some(99));
        assert_eq!(full.status(), Some(200));
        assert_eq!(full.get("value").unwrap().get(), r#"{"a":1}"#);
        assert_eq!(reply(&entry, None).status(), Some(200));
    }
}
