//! Who a caller is: their method and issuer as well as their name, for
//! grants, requests and reviews alike.
//!
//! Found by issue 55's hardening round 4 (formerly tests/hardening_round4.rs).

use crate::access;
use crate::common;
use crate::four_eyes::read_only_policy;

use common::{targets_toml, users_file, Agent, Gateway};
use serde_json::{json, Value};

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
