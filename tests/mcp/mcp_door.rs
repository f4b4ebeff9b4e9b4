//! The MCP endpoint's own edges, spoken to as raw JSON-RPC over HTTP
//! against real agents (the official SDKs as clients are in tests/mcp/mcp.rs):
//! bounded results, bearer callers and their tools, a selector's per-target
//! errors, the endpoint turned off, hostile bodies, and refused calls in
//! the audit log.

use crate::common;

use std::time::{SystemTime, UNIX_EPOCH};

use common::{direct, shared_agents, targets_toml, Gateway};
use serde_json::{json, Value};

const VIEWER_POLICY: &str = "<restrict><commands><command>read</command><command>list</command>\
<command>search</command><command>version</command></commands></restrict>";

/// One JSON-RPC request to `/mcp`; the HTTP status and the parsed body
/// (`Value::Null` when it is not JSON).
async fn rpc(gw: &Gateway, auth: Option<&str>, body: &Value) -> (u16, Value) {
    let mut req = gw
        .http
        .post(gw.url("/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2025-06-18")
        .body(body.to_string());
    if let Some(a) = auth {
        req = req.header("Authorization", a);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn call(gw: &Gateway, auth: Option<&str>, tool: &str, arguments: Value) -> Value {
    let (status, body) = rpc(
        gw,
        auth,
        &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn tool_names(gw: &Gateway, auth: Option<&str>) -> Vec<String> {
    let (status, body) = rpc(
        gw,
        auth,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn results_beyond_the_cap_are_cut_with_a_note() {
    let [a, ..] = shared_agents();
    let gw = Gateway::start(&format!(
        "{}\n[mcp]\nmax_result_bytes = 1024\n",
        targets_toml(&[a])
    ))
    .await;
    let body = call(&gw, None, "search_mbeans", json!({"target": a.name})).await;
    let result = &body["result"]["structuredContent"];
    let size = serde_json::to_vec(result).unwrap().len();
    assert!(size <= 1024, "{size} bytes: {result}");
    let note = result["truncated"]
        .as_str()
        .unwrap_or_else(|| panic!("{body}"));
    let kept = result["results"][0]["mbeans"].as_array().unwrap();
    let mut all = direct(a, &json!({"type": "search", "mbean": "*:*"})).await["value"]
        .as_array()
        .unwrap()
        .clone();
    // Names come sorted, so that pages are stable.
    all.sort_by(|x, y| x.as_str().cmp(&y.as_str()));
    assert!(!kept.is_empty() && kept.len() < all.len());
    assert!(
        note.contains(&format!(
            "results[0].mbeans: {} of {} entries left out",
            all.len() - kept.len(),
            all.len()
        )),
        "{note}"
    );
    // What is kept is the agent's own answer, from its start.
    assert_eq!(kept[..], all[..kept.len()]);
}

/// A cut search answer pages: each `next_cursor` shows the names the
/// answers before left out, every target's, until none are left; the pages
/// together are each agent's own search. A cursor from elsewhere is a
/// tool error.
#[tokio::test(flavor = "multi_thread")]
async fn search_pages_reach_every_name_of_every_target() {
    let [a, b, ..] = shared_agents();
    let gw = Gateway::start(&format!(
        "{}\n[mcp]\nmax_result_bytes = 2048\n",
        targets_toml(&[a, b])
    ))
    .await;
    let mut seen: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut arguments = json!({"target": "*", "pattern": "*:*"});
        if let Some(c) = &cursor {
            arguments["cursor"] = json!(c);
        }
        let body = call(&gw, None, "search_mbeans", arguments).await;
        let result = &body["result"]["structuredContent"];
        assert!(
            serde_json::to_vec(result).unwrap().len() <= 2048,
            "{result}"
        );
        for entry in result["results"].as_array().unwrap() {
            let names = seen
                .entry(entry["target"].as_str().unwrap().into())
                .or_default();
            for n in entry["mbeans"].as_array().unwrap() {
                names.push(n.clone());
            }
        }
        pages += 1;
        assert!(pages < 500, "no end to the pages");
        match result["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert!(pages >= 2, "{pages} page: the test wants a cut answer");
    for agent in [a, b] {
        let mut all = direct(agent, &json!({"type": "search", "mbean": "*:*"})).await["value"]
            .as_array()
            .unwrap()
            .clone();
        all.sort_by(|x, y| x.as_str().cmp(&y.as_str()));
        assert_eq!(seen[&agent.name], all, "{}", agent.name);
    }
    let body = call(
        &gw,
        None,
        "search_mbeans",
        json!({"target": "*", "cursor": "bogus!"}),
    )
    .await;
    assert_eq!(body["result"]["isError"], true, "{body}");
    let text = body["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("cursor"), "{text}");
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test(flavor = "multi_thread")]
async fn bearer_callers_get_the_tools_of_their_roles() {
    let dir = tempfile::tempdir().unwrap();
    let [a, ..] = shared_agents();
    let secret = b"0123456789abcdef0123456789abcdef-mcp-secret";
    std::fs::write(dir.path().join("hs256.key"), secret).unwrap();
    std::fs::write(dir.path().join("viewer.xml"), VIEWER_POLICY).unwrap();
    let gw = Gateway::start(&format!(
        "{targets}[auth.bearer]\nhs256_secret_file = \"{key}\"\n\n\
         [[roles]]\nname = \"viewer\"\ntargets = [\"*\"]\npolicy = \"{viewer}\"\n\n\
         [[roles]]\nname = \"ops\"\ntargets = [\"*\"]\n",
        targets = targets_toml(&[a]),
        key = dir.path().join("hs256.key").display(),
        viewer = dir.path().join("viewer.xml").display(),
    ))
    .await;
    let token = |roles: &[&str]| {
        let claims = json!({"sub": "assistant", "exp": now() + 300, "roles": roles});
        let jwt = jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
            &claims,
            &jsonwebtoken::EncodingKey::from_secret(secret),
        )
        .unwrap();
        format!("Bearer {jwt}")
    };
    let viewer = token(&["viewer"]);
    let ops = token(&["ops"]);
    assert_eq!(
        tool_names(&gw, Some(&viewer)).await,
        [
            "list_targets",
            "search_mbeans",
            "describe_mbean",
            "read_attributes",
            "fleet_summary",
            "explain"
        ]
    );
    let all = tool_names(&gw, Some(&ops)).await;
    assert!(all.contains(&"execute_operation".to_string()), "{all:?}");
    // A real tool the viewer's role doesn't offer says so, naming the
    // role; a name that is no tool at all stays unknown.
    let (_, hidden) = rpc(
        &gw,
        Some(&viewer),
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "execute_operation", "arguments": {}}}),
    )
    .await;
    let message = hidden["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("\"execute_operation\" is not allowed for your roles (role viewer)"),
        "{hidden}"
    );
    assert!(!message.contains("unknown tool"), "{hidden}");
    let (_, unknown) = rpc(
        &gw,
        Some(&viewer),
        &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                "params": {"name": "execute_operations", "arguments": {}}}),
    )
    .await;
    let message = unknown["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("unknown tool"), "{unknown}");
    // Without a token, or with a forged one: HTTP 401, no MCP at all.
    let (status, _) = rpc(
        &gw,
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    assert_eq!(status, 401);
    let forged = format!("{}x", token(&["ops"]));
    let (status, _) = rpc(
        &gw,
        Some(&forged),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    assert_eq!(status, 401);
    // The read-only caller's read is the agent's value.
    let read = call(
        &gw,
        Some(&viewer),
        "read_attributes",
        json!({"target": a.name, "mbean": "jmxgate.test:type=Types", "attributes": ["LongMax", "Double"]}),
    )
    .await;
    let agent = direct(
        a,
        &json!({"type": "read", "mbean": "jmxgate.test:type=Types", "attribute": ["LongMax", "Double"]}),
    )
    .await;
    assert_eq!(
        read["result"]["structuredContent"]["results"][0]["values"],
        agent["value"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_selector_keeps_each_targets_error_in_its_place() {
    let [a, b, _] = shared_agents();
    let dead = common::dead_port();
    let gw = Gateway::start(&format!(
        "{}[[targets]]\nname = \"gone\"\nurl = \"http://127.0.0.1:{dead}/jolokia\"\nlabels = {{ role = \"test\" }}\nconnect_timeout = \"500ms\"\n",
        targets_toml(&[a, b])
    ))
    .await;
    let body = call(
        &gw,
        None,
        "read_attributes",
        json!({"target": "role=test", "mbean": "jmxgate.test:type=Types", "attributes": ["Name"]}),
    )
    .await;
    let result = &body["result"];
    assert_eq!(result["isError"], false, "{body}");
    let results = result["structuredContent"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 3, "{body}");
    for agent in [a, b] {
        let own = direct(
            agent,
            &json!({"type": "read", "mbean": "jmxgate.test:type=Types", "attribute": ["Name"]}),
        )
        .await;
        let entry = results
            .iter()
            .find(|r| r["target"] == agent.name.as_str())
            .unwrap_or_else(|| panic!("{} missing: {body}", agent.name));
        assert_eq!(entry["values"], own["value"]);
    }
    let gone = results.iter().find(|r| r["target"] == "gone").unwrap();
    assert!(gone["status"].as_u64().unwrap() >= 500, "{gone}");
    assert!(gone["error"].as_str().unwrap().contains("gone"), "{gone}");
    // Write and exec refuse selectors outright.
    let refused = call(
        &gw,
        None,
        "write_attribute",
        json!({"target": "role=test", "mbean": "jmxgate.test:type=Types", "attribute": "Int", "value": 1}),
    )
    .await;
    assert_eq!(refused["result"]["isError"], true);
    let text = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("is a selector"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_endpoint_can_be_turned_off() {
    let [a, ..] = shared_agents();
    let gw = Gateway::start(&format!("{}\n[mcp]\nenabled = false\n", targets_toml(&[a]))).await;
    let (status, _) = rpc(
        &gw,
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_bodies_get_clear_errors_and_the_gateway_keeps_serving() {
    let [a, ..] = shared_agents();
    // Right after `[server] listen`, so in that table.
    let gw = Gateway::start(&format!("max_body_bytes = 65536\n{}", targets_toml(&[a]))).await;
    let post = |body: Vec<u8>, content_type: &'static str| {
        gw.http
            .post(gw.url("/mcp"))
            .header("Content-Type", content_type)
            .header("Accept", "application/json, text/event-stream")
            .body(body)
            .send()
    };
    for (body, content_type) in [
        (b"{not json".to_vec(), "application/json"),
        (b"[]".to_vec(), "application/json"),
        (b"{\"jsonrpc\":\"2.0\"}".to_vec(), "application/json"),
        (vec![b' '; 200_000], "application/json"),
        (b"{}".to_vec(), "text/plain"),
    ] {
        let r = post(body, content_type).await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        assert!((400..500).contains(&status), "{status}: {text}");
    }
    // A tool call with arguments of the wrong shape is a tool error.
    let body = call(
        &gw,
        None,
        "read_attributes",
        json!({"target": a.name, "mbean": 5}),
    )
    .await;
    assert_eq!(body["result"]["isError"], true, "{body}");
    // Unknown methods and tools are JSON-RPC errors.
    let (_, body) = rpc(
        &gw,
        None,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "rm_rf"}}),
    )
    .await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown tool"),
        "{body}"
    );
    // Still serving, both doors.
    let (status, read) = gw
        .post(
            "/jolokia",
            &json!({"type": "read", "mbean": "jmxgate.test:type=Types", "attribute": "LongMax", "target": {"url": a.name}}),
        )
        .await;
    assert_eq!((status, read["status"].as_u64()), (200, Some(200)));
    let body = call(
        &gw,
        None,
        "read_attributes",
        json!({"target": a.name, "mbean": "jmxgate.test:type=Types", "attributes": ["LongMax"]}),
    )
    .await;
    assert_eq!(
        body["result"]["structuredContent"]["results"][0]["values"]["LongMax"],
        read["value"]
    );
}

/// A gateway with Basic auth, one user `ann` whose role `ops` reaches
/// every target, and an audit log in `dir`; its audit directory and
/// ann's `Authorization` header.
async fn ann_the_operator(dir: &std::path::Path) -> (Gateway, std::path::PathBuf, String) {
    let [a, ..] = shared_agents();
    let users = common::users_file(dir, &[("ann", "s3cret-Pa55", &["ops"])]);
    let audit = dir.join("audit");
    let gw = Gateway::start(&common::basic_auth_config(
        &users,
        &format!(
            "{}\n[[roles]]\nname = \"ops\"\ntargets = [\"*\"]\n\n[audit]\ndir = \"{}\"\n",
            targets_toml(&[a]),
            audit.display()
        ),
    ))
    .await;
    let auth = format!(
        "Basic {}",
        base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            "ann:s3cret-Pa55"
        )
    );
    (gw, audit, auth)
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_calls_are_audited_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let [a, ..] = shared_agents();
    let (gw, audit, auth) = ann_the_operator(dir.path()).await;
    let (_, unknown) = rpc(
        &gw,
        Some(&auth),
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "drop_tables", "arguments": {}}}),
    )
    .await;
    assert!(unknown["error"].is_object(), "{unknown}");
    let bad = call(
        &gw,
        Some(&auth),
        "describe_mbean",
        json!({"target": a.name, "mbean": "java.lang:*"}),
    )
    .await;
    assert_eq!(bad["result"]["isError"], true);
    call(&gw, Some(&auth), "list_targets", json!({})).await;
    drop(gw);

    let records = common::audit_records(&audit);
    let text: String = records.iter().map(|r| r.to_string() + "\n").collect();
    assert!(
        !text.contains("s3cret-Pa55"),
        "the password is in the audit log"
    );
    let by_tool = |tool: &str| {
        records
            .iter()
            .find(|r| r["tool"] == tool)
            .unwrap_or_else(|| panic!("no record of {tool}: {text}"))
    };
    let unknown = by_tool("drop_tables");
    assert_eq!(
        (
            &unknown["channel"],
            &unknown["decision"],
            &unknown["status"]
        ),
        (&json!("mcp"), &json!("invalid"), &json!(404))
    );
    assert_eq!(unknown["principal"], "ann");
    let bad = by_tool("describe_mbean");
    assert_eq!(
        (&bad["decision"], &bad["status"]),
        (&json!("invalid"), &json!(400))
    );
    assert!(
        bad["note"].as_str().unwrap().contains("is a pattern"),
        "{bad}"
    );
    let listed = by_tool("list_targets");
    assert_eq!(listed["event"], "target_list");
    assert_eq!(listed["channel"], "mcp");
}

/// A user holding role `a` (target alpha, `<cors>` naming
/// http://ok.example) and role `b` (target beta, no `<cors>`): a page of
/// http://ok.example comes through the door by role `a`'s
/// `<allow-origin>`, and its calls run only where that admission holds.
/// Role `b`'s lack of `<cors>` (every origin, for Jolokia) never lets the
/// page act on beta: nothing reaches beta's agent. The same calls without
/// a page run on beta. (An `http:` page: the listener is plain HTTP, where
/// Jolokia's rule refuses secure origins.)
#[tokio::test(flavor = "multi_thread")]
async fn a_page_acts_only_where_the_roles_reaching_the_target_admit_it() {
    let dir = tempfile::tempdir().unwrap();
    let [alpha, beta, _] = shared_agents();
    let users = common::users_file(dir.path(), &[("carol", "carol-pw", &["a", "b"])]);
    let policy_a = dir.path().join("a.xml");
    std::fs::write(
        &policy_a,
        "<restrict><cors><allow-origin>http://ok.example</allow-origin></cors></restrict>",
    )
    .unwrap();
    let gw = Gateway::start(&common::basic_auth_config(
        &users,
        &format!(
            "{}[[roles]]\nname = \"a\"\ntargets = [\"alpha\"]\npolicy = \"{}\"\n\n\
             [[roles]]\nname = \"b\"\ntargets = [\"beta\"]\n",
            targets_toml(&[alpha, beta]),
            policy_a.display()
        ),
    ))
    .await;
    let auth = format!(
        "Basic {}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "carol:carol-pw")
    );
    let from_page = |tool: &'static str, arguments: Value| {
        let request = gw
            .http
            .post(gw.url("/mcp"))
            .header("Authorization", &auth)
            .header("Origin", "http://ok.example")
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2025-06-18")
            .body(
                json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                       "params": {"name": tool, "arguments": arguments}})
                .to_string(),
            );
        async move {
            let r = request.send().await.unwrap();
            assert_eq!(r.status(), 200);
            common::parse(&r.text().await.unwrap())
        }
    };
    let types = "jmxgate.test:type=Types";
    let counters = |agent| async move {
        direct(
            agent,
            &json!({"type": "read", "mbean": "jmxgate.test:type=Counter",
                    "attribute": ["Invocations", "Reads"]}),
        )
        .await["value"]
            .clone()
    };

    // On alpha, the page's own role answers.
    let read = from_page(
        "read_attributes",
        json!({"target": "alpha", "mbean": types, "attributes": ["Name"]}),
    )
    .await;
    let own = direct(
        alpha,
        &json!({"type": "read", "mbean": types, "attribute": "Name"}),
    )
    .await;
    assert_eq!(
        read["result"]["structuredContent"]["results"][0]["values"]["Name"], own["value"],
        "{read}"
    );
    // The page is shown only the targets it may act on.
    let listed = from_page("list_targets", json!({})).await;
    let names: Vec<&Value> = listed["result"]["structuredContent"]["targets"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|t| &t["name"])
        .collect();
    assert_eq!(names, [&json!("alpha")], "{listed}");

    // On beta, which only role b reaches: refused, and the agent sees none.
    let before = counters(beta).await;
    for (tool, arguments) in [
        (
            "read_attributes",
            json!({"target": "beta", "mbean": types, "attributes": ["Name"]}),
        ),
        (
            "write_attribute",
            json!({"target": "beta", "mbean": types, "attribute": "Int", "value": 4242}),
        ),
        (
            "execute_operation",
            json!({"target": "beta", "mbean": "jmxgate.test:type=Operations", "operation": "noArgs"}),
        ),
    ] {
        let refused = from_page(tool, arguments).await;
        assert_eq!(refused["result"]["isError"], true, "{tool}: {refused}");
        let text = refused["result"]["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("http://ok.example") && text.contains("not admitted"),
            "{tool}: {text}"
        );
    }
    assert_eq!(counters(beta).await, before, "a refused call reached beta");

    // Not from a page, role b does act on beta.
    let body = call(
        &gw,
        Some(&auth),
        "read_attributes",
        json!({"target": "beta", "mbean": types, "attributes": ["Name"]}),
    )
    .await;
    let own = direct(
        beta,
        &json!({"type": "read", "mbean": types, "attribute": "Name"}),
    )
    .await;
    assert_eq!(
        body["result"]["structuredContent"]["results"][0]["values"]["Name"], own["value"],
        "{body}"
    );
    // (The counters do see what reaches beta.)
    let after = counters(beta).await;
    assert!(
        after["Reads"].as_u64() > before["Reads"].as_u64(),
        "{before} {after}"
    );
}

