//! Signed audit checkpoints with real processes: keys made by `jmxgate
//! audit keygen`, gateways that write checkpoints while serving a real
//! agent and at SIGTERM, and `jmxgate audit verify --public-key` on the
//! files they leave, intact, forged (chain recomputed) and from several
//! replicas at once.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{shared_agents, targets_toml, GatewayProcess};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_jmxgate");
const READ: &str = "/jolokia/targets/alpha/read/jmxgate.test:type=Types/Name";

fn run(args: &[&str], paths: &[&Path]) -> (Option<i32>, String) {
    let out = Command::new(BIN).args(args).args(paths).output().unwrap();
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// `jmxgate audit keygen --out DIR/NAME`: the private key, the public key
/// and the printed key id.
fn keygen(dir: &Path, name: &str) -> (PathBuf, PathBuf, String) {
    let key = dir.join(name);
    let (code, out) = run(&["audit", "keygen", "--out"], &[&key]);
    assert_eq!(code, Some(0), "{out}");
    let id = out
        .lines()
        .find_map(|l| l.strip_prefix("key id: "))
        .unwrap_or_else(|| panic!("no key id in: {out}"))
        .to_string();
    assert!(!out.contains("PRIVATE"), "key material printed: {out}");
    (
        key.clone(),
        PathBuf::from(format!("{}.pub", key.display())),
        id,
    )
}

/// Starts `jmxgate serve` for one replica writing to `dir/audit`, sends
/// `reads` requests through it to a real agent and stops it with SIGTERM.
/// Returns the `/metrics` text seen before the stop.
async fn serve_and_stop(dir: &Path, replica: &str, key: Option<&Path>, reads: usize) -> String {
    let [a, ..] = shared_agents();
    let signing = key
        .map(|k| {
            format!(
                "signing_key_file = \"{}\"\ncheckpoint_records = 5\n",
                k.display()
            )
        })
        .unwrap_or_default();
    let config = dir.join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.1:0\"\n\
             [audit]\ndir = \"audit\"\nreplica_id = \"{replica}\"\n{signing}\n{}",
            targets_toml(&[a])
        ),
    )
    .unwrap();
    let gw = GatewayProcess::start(&config, "info");
    let admin_line = gw
        .wait_for_line("admin listening on", Duration::from_secs(10))
        .expect("the admin listener starts");
    let admin = admin_line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap()
        .to_string();
    let http = common::http_client();
    for _ in 0..reads {
        let r = http
            .get(format!("http://{}{READ}", gw.addr))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["status"], 200, "{body}");
    }
    let metrics = common::get_text(&http, &format!("http://{admin}/metrics")).await;
    gw.stop();
    metrics
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
}

