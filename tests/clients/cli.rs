//! The `jmxgate` binary: `check-config` explains problems, `serve` runs the
//! gateway and stops cleanly on SIGTERM.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{shared_agents, targets_toml};

const BIN: &str = env!("CARGO_BIN_EXE_jmxgate");

fn write_config(dir: &tempfile::TempDir, text: &str) -> std::path::PathBuf {
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn check_config_accepts_the_documented_example() {
    let out = Command::new(BIN)
        .args(["check-config", "config/gateway.toml"])
        .env("BILLING_JOLOKIA_PASSWORD", "x")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("OK (3 targets"), "{stdout}");
}

#[test]
fn check_config_checks_kubernetes_discovery() {
    let dir = tempfile::tempdir().unwrap();
    // A kubeconfig next to the config file, named relative to it.
    std::fs::write(
        dir.path().join("kubeconfig"),
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:6443\"}}]\n\
         users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
    )
    .unwrap();
    let good = write_config(
        &dir,
        "[server]\nlisten = \"127.0.0.1:1\"\n[[discovery.kubernetes]]\nkubeconfig = \"kubeconfig\"\n\
         namespaces = [\"shop\"]\npod_selector = \"app in (orders,billing)\"\n",
    );
    let out = Command::new(BIN)
        .arg("check-config")
        .arg(&good)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let bad = write_config(
        &dir,
        "[server]\nlisten = \"127.0.0.1:1\"\n[[discovery.kubernetes]]\nkubeconfig = \"missing-kubeconfig\"\n\
         namespace_selector = \"tenant in (shop\"\npod_selector = \"app=orders\"\n",
    );
    let out = Command::new(BIN)
        .arg("check-config")
        .arg(&bad)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for want in [
        "discovery.kubernetes[0].kubeconfig",
        &dir.path().join("missing-kubeconfig").display().to_string(),
        "discovery.kubernetes[0].namespace_selector",
    ] {
        assert!(stderr.contains(want), "{want:?} not in: {stderr}");
    }
    assert!(!stderr.contains("pod_selector"), "{stderr}");

    // A bad network is named by its key; the entry's own password is
    // warned of (it goes to every pod) without failing, and never shown.
    let networks = write_config(
        &dir,
        "[server]\nlisten = \"127.0.0.1:1\"\n[[discovery.kubernetes]]\nkubeconfig = \"kubeconfig\"\n\
         namespaces = [\"shop\"]\nallowed_networks = [\"10.244.0.0/16\", \"10.0.0.0/33\"]\n",
    );
    let out = Command::new(BIN)
        .arg("check-config")
        .arg(&networks)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "discovery.kubernetes[0].allowed_networks[1]: \"10.0.0.0/33\" is not a network"
        ),
        "{stderr}"
    );
    let shared = write_config(
        &dir,
        "[server]\nlisten = \"127.0.0.1:1\"\n[[discovery.kubernetes]]\nkubeconfig = \"kubeconfig\"\n\
         namespaces = [\"shop\"]\nuser = \"monitor\"\npassword = \"hunter2\"\n",
    );
    let out = Command::new(BIN)
        .arg("check-config")
        .arg(&shared)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning: ") && stderr.contains("discovery.kubernetes[0].user: "),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");
}