/// A JSON-RPC batch (protocol 2025-03-26) to `/mcp`; the HTTP status and
/// the parsed body.
async fn batch(gw: &Gateway, elements: &[Value]) -> (u16, Value) {
    let r = gw
        .http
        .post(gw.url("/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2025-03-26")
        .body(Value::Array(elements.to_vec()).to_string())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, common::parse(&r.text().await.unwrap()))
}

fn read_name(id: usize, target: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": format!("r{id}"), "method": "tools/call",
           "params": {"name": "read_attributes",
                      "arguments": {"target": target, "mbean": "jmxgate.test:type=Types", "attributes": ["Name"]}}})
}

/// The elements answered with the batch-bound error, by id, and the
/// message of the first.
fn beyond(answers: &[Value]) -> (Vec<&Value>, String) {
    let cut: Vec<&Value> = answers
        .iter()
        .filter(|a| a["error"]["code"] == -32000)
        .collect();
    let message = cut
        .first()
        .map(|a| a["error"]["message"].as_str().unwrap().to_string())
        .unwrap_or_default();
    (cut.iter().map(|a| &a["id"]).collect(), message)
}

/// A batch obeys a Jolokia bulk's item bound (`server.max_bulk_items`):
/// the elements within it run and are answered with the agent's values,
/// those beyond get a JSON-RPC error with their ids naming the bound and
/// its key, and never reach the agent.
#[tokio::test(flavor = "multi_thread")]
async fn a_batch_runs_at_most_max_bulk_items_elements() {
    let [a, ..] = shared_agents();
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit");
    let gw = Gateway::start(&format!(
        "max_bulk_items = 5\n{}[audit]\ndir = \"{}\"\n",
        targets_toml(&[a]),
        audit.display()
    ))
    .await;
    let reads = || async {
        direct(
            a,
            &json!({"type": "read", "mbean": "jmxgate.test:type=Counter", "attribute": "Reads"}),
        )
        .await["value"]
            .as_u64()
            .unwrap()
    };
    let own = direct(
        a,
        &json!({"type": "read", "mbean": "jmxgate.test:type=Types", "attribute": "Name"}),
    )
    .await;
    let mut elements: Vec<Value> = (0..8).map(|i| read_name(i, &a.name)).collect();
    // A notification beyond the bound: nothing to answer.
    elements.push(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let before = reads().await;
    let (status, answers) = batch(&gw, &elements).await;
    let after = reads().await;
    assert_eq!(status, 200, "{answers}");
    let answers = answers.as_array().unwrap_or_else(|| panic!("{answers}"));
    let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
    let expected: Vec<Value> = (0..8).map(|i| json!(format!("r{i}"))).collect();
    assert_eq!(ids, expected.iter().collect::<Vec<_>>(), "{answers:?}");
    for answer in &answers[..5] {
        assert_eq!(
            answer["result"]["structuredContent"]["results"][0]["values"]["Name"], own["value"],
            "{answer}"
        );
    }
    let (cut, message) = beyond(answers);
    assert_eq!(cut, expected[5..].iter().collect::<Vec<_>>(), "{answers:?}");
    assert!(
        message.contains("at most 5") && message.contains("server.max_bulk_items"),
        "{message}"
    );
    assert_eq!(after - before, 5, "only the elements within the bound ran");
    drop(gw);
    // The batch's own record says what was cut; each call that ran has its.
    let records = common::audit_records(&audit);
    let cut = records
        .iter()
        .find(|r| r["event"] == "mcp")
        .unwrap_or_else(|| panic!("no mcp record: {records:#?}"));
    let note = cut["note"].as_str().unwrap();
    assert!(
        note.contains("4 element(s) from index 5 not run")
            && note.contains("server.max_bulk_items"),
        "{cut}"
    );
    assert_eq!(
        records
            .iter()
            .filter(|r| r["tool"] == "read_attributes")
            .count(),
        5,
        "{records:#?}"
    );
}

/// A batch's answers are bounded in bytes as one agent answer is
/// (`target_defaults.max_response_bytes`): once they fill it, the rest are
/// JSON-RPC errors with their ids naming the bound, the answer holds no
/// more than the bound of results, and the gateway keeps serving.
#[tokio::test(flavor = "multi_thread")]
async fn a_batchs_answers_are_cut_at_the_response_byte_bound() {
    let [a, ..] = shared_agents();
    let max = 8192;
    let gw = Gateway::start(&format!(
        "{}[target_defaults]\nmax_response_bytes = {max}\n",
        targets_toml(&[a])
    ))
    .await;
    let own = direct(
        a,
        &json!({"type": "read", "mbean": "jmxgate.test:type=Types", "attribute": "Name"}),
    )
    .await;
    let elements: Vec<Value> = (0..100).map(|i| read_name(i, &a.name)).collect();
    let (status, answers) = batch(&gw, &elements).await;
    assert_eq!(status, 200, "{answers}");
    let answers = answers.as_array().unwrap_or_else(|| panic!("{answers}"));
    // Every request is answered, in order.
    let ids: Vec<String> = answers
        .iter()
        .map(|a| a["id"].as_str().unwrap().to_string())
        .collect();
    let expected: Vec<String> = (0..100).map(|i| format!("r{i}")).collect();
    assert_eq!(ids, expected);
    let ran: Vec<&Value> = answers
        .iter()
        .filter(|a| a.get("result").is_some())
        .collect();
    assert!(!ran.is_empty() && ran.len() < 100, "{} ran", ran.len());
    for answer in &ran {
        assert_eq!(
            answer["result"]["structuredContent"]["results"][0]["values"]["Name"], own["value"],
            "{answer}"
        );
    }
    // The results come first, then only errors.
    assert!(answers[..ran.len()]
        .iter()
        .all(|a| a.get("result").is_some()));
    let held: usize = ran.iter().map(|a| a.to_string().len()).sum();
    assert!(held <= max, "{held} bytes of results");
    let (cut, message) = beyond(answers);
    assert_eq!(cut.len(), 100 - ran.len(), "{answers:?}");
    assert!(
        message.contains(&format!("{max} bytes"))
            && message.contains("target_defaults.max_response_bytes"),
        "{message}"
    );
    // Still serving.
    let body = call(
        &gw,
        None,
        "read_attributes",
        json!({"target": a.name, "mbean": "jmxgate.test:type=Types", "attributes": ["Name"]}),
    )
    .await;
    assert_eq!(
        body["result"]["structuredContent"]["results"][0]["values"]["Name"], own["value"],
        "{body}"
    );
}

/// A batch obeys the deadline of one agent exchange
/// (`target_defaults.request_timeout`): elements not started by then are
/// JSON-RPC errors naming it. Two operations that sleep 4 s each take the
/// batch past a 6 s deadline whatever the machine's load.
#[tokio::test(flavor = "multi_thread")]
async fn a_batch_stops_starting_elements_at_its_deadline() {
    let [a, ..] = shared_agents();
    let gw = Gateway::start(&format!(
        "{}[target_defaults]\nrequest_timeout = \"6s\"\n",
        targets_toml(&[a])
    ))
    .await;
    let sleep = |id: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "execute_operation",
                          "arguments": {"target": a.name, "mbean": "jmxgate.test:type=Operations",
                                        "operation": "sleep", "arguments": [4000]}}})
    };
    let elements = [
        sleep("s1"),
        sleep("s2"),
        read_name(1, &a.name),
        read_name(2, &a.name),
    ];
    let (status, answers) = batch(&gw, &elements).await;
    assert_eq!(status, 200, "{answers}");
    let answers = answers.as_array().unwrap_or_else(|| panic!("{answers}"));
    assert_eq!(answers.len(), 4, "{answers:?}");
    assert!(answers[0].get("result").is_some(), "{}", answers[0]);
    let (cut, message) = beyond(answers);
    assert!(cut.ends_with(&[&json!("r1"), &json!("r2")]), "{answers:?}");
    assert!(
        message.contains("deadline of 6000 ms")
            && message.contains("target_defaults.request_timeout"),
        "{message}"
    );
}

