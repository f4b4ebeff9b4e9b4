//! list and search answers show only MBeans the caller may see: not hidden
//! by `<filter>`, and touchable in some way under the caller's roles.

use serde_json::{Map, Value};

use super::Grant;
use crate::protocol::{path, ObjectName};

/// Keeps the visible names of a search answer's value (an array of names).
pub fn filter_search(value: Value, grant: &Grant) -> Value {
    match value {
        Value::Array(names) => Value::Array(
            names
                .into_iter()
                .filter(|n| {
                    n.as_str()
                        .and_then(|s| ObjectName::parse(s).ok())
                        .is_some_and(|name| grant.visible(&name))
                })
                .collect(),
        ),
        other => other,
    }
}

/// Why a list answer can't be shown.
#[derive(Debug, PartialEq, Eq)]
pub struct ListDenied(pub String);

/// Filters a list answer's value. `list_path` is the request's inner path:
/// none lists domains, one segment lists a domain's MBeans, two or more
/// point into one MBean, which must be visible as a whole.
pub fn filter_list(
    value: Value,
    list_path: Option<&str>,
    grant: &Grant,
) -> Result<Value, ListDenied> {
    let segments: Vec<String> = list_path.map(path::split).unwrap_or_default();
    match segments.as_slice() {
        [] => Ok(match value {
            Value::Object(domains) => Value::Object(
                domains
                    .into_iter()
                    .filter_map(|(domain, mbeans)| {
                        let kept = filter_domain(&domain, mbeans, grant)?;
                        Some((domain, kept))
                    })
                    .collect(),
            ),
            _ => Value::Object(Map::new()),
        }),
        [domain] => {
            Ok(filter_domain(domain, value, grant).unwrap_or_else(|| Value::Object(Map::new())))
        }
        [domain, props, ..] => {
            let visible = ObjectName::parse(&format!("{domain}:{props}"))
                .map(|name| grant.visible(&name))
                .unwrap_or(false);
            if visible {
                Ok(value)
            } else {
                Err(ListDenied(format!(
                    "Listing MBean {domain}:{props} is forbidden"
                )))
            }
        }
    }
}

type Raw = Box<serde_json::value::RawValue>;
/// An MBean's description stays text borrowed from the answer.
type Mbeans<'a> = indexmap::IndexMap<String, &'a serde_json::value::RawValue>;
/// Domains and their MBeans, descriptions as text.
type Domains<'a> = indexmap::IndexMap<String, Mbeans<'a>>;

/// [`filter_list`] on the answer's JSON text, parsing only domain and MBean
/// keys: each MBean's description passes through as text, so a 10 MB list
/// costs a scan rather than a tree of values. `None` for an answer of
/// another shape (cut short by `maxDepth`): use [`filter_list`] then.
/// `Some(Ok(None))`: the grant sees all of it, the text stays as it is
/// (and stays shared with the list cache).
pub fn filter_list_raw(
    value: &serde_json::value::RawValue,
    list_path: Option<&str>,
    grant: &Grant,
) -> Option<Result<Option<Raw>, ListDenied>> {
    let segments: Vec<String> = list_path.map(path::split).unwrap_or_default();
    match segments.as_slice() {
        [] => {
            let domains: Domains = serde_json::from_str(value.get()).ok()?;
            let (kept, hidden) = visible_domains(domains, grant);
            rewritten(hidden, &kept).map(Ok)
        }
        [domain] => {
            let mbeans: Mbeans = serde_json::from_str(value.get()).ok()?;
            let all = mbeans.len();
            let visible = visible_mbeans(domain, mbeans, grant);
            rewritten(visible.len() < all, &visible).map(Ok)
        }
        _ => None,
    }
}

/// A protocol 8 list answer asked with `listCache=true`:
/// `{"domains": {domain: {props: info or cache key}}, "cache": {key: info}}`.
/// MBeans of one kind share a `cache` entry and name its key instead of
/// repeating their description.
#[derive(serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct CachedList<'a> {
    #[serde(borrow)]
    domains: Domains<'a>,
    #[serde(borrow)]
    cache: indexmap::IndexMap<String, &'a serde_json::value::RawValue>,
}

