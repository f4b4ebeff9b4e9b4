//! A tool result bounded for an assistant: at most `max` bytes of JSON.
//! What does not fit is left out from the end (array elements, object
//! members, the tail of a long string), and a note says where and how
//! much, so the assistant can narrow its request instead of guessing.

use serde_json::{Map, Value};

/// Returns `value` cut to at most about `max` serialised bytes, and a note
/// when anything was cut.
pub fn bound(value: Value, max: usize) -> (Value, Option<String>) {
    let size = json_len(&value);
    if size <= max {
        return (value, None);
    }
    let mut cuts = Vec::new();
    // The note is added beside the value: keep room for it.
    let budget = max.saturating_sub(NOTE_ROOM);
    let fitted = match value {
        // One entry per target: each gets its share, so no target is
        // left out whole for another's long answer.
        Value::Object(mut o)
            if o.get("results")
                .and_then(Value::as_array)
                .is_some_and(|r| r.len() > 1) =>
        {
            let Some(Value::Array(results)) = o.remove("results") else {
                unreachable!("checked above")
            };
            let rest = json_len(&Value::Object(o.clone())) + "\"results\":,".len();
            let results = fair(results, budget.saturating_sub(rest), &mut cuts);
            o.insert("results".into(), results);
            Value::Object(o)
        }
        value => fit(value, budget, "", &mut cuts).unwrap_or(Value::Null),
    };
    let mut note = format!(
        "answer cut from {size} to at most {max} bytes (mcp.max_result_bytes); narrow the request for the rest"
    );
    for (path, what) in cuts.iter().take(MAX_CUTS_NAMED) {
        let at = if path.is_empty() { "(top)" } else { path };
        note.push_str(&format!("; {at}: {what}"));
    }
    if cuts.len() > MAX_CUTS_NAMED {
        note.push_str(&format!("; and {} more cuts", cuts.len() - MAX_CUTS_NAMED));
    }
    (fitted, Some(note))
}

const NOTE_ROOM: usize = 512;
const MAX_CUTS_NAMED: usize = 5;

/// The serialised size of `value`, in bytes.
pub fn json_len(value: &Value) -> usize {
    serde_json::to_vec(value).map_or(0, |v| v.len())
}

/// Per-target entries within `budget`, shared out evenly: entries smaller
/// than their share are kept whole and what they leave over goes to the
/// others. An entry with no room keeps its target, its other members
/// emptied.
fn fair(results: Vec<Value>, budget: usize, cuts: &mut Vec<(String, String)>) -> Value {
    let n = results.len();
    let sizes: Vec<usize> = results.iter().map(json_len).collect();
    let mut by_size: Vec<usize> = (0..n).collect();
    by_size.sort_by_key(|&i| sizes[i]);
    let mut left = budget.saturating_sub(2 + n);
    let mut shares = vec![0; n];
    for (done, &i) in by_size.iter().enumerate() {
        let share = left / (n - done);
        shares[i] = sizes[i].min(share);
        left -= shares[i];
    }
    let kept = results
        .into_iter()
        .enumerate()
        .map(|(i, entry)| {
            if sizes[i] <= shares[i] {
                return entry;
            }
            let path = format!("results[{i}]");
            let emptied = emptied(&entry);
            fit(entry, shares[i], &path, cuts).unwrap_or_else(|| {
                cuts.push((path, "left out but for its target".into()));
                emptied
            })
        })
        .collect();
    Value::Array(kept)
}

/// An entry with only its `target`, and its other members empty.
fn emptied(entry: &Value) -> Value {
    let Value::Object(o) = entry else {
        return Value::Null;
    };
    let kept = o
        .iter()
        .map(|(k, v)| {
            let v = match (k.as_str(), v) {
                ("target", v) => v.clone(),
                (_, Value::Array(_)) => Value::Array(Vec::new()),
                (_, Value::Object(_)) => Value::Object(Map::new()),
                (_, v) => v.clone(),
            };
            (k.clone(), v)
        })
        .collect();
    Value::Object(kept)
}

