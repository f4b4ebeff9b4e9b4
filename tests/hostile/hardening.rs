//! A multi-tenant gateway against hostile callers, with real agents: CORS
//! decided by the caller's own roles, no way to learn target names one may
//! not reach, slow clients bounded by timeouts and a connection cap, and
//! `X-Content-Type-Options: nosniff` and an `X-Request-Id` on every answer.

use crate::common;

use std::time::{Duration, Instant};

use common::{basic_auth_config, shared_agents, targets_toml, users_file, Gateway, GatewayProcess};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const T: &str = "jmxgate.test:type=Types";

/// Two tenants: `ann` (role `a`: target alpha, `<cors>` admits only
/// https://good.example.com and http://pages.example.com) and `bob` (role
/// `b`: target beta, no `<cors>`, so any origin), `carol`, who holds both
/// roles, and `eve`, who holds no configured role; with an audit log.
/// `server` goes into `[server]`.
fn tenants_config(dir: &std::path::Path, server: &str) -> String {
    let [a, b, ..] = shared_agents();
    let users = users_file(
        dir,
        &[
            ("ann", "ann-pw", &["a"]),
            ("bob", "bob-pw", &["b"]),
            ("carol", "carol-pw", &["a", "b"]),
            ("eve", "eve-pw", &["no-such-role"]),
        ],
    );
    let policy = |name: &str, body: &str| {
        let path = dir.join(format!("{name}.xml"));
        std::fs::write(&path, format!("<restrict>{body}</restrict>")).unwrap();
        path.display().to_string()
    };
    let pa = policy(
        "a",
        "<cors><allow-origin>https://good.example.com</allow-origin>\
         <allow-origin>http://pages.example.com</allow-origin></cors>",
    );
    let pb = policy("b", "");
    basic_auth_config(
        &users,
        &format!(
            "{server}\n{}[[roles]]\nname = \"a\"\ntargets = [\"alpha\"]\npolicy = \"{pa}\"\n\n\
             [[roles]]\nname = \"b\"\ntargets = [\"beta\"]\npolicy = \"{pb}\"\n\n\
             [audit]\ndir = \"{}\"\n",
            targets_toml(&[a, b]),
            dir.join("audit").display()
        ),
    )
}

