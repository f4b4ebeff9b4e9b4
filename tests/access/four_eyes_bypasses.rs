//! Four-eyes against real agents (of the generation under test): the
//! approval step can't be skipped through an MBean pattern, a reviewer's
//! reach or another site's page; an approval covers exactly its item; the
//! store is its owner's only; the journal names an item, not its arguments.
//!
//! No assertion is on speed: deadlines are generous, outcomes are checked.
//!
//! Found by issue 55's hardening round 4 (formerly tests/hardening_round4.rs).

use crate::access;
use crate::common;
use crate::four_eyes::{at, four_eyes_config, mcp_call, started};

use access::{level_on, As, LOGGING};
use common::{audit_records, Agent};
use serde_json::{json, Value};

/// An exec of `setLoggerLevel` on an MBean pattern that matches the
/// guarded Logging MBean.
fn level_by_pattern(target: &str, level: &str) -> Value {
    json!({"type":"exec","mbean":"java.util.logging:type=Loggin*","operation":"setLoggerLevel",
           "arguments":["global", level],"target":{"url":target}})
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

/// Makes the four-eyes item wait and returns its request's id.
async fn waiting_item(oncall: &As<'_>) -> String {
    access::request_named_by(&oncall.jolokia(&access::set_level("orders-1", "FINE")).await)
}

/// Item 3: another page (another port of the host, a sibling, any page
/// without Fetch Metadata whose origin is not the gateway's) can't
/// approve, deny or revoke with a reviewer's browser credentials, nor can
/// a body that isn't JSON (an empty one neither). The gateway's own page,
/// and a client that is no browser, can.
#[tokio::test(flavor = "multi_thread")]
async fn no_other_page_approves_with_a_reviewers_credentials() {
    let orders = Agent::start("r4-csrf-orders");
    let dir = tempfile::tempdir().unwrap();
    let gw = started(&four_eyes_config(dir.path(), &orders)).await;
    let oncall = at(&gw, "oncall");
    let lead = at(&gw, "lead");
    let id = waiting_item(&oncall).await;
    let host = format!("127.0.0.1:{}", gw.addr.port());
    let own = format!("http://{host}");
    let other_port = format!("http://127.0.0.1:{}", common::dead_port());

    let send =
        |verb: &'static str, headers: Vec<(&'static str, String)>, body: Option<&'static str>| {
            let mut req = gw
                .http
                .post(gw.url(&format!("{}/{id}/{verb}", access::REQUESTS)))
                .basic_auth("lead", Some("pw"));
            for (k, v) in headers {
                req = req.header(k, v);
            }
            if let Some(b) = body {
                req = req.body(b);
            }
            async move {
                let r = req.send().await.unwrap();
                let status = r.status().as_u16();
                (status, r.text().await.unwrap())
            }
        };
    let json = || ("content-type", "application/json".to_string());
    // Headers, body and the status they get.
    type Case = (Vec<(&'static str, String)>, Option<&'static str>, u16);
    let hostile: Vec<Case> = vec![
        // What the probe sent: a page on another port, marked same-site.
        (
            vec![
                ("sec-fetch-site", "same-site".into()),
                ("origin", other_port.clone()),
                ("content-type", "text/plain".into()),
            ],
            None,
            403,
        ),
        (
            vec![("sec-fetch-site", "cross-site".into()), json()],
            Some("{}"),
            403,
        ),
        (
            vec![("sec-fetch-site", "same-site".into()), json()],
            Some("{}"),
            403,
        ),
        (
            vec![("sec-fetch-site", "none".into()), json()],
            Some("{}"),
            403,
        ),
        // Fetch Metadata decides, whatever the Origin says.
        (
            vec![
                ("sec-fetch-site", "same-site".into()),
                ("origin", own.clone()),
                json(),
            ],
            Some("{}"),
            403,
        ),
        // No Fetch Metadata: an Origin that is not the gateway's.
        (
            vec![("origin", other_port.clone()), json()],
            Some("{}"),
            403,
        ),
        (
            vec![("origin", "http://sub.127.0.0.1".into()), json()],
            Some("{}"),
            403,
        ),
        (vec![("origin", "null".into()), json()], Some("{}"), 403),
        // The gateway's own page, but not JSON: an empty body too.
        (
            vec![
                ("sec-fetch-site", "same-origin".into()),
                ("content-type", "text/plain".into()),
            ],
            None,
            415,
        ),
        (vec![("sec-fetch-site", "same-origin".into())], None, 415),
        (vec![("origin", own.clone())], None, 415),
        (vec![], None, 415),
        (
            vec![("content-type", "application/x-www-form-urlencoded".into())],
            Some("comment=ok"),
            415,
        ),
    ];
    for verb in ["approve", "deny", "revoke"] {
        for (headers, body, expected) in &hostile {
            let (status, text) = send(verb, headers.clone(), *body).await;
            assert_eq!(
                status, *expected,
                "{verb} with {headers:?} {body:?}: {text}"
            );
        }
    }
    let (_, still) = lead.get(&format!("{}/{id}", access::REQUESTS)).await;
    assert_eq!(still["state"], "pending", "nothing changed it: {still}");
    assert!(still["reviews"].as_array().unwrap().is_empty(), "{still}");

    // The gateway's own page approves; so does a client that is no browser.
    let (status, text) = send(
        "approve",
        vec![
            ("sec-fetch-site", "same-origin".into()),
            ("origin", own.clone()),
            json(),
        ],
        None,
    )
    .await;
    assert_eq!(status, 200, "{text}");
    // A second item: its own request, approved by a client that is no
    // browser.
    let id2 =
        access::request_named_by(&oncall.jolokia(&access::set_level("orders-1", "ALL")).await);
    let (status, approved) = lead.review(&id2, "approve", "").await;
    assert_eq!(status, 200, "{approved}");
    // The refusals are in the audit log, each as a refused step.
    drop(gw);
    let refused_steps = audit_records(&dir.path().join("audit"))
        .into_iter()
        .filter(|r| r["event"] == "access_refused")
        .count();
    assert_eq!(refused_steps, 3 * hostile.len());
}

