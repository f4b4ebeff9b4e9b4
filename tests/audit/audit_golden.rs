//! The audit log's golden file: a fixed script of requests through every
//! door of one gateway (the Jolokia door by GET, POST and virtual URL, the
//! target list, explain, MCP, the Prometheus scrape, an OTLP push, the
//! console, the access-requests API with four-eyes, the events journal,
//! and refusals: a 401, a 403 by policy, a 404 target), each waited for
//! before the next, so the records come in one order. The log is then
//! masked of what differs between two runs and compared line by line with
//! `tests/golden/audit.jsonl`. It guards issue 56's rebuild of the inside
//! (one request context, one audit recorder): the records must stay
//! byte-identical for the same requests.
//!
//! Masked: `time`, `latency_ms`, `prev` and `hash` (the chain's hashes,
//! over the times); times written into notes (a grant's end); the
//! client's port, and the gateway's, the agent's and the receiver's
//! wherever they appear; request ids (a boot id and a counter), as `R1`,
//! `R2`, … by first appearance, so records of one request still share
//! theirs; access requests' generated ids, as `A1`, `A2`, … wherever they
//! appear (a rule names the one made for an item). Everything else is
//! compared as written: `seq`, and the `sha256:` hashes of written values
//! and exec arguments, the same for the same requests in every run.
//!
//! One golden file serves both agent generations (the suite runs this
//! with 1.7.1 and `JMXGATE_TEST_AGENT=2.6.0`): only what the agent's JVM
//! holds differs between them, in the scrape's note (how many MBeans the
//! agent has, and how many of their attributes the rules can't take: a
//! 1.7.1 agent runs in Jetty, a 2.x one is a JVM agent), and those two
//! counts are masked. The rest, the failing bulk item's `error_type`
//! too, both generations write alike; a second golden file would have to
//! be kept for each generation (2.6.1-SNAPSHOT as well) for two numbers.
//!
//! `JMXGATE_BLESS=1` rewrites the golden file from this run instead of
//! comparing; review its diff before committing it.

use crate::common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::otlp_receiver::Receiver;
use common::{audit_lines, eventually, users_file, Agent, Gateway};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_jmxgate");
const TYPES: &str = "jmxgate.test:type=Types";
const OPS: &str = "jmxgate.test:type=Operations";
const LOGGING: &str = "java.util.logging:type=Logging";
const REQUESTS: &str = "/jmxgate/access/requests";
const WITHIN: Duration = Duration::from_secs(90);

fn golden_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/audit.jsonl")
}

/// `operator` (may do everything; the logger change only once a lead
/// approved it; requestable by developers), `viewer` (read only), `dev`
/// (read only, may ask for `operator`) and `lead` (approves).
fn config(dir: &Path, agent: &Agent, receiver: &Receiver) -> String {
    let users = users_file(
        dir,
        &[
            ("op", "op-pw", &["operator"]),
            ("viewer", "viewer-pw", &["viewer"]),
            ("dev", "dev-pw", &["developers"]),
            ("lead", "lead-pw", &["leads"]),
        ],
    );
    let read_only = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/read-only.xml");
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otlp/threads.yml");
    format!(
        r#"auth = ["basic"]
default_target = "golden"

[auth.basic]
users_file = "{users}"
max_failures = 1000

[[targets]]
name = "golden"
url = "{url}"
labels = {{ role = "test" }}

[access.store]
sqlite_file = "{db}"

[audit]
dir = "{audit}"
replica_id = "golden"

[[roles]]
name = "operator"
targets = ["*"]
requestable_by = ["developers"]
approvers = ["leads"]
max_duration = "1h"
approval_required = ["exec {LOGGING} setLoggerLevel"]

[[roles]]
name = "viewer"
targets = ["*"]
policy = "{read_only}"

[[roles]]
name = "developers"
targets = ["*"]
policy = "{read_only}"

[[roles]]
name = "leads"
targets = ["*"]
policy = "{read_only}"

[[prometheus.modules]]
name = "threads"
rules_file = "{rules}"

[[otlp.exports]]
name = "golden"
endpoint = "{endpoint}"
interval = "1h"
targets = "golden"
module = "threads"
role = "viewer"
"#,
        users = users.display(),
        url = agent.url(),
        db = dir.join("access.db").display(),
        audit = dir.join("audit").display(),
        read_only = read_only.display(),
        rules = rules.display(),
        endpoint = receiver.url,
    )
}

