//! The Java client (`org.jolokia.client`, jolokia-client-java 2.6.0) and the
//! JSR-160 connector (jolokia-client-jmx-adapter 2.6.0) against the gateway
//! in front of a real agent of the generation under test
//! (`JMXGATE_TEST_AGENT`). The clients' own code is in tests/clients/java/
//! and runs in Java's single-file source mode; each program is given the
//! gateway's URLs and the agent's own URL, reads what it expects from the
//! agent directly, prints one line per check and exits 1 if any failed.
//!
//! The jars come from `JMXGATE_JOLOKIA2_DIR`, else `../shared/jolokia`
//! beside the repository; without them the tests say so and pass, except in
//! CI (`CI` set), where they fail.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{Agent, Gateway, Generation, TestPki};

const USER: &str = "jill";
const PASSWORD: &str = "java:pass";
/// The CN of the client certificate the HTTPS listener maps to the role.
const CLIENT_CN: &str = "java-client";

/// The role's policy: one operation and one attribute denied (403 with the
/// gateway's wording), one MBean hidden from list and search.
const POLICY: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<restrict>
  <deny>
    <mbean>
      <name>jmxgate.test:type=Operations</name>
      <operation>reset</operation>
    </mbean>
    <mbean>
      <name>jmxgate.test:type=Types</name>
      <attribute>Double</attribute>
    </mbean>
  </deny>
  <filter>
    <mbean>jmxgate.test:type=Counter</mbean>
  </filter>
</restrict>
"#;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The directory with the client jars, or `None` (after saying why) when
/// they are missing outside CI.
fn client_jars() -> Option<(PathBuf, PathBuf)> {
    let dir = std::env::var_os("JMXGATE_JOLOKIA2_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("../shared/jolokia"));
    let client = dir.join("jolokia-client-java-2.6.0.jar");
    let adapter = dir.join("jolokia-client-jmx-adapter-2.6.0.jar");
    if client.is_file() && adapter.is_file() {
        return Some((client, adapter));
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "no Jolokia Java client jars in {} (CI must have ../shared/jolokia)",
        dir.display()
    );
    eprintln!(
        "SKIPPED: no jolokia-client-java-2.6.0.jar and jolokia-client-jmx-adapter-2.6.0.jar in {}; \
         set JMXGATE_JOLOKIA2_DIR to a directory holding them (Maven Central: \
         org.jolokia:jolokia-client-java:2.6.0, org.jolokia:jolokia-client-jmx-adapter:2.6.0:standalone)",
        dir.display()
    );
    None
}

/// One agent of the generation under test, and two gateways in front of
/// it under the same role and policy: HTTP with Basic auth, and HTTPS
/// whose callers are identified by client certificates (mTLS).
struct Setup {
    agent: Agent,
    http: Gateway,
    https: Gateway,
    pki: TestPki,
    client: (PathBuf, PathBuf),
    _dir: tempfile::TempDir,
}

impl Setup {
    async fn start(name: &str) -> Setup {
        let name = name.to_string();
        let agent = tokio::task::spawn_blocking(move || Agent::start(&name))
            .await
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let policy = dir.path().join("policy.xml");
        std::fs::write(&policy, POLICY).unwrap();
        let users = common::users_file(dir.path(), &[(USER, PASSWORD, &["java"])]);
        let role = format!(
            "[[roles]]\nname = \"java\"\ntargets = [\"*\"]\npolicy = \"{}\"\n",
            policy.display()
        );
        let targets = common::targets_toml(&[&agent]);
        // The programs try a wrong password on purpose: no throttling here.
        let http = Gateway::start(&format!(
            "auth = [\"basic\"]\n{targets}{role}\n[auth.basic]\nusers_file = \"{}\"\nmax_failures = 1000\n",
            users.display()
        ))
        .await;

        let pki = TestPki::new("java");
        let (cert, key) = pki.server_cert("gateway");
        let tls = format!(
            "cert_file = \"{}\"\nkey_file = \"{}\"\nclient_ca_file = \"{}\"\n",
            cert.display(),
            key.display(),
            pki.ca_file().display()
        );
        let https = Gateway::start_tls(
            &tls,
            &format!(
                "{targets}{role}\n[auth.mtls]\nprincipal_from = \"cn\"\n\
                 [auth.mtls.roles]\n\"{CLIENT_CN}\" = [\"java\"]\n"
            ),
        )
        .await;
        let client = pki.client_cert(CLIENT_CN, false);
        Setup {
            agent,
            http,
            https,
            pki,
            client,
            _dir: dir,
        }
    }

    /// What both programs read from their environment.
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("JMXGATE_URL", self.http.url("")),
            (
                "JMXGATE_HTTPS_URL",
                format!("https://127.0.0.1:{}", self.https.addr.port()),
            ),
            ("JMXGATE_USER", USER.to_string()),
            ("JMXGATE_PASSWORD", PASSWORD.to_string()),
            ("JMXGATE_TARGET", self.agent.name.clone()),
            ("JMXGATE_AGENT_URL", self.agent.url()),
            (
                "JMXGATE_CA_FILE",
                self.pki.ca_file().to_string_lossy().into_owned(),
            ),
            (
                "JMXGATE_CLIENT_CERT",
                self.client.0.to_string_lossy().into_owned(),
            ),
            (
                "JMXGATE_CLIENT_KEY",
                self.client.1.to_string_lossy().into_owned(),
            ),
        ]
    }
}