/// Bearer tokens for the summary gateway's roles.
fn bearer(secret: &[u8], roles: &[&str]) -> String {
    let claims = json!({"sub": "assistant", "exp": now() + 600, "roles": roles});
    let jwt = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(secret),
    )
    .unwrap();
    format!("Bearer {jwt}")
}

/// A gateway over the three shared agents (`role=test`) and two targets
/// where no agent runs (`gone-1`, `gone-2`, `role=dead`), with bearer
/// roles: `viewer` reads everywhere, `guarded` everywhere but
/// `HeapMemoryUsage`. Returns the gateway, the viewer's and the guarded
/// caller's `Authorization`, and the directory its files are in.
async fn summary_gateway() -> (Gateway, String, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let [a, b, c] = shared_agents();
    let secret = b"0123456789abcdef0123456789abcdef-summary";
    std::fs::write(dir.path().join("hs256.key"), secret).unwrap();
    std::fs::write(
        dir.path().join("guarded.xml"),
        "<restrict><deny><mbean><name>java.lang:type=Memory</name>\
         <attribute>HeapMemoryUsage</attribute></mbean></deny></restrict>",
    )
    .unwrap();
    let dead: String = ["gone-1", "gone-2"]
        .iter()
        .map(|name| {
            format!(
                "[[targets]]\nname = \"{name}\"\nurl = \"http://127.0.0.1:{}/jolokia\"\n\
                 labels = {{ role = \"dead\" }}\nconnect_timeout = \"500ms\"\n",
                common::dead_port()
            )
        })
        .collect();
    let gw = Gateway::start(&format!(
        "{targets}{dead}[auth.bearer]\nhs256_secret_file = \"{key}\"\n\n\
         [[roles]]\nname = \"viewer\"\ntargets = [\"*\"]\npolicy = \"{viewer}\"\n\n\
         [[roles]]\nname = \"guarded\"\ntargets = [\"*\"]\npolicy = \"{guarded}\"\n",
        targets = targets_toml(&[a, b, c]),
        key = dir.path().join("hs256.key").display(),
        viewer = {
            std::fs::write(dir.path().join("viewer.xml"), VIEWER_POLICY).unwrap();
            dir.path().join("viewer.xml").display()
        },
        guarded = dir.path().join("guarded.xml").display(),
    ))
    .await;
    (
        gw,
        bearer(secret, &["viewer"]),
        bearer(secret, &["guarded"]),
        dir,
    )
}

