//! Step 7, merge: puts every answer back at its item's index, whichever
//! agent produced it and in whatever order the agents finished.

use crate::protocol::{ProtocolError, Response};

/// Assembles `count` answers by index. An index nobody answered (a bug,
/// never expected) becomes a 500 answer rather than a shifted array.
pub fn merge(count: usize, answers: impl IntoIterator<Item = (usize, Response)>) -> Vec<Response> {
    let mut slots: Vec<Option<Response>> = vec![None; count];
    for (index, answer) in answers {
        if let Some(slot) = slots.get_mut(index) {
            *slot = Some(answer);
        }
    }
    slots
        .into_iter()
        .map(|slot| {
            slot.unwrap_or_else(|| {
                Response::error(&ProtocolError::new(
                    500,
                    "jmxgate.InternalError",
                    "No answer was produced for this item",
                ))
            })
        })
        .collect()
}

/// One item sent to several targets through a selector becomes one answer
/// whose value is keyed by target name, the way a pattern read is keyed by
/// MBean. Without `ignoreErrors`, the first failing target (in target
/// order) fails the whole item, as one failing MBean fails a pattern read;
/// with it, each failed target holds its error object and the rest stand.
/// The timestamp is the latest of the targets' answers, `now` when none
/// has one (every target failed: error answers carry none).
pub fn merge_fan_out(
    per_target: Vec<(String, Response)>,
    ignore_errors: bool,
    now: u64,
) -> Response {
    if !ignore_errors {
        if let Some((name, failed)) = per_target.iter().find(|(_, a)| a.is_error()) {
            let message = failed.error_text();
            let mut error = failed.clone();
            error.remove("request");
            if !message.starts_with("Target \"") {
                error.set("error", &format!("Target \"{name}\": {message}"));
            }
            return error;
        }
    }
    // Written as JSON text from each answer's own raw fields: no JSON tree
    // per target (a fan-out to 100,000 targets held every value twice).
    let mut timestamp = 0u64;
    let mut text = String::with_capacity(
        per_target
            .iter()
            .map(|(name, answer)| {
                name.len() + answer.get("value").map_or(64, |v| v.get().len()) + 4
            })
            .sum::<usize>()
            + 2,
    );
    text.push('{');
    for (i, (name, answer)) in per_target.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&serde_json::to_string(name).expect("a string serialises"));
        text.push(':');
        timestamp = timestamp.max(answer.timestamp().unwrap_or(0));
        if answer.is_error() {
            text.push('{');
            let mut first = true;
            for key in ["error_type", "error", "status"] {
                if let Some(v) = answer.get(key) {
                    if !first {
                        text.push(',');
                    }
                    first = false;
                    text.push_str(&format!("\"{key}\":{}", v.get()));
                }
            }
            text.push('}');
        } else {
            text.push_str(answer.get("value").map_or("null", |v| v.get()));
        }
    }
    text.push('}');
    drop(per_target);
    if timestamp == 0 {
        timestamp = now;
    }
    let value = serde_json::value::RawValue::from_string(text).expect("joined JSON values");
    Response::value(&*value, timestamp)
}

/// Sets the echoed request: the client's own request (what it sent, minus
/// credentials) replaces what the agent saw, or is removed when the client
/// asked for `includeRequest=false`.
pub fn echo_request(
    answer: &mut Response,
    echo: &serde_json::value::RawValue,
    include_request: bool,
) {
    if include_request {
        answer.set_request(echo);
    } else {
        answer.remove("request");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn answer(v: i64) -> Response {
        Response::value(&v, 0)
    }

    #[test]
    fn fan_outs_are_keyed_by_target_and_fail_whole_unless_told() {
        let failed = Response::error(&ProtocolError::new(502, "jmxgate.AgentUnreachable", "down"));
        let per_target = || {
            vec![
                ("a".to_string(), Response::value(&json!({"x": 1}), 7)),
                ("b".to_string(), failed.clone()),
                ("c".to_string(), Response::value(&2, 9)),
            ]
        };
        let whole = merge_fan_out(per_target(), false, 5);
        assert_eq!(whole.status(), Some(502));
        assert_eq!(whole.error_text(), "Target \"b\": down");
        let each = merge_fan_out(per_target(), true, 5);
        assert_eq!(each.status(), Some(200));
        let v: Value = serde_json::from_str(each.get("value").unwrap().get()).unwrap();
        assert_eq!(
            v,
            json!({"a": {"x": 1}, "b": {"error_type": "jmxgate.AgentUnreachable", "error": "down", "status": 502}, "c": 2})
        );
        assert_eq!(each.get("timestamp").unwrap().get(), "9");
        // Every target failed: the merged answer still has a time.
        let all_failed = vec![("a".to_string(), failed.clone()), ("b".to_string(), failed)];
        let each = merge_fan_out(all_failed, true, 5);
        assert_eq!(each.status(), Some(200));
        assert_eq!(each.get("timestamp").unwrap().get(), "5");
    }

    #[test]
    fn answers_land_at_their_index() {
        let merged = merge(3, vec![(2, answer(2)), (0, answer(0)), (1, answer(1))]);
        let values: Vec<&str> = merged
            .iter()
            .map(|r| r.get("value").unwrap().get())
            .collect();
        assert_eq!(values, vec!["0", "1", "2"]);
    }

    #[test]
    fn a_missing_answer_is_an_error_in_place() {
        let merged = merge(2, vec![(1, answer(1))]);
        assert_eq!(merged[0].status(), Some(500));
        assert_eq!(merged[1].status(), Some(200));
    }

    #[test]
    fn echo_is_set_or_removed() {
        let mut a = answer(1);
        a.set_request(&serde_json::value::to_raw_value(&json!({"type":"agent-saw-this"})).unwrap());
        echo_request(
            &mut a,
            &serde_json::value::to_raw_value(&json!({"type":"read","target":{"url":"x"}})).unwrap(),
            true,
        );
        assert_eq!(
            a.get("request").unwrap().get(),
            r#"{"type":"read","target":{"url":"x"}}"#
        );
        echo_request(
            &mut a,
            &serde_json::value::to_raw_value(&json!({})).unwrap(),
            false,
        );
        assert!(a.get("request").is_none());
    }
}
