//! `[auth.kubernetes]` against a real kube-apiserver (1.20.2 over etcd,
//! ../shared/kubernetes): ServiceAccount tokens from the TokenRequest API,
//! checked by TokenReview, roles from the config, a real Jolokia agent
//! behind. The gateway's own credentials are a ServiceAccount allowed only
//! to create tokenreviews (the RBAC the README asks for).
//!
//! One API server for the whole file: a single test runs the scenarios one
//! after the other; the API server's stop comes last.

use crate::access;
use crate::common;
use crate::kube_api;

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{json, Value};

use common::Agent;
use kube_api::{allow_on_pods, create_namespace, ApiServer};

const T: &str = "jmxgate.test:type=Types";
const WAIT: Duration = Duration::from_secs(60);

async fn create_account(client: &kube::Client, ns: &str, name: &str) {
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &account)
        .await
        .unwrap_or_else(|e| panic!("create service account {ns}/{name}: {e}"));
}

/// A token for service account `ns/name` from the TokenRequest API.
async fn token(client: &kube::Client, ns: &str, name: &str, audience: &str) -> String {
    let request: TokenRequest = serde_json::from_value(json!({
        "spec": {"audiences": [audience], "expirationSeconds": 3600}
    }))
    .unwrap();
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("token for {ns}/{name}: {e}"))
        .status
        .expect("a token")
        .token
}

/// The gateway's own kubeconfig: service account `jmxgate/gateway`,
/// allowed to create tokenreviews and subjectaccessreviews, nothing else.
async fn gateway_kubeconfig(
    server: &ApiServer,
    client: &kube::Client,
    dir: &std::path::Path,
) -> PathBuf {
    let pp = PostParams::default();
    create_account(client, "jmxgate", "gateway").await;
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "jmxgate-authn"},
        "rules": [
            {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
            {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}
        ]
    }))
    .unwrap();
    Api::<ClusterRole>::all(client.clone())
        .create(&pp, &role)
        .await
        .unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "jmxgate-authn"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "jmxgate-authn"},
        "subjects": [{"kind": "ServiceAccount", "name": "gateway", "namespace": "jmxgate"}]
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&pp, &binding)
        .await
        .unwrap();
    let token = token(
        client,
        "jmxgate",
        "gateway",
        "https://kubernetes.default.svc",
    )
    .await;
    let admin = std::fs::read_to_string(&server.kubeconfig).unwrap();
    let users_line = admin
        .lines()
        .find(|l| l.starts_with("users:"))
        .expect("users line")
        .to_string();
    let text = admin.replace(
        &users_line,
        &format!("users: [{{name: admin, user: {{token: \"{token}\"}}}}]"),
    );
    let path = dir.join("gateway-kubeconfig");
    std::fs::write(&path, text).unwrap();
    path
}

/// A request to target `app` with `Authorization: <auth>`.
async fn call(gw: &common::Gateway, auth: &str, body: &Value) -> (u16, Value) {
    call_at(gw, "app", auth, body).await
}