#[test]
fn check_config_names_file_key_and_problem() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("[server]\nlisten = \"nope\"\n", "listen"),
        ("[server]\nlisten = \"127.0.0.1:1\"\nlisten_port = 2\n", "unknown field `listen_port`"),
        (
            "[server]\nlisten = \"127.0.0.1:1\"\n[[targets]]\nname = \"a\"\nurl = \"service:jmx:rmi:///jndi/rmi://h:1/x\"\n",
            "targets[0].url",
        ),
        (
            "[server]\nlisten = \"127.0.0.1:1\"\ndefault_target = \"ghost\"\n",
            "server.default_target: no target is named \"ghost\"",
        ),
        (
            "[server]\nlisten = \"127.0.0.1:1\"\n[[targets]]\nname = \"a\"\nurl = \"http://h/j\"\nuser = \"u\"\npassword_file = \"missing.txt\"\n",
            "password_file",
        ),
        (
            "[server]\nlisten = \"127.0.0.1:1\"\n[[targets]]\nname = \"a\"\nurl = \"http://h/j\"\nrequest_timeout = \"soon\"\n",
            "request_timeout",
        ),
    ];
    // Refused with status 2, naming the file and the problem.
    let refused = |text: &str, wants: &[&str]| {
        let path = write_config(&dir, text);
        let out = Command::new(BIN)
            .arg("check-config")
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}\n{stderr}");
        assert!(
            stderr.contains(&path.display().to_string()),
            "file not named: {stderr}"
        );
        for want in wants {
            assert!(stderr.contains(want), "{want:?} not in: {stderr}");
        }
    };
    for (text, want) in cases {
        refused(text, &[want]);
    }
    // An audit sink's TLS files are read too, not only at start.
    refused(
        &format!(
            "[server]\nlisten = \"127.0.0.1:1\"\n[audit]\ndir = \"{}\"\n\
             [[audit.sinks]]\nname = \"siem\"\naddress = \"127.0.0.1:6514\"\nca_file = \"missing-ca.pem\"\n",
            dir.path().join("audit").display()
        ),
        &["audit.sinks \"siem\"", "missing-ca.pem"],
    );
    let out = Command::new(BIN)
        .args(["check-config", "/no/such/file.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read the file"));
}

#[test]
fn serve_answers_and_stops_on_sigterm() {
    let [a, ..] = shared_agents();
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(
        &dir,
        &format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n{}",
            targets_toml(&[a])
        ),
    );
    let mut child = Command::new(BIN)
        .arg("serve")
        .arg("--config")
        .arg(&path)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = common::listening_address(&mut lines);
    let body = std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            common::http_client()
                .get(format!(
                    "http://{addr}/jolokia/targets/alpha/read/jmxgate.test:type=Types/Name"
                ))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        })
    })
    .join()
    .unwrap();
    assert!(body.contains("\"value\":\"alpha\""), "{body}");
    // Drain stderr so the child never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    sigterm(child.id());
    let status =
        common::eventually_blocking("serve stops on SIGTERM", Duration::from_secs(30), || {
            child
                .try_wait()
                .unwrap()
                .ok_or_else(|| "still running".to_string())
        });
    assert!(status.success(), "exit status {status}");
}

fn sigterm(pid: u32) {
    let status = Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

fn policy_check(policy: &std::path::Path, request: &str, extra: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(BIN)
        .args(["policy", "check", "--policy"])
        .arg(policy)
        .args(["--request", request])
        .args(extra)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[test]
fn policy_check_prints_the_decision_and_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("p.xml");
    std::fs::write(
        &policy,
        r#"<restrict>
             <remote><host>10.0.0.0/8</host></remote>
             <http><method>post</method></http>
             <cors><allow-origin>http://ok.example</allow-origin><strict-checking/></cors>
             <deny><mbean><name>java.lang:type=Memory</name><operation>gc</operation></mbean></deny>
           </restrict>"#,
    )
    .unwrap();
    let gc = r#"{"type":"exec","mbean":"java.lang:type=Memory","operation":"gc()"}"#;
    let read = r#"{"type":"read","mbean":"java.lang:type=Memory","attribute":"HeapMemoryUsage"}"#;
    let inside = ["--remote", "10.1.1.1", "--origin", "http://ok.example"];
    let (code, out) = policy_check(&policy, gc, &inside);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.starts_with("deny\n")
            && out.contains("<deny> <mbean> java.lang:type=Memory <operation> gc"),
        "{out}"
    );
    let (code, out) = policy_check(&policy, read, &inside);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("allow\n"), "{out}");
    let (code, out) = policy_check(
        &policy,
        read,
        &["--remote", "192.0.2.1", "--origin", "http://ok.example"],
    );
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("No access from client [192.0.2.1] allowed"),
        "{out}"
    );
    let (code, out) = policy_check(
        &policy,
        read,
        &[
            "--remote",
            "10.1.1.1",
            "--origin",
            "http://ok.example",
            "--method",
            "GET",
        ],
    );
    assert_eq!(code, Some(1), "{out}");
    let (code, out) = policy_check(
        &policy,
        read,
        &["--remote", "10.1.1.1", "--origin", "http://evil.example"],
    );
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("Origin http://evil.example is not allowed"),
        "{out}"
    );

    // Bad request, bad policy: exit 2 with the cause.
    let (code, out) = policy_check(&policy, "{not json", &inside);
    assert_eq!(code, Some(2), "{out}");
    let (code, out) = policy_check(&policy, r#"{"type":"read","mbean":"java.lang"}"#, &inside);
    assert_eq!(code, Some(2), "{out}");
    let broken = dir.path().join("broken.xml");
    std::fs::write(
        &broken,
        "<restrict><commands><command>fly</command></commands></restrict>",
    )
    .unwrap();
    let (code, out) = policy_check(&broken, read, &inside);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("broken.xml") && out.contains("fly"), "{out}");
}