/// Copies an audit directory, changing the first `item` record with
/// `edit` and re-sealing every record after it with the crate's sealing
/// code: what someone who can write the files can do.
fn forged_copy(from: &Path, to: &Path, edit: &dyn Fn(&str) -> String) {
    std::fs::create_dir_all(to).unwrap();
    let mut prev: Option<String> = None;
    let mut edited = false;
    for f in jmxgate::audit::chain::files_in(from).unwrap() {
        let mut out = String::new();
        for line in std::fs::read_to_string(&f).unwrap().lines() {
            let mut line = line.to_string();
            if !edited && line.contains("\"event\":\"item\"") {
                let changed = edit(&line);
                assert_ne!(changed, line, "the edit changes the record");
                line = changed;
                edited = true;
            }
            if edited {
                let mut v: Value = serde_json::from_str(&line).unwrap();
                let obj = v.as_object_mut().unwrap();
                obj.remove("hash");
                if let Some(p) = &prev {
                    obj.insert("prev".into(), p.clone().into());
                }
                let mut text = serde_json::to_vec(&v).unwrap();
                jmxgate::audit::chain::seal_in_place(&mut text, 0);
                line = String::from_utf8(text).unwrap();
            }
            let v: Value = serde_json::from_str(&line).unwrap();
            prev = Some(v["hash"].as_str().unwrap().to_string());
            out.push_str(&line);
            out.push('\n');
        }
        std::fs::write(to.join(f.file_name().unwrap()), out).unwrap();
    }
    assert!(edited, "the log has an item record");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_signed_log_verifies_and_a_recomputed_forgery_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let (key, public, id) = keygen(dir.path(), "audit.key");
    let metrics = serve_and_stop(dir.path(), "gw-1", Some(&key), 12).await;
    assert!(
        metric(&metrics, "jmxgate_audit_last_checkpoint_timestamp_seconds") > 1.7e9,
        "a checkpoint was written while serving"
    );
    let log = dir.path().join("audit");
    let records = common::audit_records(&log);
    assert!(records.iter().all(|r| r["replica"] == "gw-1"));
    let checkpoints: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "checkpoint")
        .collect();
    assert!(checkpoints.len() >= 3, "{records:#?}");
    assert!(checkpoints.iter().all(|c| c["key_id"] == id.as_str()));
    // SIGTERM: the log ends with log_closed and a checkpoint after it.
    let n = records.len();
    assert_eq!(records[n - 2]["event"], "log_closed");
    assert_eq!(records[n - 1]["event"], "checkpoint");
    let last_seq = records[n - 1]["seq"].as_u64().unwrap();

    let (code, out) = run(
        &["audit", "verify", "--public-key", public.to_str().unwrap()],
        &[&log],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains(&format!(
            "OK replica gw-1: {n} records in 1 file(s), seq 0..={last_seq}, chain intact; proven by checkpoints up to seq {last_seq} ("
        )) && out.contains(&format!("key {id})")),
        "{out}"
    );
    assert!(!out.contains("not yet proven"), "{out}");
    // Without a key: the chain only, and a note saying so.
    let (code, out) = run(&["audit", "verify"], &[&log]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("signatures were not checked"), "{out}");

    // An edited value, the chain recomputed after it: the chain alone
    // can't tell; the checkpoint after it can.
    let forged = dir.path().join("forged");
    forged_copy(&log, &forged, &|l| {
        l.replace("\"decision\":\"allowed\"", "\"decision\":\"denied\"")
    });
    let (code, out) = run(&["audit", "verify"], &[&forged]);
    assert_eq!(code, Some(0), "the recomputed chain is intact: {out}");
    let (code, out) = run(
        &["audit", "verify", "--public-key", public.to_str().unwrap()],
        &[&forged],
    );
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("signature does not match \u{2014} it, or records before it, were changed")
            && out.contains("FAILED replica gw-1"),
        "{out}"
    );

    // Checked with some other key only: the unknown key is named.
    let (_, other, _) = keygen(dir.path(), "other.key");
    let (code, out) = run(
        &["audit", "verify", "--public-key", other.to_str().unwrap()],
        &[&log],
    );
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains(&format!("signed by key {id}")), "{out}");

    // keygen never overwrites.
    let (code, out) = run(&["audit", "keygen", "--out"], &[&key]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("exists"), "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn replicas_are_verified_together_each_against_its_own_chain() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (key_a, pub_a, _) = keygen(dirs[0].path(), "a.key");
    let (key_b, pub_b, id_b) = keygen(dirs[1].path(), "b.key");
    serve_and_stop(dirs[0].path(), "gw-a", Some(&key_a), 7).await;
    serve_and_stop(dirs[1].path(), "gw-b", Some(&key_b), 3).await;
    // One without a key writes no checkpoints.
    serve_and_stop(dirs[2].path(), "gw-c", None, 2).await;
    let logs: Vec<PathBuf> = dirs.iter().map(|d| d.path().join("audit")).collect();
    // Both chains start at seq 0: they are told apart by replica.
    let both = [logs[0].as_path(), logs[1].as_path()];
    let keys = [
        "audit",
        "verify",
        "--public-key",
        pub_a.to_str().unwrap(),
        "--public-key",
        pub_b.to_str().unwrap(),
    ];
    let (code, out) = run(&keys, &both);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("OK replica gw-a: ") && out.contains("OK replica gw-b: "),
        "{out}"
    );
    assert_eq!(out.matches("proven by checkpoints").count(), 2, "{out}");

    // Only A's key: B's checkpoints are by an unknown key.
    let (code, out) = run(
        &["audit", "verify", "--public-key", pub_a.to_str().unwrap()],
        &both,
    );
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("OK replica gw-a: "), "{out}");
    assert!(
        out.contains(&format!("signed by key {id_b}")) && out.contains("FAILED replica gw-b"),
        "{out}"
    );

    // With --public-key, a replica without checkpoints proves nothing.
    let all = [logs[0].as_path(), logs[1].as_path(), logs[2].as_path()];
    let (code, out) = run(&keys, &all);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("FAILED replica gw-c: ") && out.contains("no checkpoint"),
        "{out}"
    );
    // Without it, all three chains are intact.
    let (code, out) = run(&["audit", "verify"], &all);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(out.matches("chain intact").count(), 3, "{out}");
}

/// A gateway restarted under a new replica id (a Deployment's new pod
/// name, a renamed host) continues its directory's log: `verify` checks
/// it as one chain across both ids, the link between them included, and
/// a record removed at that link is found.
#[tokio::test(flavor = "multi_thread")]
async fn a_log_continued_under_a_new_replica_id_verifies_as_one_chain() {
    let dir = tempfile::tempdir().unwrap();
    let (key, public, _) = keygen(dir.path(), "audit.key");
    serve_and_stop(dir.path(), "pod-a", Some(&key), 4).await;
    serve_and_stop(dir.path(), "pod-b", Some(&key), 3).await;
    let log = dir.path().join("audit");
    let records = common::audit_records(&log);
    let replicas: Vec<&str> = records
        .iter()
        .filter_map(|r| r["replica"].as_str())
        .collect();
    assert!(
        replicas.contains(&"pod-a") && replicas.contains(&"pod-b"),
        "{replicas:?}"
    );
    let keys = ["audit", "verify", "--public-key", public.to_str().unwrap()];
    let (code, out) = run(&keys, &[&log]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains(&format!(
            "OK replica pod-a, then pod-b: {} records in 2 file(s), seq 0..=",
            records.len()
        )) && out.contains("proven by checkpoints"),
        "{out}"
    );
    // Checked from the start, not from where pod-b began.
    assert!(!out.contains("the chain is checked from there on"), "{out}");

    // pod-a's last record (its closing checkpoint) removed: pod-b's
    // first record no longer links, and that is found.
    let cut = dir.path().join("cut");
    std::fs::create_dir(&cut).unwrap();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&log)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for (i, f) in files.iter().enumerate() {
        let text = std::fs::read_to_string(f).unwrap();
        let text = if i == 0 {
            let lines: Vec<&str> = text.lines().collect();
            format!("{}\n", lines[..lines.len() - 1].join("\n"))
        } else {
            text
        };
        std::fs::write(cut.join(f.file_name().unwrap()), text).unwrap();
    }
    let (code, out) = run(&keys, &[&cut]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("TAMPERED"), "{out}");
}