/// Item 6: the access store's files (the database and its `-wal` and
/// `-shm`) are readable by their owner only, from the start and after a
/// restart that finds them readable by others.
#[tokio::test(flavor = "multi_thread")]
async fn the_access_store_is_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let orders = Agent::start("r4-store-modes");
    let dir = tempfile::tempdir().unwrap();
    let config = four_eyes_config(dir.path(), &orders);
    let files = || {
        ["access.db", "access.db-wal", "access.db-shm"]
            .iter()
            .map(|f| dir.path().join(f))
            .filter(|p| p.exists())
            .collect::<Vec<_>>()
    };
    let modes = || {
        files()
            .iter()
            .map(|p| {
                let mode = std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
                (p.file_name().unwrap().to_string_lossy().into_owned(), mode)
            })
            .collect::<Vec<_>>()
    };
    let gw = started(&config).await;
    // An item's arguments in the store, in clear.
    let _ = waiting_item(&at(&gw, "oncall")).await;
    let seen = modes();
    assert!(
        seen.iter().any(|(f, _)| f == "access.db")
            && seen.iter().any(|(f, _)| f == "access.db-wal"),
        "{seen:?}"
    );
    assert!(seen.iter().all(|(_, m)| *m == 0o600), "{seen:?}");
    drop(gw);
    for p in files() {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let gw = started(&config).await;
    let seen = modes();
    assert!(
        seen.iter().all(|(_, m)| *m == 0o600),
        "after a restart: {seen:?}"
    );
    // And it still holds what it held.
    let again = at(&gw, "oncall")
        .jolokia(&access::set_level("orders-1", "FINE"))
        .await;
    assert!(
        again["error"]
            .as_str()
            .unwrap()
            .contains("waits for approval"),
        "{again}"
    );
}

