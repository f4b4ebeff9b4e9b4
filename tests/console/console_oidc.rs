//! Signing in to the console at a real OpenID provider (`oidc-provider`
//! from npm, tests/clients/oidc/provider.mjs, over HTTPS with a CA made
//! here): the authorization-code flow with PKCE driven as a browser would
//! (the provider's own login form), the session cookie it leaves, where
//! that cookie counts and where it doesn't, what a forged or replayed
//! callback gets, signing out, and an expired session signing in again.

use crate::common;
use crate::oidc;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{audit_records, eventually, shared_agents, targets_toml, Gateway, TestPki};
use oidc::{available, Provider};

/// A client that follows no redirect and keeps no cookie: each step is
/// looked at.
fn stepwise(pki: Option<&TestPki>) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut b = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(60));
    if let Some(pki) = pki {
        b = b.tls_certs_only([reqwest::Certificate::from_pem(
            &std::fs::read(pki.ca_file()).unwrap(),
        )
        .unwrap()]);
    }
    b.build().unwrap()
}

/// The `name=value` of each `Set-Cookie`, with its attributes.
fn set_cookies(r: &reqwest::Response) -> BTreeMap<String, (String, String)> {
    r.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| {
            let (pair, attributes) = v.split_once(';').unwrap_or((v, ""));
            let (name, value) = pair.split_once('=')?;
            Some((
                name.trim().to_string(),
                (value.to_string(), attributes.to_string()),
            ))
        })
        .collect()
}

fn location(r: &reqwest::Response) -> String {
    r.headers()["location"].to_str().unwrap().to_string()
}

struct World {
    gw: Gateway,
    provider: Provider,
    pki: TestPki,
    audit: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

/// A gateway whose console signs in at the provider: `alice` holds
/// `jmx-admin` (the ops role, every target), `bob` holds `viewer` (alpha
/// only); tokens live `ttl` seconds.
async fn world(ttl: u64) -> World {
    let pki = TestPki::new("console-oidc");
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let issuer = format!("https://127.0.0.1:{port}");
    let audit = dir.path().join("audit");
    let config = format!(
        "auth = [\"bearer\"]\n{targets}\
         [auth.bearer]\nissuer = \"{issuer}\"\ndiscovery = true\nca_file = \"{ca}\"\n\
         audience = \"urn:jmxgate\"\nleeway = \"1s\"\nroles_claim = \"realm_access.roles\"\n\n\
         [auth.bearer.role_map]\n\"jmx-admin\" = [\"ops\"]\n\"viewer\" = [\"viewer\"]\n\n\
         [console.oidc]\nclient_id = \"jmxgate-console\"\nscopes = [\"openid\", \"jolokia\"]\n\
         resource = \"urn:jmxgate\"\n\n\
         [audit]\ndir = \"{audit}\"\n\n\
         [[roles]]\nname = \"ops\"\ntargets = [\"*\"]\n\n\
         [[roles]]\nname = \"viewer\"\ntargets = [\"alpha\"]\n",
        targets = targets_toml(&shared_agents().iter().collect::<Vec<_>>()),
        ca = pki.ca_file().display(),
        audit = audit.display(),
    );
    let gw = Gateway::start(&config).await;
    let callback = gw.url("/console/oidc/callback");
    let jwks = dir.path().join("jwks.json");
    let provider = Provider::start_with(
        &pki,
        &jwks,
        port,
        ttl,
        &[
            ("OIDC_CONSOLE_REDIRECT_URIS", callback.as_str()),
            ("OIDC_USER_ROLES", "alice=jmx-admin;bob=viewer"),
        ],
    );
    eventually(
        "the gateway has the provider's keys",
        Duration::from_secs(60),
        || async {
            match gw.gateway.bearer_unready() {
                None => Ok(()),
                Some(why) => Err(why),
            }
        },
    )
    .await;
    World {
        gw,
        provider,
        pki,
        audit,
        _dir: dir,
    }
}

/// Cookies a browser would hold for the provider (all sent everywhere:
/// the provider scopes its own by path, which only narrows).
#[derive(Default)]
struct Jar(BTreeMap<String, String>);

impl Jar {
    fn take(&mut self, r: &reqwest::Response) {
        for (name, (value, attributes)) in set_cookies(r) {
            if attributes.to_ascii_lowercase().contains("max-age=0")
                || attributes
                    .to_ascii_lowercase()
                    .contains("expires=thu, 01 jan 1970")
            {
                self.0.remove(&name);
            } else {
                self.0.insert(name, value);
            }
        }
    }

