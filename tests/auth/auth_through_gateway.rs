//! Authentication through the gateway, with real TLS and certificates made
//! in the test: HTTP Basic, bearer JWT, client certificates; credentials
//! towards agents; and secrets never showing up anywhere.

use crate::common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{direct, shared_agents, targets_toml, Agent, Gateway, TestPki};
use serde_json::{json, Value};

const NAME: &str = "/jolokia/targets/alpha/read/jmxgate.test:type=Types/Name";

fn users_file(dir: &std::path::Path) -> String {
    let alice = jmxgate::pipeline::authenticate::basic::hash_password("wonder:land").unwrap();
    let bob = jmxgate::pipeline::authenticate::basic::hash_password_bcrypt("builder").unwrap();
    let path = dir.join("users.toml");
    std::fs::write(
        &path,
        format!(
            "[[users]]\nname = \"alice\"\npassword_hash = \"{alice}\"\nroles = [\"ops\"]\n\n\
             [[users]]\nname = \"bob\"\npassword_hash = \"{bob}\"\nroles = [\"nobody-knows-this-role\"]\n"
        ),
    )
    .unwrap();
    path.display().to_string()
}

fn ops_role() -> &'static str {
    "[[roles]]\nname = \"ops\"\ntargets = [\"*\"]\n"
}

/// Basic authentication (alice and bob), `max_failures` per client and
/// user, the ops role, and the shared agent alpha.
fn basic_to_alpha(dir: &std::path::Path, max_failures: u32) -> String {
    let [a, ..] = shared_agents();
    format!(
        "auth = [\"basic\"]\n{}[auth.basic]\nusers_file = \"{}\"\nmax_failures = {max_failures}\n{}",
        targets_toml(&[a]),
        users_file(dir),
        ops_role()
    )
}

async fn status_and_headers(resp: reqwest::Response) -> (u16, reqwest::header::HeaderMap, String) {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, headers, resp.text().await.unwrap())
}

fn challenges(h: &reqwest::header::HeaderMap) -> Vec<String> {
    h.get_all("www-authenticate")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect()
}

/// Hawtio sends its credentials as `X-Jolokia-Authorization` (leaving
/// `Authorization` to the server of the console): the same check, the
/// same throttling; and a script with a login of its own gets a challenge
/// that doesn't pop up the browser's own login dialog, every other request
/// one that does.
#[tokio::test(flavor = "multi_thread")]
async fn hawtios_header_carries_credentials_and_only_hawtio_style_scripts_get_no_basic_popup() {
    use base64::Engine;
    let dir = tempfile::tempdir().unwrap();
    let gw = Gateway::start(&basic_to_alpha(dir.path(), 3)).await;
    let basic = |user: &str, password: &str| {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        format!("Basic {token}")
    };
    let hawtio = |value: String| {
        gw.http
            .get(gw.url(NAME))
            .header("x-jolokia-authorization", value)
            .send()
    };
    let (status, _, body) =
        status_and_headers(hawtio(basic("alice", "wonder:land")).await.unwrap()).await;
    assert_eq!(status, 200);
    assert!(body.contains("\"value\":\"alpha\""), "{body}");

    let (status, h, _) = status_and_headers(hawtio(basic("alice", "wrong")).await.unwrap()).await;
    assert_eq!(status, 401);
    assert_eq!(
        challenges(&h),
        vec!["Hawtio original-scheme=\"Basic\", realm=\"jmxgate\", charset=\"UTF-8\""]
    );
    // A page the user opens, and any browser fetch() that relies on the
    // browser's own login (a console served next to the gateway), get
    // Basic: only scripts with a login of their own are told otherwise.
    for headers in [
        vec![],
        vec![("sec-fetch-dest", "empty"), ("sec-fetch-mode", "cors")],
        vec![
            ("origin", "https://console.example"),
            ("sec-fetch-dest", "empty"),
        ],
        vec![("x-requested-with", "fetch")],
    ] {
        let mut req = gw.http.get(gw.url(NAME));
        for (name, value) in &headers {
            req = req.header(*name, *value);
        }
        let plain = req.send().await.unwrap();
        assert_eq!(
            challenges(plain.headers()),
            vec!["Basic realm=\"jmxgate\", charset=\"UTF-8\""],
            "{headers:?}"
        );
    }
    // An AJAX call saying so, as Hawtio's own servers tell them apart.
    let ajax = gw
        .http
        .get(gw.url(NAME))
        .header("x-requested-with", "XMLHttpRequest")
        .send()
        .await
        .unwrap();
    assert!(challenges(ajax.headers())[0].starts_with("Hawtio "));

    // Failures by this header count against the user like any others.
    for _ in 0..3 {
        let _ = hawtio(basic("alice", "wrong")).await.unwrap();
    }
    let (status, _, _) =
        status_and_headers(hawtio(basic("alice", "wonder:land")).await.unwrap()).await;
    assert_eq!(status, 429, "throttled after max_failures");
}