/// `value` within `budget` bytes, or `None` when not even a cut form fits.
fn fit(value: Value, budget: usize, path: &str, cuts: &mut Vec<(String, String)>) -> Option<Value> {
    if json_len(&value) <= budget {
        return Some(value);
    }
    match value {
        Value::Array(items) => {
            let total = items.len();
            let mut kept = Vec::new();
            let mut used = 2;
            for (i, item) in items.into_iter().enumerate() {
                let room = budget.saturating_sub(used + 1);
                let size = json_len(&item);
                if size <= room {
                    used += size + 1;
                    kept.push(item);
                    continue;
                }
                // A list's text entry (an MBean name) is whole or left
                // out: a name cut short names nothing.
                if !item.is_string() {
                    if let Some(part) = fit(item, room, &format!("{path}[{i}]"), cuts) {
                        kept.push(part);
                    }
                }
                break;
            }
            let omitted = total - kept.len();
            if omitted > 0 {
                cuts.push((
                    path.to_string(),
                    format!("{omitted} of {total} entries left out"),
                ));
            }
            Some(Value::Array(kept))
        }
        Value::Object(members) => {
            let total = members.len();
            let mut kept = Map::new();
            let mut used = 2;
            for (key, member) in members {
                let key_len = json_len(&Value::String(key.clone())) + 1;
                let room = budget.saturating_sub(used + key_len + 1);
                let size = json_len(&member);
                if size <= room {
                    used += key_len + size + 1;
                    kept.insert(key, member);
                    continue;
                }
                let inner = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                if let Some(part) = fit(member, room, &inner, cuts) {
                    kept.insert(key, part);
                }
                break;
            }
            let omitted = total - kept.len();
            if omitted > 0 {
                cuts.push((
                    path.to_string(),
                    format!("{omitted} of {total} members left out"),
                ));
            }
            Some(Value::Object(kept))
        }
        Value::String(s) if budget > 16 => {
            // Characters, not bytes, so the cut is never inside one; escapes
            // make the JSON longer than the text, so shrink until it fits.
            let mut keep = budget.saturating_sub(8).min(s.chars().count());
            loop {
                let cut: String = s.chars().take(keep).collect::<String>() + "…";
                if json_len(&Value::String(cut.clone())) <= budget || keep == 0 {
                    cuts.push((
                        path.to_string(),
                        format!(
                            "string cut after {keep} of {} characters",
                            s.chars().count()
                        ),
                    ));
                    return Some(Value::String(cut));
                }
                keep = keep * 3 / 4;
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn small_values_pass_unchanged() {
        let v = json!({"results": [{"target": "a", "mbeans": ["x:a=b"]}]});
        assert_eq!(bound(v.clone(), 1000), (v, None));
    }

    #[test]
    fn long_lists_keep_their_head_and_say_how_many_were_left_out() {
        let names: Vec<String> = (0..5000).map(|i| format!("d:type=T,name={i}")).collect();
        let v = json!({"results": [{"target": "a", "mbeans": names}]});
        let (cut, note) = bound(v, 4096);
        assert!(json_len(&cut) <= 4096, "{}", json_len(&cut));
        let kept = cut["results"][0]["mbeans"].as_array().unwrap();
        assert!(kept.len() > 50, "{}", kept.len());
        assert_eq!(kept[0], "d:type=T,name=0");
        let note = note.unwrap();
        assert!(
            note.contains(&format!(
                "results[0].mbeans: {} of 5000 entries left out",
                5000 - kept.len()
            )),
            "{note}"
        );
        assert!(note.contains("mcp.max_result_bytes"), "{note}");
    }

    #[test]
    fn every_target_keeps_its_share() {
        let names = |t: usize, n: usize| -> Vec<String> {
            (0..n).map(|i| format!("d{t}:type=T,name={i}")).collect()
        };
        let v = json!({"results": [
            {"target": "a", "mbeans": names(0, 3000)},
            {"target": "b", "mbeans": names(1, 3000)},
            {"target": "c", "mbeans": names(2, 3)},
        ]});
        let (cut, note) = bound(v, 8192);
        assert!(json_len(&cut) <= 8192, "{}", json_len(&cut));
        let kept = |i: usize| cut["results"][i]["mbeans"].as_array().unwrap().len();
        // The small one whole, the two big ones about evenly.
        assert_eq!(kept(2), 3);
        assert!(kept(0) > 50 && kept(1) > 50, "{} {}", kept(0), kept(1));
        assert!(kept(0).abs_diff(kept(1)) <= 2, "{} {}", kept(0), kept(1));
        let note = note.unwrap();
        assert!(
            note.contains("results[0].mbeans") && note.contains("results[1].mbeans"),
            "{note}"
        );
    }

    #[test]
    fn a_long_string_is_cut_on_a_character_boundary() {
        let v = json!({"value": "é\"".repeat(10_000)});
        let (cut, note) = bound(v, 2048);
        assert!(json_len(&cut) <= 2048);
        assert!(cut["value"].as_str().unwrap().ends_with('…'));
        assert!(note.unwrap().contains("value: string cut after"));
    }

    #[test]
    fn members_after_the_cut_are_counted() {
        let v: Map<String, Value> = (0..100)
            .map(|i| (format!("attr{i}"), json!("x".repeat(100))))
            .collect();
        let (cut, note) = bound(Value::Object(v), 2048);
        let kept = cut.as_object().unwrap().len();
        assert!(kept < 100 && kept > 5, "{kept}");
        assert!(note.unwrap().contains("of 100 members left out"));
    }
}
