//! Operating the gateway: metrics after real traffic, health and readiness,
//! layered configuration, reload under load, and a graceful shutdown that
//! cuts no in-flight request.

mod common;

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{dead_port, eventually, shared_agents, targets_toml, Agent, Gateway};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_jmxgate");
const OPS: &str = "jmxgate.test:type=Operations";

/// A `jmxgate serve` process and the addresses it printed.
struct Served {
    child: Child,
    http: String,
    /// Read only when logged before the lines waited for (the admin
    /// listener's comes after it).
    https: Option<String>,
    admin: Option<String>,
}

impl Served {
    fn start(args: &[&str], wants_admin: bool) -> Served {
        let mut child = Command::new(BIN)
            .arg("serve")
            .args(args)
            .env("RUST_LOG", "info")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let (mut http, mut https, mut admin) = (None, None, None);
        while http.is_none() || (wants_admin && admin.is_none()) {
            let line = lines.next().expect("serve exited early").unwrap();
            let addr = |l: &str, scheme: &str| {
                l.split(scheme)
                    .nth(1)
                    .map(|r| r.split('/').next().unwrap().to_string())
            };
            if line.contains("admin listening on") {
                admin = addr(&line, "http://");
            } else if line.contains("listening on http://") {
                http = addr(&line, "http://");
            } else if line.contains("listening on https://") {
                https = addr(&line, "https://");
            }
        }
        std::thread::spawn(move || lines.for_each(drop));
        Served {
            child,
            http: http.unwrap(),
            https,
            admin,
        }
    }

