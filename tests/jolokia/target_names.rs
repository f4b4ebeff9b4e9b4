//! Routing against hostile callers: no way to learn the names of targets
//! one may not reach, by any door or answer.
//!
//! Found by the first hardening rounds (formerly tests/hardening.rs).

use crate::common;

use common::{shared_agents, tenants_config, Gateway};
use serde_json::{json, Value};

const T: &str = "jmxgate.test:type=Types";

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