#[tokio::test(flavor = "multi_thread")]
async fn basic_good_bad_and_missing_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let gw = Gateway::start(&basic_to_alpha(dir.path(), 4)).await;
    let get = |user: Option<(&str, &str)>| {
        let mut req = gw.http.get(gw.url(NAME));
        if let Some((u, p)) = user {
            req = req.basic_auth(u, Some(p));
        }
        req.send()
    };
    let (status, _, body) =
        status_and_headers(get(Some(("alice", "wonder:land"))).await.unwrap()).await;
    assert_eq!(status, 200);
    assert!(body.contains("\"value\":\"alpha\""), "{body}");

    // Wrong password, unknown user, no credentials, garbage: the same 401,
    // byte for byte, with no body.
    let mut seen = Vec::new();
    for attempt in [
        Some(("alice", "wrong")),
        Some(("mallory", "wonder:land")),
        None,
    ] {
        let (status, h, body) = status_and_headers(get(attempt).await.unwrap()).await;
        assert_eq!(status, 401, "{attempt:?}");
        assert_eq!(
            challenges(&h),
            vec!["Basic realm=\"jmxgate\", charset=\"UTF-8\""]
        );
        assert_eq!(body, "");
        assert!(h.get("content-type").is_none(), "{h:?}");
        seen.push((status, challenges(&h), body));
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]));
    let resp = gw
        .http
        .get(gw.url(NAME))
        .header("authorization", "Basic !!!")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);

    // bob's password is right, but his role is not configured: no access.
    let (status, _, body) = status_and_headers(get(Some(("bob", "builder"))).await.unwrap()).await;
    assert_eq!(status, 200);
    assert!(body.contains("\"status\":403"), "{body}");

    // version says authentication is on; preflights need no credentials.
    let resp = gw
        .http
        .get(gw.url("/jolokia/version"))
        .basic_auth("alice", Some("wonder:land"))
        .send()
        .await
        .unwrap();
    let v: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    assert_eq!(v["value"]["details"]["secured"], true, "{v}");
    let pre = gw
        .http
        .request(reqwest::Method::OPTIONS, gw.url("/jolokia"))
        .header("origin", "http://console.example")
        .send()
        .await
        .unwrap();
    assert_eq!(pre.status(), 200);

    // Repeated failures for one user are throttled, even with the right
    // password afterwards, and the gateway keeps serving others.
    for _ in 0..4 {
        get(Some(("alice", "nope"))).await.unwrap();
    }
    let (status, h, _) =
        status_and_headers(get(Some(("alice", "wonder:land"))).await.unwrap()).await;
    assert_eq!(status, 429);
    assert!(h.get("retry-after").is_some());
}

