//! Just-in-time access through the gateway, against real agents and the
//! embedded SQLite store: elevation requests over the HTTP API, grants
//! that hold on the Jolokia door and end at once, four-eyes on operations,
//! and what abuse gets. Expected values are read from the agents.

use crate::access;
use crate::common;

use std::path::Path;
use std::time::Duration;

use access::{gc_on, level_on, set_level, As, LOGGING, REQUESTS};
use common::{audit_records, eventually, targets_toml, users_file, Agent, Gateway};
use serde_json::{json, Value};

/// A caller of the in-process gateway.
fn at<'a>(gw: &'a Gateway, user: &'a str) -> As<'a> {
    As {
        http: &gw.http,
        base: gw.url(""),
        user,
    }
}

/// A gateway whose access store is open: `jmxgate serve` opens it in a
/// task, so the first request could otherwise find it not yet open.
async fn started(config: &str) -> Gateway {
    let gw = Gateway::start(config).await;
    gw.access_store_opened().await;
    gw
}

fn jmxgate_cli(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_jmxgate"))
        .args(args)
        .output()
        .unwrap()
}

fn read_only(dir: &Path) -> String {
    let path = dir.join("read-only.xml");
    std::fs::write(
        &path,
        "<restrict><commands><command>read</command><command>list</command>\
         <command>search</command><command>version</command></commands></restrict>",
    )
    .unwrap();
    path.display().to_string()
}

const USERS: &[(&str, &str, &[&str])] = &[
    ("dev", "pw", &["developers"]),
    ("dev2", "pw", &["developers"]),
    ("oncall", "pw", &["ops"]),
    ("lead1", "pw", &["sre-leads"]),
    ("lead2", "pw", &["sre-leads"]),
    ("outsider", "pw", &["viewers"]),
];

