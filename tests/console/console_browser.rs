//! The console in a real headless Chromium (Debian's, driven by
//! playwright-core from tests/clients/hawtio/): "Open in Hawtio" on a
//! target's page opens the Hawtio build the gateway serves
//! (`[console] hawtio`), connected to that target through the gateway
//! with the browser's own Basic login, showing the agent's values; and
//! people using it (console.test.mjs): Basic sign-in, 10,000 stand-in
//! targets grouped and paged, a read-only view, an access request asked
//! and approved in two browsers, another site's post refused, a target's
//! going down on the events page. Screenshots go to
//! `target/tmp/console-screenshots/`.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{hawtio_available as available, hawtio_dir, CHROMIUM};
use common::{targets_toml, users_file, Agent, Gateway};
use serde_json::json;

/// Hawtio's static build in `dir`, as an operator would unpack one.
async fn hawtio_build(dir: &Path) -> std::path::PathBuf {
    let build = dir.join("hawtio-build");
    let mut cmd = Command::new("node");
    cmd.current_dir(hawtio_dir()).arg("build.mjs").arg(&build);
    common::run_client(cmd, Duration::from_secs(300)).await;
    build
}

/// The agent's own `jmxgate.test:type=Types` `Name`.
async fn agent_name(agent: &Agent) -> String {
    let name = common::direct(
        agent,
        &json!({"type":"read","mbean":"jmxgate.test:type=Types","attribute":"Name"}),
    )
    .await;
    name["value"].as_str().unwrap().to_string()
}

const USER: &str = "console-ops";
const PASSWORD: &str = "console:secret";

/// One agent behind a gateway whose `[console] hawtio` is what `hawtio`
/// makes of Hawtio's build directory, and `script` run against them in
/// Chromium with `env` besides the usual.
async fn hawtio_case(
    agent: &'static str,
    hawtio: impl FnOnce(&Path) -> String,
    script: &str,
    env: &[(&str, String)],
) {
    let agent = tokio::task::spawn_blocking(move || Agent::start(agent))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let build = hawtio_build(dir.path()).await;
    let users = users_file(dir.path(), &[(USER, PASSWORD, &["ops"])]);
    let rest = format!(
        "{targets}[[roles]]\nname = \"ops\"\ntargets = [\"*\"]\n\n[console]\nhawtio = \"{hawtio}\"\n",
        targets = targets_toml(&[&agent]),
        hawtio = hawtio(&build),
    );
    let gateway = Gateway::start(&common::basic_auth_config(&users, &rest)).await;
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let mut cmd = Command::new("node");
    cmd.current_dir(hawtio_dir())
        .args(["--test-reporter=spec", script])
        .env("JMXGATE_URL", gateway.url(""))
        .env("HAWTIO_BUNDLE_DIR", &build)
        .env("JMXGATE_TARGET", &agent.name)
        .env("JMXGATE_USER", USER)
        .env("JMXGATE_PASSWORD", PASSWORD)
        .env("JMXGATE_EXPECTED_NAME", agent_name(&agent).await)
        .env("JMXGATE_SCREENSHOT_DIR", &shots)
        .env("CHROMIUM", CHROMIUM)
        .envs(env.iter().map(|(k, v)| (k, v)));
    let (out, err) = common::run_client(cmd, Duration::from_secs(600)).await;
    println!("{out}\n{err}\nscreenshots in {}", shots.display());
}

#[tokio::test(flavor = "multi_thread")]
async fn open_in_hawtio_lands_on_the_target_connected() {
    if !available() {
        return;
    }
    let served = |build: &Path| build.display().to_string();
    hawtio_case("console-hawtio", served, "open-in-hawtio.test.mjs", &[]).await;
}

const LEAD: &str = "lead";
const DEV: &str = "dev";
const TEAM_PASSWORD: &str = "console:pw";

/// The gateway with real agents: the developer reaches the shop read-only
/// and may ask for `ops` (no policy) there; the lead approves. Probed
/// every second, so a stopped agent is soon down.
fn people_config(dir: &Path, agents: &[&Agent]) -> String {
    let users = users_file(
        dir,
        &[
            (LEAD, TEAM_PASSWORD, &["sre-leads"]),
            (DEV, TEAM_PASSWORD, &["developers"]),
        ],
    );
    let read_only = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/read-only.xml");
    let mut targets = String::new();
    for a in agents {
        targets.push_str(&format!(
            "[[targets]]\nname = \"{}\"\nurl = \"{}\"\nlabels = {{ namespace = \"shop\" }}\n",
            a.name,
            a.url()
        ));
    }
    common::basic_auth_config(
        &users,
        &format!(
            "{targets}\n[health]\nprobe_interval = \"1s\"\n\n\
             [access.store]\nsqlite_file = \"{db}\"\n\n\
             [[roles]]\nname = \"sre-leads\"\ntargets = [\"*\"]\npolicy = \"{ro}\"\n\n\
             [[roles]]\nname = \"developers\"\ntargets = [\"namespace=shop\"]\npolicy = \"{ro}\"\n\n\
             [[roles]]\nname = \"ops\"\ntargets = [\"namespace=shop\"]\n\
             requestable_by = [\"developers\"]\napprovers = [\"sre-leads\"]\n",
            db = dir.join("access.db").display(),
            ro = read_only.display(),
        ),
    )
}

