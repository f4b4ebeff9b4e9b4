//! A multi-tenant gateway against hostile callers, with real agents: CORS
//! and JSONP decided by the roles of the caller that reach each item's
//! target, and the gateway's own answers showing the fleet only to who
//! reaches it.
//!
//! Found by the first hardening rounds (formerly tests/hardening.rs).

use crate::common;

use common::{header, shared_agents, targets_toml, tenants_config, users_file, Gateway};
use serde_json::{json, Value};

const T: &str = "jmxgate.test:type=Types";

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
