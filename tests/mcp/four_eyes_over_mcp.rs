//! The MCP door and four-eyes: explain marks an item that waits for
//! approval, and a batch runs at most `max_bulk_items` calls.
//!
//! Found by issue 55's hardening round 4 (formerly tests/hardening_round4.rs).

use crate::access;
use crate::common;
use crate::four_eyes::{at, four_eyes_config, mcp_call, read_only_policy, started};

use access::LOGGING;
use common::{targets_toml, Agent, Gateway};
use serde_json::{json, Value};

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

/// Item 13: an anonymous 3,000-call batch on the shipped bounds
/// (`server.max_bulk_items = 1000`) runs 1,000 calls, each with its
/// answer; the other 2,000 get the bound's error by id and never reach
/// the agent (its read counter says so), and the gateway keeps serving.
#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_batch_runs_at_most_max_bulk_items_calls() {
    let agent = Agent::start("r4-mcp-batch");
    let dir = tempfile::tempdir().unwrap();
    let read_only = read_only_policy(dir.path());
    let gw = Gateway::start(&format!(
        "max_bulk_items = 1000\n{}[access]\nanonymous_role = \"monitoring\"\n\
         [[roles]]\nname = \"monitoring\"\ntargets = [\"*\"]\npolicy = \"{read_only}\"\n",
        targets_toml(&[&agent])
    ))
    .await;
    let reads = || async {
        common::direct(
            &agent,
            &json!({"type": "read", "mbean": "jmxgate.test:type=Counter", "attribute": "Reads"}),
        )
        .await["value"]
            .as_u64()
            .unwrap()
    };
    let calls: Vec<Value> = (0..3000)
        .map(|i| {
            json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                   "params": {"name": "read_attributes",
                              "arguments": {"target": agent.name, "mbean": "jmxgate.test:type=Types",
                                            "attributes": ["Name"]}}})
        })
        .collect();
    let before = reads().await;
    let r = gw
        .http
        .post(gw.url("/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2025-03-26")
        .body(Value::Array(calls).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let answers: Value = common::parse(&r.text().await.unwrap());
    let answers = answers.as_array().unwrap();
    let after = reads().await;
    assert_eq!(after - before, 1000, "calls that reached the agent");
    assert_eq!(answers.len(), 3000);
    let cut = answers
        .iter()
        .filter(|a| {
            a["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("server.max_bulk_items"))
        })
        .count();
    assert_eq!(cut, 2000);
    let (status, version) = gw.get("/jolokia/version").await;
    assert_eq!(status, 200, "{version}");
}