fn jwt(secret: &[u8], claims: Value, alg: jsonwebtoken::Algorithm) -> String {
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(alg),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(secret),
    )
    .unwrap()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A gateway over alpha taking bearer tokens signed with `secret` (HS256,
/// written into `dir`), with `more` `[auth.bearer]` keys and the ops role.
async fn hs256_gateway(dir: &std::path::Path, secret: &[u8], more: &str) -> Gateway {
    std::fs::write(dir.join("hs256.key"), secret).unwrap();
    let [a, ..] = shared_agents();
    Gateway::start(&format!(
        "{}[auth.bearer]\nhs256_secret_file = \"{}\"\n{more}{}",
        targets_toml(&[a]),
        dir.join("hs256.key").display(),
        ops_role()
    ))
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn bearer_tokens_are_verified() {
    let dir = tempfile::tempdir().unwrap();
    let secret = b"0123456789abcdef0123456789abcdef-test-secret";
    let gw = hs256_gateway(
        dir.path(),
        secret,
        "issuer = \"https://idp.example\"\naudience = \"jmxgate\"\nleeway = \"5s\"\n",
    )
    .await;
    let claims = |exp: u64, aud: &str| json!({"sub":"svc-telegraf","iss":"https://idp.example","aud":aud,"exp":exp,"roles":["ops"]});
    let send = |token: Option<String>| {
        let mut req = gw.http.get(gw.url(NAME));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send()
    };
    let good = jwt(
        secret,
        claims(now() + 300, "jmxgate"),
        jsonwebtoken::Algorithm::HS256,
    );
    let (status, _, body) = status_and_headers(send(Some(good)).await.unwrap()).await;
    assert_eq!(status, 200);
    assert!(body.contains("\"value\":\"alpha\""), "{body}");

    let refused = [
        jwt(
            secret,
            claims(now() - 60, "jmxgate"),
            jsonwebtoken::Algorithm::HS256,
        ),
        jwt(
            secret,
            claims(now() + 300, "someone-else"),
            jsonwebtoken::Algorithm::HS256,
        ),
        jwt(
            b"another-secret-another-secret-another",
            claims(now() + 300, "jmxgate"),
            jsonwebtoken::Algorithm::HS256,
        ),
        jwt(
            secret,
            claims(now() + 300, "jmxgate"),
            jsonwebtoken::Algorithm::HS512,
        ),
        {
            use base64::Engine;
            let b64 =
                |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
            format!(
                "{}.{}.",
                b64(&json!({"alg":"none","typ":"JWT"})),
                b64(&claims(now() + 300, "jmxgate"))
            )
        },
        "not.a.token".to_string(),
    ];
    for token in refused {
        let (status, h, body) = status_and_headers(send(Some(token.clone())).await.unwrap()).await;
        assert_eq!(status, 401, "{token}");
        assert_eq!(
            challenges(&h),
            vec!["Bearer realm=\"jmxgate\", error=\"invalid_token\""]
        );
        assert_eq!(body, "");
    }
    let (status, h, _) = status_and_headers(send(None).await.unwrap()).await;
    assert_eq!(status, 401);
    assert_eq!(challenges(&h), vec!["Bearer realm=\"jmxgate\""]);
}

#[tokio::test(flavor = "multi_thread")]
async fn client_certificates_identify_callers_over_tls() {
    let pki = TestPki::new("gateway");
    let other = TestPki::new("stranger");
    let (cert, key) = pki.server_cert("gateway");
    let [a, ..] = shared_agents();
    let tls = format!(
        "cert_file = \"{}\"\nkey_file = \"{}\"\nclient_ca_file = \"{}\"\n",
        cert.display(),
        key.display(),
        pki.ca_file().display()
    );
    let config = format!(
        "{}[auth.mtls]\nprincipal_from = \"cn\"\n[auth.mtls.roles]\n\"ops-client\" = [\"ops\"]\n{}",
        targets_toml(&[a]),
        ops_role()
    );
    let gw = Gateway::start_tls(&tls, &config).await;
    let url = format!("https://127.0.0.1:{}{NAME}", gw.addr.port());

    let ops = pki.client_cert("ops-client", false);
    let v = common::get_json(&pki.https_client(Some(&ops)), &url).await;
    assert_eq!(v["value"], "alpha", "{v}");

    // A valid certificate whose principal has no role: authenticated, no access.
    let guest = pki.client_cert("guest", false);
    let v = common::get_json(&pki.https_client(Some(&guest)), &url).await;
    assert_eq!(v["status"], 403, "{v}");

    // No certificate: 401 (the listener accepts only mtls).
    let r = pki.https_client(None).get(&url).send().await.unwrap();
    assert_eq!(r.status(), 401);

    // Expired, or from another CA: the TLS handshake itself fails.
    let expired = pki.client_cert("ops-client", true);
    assert!(pki
        .https_client(Some(&expired))
        .get(&url)
        .send()
        .await
        .is_err());
    let foreign = other.client_cert("ops-client", false);
    assert!(pki
        .https_client(Some(&foreign))
        .get(&url)
        .send()
        .await
        .is_err());

    // version over TLS reports an https URL and secured.
    let r = pki
        .https_client(Some(&ops))
        .get(format!(
            "https://127.0.0.1:{}/jolokia/version",
            gw.addr.port()
        ))
        .send()
        .await
        .unwrap();
    let v: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_eq!(v["value"]["details"]["secured"], true);
    assert!(
        v["value"]["details"]["url"]
            .as_str()
            .unwrap()
            .starts_with("https://"),
        "{v}"
    );
}

/// An HTTPS agent that requires a client certificate and the user
/// `jolokia` with password `agent-pw`, and the certificate the gateway
/// presents to it.
struct SecuredAgent {
    pki: TestPki,
    _agent: Agent,
    url: String,
    gw_cert: std::path::PathBuf,
    gw_key: std::path::PathBuf,
}

impl SecuredAgent {
    fn start(name: &str) -> SecuredAgent {
        let pki = TestPki::new(name);
        let agent = Agent::start_https(
            name,
            &pki,
            "agent",
            true,
            &["--user", "jolokia", "--password", "agent-pw"],
        );
        let (gw_cert, gw_key) = pki.client_cert("jmxgate", false);
        let url = format!("https://127.0.0.1:{}/jolokia", agent.port);
        SecuredAgent {
            pki,
            _agent: agent,
            url,
            gw_cert,
            gw_key,
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_requiring_client_certificates_and_credential_pass_through() {
    let SecuredAgent {
        pki,
        _agent,
        url,
        gw_cert,
        gw_key,
    } = SecuredAgent::start("mtls-agent");
    let config = format!(
        "[[targets]]\nname = \"with-cert\"\nurl = \"{url}\"\nca_file = \"{ca}\"\nclient_cert_file = \"{c}\"\nclient_key_file = \"{k}\"\nuser = \"jolokia\"\npassword = \"agent-pw\"\n\n\
         [[targets]]\nname = \"no-cert\"\nurl = \"{url}/\"\nca_file = \"{ca}\"\nuser = \"jolokia\"\npassword = \"agent-pw\"\n\n\
         [[targets]]\nname = \"passthrough\"\nurl = \"{url}//\"\nca_file = \"{ca}\"\nclient_cert_file = \"{c}\"\nclient_key_file = \"{k}\"\nallow_credentials_passthrough = true\n\n\
         [[targets]]\nname = \"no-passthrough\"\nurl = \"{url}///\"\nca_file = \"{ca}\"\nclient_cert_file = \"{c}\"\nclient_key_file = \"{k}\"\n",
        ca = pki.ca_file().display(),
        c = gw_cert.display(),
        k = gw_key.display(),
    );
    let gw = Gateway::start(&config).await;
    let read = |t: &str, creds: Option<(&str, &str)>| {
        let mut r = json!({"type":"read","mbean":"jmxgate.test:type=Types","attribute":"Name","target":{"url":t}});
        if let Some((u, p)) = creds {
            r["target"]["user"] = json!(u);
            r["target"]["password"] = json!(p);
        }
        r
    };
    let (_, r) = gw
        .post(
            "/jolokia",
            &json!([
                read("with-cert", None),
                read("no-cert", None),
                read("passthrough", Some(("jolokia", "agent-pw"))),
                read("passthrough", None),
                read("no-passthrough", Some(("jolokia", "agent-pw"))),
            ]),
        )
        .await;
    assert_eq!(r[0]["value"], "mtls-agent", "{}", r[0]);
    assert_eq!(r[1]["status"], 502, "{}", r[1]);
    assert_eq!(r[2]["value"], "mtls-agent", "{}", r[2]);
    assert!(
        r[3]["error"].as_str().unwrap().contains("HTTP 401"),
        "{}",
        r[3]
    );
    assert!(
        r[4]["error"].as_str().unwrap().contains("HTTP 401"),
        "client credentials were forwarded: {}",
        r[4]
    );
    let text = r.to_string();
    assert!(!text.contains("agent-pw"), "{text}");
}

/// `[target_defaults]` carries the agent settings every target shares (CA,
/// client certificate, credentials); a target setting its own user takes
/// none of the defaults' password.
#[tokio::test(flavor = "multi_thread")]
async fn target_defaults_supply_tls_and_credentials_as_groups() {
    let SecuredAgent {
        pki,
        _agent,
        url,
        gw_cert,
        gw_key,
    } = SecuredAgent::start("defaults-agent");
    let config = format!(
        "[target_defaults]\nca_file = \"{ca}\"\nclient_cert_file = \"{c}\"\nclient_key_file = \"{k}\"\nuser = \"jolokia\"\npassword = \"agent-pw\"\n\n\
         [[targets]]\nname = \"plain\"\nurl = \"{url}\"\n\n\
         [[targets]]\nname = \"own-user\"\nurl = \"{url}/\"\nuser = \"jolokia\"\n",
        ca = pki.ca_file().display(),
        c = gw_cert.display(),
        k = gw_key.display(),
    );
    let gw = Gateway::start(&config).await;
    let read = |t: &str| json!({"type":"read","mbean":"jmxgate.test:type=Types","attribute":"Name","target":{"url":t}});
    let (_, r) = gw
        .post("/jolokia", &json!([read("plain"), read("own-user")]))
        .await;
    assert_eq!(r[0]["value"], "defaults-agent", "{}", r[0]);
    assert!(
        r[1]["error"].as_str().unwrap().contains("HTTP 401"),
        "the defaults' password went with a target's own user: {}",
        r[1]
    );
}

#[test]
fn secrets_never_reach_logs_answers_or_errors() {
    // The real binary, logs captured from stderr at debug level.
    let dir = tempfile::tempdir().unwrap();
    let [a, ..] = shared_agents();
    let secret = b"0123456789abcdef0123456789abcdef-log-secret";
    std::fs::write(dir.path().join("hs.key"), secret).unwrap();
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n{}[[targets]]\nname = \"creds\"\nurl = \"{}\"\nuser = \"agent-user\"\npassword = \"TargetPassw0rd\"\n\
             [auth.basic]\nusers_file = \"{}\"\n[auth.bearer]\nhs256_secret_file = \"hs.key\"\n{}",
            targets_toml(&[a]),
            a.url(),
            users_file(dir.path()),
            ops_role()
        ),
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_jmxgate"))
        .args(["serve", "--config"])
        .arg(&config)
        .env("RUST_LOG", "debug")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let mut log = Vec::new();
    let addr = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("serve started");
        log.push(line.clone());
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break rest.split('/').next().unwrap().to_string();
        }
    };
    let token = jwt(
        secret,
        json!({"sub":"svc","exp":now() + 300,"roles":["ops"]}),
        jsonwebtoken::Algorithm::HS256,
    );
    let bad_token = jwt(
        b"wrong-wrong-wrong-wrong-wrong-wrong-wrong",
        json!({"sub":"svc","exp":now() + 300}),
        jsonwebtoken::Algorithm::HS256,
    );
    let hawtio_basic = {
        use base64::Engine;
        let token = base64::engine::general_purpose::STANDARD.encode("alice:XJolokiaPassw0rd");
        format!("Basic {token}")
    };
    let answers = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let http = common::http_client();
        let url = format!("http://{addr}/jolokia");
        let mut out = Vec::new();
        let body = json!([
            {"type":"read","mbean":"jmxgate.test:type=Types","attribute":"Name","target":{"url":"creds","user":"u","password":"ClientTargetPassw0rd"}},
            {"type":"read","mbean":"jmxgate.test:type=Types","attribute":"Name","target":{"url":"http://x:HostPassw0rd@nowhere/jolokia"}},
        ]);
        for req in [
            http.post(&url).basic_auth("alice", Some("wonder:land")).body(body.to_string()),
            http.post(&url).basic_auth("alice", Some("WrongPassw0rd")).body(body.to_string()),
            http.post(&url).bearer_auth(&token).body(body.to_string()),
            http.post(&url).bearer_auth(&bad_token).body(body.to_string()),
            http.post(&url).header("x-jolokia-authorization", &hawtio_basic).body(body.to_string()),
        ] {
            let r = req.send().await.unwrap();
            let headers = format!("{:?}", r.headers());
            out.push(format!("{headers} {}", r.text().await.unwrap()));
        }
        out
    });
    let _ = std::process::Command::new("kill")
        .arg(child.id().to_string())
        .status();
    let _ = child.wait();
    // The process has ended: its log ends with it (the reader hangs up);
    // the deadline only guards against a reader that never does.
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(30)) {
        log.push(line);
    }
    assert!(answers[0].contains("\"value\":\"alpha\""), "{}", answers[0]);
    let everything = format!("{}\n{}", log.join("\n"), answers.join("\n"));
    assert!(
        everything.contains("jmxgate::audit"),
        "audit lines expected in the log"
    );
    for secret_text in [
        "wonder:land",
        "WrongPassw0rd",
        "TargetPassw0rd",
        "ClientTargetPassw0rd",
        "HostPassw0rd",
        "XJolokiaPassw0rd",
        hawtio_basic.as_str(),
        token.as_str(),
        bad_token.as_str(),
        std::str::from_utf8(secret).unwrap(),
    ] {
        assert!(
            !everything.contains(secret_text),
            "{secret_text:?} leaked:\n{everything}"
        );
    }
    // The agent itself was reached with the configured credentials only
    // (it has no auth, so just check it still answers).
    let v = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(direct(a, &json!({"type":"version"})));
    assert_eq!(v["status"], 200);
}

