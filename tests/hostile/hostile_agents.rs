//! Broken and malicious agents (tests/common/hostile.rs: endless bodies,
//! lying lengths, deep nesting, wrong types, not JSON, not HTTP, too few
//! answers, too slow) behind every door: proxy mode at `/jolokia`, the
//! virtual agent URLs and `/mcp`. Each bad answer fails its own item with
//! a clear error, within the target's limits, nothing panics, the audit
//! records what the client was told, and the gateway keeps serving.

use crate::common;

use common::hostile::{Behaviour, HostileAgent, DEPTH};
use common::{audit_records, shared_agents, targets_toml, Gateway};
use serde_json::{json, Value};

const T: &str = "jmxgate.test:type=Types";
/// Each hostile target's `max_response_bytes`.
const MAX_RESPONSE: u64 = 1 << 20;

/// The hostile targets (1 MiB answers, 2 s timeouts) and one real agent,
/// with an audit log in `dir`; `server` are `[server]` keys.
fn config(hostile: &HostileAgent, dir: &std::path::Path, server: &str) -> String {
    let [a, ..] = shared_agents();
    format!(
        "{server}\n{}{}[audit]\ndir = \"{}\"\n",
        targets_toml(&[a]),
        hostile.targets_toml(&format!(
            "max_response_bytes = {MAX_RESPONSE}\nrequest_timeout = \"2s\""
        )),
        dir.join("audit").display()
    )
}

/// What the item for `b` must say, as (status, error_type).
fn expected(b: Behaviour) -> (u16, &'static str) {
    match b {
        Behaviour::Endless400 | Behaviour::Endless200 | Behaviour::LyingLength => {
            (502, "jmxgate.AgentAnswerTooLarge")
        }
        Behaviour::Deep => (200, ""),
        Behaviour::WrongTypes | Behaviour::NotJson | Behaviour::Short => {
            (502, "jmxgate.AgentBadAnswer")
        }
        Behaviour::Slow => (504, "jmxgate.AgentTimeout"),
        Behaviour::Garbage => (502, "jmxgate.AgentTransportError"),
        // Well-formed agents; not among the behaviours tested here.
        Behaviour::DeepComposite
        | Behaviour::LongNames
        | Behaviour::OwnNames
        | Behaviour::BrokenBean
        | Behaviour::Markup
        | Behaviour::Shifty => {
            unreachable!("{} is not in Behaviour::ALL", b.name())
        }
    }
}

fn read(target: &str) -> Value {
    json!({"type":"read","mbean":T,"attribute":"Name","target":{"url":target}})
}

/// The gateway answers a text with values deeper than serde_json's own
/// limit: split a bulk answer into its items' texts without a tree.
fn item_texts(text: &str) -> Vec<String> {
    let mut items = Vec::new();
    let (mut depth, mut start, mut in_string, mut escaped) = (0usize, 0, false, false);
    for (i, c) in text.char_indices() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '[' | '{' => {
                if depth == 1 {
                    start = i;
                }
                depth += 1;
            }
            ']' | '}' => {
                depth -= 1;
                if depth == 1 {
                    items.push(text[start..=i].to_string());
                }
            }
            _ => {}
        }
    }
    items
}

