//! Issue 55, round 4, against real agents (of the generation under test:
//! the suite runs this file with 1.7.1 and with 2.6.0 agents): the
//! approval step of four-eyes can't be skipped through an MBean pattern,
//! a reviewer's reach, or another site's page; and what the new doors let
//! slip stays in.
//!
//! No assertion is on speed: deadlines are generous, outcomes are checked.

#[path = "common/access.rs"]
mod access;
mod common;

use std::path::Path;

use access::{level_on, As, LOGGING};
use common::{audit_records, targets_toml, users_file, Agent, Gateway};
use serde_json::{json, Value};

/// A gateway whose access store is open (it opens in a task).
async fn started(config: &str) -> Gateway {
    let gw = Gateway::start(config).await;
    gw.access_store_opened().await;
    gw
}

fn at<'a>(gw: &'a Gateway, user: &'a str) -> As<'a> {
    As {
        http: &gw.http,
        base: gw.url(""),
        user,
    }
}

fn read_only_policy(dir: &Path) -> String {
    let path = dir.join("read-only.xml");
    std::fs::write(
        &path,
        "<restrict><commands><command>read</command><command>list</command>\
         <command>search</command><command>version</command></commands></restrict>",
    )
    .unwrap();
    path.display().to_string()
}

/// The manual's worked example of four-eyes: `ops` runs a logger change
/// only with a lead's approval; `oncall` holds `ops` and the read-only
/// `viewers` on the same target.
fn four_eyes_config(dir: &Path, orders: &Agent) -> String {
    let users = users_file(
        dir,
        &[
            ("oncall", "pw", &["ops", "viewers"]),
            ("lead", "pw", &["leads"]),
        ],
    );
    format!(
        r#"auth = ["basic"]
{targets}
[auth.basic]
users_file = "{users}"

[access.store]
sqlite_file = "{db}"

[audit]
dir = "{audit}"

[[roles]]
name = "viewers"
targets = ["*"]
policy = "{read_only}"

[[roles]]
name = "leads"
targets = ["*"]
policy = "{read_only}"

[[roles]]
name = "ops"
targets = ["orders-*"]
approvers = ["leads"]
approval_required = ["exec {LOGGING} setLoggerLevel"]
"#,
        targets = targets_toml(&[orders]).replace(&format!("\"{}\"", orders.name), "\"orders-1\""),
        users = users.display(),
        db = dir.join("access.db").display(),
        audit = dir.join("audit").display(),
        read_only = read_only_policy(dir),
    )
}

/// An exec of `setLoggerLevel` on an MBean pattern that matches the
/// guarded Logging MBean.
fn level_by_pattern(target: &str, level: &str) -> Value {
    json!({"type":"exec","mbean":"java.util.logging:type=Loggin*","operation":"setLoggerLevel",
           "arguments":["global", level],"target":{"url":target}})
}