    fn signal(&self, sig: &str) {
        assert!(Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap()
            .success());
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_health_and_readiness_follow_real_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let [a, ..] = shared_agents();
    let policy = write(dir.path(), "p.xml", &format!("<restrict><deny><mbean><name>{OPS}</name><operation>reset</operation></mbean></deny></restrict>"));
    let users_hash = jmxgate::pipeline::authenticate::basic::hash_password("pw").unwrap();
    let users = write(
        dir.path(),
        "users.toml",
        &format!(
            "[[users]]\nname = \"ops\"\npassword_hash = \"{users_hash}\"\nroles = [\"ops\"]\n"
        ),
    );
    let config = write(
        dir.path(),
        "gateway.toml",
        &format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nauth = [\"basic\"]\n[admin]\nlisten = \"127.0.0.1:0\"\n[audit]\ndir = \"audit\"\n\
             [auth.basic]\nusers_file = \"{users}\"\n[[roles]]\nname = \"ops\"\ntargets = [\"*\"]\npolicy = \"{policy}\"\n{}\
             [[targets]]\nname = \"dead\"\nurl = \"http://127.0.0.1:{}/jolokia\"\nconnect_timeout = \"500ms\"\n",
            targets_toml(&[a]),
            dead_port()
        ),
    );
    let served = Served::start(&["--config", &config], true);
    let admin = served.admin.clone().unwrap();
    let http = common::http_client();
    let url = format!("http://{}/jolokia", served.http);
    let send = |body: Value| {
        http.post(&url)
            .basic_auth("ops", Some("pw"))
            .body(body.to_string())
            .send()
    };
    send(json!([
        {"type":"read","mbean":"jmxgate.test:type=Types","attribute":"Name","target":{"url":"alpha"}},
        {"type":"read","mbean":"jmxgate.test:type=Types","attribute":"Name","target":{"url":"alpha"}},
        {"type":"exec","mbean":OPS,"operation":"reset","target":{"url":"alpha"}},
        {"type":"version","target":{"url":"dead"}},
    ]))
    .await
    .unwrap();
    for _ in 0..2 {
        send(json!({"type":"read","mbean":"jmxgate.test:type=Types","attribute":"Name","target":{"url":"alpha"}})).await.unwrap();
    }
    assert_eq!(
        http.get(&url)
            .basic_auth("ops", Some("wrong"))
            .send()
            .await
            .unwrap()
            .status(),
        401
    );

    let text = common::get_text(&http, &format!("http://{admin}/metrics")).await;
    let items = "jmxgate_items_total";
    assert_eq!(
        metric(
            &text,
            items,
            &[
                ("type", "read"),
                ("target", "alpha"),
                ("status", "200"),
                ("decision", "allowed")
            ]
        ),
        4.0,
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            items,
            &[("type", "exec"), ("status", "403"), ("decision", "denied")]
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        metric(&text, items, &[("target", "dead"), ("status", "502")]),
        1.0,
        "{text}"
    );
    assert_eq!(
        metric(&text, "jmxgate_agent_up", &[("target", "alpha")]),
        1.0,
        "{text}"
    );
    assert_eq!(
        metric(&text, "jmxgate_agent_up", &[("target", "dead")]),
        0.0,
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            "jmxgate_agent_exchanges_total",
            &[("target", "dead"), ("outcome", "unreachable")]
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        metric(&text, "jmxgate_auth_failures_total", &[("method", "basic")]),
        1.0,
        "{text}"
    );
    assert!(
        metric(
            &text,
            "jmxgate_cache_requests_total",
            &[("cache", "basic_auth"), ("result", "hit")]
        ) >= 2.0,
        "{text}"
    );
    assert!(
        metric(&text, "jmxgate_audit_records_total", &[]) >= 7.0,
        "{text}"
    );
    assert!(
        metric(&text, "jmxgate_audit_fsync_duration_seconds_count", &[]) >= 1.0,
        "{text}"
    );
    assert_eq!(
        metric(&text, "jmxgate_http_requests_total", &[("status", "401")]),
        1.0,
        "{text}"
    );
    assert!(
        text.contains("jmxgate_item_duration_seconds_bucket"),
        "{text}"
    );
    // Each item once, the bulk's two alike reads too.
    assert_eq!(
        metric(
            &text,
            "jmxgate_item_duration_seconds_count",
            &[("type", "read")]
        ),
        4.0,
        "{text}"
    );

    for (path, want) in [("/healthz", "ok"), ("/readyz", "ready")] {
        let r = http
            .get(format!("http://{admin}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert!(r.text().await.unwrap().starts_with(want));
    }
    let v = common::get_json(&http, &format!("http://{admin}/actuator/jolokia")).await;
    assert!(
        v["value"]["protocol"].as_str().unwrap().starts_with("8."),
        "{v}"
    );
    assert_eq!(v["value"]["details"]["secured"], true);
}

#[tokio::test(flavor = "multi_thread")]
async fn client_connections_are_spread_over_the_serving_workers() {
    let dir = tempfile::tempdir().unwrap();
    let pki = common::TestPki::new("workers");
    let (cert, key) = pki.server_cert("gateway");
    let config = write(
        dir.path(),
        "gateway.toml",
        &format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nworkers = 2\n\
             [server.tls]\nlisten = \"127.0.0.1:0\"\ncert_file = {cert:?}\nkey_file = {key:?}\n\
             [admin]\nlisten = \"127.0.0.1:0\"\n"
        ),
    );
    let served = Served::start(&["--config", &config], true);
    let admin = served.admin.clone().unwrap();
    let https = served.https.clone().expect("an HTTPS listener");
    // One client per connection, each kept open: opened one after the
    // other, whichever worker accepts, each goes to the one holding fewer,
    // before the TLS handshake too.
    let mut clients = Vec::new();
    for (n, url) in (0..8)
        .map(|_| format!("http://{}/jolokia/version", served.http))
        .chain((0..4).map(|_| format!("https://{https}/jolokia/version")))
        .enumerate()
    {
        let client = if n < 8 {
            common::http_client()
        } else {
            pki.https_client(None)
        };
        let v = common::get_json(&client, &url).await;
        assert_eq!(v["status"], 200, "{v}");
        clients.push((client, url));
    }
    let text = common::get_text(&common::http_client(), &format!("http://{admin}/metrics")).await;
    let open = |worker| metric(&text, "jmxgate_client_connections", &[("worker", worker)]);
    // The scrape goes to the admin listener, which no worker serves.
    assert_eq!((open("1"), open("2")), (6.0, 6.0), "{text}");
    // Connections handed to the other worker keep answering there.
    for (client, url) in &clients {
        let v = common::get_json(client, url).await;
        assert_eq!(v["status"], 200, "{v}");
    }
    drop(clients);
    eventually(
        "closed connections to leave the count",
        Duration::from_secs(10),
        || async {
            let text =
                common::get_text(&common::http_client(), &format!("http://{admin}/metrics")).await;
            let open = metric(&text, "jmxgate_client_connections", &[("worker", "1")])
                + metric(&text, "jmxgate_client_connections", &[("worker", "2")]);
            if open == 0.0 {
                Ok(())
            } else {
                Err(format!("{open} open"))
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn readiness_can_require_a_reachable_target() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "gateway.toml",
        &format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.1:0\"\nready_requires_target = true\n\
             [[targets]]\nname = \"dead\"\nurl = \"http://127.0.0.1:{}/jolokia\"\n",
            dead_port()
        ),
    );
    let served = Served::start(&["--config", &config], true);
    let r = common::http_client()
        .get(format!("http://{}/readyz", served.admin.as_ref().unwrap()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert!(r
        .text()
        .await
        .unwrap()
        .contains("none of the 1 targets answers"));
}

#[tokio::test(flavor = "multi_thread")]
async fn layered_files_environment_and_set_overrides() {
    let dir = tempfile::tempdir().unwrap();
    let [a, b, ..] = shared_agents();
    let base = write(
        dir.path(),
        "10-base.toml",
        &format!(
            "order = 10\n[server]\nlisten = \"127.0.0.1:1\"\n{}",
            targets_toml(&[a])
        ),
    );
    let site = write(
        dir.path(),
        "20-site.toml",
        &format!("order = 20\n{}", targets_toml(&[b])),
    );
    // Later order wins for plain values; --set beats the environment.
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--config",
            &site,
            "--config",
            &base,
            "--set",
            "server.listen=127.0.0.1:0",
        ])
        .env("JMXGATE__SERVER__LISTEN", "127.0.0.1:1")
        .env("JMXGATE__SERVER__DEFAULT_TARGET", "beta")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = common::listening_address(&mut lines);
    let r: Value = serde_json::from_str(
        &common::http_client()
            .get(format!(
                "http://{addr}/jolokia/read/jmxgate.test:type=Types/Name"
            ))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(r["value"], "beta", "{r}");
    let out = Command::new(BIN)
        .args([
            "check-config",
            &base,
            &site,
            "--set",
            "server.max_bulk_items=0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("server.max_bulk_items"));
}

#[tokio::test(flavor = "multi_thread")]
async fn reload_under_load_drops_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start("reloaded");
    let policy_path = dir.path().join("p.xml");
    let deny = |op: &str| {
        format!("<restrict><deny><mbean><name>{OPS}</name><operation>{op}</operation></mbean></deny></restrict>")
    };
    std::fs::write(&policy_path, deny("noArgs")).unwrap();
    let config_path = dir.path().join("gateway.toml");
    let config = |extra_target: bool| {
        let extra = if extra_target {
            format!("[[targets]]\nname = \"extra\"\nurl = \"{}\"\n", agent.url())
        } else {
            String::new()
        };
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n{}{extra}[access]\nanonymous_role = \"t\"\n[[roles]]\nname = \"t\"\ntargets = [\"*\"]\npolicy = \"p.xml\"\n",
            targets_toml(&[&agent])
        )
    };
    std::fs::write(&config_path, config(false)).unwrap();
    let gw = Arc::new(Gateway::start_from_file(&config_path).await);
    tokio::spawn(jmxgate::reload::watch(
        gw.gateway.clone(),
        config_path.clone(),
        Duration::from_millis(50),
    ));

    let (ok, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let deadline = Instant::now() + Duration::from_secs(4);
    let mut clients = Vec::new();
    for _ in 0..8 {
        let (gw, ok, failed) = (gw.clone(), ok.clone(), failed.clone());
        clients.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                let (status, r) = gw
                    .post("/jolokia/targets/reloaded", &json!({"type":"read","mbean":"jmxgate.test:type=Types","attribute":"Name"}))
                    .await;
                if status == 200 && r["value"] == "reloaded" {
                    ok.fetch_add(1, Ordering::Relaxed);
                } else {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    // Change the policy and the targets several times while the load runs
    // (the pause paces the changes; it waits for nothing).
    for round in 0..6 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        std::fs::write(
            &policy_path,
            deny(if round % 2 == 0 { "reset" } else { "noArgs" }),
        )
        .unwrap();
        std::fs::write(&config_path, config(round % 2 == 0)).unwrap();
    }
    for c in clients {
        c.await.unwrap();
    }
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "requests failed during reloads"
    );
    assert!(
        ok.load(Ordering::Relaxed) > 100,
        "too little load: {}",
        ok.load(Ordering::Relaxed)
    );
    // The last state comes into force: policy denies noArgs, "extra" is gone.
    eventually(
        "the last policy and targets in force",
        Duration::from_secs(5),
        || async {
            let (_, r) = gw
                .get(&format!("/jolokia/targets/reloaded/exec/{OPS}/noArgs"))
                .await;
            let (status, _) = gw.get("/jolokia/targets/extra/version").await;
            match (r["status"].as_u64(), status) {
                (Some(403), 404) => Ok(()),
                other => Err(format!("{other:?} {r}")),
            }
        },
    )
    .await;
    let m = gw.gateway.metrics().encode();
    assert!(
        metric(&m, "jmxgate_config_reloads_total", &[("status", "ok")]) >= 6.0,
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_finishes_in_flight_requests() {
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start("drain");
    let config = common::gateway_toml(
        dir.path(),
        &format!(
            "[admin]\nlisten = \"127.0.0.1:0\"\n{}",
            targets_toml(&[&agent])
        ),
    );
    let mut served = Served::start(&["--config", &config.display().to_string()], true);
    let admin = served.admin.clone().unwrap();
    let http = common::http_client();
    let url = format!("http://{}/jolokia/targets/drain", served.http);
    let slow = tokio::spawn({
        let (http, url) = (http.clone(), url.clone());
        async move {
            let r = http
                .post(&url)
                .body(
                    json!({"type":"exec","mbean":OPS,"operation":"sleep","arguments":[1500]})
                        .to_string(),
                )
                .send()
                .await
                .unwrap();
            serde_json::from_str::<Value>(&r.text().await.unwrap()).unwrap()
        }
    });
    // In flight once the gateway has a connection open to the agent (its
    // health probes' own connections aside). Asked with a client of its
    // own each time, so no kept connection to the admin listener outlives
    // the wait.
    eventually(
        "the sleeping exec is under way at the agent",
        Duration::from_secs(60),
        || async {
            let text =
                common::get_text(&common::http_client(), &format!("http://{admin}/metrics")).await;
            match common::metric_value(&text, "jmxgate_agent_connections") {
                open if open > 0.0 => Ok(()),
                _ => Err("no agent connection open".to_string()),
            }
        },
    )
    .await;
    served.signal("-TERM");
    let answer = slow.await.unwrap();
    assert_eq!(
        answer["value"], 1500,
        "the in-flight request was cut: {answer}"
    );
    let status = served.child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(http
        .get(format!("http://{}/jolokia/version", served.http))
        .send()
        .await
        .is_err());
}

/// Started as a service manager starts it (a soft open-files limit of
/// 600 under a higher hard one), `jmxgate serve` raises its soft limit to
/// the hard one; a hard limit below what the configuration may hold open
/// is a start-up warning that names the keys, and the gateway serves on.
#[test]
fn serve_raises_the_open_files_limit_and_warns_when_it_stays_too_low() {
    let dir = tempfile::tempdir().unwrap();
    let text = "[server]\nlisten = \"127.0.0.1:0\"\n";
    let config = Path::new(&write(dir.path(), "gateway.toml", text)).to_path_buf();
    let parsed = jmxgate::Config::parse(text).unwrap();
    let needed = jmxgate::open_files::needed(&parsed.server, &parsed.health);
    let (_, hard) = jmxgate::open_files::limits().unwrap();
    let warning = "the open-files limit is";

    let raised = common::GatewayProcess::start_with_open_files(&config, "info", 600, hard);
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", raised.child.id())).unwrap();
    let open_files: Vec<&str> = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        open_files[3],
        hard.to_string(),
        "soft limit raised: {limits}"
    );
    let warned = raised.stop().iter().any(|l| l.contains(warning));
    assert_eq!(warned, hard < needed, "hard limit {hard}, needed {needed}");

    let low = common::GatewayProcess::start_with_open_files(&config, "info", 600, 600);
    let line = low
        .wait_for_line(warning, Duration::from_secs(60))
        .expect("a warning about the low limit");
    assert!(
        line.contains("600") && line.contains(&needed.to_string()),
        "{line}"
    );
    assert!(line.contains("server.max_kept_agent_connections"), "{line}");
    let (status, _) = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let http = common::http_client();
        let r = http
            .get(format!("http://{}/jolokia/version", low.addr))
            .send()
            .await
            .unwrap();
        (r.status(), r.text().await.unwrap())
    });
    assert_eq!(status, 200);
    low.stop();
}