fn header<'a>(resp: &'a reqwest::Response, name: &str) -> Option<&'a str> {
    resp.headers().get(name).map(|v| v.to_str().unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn cors_answers_follow_the_callers_own_roles() {
    let dir = tempfile::tempdir().unwrap();
    let gw = Gateway::start(&tenants_config(dir.path(), "")).await;
    let read = |user: &str, target: &str, origin: &str| {
        gw.http
            .get(gw.url(&format!("/jolokia/targets/{target}/read/{T}/Name")))
            .basic_auth(user, Some(format!("{user}-pw")))
            .header("origin", origin)
            .send()
    };
    // Ann's only role admits good.example.com; bob's admitting every origin
    // must not open ann's data to evil.example.
    let evil = read("ann", "alpha", "http://evil.example").await.unwrap();
    assert_eq!(header(&evil, "access-control-allow-origin"), None);
    assert_eq!(header(&evil, "access-control-allow-credentials"), None);
    let good = read("ann", "alpha", "https://good.example.com")
        .await
        .unwrap();
    assert_eq!(
        header(&good, "access-control-allow-origin"),
        Some("https://good.example.com")
    );
    assert_eq!(
        header(&good, "access-control-allow-credentials"),
        Some("true")
    );
    // The same by proxy mode at /jolokia.
    let proxied = gw
        .http
        .post(gw.url("/jolokia"))
        .basic_auth("ann", Some("ann-pw"))
        .header("origin", "http://evil.example")
        .body(
            json!({"type":"read","mbean":T,"attribute":"Name","target":{"url":"alpha"}})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(header(&proxied, "access-control-allow-origin"), None);
    assert!(proxied
        .text()
        .await
        .unwrap()
        .contains("\"value\":\"alpha\""));
    // Bob's role has no <cors>: any origin, as Jolokia's own default.
    let bob = read("bob", "beta", "http://evil.example").await.unwrap();
    assert_eq!(
        header(&bob, "access-control-allow-origin"),
        Some("http://evil.example")
    );
    // `Origin: null` never gets `*` together with credentials.
    let null = read("bob", "beta", "null").await.unwrap();
    assert_eq!(header(&null, "access-control-allow-origin"), Some("*"));
    assert_eq!(header(&null, "access-control-allow-credentials"), None);
    // A preflight carries no credentials: answered for an origin some role
    // admits, so that the browser sends the real request.
    let preflight = gw
        .http
        .request(reqwest::Method::OPTIONS, gw.url("/jolokia/targets/alpha"))
        .header("origin", "http://evil.example")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(
        header(&preflight, "access-control-allow-origin"),
        Some("http://evil.example")
    );
    assert_eq!(
        header(&preflight, "x-content-type-options"),
        Some("nosniff")
    );
}

/// A caller holding two tenants' roles: the roles that reach each item's
/// target decide its CORS and JSONP answer, so role `b` (any origin) never
/// widens role `a`'s `<cors>` for alpha, at `/jolokia` as at `/mcp` (where
/// a page needs an explicit admission first).
#[tokio::test(flavor = "multi_thread")]
async fn cors_and_jsonp_follow_the_roles_that_reach_each_items_target() {
    let dir = tempfile::tempdir().unwrap();
    let gw = Gateway::start(&tenants_config(dir.path(), "")).await;
    let item = |t: &str| json!({"type":"read","mbean":T,"attribute":"Name","target":{"url":t}});
    let proxied = |body: Value| {
        gw.http
            .post(gw.url("/jolokia"))
            .basic_auth("carol", Some("carol-pw"))
            .header("origin", "http://evil.example")
            .body(body.to_string())
            .send()
    };
    for (body, admitted) in [
        (item("beta"), true),
        (item("alpha"), false),
        (json!([item("beta"), item("alpha")]), false),
        (json!([item("beta"), item("beta")]), true),
    ] {
        let r = proxied(body.clone()).await.unwrap();
        assert_eq!(
            header(&r, "access-control-allow-origin").is_some(),
            admitted,
            "{body}"
        );
    }

    // JSONP: a page origin that the roles reaching the target admit.
    let jsonp = |user: &str, target: &str, referer: Option<&str>| {
        let mut r = gw
            .http
            .get(gw.url(&format!(
                "/jolokia/targets/{target}/read/{T}/Name?callback=seen"
            )))
            .basic_auth(user, Some(format!("{user}-pw")));
        if let Some(referer) = referer {
            r = r.header("referer", referer);
        }
        async move {
            let r = r.send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let (status, text) = jsonp("ann", "alpha", Some("http://pages.example.com/app/")).await;
    assert_eq!(status, 200, "{text}");
    assert!(
        text.starts_with("seen(") && text.contains("\"value\":\"alpha\""),
        "{text}"
    );
    let (status, text) = jsonp("carol", "beta", Some("http://evil.example/x")).await;
    assert_eq!(status, 200, "{text}");
    for (user, target, referer) in [
        ("ann", "alpha", Some("http://evil.example/x")),
        ("carol", "alpha", Some("http://evil.example/x")),
        ("carol", "beta", None),
    ] {
        let (status, text) = jsonp(user, target, referer).await;
        assert_eq!(status, 403, "{user} {target} {referer:?}: {text}");
        assert!(text.contains("jmxgate.JsonpRefused"), "{text}");
        assert!(!text.contains("\"value\""), "nothing was read: {text}");
    }

    // MCP: a page that no <allow-origin> names (role b has no <cors>,
    // which admits every page for Jolokia) gets no door: DNS rebinding.
    let door_refused = gw
        .http
        .post(gw.url("/mcp"))
        .basic_auth("carol", Some("carol-pw"))
        .header("origin", "http://evil.example")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(door_refused.status(), 403);
    let text = door_refused.text().await.unwrap();
    assert!(text.contains("jmxgate.OriginNotAllowed"), "{text}");
    drop(gw);

    // With the page admitted to the door (mcp.allowed_origins), each call
    // runs only where the roles reaching its target admit it.
    let dir = tempfile::tempdir().unwrap();
    let gw = Gateway::start(&tenants_config(
        dir.path(),
        "[mcp]\nallowed_origins = [\"http://evil.example\"]\n",
    ))
    .await;
    let call = |target: &str| {
        gw.http
            .post(gw.url("/mcp"))
            .basic_auth("carol", Some("carol-pw"))
            .header("origin", "http://evil.example")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(
                json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{
                    "name":"read_attributes",
                    "arguments":{"target":target,"mbean":T,"attributes":["Name"]}}})
                .to_string(),
            )
            .send()
    };
    let beta: Value =
        serde_json::from_str(&call("beta").await.unwrap().text().await.unwrap()).unwrap();
    assert_eq!(beta["result"]["isError"], false, "{beta}");
    let alpha: Value =
        serde_json::from_str(&call("alpha").await.unwrap().text().await.unwrap()).unwrap();
    assert_eq!(alpha["result"]["isError"], true, "{alpha}");
    let text = alpha["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("not admitted"), "{text}");
    let records = common::audit_records(&dir.path().join("audit"));
    assert!(
        records.iter().any(|r| r["principal"] == "carol"
            && r["channel"] == "mcp"
            && r["status"] == 403
            && r["error_type"] == "jmxgate.OriginNotAllowed"),
        "the refused call is audited: {records:#?}"
    );
}

/// `version` and `config` without a target show the host, the process id
/// and the fleet's size only to callers whose roles reach some target;
/// every answer says it must not be stored.
#[tokio::test(flavor = "multi_thread")]
async fn the_gateways_own_answers_show_the_fleet_only_to_who_reaches_it() {
    let dir = tempfile::tempdir().unwrap();
    let [a, ..] = shared_agents();
    let users = users_file(dir.path(), &[("ops", "ops-pw", &["ops"])]);
    let gw = Gateway::start(&format!(
        "auth = [\"basic\", \"anonymous\"]\n{}[auth.basic]\nusers_file = \"{}\"\n\n\
         [access]\nanonymous_role = \"outsider\"\n\n\
         [[roles]]\nname = \"outsider\"\ntargets = [\"no-such-*\"]\n\n\
         [[roles]]\nname = \"ops\"\ntargets = [\"*\"]\n",
        targets_toml(&[a]),
        users.display()
    ))
    .await;
    let version = |user: Option<&str>| {
        let mut r = gw.http.get(gw.url("/jolokia/version"));
        if let Some(u) = user {
            r = r.basic_auth(u, Some(format!("{u}-pw")));
        }
        async move {
            let r = r.send().await.unwrap();
            let store = header(&r, "cache-control").map(str::to_string);
            (
                store,
                serde_json::from_str::<Value>(&r.text().await.unwrap()).unwrap(),
            )
        }
    };
    let (store, outsider) = version(None).await;
    assert_eq!(store.as_deref(), Some("no-store"));
    let v = &outsider["value"];
    assert_eq!(v["id"], "jmxgate", "{outsider}");
    assert_eq!(v["details"]["agent_id"], "jmxgate", "{outsider}");
    assert!(v["info"].get("jmxgate").is_none(), "{outsider}");
    let pid = std::process::id().to_string();
    assert!(!outsider.to_string().contains(&pid), "{outsider}");
    let (store, ops) = version(Some("ops")).await;
    assert_eq!(store.as_deref(), Some("no-store"));
    assert_eq!(ops["value"]["info"]["jmxgate"]["targets"], 1, "{ops}");
    assert!(ops["value"]["id"].as_str().unwrap().contains(&pid), "{ops}");
}

/// The answer with the variable parts (request id, the name asked for)
/// taken out, for comparing two answers.
async fn shape(resp: reqwest::Response, name: &str) -> (u16, Vec<(String, String)>, String) {
    let status = resp.status().as_u16();
    let mut headers: Vec<(String, String)> = resp
        .headers()
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "x-request-id" | "date" | "content-length"))
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
        .collect();
    headers.sort();
    let body = resp.text().await.unwrap().replace(name, "NAME");
    (status, headers, body)
}

#[tokio::test(flavor = "multi_thread")]
async fn target_names_cannot_be_probed() {
    let dir = tempfile::tempdir().unwrap();
    let gw = Gateway::start(&tenants_config(dir.path(), "")).await;
    let virtual_get = |user: Option<&str>, name: &str| {
        let r = gw
            .http
            .get(gw.url(&format!("/jolokia/targets/{name}/version")));
        match user {
            Some(u) => r.basic_auth(u, Some(format!("{u}-pw"))),
            None => r,
        }
        .send()
    };
    // Without credentials: the same 401 for a configured name and any other.
    let configured = shape(virtual_get(None, "beta").await.unwrap(), "beta").await;
    let unknown = shape(virtual_get(None, "nosuch").await.unwrap(), "nosuch").await;
    assert_eq!(configured.0, 401, "{configured:?}");
    assert_eq!(configured, unknown);
    // Ann: the same 404 for beta (exists, not hers) and a name that doesn't.
    let hidden = shape(virtual_get(Some("ann"), "beta").await.unwrap(), "beta").await;
    let unknown = shape(virtual_get(Some("ann"), "nosuch").await.unwrap(), "nosuch").await;
    assert_eq!(hidden.0, 404, "{hidden:?}");
    assert_eq!(hidden, unknown);
    assert!(hidden.2.contains("jmxgate.UnknownTarget"), "{hidden:?}");
    // Bob reaches beta.
    assert_eq!(
        virtual_get(Some("bob"), "beta").await.unwrap().status(),
        200
    );
    // Eve holds no role: told so, whatever name she tries.
    let configured = shape(virtual_get(Some("eve"), "beta").await.unwrap(), "beta").await;
    let unknown = shape(virtual_get(Some("eve"), "nosuch").await.unwrap(), "nosuch").await;
    assert!(
        configured.2.contains("Principal eve has no role"),
        "{configured:?}"
    );
    assert_eq!(configured, unknown);

    // Proxy mode: by name and by the agent's URL, the same item error.
    let beta_url = shared_agents()[1].url();
    let items = json!([
        {"type":"read","mbean":T,"attribute":"Name","target":{"url":"beta"}},
        {"type":"read","mbean":T,"attribute":"Name","target":{"url":"nosuch"}},
        {"type":"read","mbean":T,"attribute":"Name","target":{"url":beta_url}},
        {"type":"read","mbean":T,"attribute":"Name","target":{"url":"http://127.0.0.1:1/jolokia"}},
        {"type":"read","mbean":T,"attribute":"Name","target":{"url":"alpha"}},
    ]);
    let (gw_ref, items_ref) = (&gw, &items);
    let post_as = |user: &'static str| async move {
        let (gw, items) = (gw_ref, items_ref);
        gw.http
            .post(gw.url("/jolokia"))
            .basic_auth(user, Some(format!("{user}-pw")))
            .body(items.to_string())
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    let text = post_as("ann").await;
    let r: Value = serde_json::from_str(&text).unwrap();
    let without = |i: usize, name: &str| {
        let mut e = r[i].clone();
        e.as_object_mut().unwrap().remove("request");
        e.as_object_mut().unwrap().remove("timestamp");
        e.to_string().replace(name, "NAME")
    };
    assert_eq!(r[0]["status"], 404, "{text}");
    assert_eq!(without(0, "beta"), without(1, "nosuch"));
    assert_eq!(
        without(2, &beta_url),
        without(3, "http://127.0.0.1:1/jolokia")
    );
    assert_eq!(r[4]["value"], "alpha");
    assert!(!text.contains("not reachable"), "{text}");
    let eve: Value = serde_json::from_str(&post_as("eve").await).unwrap();
    for i in 0..5 {
        assert_eq!(eve[i]["status"], 403, "{eve}");
        assert_eq!(eve[i]["error"], eve[0]["error"], "{eve}");
    }

    // Explain: authentication first, then the same answer for both names.
    let explain = |user: Option<&str>, name: &str| {
        let r = gw
            .http
            .post(gw.url(&format!("/jmxgate/explain?target={name}")))
            .body(json!({"type":"version"}).to_string());
        match user {
            Some(u) => r.basic_auth(u, Some(format!("{u}-pw"))),
            None => r,
        }
        .send()
    };
    let configured = shape(explain(None, "beta").await.unwrap(), "beta").await;
    let unknown = shape(explain(None, "nosuch").await.unwrap(), "nosuch").await;
    assert_eq!(configured.0, 401);
    assert_eq!(configured, unknown);
    let hidden = shape(explain(Some("ann"), "beta").await.unwrap(), "beta").await;
    let unknown = shape(explain(Some("ann"), "nosuch").await.unwrap(), "nosuch").await;
    assert_eq!(hidden.0, 404);
    assert_eq!(hidden, unknown);
    // Explaining a proxy item by the agent's URL shows the URL as sent,
    // never the name behind it.
    let report = gw
        .http
        .post(gw.url("/jmxgate/explain"))
        .basic_auth("ann", Some("ann-pw"))
        .body(json!([items[2], items[3]]).to_string())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!report.contains("\"beta\""), "{report}");
    let report: Value = serde_json::from_str(&report).unwrap();
    let entry = |i: usize, url: &str| {
        let mut e = report[i].clone();
        e.as_object_mut().unwrap().remove("index");
        e.to_string().replace(url, "URL")
    };
    assert_eq!(report[0]["decision"], "deny", "{report}");
    assert_eq!(entry(0, &beta_url), entry(1, "http://127.0.0.1:1/jolokia"));

    // The audit log tells the operator which target it really was.
    let records = common::audit_records(&dir.path().join("audit"));
    let denied = records
        .iter()
        .find(|r| r["principal"] == "ann" && r["target"] == "beta" && r["event"] == "item")
        .unwrap_or_else(|| panic!("no record of ann and beta: {records:?}"));
    assert_eq!(denied["decision"], "denied");
    assert_eq!(denied["rule"], "no role of ann reaches target beta");
    // The same probe by virtual URL is recorded too, and so is the
    // explain that asked about it.
    let probed = records
        .iter()
        .find(|r| r["principal"] == "ann" && r["target"] == "beta" && r["event"] == "request")
        .unwrap_or_else(|| panic!("no record of ann's virtual URL probe: {records:?}"));
    assert_eq!(probed["decision"], "denied");
    assert_eq!(probed["status"], 404);
    assert_eq!(probed["error_type"], "jmxgate.UnknownTarget");
    assert!(
        records
            .iter()
            .any(|r| r["principal"] == "ann" && r["event"] == "explain"),
        "no explain record: {records:?}"
    );
}