#[tokio::test(flavor = "multi_thread")]
async fn every_bad_answer_fails_its_own_item_in_proxy_mode() {
    let hostile = HostileAgent::start();
    let dir = tempfile::tempdir().unwrap();
    let gw = Gateway::start(&config(&hostile, dir.path(), "")).await;
    let [a, ..] = shared_agents();
    let mut bulk = vec![read(&a.name)];
    bulk.extend(Behaviour::ALL.iter().map(|b| read(b.name())));
    bulk.push(read(&a.name));
    let resp = gw
        .http
        .post(gw.url("/jolokia"))
        .header("content-type", "application/json")
        .body(Value::Array(bulk.clone()).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    let items = item_texts(&text);
    assert_eq!(items.len(), bulk.len(), "{text:.2000}");
    let real: Value = serde_json::from_str(&items[0]).unwrap();
    assert_eq!(real["value"], a.name.as_str());
    assert_eq!(
        serde_json::from_str::<Value>(items.last().unwrap()).unwrap()["value"],
        a.name.as_str()
    );
    for (b, item) in Behaviour::ALL.iter().zip(&items[1..]) {
        let (status, error_type) = expected(*b);
        if *b == Behaviour::Deep {
            // Passed through as the agent wrote it, nesting and all.
            assert!(item.contains(&"[".repeat(DEPTH)), "{}", &item[..200]);
            assert!(item.contains("\"status\":200"), "{}", &item[..200]);
            continue;
        }
        let answer: Value = serde_json::from_str(item).unwrap();
        assert_eq!(answer["status"], status, "{}: {answer}", b.name());
        assert_eq!(answer["error_type"], error_type, "{}: {answer}", b.name());
        assert_eq!(answer["request"], bulk[1 + *b as usize], "{}", b.name());
        let error = answer["error"].as_str().unwrap();
        assert!(
            !error.is_empty() && error.len() < 1000,
            "{}: {error}",
            b.name()
        );
    }
    // The endless bodies were cut off near the limit, not read on.
    for b in [
        Behaviour::Endless400,
        Behaviour::Endless200,
        Behaviour::LyingLength,
    ] {
        let sent = hostile.bytes_sent(b);
        assert!(
            sent < 32 * MAX_RESPONSE,
            "{}: the agent wrote {sent} bytes before the gateway hung up",
            b.name()
        );
    }
    // The audit log says what the client was told, per item.
    let records = audit_records(&dir.path().join("audit"));
    for b in Behaviour::ALL {
        let r = records
            .iter()
            .find(|r| r["event"] == "item" && r["target"] == b.name())
            .unwrap_or_else(|| panic!("no record for {} in {records:#?}", b.name()));
        assert_eq!(r["status"], expected(b).0, "{r}");
    }
    // And the gateway serves on.
    let (_, r) = gw.post("/jolokia", &read(&a.name)).await;
    assert_eq!(r["value"], a.name.as_str());
}

#[tokio::test(flavor = "multi_thread")]
async fn every_bad_answer_is_an_error_at_the_virtual_urls() {
    let hostile = HostileAgent::start();
    let dir = tempfile::tempdir().unwrap();
    let gw = Gateway::start(&config(&hostile, dir.path(), "")).await;
    for b in Behaviour::ALL {
        let (status, error_type) = expected(b);
        let get = gw
            .http
            .get(gw.url(&format!("/jolokia/targets/{}/read/{T}/Name", b.name())))
            .send()
            .await
            .unwrap();
        assert_eq!(get.status(), 200, "{}", b.name());
        let text = get.text().await.unwrap();
        if b == Behaviour::Deep {
            assert!(text.contains(&"[".repeat(DEPTH)));
            continue;
        }
        let answer: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(answer["status"], status, "{}: {answer}", b.name());
        assert_eq!(answer["error_type"], error_type, "{}: {answer}", b.name());
        // POST to the same URL: the same.
        let (http_status, answer) = gw
            .post(
                &format!("/jolokia/targets/{}", b.name()),
                &json!({"type":"read","mbean":T,"attribute":"Name"}),
            )
            .await;
        assert_eq!((http_status, &answer["status"]), (200, &json!(status)));
    }
}

/// One JSON-RPC call to `/mcp`: the HTTP status and the body.
async fn tool_call(gw: &Gateway, tool: &str, arguments: Value) -> (u16, Value) {
    let r = gw
        .http
        .post(gw.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .body(
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
                   "params":{"name":tool,"arguments":arguments}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (
        status,
        serde_json::from_str(&r.text().await.unwrap()).unwrap_or(Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn every_bad_answer_is_a_tool_error_at_the_mcp_door_and_none_holds_a_slot() {
    let hostile = HostileAgent::start();
    let dir = tempfile::tempdir().unwrap();
    // Few slots: a call that never ended would soon hold them all.
    let gw = Gateway::start(&config(&hostile, dir.path(), "max_concurrent_requests = 8")).await;
    for b in Behaviour::ALL {
        let (status, body) = tool_call(
            &gw,
            "read_attributes",
            json!({"target": b.name(), "mbean": T, "attributes": ["Name"]}),
        )
        .await;
        assert_eq!(status, 200, "{}: {body}", b.name());
        let result = &body["result"];
        assert_eq!(result["isError"], true, "{}: {body}", b.name());
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(text.contains(b.name()), "{}: {text}", b.name());
        if b == Behaviour::Deep {
            assert!(text.contains("could not be shaped"), "{text}");
        }
    }
    // 32 calls on the deep answer at once: each answered, no slot kept.
    let calls = (0..32).map(|_| {
        tool_call(
            &gw,
            "read_attributes",
            json!({"target": "deep", "mbean": T, "attributes": ["Name"]}),
        )
    });
    for (status, body) in futures::future::join_all(calls).await {
        assert!(status == 200 || status == 503, "{status} {body}");
    }
    let [a, ..] = shared_agents();
    let (status, body) = tool_call(
        &gw,
        "read_attributes",
        json!({"target": a.name, "mbean": T, "attributes": ["Name"]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["isError"], false, "{body}");
}