/// 10,000 stand-in targets (for what can't run here: 10,000 agents) in 20
/// namespaces, never probed.
fn scale_config(dir: &Path) -> String {
    let users = users_file(dir, &[(LEAD, TEAM_PASSWORD, &["sre-leads"])]);
    let dead = common::dead_port();
    let mut text = String::with_capacity(10_000 * 110);
    for i in 0..10_000 {
        text.push_str(&format!(
            "[[targets]]\nname = \"standin-{i:05}\"\nurl = \"http://127.0.0.1:{dead}/jolokia\"\n\
             labels = {{ namespace = \"ns-{:02}\" }}\n",
            i % 20
        ));
    }
    common::basic_auth_config(
        &users,
        &format!(
            "{text}\n[health]\nprobe_interval = \"0s\"\n\n\
             [[roles]]\nname = \"sre-leads\"\ntargets = [\"*\"]\n"
        ),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn people_use_the_console_in_a_browser() {
    if !available() {
        return;
    }
    let (shop, going) = tokio::join!(
        tokio::task::spawn_blocking(|| Agent::start("console-shop")),
        tokio::task::spawn_blocking(|| Agent::start("console-going")),
    );
    let (shop, going) = (shop.unwrap(), going.unwrap());
    let going_name = going.name.clone();
    let dir = tempfile::tempdir().unwrap();
    let people = dir.path().join("people");
    let scale = dir.path().join("scale");
    std::fs::create_dir_all(&people).unwrap();
    std::fs::create_dir_all(&scale).unwrap();
    let gw = Gateway::start(&people_config(&people, &[&shop, &going])).await;
    gw.access_store_opened().await;
    let big = Gateway::start(&scale_config(&scale)).await;
    let dev_gc = json!({"type":"exec","mbean":"java.lang:type=Memory","operation":"gc","target":{"url":shop.name}});
    let gc_status = || async {
        let r: serde_json::Value = gw
            .http
            .post(gw.url("/jolokia"))
            .basic_auth(DEV, Some(TEAM_PASSWORD))
            .json(&dev_gc)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        r["status"].as_u64().unwrap()
    };
    assert_eq!(gc_status().await, 403, "read-only before the approval");

    // The browser asks for the agent to go away by making this file; then
    // three reads of it fail, which opens its breaker.
    let signal = dir.path().join("stop-the-agent");
    let stopper = {
        let signal = signal.clone();
        let (http, url) = (gw.http.clone(), gw.url("/jolokia"));
        let read = json!({"type":"read","mbean":"java.lang:type=Runtime","attribute":"Name",
                          "target":{"url": going_name.clone()}});
        tokio::spawn(async move {
            // As long as the browser may run (run_client's limit below).
            common::eventually(
                "the browser asks for the agent to go",
                Duration::from_secs(900),
                || async {
                    signal
                        .exists()
                        .then_some(())
                        .ok_or_else(|| format!("no {}", signal.display()))
                },
            )
            .await;
            drop(going);
            for _ in 0..3 {
                let _ = http
                    .post(&url)
                    .basic_auth(LEAD, Some(TEAM_PASSWORD))
                    .json(&read)
                    .send()
                    .await;
            }
        })
    };
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let mut cmd = Command::new("node");
    cmd.current_dir(hawtio_dir())
        .args(["--test-reporter=spec", "console.test.mjs"])
        .env("JMXGATE_URL", gw.url(""))
        .env("JMXGATE_SCALE_URL", big.url(""))
        .env("JMXGATE_LEAD", LEAD)
        .env("JMXGATE_DEV", DEV)
        .env("JMXGATE_PASSWORD", TEAM_PASSWORD)
        .env("JMXGATE_TARGET", &shop.name)
        .env("JMXGATE_DOWN_TARGET", &going_name)
        .env("JMXGATE_STOP_SIGNAL", &signal)
        .env("JMXGATE_SCREENSHOT_DIR", &shots)
        .env("CHROMIUM", CHROMIUM);
    let (out, err) = common::run_client(cmd, Duration::from_secs(900)).await;
    println!("{out}\n{err}\nscreenshots in {}", shots.display());
    stopper.abort();

    // What the browser saw, on the agent: the developer runs gc now, and
    // the other site's post asked for nothing.
    assert_eq!(
        gc_status().await,
        200,
        "the approval lets the developer run gc"
    );
    let requests: serde_json::Value = gw
        .http
        .get(gw.url("/jmxgate/access/requests"))
        .basic_auth(DEV, Some(TEAM_PASSWORD))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let listed = requests["requests"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{requests}");
    assert_eq!(listed[0]["state"], "approved");
}

#[tokio::test(flavor = "multi_thread")]
async fn open_in_a_hawtio_elsewhere_after_importing_the_viewers_connections() {
    if !available() {
        return;
    }
    let port = common::free_port();
    let elsewhere = |_: &Path| format!("http://127.0.0.1:{port}/hawtio");
    let env = [("JMXGATE_HAWTIO_PORT", port.to_string())];
    hawtio_case(
        "console-elsewhere",
        elsewhere,
        "hawtio-elsewhere.test.mjs",
        &env,
    )
    .await;
}