/// Item 7: an approval covers exactly the digits it was given: approving
/// `echo(1.00000000000000000001)` runs that and nothing that differs in
/// the twentieth decimal, and the agent gets the digits as sent (its
/// answer is the one it gives to the same request sent to it directly).
#[tokio::test(flavor = "multi_thread")]
async fn an_approval_covers_exactly_its_numbers_digit_for_digit() {
    let orders = Agent::start("r4-digits");
    let dir = tempfile::tempdir().unwrap();
    let gw = started(&four_eyes_config(dir.path(), &orders)).await;
    let lead = at(&gw, "lead");
    let echo = |digits: &str| {
        let text = format!(
            r#"{{"type":"exec","mbean":"jmxgate.test:type=Operations","operation":"echo","arguments":[{digits}],"target":{{"url":"orders-1"}}}}"#
        );
        text
    };
    let send = |body: String| {
        let gw = &gw;
        async move {
            let r = gw
                .http
                .post(gw.url("/jolokia"))
                .basic_auth("oncall", Some("pw"))
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            common::parse(&r.text().await.unwrap())
        }
    };
    let id = access::request_named_by(&send(echo("1.00000000000000000001")).await);
    // The reviewer sees the exact item.
    let (_, shown) = lead.get(&format!("{}/{id}", access::REQUESTS)).await;
    assert!(
        shown.to_string().contains("1.00000000000000000001"),
        "{shown}"
    );
    let (status, approved) = lead.review(&id, "approve", "").await;
    assert_eq!(
        (status, &approved["state"]),
        (200, &json!("approved")),
        "{approved}"
    );
    // Another number, equal as a double: another item.
    let other = send(echo("1.00000000000000000002")).await;
    assert_eq!(other["error_type"], "jmxgate.ApprovalRequired", "{other}");
    assert!(!other["error"].as_str().unwrap().contains(&id), "{other}");
    let ran = send(echo("1.00000000000000000001")).await;
    assert_eq!(ran["status"], 200, "{ran}");
    // The same text straight to the agent (not through a JSON tree,
    // which would round it).
    let direct = gw
        .http
        .post(orders.url())
        .header("content-type", "application/json")
        .body(r#"{"type":"exec","mbean":"jmxgate.test:type=Operations","operation":"echo","arguments":[1.00000000000000000001]}"#)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let direct = common::parse(&direct);
    assert_eq!(ran["value"], direct["value"], "{ran} vs {direct}");
}

/// Item 9: the events journal names a four-eyes item by its MBean and
/// operation, never its arguments, to a reader who only views the target
/// (the audit log hashes them).
#[tokio::test(flavor = "multi_thread")]
async fn the_journal_names_an_item_but_not_its_arguments() {
    let orders = Agent::start("r4-journal");
    let dir = tempfile::tempdir().unwrap();
    let gw = started(&four_eyes_config(dir.path(), &orders)).await;
    let secret = "r4-journal-secret-logger";
    let item = json!({"type":"exec","mbean":LOGGING,"operation":"setLoggerLevel",
                      "arguments":[secret, "FINE"],"target":{"url":"orders-1"}});
    let refused = at(&gw, "oncall").jolokia(&item).await;
    assert_eq!(
        refused["error_type"], "jmxgate.ApprovalRequired",
        "{refused}"
    );
    let viewer = at(&gw, "viewer");
    let journal = common::eventually(
        "the access request is in the journal",
        std::time::Duration::from_secs(60),
        || async {
            let (status, events) = viewer.get("/jmxgate/events").await;
            let text = events.to_string();
            if status == 200 && text.contains("access_requested") {
                Ok(text)
            } else {
                Err(format!("{status} {text}"))
            }
        },
    )
    .await;
    assert!(journal.contains("setLoggerLevel"), "{journal}");
    assert!(!journal.contains(secret), "{journal}");
    assert!(!journal.contains("FINE"), "{journal}");
}
