//! `GET <prometheus.path>/sd`: the targets the caller reaches, in
//! Prometheus's `http_sd_config` format, each to be scraped through this
//! gateway (`__metrics_path__` the scrape endpoint, `__param_target` its
//! name, `__param_module` the module asked). `?shard=i&of=n` gives one of
//! `n` shards, `?member=<id>` the share of one `[cluster]` member, so
//! several Prometheus servers, agents or collectors each scrape their part
//! through any replica. The shards are rendezvous hashing of the target's
//! name over `shard-0`…`shard-<n-1>`: growing `of` by one moves about
//! 1/n of the targets.

use std::collections::BTreeMap;

use axum::body::Body;
use http::{HeaderValue, Method, Response as HttpResponse};

use crate::doors::DoorSections;
use crate::fleet::Target;
use crate::pipeline::state::State;
use crate::pipeline::{audit, respond, Gateway, HttpError, Refused};

/// The most shards `of` may ask for.
pub const MAX_SHARDS: u32 = 1000;

/// Which part of the caller's targets is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Part {
    All,
    Shard { index: u32, of: u32 },
    Member(String),
}

/// A discovery request as its query gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SdQuery {
    pub(crate) module: String,
    pub(crate) part: Part,
}

/// The query of a discovery request; every parameter it doesn't know,
/// repeats or can't read is named.
pub(crate) fn parse_query(query: Option<&str>, default_module: &str) -> Result<SdQuery, String> {
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for (key, value) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        if !matches!(&*key, "module" | "shard" | "of" | "member") {
            return Err(format!(
                "Unknown parameter {key:?}: this endpoint takes module, shard and of, or member"
            ));
        }
        if seen.insert(key.to_string(), value.to_string()).is_some() {
            return Err(format!("Parameter {key:?} is given twice"));
        }
    }
    let module = seen
        .remove("module")
        .unwrap_or_else(|| default_module.to_string());
    let number = |key: &str, text: &str| {
        text.parse::<u32>()
            .map_err(|_| format!("{key}={text:?} is not a whole number"))
    };
    let (shard, of, member) = (
        seen.remove("shard"),
        seen.remove("of"),
        seen.remove("member"),
    );
    if member.is_some() && (shard.is_some() || of.is_some()) {
        return Err("Ask for ?member=<id> or ?shard=i&of=n, not both".into());
    }
    let part = match (shard, of, member) {
        (None, None, None) => Part::All,
        (_, _, Some(member)) if member.is_empty() => return Err("member= names no member".into()),
        (_, _, Some(member)) => Part::Member(member),
        (Some(shard), Some(of), None) => {
            let (index, of) = (number("shard", &shard)?, number("of", &of)?);
            if of == 0 || of > MAX_SHARDS {
                return Err(format!("of={of}: between 1 and {MAX_SHARDS} shards"));
            }
            if index >= of {
                return Err(format!(
                    "shard={index} of={of}: shards are numbered 0 to {}",
                    of - 1
                ));
            }
            Part::Shard { index, of }
        }
        (Some(_), None, None) => return Err("shard= needs of= (how many shards there are)".into()),
        (None, Some(_), None) => return Err("of= needs shard= (which one this is)".into()),
    };
    Ok(SdQuery { module, part })
}

/// `key` as a Prometheus label name: characters outside `[a-zA-Z0-9_]`
/// become `_` (as Kubernetes discovery's label names do), a leading digit
/// gets a `_`, and names Prometheus or this answer use themselves
/// (`__…`, `instance`, `job`) are kept as `exported_<name>`, as Prometheus
/// keeps a scraped label that collides with a target's.
pub(crate) fn label_name(key: &str) -> String {
    let mut name: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    if name.starts_with("__") || name == "instance" || name == "job" {
        name.insert_str(0, "exported_");
    }
    name
}

