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
/// whose value is keyed by target name (in the selector's target order),
/// the way a pattern read is keyed by MBean. Without `ignoreErrors`, the
/// first failing target (in target order) fails the whole item, as one
/// failing MBean fails a pattern read; with it, each failed target holds
/// its error object and the rest stand. The timestamp is the latest of
/// the targets' answers, `now` when none has one (every target failed:
/// error answers carry none).
///
/// Answers are added as they arrive, by the target's position, and kept
/// only as the JSON text they contribute, side by side in one buffer: a
/// fan-out to 100,000 targets holds no answer object per target.
pub struct FanOutAnswers {
    ignore_errors: bool,
    /// Every target's contribution, in the order they arrived.
    text: String,
    /// By position: where its contribution is in `text`.
    spans: Vec<Option<(u32, u32)>>,
    timestamp: u64,
    /// Without `ignoreErrors`: the failed answer of the lowest position
    /// so far; once there is one, no text is kept.
    first_error: Option<(usize, Response)>,
}

impl FanOutAnswers {
    pub fn new(targets: usize, ignore_errors: bool) -> FanOutAnswers {
        FanOutAnswers {
            ignore_errors,
            text: String::new(),
            spans: vec![None; targets],
            timestamp: 0,
            first_error: None,
        }
    }

    /// The answer of the target at `position`.
    pub fn add(&mut self, position: usize, answer: Response) {
        self.timestamp = self.timestamp.max(answer.timestamp().unwrap_or(0));
        if answer.is_error() && !self.ignore_errors {
            if self.first_error.as_ref().is_none_or(|(p, _)| position < *p) {
                self.first_error = Some((position, answer));
            }
            self.text = String::new();
            return;
        }
        if self.first_error.is_some() || position >= self.spans.len() {
            return;
        }
        self.make_room(&answer);
        let start = self.text.len();
        if answer.is_error() {
            self.text.push('{');
            let mut first = true;
            for key in ["error_type", "error", "status"] {
                if let Some(v) = answer.get(key) {
                    if !first {
                        self.text.push(',');
                    }
                    first = false;
                    self.text.push('"');
                    self.text.push_str(key);
                    self.text.push_str("\":");
                    self.text.push_str(v.get());
                }
            }
            self.text.push('}');
        } else {
            self.text
                .push_str(answer.get("value").map_or("null", |v| v.get()));
        }
        // Past 4 GiB of answers the span can't be held: the answer bounds
        // (`max_response_bytes`, the buffer budget) stop that long before.
        if let (Ok(at), Ok(len)) = (u32::try_from(start), u32::try_from(self.text.len() - start)) {
            self.spans[position] = Some((at, len));
        }
    }

    /// Grows the buffer by what the targets still to answer are likely to
    /// need (the average so far), not by doubling: at 100,000 targets a
    /// doubled buffer and the copy it replaces were several answers' worth.
    fn make_room(&mut self, answer: &Response) {
        let coming = answer.get("value").map_or(128, |v| v.get().len()) + 2;
        if self.text.capacity() - self.text.len() >= coming {
            return;
        }
        let answered = self.spans.iter().filter(|s| s.is_some()).count().max(1);
        let average = self.text.len() / answered + 1;
        let left = self.spans.len().saturating_sub(answered);
        self.text
            .reserve_exact(coming.max(average * left + average * left / 16));
    }

    /// The merged answer; `name` gives each position's target name and
    /// `missing` the answer of a target that gave none.
    pub fn finish<'n>(
        self,
        name: impl Fn(usize) -> &'n str,
        missing: impl Fn() -> Response,
        now: u64,
    ) -> Response {
        if let Some((position, failed)) = self.first_error {
            return whole_failure(name(position), failed);
        }
        if !self.ignore_errors {
            if let Some(position) = self.spans.iter().position(Option::is_none) {
                return whole_failure(name(position), missing());
            }
        }
        let names: usize = (0..self.spans.len()).map(|i| name(i).len() + 4).sum();
        let mut out = String::with_capacity(self.text.len() + names + 2);
        let mut gap = None;
        out.push('{');
        for (position, span) in self.spans.iter().enumerate() {
            if position > 0 {
                out.push(',');
            }
            out.push_str(&serde_json::to_string(name(position)).expect("a string serialises"));
            out.push(':');
            match span {
                Some((at, len)) => {
                    let (at, len) = (*at as usize, *len as usize);
                    out.push_str(&self.text[at..at + len]);
                }
                None => {
                    let text = gap.get_or_insert_with(|| {
                        let mut text = String::new();
                        let mut one = FanOutAnswers::new(1, true);
                        one.add(0, missing());
                        text.push_str(&one.text);
                        text
                    });
                    out.push_str(text);
                }
            }
        }
        out.push('}');
        drop(self.text);
        let timestamp = match self.timestamp {
            0 => now,
            t => t,
        };
        let value = serde_json::value::RawValue::from_string(out).expect("joined JSON values");
        Response::value_text(value, timestamp)
    }
}

/// The whole item fails with one target's error, which names it.
fn whole_failure(name: &str, failed: Response) -> Response {
    let message = failed.error_text();
    let mut error = failed;
    error.remove("request");
    if !message.starts_with("Target \"") {
        error.set("error", &format!("Target \"{name}\": {message}"));
    }
    error
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

    /// [`FanOutAnswers`] for answers all at hand, by target name.
    fn merge_fan_out(
        per_target: Vec<(String, Response)>,
        ignore_errors: bool,
        now: u64,
    ) -> Response {
        let mut answers = FanOutAnswers::new(per_target.len(), ignore_errors);
        let mut names = Vec::with_capacity(per_target.len());
        for (position, (name, answer)) in per_target.into_iter().enumerate() {
            names.push(name);
            answers.add(position, answer);
        }
        answers.finish(|i| &names[i], Response::default, now)
    }

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
    fn fan_out_answers_in_any_arrival_order_merge_in_target_order() {
        let names = ["a", "b", "c"];
        let failed = |m: &str| Response::error(&ProtocolError::new(502, "x.Down", m));
        let mut each = FanOutAnswers::new(3, true);
        each.add(2, Response::value(&3, 1));
        each.add(0, Response::value(&json!({"k": [1]}), 2));
        each.add(1, failed("b down"));
        let merged = each.finish(|i| names[i], Response::default, 9);
        assert_eq!(
            merged.get("value").unwrap().get(),
            r#"{"a":{"k":[1]},"b":{"error_type":"x.Down","error":"b down","status":502},"c":3}"#
        );
        assert_eq!(merged.timestamp(), Some(2));
        // Without ignoreErrors the first failure in target order decides,
        // whenever it arrives.
        let mut whole = FanOutAnswers::new(3, false);
        whole.add(2, failed("c down"));
        whole.add(0, Response::value(&1, 1));
        whole.add(1, failed("b down"));
        let merged = whole.finish(|i| names[i], Response::default, 9);
        assert_eq!(merged.error_text(), "Target \"b\": b down");
        // A target with no answer at all fails the item, naming it.
        let mut short = FanOutAnswers::new(2, false);
        short.add(0, Response::value(&1, 1));
        let missing = || Response::error(&ProtocolError::new(500, "x.None", "no answer"));
        let merged = short.finish(|i| names[i], missing, 9);
        assert_eq!(merged.error_text(), "Target \"b\": no answer");
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
