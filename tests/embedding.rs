//! jmxgate embedded in a host axum app (`examples/embedded.rs`): in
//! process, and as the example binary itself, against a real agent.

mod common;

// The example's own router, so the test checks what the example ships.
#[allow(dead_code)]
#[path = "../examples/embedded.rs"]
mod embedded;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{http_client, post_json, Agent};
use serde_json::{json, Value};

const NAME_PATH: &str = "/monitoring/jolokia/targets/app/read/jmxgate.test:type=Types/Name";

async fn get(http: &reqwest::Client, url: &str) -> (u16, String) {
    let r = http.get(url).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// What both tests check on a running host app at `base`.
async fn check_host(base: &str, agent: &Agent) {
    let http = http_client();

    assert_eq!(
        get(&http, &format!("{base}/")).await,
        (200, "host app".into())
    );
    assert_eq!(
        get(&http, &format!("{base}/health")).await,
        (200, "ok".into())
    );

    let (status, body) = get(&http, &format!("{base}/monitoring/jolokia/version")).await;
    assert_eq!(status, 200, "{body}");
    let v = json(&body);
    assert_eq!(v["status"], 200, "{v}");
    assert_eq!(v["value"]["details"]["server_product"], "jmxgate", "{v}");
    assert!(
        v["value"]["protocol"].as_str().unwrap().starts_with("8."),
        "{v}"
    );

    let (status, body) = get(&http, &format!("{base}{NAME_PATH}")).await;
    assert_eq!(status, 200, "{body}");
    let v = json(&body);
    assert_eq!(v["status"], 200, "{v}");
    assert_eq!(v["value"], agent.name.as_str(), "{v}");

    // The unprefixed path is not the gateway's any more.
    let (status, body) = get(&http, &format!("{base}/jolokia/version")).await;
    assert_eq!(status, 404, "{body}");
    assert!(!body.contains("\"protocol\""), "{body}");
}

#[tokio::test]
async fn in_process_host_app_serves_its_routes_and_the_gateway_under_its_prefix() {
    let agent = Agent::start("embedded-in-process");
    let config = embedded::config(&agent.url(), "127.0.0.1:0").expect("valid config");
    let app = embedded::app(&config).expect("gateway starts");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
    });

    check_host(&base, &agent).await;

    let http = http_client();
    // The bare mount and its trailing-slash form both take proxy-mode POSTs.
    for path in ["/monitoring/jolokia", "/monitoring/jolokia/"] {
        let (status, v) = post_json(
            &http,
            &format!("{base}{path}"),
            &json!([
                {"type":"read","mbean":"jmxgate.test:type=Types","attribute":"Name","target":{"url":"app"}},
                {"type":"version"}
            ]),
        )
        .await;
        assert_eq!(status, 200, "{path}: {v}");
        assert_eq!(v[0]["value"], agent.name.as_str(), "{path}: {v}");
        assert_eq!(
            v[1]["value"]["details"]["server_product"], "jmxgate",
            "{path}: {v}"
        );
    }
    // POST to a virtual agent URL below the mount.
    let (status, v) = post_json(
        &http,
        &format!("{base}/monitoring/jolokia/targets/app"),
        &json!({"type":"read","mbean":"jmxgate.test:type=Types","attribute":"Name"}),
    )
    .await;
    assert_eq!((status, &v["value"]), (200, &json!(agent.name)), "{v}");

    // Below the mount, the gateway answers unknown targets itself.
    let (status, body) = get(
        &http,
        &format!("{base}/monitoring/jolokia/targets/nope/version"),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(json(&body)["error_type"], "jmxgate.UnknownTarget", "{body}");

    // Outside it, the host's own 404s (empty body), not the gateway's JSON.
    for path in ["/monitoring/jolokiax/version", "/nothing-here", "/jolokia"] {
        let (status, body) = get(&http, &format!("{base}{path}")).await;
        assert_eq!((status, body.as_str()), (404, ""), "{path}");
    }
}

/// Kills the example when the test ends, also on panic.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What cargo sets for a running test (`CARGO_PKG_NAME`, `CARGO_MANIFEST_DIR`,
/// `OUT_DIR`, …) but the suite's own `cargo` never sees. Build scripts such
/// as ring's ask to rerun when these change, so a nested `cargo build` that
/// inherits them rebuilds ring and everything over it, and the next
/// `cargo nextest run` rebuilds it all back (minutes per pass). What a user
/// set for cargo itself (home, target dir, profile, build settings) stays.
fn set_by_cargo_for_tests(name: &str) -> bool {
    const KEPT: [&str; 9] = [
        "CARGO_HOME",
        "CARGO_TARGET_DIR",
        "CARGO_INCREMENTAL",
        "CARGO_BUILD_",
        "CARGO_PROFILE_",
        "CARGO_TERM_",
        "CARGO_NET_",
        "CARGO_HTTP_",
        "CARGO_REGISTR",
    ];
    name == "OUT_DIR"
        || name.starts_with("NEXTEST")
        || (name.starts_with("CARGO_") && !KEPT.iter().any(|k| name.starts_with(k)))
}

/// Builds the example and returns its executable, as cargo reports it (so
/// `CARGO_TARGET_DIR` or a configured target dir are followed).
fn build_example() -> PathBuf {
    let mut cargo = Command::new(env!("CARGO"));
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(set_by_cargo_for_tests) {
            cargo.env_remove(name);
        }
    }
    let out = cargo
        .args([
            "build",
            "--example",
            "embedded",
            "--quiet",
            "--message-format=json",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(Stdio::inherit())
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "cargo build --example embedded failed"
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["target"]["name"] == "embedded")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .expect("cargo reported no executable for the example")
}

#[tokio::test]
async fn example_binary_serves_host_routes_and_the_gateway() {
    let exe = tokio::task::spawn_blocking(build_example).await.unwrap();
    let agent = Agent::start("embedded-binary");
    let mut child = Running(
        Command::new(&exe)
            .env("AGENT_URL", agent.url())
            .env("LISTEN", "127.0.0.1:0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the example"),
    );
    let line = common::first_line(child.0.stdout.take().unwrap(), Duration::from_secs(30))
        .expect("the example printed no address within 30 s");
    let base = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();

    check_host(&base, &agent).await;
    drop(child);
}