/// Where the scrapes go: `server.public_url`'s scheme and host, else the
/// request's scheme and `Host` (which `server.allowed_hosts` admitted).
fn scrape_address(
    public_url: Option<&str>,
    host: Option<&str>,
    scheme: &'static str,
) -> Result<(String, String), HttpError> {
    if let Some(url) = public_url.and_then(|u| url::Url::parse(u).ok()) {
        // An IPv6 host comes in its brackets.
        if let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) {
            return Ok((url.scheme().to_string(), format!("{host}:{port}")));
        }
    }
    match host.filter(|h| !h.is_empty()) {
        Some(host) => Ok((scheme.to_string(), host.to_string())),
        None => Err(HttpError::bad_request(
            "No Host header to name the gateway by: send one, or set server.public_url",
        )),
    }
}

/// One target's entry.
fn entry(
    target: &Target,
    address: &(String, String),
    metrics_path: &str,
    module: &str,
) -> serde_json::Value {
    let mut labels: BTreeMap<String, String> = BTreeMap::new();
    for (key, value) in target.labels.iter() {
        labels
            .entry(label_name(key))
            .or_insert_with(|| value.to_string());
    }
    labels.insert("__metrics_path__".into(), metrics_path.to_string());
    labels.insert("__param_target".into(), target.name.clone());
    labels.insert("__param_module".into(), module.to_string());
    labels.insert("__scheme__".into(), address.0.clone());
    labels.insert("instance".into(), target.name.clone());
    serde_json::json!({"targets": [address.1], "labels": labels})
}

/// The discovery answer, or why not; the caller's reach is `state.access`
/// over its held roles, as for `GET /jolokia/targets`.
fn answer(
    gateway: &Gateway,
    state: &State,
    refused: &Refused<'_>,
    parts: &http::request::Parts,
) -> Result<Vec<serde_json::Value>, HttpError> {
    if parts.method != Method::GET && parts.method != Method::HEAD {
        return Err(HttpError::new(
            405,
            "jmxgate.MethodNotAllowed",
            "GET the targets to scrape",
        ));
    }
    let exporter = state.prometheus();
    let query = parse_query(parts.uri.query(), super::config::DEFAULT_MODULE)
        .map_err(HttpError::bad_request)?;
    if exporter.modules.get(&query.module).is_none() {
        return Err(HttpError::bad_request("Unknown module"));
    }
    let ctx = refused.ctx;
    let host = refused
        .headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok());
    let address = scrape_address(gateway.identity.public_url(), host, ctx.scheme())?;
    let view = gateway.cluster().view();
    let shards: Vec<String> = match &query.part {
        Part::Shard { of, .. } => (0..*of).map(|i| format!("shard-{i}")).collect(),
        Part::Member(id) if !view.ids().iter().any(|m| m == id) => {
            return Err(HttpError::new(
                404,
                "jmxgate.NotFound",
                format!("No member {id:?} in the cluster now (GET /cluster on the admin listener lists them)"),
            ))
        }
        _ => Vec::new(),
    };
    let in_part = |t: &Target| match &query.part {
        Part::All => true,
        Part::Shard { index, .. } => {
            crate::cluster::rendezvous::owner(&t.name, &shards)
                == Some(shards[*index as usize].as_str())
        }
        Part::Member(id) => view.owner(&t.name) == Some(id.as_str()),
    };
    let held = &ctx.held[..];
    let reached: Vec<&std::sync::Arc<Target>> = state
        .fleet
        .iter()
        .filter(|t| state.access.reaches(held, t) && in_part(t))
        .collect();
    let max = exporter.config.sd_max_targets;
    if reached.len() > max {
        return Err(HttpError::new(
            413,
            "jmxgate.TooManyTargets",
            format!(
                "{} targets are more than prometheus.sd_max_targets ({max}) in one answer: ask for shards, ?shard=i&of=n",
                reached.len()
            ),
        ));
    }
    let path = &exporter.config.path;
    Ok(reached
        .into_iter()
        .map(|t| entry(t, &address, path, &query.module))
        .collect())
}

