//! Issue 55, round 4, against real agents (of the generation under test:
//! the suite runs this file with 1.7.1 and with 2.6.0 agents): the
//! approval step of four-eyes can't be skipped through an MBean pattern,
//! a reviewer's reach, or another site's page; and what the new doors let
//! slip stays in.
//!
//! No assertion is on speed: deadlines are generous, outcomes are checked.

use crate::access;
use crate::common;

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

/// Item 15: on the HTTPS listener, a page an `<allow-origin>` admits with
/// an `https` origin is judged as over HTTPS by the Jolokia door and by
/// `/jmxgate/explain` (as MCP and the console judge it), not refused as
/// "Secure origin … over HTTP".
#[tokio::test(flavor = "multi_thread")]
async fn an_https_page_is_judged_as_https_on_the_tls_listener() {
    let agent = Agent::start("r4-https-origin");
    let pki = common::TestPki::new("r4-origin");
    let (cert, key) = pki.server_cert("gateway");
    let dir = tempfile::tempdir().unwrap();
    let page = "https://127.0.0.1:9443";
    let policy = dir.path().join("page.xml");
    std::fs::write(
        &policy,
        format!("<restrict><cors><allow-origin>{page}</allow-origin></cors></restrict>"),
    )
    .unwrap();
    let tls = format!(
        "cert_file = \"{}\"\nkey_file = \"{}\"\n",
        cert.display(),
        key.display()
    );
    let config = format!(
        "{}[access]\nanonymous_role = \"web\"\n[[roles]]\nname = \"web\"\ntargets = [\"*\"]\npolicy = \"{}\"\n",
        targets_toml(&[&agent]),
        policy.display()
    );
    let gw = Gateway::start_tls(&tls, &config).await;
    let https = pki.https_client(None);
    let base = format!("https://127.0.0.1:{}", gw.addr.port());
    let item = json!({"type":"read","mbean":"java.lang:type=Runtime","attribute":"VmName",
                      "target":{"url": agent.name}});
    let expected = common::direct(
        &agent,
        &json!({"type":"read","mbean":"java.lang:type=Runtime","attribute":"VmName"}),
    )
    .await;
    let r = https
        .post(format!("{base}/jolokia"))
        .header("origin", page)
        .header("content-type", "application/json")
        .body(item.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()
            .get("access-control-allow-origin")
            .map(|v| v.to_str().unwrap().to_string()),
        Some(page.to_string())
    );
    let read: Value = r.json().await.unwrap();
    assert_eq!(read["status"], 200, "{read}");
    assert_eq!(read["value"], expected["value"], "{read}");
    let explained: Value = https
        .post(format!("{base}/jmxgate/explain"))
        .header("origin", page)
        .header("content-type", "application/json")
        .body(item.to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(explained["decision"], "allow", "{explained}");
    // The same page's origin over plain HTTP stays refused as Jolokia
    // refuses it: the rule is the scheme's, not a blanket pass.
    let plain = Gateway::start(&config).await;
    let r = plain
        .http
        .post(plain.url("/jolokia"))
        .header("origin", page)
        .header("content-type", "application/json")
        .body(item.to_string())
        .send()
        .await
        .unwrap();
    let refused: Value = r.json().await.unwrap();
    assert_eq!(refused["status"], 403, "{refused}");
    assert!(
        refused["error"].as_str().unwrap().contains("Secure origin"),
        "{refused}"
    );
}

/// How a caller of [`request_as`] proves who it is.
#[derive(Clone, Copy)]
enum Who<'a> {
    Basic(&'a str),
    Bearer(&'a str),
    /// The client certificate its client presents.
    Cert,
    Anonymous,
}

/// One request as `who`, ready to send ([`answer_of`]).
fn request_as(
    client: &reqwest::Client,
    url: String,
    who: Who<'_>,
    method: reqwest::Method,
    body: Option<Value>,
) -> reqwest::RequestBuilder {
    let mut req = client.request(method, url);
    match who {
        Who::Basic(user) => req = req.basic_auth(user, Some("pw")),
        Who::Bearer(token) => req = req.header("authorization", token),
        Who::Cert | Who::Anonymous => {}
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    req
}

/// The HTTP status and the parsed answer (its text when it is not JSON).
async fn answer_of(req: reqwest::RequestBuilder) -> (u16, Value) {
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text)),
    )
}