/// [`filter_list_raw`] for the `listCache=true` shape, whatever the path
/// (its `domains` are always keyed by domain): hidden MBeans go, and so do
/// the cache entries no visible MBean names. `None` for another shape.
pub fn filter_cached_list_raw(
    value: &serde_json::value::RawValue,
    grant: &Grant,
) -> Option<Option<Raw>> {
    let list: CachedList = serde_json::from_str(value.get()).ok()?;
    let (domains, mut hidden) = visible_domains(list.domains, grant);
    let named: std::collections::HashSet<String> = domains
        .values()
        .flat_map(|mbeans| mbeans.values())
        .filter_map(|info| serde_json::from_str::<String>(info.get()).ok())
        .collect();
    let all = list.cache.len();
    let cache: indexmap::IndexMap<String, &serde_json::value::RawValue> = list
        .cache
        .into_iter()
        .filter(|(key, _)| named.contains(key))
        .collect();
    hidden |= cache.len() < all;
    rewritten(hidden, &CachedList { domains, cache })
}

/// The filtered text, written out only when something was hidden.
fn rewritten<T: serde::Serialize>(hidden: bool, kept: &T) -> Option<Option<Raw>> {
    if !hidden {
        return Some(None);
    }
    serde_json::value::to_raw_value(kept).ok().map(Some)
}

/// The domains with only their visible MBeans, a domain left empty
/// dropped, and whether anything was hidden.
fn visible_domains<'a>(domains: Domains<'a>, grant: &Grant) -> (Domains<'a>, bool) {
    let mut hidden = false;
    let kept = domains
        .into_iter()
        .filter_map(|(domain, mbeans)| {
            let all = mbeans.len();
            let visible = visible_mbeans(&domain, mbeans, grant);
            hidden |= visible.len() < all || visible.is_empty();
            (!visible.is_empty()).then_some((domain, visible))
        })
        .collect();
    (kept, hidden)
}

fn visible_mbeans<'a>(domain: &str, mbeans: Mbeans<'a>, grant: &Grant) -> Mbeans<'a> {
    mbeans
        .into_iter()
        .filter(|(props, _)| {
            ObjectName::parse(&format!("{domain}:{props}")).is_ok_and(|name| grant.visible(&name))
        })
        .collect()
}

/// A list of domains only (no path, `maxDepth=1`) names no MBean, so it
/// can't be filtered as it is: the gateway asks for one level more
/// (`maxDepth=2`), filters, and cuts the answer back with [`to_domains`].
pub fn needs_mbean_level(list_path: Option<&str>, max_depth: Option<&str>) -> bool {
    list_path.is_none_or(str::is_empty) && max_depth == Some("1")
}

/// Cuts a filtered `maxDepth=2` list back to `maxDepth=1`: each remaining
/// domain gets the placeholder the agent itself put where it stopped.
pub fn to_domains(value: Value) -> Value {
    match value {
        Value::Object(domains) => Value::Object(
            domains
                .into_iter()
                .map(|(domain, mbeans)| {
                    let cut = match mbeans {
                        Value::Object(m) => m.into_iter().next().map_or(Value::Null, |(_, v)| v),
                        other => other,
                    };
                    (domain, cut)
                })
                .collect(),
        ),
        other => other,
    }
}

