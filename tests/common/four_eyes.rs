//! The four-eyes setup the hardening rounds' tests share (issue 55, round
//! 4): the manual's worked example of four-eyes as a gateway config, a
//! gateway with its access store open, and callers of it.

// Each suite uses part of it.
#![allow(dead_code)]

use std::path::Path;

use serde_json::{json, Value};

use crate::access::{As, LOGGING};
use crate::common::{self, targets_toml, users_file, Agent, Gateway};

/// A gateway whose access store is open (it opens in a task).
pub async fn started(config: &str) -> Gateway {
    let gw = Gateway::start(config).await;
    gw.access_store_opened().await;
    gw
}

pub fn at<'a>(gw: &'a Gateway, user: &'a str) -> As<'a> {
    As {
        http: &gw.http,
        base: gw.url(""),
        user,
    }
}

pub fn read_only_policy(dir: &Path) -> String {
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
pub fn four_eyes_config(dir: &Path, orders: &Agent) -> String {
    let users = users_file(
        dir,
        &[
            ("oncall", "pw", &["ops", "viewers"]),
            ("lead", "pw", &["leads"]),
            ("viewer", "pw", &["viewers"]),
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
approval_required = ["exec {LOGGING} setLoggerLevel", "exec jmxgate.test:type=Operations echo"]
"#,
        targets = targets_toml(&[orders]).replace(&format!("\"{}\"", orders.name), "\"orders-1\""),
        users = users.display(),
        db = dir.join("access.db").display(),
        audit = dir.join("audit").display(),
        read_only = read_only_policy(dir),
    )
}

pub async fn mcp_call(gw: &Gateway, user: &str, tool: &str, arguments: Value) -> Value {
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