/// Runs one program to its end (or kills it after `limit`) without
/// blocking the runtime the gateways serve on; panics with its output
/// unless it exits 0. Returns its standard output.
async fn run_program(jar: &Path, program: &str, env: Vec<(&'static str, String)>) -> String {
    let limit = Duration::from_secs(240);
    let mut cmd = Command::new("java");
    cmd.arg("-cp")
        .arg(jar)
        .arg(repo().join("tests/clients/java").join(program));
    cmd.envs(env);
    let (out, err) = common::run_client(cmd, limit).await;
    // Shown with --no-capture, and with the test's output on failure.
    println!("{out}");
    assert!(
        out.contains("SUMMARY ") && !out.contains("\nFAIL "),
        "{program} did not finish its checks:\n{out}\n--- stderr\n{err}"
    );
    out
}

/// Asserts that a program ran each of `checks` and passed it.
fn assert_ran(out: &str, checks: &[&str]) {
    for check in checks {
        assert!(
            out.lines().any(|l| l.starts_with(&format!("ok {check}"))),
            "check {check:?} did not pass:\n{out}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn java_client_through_gateway() {
    let Some((client_jar, _)) = client_jars() else {
        return;
    };
    if !Generation::under_test().available() {
        return;
    }
    let setup = Setup::start("java-client").await;
    let out = run_program(&client_jar, "ClientCheck.java", setup.env()).await;
    for mode in ["virtual", "proxy", "https"] {
        assert_ran(
            &out,
            &[
                &format!("{mode} read one attribute"),
                &format!("{mode} read several attributes"),
                &format!("{mode} read MBean pattern"),
                &format!("{mode} read inner path"),
                &format!("{mode} write"),
                &format!("{mode} write structured value"),
                &format!("{mode} exec without signature"),
                &format!("{mode} exec with signature"),
                &format!("{mode} exec structured arguments"),
                &format!("{mode} search"),
                &format!("{mode} list path"),
                &format!("{mode} list depth"),
                &format!("{mode} version"),
                &format!("{mode} bulk"),
                &format!("{mode} missing MBean"),
                &format!("{mode} denied operation"),
                &format!("{mode} denied attribute"),
            ],
        );
    }
    assert_ran(
        &out,
        &[
            "virtual wrong password",
            "proxy wrong password",
            "https without client certificate",
        ],
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn jsr160_connector_through_gateway() {
    let Some((_, adapter_jar)) = client_jars() else {
        return;
    };
    if !Generation::under_test().available() {
        return;
    }
    let setup = Setup::start("java-jmx").await;
    let out = run_program(&adapter_jar, "ConnectorCheck.java", setup.env()).await;
    assert_ran(
        &out,
        &[
            "jolokia getMBeanCount",
            "jolokia queryNames",
            "jolokia getAttribute",
            "jolokia getAttributes",
            "jolokia setAttribute",
            "jolokia invoke",
            "jolokia getMBeanInfo",
            "jolokia isRegistered",
            "jolokia MXBean proxy",
            "jolokia denied operation",
            "jolokia denied attribute",
            "jolokia hidden MBean",
            "jolokia gateway ACL MBean",
            "jolokia wrong password",
            "jolokia+http getAttribute",
            "jolokia+https getAttribute",
        ],
    );
}
