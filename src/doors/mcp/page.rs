//! Pages of a `search_mbeans` answer cut by `mcp.max_result_bytes`: each
//! target's MBean names are sorted, and a cut answer carries
//! `next_cursor`, which names how many of each target's names were shown.
//! The next call with that `cursor` searches again and shows the rest.
//! Stateless: the cursor holds the offsets, nothing is kept here. Pure.

use std::collections::BTreeMap;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Value};

/// How many names of each target earlier pages showed.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Page(BTreeMap<String, usize>);

impl Page {
    pub fn decode(cursor: &str) -> Result<Page, String> {
        let bytes = URL_SAFE_NO_PAD
            .decode(cursor.trim())
            .map_err(|_| "not a cursor this gateway gave".to_string())?;
        serde_json::from_slice(&bytes)
            .map(Page)
            .map_err(|_| "not a cursor this gateway gave".to_string())
    }

    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&self.0).expect("a map of numbers"))
    }

    fn offset(&self, target: &str) -> usize {
        self.0.get(target).copied().unwrap_or(0)
    }
}

fn entries(value: &Value) -> impl Iterator<Item = &Value> {
    value["results"].as_array().into_iter().flatten()
}

fn names(entry: &Value) -> &[Value] {
    entry["mbeans"].as_array().map_or(&[], Vec::as_slice)
}

/// Sorts each target's names and leaves out those earlier pages showed
/// (`skipped` says how many).
pub fn apply(value: &mut Value, page: &Page) {
    let Some(results) = value["results"].as_array_mut() else {
        return;
    };
    for entry in results {
        let target = entry["target"].as_str().unwrap_or_default().to_string();
        let Some(names) = entry.get_mut("mbeans").and_then(Value::as_array_mut) else {
            continue;
        };
        names.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
        let skip = page.offset(&target).min(names.len());
        names.drain(..skip);
        if skip > 0 {
            entry["skipped"] = json!(skip);
        }
    }
}

/// The page after `shown` (the bounded form of `whole`), when some
/// target's names were left out. A name cut short does not count as shown.
pub fn next(whole: &Value, shown: &Value, page: &Page) -> Option<Page> {
    let mut offsets = BTreeMap::new();
    let mut more = false;
    for entry in entries(whole) {
        let Some(target) = entry["target"].as_str() else {
            continue;
        };
        let all = names(entry);
        let kept = entries(shown)
            .find(|e| e["target"] == target)
            .map_or(0, |e| {
                names(e)
                    .iter()
                    .zip(all)
                    .take_while(|(shown, whole)| shown == whole)
                    .count()
            });
        more |= kept < all.len();
        offsets.insert(target.to_string(), page.offset(target) + kept);
    }
    more.then_some(Page(offsets))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_show_every_name_once_in_order() {
        let whole = |page: &Page| {
            let mut v = json!({"results": [
                {"target": "a", "mbeans": ["d:n=3", "d:n=1", "d:n=2", "d:n=4"]},
                {"target": "b", "mbeans": ["d:n=9"]},
                {"target": "c", "status": 503, "error": "down"}
            ]});
            apply(&mut v, page);
            v
        };
        let mut page = Page::default();
        let mut seen = Vec::new();
        for _ in 0..10 {
            let all = whole(&page);
            // A bound that keeps two names of a, the second cut short.
            let mut shown = all.clone();
            let a = shown["results"][0]["mbeans"].as_array_mut().unwrap();
            a.truncate(2);
            if a.len() == 2 {
                a[1] = json!("d:n…");
            }
            seen.extend(
                names(&shown["results"][0])
                    .iter()
                    .filter(|n| !n.as_str().unwrap().ends_with('…'))
                    .cloned(),
            );
            match next(&all, &shown, &page) {
                Some(p) => page = Page::decode(&p.encode()).unwrap(),
                None => break,
            }
        }
        assert_eq!(seen, ["d:n=1", "d:n=2", "d:n=3", "d:n=4"]);
    }

    #[test]
    fn a_cursor_from_elsewhere_is_refused() {
        assert!(Page::decode("not base64!").is_err());
        assert!(Page::decode(&URL_SAFE_NO_PAD.encode("[1,2]")).is_err());
    }
}