/// Agents as `orders-1` and `billing-1`; developers read everything,
/// `ops` on `orders-*` is theirs on request (a lead approves), and its
/// holders run a logger change only with two leads' approval.
fn config(dir: &Path, orders: &Agent, billing: &Agent, approvals: u32, extra: &str) -> String {
    let users = users_file(dir, USERS);
    format!(
        r#"auth = ["basic"]
{targets}
[auth.basic]
users_file = "{users}"

[access]
max_pending_requests = 3
{extra}

[access.store]
sqlite_file = "{db}"

[audit]
dir = "{audit}"

[[roles]]
name = "developers"
targets = ["*"]
policy = "{read_only}"

[[roles]]
name = "viewers"
targets = ["billing-*"]
policy = "{read_only}"

[[roles]]
name = "sre-leads"
targets = ["*"]
policy = "{read_only}"

[[roles]]
name = "ops"
targets = ["orders-*"]
requestable_by = ["developers"]
approvers = ["sre-leads"]
max_duration = "1h"
reason = "required"
approvals = {approvals}
approval_required = ["exec {LOGGING} setLoggerLevel"]
"#,
        targets = targets_toml(&[orders, billing])
            .replace(&format!("\"{}\"", orders.name), "\"orders-1\"")
            .replace(&format!("\"{}\"", billing.name), "\"billing-1\""),
        users = users.display(),
        db = dir.join("access.db").display(),
        audit = dir.join("audit").display(),
        read_only = read_only(dir),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn an_engineer_asks_for_operator_rights_on_orders_and_a_lead_approves() {
    let (orders, billing) = (Agent::start("jit-orders"), Agent::start("jit-billing"));
    let dir = tempfile::tempdir().unwrap();
    let gw = started(&config(dir.path(), &orders, &billing, 1, "")).await;
    let dev = at(&gw, "dev");
    let lead = at(&gw, "lead1");

    // Standing rights: read only.
    let before = dev.jolokia(&gc_on("orders-1")).await;
    assert_eq!(before["status"], 403, "{before}");
    // The refusal says which role would let it through, and how to ask.
    let says = before["error"].as_str().unwrap();
    assert!(
        says.contains("role ops allows this and you may request it")
            && says.contains("`jmxgate access request ops --reason ...`"),
        "{before}"
    );

    let (status, asked) = dev
        .ask(&json!({"role":"ops","duration":"30m","targets":"orders-*","reason":"INC-1234"}))
        .await;
    assert_eq!(status, 201, "{asked}");
    assert_eq!(asked["state"], "pending");
    assert_eq!(asked["requester"], "dev");
    assert_eq!(asked["duration"], "30m");
    let id = asked["id"].as_str().unwrap().to_string();

    // Not by the requester; a lead sees it as theirs to review.
    let (status, own) = dev.review(&id, "approve", "me").await;
    assert_eq!(status, 403, "{own}");
    assert!(
        own["error"].as_str().unwrap().contains("your own request"),
        "{own}"
    );
    let (_, listed) = lead.get(REQUESTS).await;
    let mine = listed["requests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id.as_str())
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(mine["may_review"], true);
    assert_eq!(mine["reason"], "INC-1234");

    let (status, approved) = lead.review(&id, "approve", "go ahead").await;
    assert_eq!(status, 200, "{approved}");
    assert_eq!(approved["state"], "approved");
    assert_eq!(approved["reviews"][0]["reviewer"], "lead1");
    assert_eq!(approved["reviews"][0]["comment"], "go ahead");

    // Held now on orders-1, not beyond the request's targets.
    let ran = dev.jolokia(&gc_on("orders-1")).await;
    assert_eq!(ran["status"], 200, "{ran}");
    let elsewhere = dev.jolokia(&gc_on("billing-1")).await;
    assert_eq!(elsewhere["status"], 403, "{elsewhere}");
    // The other developer holds nothing of it.
    let other = at(&gw, "dev2");
    assert_eq!(other.jolokia(&gc_on("orders-1")).await["status"], 403);

    // Revoked: gone at once.
    let (status, revoked) = lead
        .post(&format!("{REQUESTS}/{id}/revoke"), &json!({}))
        .await;
    assert_eq!(status, 200, "{revoked}");
    assert_eq!(revoked["state"], "revoked");
    assert_eq!(revoked["ended_by"], "lead1");
    let after = dev.jolokia(&gc_on("orders-1")).await;
    assert_eq!(after["status"], 403, "{after}");
    assert!(
        after["error"].as_str().unwrap().contains(&format!(
            "your access request {id} for role ops allowed this and was revoked: ask again"
        )),
        "{after}"
    );
    let (status, again) = lead.review(&id, "approve", "").await;
    assert_eq!(status, 409, "{again}");

    // An approver needs the approver role at the time of review: lead1
    // loses it in a reload, and their approval of a new request is refused.
    let (_, second) = dev
        .ask(&json!({"role":"ops","duration":"10m","reason":"INC-1235"}))
        .await;
    let second = second["id"].as_str().unwrap().to_string();
    let demoted: Vec<(&str, &str, &[&str])> = USERS
        .iter()
        .map(|&(u, p, r)| {
            if u == "lead1" {
                (u, p, &["developers"][..])
            } else {
                (u, p, r)
            }
        })
        .collect();
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n{}",
        config(dir.path(), &orders, &billing, 1, "")
    );
    users_file(dir.path(), &demoted);
    let reloaded = jmxgate::Config::parse(&text)
        .and_then(|c| c.validate())
        .unwrap();
    gw.gateway.reload(&reloaded).unwrap();
    let (status, lost) = lead.review(&second, "approve", "").await;
    // Not theirs to see any more: the same answer as for a request that isn't there.
    assert_eq!(status, 404, "{lost}");
    let (_, still) = dev.get(&format!("{REQUESTS}/{second}")).await;
    assert_eq!(still["state"], "pending", "{still}");

    // Every step is in the audit log, under the request's id, and the
    // chain verifies.
    let records = audit_records(&dir.path().join("audit"));
    let steps: Vec<&str> = records
        .iter()
        .filter(|r| r["access_request"] == id.as_str())
        .map(|r| r["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        steps,
        [
            "access_requested",
            "access_refused",
            "access_granted",
            "access_revoked",
            "access_refused"
        ],
        "{records:?}"
    );
    let text = records.iter().map(Value::to_string).collect::<String>();
    assert!(!text.contains("pw"), "no password in the audit log");
    let audit = dir.path().join("audit");
    let verified = jmxgate_cli(&["audit", "verify", audit.to_str().unwrap()]);
    assert!(
        verified.status.success(),
        "{}",
        String::from_utf8_lossy(&verified.stdout)
    );
    // `audit query --access-request` follows it.
    let followed = jmxgate_cli(&[
        "audit",
        "query",
        audit.to_str().unwrap(),
        "--access-request",
        &id,
        "--format",
        "json",
    ]);
    let followed: Vec<Value> = String::from_utf8_lossy(&followed.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Its steps, and what the grant was used for: the gc on orders-1,
    // whose rule names the request (and nothing dev ran on roles of
    // their own).
    let used: Vec<&Value> = followed
        .iter()
        .filter(|r| r["event"].is_null() || r["event"] == "item")
        .collect();
    assert_eq!(followed.len(), steps.len() + used.len(), "{followed:?}");
    assert_eq!(used.len(), 1, "{used:?}");
    assert_eq!(used[0]["target"], "orders-1", "{used:?}");
    assert_eq!(used[0]["decision"], "allowed", "{used:?}");
    assert!(
        used[0]["rule"]
            .as_str()
            .is_some_and(|r| r.contains(&format!("(under access request {id})"))),
        "{used:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn four_eyes_runs_an_approved_operation_exactly_once_with_exactly_its_arguments() {
    let (orders, billing) = (
        Agent::start("jit-4e-orders"),
        Agent::start("jit-4e-billing"),
    );
    let dir = tempfile::tempdir().unwrap();
    // Two leads approve each guarded item.
    let gw = started(&config(dir.path(), &orders, &billing, 2, "")).await;
    let oncall = at(&gw, "oncall");
    let (lead1, lead2) = (at(&gw, "lead1"), at(&gw, "lead2"));
    let original = level_on(&orders).await;

    // Not guarded: runs at once.
    assert_eq!(oncall.jolokia(&gc_on("orders-1")).await["status"], 200);
    // Explain says which item waits for approval, and why.
    let (_, explained) = oncall
        .post(
            "/jmxgate/explain",
            &json!([gc_on("orders-1"), set_level("orders-1", "FINE")]),
        )
        .await;
    assert!(
        explained[0].get("approval_required").is_none(),
        "{explained}"
    );
    assert_eq!(explained[1]["decision"], "allow", "{explained}");
    assert_eq!(
        explained[1]["approval_required"],
        format!("role ops: approval_required \"exec {LOGGING} setLoggerLevel\""),
        "{explained}"
    );

    let refused = oncall.jolokia(&set_level("orders-1", "FINE")).await;
    assert_eq!(refused["status"], 403, "{refused}");
    assert_eq!(refused["error_type"], "jmxgate.ApprovalRequired");
    let id = access::request_named_by(&refused);
    assert_eq!(
        level_on(&orders).await,
        original,
        "nothing ran on the agent"
    );
    // Asked again before approval: the same request.
    let waiting = oncall.jolokia(&set_level("orders-1", "FINE")).await;
    assert!(
        waiting["error"].as_str().unwrap().contains(&id),
        "{waiting}"
    );
    let (_, shown) = oncall.get(&format!("{REQUESTS}/{id}")).await;
    assert_eq!(shown["kind"], "item");
    assert_eq!(shown["item"]["operation"], "setLoggerLevel");
    assert_eq!(shown["item"]["arguments"], json!(["global", "FINE"]));
    assert_eq!(shown["item"]["target"], "orders-1");

    let (status, once) = lead1.review(&id, "approve", "").await;
    assert_eq!(
        (status, once["state"].clone()),
        (200, json!("pending")),
        "{once}"
    );
    assert_eq!(once["approvals"], 1);
    let (status, twice) = lead1.review(&id, "approve", "again").await;
    assert_eq!(status, 409, "the same approver counts once: {twice}");
    let still = oncall.jolokia(&set_level("orders-1", "FINE")).await;
    assert_eq!(
        still["error_type"], "jmxgate.ApprovalRequired",
        "one of two approvals: {still}"
    );
    let (status, both) = lead2.review(&id, "approve", "").await;
    assert_eq!(
        (status, both["state"].clone()),
        (200, json!("approved")),
        "{both}"
    );

    // Different arguments: another item, refused again.
    let other = oncall.jolokia(&set_level("orders-1", "ALL")).await;
    assert_eq!(other["error_type"], "jmxgate.ApprovalRequired", "{other}");
    assert!(!other["error"].as_str().unwrap().contains(&id));
    // Exactly the approved item: runs, once.
    let ran = oncall.jolokia(&set_level("orders-1", "FINE")).await;
    assert_eq!(ran["status"], 200, "{ran}");
    assert_eq!(level_on(&orders).await, "FINE", "it ran on the agent");
    let twice = oncall.jolokia(&set_level("orders-1", "FINEST")).await;
    assert_eq!(twice["error_type"], "jmxgate.ApprovalRequired");
    let replay = oncall.jolokia(&set_level("orders-1", "FINE")).await;
    assert_eq!(replay["error_type"], "jmxgate.ApprovalRequired", "{replay}");
    assert!(
        !replay["error"].as_str().unwrap().contains(&id),
        "a new request, not the used one"
    );
    let (_, used) = oncall.get(&format!("{REQUESTS}/{id}")).await;
    assert!(used["used"].is_string(), "{used}");

    // A fan-out asks nothing: approval is per target.
    let fan = oncall.jolokia(&set_level("orders-*", "FINE")).await;
    assert!(
        fan.to_string().contains("jmxgate.ApprovalRequired"),
        "{fan}"
    );
    assert!(fan.to_string().contains("send it to one target"), "{fan}");

    // The item records tell the story: asked, then run on the approval.
    let records = audit_records(&dir.path().join("audit"));
    let filter = jmxgate::audit::query::Filter {
        access_request: Some(id.clone()),
        ..Default::default()
    };
    let entries: Vec<jmxgate::audit::Entry> = records
        .iter()
        .map(|r| serde_json::from_value(r.clone()).unwrap())
        .filter(|e| filter.matches(e))
        .collect();
    let events: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e.event.as_str(), e.decision.as_deref().unwrap_or("-")))
        .collect();
    assert_eq!(
        events,
        [
            ("item", "denied"),
            ("item", "denied"),
            ("access_reviewed", "allowed"),
            ("access_refused", "denied"),
            ("item", "denied"),
            ("access_granted", "allowed"),
            ("item", "allowed")
        ],
        "{entries:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn abuse_gets_a_clear_error_and_nothing_it_was_not_approved_for() {
    let (orders, billing) = (
        Agent::start("jit-abuse-orders"),
        Agent::start("jit-abuse-billing"),
    );
    let dir = tempfile::tempdir().unwrap();
    let gw = started(&config(
        dir.path(),
        &orders,
        &billing,
        1,
        "pending_timeout = \"3s\"",
    ))
    .await;
    let dev = at(&gw, "dev");
    let lead = at(&gw, "lead1");
    let outsider = at(&gw, "outsider");

    let cases: &[(&As, Value, u16, &str)] = &[
        (
            &outsider,
            json!({"role":"ops","duration":"5m","reason":"x"}),
            403,
            "not one you may request",
        ),
        (
            &dev,
            json!({"role":"nope","duration":"5m","reason":"x"}),
            403,
            "not one you may request",
        ),
        (
            &dev,
            json!({"role":"ops","duration":"2h","reason":"x"}),
            400,
            "max_duration",
        ),
        (&dev, json!({"role":"ops","duration":"5m"}), 400, "reason"),
        (
            &dev,
            json!({"role":"ops","duration":"5m","reason":"x","targets":"billing-*"}),
            403,
            "within your reach",
        ),
        (
            &dev,
            json!({"role":"ops","duration":"5m","reason":"x","targets":"env="}),
            400,
            "targets",
        ),
        (
            &dev,
            json!({"role":"ops","duration":"soon","reason":"x"}),
            400,
            "duration",
        ),
        (
            &dev,
            json!({"role":"ops","duration":"5m","reason":"x","host":"10.0.0.1"}),
            400,
            "host",
        ),
    ];
    for (who, body, status, says) in cases {
        let (got, answer) = who.ask(body).await;
        assert_eq!(got, *status, "{body}: {answer}");
        assert!(
            answer["error"].as_str().unwrap_or("").contains(says),
            "{body}: {answer}"
        );
    }

    // SQL in a reason is text.
    let sql = "INC-1'); DROP TABLE access_requests; --";
    let (status, asked) = dev
        .ask(&json!({"role":"ops","duration":"5m","reason":sql}))
        .await;
    assert_eq!(status, 201, "{asked}");
    let id = asked["id"].as_str().unwrap().to_string();
    let (_, shown) = dev.get(&format!("{REQUESTS}/{id}")).await;
    assert_eq!(shown["reason"], sql);

    // Not a form post, not from another site, not anonymous.
    let form = gw
        .http
        .post(gw.url(REQUESTS))
        .basic_auth("dev", Some("pw"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("role=ops&duration=5m")
        .send()
        .await
        .unwrap();
    assert_eq!(form.status().as_u16(), 415);
    let cross = gw
        .http
        .post(gw.url(&format!("{REQUESTS}/{id}/approve")))
        .basic_auth("lead1", Some("pw"))
        .header("sec-fetch-site", "cross-site")
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(cross.status().as_u16(), 403);
    let anonymous = gw.http.get(gw.url(REQUESTS)).send().await.unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);

    // Someone else's request is not there for them; ids not made here are
    // not looked up.
    let (status, _) = at(&gw, "dev2").get(&format!("{REQUESTS}/{id}")).await;
    assert_eq!(status, 404);
    let (status, _) = outsider.review(&id, "approve", "").await;
    assert_eq!(status, 404);
    let (status, _) = dev.get(&format!("{REQUESTS}/1%20OR%201=1")).await;
    assert_eq!(status, 404);

    // A flood stops at access.max_pending_requests (3).
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(
            dev.ask(&json!({"role":"ops","duration":"5m","reason":"flood"}))
                .await
                .0,
        );
    }
    assert_eq!(statuses, [201, 201, 429, 429]);

    // Not reviewed within access.pending_timeout: expired, and then not
    // approvable.
    dev.wait_for_state(&id, "expired").await;
    let (status, late) = lead.review(&id, "approve", "").await;
    assert_eq!(status, 409, "{late}");
    assert!(
        late["error"].as_str().unwrap().contains("expired"),
        "{late}"
    );

    // Everything not needing elevation kept working all along.
    let read = dev
        .jolokia(&json!({"type":"read","mbean":"java.lang:type=Runtime","attribute":"Name","target":{"url":"orders-1"}}))
        .await;
    assert_eq!(read["status"], 200, "{read}");

    // Each refusal is in the audit log as a refused step.
    let refused = audit_records(&dir.path().join("audit"))
        .into_iter()
        .filter(|r| r["event"] == "access_refused")
        .count();
    assert!(refused >= cases.len() + 4, "{refused} refusals recorded");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_grant_ends_when_its_time_is_up() {
    let (orders, billing) = (
        Agent::start("jit-end-orders"),
        Agent::start("jit-end-billing"),
    );
    let dir = tempfile::tempdir().unwrap();
    let gw = started(&config(dir.path(), &orders, &billing, 1, "")).await;
    let dev = at(&gw, "dev");
    let lead = at(&gw, "lead2");
    let (_, asked) = dev
        .ask(&json!({"role":"ops","duration":"4s","targets":"orders-1","reason":"quick look"}))
        .await;
    let id = asked["id"].as_str().unwrap().to_string();
    let (status, _) = lead.review(&id, "approve", "").await;
    assert_eq!(status, 200);
    assert_eq!(dev.jolokia(&gc_on("orders-1")).await["status"], 200);
    let ended = eventually("the grant ends", Duration::from_secs(60), || async {
        let r = dev.jolokia(&gc_on("orders-1")).await;
        if r["status"] == 403 {
            Ok(r)
        } else {
            Err(r.to_string())
        }
    })
    .await;
    assert!(
        ended["error"].as_str().unwrap().contains(&format!(
            "your access request {id} for role ops allowed this and expired: ask again \
             with `jmxgate access request ops --reason ...`"
        )),
        "{ended}"
    );
    dev.wait_for_state(&id, "expired").await;
    let expired = audit_records(&dir.path().join("audit"))
        .into_iter()
        .any(|r| r["event"] == "access_expired" && r["access_request"] == id.as_str());
    assert!(expired, "the expiry is in the audit log");
}

/// `jmxgate access …` as a person types it, against the running gateway.
fn access_cli(gw: &Gateway, user: &str, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_jmxgate"))
        .arg("access")
        .args(args)
        .args(["--url", &gw.url("/jolokia"), "--user", user])
        .env("JMXGATE_PASSWORD", "pw")
        .env_remove("JMXGATE_URL")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_asks_lists_approves_and_revokes() {
    let (orders, billing) = (
        Agent::start("jit-cli-orders"),
        Agent::start("jit-cli-billing"),
    );
    let dir = tempfile::tempdir().unwrap();
    let gw = started(&config(dir.path(), &orders, &billing, 1, "")).await;
    let (ok, out, err) = access_cli(
        &gw,
        "dev",
        &[
            "request",
            "ops",
            "--duration",
            "30m",
            "--on",
            "orders-*",
            "--reason",
            "INC-1234",
            "--json",
        ],
    );
    assert!(ok, "{out}{err}");
    let asked: Value = serde_json::from_str(&out).unwrap();
    let id = asked["id"].as_str().unwrap();

    let (ok, out, err) = access_cli(&gw, "lead1", &["list", "--state", "pending"]);
    assert!(ok, "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with(id))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.contains("pending")
            && line.contains("dev")
            && line.contains("orders-*")
            && line.ends_with("yes"),
        "{line}"
    );

    let (ok, _, err) = access_cli(&gw, "dev", &["approve", id]);
    assert!(!ok);
    assert!(
        err.contains("403") && err.contains("your own request"),
        "{err}"
    );
    let (ok, out, err) = access_cli(&gw, "lead1", &["approve", id, "--comment", "ok"]);
    assert!(ok, "{err}");
    assert!(out.contains("state      approved"), "{out}");
    assert!(
        out.contains("review     lead1 approve at") && out.contains(": ok"),
        "{out}"
    );
    assert_eq!(
        at(&gw, "dev").jolokia(&gc_on("orders-1")).await["status"],
        200
    );

    let (ok, _, err) = access_cli(&gw, "dev", &["revoke", id]);
    assert!(ok, "{err}");
    let (ok, out, _) = access_cli(&gw, "dev", &["show", id]);
    assert!(
        ok && out.contains("state      revoked") && out.contains("ended_by   dev"),
        "{out}"
    );
    let (ok, _, err) = access_cli(&gw, "dev", &["show", "ar-0000"]);
    assert!(!ok && err.contains("404"), "{err}");
}

/// The official MCP Python SDK: the assistant asks and follows its
/// requests, a person approves; four-eyes on an operation through /mcp.
#[tokio::test(flavor = "multi_thread")]
async fn an_assistant_asks_over_mcp_and_a_person_approves() {
    let dir_py = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/python");
    let python = dir_py.join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing; run scripts/install-deps.sh",
        python.display()
    );
    let (orders, billing) = (
        Agent::start("jit-mcp-orders"),
        Agent::start("jit-mcp-billing"),
    );
    let dir = tempfile::tempdir().unwrap();
    let gw = started(&config(dir.path(), &orders, &billing, 2, "")).await;
    let mut cmd = std::process::Command::new(python);
    cmd.current_dir(dir_py)
        .args(["-m", "unittest", "-v", "test_mcp_access"])
        .env("JMXGATE_URL", gw.url(""))
        .env("JMXGATE_PASSWORD", "pw")
        .env("JMXGATE_AGENT_ORDERS_URL", orders.url());
    let (out, err) = common::run_client(cmd, Duration::from_secs(240)).await;
    println!("{out}{err}");
    // The assistant's steps are audited as MCP tool calls.
    let records = audit_records(&dir.path().join("audit"));
    let asked = records.iter().any(|r| {
        r["event"] == "access_requested" && r["channel"] == "mcp" && r["tool"] == "request_access"
    });
    assert!(asked, "the MCP request is in the audit log");
}

/// A webhook receiver that holds its first answer until told, then fails
/// twice with 503 before taking notices.
struct Hook {
    url: String,
    bodies: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
    attempts: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    release: Option<tokio::sync::oneshot::Sender<()>>,
}

async fn hook() -> Hook {
    use std::sync::atomic::Ordering;
    let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let attempts = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let released = std::sync::Arc::new(tokio::sync::Mutex::new(Some(released)));
    let (b, a) = (bodies.clone(), attempts.clone());
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: String| {
            let (b, a, released) = (b.clone(), a.clone(), released.clone());
            async move {
                let n = a.fetch_add(1, Ordering::SeqCst);
                if let Some(wait) = released.lock().await.take() {
                    let _ = wait.await;
                }
                if n < 2 {
                    return axum::http::StatusCode::SERVICE_UNAVAILABLE;
                }
                b.lock().unwrap().push(serde_json::from_str(&body).unwrap());
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    Hook {
        url,
        bodies,
        attempts,
        release: Some(release),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn reviewers_are_told_by_webhook_retried_and_never_in_the_way() {
    let (orders, billing) = (
        Agent::start("jit-hook-orders"),
        Agent::start("jit-hook-billing"),
    );
    let dir = tempfile::tempdir().unwrap();
    let mut hook = hook().await;
    let config = config(dir.path(), &orders, &billing, 1, "").replace(
        "approvals = 1\n",
        &format!(
            "approvals = 1\nnotify_url = \"{}\"\nnotify_format = \"slack\"\n",
            hook.url
        ),
    );
    let gw = started(&config).await;
    let dev = at(&gw, "dev");
    let (status, asked) = dev
        .ask(&json!({"role":"ops","duration":"30m","targets":"orders-*","reason":"INC-9 <!channel>"}))
        .await;
    // Answered while the hook still holds its first attempt.
    assert_eq!(status, 201, "{asked}");
    let id = asked["id"].as_str().unwrap().to_string();
    eventually("the hook is called", Duration::from_secs(30), || async {
        let n = hook.attempts.load(std::sync::atomic::Ordering::SeqCst);
        if n >= 1 {
            Ok(())
        } else {
            Err(format!("{n} attempts"))
        }
    })
    .await;
    assert!(hook.bodies.lock().unwrap().is_empty());
    let _ = hook.release.take().unwrap().send(());
    let text = eventually(
        "the notice arrives after two refusals",
        Duration::from_secs(60),
        || async {
            match hook.bodies.lock().unwrap().first() {
                Some(b) => Ok(b["text"].as_str().unwrap_or_default().to_string()),
                None => Err(format!(
                    "{} attempts",
                    hook.attempts.load(std::sync::atomic::Ordering::SeqCst)
                )),
            }
        },
    )
    .await;
    assert_eq!(
        text,
        format!("dev asks for role ops on orders-* for 30m (access request {id}): \"INC-9 &lt;!channel&gt;\"")
    );
    assert_eq!(hook.attempts.load(std::sync::atomic::Ordering::SeqCst), 3);
    let metrics = gw.gateway.metrics().encode();
    assert!(
        metrics.contains("jmxgate_notifications_total{outcome=\"sent\"} 1"),
        "{metrics}"
    );
    // The URL is a secret: not in the log of a failed attempt, nor in errors.
    assert!(!metrics.contains(&hook.url));
}

/// A person at the console: their browser's cookie and the page's token.
struct Browser {
    http: reqwest::Client,
    base: String,
    user: &'static str,
    cookie: String,
    token: String,
}

impl Browser {
    /// Opens the access page as `user`, as a browser would: the cookie it
    /// sets and the token its forms carry.
    async fn open(gw: &Gateway, user: &'static str) -> (Browser, String) {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let base = gw.url("");
        let r = http
            .get(format!("{base}/console/access"))
            .basic_auth(user, Some("pw"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let set = r.headers()["set-cookie"].to_str().unwrap().to_string();
        let cookie = set.split(';').next().unwrap().to_string();
        let page = r.text().await.unwrap();
        let token = cookie
            .strip_prefix("jmxgate_console_csrf=")
            .unwrap_or_else(|| panic!("{set}"))
            .to_string();
        // Every form of the page's own carries the cookie's token (the
        // header's sign-out drops only a cookie: its origin is checked).
        let main = page
            .split("<main>")
            .nth(1)
            .unwrap_or_else(|| panic!("{page}"));
        let forms = main.matches("<form").count();
        let tokens = main
            .matches(&format!("name=\"csrf\" value=\"{token}\""))
            .count();
        assert_eq!(forms, tokens, "{page}");
        let browser = Browser {
            http,
            base,
            user,
            cookie,
            token,
        };
        (browser, page)
    }

    async fn page(&self) -> String {
        self.http
            .get(format!("{}/console/access", self.base))
            .basic_auth(self.user, Some("pw"))
            .header("cookie", &self.cookie)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// Posts a form from the console's own page (`site`: what the browser
    /// says of where it comes from); the status and the answer's text.
    async fn post(
        &self,
        form: &str,
        fields: &[(&str, &str)],
        site: &str,
        token: &str,
    ) -> (u16, String) {
        let mut body = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in fields {
            body.append_pair(k, v);
        }
        body.append_pair("csrf", token);
        let r = self
            .http
            .post(format!("{}/console/access{form}", self.base))
            .basic_auth(self.user, Some("pw"))
            .header("cookie", &self.cookie)
            .header("sec-fetch-site", site)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.finish())
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        if status == 303 {
            assert_eq!(r.headers()["location"], "/console/access");
        }
        (status, r.text().await.unwrap())
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_role_is_asked_approved_and_revoked_in_the_console() {
    let (orders, billing) = (
        Agent::start("jit-console-orders"),
        Agent::start("jit-console-billing"),
    );
    let dir = tempfile::tempdir().unwrap();
    let gw = started(&config(dir.path(), &orders, &billing, 1, "")).await;
    let dev_api = at(&gw, "dev");
    assert_eq!(dev_api.jolokia(&gc_on("orders-1")).await["status"], 403);

    // The developer asks in a form.
    let (dev, page) = Browser::open(&gw, "dev").await;
    assert!(page.contains("<option value=\"ops\">"), "{page}");
    let asked = [
        ("role", "ops"),
        ("duration", "30m"),
        ("targets", "orders-*"),
        ("reason", "INC-77 <script>alert(1)</script>"),
    ];
    let (status, text) = dev.post("", &asked, "same-origin", &dev.token).await;
    assert_eq!(status, 303, "{text}");
    let (_, listed) = dev_api.get(REQUESTS).await;
    let request = &listed["requests"][0];
    assert_eq!(
        (request["state"].as_str(), request["reason"].as_str()),
        (Some("pending"), Some("INC-77 <script>alert(1)</script>")),
        "{listed}"
    );
    let id = request["id"].as_str().unwrap().to_string();

    // The lead sees it to review, the reason as text.
    let (lead, page) = Browser::open(&gw, "lead1").await;
    assert!(
        page.contains(&format!("/console/access/{id}/approve")),
        "{page}"
    );
    assert!(!page.contains("<script>alert"), "{page}");
    // An outsider is offered nothing and sees no one else's request.
    let (_, page) = Browser::open(&gw, "outsider").await;
    assert!(
        !page.contains(&id) && page.contains("None of your roles may ask"),
        "{page}"
    );

    // Another site's post, and a post without the page's token, are refused
    // and change nothing.
    let review = [("comment", "ok <b>go</b>")];
    let approve = format!("/{id}/approve");
    let (status, text) = lead
        .post(&approve, &review, "cross-site", &lead.token)
        .await;
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("another site"), "{text}");
    let (status, text) = lead
        .post(
            &approve,
            &review,
            "same-origin",
            "ffffffffffffffffffffffffffffffff",
        )
        .await;
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("token"), "{text}");
    let (_, still) = dev_api.get(&format!("{REQUESTS}/{id}")).await;
    assert_eq!(still["state"], "pending", "{still}");
    // The API's own rules: not one's own request.
    let (status, text) = dev.post(&approve, &review, "same-origin", &dev.token).await;
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("your own request"), "{text}");

    // Approved in the console: the developer runs the operation.
    let (status, text) = lead
        .post(&approve, &review, "same-origin", &lead.token)
        .await;
    assert_eq!(status, 303, "{text}");
    let (_, approved) = dev_api.get(&format!("{REQUESTS}/{id}")).await;
    assert_eq!(approved["state"], "approved", "{approved}");
    assert_eq!(approved["reviews"][0]["comment"], "ok <b>go</b>");
    let ran = dev_api.jolokia(&gc_on("orders-1")).await;
    assert_eq!(ran["status"], 200, "{ran}");
    let page = dev.page().await;
    assert!(
        page.contains(&format!("/console/access/{id}/revoke")),
        "{page}"
    );
    assert!(page.contains("ok &lt;b&gt;go&lt;/b&gt;"), "{page}");

    // Revoked from the console: gone at once.
    let (status, text) = dev
        .post(&format!("/{id}/revoke"), &[], "same-origin", &dev.token)
        .await;
    assert_eq!(status, 303, "{text}");
    assert_eq!(dev_api.jolokia(&gc_on("orders-1")).await["status"], 403);

    // The fleet's journal tells those who reach the role's targets.
    let (_, journal) = dev_api.get("/jmxgate/events?limit=1000").await;
    let steps: Vec<(&str, &str)> = journal["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"].as_str().is_some_and(|k| k.starts_with("access_")))
        .map(|e| (e["kind"].as_str().unwrap(), e["detail"].as_str().unwrap()))
        .collect();
    assert_eq!(
        steps,
        [
            (
                "access_requested",
                format!("dev asks for role ops on orders-* for 30m (access request {id})").as_str()
            ),
            (
                "access_granted",
                format!("dev was granted role ops on orders-* for 30m (access request {id})")
                    .as_str()
            ),
            (
                "access_revoked",
                format!("dev lost (revoked) role ops on orders-* for 30m (access request {id})")
                    .as_str()
            ),
        ],
        "{journal}"
    );
    assert!(
        journal.to_string().contains("\"targets\":[\"orders-1\"]"),
        "{journal}"
    );
    let (_, theirs) = at(&gw, "outsider").get("/jmxgate/events?limit=1000").await;
    assert!(!theirs.to_string().contains("access_"), "{theirs}");

    // Recorded as the API's steps, on the console's channel, refusals too.
    let records = audit_records(&dir.path().join("audit"));
    let steps: Vec<(&str, &str)> = records
        .iter()
        .filter(|r| {
            r["channel"] == "console"
                && r["event"]
                    .as_str()
                    .is_some_and(|e| e.starts_with("access_"))
        })
        .map(|r| {
            (
                r["event"].as_str().unwrap(),
                r["principal"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            ("access_requested", "dev"),
            ("access_refused", "lead1"),
            ("access_refused", "lead1"),
            ("access_refused", "dev"),
            ("access_granted", "lead1"),
            ("access_revoked", "dev"),
        ],
        "{records:?}"
    );
}

/// Three webhook servers of the test's own on loopback: one takes
/// connections and never answers, one answers every post with 500, one
/// takes every notice (its bodies kept by path).
struct Hooks {
    hanging: String,
    hanging_calls: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    failing: String,
    failing_calls: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    working: String,
    got: std::sync::Arc<std::sync::Mutex<Vec<(String, Value)>>>,
}

async fn hooks() -> Hooks {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    let hanging_calls = Arc::new(AtomicUsize::new(0));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hanging = format!("http://{}/hang", listener.local_addr().unwrap());
    let calls = hanging_calls.clone();
    tokio::spawn(async move {
        // Held open, never read from nor answered.
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            calls.fetch_add(1, Ordering::SeqCst);
            held.push(socket);
        }
    });

    let failing_calls = Arc::new(AtomicUsize::new(0));
    let calls = failing_calls.clone();
    let app = axum::Router::new().fallback(move || {
        let calls = calls.clone();
        async move {
            calls.fetch_add(1, Ordering::SeqCst);
            axum::http::StatusCode::INTERNAL_SERVER_ERROR
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let failing = format!("http://{}/fail", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let got = Arc::new(Mutex::new(Vec::new()));
    let keep = got.clone();
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri, body: String| {
        let keep = keep.clone();
        async move {
            let v: Value = serde_json::from_str(&body).unwrap_or_default();
            keep.lock().unwrap().push((uri.path().to_string(), v));
            "ok"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let working = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    Hooks {
        hanging,
        hanging_calls,
        failing,
        failing_calls,
        working,
        got,
    }
}

/// Issue 55: beside a webhook that hangs and one that fails, under a
/// burst of 600 targets going down, the working hook still hears of every
/// one of them (batched), and the reviewers' `notify_url` of every access
/// step made meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn a_hanging_and_a_failing_webhook_hold_back_no_other_notice() {
    use std::sync::atomic::Ordering;
    const DOWN: usize = 600;
    const ROUNDS: usize = 20;
    let (orders, billing) = (
        Agent::start("jit-flood-orders"),
        Agent::start("jit-flood-billing"),
    );
    let dir = tempfile::tempdir().unwrap();
    let hooks = hooks().await;
    let dead = common::dead_port();
    let mut extra = String::from("\n[health]\nprobe_interval = \"1s\"\n");
    for i in 0..DOWN {
        extra.push_str(&format!(
            "\n[[targets]]\nname = \"standin-{i:03}\"\nurl = \"http://127.0.0.1:{dead}/jolokia\"\n"
        ));
    }
    for url in [
        &hooks.hanging,
        &hooks.failing,
        &format!("{}/fleet", hooks.working),
    ] {
        extra.push_str(&format!("\n[[events.webhooks]]\nurl = \"{url}\"\n"));
    }
    let config = config(dir.path(), &orders, &billing, 1, "").replace(
        "approvals = 1\n",
        &format!(
            "approvals = 1\nnotify_url = \"{}/reviewers\"\n",
            hooks.working
        ),
    ) + &extra;
    let gw = started(&config).await;

    // The flood is under way: the hanging hook holds a notice.
    eventually(
        "the hanging hook is called",
        Duration::from_secs(60),
        || async {
            let n = hooks.hanging_calls.load(Ordering::SeqCst);
            (n >= 1).then_some(()).ok_or(format!("{n} calls"))
        },
    )
    .await;

    // Meanwhile, access steps: each asked and denied.
    let (dev, lead) = (at(&gw, "dev"), at(&gw, "lead1"));
    let mut steps = std::collections::BTreeSet::new();
    for i in 0..ROUNDS {
        let (status, asked) = dev
            .ask(&json!({"role":"ops","duration":"10m","reason":format!("INC-{i}")}))
            .await;
        assert_eq!(status, 201, "{asked}");
        let id = asked["id"].as_str().unwrap().to_string();
        let (status, denied) = lead.review(&id, "deny", "not now").await;
        assert_eq!(status, 200, "{denied}");
        steps.insert(("access_requested".to_string(), id.clone()));
        steps.insert(("access_denied".to_string(), id));
    }

    // Every step reaches the reviewers' hook, once.
    let told = |path: &str| -> Vec<Value> {
        hooks
            .got
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, v)| v.clone())
            .collect()
    };
    eventually(
        "every access step reaches notify_url",
        Duration::from_secs(120),
        || async {
            let seen: std::collections::BTreeSet<(String, String)> = told("/reviewers")
                .iter()
                .map(|v| {
                    (
                        v["event"].as_str().unwrap_or("").to_string(),
                        v["request"]["id"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect();
            (seen == steps)
                .then_some(())
                .ok_or(format!("{} of {} steps", seen.len(), steps.len()))
        },
    )
    .await;
    assert_eq!(told("/reviewers").len(), steps.len());

    // The working fleet hook hears of every target down, in notices that
    // each carry a burst.
    let covered = |notices: &[Value]| -> usize {
        notices
            .iter()
            .filter(|v| v["event"] == "target_down")
            .map(|v| {
                v["targets"].as_array().map_or(0, Vec::len)
                    + v["more"].as_u64().unwrap_or(0) as usize
            })
            .sum()
    };
    eventually(
        "the working hook hears of every target down",
        Duration::from_secs(120),
        || async {
            let n = covered(&told("/fleet"));
            (n >= DOWN).then_some(()).ok_or(format!("{n} of {DOWN}"))
        },
    )
    .await;
    let fleet = told("/fleet");
    assert_eq!(covered(&fleet), DOWN, "each once: {fleet:?}");
    let downs: Vec<&Value> = fleet
        .iter()
        .filter(|v| v["event"] == "target_down")
        .collect();
    let events: u64 = downs
        .iter()
        .map(|v| v["events"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(events, DOWN as u64, "{downs:?}");
    assert!(
        downs.iter().any(|v| v["events"].as_u64() > Some(1)),
        "bursts batched: {downs:?}"
    );

    // The hanging and the failing hook were tried, and their circuits
    // opened; the working one's did not.
    assert!(hooks.failing_calls.load(Ordering::SeqCst) >= 1);
    eventually(
        "the two bad hooks' circuits open",
        Duration::from_secs(120),
        || async {
            let metrics = gw.gateway.metrics().encode();
            metrics
                .contains("jmxgate_notification_circuits_open 2\n")
                .then_some(())
                .ok_or(metrics)
        },
    )
    .await;
    let metrics = gw.gateway.metrics().encode();
    // Nothing queued was lost to a full queue: the bad hooks' notices were
    // skipped by their circuits, or failed.
    assert!(!metrics.contains("outcome=\"dropped\""), "{metrics}");
    for url in [&hooks.hanging, &hooks.failing, &hooks.working] {
        assert!(!metrics.contains(url.as_str()), "a hook's URL is a secret");
    }
}