/// One caller (Basic) of the gateway; answers as (HTTP status, JSON or the
/// text when it is not JSON).
struct As<'a> {
    gw: &'a Gateway,
    user: &'a str,
    password: &'a str,
}

impl As<'_> {
    async fn send(&self, request: reqwest::RequestBuilder) -> (u16, Value) {
        let r = request
            .basic_auth(self.user, Some(self.password))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.send(self.gw.http.get(self.gw.url(path))).await
    }

    async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send(
            self.gw
                .http
                .post(self.gw.url(path))
                .header("content-type", "application/json")
                .body(body.to_string()),
        )
        .await
    }

    async fn mcp(&self, message: &Value) -> (u16, Value) {
        self.send(
            self.gw
                .http
                .post(self.gw.url("/mcp"))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2025-06-18")
                .body(message.to_string()),
        )
        .await
    }
}

fn set_level(level: &str) -> Value {
    json!({"type":"exec","mbean":LOGGING,"operation":"setLoggerLevel",
           "arguments":["global", level],"target":{"url":"golden"}})
}

/// The access request an `ApprovalRequired` answer names.
fn request_named_by(answer: &Value) -> String {
    assert_eq!(answer["error_type"], "jmxgate.ApprovalRequired", "{answer}");
    answer["error"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .find(|w| w.starts_with("ar-"))
        .unwrap_or_else(|| panic!("{answer}"))
        .trim_end_matches([';', ',', '.', ')'])
        .to_string()
}

/// What differs between two runs of the same script, masked (see the
/// module's comment). `ports` are the gateway's, the agent's and the
/// receiver's; `dir` the run's temporary directory.
fn masked(lines: &[String], ports: &[u16], dir: &Path) -> Vec<String> {
    let times = fancy_regex::Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z").unwrap();
    let access_ids = fancy_regex::Regex::new(r"\bar-[0-9a-f]+\b").unwrap();
    // What the agent's JVM holds, which differs between generations (a
    // 1.7.1 agent runs in Jetty, a 2.x one is a JVM agent).
    let agents_mbeans =
        fancy_regex::Regex::new(r"(?<=samples from )\d+ MBeans; (.*?), \d+ not supported").unwrap();
    let mut request_ids: HashMap<String, String> = HashMap::new();
    let mut access: HashMap<String, String> = HashMap::new();
    let dir = dir.display().to_string();
    lines
        .iter()
        .map(|line| {
            let mut record: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON record ({e}): {line}"));
            let o = record.as_object_mut().unwrap();
            for (field, mask) in [
                ("time", "TIME"),
                ("latency_ms", "LATENCY"),
                ("prev", "HASH"),
                ("hash", "HASH"),
            ] {
                if o.contains_key(field) {
                    o.insert(field.into(), json!(mask));
                }
            }
            if let Some(Value::String(id)) = o.get("request_id") {
                let n = request_ids.len() + 1;
                let id = request_ids
                    .entry(id.clone())
                    .or_insert_with(|| format!("R{n}"))
                    .clone();
                o.insert("request_id".into(), json!(id));
            }
            if let Some(Value::String(client)) = o.get("client") {
                // The client's own port, chosen by its kernel.
                let client = match client.rsplit_once(':') {
                    Some((host, _)) => format!("{host}:PORT"),
                    None => client.clone(),
                };
                o.insert("client".into(), json!(client));
            }
            let mut text = serde_json::to_string(&record).unwrap();
            text = times.replace_all(&text, "TIME").into_owned();
            text = agents_mbeans
                .replace_all(&text, "N MBeans; $1, N not supported")
                .into_owned();
            // Access requests' ids wherever they appear (a rule, a note),
            // numbered as they first appear.
            let found: Vec<String> = access_ids
                .find_iter(&text)
                .map(|m| m.unwrap().as_str().to_string())
                .collect();
            for id in found {
                let n = access.len() + 1;
                access.entry(id).or_insert_with(|| format!("A{n}"));
            }
            let mut ids: Vec<(&String, &String)> = access.iter().collect();
            // Longest first, so that no id is cut by a shorter one's mask.
            ids.sort_by_key(|(id, _)| std::cmp::Reverse(id.len()));
            for (id, mask) in ids {
                text = text.replace(id.as_str(), mask);
            }
            text = text.replace(&dir, "DIR");
            for port in ports {
                text = text.replace(&format!("127.0.0.1:{port}"), "127.0.0.1:PORT");
            }
            text
        })
        .collect()
}

/// Waits until the audit files hold a record that `wanted` picks.
async fn recorded(dir: &Path, what: &str, wanted: impl Fn(&Value) -> bool) {
    eventually(what, WITHIN, || async {
        let records = common::audit_records(dir);
        if records.iter().any(&wanted) {
            Ok(())
        } else {
            Err(format!("{} records", records.len()))
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_door_writes_the_records_of_the_golden_file() {
    let agent = Agent::start("golden");
    let receiver = Receiver::accepting().await;
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit");
    let gw = Gateway::start(&config(dir.path(), &agent, &receiver)).await;
    gw.access_store_opened().await;
    // Probed (read from the gateway's own metrics: a request would be
    // audited), so the agent's protocol is known before any request.
    eventually("the agent is probed up", WITHIN, || async {
        let metrics = gw.gateway.metrics().encode();
        if metrics.contains("jmxgate_agent_up{target=\"golden\"} 1") {
            Ok(())
        } else {
            Err(metrics)
        }
    })
    .await;
    // The OTLP export pushes once when it starts (then only in an hour):
    // waited for first, so its record comes before the script's.
    eventually("the OTLP receiver takes a push", WITHIN, || async {
        let n = receiver.points().len();
        if n > 0 {
            Ok(())
        } else {
            Err("no points".to_string())
        }
    })
    .await;
    recorded(&audit, "the OTLP push is audited", |r| {
        r["channel"] == "otlp"
    })
    .await;

    let op = As {
        gw: &gw,
        user: "op",
        password: "op-pw",
    };
    let viewer = As {
        gw: &gw,
        user: "viewer",
        password: "viewer-pw",
    };
    let dev = As {
        gw: &gw,
        user: "dev",
        password: "dev-pw",
    };
    let lead = As {
        gw: &gw,
        user: "lead",
        password: "lead-pw",
    };

    // The Jolokia door: GET (to the default target), a POST bulk with a
    // good item, a failing one, a write and an exec.
    let (status, r) = op.get(&format!("/jolokia/read/{TYPES}/Int")).await;
    assert_eq!((status, r["status"].clone()), (200, json!(200)), "{r}");
    let (status, r) = op
        .post(
            "/jolokia",
            &json!([
                {"type":"read","mbean":TYPES,"attribute":"Name","target":{"url":"golden"}},
                {"type":"read","mbean":TYPES,"attribute":"NoSuchAttribute","target":{"url":"golden"}},
                {"type":"write","mbean":TYPES,"attribute":"Counter","value":42,"target":{"url":"golden"}},
                {"type":"exec","mbean":OPS,"operation":"echo","arguments":["golden"],"target":{"url":"golden"}},
            ]),
        )
        .await;
    assert_eq!(status, 200, "{r}");
    let statuses: Vec<&Value> = r.as_array().unwrap().iter().map(|a| &a["status"]).collect();
    assert_eq!(statuses, [200, 404, 200, 200], "{r}");
    // A virtual URL.
    let (status, r) = op
        .get(&format!("/jolokia/targets/golden/read/{TYPES}/Name"))
        .await;
    assert_eq!((status, r["status"].clone()), (200, json!(200)), "{r}");
    // The target list.
    let (status, r) = op.get("/jolokia/targets").await;
    assert_eq!(status, 200, "{r}");
    // Explain.
    let (status, r) = op
        .post(
            "/jmxgate/explain",
            &json!({"type":"exec","mbean":OPS,"operation":"noArgs","target":{"url":"golden"}}),
        )
        .await;
    assert_eq!(status, 200, "{r}");

    // MCP: initialize, then a read by a tool call.
    let (status, r) = op
        .mcp(
            &json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},
            "clientInfo":{"name":"jmxgate-golden","version":"1"}}}),
        )
        .await;
    assert_eq!(status, 200, "{r}");
    let (status, r) = op
        .mcp(
            &json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{
            "name":"read_attributes",
            "arguments":{"target":"golden","mbean":TYPES,"attributes":["Name","Int"]}}}),
        )
        .await;
    assert_eq!(status, 200, "{r}");
    assert_ne!(r["result"]["isError"], true, "{r}");

    // The Prometheus scrape.
    let (status, r) = viewer.get("/prometheus?target=golden&module=threads").await;
    assert_eq!(status, 200, "{r}");
    assert!(r.as_str().unwrap().contains("jvm_threads_started"), "{r}");

    // The console: the overview and a target's page with one MBean.
    let (status, r) = viewer.get("/console/").await;
    assert_eq!(status, 200, "{r}");
    let (status, r) = viewer
        .get("/console/targets/golden?mbean=java.lang%3Atype%3DMemory")
        .await;
    assert_eq!(status, 200, "{r}");

    // The access API: a developer asks for the operator role, the lead
    // approves, the developer runs what it gives.
    let (status, asked) = dev
        .post(
            REQUESTS,
            &json!({"role":"operator","duration":"30m","targets":"golden","reason":"INC-1"}),
        )
        .await;
    assert_eq!(status, 201, "{asked}");
    let id = asked["id"].as_str().unwrap().to_string();
    let (status, r) = lead
        .post(
            &format!("{REQUESTS}/{id}/approve"),
            &json!({"comment":"ok"}),
        )
        .await;
    assert_eq!(
        (status, r["state"].clone()),
        (200, json!("approved")),
        "{r}"
    );
    let (status, r) = dev
        .post(
            "/jolokia",
            &json!({"type":"exec","mbean":OPS,"operation":"noArgs","target":{"url":"golden"}}),
        )
        .await;
    assert_eq!((status, r["status"].clone()), (200, json!(200)), "{r}");
    // Four-eyes: the operator's logger change waits for a lead, who
    // approves it; then it runs.
    let (_, refused) = op.post("/jolokia", &set_level("FINE")).await;
    let item_request = request_named_by(&refused);
    let (status, r) = lead.get(&format!("{REQUESTS}/{item_request}")).await;
    assert_eq!(status, 200, "{r}");
    let (status, r) = lead
        .post(
            &format!("{REQUESTS}/{item_request}/approve"),
            &json!({"comment":""}),
        )
        .await;
    assert_eq!(
        (status, r["state"].clone()),
        (200, json!("approved")),
        "{r}"
    );
    let (_, ran) = op.post("/jolokia", &set_level("FINE")).await;
    assert_eq!(ran["status"], 200, "{ran}");

    // The events journal.
    let (status, r) = op.get("/jmxgate/events?limit=1000").await;
    assert_eq!(status, 200, "{r}");

    // Refusals: no credentials (401), a write the viewer's policy refuses
    // (403), a target nobody has (404).
    let r = gw
        .http
        .get(gw.url(&format!("/jolokia/read/{TYPES}/Name")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let (status, r) = viewer
        .post(
            "/jolokia",
            &json!({"type":"write","mbean":TYPES,"attribute":"Counter","value":7,"target":{"url":"golden"}}),
        )
        .await;
    assert_eq!((status, r["status"].clone()), (200, json!(403)), "{r}");
    let (status, r) = op
        .get(&format!("/jolokia/targets/nowhere/read/{TYPES}/Name"))
        .await;
    assert_eq!(status, 404, "{r}");

    // Every record is written before its answer: the log is whole now,
    // read while the gateway still runs (so no `log_closed` record races
    // the reading).
    let lines = audit_lines(&audit);
    let gateway_port = gw.addr.port();
    let out = std::process::Command::new(BIN)
        .args(["audit", "verify"])
        .arg(&audit)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "audit verify: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let ports = [gateway_port, agent.port, receiver_port(&receiver)];
    let got = masked(&lines, &ports, dir.path());
    let golden = golden_file();
    if std::env::var("JMXGATE_BLESS").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
        std::fs::write(&golden, got.join("\n") + "\n").unwrap();
        eprintln!("JMXGATE_BLESS=1: wrote {}", golden.display());
        return;
    }
    let want: Vec<String> = std::fs::read_to_string(&golden)
        .unwrap_or_else(|e| panic!("{}: {e}; JMXGATE_BLESS=1 writes it", golden.display()))
        .lines()
        .map(String::from)
        .collect();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "record {} differs from {}", i + 1, golden.display());
    }
    assert_eq!(
        got.len(),
        want.len(),
        "{} records, the golden file has {}; the first extra or missing: {:?}",
        got.len(),
        want.len(),
        got.get(want.len()).or(want.get(got.len()))
    );
}

fn receiver_port(receiver: &Receiver) -> u16 {
    url::Url::parse(&receiver.url)
        .unwrap()
        .port()
        .expect("the receiver's URL has a port")
}