async fn mcp_call(gw: &Gateway, user: &str, tool: &str, arguments: Value) -> Value {
    let r = gw
        .http
        .post(gw.url("/mcp"))
        .basic_auth(user, Some("pw"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2025-06-18")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": tool, "arguments": arguments}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    common::parse(&r.text().await.unwrap())
}

/// Item 1: a caller holding the guarded role and a read-only one on the
/// same target can't run the guarded operation through a pattern, on the
/// Jolokia door or over MCP; the agent's logger level stays as it was.
/// Named, the same item waits for approval as before, and a pattern that
/// matches no guarded MBean still runs.
#[tokio::test(flavor = "multi_thread")]
async fn four_eyes_is_not_skipped_through_an_mbean_pattern() {
    let orders = Agent::start("r4-pattern-orders");
    let dir = tempfile::tempdir().unwrap();
    let gw = started(&four_eyes_config(dir.path(), &orders)).await;
    let oncall = at(&gw, "oncall");
    let original = level_on(&orders).await;

    let refused = oncall
        .jolokia(&level_by_pattern("orders-1", "FINEST"))
        .await;
    assert_eq!(refused["status"], 403, "{refused}");
    assert_eq!(
        refused["error_type"], "jmxgate.ApprovalRequired",
        "{refused}"
    );
    let message = refused["error"].as_str().unwrap();
    assert!(
        message.contains(LOGGING) && message.contains("per MBean"),
        "{message}"
    );
    assert_eq!(
        level_on(&orders).await,
        original,
        "nothing ran on the agent"
    );

    // In a bulk, beside a read that runs: it fails alone.
    let bulk = oncall
        .jolokia(&json!([
            level_by_pattern("orders-1", "FINEST"),
            {"type":"read","mbean":"java.lang:type=Runtime","attribute":"Uptime","target":{"url":"orders-1"}}
        ]))
        .await;
    assert_eq!(bulk[0]["error_type"], "jmxgate.ApprovalRequired", "{bulk}");
    assert_eq!(bulk[1]["status"], 200, "{bulk}");

    // Over MCP, the same.
    let over_mcp = mcp_call(
        &gw,
        "oncall",
        "execute_operation",
        json!({"target": "orders-1", "mbean": "java.util.logging:type=Loggin*",
               "operation": "setLoggerLevel", "arguments": ["global", "FINEST"]}),
    )
    .await;
    let text = over_mcp.to_string();
    assert!(text.contains("jmxgate.ApprovalRequired"), "{text}");
    assert_eq!(level_on(&orders).await, original, "nothing ran over MCP");

    // Named, it waits for a request (made for it), as the manual says.
    let named = oncall
        .jolokia(&access::set_level("orders-1", "FINEST"))
        .await;
    assert_eq!(named["error_type"], "jmxgate.ApprovalRequired", "{named}");
    assert!(named["error"].as_str().unwrap().contains("ar-"), "{named}");

    // A pattern that matches no guarded MBean runs as the agent runs it.
    let unguarded = oncall
        .jolokia(&json!({"type":"exec","mbean":"java.lang:type=Threadin*",
                          "operation":"resetPeakThreadCount","target":{"url":"orders-1"}}))
        .await;
    let direct = common::direct(
        &orders,
        &json!({"type":"exec","mbean":"java.lang:type=Threadin*","operation":"resetPeakThreadCount"}),
    )
    .await;
    assert_eq!(
        unguarded["status"], direct["status"],
        "{unguarded} vs {direct}"
    );
    assert_eq!(
        unguarded["error_type"], direct["error_type"],
        "{unguarded} vs {direct}"
    );

    drop(gw);
    let records = audit_records(&dir.path().join("audit"));
    let pattern_record = records
        .iter()
        .find(|r| r["mbean"] == "java.util.logging:type=Loggin*")
        .unwrap_or_else(|| panic!("{records:#?}"));
    assert_eq!(pattern_record["decision"], "denied", "{pattern_record}");
}

/// Item 11: the MCP `explain` tool marks a four-eyes item as
/// `/jmxgate/explain` does: allowed, but waiting for approval, in the
/// same words.
#[tokio::test(flavor = "multi_thread")]
async fn mcp_explain_marks_an_item_that_waits_for_approval() {
    let orders = Agent::start("r4-explain-orders");
    let dir = tempfile::tempdir().unwrap();
    let gw = started(&four_eyes_config(dir.path(), &orders)).await;
    let oncall = at(&gw, "oncall");
    let item = access::set_level("orders-1", "FINE");
    let (status, by_endpoint) = oncall.post("/jmxgate/explain", &item).await;
    assert_eq!(status, 200, "{by_endpoint}");
    let expected = &by_endpoint["approval_required"];
    assert_eq!(
        expected,
        &json!(format!(
            "role ops: approval_required \"exec {LOGGING} setLoggerLevel\""
        )),
        "{by_endpoint}"
    );
    let over_mcp = mcp_call(
        &gw,
        "oncall",
        "explain",
        json!({"target": "orders-1", "type": "exec", "mbean": LOGGING,
               "operation": "setLoggerLevel"}),
    )
    .await;
    let result = &over_mcp["result"]["structuredContent"];
    assert_eq!(result["decision"], "allow", "{over_mcp}");
    assert_eq!(
        &result["results"][0]["approval_required"], expected,
        "{over_mcp}"
    );
    // An item that runs at once carries no such mark.
    let gc = json!({"target": "orders-1", "type": "exec", "mbean": "java.lang:type=Memory",
                    "operation": "gc"});
    let free = mcp_call(&gw, "oncall", "explain", gc).await;
    let result = &free["result"]["structuredContent"]["results"][0];
    assert_eq!(result["decision"], "allow", "{free}");
    assert!(result.get("approval_required").is_none(), "{free}");
}