/// Item 12: grants, requests and audit trails belong to an identity (the
/// method and issuer as well as the name): a bearer token whose subject
/// is alice and a client certificate named alice hold nothing of Basic
/// alice's grant, see none of her requests and read none of her trail;
/// none of them approves her request (the same name is taken as the same
/// person); an explicit `[[access.people]]` makes two of them one. An
/// anonymous caller reads no trail.
#[tokio::test(flavor = "multi_thread")]
async fn an_identity_is_its_method_and_issuer_as_well_as_its_name() {
    let orders = Agent::start("r4-identity-orders");
    let pki = common::TestPki::new("r4-identity");
    let (cert, key) = pki.server_cert("gateway");
    let alice_cert = pki.client_cert("alice", false);
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(
        dir.path(),
        &[("alice", "pw", &["developers"]), ("lead", "pw", &["leads"])],
    );
    let secret = dir.path().join("jwt-secret");
    let jwt_secret = b"jmxgate-round4-identity-secret-0123456789";
    std::fs::write(&secret, jwt_secret).unwrap();
    let read_only = read_only_policy(dir.path());
    let tls = format!(
        "cert_file = \"{}\"\nkey_file = \"{}\"\nclient_ca_file = \"{}\"\nclient_auth = \"optional\"\n",
        cert.display(),
        key.display(),
        pki.ca_file().display()
    );
    let body = |people: &str| {
        format!(
            r#"{targets}
[auth.basic]
users_file = "{users}"
[auth.bearer]
hs256_secret_file = "{secret}"
[auth.mtls]
principal_from = "cn"
[auth.mtls.roles]
"alice" = ["developers"]

[access]
anonymous_role = "viewers"
{people}
[access.store]
sqlite_file = "{db}"

[audit]
dir = "{audit}"

[[roles]]
name = "viewers"
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

[[roles]]
name = "ops"
targets = ["orders-*"]
requestable_by = ["developers"]
approvers = ["leads"]
max_duration = "1h"
"#,
            targets =
                targets_toml(&[&orders]).replace(&format!("\"{}\"", orders.name), "\"orders-1\""),
            users = users.display(),
            secret = secret.display(),
            db = dir.path().join("access.db").display(),
            audit = dir.path().join("audit").display(),
        )
    };
    let methods = r#"tls_auth = ["mtls", "basic", "bearer", "anonymous"]"#;
    let gw = Gateway::start_tls_with(methods, &tls, &body("")).await;
    gw.access_store_opened().await;
    let base = format!("https://127.0.0.1:{}", gw.addr.port());
    let https = pki.https_client(None);
    let with_cert = pki.https_client(Some(&alice_cert));
    let jwt = |roles: &[&str]| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        format!(
            "Bearer {}",
            jsonwebtoken::encode(
                &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
                &json!({"sub": "alice", "exp": now + 3600, "roles": roles}),
                &jsonwebtoken::EncodingKey::from_secret(jwt_secret),
            )
            .unwrap()
        )
    };
    let bearer = jwt(&["developers"]);
    let bearer_lead = jwt(&["leads"]);
    let send = |who: Who<'_>, method: reqwest::Method, path: &str, body: Option<Value>| {
        let client = if matches!(who, Who::Cert) {
            &with_cert
        } else {
            &https
        };
        answer_of(request_as(
            client,
            format!("{base}{path}"),
            who,
            method,
            body,
        ))
    };
    let gc = json!({"type":"exec","mbean":"java.lang:type=Memory","operation":"gc","target":{"url":"orders-1"}});
    let basic = Who::Basic("alice");
    let token = Who::Bearer(&bearer);

    let (status, asked) = send(
        basic,
        reqwest::Method::POST,
        access::REQUESTS,
        Some(json!({"role":"ops","duration":"30m"})),
    )
    .await;
    assert_eq!(status, 201, "{asked}");
    assert_eq!(asked["requester"], "alice");
    assert_eq!(asked["requester_identity"], "basic:alice");
    let id = asked["id"].as_str().unwrap().to_string();
    let one = format!("{}/{id}", access::REQUESTS);
    // The other alices don't see it, and can't approve it or revoke it.
    for other in [token, Who::Cert] {
        let (status, r) = send(other, reqwest::Method::GET, &one, None).await;
        assert_eq!(status, 404, "{r}");
        let (_, listed) = send(other, reqwest::Method::GET, access::REQUESTS, None).await;
        assert!(!listed.to_string().contains(&id), "{listed}");
        let (status, r) = send(
            other,
            reqwest::Method::POST,
            &format!("{one}/approve"),
            Some(json!({})),
        )
        .await;
        assert_eq!(status, 404, "{r}");
    }
    let (status, approved) = send(
        Who::Basic("lead"),
        reqwest::Method::POST,
        &format!("{one}/approve"),
        Some(json!({})),
    )
    .await;
    assert_eq!(
        (status, &approved["state"]),
        (200, &json!("approved")),
        "{approved}"
    );

    // Basic alice holds ops now; the others don't.
    let (_, ran) = send(basic, reqwest::Method::POST, "/jolokia", Some(gc.clone())).await;
    assert_eq!(ran["status"], 200, "{ran}");
    for other in [token, Who::Cert] {
        let (_, r) = send(other, reqwest::Method::POST, "/jolokia", Some(gc.clone())).await;
        assert_eq!(r["status"], 403, "{r}");
    }

    // Trails: Basic alice's gc is in hers, not in the others'; an
    // anonymous caller reads none.
    let trail = |who| send(who, reqwest::Method::GET, "/console/audit?limit=1000", None);
    let (status, own) = trail(basic).await;
    assert_eq!(status, 200);
    assert!(own.as_str().unwrap().contains("java.lang:type=Memory gc"));
    for other in [token, Who::Cert] {
        let (status, theirs) = trail(other).await;
        assert_eq!(status, 200);
        let theirs = theirs.as_str().unwrap();
        // Their own refusals only: none of Basic alice's request, grant
        // or the gc it allowed.
        assert!(
            !theirs.contains("access_requested")
                && !theirs.contains("access_granted")
                && !theirs.contains("<tr class=\"allowed\">"),
            "{theirs}"
        );
    }
    let (status, anonymous) = trail(Who::Anonymous).await;
    assert_eq!(status, 403, "{anonymous}");
    assert!(!anonymous.as_str().unwrap().contains("gc"), "{anonymous}");
    // A second request by Basic alice: a person of the same name through
    // another method is taken to be her, and approves nothing of hers.
    let (_, second) = send(
        basic,
        reqwest::Method::POST,
        access::REQUESTS,
        Some(json!({"role":"ops","duration":"5m"})),
    )
    .await;
    let second = second["id"].as_str().unwrap().to_string();
    let (status, refused) = send(
        Who::Bearer(&bearer_lead),
        reqwest::Method::POST,
        &format!("{}/{second}/approve", access::REQUESTS),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("your own request"),
        "{refused}"
    );
    drop(gw);

    // Declared one person, Basic alice and the token's alice share it.
    let people =
        "[[access.people]]\nname = \"alice\"\nidentities = [\"basic:alice\", \"bearer:- alice\"]\n";
    let gw = Gateway::start_tls_with(methods, &tls, &body(people)).await;
    gw.access_store_opened().await;
    let base = format!("https://127.0.0.1:{}", gw.addr.port());
    let send = |who: Who<'_>, method: reqwest::Method, path: &str, body: Option<Value>| {
        answer_of(request_as(
            &https,
            format!("{base}{path}"),
            who,
            method,
            body,
        ))
    };
    let (status, asked) = send(
        basic,
        reqwest::Method::POST,
        access::REQUESTS,
        Some(json!({"role":"ops","duration":"30m"})),
    )
    .await;
    assert_eq!(status, 201, "{asked}");
    assert_eq!(asked["requester_identity"], "person:alice");
    let mapped = asked["id"].as_str().unwrap().to_string();
    let (status, shown) = send(
        token,
        reqwest::Method::GET,
        &format!("{}/{mapped}", access::REQUESTS),
        None,
    )
    .await;
    assert_eq!(status, 200, "{shown}");
    // Her own, whichever way she signs in: she can't approve it.
    let (status, own) = send(
        token,
        reqwest::Method::POST,
        &format!("{}/{mapped}/approve", access::REQUESTS),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 403, "{own}");
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

/// Item 14: the console's 401 (a page asked for without credentials) is
/// framed no more than the page it stands for.
#[tokio::test(flavor = "multi_thread")]
async fn the_consoles_401_keeps_its_frame_headers() {
    let orders = Agent::start("r4-console-401");
    let dir = tempfile::tempdir().unwrap();
    let gw = started(&four_eyes_config(dir.path(), &orders)).await;
    for path in ["/console/", "/console/audit", "/console/targets/orders-1"] {
        let r = gw.http.get(gw.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 401, "{path}");
        let h = r.headers();
        assert_eq!(h.get("x-frame-options").unwrap(), "DENY", "{path}");
        let csp = h.get("content-security-policy").unwrap().to_str().unwrap();
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert!(h.get("www-authenticate").is_some(), "{path}");
    }
}