/// Reads until the peer closes or `within` passes; what came, and whether
/// it closed.
async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> (String, bool) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (String::from_utf8_lossy(&got).into(), true),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => return (String::from_utf8_lossy(&got).into(), false),
        }
    }
}

const BASIC_ANN: &str = "Authorization: Basic YW5uOmFubi1wdw=="; // ann:ann-pw

#[test]
fn slow_clients_are_cut_off_and_release_their_slots() {
    let dir = tempfile::tempdir().unwrap();
    let config = common::gateway_toml(
        dir.path(),
        &tenants_config(
            dir.path(),
            // Both slots may be taken by callers not yet known: their
            // password checks are counted in the anonymous share.
            "header_read_timeout = \"1s\"\nbody_read_timeout = \"1s\"\n\
             max_concurrent_requests = 2\nmax_anonymous_requests = 2\nmax_connections = 6",
        ),
    );
    let gateway = GatewayProcess::start(&config, "info");
    let addr = gateway.addr.clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        // A request line that never ends: the connection is closed.
        let mut partial = TcpStream::connect(&addr).await.unwrap();
        partial.write_all(b"GET /jolokia/vers").await.unwrap();
        let (_, closed) = read_until_closed(&mut partial, Duration::from_secs(10)).await;
        assert!(closed, "a partial request line was kept open");

        // Bodies that trickle (a short Content-Length body and a chunked
        // one), as many as max_concurrent_requests: each gets 408 and
        // gives its slot back.
        let head = |extra: &str| {
            format!(
                "POST /jolokia/targets/alpha HTTP/1.1\r\nHost: {addr}\r\n{BASIC_ANN}\r\n\
                 Content-Type: application/json\r\n{extra}\r\n"
            )
        };
        let mut short = TcpStream::connect(&addr).await.unwrap();
        short
            .write_all(format!("{}{{\"type\":", head("Content-Length: 100\r\n")).as_bytes())
            .await
            .unwrap();
        let mut chunked = TcpStream::connect(&addr).await.unwrap();
        chunked
            .write_all(head("Transfer-Encoding: chunked\r\n").as_bytes())
            .await
            .unwrap();
        let trickle = tokio::spawn(async move {
            for _ in 0..40 {
                if chunked.write_all(b"1\r\n \r\n").await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            read_until_closed(&mut chunked, Duration::from_secs(10)).await
        });
        for (answer, closed) in [
            read_until_closed(&mut short, Duration::from_secs(10)).await,
            trickle.await.unwrap(),
        ] {
            assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
            assert!(answer.contains("server.body_read_timeout"), "{answer}");
            assert!(answer
                .to_ascii_lowercase()
                .contains("x-content-type-options: nosniff"));
            assert!(closed, "the connection stays open after 408: {answer}");
        }

        // Both slots are free again: a request is answered.
        let http = common::http_client();
        let answer = http
            .post(format!("http://{addr}/jolokia/targets/alpha"))
            .basic_auth("ann", Some("ann-pw"))
            .body(json!({"type":"read","mbean":T,"attribute":"Name"}).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200);
        assert!(answer.text().await.unwrap().contains("\"value\":\"alpha\""));
    });
    gateway.stop();
}