/// `GET <prometheus.path>/sd`, recorded as a target list on the
/// Prometheus channel.
pub(crate) async fn service_discovery(
    gateway: &Gateway,
    state: &State,
    parts: &http::request::Parts,
    refused: &Refused<'_>,
) -> HttpResponse<Body> {
    let answered = answer(gateway, state, refused, parts);
    let record = audit::TargetListRecord {
        who: &refused.ctx.who(),
        what: "target_list",
        status: answered.as_ref().map_or_else(|e| e.status, |_| 200),
        listed: answered.as_ref().map_or(0, Vec::len),
    };
    if let Err(e) = gateway.record(audit::Event::Listing(record)).await {
        return respond::http_error(&e, refused.headers, false);
    }
    let entries = match answered {
        Ok(entries) => entries,
        Err(e) => return respond::http_error(&e, refused.headers, false),
    };
    let body = serde_json::Value::Array(entries).to_string();
    let mut resp = HttpResponse::new(Body::from(body));
    let headers = resp.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    respond::no_store(headers);
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(q: &str) -> Result<SdQuery, String> {
        parse_query(Some(q), "default")
    }

    #[test]
    fn the_query_names_a_module_and_one_part_and_nothing_else() {
        assert_eq!(
            parsed("").unwrap(),
            SdQuery {
                module: "default".into(),
                part: Part::All
            }
        );
        assert_eq!(
            parsed("module=kafka&shard=1&of=3").unwrap(),
            SdQuery {
                module: "kafka".into(),
                part: Part::Shard { index: 1, of: 3 }
            }
        );
        assert_eq!(
            parsed("member=gw-1").unwrap().part,
            Part::Member("gw-1".into())
        );
        for (bad, says) in [
            ("target=x", "Unknown parameter \"target\""),
            ("shard=1", "shard= needs of="),
            ("of=2", "of= needs shard="),
            ("shard=2&of=2", "numbered 0 to 1"),
            ("shard=0&of=0", "between 1 and 1000"),
            ("shard=0&of=1001", "between 1 and 1000"),
            ("shard=x&of=2", "not a whole number"),
            ("shard=0&of=2&member=a", "not both"),
            ("member=a&of=2", "not both"),
            ("member=", "names no member"),
            ("module=a&module=b", "given twice"),
        ] {
            let e = parsed(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn label_names_are_prometheus_names_and_reserved_ones_are_kept_apart() {
        assert_eq!(label_name("env"), "env");
        assert_eq!(
            label_name("app.kubernetes.io/name"),
            "app_kubernetes_io_name"
        );
        assert_eq!(label_name("1st"), "_1st");
        assert_eq!(label_name(""), "_");
        assert_eq!(label_name("__address__"), "exported___address__");
        assert_eq!(label_name("instance"), "exported_instance");
        assert_eq!(label_name("job"), "exported_job");
    }

    #[test]
    fn the_address_is_the_public_url_else_the_host_asked() {
        assert_eq!(
            scrape_address(Some("https://jmx.example.com/jolokia"), Some("x:1"), "http").unwrap(),
            ("https".into(), "jmx.example.com:443".into())
        );
        assert_eq!(
            scrape_address(None, Some("127.0.0.1:8080"), "http").unwrap(),
            ("http".into(), "127.0.0.1:8080".into())
        );
        assert_eq!(
            scrape_address(Some("http://[::1]:9000/"), None, "https").unwrap(),
            ("http".into(), "[::1]:9000".into())
        );
        assert!(scrape_address(None, None, "http").is_err());
    }

    #[test]
    fn shards_split_the_targets_and_one_more_moves_about_its_share() {
        let names: Vec<String> = (0..1000).map(|i| format!("orders-{i}")).collect();
        let of = |n: u32| -> Vec<String> { (0..n).map(|i| format!("shard-{i}")).collect() };
        let (three, four) = (of(3), of(4));
        let in3: Vec<&str> = names
            .iter()
            .map(|n| crate::cluster::rendezvous::owner(n, &three).unwrap())
            .collect();
        for s in &three {
            let count = in3.iter().filter(|o| *o == s).count();
            assert!((290..=380).contains(&count), "{s}: {count}");
        }
        let moved = names
            .iter()
            .zip(&in3)
            .filter(|(n, o)| crate::cluster::rendezvous::owner(n, &four).unwrap() != **o)
            .count();
        assert!((200..=300).contains(&moved), "{moved} of 1000 moved");
    }
}