/// Sends a POST's head, reads the answer if one comes before the body, then
/// sends the body: the way clients that write head and body separately
/// (Python's http.client) look to a server that answers early.
async fn post_in_two_writes(
    stream: &mut tokio::net::TcpStream,
    auth: &str,
) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = r#"{"type":"read","mbean":"jmxgate.test:type=Types","attribute":"Name"}"#;
    let head = format!(
        "POST /jolokia/targets/alpha HTTP/1.1\r\nHost: localhost\r\nAuthorization: Basic {auth}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.ok()?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let mut body_sent = false;
    loop {
        // An answer to a refused login comes before the body is sent; once
        // it is, the answer may take a password check on a loaded machine.
        let wait = if body_sent {
            Duration::from_secs(30)
        } else {
            Duration::from_millis(300)
        };
        let read = tokio::time::timeout(wait, stream.read(&mut buf)).await;
        match read {
            Ok(Ok(0)) | Ok(Err(_)) => return None,
            Ok(Ok(n)) => answer.extend_from_slice(&buf[..n]),
            Err(_) if !body_sent => {
                stream.write_all(body.as_bytes()).await.ok()?;
                body_sent = true;
                continue;
            }
            Err(_) => return None,
        }
        let text = String::from_utf8_lossy(&answer).to_string();
        if let Some((head, rest)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(|v| v.trim().parse::<usize>().unwrap())
                })
                .unwrap_or(0);
            if rest.len() >= length {
                if !body_sent {
                    // What a client does next: send the body it was writing.
                    let _ = stream.write_all(body.as_bytes()).await;
                }
                let status = head[9..12].parse().unwrap();
                return Some((status, head.to_ascii_lowercase()));
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_logins_on_a_kept_alive_connection_say_it_closes() {
    use base64::Engine;
    let dir = tempfile::tempdir().unwrap();
    let gw = Gateway::start(&basic_to_alpha(dir.path(), 3)).await;
    let encode = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);

    // A good login with the body sent late: answered, connection kept.
    let mut conn = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    for _ in 0..3 {
        let (status, head) = post_in_two_writes(&mut conn, &encode("alice:wonder:land"))
            .await
            .expect("answered on the kept-alive connection");
        assert_eq!(status, 200, "{head}");
        assert!(!head.contains("connection: close"), "{head}");
    }

    // Refused (401, then 429 once throttled) before the body was read: the
    // answer says the connection closes, so clients open a new one instead
    // of writing into a closed socket.
    let mut statuses = Vec::new();
    for _ in 0..6 {
        let mut conn = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
        let (status, head) = post_in_two_writes(&mut conn, &encode("mallory:guess"))
            .await
            .expect("a refusal is an answer");
        assert!(head.contains("connection: close"), "{head}");
        statuses.push(status);
    }
    assert_eq!(statuses[0], 401);
    assert_eq!(statuses[5], 429, "{statuses:?}");

    // An HTTP client that keeps connections alive sees every refusal as an
    // answer, never as a broken connection, and the gateway still serves.
    for _ in 0..20 {
        let r = gw
            .http
            .post(gw.url("/jolokia/targets/alpha"))
            .basic_auth("eve", Some("nope"))
            .body(r#"{"type":"version"}"#)
            .send()
            .await
            .expect("an answer, not a connection error");
        assert!([401, 429].contains(&r.status().as_u16()));
    }
    // The first connection is still open and answered; mallory's and
    // eve's failures from this address lock out only mallory and eve,
    // never alice.
    let (status, head) = post_in_two_writes(&mut conn, &encode("alice:wonder:land"))
        .await
        .expect("the first connection still serves");
    assert_eq!(status, 200, "{head}");
    let (status, head) = post_in_two_writes(&mut conn, &encode("mallory:guess"))
        .await
        .expect("answered");
    assert_eq!(status, 429, "{head}");
    assert!(head.contains("retry-after"), "{head}");
}

/// The Rust client (`bearer_token`) and the command line (`JMXGATE_TOKEN`,
/// `--token-file`) send a bearer token the gateway verifies; a bad one is
/// refused, and a user and a token together are a setup error.
#[tokio::test(flavor = "multi_thread")]
async fn the_rust_client_and_the_command_line_send_bearer_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let secret = b"0123456789abcdef0123456789abcdef-cli-secret";
    let gw = hs256_gateway(dir.path(), secret, "").await;
    let good = jwt(
        secret,
        json!({"sub":"svc-cli","exp":now() + 300,"roles":["ops"]}),
        jsonwebtoken::Algorithm::HS256,
    );
    let forged = jwt(
        b"not-the-secret-not-the-secret-not-the-secret",
        json!({"sub":"svc-cli","exp":now() + 300,"roles":["ops"]}),
        jsonwebtoken::Algorithm::HS256,
    );
    let url = gw.url("/jolokia/targets/alpha");
    let client = |token: &str| {
        jmxgate::client::JolokiaClient::builder(&url)
            .bearer_token(token)
            .build()
            .unwrap()
    };
    let types = "jmxgate.test:type=Types";
    assert_eq!(
        client(&good).read(types, Some("Name")).await.unwrap(),
        "alpha"
    );
    let refused = client(&forged).read(types, Some("Name")).await.unwrap_err();
    assert!(refused.to_string().contains("401"), "{refused}");
    let both = jmxgate::client::JolokiaClient::builder(&url)
        .user("u", "p")
        .bearer_token(&good)
        .build()
        .unwrap_err();
    assert!(both.to_string().contains("not both"), "{both}");

    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{good}\n")).unwrap();
    let cli = move |args: Vec<String>, env: Vec<(&'static str, String)>| {
        tokio::task::spawn_blocking(move || {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_jmxgate"))
                .args(&args)
                .env_remove("JMXGATE_URL")
                .env_remove("JMXGATE_USER")
                .env_remove("JMXGATE_TOKEN")
                .envs(env)
                .output()
                .unwrap();
            (
                out.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        })
    };
    let read = |extra: &[&str]| {
        let mut args: Vec<String> = ["read", types, "Name", "--json", "--url", url.as_str()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    let (code, out, err) = cli(read(&[]), vec![("JMXGATE_TOKEN", good.clone())])
        .await
        .unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("alpha"), "{out}");
    let file = token_file.display().to_string();
    let (code, out, err) = cli(read(&["--token-file", &file]), vec![]).await.unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("alpha"), "{out}");
    let (code, _, err) = cli(read(&[]), vec![("JMXGATE_TOKEN", forged.clone())])
        .await
        .unwrap();
    assert_ne!(code, 0);
    assert!(err.contains("401"), "{err}");
    assert!(!err.contains(&forged), "the token is never printed: {err}");
}

/// Login throttling counts per (user, client address), the address being
/// the client's as the trusted proxy reports it: one client behind the
/// proxy locks out only its own guesses, and a burst of concurrent guesses
/// gets no more checks than `max_failures`.
#[tokio::test(flavor = "multi_thread")]
async fn throttling_is_per_user_and_client_even_behind_a_trusted_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let [a, ..] = shared_agents();
    let gw = Gateway::start(&format!(
        "auth = [\"basic\"]\n{}[auth.basic]\nusers_file = \"{}\"\nmax_failures = 5\n\n\
         [access]\ntrusted_proxies = [\"127.0.0.1\"]\n\n{}",
        targets_toml(&[a]),
        users_file(dir.path()),
        ops_role()
    ))
    .await;
    let from = |client: &str, user: &str, password: String| {
        let r = gw
            .http
            .get(gw.url(NAME))
            .header("x-forwarded-for", client)
            .basic_auth(user, Some(password))
            .send();
        async move { r.await.unwrap().status().as_u16() }
    };
    // A burst of 30 guesses at once from one client: five are checked.
    let burst = futures::future::join_all(
        (0..30).map(|i| from("203.0.113.9", "alice", format!("guess-{i}"))),
    )
    .await;
    let checked = burst.iter().filter(|s| **s == 401).count();
    let throttled = burst.iter().filter(|s| **s == 429).count();
    assert_eq!((checked, throttled), (5, 25), "{burst:?}");
    // That client is locked out for alice, even with her password…
    let right = || "wonder:land".to_string();
    assert_eq!(from("203.0.113.9", "alice", right()).await, 429);
    // …another client behind the same proxy is not, nor is the proxy.
    assert_eq!(from("203.0.113.10", "alice", right()).await, 200);
    let direct = gw
        .http
        .get(gw.url(NAME))
        .basic_auth("alice", Some("wonder:land"));
    assert_eq!(direct.send().await.unwrap().status(), 200);
    // Made-up names from one client lock out no real user there.
    for i in 0..12 {
        from("203.0.113.11", &format!("nobody-{i}"), "x".into()).await;
    }
    assert_eq!(from("203.0.113.11", "alice", right()).await, 200);
}

/// Credentials that can't be read as text are refused, never taken for
/// none: on a listener that also admits anonymous callers, a non-ASCII
/// `Authorization` is a 401, not the anonymous role.
#[tokio::test(flavor = "multi_thread")]
async fn unreadable_credentials_are_refused_not_made_anonymous() {
    let dir = tempfile::tempdir().unwrap();
    let [a, ..] = shared_agents();
    let gw = Gateway::start(&format!(
        "auth = [\"basic\", \"anonymous\"]\n{}[auth.basic]\nusers_file = \"{}\"\n\n\
         [access]\nanonymous_role = \"ops\"\n\n{}",
        targets_toml(&[a]),
        users_file(dir.path()),
        ops_role()
    ))
    .await;
    assert_eq!(
        gw.http.get(gw.url(NAME)).send().await.unwrap().status(),
        200
    );
    for header in ["authorization", "x-jolokia-authorization"] {
        let unreadable =
            reqwest::header::HeaderValue::from_bytes(b"Basic \xc3\xa9l\xc3\xa8ve").unwrap();
        let r = gw
            .http
            .get(gw.url(NAME))
            .header(header, unreadable)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{header}");
        assert!(!r.text().await.unwrap().contains("alpha"));
    }
}

/// `access.anonymous_role` beside `[auth.basic]` with no `server.auth`
/// (the manual's first configuration): callers without credentials get
/// that role, right credentials the user's roles, wrong ones still a 401.
/// A `server.auth` written without "anonymous" is refused at start, with
/// the fix in words.
#[tokio::test(flavor = "multi_thread")]
async fn an_anonymous_role_lets_callers_without_credentials_in_beside_basic() {
    let dir = tempfile::tempdir().unwrap();
    let [a, ..] = shared_agents();
    let body = format!(
        "{}[auth.basic]\nusers_file = \"{}\"\n\n[access]\nanonymous_role = \"readers\"\n\n{}\
         [[roles]]\nname = \"readers\"\ntargets = [\"*\"]\n",
        targets_toml(&[a]),
        users_file(dir.path()),
        ops_role()
    );
    let gw = Gateway::start(&body).await;
    let anonymous = gw.http.get(gw.url(NAME)).send().await.unwrap();
    assert_eq!(anonymous.status(), 200);
    assert!(anonymous
        .text()
        .await
        .unwrap()
        .contains("\"value\":\"alpha\""));
    let alice = gw
        .http
        .get(gw.url(NAME))
        .basic_auth("alice", Some("wonder:land"));
    assert_eq!(alice.send().await.unwrap().status(), 200);
    let wrong = gw
        .http
        .get(gw.url(NAME))
        .basic_auth("alice", Some("not it"));
    let wrong = wrong.send().await.unwrap();
    assert_eq!(wrong.status(), 401);
    assert!(challenges(wrong.headers())
        .iter()
        .any(|c| c.starts_with("Basic")));
    let text = format!("[server]\nlisten = \"127.0.0.1:0\"\nauth = [\"basic\"]\n{body}");
    let problems = jmxgate::Config::parse(&text)
        .and_then(|c| c.validate())
        .err()
        .unwrap_or_default();
    assert!(
        problems.iter().any(|p| p.starts_with(
            "access.anonymous_role: \"readers\" would never be given, as server.auth leaves out \"anonymous\"; add \"anonymous\" to server.auth"
        )),
        "{problems:?}"
    );
}
