//! The console in a real headless Chromium (Debian's, driven by
//! playwright-core from tests/clients/hawtio/): "Open in Hawtio" on a
//! target's page opens the Hawtio build the gateway serves
//! (`[console] hawtio`), connected to that target through the gateway
//! with the browser's own Basic login, showing the agent's values.
//! Screenshots go to `target/tmp/console-screenshots/`.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{hawtio_available as available, hawtio_dir, CHROMIUM};
use common::{targets_toml, users_file, Agent, Gateway};
use serde_json::json;

const USER: &str = "console-ops";
const PASSWORD: &str = "console:secret";

#[tokio::test(flavor = "multi_thread")]
async fn open_in_hawtio_lands_on_the_target_connected() {
    if !available() {
        return;
    }
    let agent = tokio::task::spawn_blocking(|| Agent::start("console-hawtio"))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Hawtio's static build, as an operator would unpack one.
    let build = dir.path().join("hawtio-build");
    let mut cmd = Command::new("node");
    cmd.current_dir(hawtio_dir()).arg("build.mjs").arg(&build);
    common::run_client(cmd, Duration::from_secs(300)).await;
    let users = users_file(dir.path(), &[(USER, PASSWORD, &["ops"])]);
    let rest = format!(
        "{targets}[[roles]]\nname = \"ops\"\ntargets = [\"*\"]\n\n[console]\nhawtio = \"{build}\"\n",
        targets = targets_toml(&[&agent]),
        build = build.display(),
    );
    let gateway = Gateway::start(&common::basic_auth_config(&users, &rest)).await;
    let name = common::direct(
        &agent,
        &json!({"type":"read","mbean":"jmxgate.test:type=Types","attribute":"Name"}),
    )
    .await;
    let expected_name = name["value"].as_str().unwrap().to_string();

    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
    let _ = std::fs::remove_dir_all(&shots);
    std::fs::create_dir_all(&shots).unwrap();
    let mut cmd = Command::new("node");
    cmd.current_dir(hawtio_dir())
        .args(["--test-reporter=spec", "open-in-hawtio.test.mjs"])
        .env("JMXGATE_URL", gateway.url(""))
        .env("JMXGATE_TARGET", &agent.name)
        .env("JMXGATE_USER", USER)
        .env("JMXGATE_PASSWORD", PASSWORD)
        .env("JMXGATE_EXPECTED_NAME", &expected_name)
        .env("JMXGATE_SCREENSHOT_DIR", &shots)
        .env("CHROMIUM", CHROMIUM);
    let (out, err) = common::run_client(cmd, Duration::from_secs(600)).await;
    println!("{out}\n{err}\nscreenshots in {}", shots.display());
}