/// A tool error's text (the call must be one).
fn tool_error(body: &Value) -> String {
    assert_eq!(body["result"]["isError"], true, "{body}");
    body["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{body}"))
        .to_string()
}

/// Every target denied: no value to summarise is a tool error, with the
/// gateway's own denial (as the caller's Jolokia read gets it) once for
/// all the targets, each named.
#[tokio::test(flavor = "multi_thread")]
async fn a_summary_where_every_target_is_denied_is_a_tool_error_saying_why() {
    let (gw, _, guarded, _dir) = summary_gateway().await;
    let [a, b, c] = shared_agents();
    let body = call(
        &gw,
        Some(&guarded),
        "fleet_summary",
        json!({"target": "role=test", "mbean": "java.lang:type=Memory",
               "attribute": "HeapMemoryUsage", "path": "used", "op": "sum"}),
    )
    .await;
    let text = tool_error(&body);
    // What the same caller is told reading one target through Jolokia.
    let r = gw
        .http
        .post(gw.url("/jolokia"))
        .header("Authorization", &guarded)
        .header("Content-Type", "application/json")
        .body(
            json!({"type": "read", "mbean": "java.lang:type=Memory", "attribute": "HeapMemoryUsage",
                   "path": "used", "target": {"url": a.name}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    let own: Value = r.json().await.unwrap();
    assert_eq!(own["status"], 403, "{own}");
    let denial = own["error"].as_str().unwrap();
    assert!(
        text.starts_with("role=test: no usable value from any of the 3 target(s):"),
        "{text}"
    );
    let mut names = [&a.name, &b.name, &c.name];
    names.sort();
    let line = format!(
        "\n- 3 target(s) ({}, {}, {}): {denial} ({}, status 403)",
        names[0],
        names[1],
        names[2],
        own["error_type"].as_str().unwrap()
    );
    assert!(text.contains(&line), "no {line:?} in {text}");
    // Once for all of them, not once per target.
    assert_eq!(text.matches(denial).count(), 1, "{text}");
}

/// A composite attribute without `path`: a tool error saying it is no
/// number, which keys it has (those the agents answer) and to give a path.
#[tokio::test(flavor = "multi_thread")]
async fn a_summary_of_a_composite_without_path_says_to_pick_one() {
    let (gw, viewer, _, _dir) = summary_gateway().await;
    let [a, b, c] = shared_agents();
    let body = call(
        &gw,
        Some(&viewer),
        "fleet_summary",
        json!({"target": "role=test", "mbean": "java.lang:type=Memory",
               "attribute": "HeapMemoryUsage", "op": "top", "n": 2}),
    )
    .await;
    let text = tool_error(&body);
    let heap = direct(
        a,
        &json!({"type": "read", "mbean": "java.lang:type=Memory", "attribute": "HeapMemoryUsage"}),
    )
    .await;
    let keys: Vec<&String> = heap["value"].as_object().unwrap().keys().collect();
    assert!(keys.len() >= 4, "{heap}");
    assert!(
        text.contains(&format!(
            "3 target(s) ({}, {}, {}): Not a number: an object with keys ",
            a.name, b.name, c.name
        )),
        "{text}"
    );
    for key in keys {
        assert!(text.contains(key.as_str()), "no {key} in {text}");
    }
    assert!(text.contains("give `path`"), "{text}");
    // With the path the tool's own error names: a result.
    let body = call(
        &gw,
        Some(&viewer),
        "fleet_summary",
        json!({"target": "role=test", "mbean": "java.lang:type=Memory",
               "attribute": "HeapMemoryUsage", "path": "used", "op": "count"}),
    )
    .await;
    let done = &body["result"]["structuredContent"];
    assert_eq!(body["result"]["isError"], false, "{body}");
    assert_eq!(
        (done["result"].as_u64(), done["count"].as_u64()),
        (Some(3), Some(3)),
        "{done}"
    );
    assert_eq!(done["errors"], json!([]), "{done}");
}

/// Some targets answer, some can't: the result of those that did (as the
/// agents themselves answer), with the others summarised by reason.
#[tokio::test(flavor = "multi_thread")]
async fn a_partial_summary_is_a_result_with_its_errors_summarised() {
    let (gw, viewer, _, _dir) = summary_gateway().await;
    let agents = shared_agents();
    let body = call(
        &gw,
        Some(&viewer),
        "fleet_summary",
        json!({"target": "*", "mbean": "java.lang:type=Runtime", "attribute": "StartTime",
               "op": "top", "n": 3}),
    )
    .await;
    assert_eq!(body["result"]["isError"], false, "{body}");
    let done = &body["result"]["structuredContent"];
    let mut expected = Vec::new();
    for agent in agents {
        let own = direct(
            agent,
            &json!({"type": "read", "mbean": "java.lang:type=Runtime", "attribute": "StartTime"}),
        )
        .await;
        expected.push((own["value"].as_i64().unwrap(), agent.name.clone()));
    }
    // Largest first, ties by name.
    expected.sort_by(|x, y| y.0.cmp(&x.0).then_with(|| x.1.cmp(&y.1)));
    let expected: Vec<Value> = expected
        .into_iter()
        .map(|(v, t)| json!({"target": t, "value": v}))
        .collect();
    assert_eq!(done["result"], json!(expected), "{done}");
    assert_eq!(
        (done["count"].as_u64(), done["failed"].as_u64()),
        (Some(3), Some(2)),
        "{done}"
    );
    let errors = done["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "one reason: {done}");
    assert_eq!(errors[0]["count"], 2, "{done}");
    assert_eq!(errors[0]["targets"], json!(["gone-1", "gone-2"]), "{done}");
    assert!(errors[0]["status"].as_u64().unwrap() >= 500, "{done}");
    assert!(
        errors[0]["error"].as_str().unwrap().contains("gone-1"),
        "{done}"
    );
}

/// One JSON-RPC request at protocol `version`, with the request `_meta`
/// 2026-07-28 asks of every request.
async fn rpc_at(gw: &Gateway, version: &str, method: &str) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": method, "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "mcp_door", "version": "1"}
    }}});
    let r = gw
        .http
        .post(gw.url("/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", version)
        .header("Mcp-Method", method)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    assert_eq!(status, 200, "{method}: {text}");
    serde_json::from_str(&text).unwrap()
}

