//! The Hawtio console (@hawtio/react 2.3.0 from npm, bundled with esbuild)
//! in Debian's headless Chromium, through the gateway: Hawtio's Connect
//! plugin logs in to one target with its own form (credentials as
//! `X-Jolokia-Authorization`), shows the JMX tree as the caller's policy
//! filters it, an attribute's value, runs an allowed operation, and locks
//! the denied ones from the gateway's answers to Hawtio's RBAC queries.
//! The browser side lives in tests/clients/hawtio/ (see its README.md);
//! scripts/install-deps.sh installs it (npm ci).
//!
//! Screenshots and the log of what Hawtio sent go to
//! `target/tmp/hawtio-screenshots/` (`CARGO_TARGET_TMPDIR`).
//! `JMXGATE_EXPECT_RBAC=0` leaves out the RBAC expectations (the denied
//! operations locked in the UI, the gateway's ACL MBean found);
//! `JMXGATE_EXPECT_LIST_RBAC=1` adds one: `listCache=true` lists (which
//! Hawtio sends to protocol 8 agents, `JMXGATE_TEST_AGENT=2.6.0`) carry the
//! `canInvoke` / `opByString` decorations Hawtio's RBAC tree processor reads.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{targets_toml, users_file, Agent, Gateway};
use serde_json::{json, Value};

const USER: &str = "hawtio-ops";
const PASSWORD: &str = "console:secret";
const OPS: &str = "jmxgate.test:type=Operations";

/// Counter hidden, two operations denied, and no attribute writable but
/// `Flag`: `write` is not among `<commands>`, so only `<allow>` admits a
/// write (as in Jolokia's PolicyRestrictor).
const POLICY: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<restrict>
  <commands>
    <command>read</command>
    <command>exec</command>
    <command>list</command>
    <command>search</command>
    <command>version</command>
  </commands>
  <filter><mbean>jmxgate.test:type=Counter</mbean></filter>
  <allow>
    <mbean>
      <name>jmxgate.test:type=Types</name>
      <attribute>Flag</attribute>
    </mbean>
  </allow>
  <deny>
    <mbean>
      <name>jmxgate.test:type=Operations</name>
      <operation>reset</operation>
      <operation>fail</operation>
    </mbean>
  </deny>
</restrict>
"#;

use common::{hawtio_available as available, hawtio_dir, CHROMIUM};

/// Runs the suite; see `common::run_client`. Its output is shown with
/// `--no-capture`.
async fn run_suite(cmd: Command, limit: Duration) {
    let (out, err) = common::run_client(cmd, limit).await;
    println!("{out}\n{err}");
}

/// `jmxgate audit query DIR --principal USER --type exec --format json`.
fn audited_execs(dir: &Path) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_jmxgate"))
        .args(["audit", "query"])
        .arg(dir)
        .args(["--principal", USER, "--type", "exec", "--format", "json"])
        .output()
        .expect("run jmxgate audit query");
    assert!(
        out.status.success(),
        "jmxgate audit query failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn hawtio_console_through_the_gateway() {
    if !available() {
        return;
    }
    let agent = tokio::task::spawn_blocking(|| Agent::start("hawtio"))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path(), &[(USER, PASSWORD, &["ops"])]);
    let policy = dir.path().join("policy.xml");
    std::fs::write(&policy, POLICY).unwrap();
    let audit = dir.path().join("audit");
    let rest = format!(
        "{targets}[[roles]]\nname = \"ops\"\ntargets = [\"{name}\"]\npolicy = \"{policy}\"\n\n\
         [audit]\ndir = \"{audit}\"\n",
        targets = targets_toml(&[&agent]),
        name = agent.name,
        policy = policy.display(),
        audit = audit.display(),
    );
    let gateway = Gateway::start(&common::basic_auth_config(&users, &rest)).await;

    // What the console must show, as the agent itself says it.
    let name = common::direct(
        &agent,
        &json!({"type":"read","mbean":"jmxgate.test:type=Types","attribute":"Name"}),
    )
    .await;
    let expected_name = name["value"]
        .as_str()
        .unwrap_or_else(|| panic!("the agent's Name: {name}"))
        .to_string();

    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hawtio-screenshots");
    let _ = std::fs::remove_dir_all(&shots);
    std::fs::create_dir_all(&shots).unwrap();
    let expect_rbac = std::env::var("JMXGATE_EXPECT_RBAC").unwrap_or_else(|_| "1".into());
    let expect_list_rbac = std::env::var("JMXGATE_EXPECT_LIST_RBAC").unwrap_or_else(|_| "0".into());

    let mut cmd = Command::new("node");
    cmd.current_dir(hawtio_dir())
        .args(["--test-reporter=spec", "hawtio.test.mjs"])
        .env("JMXGATE_URL", gateway.url(""))
        .env("JMXGATE_TARGET", &agent.name)
        .env("JMXGATE_USER", USER)
        .env("JMXGATE_PASSWORD", PASSWORD)
        .env("JMXGATE_EXPECTED_NAME", &expected_name)
        .env("JMXGATE_SCREENSHOT_DIR", &shots)
        .env("JMXGATE_EXPECT_RBAC", &expect_rbac)
        .env("JMXGATE_EXPECT_LIST_RBAC", &expect_list_rbac)
        .env("CHROMIUM", CHROMIUM)
        .env_remove("HAWTIO_BUNDLE_DIR");
    run_suite(cmd, Duration::from_secs(600)).await;
    println!("screenshots and proxy-log.json in {}", shots.display());

    // The operations the console ran are in the audit log, as the user's.
    let execs = audited_execs(&audit);
    let ran = |op: &str| {
        execs.iter().find(|r| {
            r["event"] == "item"
                && r["mbean"] == OPS
                && r["operation"].as_str().is_some_and(|o| o.starts_with(op))
        })
    };
    for op in ["noArgs", "echo"] {
        let r = ran(op).unwrap_or_else(|| panic!("no audit record of {op}: {execs:#?}"));
        assert_eq!(r["principal"], USER, "{r}");
        assert_eq!(r["auth"], "basic", "{r}");
        assert_eq!(r["target"], agent.name.as_str(), "{r}");
        assert_eq!(r["roles"], json!(["ops"]), "{r}");
        assert_eq!(r["decision"], "allowed", "{r}");
        assert_eq!(r["status"], 200, "{r}");
    }
    // The console never ran a denied operation (it locked them).
    for op in ["reset", "fail"] {
        assert!(ran(op).is_none(), "{op} was run: {execs:#?}");
    }
    // Hawtio's canInvoke queries, when it sent any (with 8.x agents a
    // decorated listCache list may spare them), are audited as the user's.
    let sent = std::fs::read_to_string(shots.join("proxy-log.json")).unwrap();
    if sent.contains("canInvoke(java.") {
        assert!(
            execs.iter().any(|r| r["mbean"]
                .as_str()
                .is_some_and(|m| m.starts_with("hawtio:type=security,area=jmx"))),
            "no audit record of Hawtio's canInvoke: {execs:#?}"
        );
    }
}
