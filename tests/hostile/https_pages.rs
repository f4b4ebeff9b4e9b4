//! A page over HTTPS is judged as HTTPS on the TLS listener: its origin
//! and Fetch Metadata as the browser sent them.
//!
//! Found by issue 55's hardening round 4 (formerly tests/hardening_round4.rs).

use crate::common;

use common::{targets_toml, Agent, Gateway};
use serde_json::{json, Value};

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