#[test]
fn an_invalid_policy_fails_start_up_naming_file_and_cause() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bad.xml"),
        "<restrict><allow><mbean><attribute>x</attribute></mbean></allow></restrict>",
    )
    .unwrap();
    let path = write_config(
        &dir,
        "[server]\nlisten = \"127.0.0.1:0\"\n[access]\nanonymous_role = \"r\"\n[[roles]]\nname = \"r\"\ntargets = [\"*\"]\npolicy = \"bad.xml\"\n",
    );
    for args in [
        vec!["check-config".to_string()],
        vec!["serve".into(), "--config".into()],
    ] {
        let out = Command::new(BIN).args(&args).arg(&path).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("bad.xml") && stderr.contains("name"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn hash_password_makes_hashes_the_users_file_accepts() {
    use std::io::Write;
    for (flag, prefix) in [(None, "$argon2id$"), (Some("--bcrypt"), "$2b$")] {
        let mut child = Command::new(BIN)
            .arg("hash-password")
            .args(flag)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"correct horse\n")
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let hash = String::from_utf8(out.stdout).unwrap();
        assert!(hash.starts_with(prefix), "{hash}");
        assert!(!hash.contains("correct horse"));
    }
    let out = Command::new(BIN)
        .arg("hash-password")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "an empty password is refused");
}

/// check-config opens every file `serve` would (the HTTPS listener's
/// certificate and key, a role's policy, the users file), and names every
/// problem in one run, in the one layout of the configuration's own
/// problems: a missing certificate no longer passes check-config to stop
/// `serve`.
#[test]
fn check_config_names_every_missing_file_in_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        "[server]\nlisten = \"127.0.0.1:1\"\n\n[server.tls]\nlisten = \"127.0.0.1:2\"\n\
         cert_file = \"tls/missing.pem\"\nkey_file = \"tls/missing.key\"\n\n\
         [auth.basic]\nusers_file = \"missing-users.toml\"\n\n\
         [[roles]]\nname = \"ops\"\ntargets = [\"*\"]\npolicy = \"policies/missing.xml\"\n",
    );
    let check = || {
        let out = Command::new(BIN)
            .arg("check-config")
            .arg(&config)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, stderr) = check();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "jmxgate: {}: 3 problems in the configuration\n  - ",
            config.display()
        )),
        "{stderr}"
    );
    for want in [
        "server.tls",
        "tls/missing.pem",
        "missing-users.toml",
        "policies/missing.xml",
    ] {
        assert!(stderr.contains(want), "{want:?} not in: {stderr}");
    }
    // serve stops on the same certificate, so check-config was right.
    let out = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
}