/// At 2026-07-28 the tool list (and `server/discover`) says how long it
/// stays fresh, never 0 ("stale at once"), and that it is the caller's own;
/// older revisions have no such fields.
#[tokio::test(flavor = "multi_thread")]
async fn the_tool_list_at_2026_07_28_may_be_cached_for_a_while_by_its_caller() {
    let [a, ..] = shared_agents();
    let gw = Gateway::start(&targets_toml(&[a])).await;
    for method in ["tools/list", "server/discover"] {
        let body = rpc_at(&gw, "2026-07-28", method).await;
        let result = &body["result"];
        let ttl = result["ttlMs"].as_u64().unwrap_or_else(|| panic!("{body}"));
        assert!(ttl >= 1000, "{method}: {body}");
        assert_eq!(result["cacheScope"], "private", "{method}: {body}");
    }
    let (status, body) = rpc(
        &gw,
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    assert_eq!(status, 200);
    assert!(body["result"]["tools"].is_array(), "{body}");
    assert!(body["result"].get("ttlMs").is_none(), "{body}");
}

/// Who called: the MCP client's `clientInfo` is in the audit records of
/// the requests that carry it: an `initialize`, and (protocol 2026-07-28's
/// `_meta`, SEP-2575) any request, tool calls among them; cut and cleaned,
/// since the client chooses it. A request that names no client records
/// none (the door keeps no session to remember one from).
#[tokio::test(flavor = "multi_thread")]
async fn the_mcp_client_is_in_the_audit_cut_and_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let [a, ..] = shared_agents();
    let (gw, audit, auth) = ann_the_operator(dir.path()).await;
    let meta = |name: &str, version: &str| json!({"io.modelcontextprotocol/clientInfo": {"name": name, "version": version}});
    let (status, init) = rpc(
        &gw,
        Some(&auth),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "claude-code", "version": "2.1.0"}}}),
    )
    .await;
    assert_eq!(status, 200, "{init}");
    let read = |id: u64, meta: Option<Value>| {
        let mut params = json!({"name": "read_attributes", "arguments":
            {"target": a.name, "mbean": "jmxgate.test:type=Types", "attributes": ["Name"]}});
        if let Some(meta) = meta {
            params["_meta"] = meta;
        }
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
    };
    let (status, named) = rpc(&gw, Some(&auth), &read(2, Some(meta("cursor", "1.7.3")))).await;
    assert_eq!(status, 200, "{named}");
    assert_eq!(named["result"]["isError"], false, "{named}");
    let hostile_name = format!(
        "evil\n{{\"principal\":\"root\"}}\u{1b}[2J\u{202e}{}",
        "x".repeat(5000)
    );
    let hostile_version = format!("1\r\n{}", "9".repeat(500));
    let (status, hostile) = rpc(
        &gw,
        Some(&auth),
        &read(3, Some(meta(&hostile_name, &hostile_version))),
    )
    .await;
    assert_eq!(status, 200, "{hostile}");
    let (status, anonymous) = rpc(&gw, Some(&auth), &read(4, None)).await;
    assert_eq!(status, 200, "{anonymous}");
    let (status, listed) = rpc(
        &gw,
        Some(&auth),
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
            "name": "list_targets", "arguments": {}, "_meta": meta("cursor", "1.7.3")}}),
    )
    .await;
    assert_eq!(status, 200, "{listed}");
    drop(gw);

    let records = common::audit_records(&audit);
    let text: String = records.iter().map(|r| r.to_string() + "\n").collect();
    let mcp: Vec<&Value> = records.iter().filter(|r| r["channel"] == "mcp").collect();
    let initialize = mcp
        .iter()
        .find(|r| r["event"] == "mcp" && r["note"] == "initialize")
        .unwrap_or_else(|| panic!("no initialize record: {text}"));
    assert_eq!(
        (&initialize["mcp_client"], &initialize["mcp_client_version"]),
        (&json!("claude-code"), &json!("2.1.0")),
        "{initialize}"
    );
    let reads: Vec<&&Value> = mcp
        .iter()
        .filter(|r| r["event"] == "item" && r["tool"] == "read_attributes")
        .collect();
    assert_eq!(reads.len(), 3, "{text}");
    assert_eq!(
        (&reads[0]["mcp_client"], &reads[0]["mcp_client_version"]),
        (&json!("cursor"), &json!("1.7.3")),
        "{}",
        reads[0]
    );
    let name = reads[1]["mcp_client"].as_str().unwrap();
    let version = reads[1]["mcp_client_version"].as_str().unwrap();
    assert!(
        name.starts_with("evil\u{fffd}{\"principal\":\"root\"}\u{fffd}[2J\u{fffd}xxx")
            && name.ends_with("x…")
            && name.chars().count() == 101,
        "{name:?}"
    );
    assert!(
        version.starts_with("1\u{fffd}\u{fffd}999")
            && version.ends_with('…')
            && version.chars().count() == 41,
        "{version:?}"
    );
    assert!(
        !text.contains("xxxxxxxxxx".repeat(11).as_str()) && !text.contains("\\u001b"),
        "{text}"
    );
    assert_eq!(reads[1]["principal"], "ann");
    assert!(
        reads[2].get("mcp_client").is_none() && reads[2].get("mcp_client_version").is_none(),
        "{}",
        reads[2]
    );
    let listed = mcp
        .iter()
        .find(|r| r["event"] == "target_list")
        .unwrap_or_else(|| panic!("no target list: {text}"));
    assert_eq!(listed["mcp_client"], "cursor", "{listed}");
}

