//! Step 7, merge: puts every answer back at its item's index, whichever
//! agent produced it and in whatever order the agents finished.

use serde_json::Value;

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

/// Sets the echoed request: the client's own request (what it sent, minus
/// credentials) replaces what the agent saw, or is removed when the client
/// asked for `includeRequest=false`.
pub fn echo_request(answer: &mut Response, echo: &Value, include_request: bool) {
    if include_request {
        answer.set_request(echo);
    } else {
        answer.remove("request");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(v: i64) -> Response {
        Response::value(&v, 0)
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
        a.set_request(&json!({"type":"agent-saw-this"}));
        echo_request(&mut a, &json!({"type":"read","target":{"url":"x"}}), true);
        assert_eq!(
            a.get("request").unwrap().get(),
            r#"{"type":"read","target":{"url":"x"}}"#
        );
        echo_request(&mut a, &json!({}), false);
        assert!(a.get("request").is_none());
    }
}