/// Sockets that are opened and send nothing (re-opened as soon as they are
/// closed) can't keep other clients out: at `server.max_connections` an
/// idle connection makes room for a new one, the never-used ones first,
/// while a connection busy with a request is left alone.
#[test]
fn idle_connections_make_room_at_the_connection_cap() {
    let dir = tempfile::tempdir().unwrap();
    let config = common::gateway_toml(
        dir.path(),
        &tenants_config(
            dir.path(),
            "header_read_timeout = \"30s\"\nmax_connections = 6",
        ),
    );
    let gateway = GatewayProcess::start(&config, "info");
    let addr = gateway.addr.clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let http = common::http_client();
        // One slow request holds its connection busy throughout.
        let slow = {
            let (http, addr) = (http.clone(), addr.clone());
            tokio::spawn(async move {
                http.post(format!("http://{addr}/jolokia/targets/alpha"))
                    .basic_auth("ann", Some("ann-pw"))
                    .body(
                        json!({"type":"exec","mbean":"jmxgate.test:type=Operations",
                               "operation":"sleep","arguments":[3000]})
                        .to_string(),
                    )
                    .send()
                    .await
                    .unwrap()
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Twelve silent sockets, each re-opened as soon as it is closed.
        let opened = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let flood: Vec<_> = (0..12)
            .map(|_| {
                let (addr, opened) = (addr.clone(), opened.clone());
                tokio::spawn(async move {
                    loop {
                        let Ok(mut s) = TcpStream::connect(&addr).await else {
                            continue;
                        };
                        opened.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let mut buf = [0u8; 64];
                        let _ = s.read(&mut buf).await;
                    }
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(500)).await;
        // Fresh clients get in, each far sooner than the 30 s header
        // timeout that would otherwise free a place.
        for _ in 0..5 {
            let started = Instant::now();
            let answer = common::http_client()
                .get(format!("http://{addr}/jolokia/targets/alpha/read/{T}/Name"))
                .basic_auth("ann", Some("ann-pw"))
                .send()
                .await
                .unwrap();
            assert_eq!(answer.status(), 200);
            assert!(answer.text().await.unwrap().contains("\"value\":\"alpha\""));
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "waited {:?} for a place",
                started.elapsed()
            );
        }
        // The busy connection was not cut.
        let slow = slow.await.unwrap();
        assert_eq!(slow.status(), 200);
        assert!(slow.text().await.unwrap().contains("\"status\":200"));
        for task in flood {
            task.abort();
        }
        let reopened = opened.load(std::sync::atomic::Ordering::Relaxed);
        assert!(reopened > 12, "the idle sockets were closed to make room");
    });
    let lines = gateway.stop();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("server.max_connections reached")),
        "no log line for the connection cap:\n{}",
        lines.join("\n")
    );
}

/// `jmxgate serve` itself: a gateway without roles says at start-up that
/// it is open to everyone (logging starts before the gateway is built).
#[test]
fn the_real_binary_warns_when_no_roles_are_configured() {
    let dir = tempfile::tempdir().unwrap();
    let [a, ..] = shared_agents();
    let config = common::gateway_toml(dir.path(), &targets_toml(&[a]));
    let gateway = GatewayProcess::start(&config, "info");
    let _ = gateway
        .wait_for_line("no roles configured", Duration::from_secs(10))
        .expect("the open-gateway warning in the log");
    gateway.stop();
}