    fn header(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Sends the browser's request with its cookies and keeps what comes back.
async fn visit(http: &reqwest::Client, jar: &mut Jar, url: &str) -> reqwest::Response {
    let r = http
        .get(url)
        .header("cookie", jar.header())
        .send()
        .await
        .unwrap();
    jar.take(&r);
    r
}

/// What a sign-in leaves: the gateway's callback URL and the browser's
/// sign-in cookie, after `login` got through the provider's form.
struct AtCallback {
    url: String,
    gateway_cookies: Jar,
}

/// A browser's way from a console page through the provider's login form
/// back to the gateway's callback (not yet visited).
async fn through_the_provider(w: &World, page: &str, login: &str) -> AtCallback {
    let gw_http = stepwise(None);
    let idp = stepwise(Some(&w.pki));
    let mut gateway_cookies = Jar::default();
    let start = visit(&gw_http, &mut gateway_cookies, &w.gw.url(page)).await;
    assert_eq!(
        start.status(),
        302,
        "a page without credentials goes to sign in"
    );
    let mut next = location(&start);
    assert!(next.starts_with(&w.provider.issuer), "{next}");
    let mut provider_cookies = Jar::default();
    // The provider's redirects, its login form, and back.
    for _ in 0..10 {
        if next.starts_with(&w.gw.url("")) {
            return AtCallback {
                url: next,
                gateway_cookies,
            };
        }
        let url = if next.starts_with('/') {
            format!("{}{next}", w.provider.issuer)
        } else {
            next.clone()
        };
        let r = visit(&idp, &mut provider_cookies, &url).await;
        if r.status().is_redirection() {
            next = location(&r);
            continue;
        }
        let html = r.text().await.unwrap();
        let action = html
            .split("action=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_else(|| panic!("the provider's login form: {html}"))
            .replace("&amp;", "&");
        let action = if action.starts_with('/') {
            format!("{}{action}", w.provider.issuer)
        } else {
            action
        };
        let posted = idp
            .post(action)
            .header("cookie", provider_cookies.header())
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("prompt=login&login={login}&password=any"))
            .send()
            .await
            .unwrap();
        provider_cookies.take(&posted);
        assert!(posted.status().is_redirection(), "{}", posted.status());
        next = location(&posted);
    }
    panic!("the provider never sent the browser back");
}

/// The session cookie a full sign-in gives `login`, returning to `page`.
async fn sign_in(w: &World, page: &str, login: &str) -> String {
    let mut at = through_the_provider(w, page, login).await;
    let back = visit(&stepwise(None), &mut at.gateway_cookies, &at.url).await;
    assert_eq!(back.status(), 303, "{}", back.text().await.unwrap());
    assert_eq!(location(&back), page, "back where the sign-in started");
    let cookies = set_cookies(&back);
    let (session, attributes) = &cookies["jmxgate_console_session"];
    for a in ["HttpOnly", "SameSite=Lax", "Path=/console"] {
        assert!(attributes.contains(a), "{attributes}");
    }
    session.clone()
}

async fn page_as(w: &World, session: &str, path: &str) -> (u16, String) {
    let r = stepwise(None)
        .get(w.gw.url(path))
        .header("cookie", format!("jmxgate_console_session={session}"))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn people_sign_in_at_the_provider_and_see_what_their_roles_reach() {
    if !available() {
        return;
    }
    let w = world(300).await;

    // The first step, as the provider is asked: code flow, PKCE (S256), the
    // gateway as resource, and a short-lived cookie for the callback.
    let first = stepwise(None)
        .get(w.gw.url("/console/targets/beta"))
        .send()
        .await
        .unwrap();
    let to = url::Url::parse(&location(&first)).unwrap();
    let q: BTreeMap<String, String> = to.query_pairs().into_owned().collect();
    assert_eq!(q["response_type"], "code");
    assert_eq!(q["client_id"], "jmxgate-console");
    assert_eq!(q["code_challenge_method"], "S256");
    assert_eq!(q["resource"], "urn:jmxgate");
    assert_eq!(q["redirect_uri"], w.gw.url("/console/oidc/callback"));
    let (_, attributes) = &set_cookies(&first)["jmxgate_console_signin"];
    assert!(attributes.contains("HttpOnly") && attributes.contains("Max-Age=600"));

    // alice (ops) reaches every target; bob (viewer) only alpha.
    let alice = sign_in(&w, "/console/targets/beta", "alice").await;
    let (status, fleet) = page_as(&w, &alice, "/console/").await;
    assert_eq!(status, 200, "{fleet}");
    for name in ["alpha", "beta", "gamma", "alice"] {
        assert!(fleet.contains(name), "{name} on alice's fleet page");
    }
    let bob = sign_in(&w, "/console/", "bob").await;
    let (status, fleet) = page_as(&w, &bob, "/console/").await;
    assert_eq!(status, 200);
    assert!(fleet.contains("alpha") && fleet.contains("bob"));
    assert!(
        !fleet.contains("beta") && !fleet.contains("gamma"),
        "{fleet}"
    );
    let (status, _) = page_as(&w, &bob, "/console/targets/beta").await;
    assert_eq!(status, 404, "a target bob doesn't reach is no target");

    // The session counts on console pages only: not on the Jolokia door,
    // nor on Hawtio's Jolokia requests from another site.
    let jolokia = stepwise(None)
        .get(w.gw.url("/jolokia/targets/alpha/read/java.lang:type=Runtime/Name"))
        .header("cookie", format!("jmxgate_console_session={alice}"))
        .send()
        .await
        .unwrap();
    assert_eq!(jolokia.status(), 401);

    // Signing in is audited, naming the person and the roles.
    let records = audit_records(&w.audit);
    let signed_in: Vec<_> = records
        .iter()
        .filter(|r| r["event"] == "console_sign_in")
        .map(|r| {
            (
                r["principal"].as_str().unwrap_or(""),
                r["roles"].to_string(),
            )
        })
        .collect();
    assert!(
        signed_in
            .iter()
            .any(|(p, roles)| *p == "alice" && roles.contains("ops")),
        "{signed_in:?}"
    );
    let text = std::fs::read_dir(&w.audit)
        .unwrap()
        .map(|f| std::fs::read_to_string(f.unwrap().path()).unwrap())
        .collect::<String>();
    assert!(!text.contains(&alice), "a session token in the audit log");

    // Signing out ends the cookie; from another site it is refused.
    let out = stepwise(None)
        .post(w.gw.url("/console/sign-out"))
        .header("cookie", format!("jmxgate_console_session={alice}"))
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 403);
    let out = stepwise(None)
        .post(w.gw.url("/console/sign-out"))
        .header("cookie", format!("jmxgate_console_session={alice}"))
        .header("sec-fetch-site", "same-origin")
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 303);
    assert_eq!(location(&out), "/console/signed-out");
    assert!(set_cookies(&out)["jmxgate_console_session"]
        .1
        .contains("Max-Age=0"));
    let (status, page) = page_as(&w, "", "/console/signed-out").await;
    assert_eq!(status, 200);
    assert!(page.contains("signed out"), "{page}");
}

#[tokio::test(flavor = "multi_thread")]
async fn forged_and_replayed_callbacks_get_no_session() {
    if !available() {
        return;
    }
    let w = world(300).await;
    let gw_http = stepwise(None);
    let at = through_the_provider(&w, "/console/", "alice").await;
    let callback = url::Url::parse(&at.url).unwrap();
    let q: BTreeMap<String, String> = callback.query_pairs().into_owned().collect();
    let cookie = at.gateway_cookies.header();
    let ask = |url: String, cookie: String| {
        let http = gw_http.clone();
        async move {
            let r = http.get(url).header("cookie", cookie).send().await.unwrap();
            let made_session = set_cookies(&r)
                .get("jmxgate_console_session")
                .is_some_and(|(v, _)| !v.is_empty());
            (r.status().as_u16(), made_session, r.text().await.unwrap())
        }
    };
    let path = callback.path().to_string();
    // Another browser (no sign-in cookie), or another state: refused
    // before the code is used.
    let (status, made, page) = ask(at.url.clone(), String::new()).await;
    assert_eq!((status, made), (400, false), "{page}");
    let forged = w.gw.url(&format!("{path}?code={}&state=forged", q["code"]));
    let (status, made, page) = ask(forged, cookie.clone()).await;
    assert_eq!((status, made), (400, false), "{page}");
    assert!(page.contains("not for the sign-in"), "{page}");
    // The real one, then the same again: a code is good once.
    let (status, made, _) = ask(at.url.clone(), cookie.clone()).await;
    assert_eq!((status, made), (303, true));
    let (status, made, page) = ask(at.url.clone(), cookie).await;
    assert_eq!((status, made), (502, false), "{page}");
    assert!(page.contains("invalid_grant"), "{page}");
    // A provider's refusal is said as the provider said it.
    let (status, _, page) = ask(
        w.gw.url(&format!(
            "{path}?error=access_denied&error_description=Nope"
        )),
        String::new(),
    )
    .await;
    assert_eq!(status, 400);
    assert!(page.contains("access_denied Nope"), "{page}");
    // A made-up session cookie is no one: the page signs in again.
    let (status, _) = page_as(&w, "not-a-token", "/console/").await;
    assert_eq!(status, 302);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_session_signs_in_again() {
    if !available() {
        return;
    }
    let w = world(oidc::TOKEN_TTL_SECS).await;
    let session = sign_in(&w, "/console/", "alice").await;
    // Before it expires the page shows; after, the provider is asked again
    // (and the dead cookie dropped).
    eventually(
        "the session has expired",
        Duration::from_secs(60),
        || async {
            let r = stepwise(None)
                .get(w.gw.url("/console/events"))
                .header("cookie", format!("jmxgate_console_session={session}"))
                .send()
                .await
                .unwrap();
            if r.status() != 302 {
                return Err(format!("{}", r.status()));
            }
            let dropped = set_cookies(&r)
                .get("jmxgate_console_session")
                .is_some_and(|(_, a)| a.contains("Max-Age=0"));
            let to = location(&r);
            (dropped && to.starts_with(&w.provider.issuer))
                .then_some(())
                .ok_or(to)
        },
    )
    .await;
    // And a new sign-in works at once.
    let again = sign_in(&w, "/console/events", "alice").await;
    assert_eq!(page_as(&w, &again, "/console/events").await.0, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_browser_signs_in_at_the_provider_and_out() {
    if !available() || !common::hawtio_available() {
        return;
    }
    let w = world(300).await;
    let shots = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let [_, beta, _] = shared_agents();
    let mut cmd = std::process::Command::new("node");
    cmd.current_dir(common::hawtio_dir())
        .args(["--test-reporter=spec", "console-sign-in.test.mjs"])
        .env("JMXGATE_URL", w.gw.url(""))
        .env("JMXGATE_ISSUER", &w.provider.issuer)
        .env("JMXGATE_LOGIN", "bob")
        .env("JMXGATE_SEEN", "alpha")
        .env("JMXGATE_UNSEEN", &beta.name)
        .env("JMXGATE_SCREENSHOT_DIR", &shots)
        .env("CHROMIUM", common::CHROMIUM);
    let (out, err) = common::run_client(cmd, Duration::from_secs(600)).await;
    println!("{out}\n{err}\nscreenshots in {}", shots.display());
    let signed_in = audit_records(&w.audit)
        .into_iter()
        .any(|r| r["event"] == "console_sign_in" && r["principal"] == "bob");
    assert!(signed_in, "bob's sign-in is audited");
}