/// A request to `target` with `Authorization: <auth>`.
async fn call_at(gw: &common::Gateway, target: &str, auth: &str, body: &Value) -> (u16, Value) {
    let resp = gw
        .http
        .post(gw.url(&format!("/jolokia/targets/{target}")))
        .header("authorization", auth)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn read() -> Value {
    json!({"type": "read", "mbean": T, "attribute": "Name"})
}

fn write() -> Value {
    json!({"type": "write", "mbean": T, "attribute": "Int", "value": 1})
}

#[tokio::test(flavor = "multi_thread")]
async fn service_account_tokens_are_reviewed_by_a_real_api_server() {
    if !kube_api::available() {
        panic!("../shared/kubernetes/run-apiserver.sh or etcd (etcd-server) missing: run scripts/install-deps.sh");
    }
    let server = std::thread::spawn(ApiServer::start);
    let agent = Agent::start("app");
    let mut server = server.join().unwrap();
    let client = server.client().await.unwrap();
    let dir = tempfile::tempdir().unwrap();

    for ns in ["jmxgate", "shop", "other", "rbac"] {
        create_namespace(&client, ns, json!({})).await;
    }
    create_account(&client, "shop", "monitor").await;
    create_account(&client, "shop", "ops").await;
    create_account(&client, "other", "stranger").await;
    // Roles from RBAC: reader may get pods in shop, updater update them.
    create_account(&client, "rbac", "reader").await;
    create_account(&client, "rbac", "updater").await;
    allow_on_pods(&client, "shop", ("rbac", "reader"), &["get"]).await;
    allow_on_pods(&client, "shop", ("rbac", "updater"), &["get", "update"]).await;
    let kubeconfig = gateway_kubeconfig(&server, &client, dir.path()).await;
    let users = common::users_file(dir.path(), &[("admin", "pw", &["operator"])]);
    let read_only = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("policies/read-only.xml");
    // Bearer JWTs of the gateway's own issuer on the same listener: a
    // token they don't verify goes to the cluster.
    let jwt_secret = b"jmxgate-kubernetes-auth-test-secret";
    let secret_file = dir.path().join("jwt-secret");
    std::fs::write(&secret_file, jwt_secret).unwrap();

    let config = format!(
        "[health]\nprobe_interval = \"0s\"\n\
         [[targets]]\nname = \"app\"\nurl = \"{url}\"\nlabels = {{ namespace = \"shop\" }}\n\
         [[targets]]\nname = \"elsewhere\"\nurl = \"{url}\"\nlabels = {{ namespace = \"other\" }}\n\
         [[roles]]\nname = \"viewer\"\ntargets = [\"*\"]\npolicy = \"{policy}\"\n\
         [[roles]]\nname = \"operator\"\ntargets = [\"*\"]\n\
         [auth.basic]\nusers_file = \"{users}\"\n\
         [auth.bearer]\nhs256_secret_file = \"{secret}\"\n\
         [auth.kubernetes]\nkubeconfig = \"{kubeconfig}\"\naudiences = [\"jmxgate\"]\ncache_ttl = \"1s\"\naccess_cache_ttl = \"1s\"\n\
         [auth.kubernetes.roles]\n\"system:serviceaccount:shop:ops\" = [\"operator\"]\n\
         [auth.kubernetes.group_roles]\n\"system:serviceaccounts:shop\" = [\"viewer\"]\n\
         [[auth.kubernetes.access]]\nrole = \"viewer\"\nverb = \"get\"\nresource = \"pods\"\n\
         [[auth.kubernetes.access]]\nrole = \"operator\"\nverb = \"update\"\nresource = \"pods\"\n\
         [audit]\ndir = \"{audit}\"\n",
        url = agent.url(),
        policy = read_only.display(),
        users = users.display(),
        secret = secret_file.display(),
        kubeconfig = kubeconfig.display(),
        audit = dir.path().join("audit").display(),
    );
    // `server.auth` not set: basic, bearer and kubernetes, as configured.
    let gw = common::Gateway::start(&config).await;

    let monitor = format!(
        "Bearer {}",
        token(&client, "shop", "monitor", "jmxgate").await
    );
    let ops = format!("Bearer {}", token(&client, "shop", "ops", "jmxgate").await);
    let stranger = format!(
        "Bearer {}",
        token(&client, "other", "stranger", "jmxgate").await
    );

    // shop's service accounts are viewers: they read, they don't write.
    let (status, r) = call(&gw, &monitor, &read()).await;
    assert_eq!((status, &r["value"]), (200, &json!("app")), "{r}");
    let (_, r) = call(&gw, &monitor, &write()).await;
    assert_eq!(r["status"], 403, "{r}");
    // ops is an operator too: it writes.
    let (status, r) = call(&gw, &ops, &write()).await;
    assert_eq!((status, &r["status"]), (200, &json!(200)), "{r}");
    // Authenticated, with no role: reaches nothing.
    let (_, r) = call(&gw, &stranger, &read()).await;
    assert_ne!(r["value"], "app", "{r}");

    // Roles from RBAC: get on pods in shop makes reader a viewer of shop's
    // targets, update makes updater an operator there; neither reaches
    // the targets of namespace other.
    let reader = format!(
        "Bearer {}",
        token(&client, "rbac", "reader", "jmxgate").await
    );
    let updater = format!(
        "Bearer {}",
        token(&client, "rbac", "updater", "jmxgate").await
    );
    let (status, r) = call(&gw, &reader, &read()).await;
    assert_eq!((status, &r["value"]), (200, &json!("app")), "{r}");
    let (_, r) = call(&gw, &reader, &write()).await;
    assert_eq!(r["status"], 403, "{r}");
    let (status, r) = call(&gw, &updater, &write()).await;
    assert_eq!((status, &r["status"]), (200, &json!(200)), "{r}");
    for who in [&reader, &updater] {
        let (_, r) = call_at(&gw, "elsewhere", who, &read()).await;
        assert_ne!(r["value"], "app", "{r}");
        let (_, r) = call_at(&gw, "elsewhere", who, &write()).await;
        assert_ne!(r["status"], 200, "{r}");
    }
    // The config's roles reach everywhere: monitor reads there.
    let (_, r) = call_at(&gw, "elsewhere", &monitor, &read()).await;
    assert_eq!(r["value"], "app", "{r}");

    // Refused: a token for another audience, a forged one, a made-up one,
    // a token of a service account deleted since.
    let other_audience = format!(
        "Bearer {}",
        token(&client, "shop", "monitor", "https://kubernetes.default.svc").await
    );
    // One character changed in the middle of the signature.
    let mut forged: Vec<char> = monitor.chars().collect();
    let at = forged.len() - 40;
    forged[at] = if forged[at] == 'A' { 'B' } else { 'A' };
    let forged: String = forged.into_iter().collect();
    for (what, auth) in [
        ("another audience", other_audience.as_str()),
        ("forged", forged.as_str()),
        ("made up", "Bearer not-a-token"),
    ] {
        let resp = gw
            .http
            .post(gw.url("/jolokia/targets/app"))
            .header("authorization", auth)
            .json(&read())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 401, "{what}");
        let challenges: Vec<&str> = resp
            .headers()
            .get_all("www-authenticate")
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        assert!(
            challenges.contains(&"Bearer realm=\"jmxgate\", error=\"invalid_token\""),
            "{what}: {challenges:?}"
        );
    }
    create_account(&client, "shop", "gone").await;
    let gone = format!("Bearer {}", token(&client, "shop", "gone", "jmxgate").await);
    assert_eq!(call(&gw, &gone, &read()).await.0, 200);
    Api::<ServiceAccount>::namespaced(client.clone(), "shop")
        .delete("gone", &DeleteParams::default())
        .await
        .unwrap();
    common::eventually("a deleted account's token refused", WAIT, || async {
        match call(&gw, &gone, &read()).await.0 {
            401 => Ok(()),
            s => Err(format!("{s}")),
        }
    })
    .await;

    // A JWT the bearer settings verify is theirs; one signed with another
    // key is the cluster's to review, which refuses it.
    let jwt = |key: &[u8]| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        format!(
            "Bearer {}",
            jsonwebtoken::encode(
                &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
                &json!({"sub": "carol", "exp": now + 600, "roles": ["operator"]}),
                &jsonwebtoken::EncodingKey::from_secret(key),
            )
            .unwrap()
        )
    };
    let carol = jwt(jwt_secret);
    let (status, r) = call(&gw, &carol, &write()).await;
    assert_eq!((status, &r["status"]), (200, &json!(200)), "{r}");
    let (status, _) = call(&gw, &jwt(b"another key altogether"), &read()).await;
    assert_eq!(status, 401);

    let basic = format!(
        "Basic {}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "admin:pw")
    );
    // TokenReview works but SubjectAccessReview is refused (the gateway's
    // ClusterRole edited): callers whose roles come from RBAC get 503,
    // never fewer or more roles; once allowed again, they are back.
    let roles = Api::<ClusterRole>::all(client.clone());
    let set_rules = |rules: Value| {
        let roles = roles.clone();
        async move {
            roles
                .patch(
                    "jmxgate-authn",
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(json!({ "rules": rules })),
                )
                .await
                .unwrap();
        }
    };
    let token_reviews = json!({"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]});
    let access_reviews = json!({"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]});
    set_rules(json!([token_reviews])).await;
    common::eventually("RBAC callers answered 503", WAIT, || async {
        match call(&gw, &reader, &read()).await {
            (503, _) => Ok(()),
            (s, r) => Err(format!("{s} {r}")),
        }
    })
    .await;
    let (status, r) = call(&gw, &basic, &read()).await;
    assert_eq!((status, &r["value"]), (200, &json!("app")), "{r}");
    set_rules(json!([token_reviews, access_reviews])).await;
    common::eventually("RBAC callers back", WAIT, || async {
        match call(&gw, &reader, &read()).await {
            (200, r) if r["value"] == "app" => Ok(()),
            (s, r) => Err(format!("{s} {r}")),
        }
    })
    .await;

    // The API server goes away: its callers get 503 (not 401, not a
    // grant), Basic and JWT callers carry on.
    server.stop();
    common::eventually("kubernetes callers answered 503", WAIT, || async {
        match call(&gw, &monitor, &read()).await {
            (503, _) => Ok(()),
            (s, r) => Err(format!("{s} {r}")),
        }
    })
    .await;
    let (status, _) = call(&gw, &ops, &write()).await;
    assert_eq!(status, 503);
    let (status, r) = call(&gw, &basic, &read()).await;
    assert_eq!((status, &r["value"]), (200, &json!("app")), "{r}");
    let (status, r) = call(&gw, &carol, &read()).await;
    assert_eq!((status, &r["value"]), (200, &json!("app")), "{r}");

    // Back again: the same tokens work again.
    server.restart().await;
    common::eventually("kubernetes callers back", WAIT, || async {
        match call(&gw, &ops, &write()).await {
            (200, r) if r["status"] == 200 => Ok(()),
            (s, r) => Err(format!("{s} {r}")),
        }
    })
    .await;
    // The audit names the service accounts, never a token.
    let audit = common::audit_lines(&dir.path().join("audit")).join("\n");
    for who in [
        "system:serviceaccount:shop:ops",
        "system:serviceaccount:rbac:updater",
    ] {
        assert!(audit.contains(who), "{who} not in the audit");
    }
    let metrics = gw.gateway.metrics().encode();
    for secret in [&monitor, &ops, &reader, &updater] {
        assert!(!audit.contains(&secret[7..]));
        assert!(!metrics.contains(&secret[7..]));
    }
}

/// A caller of the access-requests API and the console with
/// `Authorization: <auth>`: the HTTP status and the parsed answer.
async fn access_call(
    gw: &common::Gateway,
    auth: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let mut req = gw
        .http
        .request(method, gw.url(path))
        .header("authorization", auth);
    if let Some(b) = body {
        req = req.json(b);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// Issue 55, item 2 (and 8, and narrowed auditors), against the real API
/// server: a lead who holds `leads` only in namespace `dev` (a RoleBinding
/// there) reviews and reads only what reaches `dev`: a request for a
/// target in `shop` is neither listed to it nor approvable by it (404, as
/// for one that doesn't exist), while a lead holding the role whole
/// approves it; a developer who holds `developers` only in `dev` may ask
/// for `ops` there only, and the refusal of a target beyond its reach is
/// the same, byte for byte, as that of a target that doesn't exist. As an
/// auditor held in `dev`, the lead reads `dev`'s records, not `shop`'s.
#[tokio::test(flavor = "multi_thread")]
async fn a_reviewer_held_in_one_namespace_reviews_only_what_reaches_it() {
    if !kube_api::available() {
        panic!("../shared/kubernetes/run-apiserver.sh or etcd (etcd-server) missing: run scripts/install-deps.sh");
    }
    let server = std::thread::spawn(ApiServer::start);
    let agent = Agent::start("r4-reviewers");
    let server = server.join().unwrap();
    let client = server.client().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    for ns in ["jmxgate", "dev", "shop", "rbac"] {
        create_namespace(&client, ns, json!({})).await;
    }
    // RBAC: get on pods in dev makes lead-dev a lead there, list on pods
    // in dev makes dev-dev a developer there; nothing in shop.
    create_account(&client, "rbac", "lead-dev").await;
    create_account(&client, "rbac", "dev-dev").await;
    allow_on_pods(&client, "dev", ("rbac", "lead-dev"), &["get"]).await;
    allow_on_pods(&client, "dev", ("rbac", "dev-dev"), &["list"]).await;
    let kubeconfig = gateway_kubeconfig(&server, &client, dir.path()).await;
    let users = common::users_file(
        dir.path(),
        &[
            ("oncall", "pw", &["ops"]),
            ("lead", "pw", &["leads"]),
            ("dev", "pw", &["developers"]),
        ],
    );
    let read_only = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("policies/read-only.xml");
    let config = format!(
        "auth = [\"basic\", \"kubernetes\"]\n\
         [health]\nprobe_interval = \"0s\"\n\
         [[targets]]\nname = \"dev-app\"\nurl = \"{url}\"\nlabels = {{ namespace = \"dev\" }}\n\
         [[targets]]\nname = \"shop-app\"\nurl = \"{url}\"\nlabels = {{ namespace = \"shop\" }}\n\
         [[roles]]\nname = \"developers\"\ntargets = [\"*\"]\npolicy = \"{policy}\"\n\
         [[roles]]\nname = \"leads\"\ntargets = [\"*\"]\npolicy = \"{policy}\"\n\
         [[roles]]\nname = \"ops\"\ntargets = [\"*\"]\nrequestable_by = [\"developers\"]\n\
         approvers = [\"leads\"]\nmax_duration = \"1h\"\n\
         approval_required = [\"exec java.util.logging:type=Logging setLoggerLevel\"]\n\
         [auth.basic]\nusers_file = \"{users}\"\n\
         [auth.kubernetes]\nkubeconfig = \"{kubeconfig}\"\naudiences = [\"jmxgate\"]\n\
         [[auth.kubernetes.access]]\nrole = \"leads\"\nverb = \"get\"\nresource = \"pods\"\n\
         [[auth.kubernetes.access]]\nrole = \"developers\"\nverb = \"list\"\nresource = \"pods\"\n\
         [access.store]\nsqlite_file = \"{db}\"\n\
         [console]\nauditors = [\"leads\"]\n\
         [audit]\ndir = \"{audit}\"\n",
        url = agent.url(),
        policy = read_only.display(),
        users = users.display(),
        kubeconfig = kubeconfig.display(),
        db = dir.path().join("access.db").display(),
        audit = dir.path().join("audit").display(),
    );
    let gw = common::Gateway::start(&config).await;
    gw.access_store_opened().await;
    let basic = |user: &str| {
        use base64::Engine as _;
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:pw"))
        )
    };
    let (oncall, lead) = (basic("oncall"), basic("lead"));
    let lead_dev = format!(
        "Bearer {}",
        token(&client, "rbac", "lead-dev", "jmxgate").await
    );
    let dev_dev = format!(
        "Bearer {}",
        token(&client, "rbac", "dev-dev", "jmxgate").await
    );
    use access::REQUESTS;
    let set_level = |target: &str| {
        json!({"type":"exec","mbean":"java.util.logging:type=Logging","operation":"setLoggerLevel",
               "arguments":["global","FINE"],"target":{"url": target}})
    };
    // The on-call engineer's logger change waits, once in each namespace.
    let mut ids = Vec::new();
    for target in ["dev-app", "shop-app"] {
        let r = gw
            .http
            .post(gw.url("/jolokia"))
            .header("authorization", &oncall)
            .json(&set_level(target))
            .send()
            .await
            .unwrap();
        ids.push(access::request_named_by(&r.json().await.unwrap()));
    }
    let (dev_id, shop_id) = (ids[0].clone(), ids[1].clone());

    // The lead held in dev lists dev's request only, and gets 404 for
    // shop's, as for one that doesn't exist.
    let (status, listed) = access_call(&gw, &lead_dev, reqwest::Method::GET, REQUESTS, None).await;
    assert_eq!(status, 200, "{listed}");
    let listed_ids: Vec<&str> = listed["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed_ids, [dev_id.as_str()], "{listed}");
    let shown = |id: String| format!("{REQUESTS}/{id}");
    let (status, missing) = access_call(
        &gw,
        &lead_dev,
        reqwest::Method::GET,
        &shown(shop_id.clone()),
        None,
    )
    .await;
    assert_eq!(status, 404, "{missing}");
    let (_, none) = access_call(
        &gw,
        &lead_dev,
        reqwest::Method::GET,
        &shown("ar-00000000000000000000".into()),
        None,
    )
    .await;
    assert_eq!(
        missing.to_string().replace(&shop_id, "ID"),
        none.to_string().replace("ar-00000000000000000000", "ID")
    );
    for verb in ["approve", "deny", "revoke"] {
        let (status, r) = access_call(
            &gw,
            &lead_dev,
            reqwest::Method::POST,
            &format!("{REQUESTS}/{shop_id}/{verb}"),
            Some(&json!({})),
        )
        .await;
        assert_eq!(status, 404, "{verb}: {r}");
    }
    // ... and the on-call engineer still can't run it in shop.
    let r: Value = gw
        .http
        .post(gw.url("/jolokia"))
        .header("authorization", &oncall)
        .json(&set_level("shop-app"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["error_type"], "jmxgate.ApprovalRequired", "{r}");
    // In dev it approves; the lead holding the role whole approves shop's.
    let (status, r) = access_call(
        &gw,
        &lead_dev,
        reqwest::Method::POST,
        &format!("{REQUESTS}/{dev_id}/approve"),
        Some(&json!({})),
    )
    .await;
    assert_eq!((status, &r["state"]), (200, &json!("approved")), "{r}");
    let (status, r) = access_call(
        &gw,
        &lead,
        reqwest::Method::POST,
        &format!("{REQUESTS}/{shop_id}/approve"),
        Some(&json!({})),
    )
    .await;
    assert_eq!((status, &r["state"]), (200, &json!("approved")), "{r}");

    // A developer held in dev asks for ops in dev only; beyond its reach
    // and nowhere at all are one answer.
    let ask = |targets: Option<&str>| {
        let mut body = json!({"role": "ops", "duration": "10m"});
        if let Some(t) = targets {
            body["targets"] = json!(t);
        }
        body
    };
    let (status, beyond) = access_call(
        &gw,
        &dev_dev,
        reqwest::Method::POST,
        REQUESTS,
        Some(&ask(Some("shop-app"))),
    )
    .await;
    assert_eq!(status, 403, "{beyond}");
    let (status, nowhere) = access_call(
        &gw,
        &dev_dev,
        reqwest::Method::POST,
        REQUESTS,
        Some(&ask(Some("gone-app"))),
    )
    .await;
    assert_eq!(status, 403, "{nowhere}");
    assert_eq!(beyond, nowhere, "the same answer, byte for byte");
    let (status, all) = access_call(
        &gw,
        &dev_dev,
        reqwest::Method::POST,
        REQUESTS,
        Some(&ask(None)),
    )
    .await;
    assert_eq!(status, 403, "{all}");
    let (status, made) = access_call(
        &gw,
        &dev_dev,
        reqwest::Method::POST,
        REQUESTS,
        Some(&ask(Some("namespace=dev"))),
    )
    .await;
    assert_eq!((status, &made["state"]), (201, &json!("pending")), "{made}");

    // A glob that names dev's target only today may name shop's tomorrow:
    // the lead held in dev doesn't review it; one that keeps to dev, yes.
    for (targets, reviewable) in [("dev-*", false), ("namespace=dev", true)] {
        let (status, asked) = access_call(
            &gw,
            &basic("dev"),
            reqwest::Method::POST,
            REQUESTS,
            Some(&ask(Some(targets))),
        )
        .await;
        assert_eq!(status, 201, "{asked}");
        let id = asked["id"].as_str().unwrap().to_string();
        let (status, r) = access_call(
            &gw,
            &lead_dev,
            reqwest::Method::GET,
            &shown(id.clone()),
            None,
        )
        .await;
        assert_eq!(status == 200, reviewable, "{targets}: {status} {r}");
        let (status, r) = access_call(&gw, &lead, reqwest::Method::GET, &shown(id), None).await;
        assert_eq!((status, &r["may_review"]), (200, &json!(true)), "{r}");
    }

    // The audit trail: the lead held in dev reads dev's records (and its
    // own), not shop's; the lead holding the role whole reads both.
    let page = |auth: String| {
        let gw = &gw;
        async move {
            let r = gw
                .http
                .get(gw.url("/console/audit?limit=1000"))
                .header("authorization", auth)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            r.text().await.unwrap()
        }
    };
    let narrowed = page(lead_dev.clone()).await;
    assert!(narrowed.contains("dev-app"), "{narrowed}");
    assert!(!narrowed.contains("shop-app"), "{narrowed}");
    let whole = page(lead.clone()).await;
    assert!(whole.contains("dev-app") && whole.contains("shop-app"));
}
