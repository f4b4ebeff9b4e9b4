//! MCP logging: a caller who asks for it (`logging/setLevel`, or the
//! `io.modelcontextprotocol/logLevel` of a request's `_meta` from protocol
//! 2026-07-28 on) gets a `notifications/message` for each of its tool
//! calls: what the gateway recorded of it (tool, outcome, request id, the
//! text of a refusal), at `info` when it ran, `warning` when some target
//! or attribute failed, `error` when the call failed. The door keeps no
//! session, so a level set with `logging/setLevel` is kept per caller
//! (who they authenticated as, by which method) on this replica for an
//! hour after its last use; a request's own `_meta` level beats it.
//! Nothing is sent to a caller who asked for no level: a notification
//! turns the JSON answer into an event stream.

#![allow(deprecated)] // rmcp marks logging deprecated by SEP-2577; clients still use it.

use std::time::Duration;

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use serde_json::{json, Value};

/// Callers whose level is kept at once; the least recently used go first.
const MAX_CALLERS: u64 = 10_000;
const KEPT_FOR: Duration = Duration::from_secs(3600);

/// The levels callers set, in the MCP door's room (`app` puts it in).
#[derive(Clone)]
pub struct LogLevels(moka::sync::Cache<String, LoggingLevel>);

impl Default for LogLevels {
    fn default() -> Self {
        LogLevels(
            moka::sync::Cache::builder()
                .max_capacity(MAX_CALLERS)
                .time_to_idle(KEPT_FOR)
                .build(),
        )
    }
}

impl LogLevels {
    pub fn set(&self, caller: &str, level: LoggingLevel) {
        self.0.insert(caller.to_string(), level);
    }

    pub fn get(&self, caller: &str) -> Option<LoggingLevel> {
        self.0.get(caller)
    }
}

fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// How a tool call ended, for its notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Ok,
    /// It ran, but some target or attribute answered an error.
    Partly,
    Failed,
}

impl Ended {
    /// From the structured content of a call that ran: any `error` entry
    /// among its results, or any attribute value holding one.
    pub fn of_content(content: &Value) -> Ended {
        let failed = |v: &Value| v.get("error").is_some();
        let partly = content["errors"].as_array().is_some_and(|e| !e.is_empty())
            || content["results"].as_array().is_some_and(|results| {
                results.iter().any(|r| {
                    failed(r)
                        || r["values"].as_object().is_some_and(|values| {
                            values.values().any(|v| {
                                failed(v) || v.as_object().is_some_and(|m| m.values().any(failed))
                            })
                        })
                })
            });
        if partly {
            Ended::Partly
        } else {
            Ended::Ok
        }
    }

    fn level(self) -> LoggingLevel {
        match self {
            Ended::Ok => LoggingLevel::Info,
            Ended::Partly => LoggingLevel::Warning,
            Ended::Failed => LoggingLevel::Error,
        }
    }
}

/// The notification of one tool call for a caller who asked for `wanted`
/// and above; `None` when the call's level is below it (or none asked).
pub fn of_call(
    wanted: Option<LoggingLevel>,
    tool: &str,
    request_id: &str,
    ended: Ended,
    error: Option<&str>,
) -> Option<LoggingMessageNotificationParam> {
    let level = ended.level();
    if rank(level) < rank(wanted?) {
        return None;
    }
    let mut data = json!({
        "tool": tool,
        "request_id": request_id,
        "outcome": match ended {
            Ended::Ok => "ok",
            Ended::Partly => "partly failed",
            Ended::Failed => "failed",
        },
    });
    if let Some(error) = error {
        data["error"] = json!(error.chars().take(500).collect::<String>());
    }
    Some(LoggingMessageNotificationParam::new(level, data).with_logger("jmxgate"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_told_at_its_level_and_above_what_was_asked() {
        let tell = |wanted, ended| of_call(wanted, "read_attributes", "r1", ended, None);
        assert!(
            tell(None, Ended::Failed).is_none(),
            "nothing asked, nothing sent"
        );
        assert!(tell(Some(LoggingLevel::Warning), Ended::Ok).is_none());
        let told = tell(Some(LoggingLevel::Warning), Ended::Partly).unwrap();
        assert_eq!(told.level, LoggingLevel::Warning);
        assert_eq!(told.data["outcome"], "partly failed");
        let told = tell(Some(LoggingLevel::Debug), Ended::Ok).unwrap();
        assert_eq!(
            (told.level, told.logger.as_deref()),
            (LoggingLevel::Info, Some("jmxgate"))
        );
        assert_eq!(
            told.data,
            json!({"tool": "read_attributes", "request_id": "r1", "outcome": "ok"})
        );
        let failed = of_call(
            Some(LoggingLevel::Error),
            "x",
            "r",
            Ended::Failed,
            Some("no"),
        )
        .unwrap();
        assert_eq!(failed.data["error"], "no");
    }

    #[test]
    fn failures_inside_an_answer_make_it_partly_failed() {
        for (content, ended) in [
            (
                json!({"results": [{"target": "a", "values": {"A": 1}}]}),
                Ended::Ok,
            ),
            (
                json!({"results": [{"target": "a", "error": "down"}]}),
                Ended::Partly,
            ),
            (
                json!({"results": [{"target": "a", "values": {"A": {"error": "x"}}}]}),
                Ended::Partly,
            ),
            (
                json!({"results": [{"target": "a", "values": {"d:k=v": {"A": {"error": "x"}}}}]}),
                Ended::Partly,
            ),
            (json!({"errors": [{"error": "x"}]}), Ended::Partly),
            (json!({"target": "a", "result": 3}), Ended::Ok),
        ] {
            assert_eq!(Ended::of_content(&content), ended, "{content}");
        }
    }

    #[test]
    fn a_level_is_kept_per_caller() {
        let levels = LogLevels::default();
        levels.set("basic:alice", LoggingLevel::Debug);
        assert_eq!(levels.get("basic:alice"), Some(LoggingLevel::Debug));
        assert_eq!(levels.get("basic:bob"), None);
    }
}