/// What the caller's own `/jmxgate/explain` says of one item: its entry
/// (for a selector, with `targets`).
async fn explained_by_endpoint(gw: &Gateway, auth: &str, item: &Value) -> Value {
    let r = gw
        .http
        .post(gw.url("/jmxgate/explain"))
        .header("Authorization", auth)
        .header("Content-Type", "application/json")
        .body(item.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    r.json().await.unwrap()
}

/// A denied attribute is reported where a missing one is, in the same
/// shape, whether it is the only one asked for or not, and whether the
/// target is named or selected: the answers by name and by selector hold
/// the same entry for the target.
#[tokio::test(flavor = "multi_thread")]
async fn a_denied_attribute_is_in_its_place_by_name_and_by_selector() {
    let (gw, _, guarded, _dir) = summary_gateway().await;
    let [a, ..] = shared_agents();
    let memory = "java.lang:type=Memory";
    // The agent's own error for a missing attribute, and the gateway's
    // own refusal of the denied one (as /jolokia says it to this caller).
    let missing = direct(
        a,
        &json!({"type": "read", "mbean": memory, "attribute": "NoSuchAttribute"}),
    )
    .await;
    assert_eq!(missing["status"], 404, "{missing}");
    let r = gw
        .http
        .post(gw.url("/jolokia"))
        .header("Authorization", &guarded)
        .header("Content-Type", "application/json")
        .body(
            json!({"type": "read", "mbean": memory, "attribute": "HeapMemoryUsage",
                   "target": {"url": a.name}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    let refused: Value = r.json().await.unwrap();
    assert_eq!(refused["status"], 403, "{refused}");
    // With the rule that decided, as /jmxgate/explain names it.
    let explained: Value = gw
        .http
        .post(gw.url("/jmxgate/explain"))
        .header("Authorization", &guarded)
        .header("Content-Type", "application/json")
        .body(
            json!({"type": "read", "mbean": memory, "attribute": "HeapMemoryUsage",
                   "target": {"url": a.name}})
            .to_string(),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(explained["decision"], "deny", "{explained}");
    let denied_entry = json!({"error": refused["error"], "error_type": refused["error_type"],
                              "denied_by": explained["rule"]});

    for attributes in [
        json!(["HeapMemoryUsage"]),
        json!(["HeapMemoryUsage", "NoSuchAttribute"]),
        json!(["HeapMemoryUsage", "Verbose"]),
    ] {
        let mut entries = Vec::new();
        for target in [a.name.as_str(), "role=test"] {
            let body = call(
                &gw,
                Some(&guarded),
                "read_attributes",
                json!({"target": target, "mbean": memory, "attributes": attributes}),
            )
            .await;
            assert_eq!(
                body["result"]["isError"], false,
                "{target} {attributes}: {body}"
            );
            let results = body["result"]["structuredContent"]["results"]
                .as_array()
                .unwrap_or_else(|| panic!("{body}"));
            let entry = results
                .iter()
                .find(|r| r["target"] == a.name.as_str())
                .unwrap_or_else(|| panic!("no {} in {body}", a.name))
                .clone();
            let values = &entry["values"];
            assert_eq!(values["HeapMemoryUsage"], denied_entry, "{target}: {entry}");
            if attributes[1] == "NoSuchAttribute" {
                let not_found = &values["NoSuchAttribute"];
                assert_eq!(
                    not_found["error_type"], missing["error_type"],
                    "{target}: {entry}"
                );
                let mut keys: Vec<&String> = not_found.as_object().unwrap().keys().collect();
                keys.sort();
                assert_eq!(keys, ["error", "error_type"], "{target}: {entry}");
            }
            if attributes[1] == "Verbose" {
                let own = direct(
                    a,
                    &json!({"type": "read", "mbean": memory, "attribute": "Verbose"}),
                )
                .await;
                assert_eq!(values["Verbose"], own["value"], "{target}: {entry}");
            }
            entries.push(entry);
        }
        assert_eq!(entries[0], entries[1], "by name and by selector differ");
    }
}

/// A policy's refusal names the caller's role and rule that decided, as
/// the caller's own `/jmxgate/explain` names it: after a tool error's
/// text, for one target and for a summary's group.
#[tokio::test(flavor = "multi_thread")]
async fn denials_name_the_deciding_role_and_rule() {
    let (gw, _, guarded, _dir) = summary_gateway().await;
    let [a, ..] = shared_agents();
    let memory = "java.lang:type=Memory";
    let write = json!({"type": "write", "mbean": memory, "attribute": "HeapMemoryUsage",
                       "value": 1, "target": {"url": a.name}});
    let explained = explained_by_endpoint(&gw, &guarded, &write).await;
    assert_eq!(explained["decision"], "deny", "{explained}");
    let rule = explained["rule"].as_str().unwrap();
    assert!(rule.starts_with("role guarded: "), "{explained}");
    assert!(rule.contains("HeapMemoryUsage"), "{explained}");
    let body = call(
        &gw,
        Some(&guarded),
        "write_attribute",
        json!({"target": a.name, "mbean": memory, "attribute": "HeapMemoryUsage", "value": 1}),
    )
    .await;
    let text = tool_error(&body);
    assert!(
        text.starts_with(&format!(
            "{}: {}",
            a.name,
            explained["error"].as_str().unwrap()
        )),
        "{text}"
    );
    assert!(text.ends_with(&format!("; denied by {rule}")), "{text}");

    // A group's summary: the same rule decided for every target, once.
    let body = call(
        &gw,
        Some(&guarded),
        "fleet_summary",
        json!({"target": "role=test", "mbean": memory, "attribute": "HeapMemoryUsage",
               "path": "used", "op": "sum"}),
    )
    .await;
    let text = tool_error(&body);
    let read = json!({"type": "read", "mbean": memory, "attribute": "HeapMemoryUsage",
                      "target": {"url": "role=test"}});
    let explained = explained_by_endpoint(&gw, &guarded, &read).await;
    let rules: Vec<&str> = explained["targets"]
        .as_array()
        .unwrap_or_else(|| panic!("{explained}"))
        .iter()
        .map(|t| t["rule"].as_str().unwrap())
        .collect();
    assert_eq!(rules.len(), 3, "{explained}");
    assert!(rules.iter().all(|r| *r == rules[0]), "{explained}");
    assert_eq!(text.matches(rules[0]).count(), 1, "{text}");
    assert!(
        text.ends_with(&format!("\nDenied by {}", rules[0])),
        "{text}"
    );
}

/// `explain`: per target the decision and the caller's deciding role and
/// rule, as the caller's own `/jmxgate/explain` gives them; nothing of
/// the targets and rules of a role the caller doesn't hold. ann's role
/// reaches alpha only; bob's role, with its own rule, reaches beta.
#[tokio::test(flavor = "multi_thread")]
async fn explain_says_what_the_callers_roles_allow_and_nothing_of_other_tenants() {
    let dir = tempfile::tempdir().unwrap();
    let [a, b, c] = shared_agents();
    let ops = "jmxgate.test:type=Operations";
    std::fs::write(dir.path().join("viewer.xml"), VIEWER_POLICY).unwrap();
    std::fs::write(
        dir.path().join("bob.xml"),
        "<restrict><deny><mbean><name>jmxgate.test:type=Operations</name>\
         <operation>bobsSecretOperation</operation></mbean></deny></restrict>",
    )
    .unwrap();
    let users = common::users_file(
        dir.path(),
        &[
            ("ann", "ann-Pa55", &["ann-viewer"]),
            ("bob", "bob-Pa55", &["bob-ops"]),
        ],
    );
    let audit = dir.path().join("audit");
    let gw = Gateway::start(&common::basic_auth_config(
        &users,
        &format!(
            "{targets}\n[[roles]]\nname = \"ann-viewer\"\ntargets = [\"{a}\"]\npolicy = \"{viewer}\"\n\n\
             [[roles]]\nname = \"bob-ops\"\ntargets = [\"{b}\"]\npolicy = \"{bob}\"\n\n\
             [audit]\ndir = \"{audit}\"\n",
            targets = targets_toml(&[a, b, c]),
            a = a.name,
            b = b.name,
            viewer = dir.path().join("viewer.xml").display(),
            bob = dir.path().join("bob.xml").display(),
            audit = audit.display(),
        ),
    ))
    .await;
    let basic = |user: &str, password: &str| {
        format!(
            "Basic {}",
            base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                format!("{user}:{password}")
            )
        )
    };
    let ann = basic("ann", "ann-Pa55");
    let bob = basic("bob", "bob-Pa55");
    assert!(tool_names(&gw, Some(&ann))
        .await
        .contains(&"explain".to_string()));

    // Every target: only alpha is ann's; exec is not in her <commands>.
    let body = call(
        &gw,
        Some(&ann),
        "explain",
        json!({"target": "*", "type": "exec", "mbean": ops, "operation": "reset"}),
    )
    .await;
    assert_eq!(body["result"]["isError"], false, "{body}");
    let answer = &body["result"]["structuredContent"];
    let own = explained_by_endpoint(
        &gw,
        &ann,
        &json!({"type": "exec", "mbean": ops, "operation": "reset", "arguments": [],
                "target": {"url": "*"}}),
    )
    .await;
    let per_target = |entries: &Value| -> Vec<(Value, Value, Value)> {
        entries
            .as_array()
            .unwrap_or_else(|| panic!("{entries}"))
            .iter()
            .map(|e| {
                (
                    e["target"].clone(),
                    e["decision"].clone(),
                    e["rule"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(per_target(&answer["results"]), per_target(&own["targets"]));
    assert_eq!(
        per_target(&answer["results"]),
        [(
            json!(a.name),
            json!("deny"),
            answer["results"][0]["rule"].clone()
        )]
    );
    let rule = answer["results"][0]["rule"].as_str().unwrap();
    assert!(rule.starts_with("role ann-viewer: "), "{answer}");
    assert!(rule.contains("\"exec\""), "{answer}");
    assert_eq!(answer["decision"], "deny", "{answer}");
    assert_eq!(answer["operation"], "reset", "{answer}");

    // A read she may make: allowed, by her role, sent as it is.
    let body = call(
        &gw,
        Some(&ann),
        "explain",
        json!({"target": a.name, "type": "read", "mbean": "jmxgate.test:type=Types",
               "attribute": "Name"}),
    )
    .await;
    let answer = &body["result"]["structuredContent"];
    assert_eq!(answer["decision"], "allow", "{body}");
    let entry = &answer["results"][0];
    assert_eq!(
        (&entry["target"], &entry["roles"], &entry["plan"]),
        (&json!(a.name), &json!(["ann-viewer"]), &json!("forward")),
        "{body}"
    );

    // bob's target, by name: as unknown to ann as a name that isn't one.
    let hidden = tool_error(
        &call(
            &gw,
            Some(&ann),
            "explain",
            json!({"target": b.name, "type": "exec", "mbean": ops, "operation": "bobsSecretOperation"}),
        )
        .await,
    );
    let unknown = tool_error(
        &call(
            &gw,
            Some(&ann),
            "explain",
            json!({"target": "no-such-target", "type": "exec", "mbean": ops, "operation": "x"}),
        )
        .await,
    );
    assert_eq!(
        hidden.replace(&b.name, "<name>"),
        unknown.replace("no-such-target", "<name>")
    );
    // bob is told his own rule.
    let body = call(
        &gw,
        Some(&bob),
        "explain",
        json!({"target": b.name, "type": "exec", "mbean": ops, "operation": "bobsSecretOperation"}),
    )
    .await;
    let rule = body["result"]["structuredContent"]["results"][0]["rule"]
        .as_str()
        .unwrap_or_else(|| panic!("{body}"))
        .to_string();
    assert!(rule.starts_with("role bob-ops: "), "{rule}");
    assert!(rule.contains("bobsSecretOperation"), "{rule}");
    // Arguments a type doesn't take are refused, naming them.
    let bad = tool_error(
        &call(
            &gw,
            Some(&ann),
            "explain",
            json!({"target": a.name, "type": "read", "mbean": ops, "operation": "reset"}),
        )
        .await,
    );
    assert_eq!(bad, "explain: `operation` is not for type read");
    // A tool her role isn't offered: refused as such, and recorded.
    let (_, hidden_tool) = rpc(
        &gw,
        Some(&ann),
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                "params": {"name": "execute_operation",
                           "arguments": {"target": b.name, "mbean": ops, "operation": "reset"}}}),
    )
    .await;
    let refusal = hidden_tool["error"]["message"].as_str().unwrap_or_default();
    assert!(
        refusal.contains("not allowed for your roles (role ann-viewer)"),
        "{hidden_tool}"
    );
    drop(gw);

    // Nothing of bob's role or target in what ann was told or what was
    // recorded of her calls; each explain is an audit record.
    let records = common::audit_records(&audit);
    let anns: Vec<&Value> = records.iter().filter(|r| r["principal"] == "ann").collect();
    let told: String = anns.iter().map(|r| r.to_string()).collect::<String>() + &hidden + refusal;
    for secret in ["bob-ops", "bobsSecretOperation"] {
        assert!(!told.contains(secret), "{secret} told to ann: {told}");
    }
    let explains = anns
        .iter()
        .filter(|r| r["event"] == "explain" && r["tool"] == "explain")
        .count();
    assert_eq!(explains, 2, "{anns:#?}");
    let refused = anns
        .iter()
        .find(|r| r["tool"] == "execute_operation")
        .unwrap_or_else(|| panic!("no record of the refused tool: {anns:#?}"));
    assert_eq!(
        (
            &refused["decision"],
            &refused["status"],
            &refused["error_type"]
        ),
        (
            &json!("denied"),
            &json!(403),
            &json!("jmxgate.ToolNotAllowed")
        ),
        "{refused}"
    );
}
