//! Foreign pages and foreign hosts, against real agents: the `Host` header
//! must name the gateway (DNS rebinding) on every door; another site's page
//! cannot change state (CSRF) unless `<cors>` names it; and the shipped
//! `config/gateway.toml`, run as shipped by the real binary, answers no
//! foreign page and no foreign `Host`.
//!
//! No assertion is on speed: deadlines are generous, outcomes are checked.
//!
//! Found by issue 39's hardening round 3 (formerly tests/hardening_round3.rs).

use crate::common;

use std::io::BufRead as _;
use std::path::Path;

use common::{basic_auth_config, header, shared_agents, targets_toml, users_file, Gateway};
use serde_json::{json, Value};

const OPS: &str = "jmxgate.test:type=Operations";

const TYPES: &str = "jmxgate.test:type=Types";

/// A request to `path` with this `Host` header: its status and body.
async fn with_host(gw: &Gateway, path: &str, host: &str) -> (u16, String) {
    let r = gw
        .http
        .get(gw.url(path))
        .header("host", host)
        .header("origin", "http://rebound.example")
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    if status == 421 {
        // No CORS headers: the page that sent it is not one of ours.
        assert_eq!(
            header(&r, "access-control-allow-origin"),
            None,
            "{path} {host}"
        );
    }
    (status, r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_host_header_must_name_the_gateway_on_every_door() {
    let [a, ..] = shared_agents();
    let scrape = format!("/prometheus?target={}", a.name);
    let read = format!("/jolokia/targets/{}/read/{TYPES}/Name", a.name);
    let doors = ["/jolokia/version", read.as_str(), scrape.as_str()];
    // Unset on a loopback listener: its loopback names only.
    let gw = Gateway::start(&targets_toml(&[a])).await;
    let port = gw.addr.port();
    for door in doors {
        for host in [
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
            "localhost".to_string(),
        ] {
            let (status, body) = with_host(&gw, door, &host).await;
            assert_eq!(status, 200, "{door} Host {host}: {body}");
        }
        for host in [format!("rebound.example:{port}"), "127.0.0.2".to_string()] {
            let (status, body) = with_host(&gw, door, &host).await;
            assert_eq!(status, 421, "{door} Host {host}: {body}");
            assert!(body.contains("server.allowed_hosts"), "{body}");
            assert!(body.contains("jmxgate.HostNotAllowed"), "{body}");
        }
    }
    // Configured: exactly those names, on a loopback listener too.
    let gw = Gateway::start(&format!(
        "allowed_hosts = [\"jmx.example.com\", \"gw.internal:9\"]\n{}",
        targets_toml(&[a])
    ))
    .await;
    let port = gw.addr.port();
    for door in doors {
        for host in [
            "jmx.example.com".to_string(),
            format!("JMX.example.com:{port}"),
            "gw.internal:9".into(),
        ] {
            let (status, body) = with_host(&gw, door, &host).await;
            assert_eq!(status, 200, "{door} Host {host}: {body}");
        }
        for host in [
            format!("localhost:{port}"),
            format!("gw.internal:{port}"),
            "rebound.example".into(),
        ] {
            let (status, body) = with_host(&gw, door, &host).await;
            assert_eq!(status, 421, "{door} Host {host}: {body}");
            assert!(body.contains("server.allowed_hosts"), "{body}");
        }
    }
}

/// `ann` holds `ops` (no `<cors>`: CORS for every origin, but no page is
/// *named*), `pat` holds `pages`, whose `<cors>` names
/// http://console.example; both reach the first shared agent.
async fn csrf_gateway(dir: &Path) -> Gateway {
    let [a, ..] = shared_agents();
    let users = users_file(
        dir,
        &[("ann", "ann-pw", &["ops"]), ("pat", "pat-pw", &["pages"])],
    );
    let pages = dir.join("pages.xml");
    std::fs::write(
        &pages,
        "<restrict><cors><allow-origin>http://console.example</allow-origin></cors></restrict>",
    )
    .unwrap();
    Gateway::start(&basic_auth_config(
        &users,
        &format!(
            "{}[access]\n\n[[roles]]\nname = \"ops\"\ntargets = [\"*\"]\n\n\
             [[roles]]\nname = \"pages\"\ntargets = [\"*\"]\npolicy = \"{}\"\n",
            targets_toml(&[a]),
            pages.display()
        ),
    ))
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn another_sites_page_cannot_change_state() {
    let dir = tempfile::tempdir().unwrap();
    let gw = csrf_gateway(dir.path()).await;
    let [a, ..] = shared_agents();
    let base = gw.url(&format!("/jolokia/targets/{}", a.name));
    // A form post: text/plain, no preflight, the browser's cached Basic
    // credentials, Fetch Metadata saying where the page is.
    let post = |user: &str, body: Value, site: Option<&str>, origin: &str| {
        let mut r = gw
            .http
            .post(&base)
            .basic_auth(user, Some(format!("{user}-pw")))
            .header("content-type", "text/plain")
            .header("origin", origin)
            .body(body.to_string());
        if let Some(site) = site {
            r = r.header("sec-fetch-site", site);
        }
        r.send()
    };
    let exec = json!({"type":"exec","mbean":OPS,"operation":"add(int,int)","arguments":[2,3]});
    let marker = 4100 + (std::process::id() % 1000) as i32;
    let write = json!({"type":"write","mbean":TYPES,"attribute":"Int","value":marker});
    // http: a page served over https is refused on an http listener anyway.
    let evil = "http://evil.example";
    for body in [&exec, &write] {
        let r = post("ann", body.clone(), Some("cross-site"), evil)
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{body}");
        let text = r.text().await.unwrap();
        assert!(text.contains("jmxgate.CrossSiteRefused"), "{text}");
        assert!(text.contains("<cors>"), "{text}");
        // A <cors> that names another page does not admit this one.
        let r = post("pat", body.clone(), Some("cross-site"), evil)
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{body}");
    }
    // The write never reached the agent.
    let direct = common::direct(a, &json!({"type":"read","mbean":TYPES,"attribute":"Int"})).await;
    assert_ne!(direct["value"], marker, "{direct}");
    // A GET of exec or write from another site: refused too.
    for path in [
        format!("/exec/{OPS}/add(int,int)/2/3"),
        format!("/write/{TYPES}/Int/{marker}"),
    ] {
        let r = gw
            .http
            .get(format!("{base}{path}"))
            .basic_auth("ann", Some("ann-pw"))
            .header("sec-fetch-site", "cross-site")
            .header("origin", evil)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{path}");
    }
    // A cross-site read by GET is no state change: answered.
    let r = gw
        .http
        .get(format!("{base}/read/{TYPES}/Name"))
        .basic_auth("ann", Some("ann-pw"))
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // Same site, no Fetch Metadata (curl, Java clients), and a page that
    // pat's <cors> names: the exec runs (the agent's answer: 5).
    for (user, site, origin) in [
        ("ann", Some("same-site"), evil),
        ("ann", Some("same-origin"), evil),
        ("ann", None, evil),
        ("pat", Some("cross-site"), "http://console.example"),
    ] {
        let r = post(user, exec.clone(), site, origin).await.unwrap();
        assert_eq!(r.status(), 200, "{user} {site:?} {origin}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["value"], 5, "{user} {site:?}: {body}");
    }
}

/// `jmxgate serve` as shipped: `config/gateway.toml` with its policies,
/// only the listener's port and the targets (one real agent, labelled as
/// the shipped orders-1) replaced on the command line.
struct Shipped {
    child: std::process::Child,
    addr: String,
}

impl Drop for Shipped {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_shipped(agent_url: &str) -> Shipped {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_jmxgate"))
        .current_dir(repo)
        .args(["serve", "--config", "config/gateway.toml"])
        .args(["--set", "server.listen=127.0.0.1:0"])
        .arg("--set")
        .arg(format!(
            "targets=[{{name=\"orders-1\",url=\"{agent_url}\",labels={{env=\"prod\",app=\"orders\"}}}}]"
        ))
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start jmxgate serve");
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = common::listening_address(lines.by_ref());
    // Its log keeps being read: a closed pipe would end it.
    std::thread::spawn(move || lines.map_while(Result::ok).for_each(drop));
    Shipped { child, addr }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_shipped_config_answers_no_foreign_page_and_no_foreign_host() {
    let [a, ..] = shared_agents();
    let gw = start_shipped(&a.url());
    let http = common::http_client();
    let url = |path: &str| format!("http://{}{path}", gw.addr);
    let read = "/jolokia/targets/orders-1/read/java.lang:type=Runtime/VmName";
    let expected = common::direct(
        a,
        &json!({"type":"read","mbean":"java.lang:type=Runtime","attribute":"VmName"}),
    )
    .await;
    let evil = "http://evil.example";
    // Anonymous callers read, as shipped; a foreign page gets no CORS echo.
    for path in [read, "/jolokia/targets"] {
        let r = http
            .get(url(path))
            .header("origin", evil)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(header(&r, "access-control-allow-origin"), None, "{path}");
        assert_eq!(
            header(&r, "access-control-allow-credentials"),
            None,
            "{path}"
        );
        let body: Value = r.json().await.unwrap();
        if path == read {
            assert_eq!(body["value"], expected["value"], "{body}");
        }
    }
    let preflight = http
        .request(reqwest::Method::OPTIONS, url(read))
        .header("origin", evil)
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(header(&preflight, "access-control-allow-origin"), None);
    // A rebinding page's Host is refused on every door; the gateway's own
    // loopback names are answered.
    let port = gw.addr.rsplit(':').next().unwrap();
    for path in [
        read,
        "/jolokia/targets",
        "/prometheus?target=orders-1",
        "/mcp",
    ] {
        let r = http
            .get(url(path))
            .header("host", format!("evil.example:{port}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 421, "{path}");
        let text = r.text().await.unwrap();
        assert!(text.contains("server.allowed_hosts"), "{path}: {text}");
    }
    for path in [read, "/prometheus?target=orders-1"] {
        let r = http
            .get(url(path))
            .header("host", format!("localhost:{port}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
    }
}
