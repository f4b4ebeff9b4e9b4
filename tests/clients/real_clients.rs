//! Real, unmodified Jolokia clients against the gateway in front of real
//! Jolokia 1.7.1 agents: jolokia.js and @jolokia.js/simple in Node and in
//! headless Chromium (from another origin, through CORS), and the Python
//! client `jolokia` from PyPI. The clients' own code lives in
//! tests/clients/; scripts/install-deps.sh installs them (npm ci, a venv).
//! Each test starts its own agents and gateway, runs one client suite as a
//! child process, and fails with that suite's output if it does not pass.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{Agent, Gateway};

const USER: &str = "alice";
const PASSWORD: &str = "wonder:land";
const CHROMIUM: &str = "/usr/bin/chromium";

/// The role's policy: browsers from http://localhost:* are admitted
/// (<cors>), and one operation is denied, for a gateway-made 403.
const POLICY: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<restrict>
  <cors>
    <allow-origin>http://localhost:*</allow-origin>
  </cors>
  <deny>
    <mbean>
      <name>jmxgate.test:type=Operations</name>
      <operation>repeat</operation>
    </mbean>
  </deny>
</restrict>
"#;

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

/// Two agents of their own and a gateway with Basic auth and a policy.
struct Setup {
    a: Agent,
    b: Agent,
    gateway: Gateway,
    _dir: tempfile::TempDir,
}

impl Setup {
    async fn start(prefix: &str) -> Setup {
        let names = [format!("{prefix}-a"), format!("{prefix}-b")];
        let handles: Vec<_> = names
            .iter()
            .cloned()
            .map(|n| std::thread::spawn(move || Agent::start(&n)))
            .collect();
        let mut agents = handles.into_iter().map(|h| h.join().unwrap());
        let (a, b) = (agents.next().unwrap(), agents.next().unwrap());

        let dir = tempfile::tempdir().unwrap();
        let hash = jmxgate::pipeline::authenticate::basic::hash_password(PASSWORD).unwrap();
        let users = dir.path().join("users.toml");
        std::fs::write(
            &users,
            format!(
                "[[users]]\nname = \"{USER}\"\npassword_hash = \"{hash}\"\nroles = [\"client\"]\n"
            ),
        )
        .unwrap();
        let policy = dir.path().join("policy.xml");
        std::fs::write(&policy, POLICY).unwrap();
        // The suites try wrong passwords on purpose: no throttling here.
        let config = format!(
            "auth = [\"basic\"]\n\n\
             [[targets]]\nname = \"{an}\"\nurl = \"{au}\"\n\n\
             [[targets]]\nname = \"{bn}\"\nurl = \"{bu}\"\n\n\
             [[targets]]\nname = \"{an}-slow\"\nurl = \"{au}\"\nrequest_timeout = \"1s\"\n\n\
             [auth.basic]\nusers_file = \"{users}\"\nmax_failures = 1000\n\n\
             [[roles]]\nname = \"client\"\ntargets = [\"*\"]\npolicy = \"{policy}\"\n",
            an = a.name,
            au = a.url(),
            bn = b.name,
            bu = b.url(),
            users = users.display(),
            policy = policy.display(),
        );
        let gateway = Gateway::start(&config).await;
        Setup {
            a,
            b,
            gateway,
            _dir: dir,
        }
    }

    /// What every suite reads from its environment (tests/clients/js/common.mjs).
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("JMXGATE_URL", self.gateway.url("")),
            ("JMXGATE_USER", USER.to_string()),
            ("JMXGATE_PASSWORD", PASSWORD.to_string()),
            ("JMXGATE_TARGET_A", self.a.name.clone()),
            ("JMXGATE_TARGET_B", self.b.name.clone()),
            ("JMXGATE_TARGET_SLOW", format!("{}-slow", self.a.name)),
            ("JMXGATE_AGENT_A_URL", self.a.url()),
            (
                "JMXGATE_PROTOCOL",
                jmxgate::protocol::PROTOCOL_VERSION.to_string(),
            ),
        ]
    }
}

/// Runs a client suite with its environment; see `common::run_client`.
async fn run_suite(mut cmd: Command, env: Vec<(&'static str, String)>, limit: Duration) {
    cmd.envs(env);
    common::run_client(cmd, limit).await;
}

fn require(path: &Path, what: &str) {
    assert!(
        path.exists(),
        "{} is missing ({what}); run scripts/install-deps.sh",
        path.display()
    );
}

fn node_suite(script: &str) -> Command {
    let dir = clients_dir().join("js");
    require(
        &dir.join("node_modules/jolokia.js"),
        "npm ci in tests/clients/js",
    );
    let mut cmd = Command::new("node");
    cmd.current_dir(dir).args(["--test-reporter=spec", script]);
    cmd
}

#[tokio::test(flavor = "multi_thread")]
async fn jolokia_js_in_node() {
    let setup = Setup::start("js").await;
    run_suite(
        node_suite("node.test.mjs"),
        setup.env(),
        Duration::from_secs(180),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn jolokia_js_in_chromium_across_origins() {
    require(Path::new(CHROMIUM), "Debian package chromium");
    let setup = Setup::start("web").await;
    let mut env = setup.env();
    env.push(("CHROMIUM", CHROMIUM.to_string()));
    run_suite(
        node_suite("browser.test.mjs"),
        env,
        Duration::from_secs(180),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn python_jolokia_client() {
    let dir = clients_dir().join("python");
    let python = dir.join(".venv/bin/python");
    require(&python, "the venv with jolokia==0.4.0");
    let setup = Setup::start("py").await;
    let mut cmd = Command::new(python);
    cmd.current_dir(dir)
        .args(["-m", "unittest", "-v", "test_jolokia_client"]);
    run_suite(cmd, setup.env(), Duration::from_secs(120)).await;
}