/// A domain's MBeans (`{"type=Memory": {…}}`), only the visible ones.
/// `None` when nothing is left. A domain cut short by `maxDepth` (not an
/// object) can't be checked and is dropped.
fn filter_domain(domain: &str, mbeans: Value, grant: &Grant) -> Option<Value> {
    if grant.is_open() {
        return Some(mbeans);
    }
    let Value::Object(mbeans) = mbeans else {
        return None;
    };
    let kept: Map<String, Value> = mbeans
        .into_iter()
        .filter(|(props, _)| {
            ObjectName::parse(&format!("{domain}:{props}")).is_ok_and(|name| grant.visible(&name))
        })
        .collect();
    (!kept.is_empty()).then_some(Value::Object(kept))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn domain_lists_are_filtered_at_the_mbean_level_then_cut() {
        assert!(needs_mbean_level(None, Some("1")));
        assert!(!needs_mbean_level(None, Some("2")));
        assert!(!needs_mbean_level(Some("java.lang"), Some("1")));
        assert!(!needs_mbean_level(None, None));
        let deeper = json!({"java.lang": {"type=Memory": "1"}, "jmx4perl": {}});
        assert_eq!(
            to_domains(deeper),
            json!({"java.lang": "1", "jmx4perl": null})
        );
    }

    #[test]
    fn the_text_filter_agrees_with_the_value_filter() {
        let list = json!({"a": {"type=X": {"attr": {"A": {"type": "int"}}}, "type=Y": {}}, "b": {"name=z": {"desc": "a/b"}}});
        let raw = serde_json::value::to_raw_value(&list).unwrap();
        for grant in [Grant::open(), Grant::default()] {
            let by_text = filter_list_raw(&raw, None, &grant)
                .unwrap()
                .unwrap()
                .unwrap_or_else(|| raw.clone());
            let by_value = filter_list(list.clone(), None, &grant).unwrap();
            let by_text: serde_json::Value = serde_json::from_str(by_text.get()).unwrap();
            assert_eq!(by_text, by_value);
            let domain = serde_json::value::to_raw_value(&list["a"]).unwrap();
            let by_text = filter_list_raw(&domain, Some("a"), &grant)
                .unwrap()
                .unwrap()
                .unwrap_or_else(|| domain.clone());
            let by_text: serde_json::Value = serde_json::from_str(by_text.get()).unwrap();
            assert_eq!(
                by_text,
                filter_list(list["a"].clone(), Some("a"), &grant).unwrap()
            );
        }
        // Nothing hidden: the text is left as it is (and stays shared).
        assert!(filter_list_raw(&raw, None, &Grant::open())
            .unwrap()
            .unwrap()
            .is_none());
        let empty_domain = serde_json::value::to_raw_value(&json!({"a": {}})).unwrap();
        assert!(filter_list_raw(&empty_domain, None, &Grant::open())
            .unwrap()
            .unwrap()
            .is_some());
        // Cut short by maxDepth, or one MBean: the value filter's job.
        let cut = serde_json::value::to_raw_value(&json!({"a": "1"})).unwrap();
        assert!(filter_list_raw(&cut, None, &Grant::open()).is_none());
        assert!(filter_list_raw(&raw, Some("a/type=X"), &Grant::open()).is_none());
    }

    /// A grant whose one policy hides `mbeans` (`<filter>`).
    fn grant_hiding(mbeans: &[&str]) -> Grant {
        let hidden: String = mbeans
            .iter()
            .map(|m| format!("<mbean>{m}</mbean>"))
            .collect();
        let policy = crate::policy::Policy::parse(&format!(
            "<restrict><filter>{hidden}</filter></restrict>"
        ))
        .unwrap();
        Grant::of(vec![std::sync::Arc::new(policy)], vec!["r".into()])
    }
    #[test]
    fn cached_lists_keep_visible_mbeans_and_the_cache_entries_they_name() {
        // As Jolokia 2.6.0 answers list with listCache=true.
        let text = r#"{"cache":{"java.lang:GarbageCollector":{"attr":{"Valid":{}}},"java.lang:MemoryPool":{"attr":{"Usage":{}}}},
            "domains":{"java.lang":{"name=Copy,type=GarbageCollector":"java.lang:GarbageCollector",
                "name=Eden,type=MemoryPool":"java.lang:MemoryPool","type=Memory":{"attr":{"HeapMemoryUsage":{}}}},
              "jmxgate.test":{"type=Types":{"attr":{}}}}}"#;
        let raw = serde_json::value::RawValue::from_string(text.into()).unwrap();
        let grant = grant_hiding(&["java.lang:type=MemoryPool,*", "jmxgate.test:*"]);
        let kept: Value =
            serde_json::from_str(filter_cached_list_raw(&raw, &grant).unwrap().unwrap().get())
                .unwrap();
        assert_eq!(
            kept,
            json!({"domains":{"java.lang":{"name=Copy,type=GarbageCollector":"java.lang:GarbageCollector",
                        "type=Memory":{"attr":{"HeapMemoryUsage":{}}}}},
                   "cache":{"java.lang:GarbageCollector":{"attr":{"Valid":{}}}}})
        );
        // Everything visible: the text is kept as it is.
        assert!(filter_cached_list_raw(&raw, &Grant::open())
            .unwrap()
            .is_none());
        // Another shape is not this filter's.
        let plain = serde_json::value::RawValue::from_string(r#"{"java.lang":{}}"#.into()).unwrap();
        assert!(filter_cached_list_raw(&plain, &grant).is_none());
    }

    #[test]
    fn open_grants_see_everything() {
        let g = Grant::open();
        let v = json!({"a": {"type=X": {}}, "b": "1"});
        assert_eq!(filter_list(v.clone(), None, &g).unwrap(), v);
        let s = json!(["a:type=X", "b:type=Y"]);
        assert_eq!(filter_search(s.clone(), &g), s);
    }

    #[test]
    fn a_grant_without_policies_sees_nothing() {
        let g = Grant::default();
        assert_eq!(filter_search(json!(["a:type=X"]), &g), json!([]));
        assert_eq!(
            filter_list(json!({"a": {"type=X": {}}}), None, &g).unwrap(),
            json!({})
        );
        assert!(filter_list(json!({"attr": {}}), Some("a/type=X"), &g).is_err());
    }
}
