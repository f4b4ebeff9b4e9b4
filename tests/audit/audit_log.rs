//! The audit log against real agents and real files: what a record holds,
//! that `jmxgate audit verify` catches every kind of tampering, that a
//! write failure closes the gateway (and opening it again works), and that
//! a SIGKILL under load loses no record of an answered request.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{shared_agents, targets_toml, Agent, Gateway};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_jmxgate");
const T: &str = "jmxgate.test:type=Types";
const OPS: &str = "jmxgate.test:type=Operations";

fn audit_files(dir: &Path) -> Vec<PathBuf> {
    jmxgate::audit::chain::files_in(dir).unwrap()
}

fn records(dir: &Path) -> Vec<Value> {
    audit_files(dir)
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn verify(paths: &[&Path]) -> (Option<i32>, String) {
    let out = Command::new(BIN)
        .args(["audit", "verify"])
        .args(paths)
        .output()
        .unwrap();
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn policy_config(dir: &Path, agents: &[&Agent], audit_extra: &str) -> String {
    let policy = dir.join("policy.xml");
    std::fs::write(
        &policy,
        format!("<restrict><deny><mbean><name>{OPS}</name><operation>reset</operation></mbean></deny></restrict>"),
    )
    .unwrap();
    format!(
        "{}[access]\nanonymous_role = \"ops\"\n[[roles]]\nname = \"ops\"\ntargets = [\"*\"]\npolicy = \"{}\"\n\
         [audit]\ndir = \"{}\"\n{audit_extra}\n",
        targets_toml(agents),
        policy.display(),
        dir.join("audit").display()
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn records_say_who_did_what_and_how_it_ended() {
    let dir = tempfile::tempdir().unwrap();
    let [a, ..] = shared_agents();
    let gw = Gateway::start(&policy_config(dir.path(), &[a], "")).await;
    let (_, r) = gw
        .post(
            "/jolokia",
            &json!([
                {"type":"read","mbean":T,"attribute":"Name","target":{"url":"alpha"}},
                {"type":"exec","mbean":OPS,"operation":"reset","target":{"url":"alpha"}},
                {"type":"exec","mbean":OPS,"operation":"echo","arguments":["top secret value"],"target":{"url":"alpha"}},
                {"type":"write","mbean":T,"attribute":"Name","value":"hunter2","target":{"url":"nowhere"}},
                {"type":"read","mbean":"not a name","target":{"url":"alpha"}},
            ]),
        )
        .await;
    assert_eq!(r[2]["value"], "top secret value");
    let items: Vec<Value> = records(&dir.path().join("audit"))
        .into_iter()
        .filter(|r| r["event"] == "item")
        .collect();
    assert_eq!(items.len(), 5, "{items:#?}");
    assert_eq!(items[0]["decision"], "allowed");
    assert_eq!(items[0]["principal"], "anonymous");
    assert_eq!(items[0]["roles"], json!(["ops"]));
    assert_eq!(items[0]["target"], "alpha");
    assert_eq!(items[0]["type"], "read");
    assert_eq!(items[0]["attribute"], "Name");
    assert_eq!(items[0]["status"], 200);
    assert!(items[0]["client"]
        .as_str()
        .unwrap()
        .starts_with("127.0.0.1:"));
    assert!(items[0]["latency_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(items[1]["decision"], "denied");
    assert_eq!(items[1]["status"], 403);
    assert!(
        items[1]["rule"].as_str().unwrap().contains("reset"),
        "{}",
        items[1]
    );
    assert_eq!(items[2]["operation"], "echo");
    assert!(items[2]["arguments"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    assert_eq!(items[3]["decision"], "invalid");
    assert!(items[3]["value"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(items[4]["decision"], "invalid");
    let all = std::fs::read_to_string(&audit_files(&dir.path().join("audit"))[0]).unwrap();
    assert!(
        !all.contains("top secret value") && !all.contains("hunter2"),
        "{all}"
    );
    let (code, out) = verify(&[&dir.path().join("audit")]);
    assert_eq!(code, Some(0), "{out}");
}

/// A request with more records than the gateway encodes at a time (1024):
/// all of them, in order, in one chain, the last one an exec (so the whole
/// request waits for the disk).
#[tokio::test(flavor = "multi_thread")]
async fn a_large_bulk_is_recorded_whole_and_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let [a, ..] = shared_agents();
    let config = format!(
        "max_bulk_items = 3000\n{}",
        policy_config(dir.path(), &[a], "")
    );
    let gw = Gateway::start(&config).await;
    let n = 2500;
    let mut bulk: Vec<Value> = (0..n)
        .map(|_| json!({"type":"read","mbean":T,"attribute":"Name","target":{"url":"alpha"}}))
        .collect();
    bulk.push(json!({"type":"exec","mbean":OPS,"operation":"echo","arguments":["x"],"target":{"url":"alpha"}}));
    let (status, r) = gw.post("/jolokia", &Value::Array(bulk)).await;
    assert_eq!(status, 200);
    let answers = r.as_array().unwrap();
    assert_eq!(answers.len(), n + 1);
    assert!(answers.iter().all(|a| a["status"] == 200), "{r}");
    let items: Vec<Value> = records(&dir.path().join("audit"))
        .into_iter()
        .filter(|r| r["event"] == "item")
        .collect();
    let indices: Vec<u64> = items.iter().map(|r| r["index"].as_u64().unwrap()).collect();
    assert_eq!(indices, (0..=n as u64).collect::<Vec<_>>());
    assert_eq!(items[n]["type"], "exec");
    let (code, out) = verify(&[&dir.path().join("audit")]);
    assert_eq!(code, Some(0), "{out}");
}

/// Writes a log with many records across several files, then tampers with
/// copies of it.
#[tokio::test(flavor = "multi_thread")]
async fn verify_catches_edits_removals_reorders_and_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let [a, ..] = shared_agents();
    let gw = Gateway::start(&policy_config(dir.path(), &[a], "rotate_bytes = 8192")).await;
    for i in 0..40 {
        gw.get(&format!("/jolokia/targets/alpha/exec/{OPS}/echo/call-{i}"))
            .await;
    }
    drop(gw);
    let log = dir.path().join("audit");
    let files = audit_files(&log);
    assert!(files.len() >= 3, "rotation made {} files", files.len());
    let (code, out) = verify(&[&log]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("chain intact"), "{out}");

    let tamper = |name: &str, change: &dyn Fn(&mut Vec<String>)| -> (Option<i32>, String) {
        let copy = dir.path().join(name);
        std::fs::create_dir_all(&copy).unwrap();
        for (i, f) in files.iter().enumerate() {
            let mut lines: Vec<String> = std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .map(String::from)
                .collect();
            if i == 1 {
                change(&mut lines);
            }
            std::fs::write(copy.join(f.file_name().unwrap()), lines.join("\n") + "\n").unwrap();
        }
        verify(&[&copy])
    };
    let (code, out) = tamper("edited", &|l| {
        l[3] = l[3].replace("\"status\":200", "\"status\":403")
    });
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains(":4") && out.contains("record edited"), "{out}");
    let (code, out) = tamper("removed", &|l| {
        l.remove(3);
    });
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("were removed"), "{out}");
    let (code, out) = tamper("reordered", &|l| l.swap(2, 3));
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("out of order") || out.contains("were removed"),
        "{out}"
    );
    // A whole file missing from the middle.
    let (code, out) = verify(&[files[0].as_path(), files[2].as_path()]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("were removed"), "{out}");

    // A cut-off last line: reported, but no tampering.
    let torn = dir.path().join("torn");
    std::fs::create_dir_all(&torn).unwrap();
    for f in &files {
        std::fs::copy(f, torn.join(f.file_name().unwrap())).unwrap();
    }
    let last = torn.join(files.last().unwrap().file_name().unwrap());
    let text = std::fs::read_to_string(&last).unwrap();
    std::fs::write(&last, &text[..text.len() - 20]).unwrap();
    let (code, out) = verify(&[&torn]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("truncated tail"), "{out}");

    // query reads the same files.
    let out = Command::new(BIN)
        .args([
            "audit",
            "query",
            "--type",
            "exec",
            "--decision",
            "allowed",
            "--format",
            "json",
        ])
        .arg(&log)
        .output()
        .unwrap();
    let lines = String::from_utf8(out.stdout).unwrap();
    assert_eq!(lines.lines().count(), 40, "{lines}");
    let table = Command::new(BIN)
        .args(["audit", "query", "--event", "log_opened"])
        .arg(&log)
        .output()
        .unwrap();
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(
        table.starts_with("SEQ") && table.lines().count() == files.len() + 1,
        "{table}"
    );
}

fn chattr(flag: &str, path: &Path) {
    let status = Command::new("chattr")
        .arg(flag)
        .arg(path)
        .status()
        .expect("chattr (e2fsprogs) is needed");
    assert!(
        status.success(),
        "chattr {flag} {} failed: the test needs a filesystem with immutable files",
        path.display()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_log_that_cannot_be_written_closes_the_gateway_until_it_can() {
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start("closed");
    let gw = Gateway::start(&policy_config(dir.path(), &[&agent], "")).await;
    let exec = format!("/jolokia/targets/closed/exec/{OPS}/noArgs");
    assert_eq!(gw.get(&exec).await.1["value"], "ok");

    // Real write failures: the file and its directory become immutable.
    let log = dir.path().join("audit");
    let file = audit_files(&log).pop().unwrap();
    chattr("+i", &file);
    chattr("+i", &log);
    let invocations = |a: &Agent| {
        let a = a.url();
        async move {
            common::post_json(&common::http_client(), &a, &json!({"type":"read","mbean":"jmxgate.test:type=Counter","attribute":"Invocations"}))
                .await
                .1["value"]
                .as_i64()
                .unwrap()
        }
    };
    let (status, r) = gw.get(&exec).await;
    assert_eq!(status, 503, "{r}");
    assert_eq!(r["error_type"], "jmxgate.AuditUnavailable");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("audit log cannot be written"),
        "{r}"
    );
    // Now refused before anything runs.
    let before = invocations(&agent).await;
    let (status, _) = gw.get(&exec).await;
    assert_eq!(status, 503);
    assert_eq!(
        invocations(&agent).await,
        before,
        "a request ran while the log was down"
    );

    chattr("-i", &log);
    chattr("-i", &file);
    common::eventually(
        "the gateway reopens once the log is writable again",
        Duration::from_secs(60),
        || async {
            match gw.get(&exec).await {
                (200, _) => Ok(()),
                (status, r) => Err(format!("{status} {r}")),
            }
        },
    )
    .await;
    let (code, out) = verify(&[&log]);
    assert_eq!(code, Some(0), "a recovered log still verifies: {out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn fail_open_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start("open");
    let gw = Gateway::start(&policy_config(
        dir.path(),
        &[&agent],
        "on_failure = \"open\"",
    ))
    .await;
    let log = dir.path().join("audit");
    let file = audit_files(&log).pop().unwrap();
    chattr("+i", &file);
    chattr("+i", &log);
    let (status, r) = gw
        .get(&format!("/jolokia/targets/open/exec/{OPS}/noArgs"))
        .await;
    chattr("-i", &log);
    chattr("-i", &file);
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["value"], "ok");
    assert!(gw.gateway.metrics().audit_failures.get() > 0);
    let text = gw.gateway.metrics().encode();
    assert!(
        text.contains("jmxgate_audit_write_failures_total"),
        "{text}"
    );
}

#[test]
fn sigkill_under_load_loses_no_answered_request() {
    let dir = tempfile::tempdir().unwrap();
    let [a, b, c] = shared_agents();
    let config_path = common::gateway_toml(
        dir.path(),
        &policy_config(dir.path(), &[a, b, c], "rotate_bytes = 200000"),
    );
    let mut child = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&config_path)
        .env("RUST_LOG", "warn,jmxgate=info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let addr = {
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let addr = common::listening_address(&mut lines);
        std::thread::spawn(move || lines.for_each(drop));
        addr
    };
    let answered = Arc::new(Mutex::new(Vec::<String>::new()));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let pid = child.id();
    rt.block_on(async {
        let http = common::http_client();
        let url = format!("http://{addr}/jolokia");
        let deadline = Instant::now() + Duration::from_secs(180);
        let mut tasks = Vec::new();
        // 32 clients, each sending requests back to back: allowed reads,
        // writes and execs, denied execs, across three agents.
        for client in 0..32 {
            let (http, url, answered) = (http.clone(), url.clone(), answered.clone());
            tasks.push(tokio::spawn(async move {
                for n in 0..200 {
                    if Instant::now() > deadline {
                        break;
                    }
                    let target = ["alpha", "beta", "gamma"][(client + n) % 3];
                    let body = match n % 4 {
                        0 => json!({"type":"read","mbean":T,"attribute":"Name","target":{"url":target}}),
                        1 => json!({"type":"exec","mbean":OPS,"operation":"reset","target":{"url":target}}),
                        2 => json!({"type":"write","mbean":T,"attribute":"Counter","value":n,"target":{"url":target}}),
                        _ => json!([{"type":"exec","mbean":OPS,"operation":"noArgs","target":{"url":target}},
                                    {"type":"read","mbean":T,"attribute":"LongMax","target":{"url":target}}]),
                    };
                    let Ok(resp) = http.post(&url).body(body.to_string()).send().await else { break };
                    let id = resp.headers().get("x-request-id").map(|v| v.to_str().unwrap().to_string());
                    if resp.bytes().await.is_err() {
                        break;
                    }
                    if let Some(id) = id {
                        answered.lock().unwrap().push(id);
                    }
                }
            }));
        }
        // Let the load build up, then kill the gateway in the middle of it
        // (killed in any case: the assertion below says how far it got).
        let _ = common::try_eventually(deadline.saturating_duration_since(Instant::now()), || async {
            match answered.lock().unwrap().len() {
                n if n >= 1500 => Ok(()),
                n => Err(format!("{n} answered")),
            }
        })
        .await;
        let status = Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap();
        assert!(status.success());
        for t in tasks {
            let _ = t.await;
        }
    });
    let _ = child.wait();
    let answered = answered.lock().unwrap().clone();
    assert!(
        answered.len() >= 1500,
        "only {} requests were answered before the kill",
        answered.len()
    );

    let log = dir.path().join("audit");
    let (code, out) = verify(&[&log]);
    assert_eq!(code, Some(0), "{out}");
    let recorded: std::collections::HashSet<String> = records(&log)
        .into_iter()
        .filter_map(|r| r["request_id"].as_str().map(String::from))
        .collect();
    let missing: Vec<&String> = answered
        .iter()
        .filter(|id| !recorded.contains(*id))
        .collect();
    assert!(
        missing.is_empty(),
        "{} answered requests have no audit record, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    let denied = records(&log)
        .iter()
        .filter(|r| r["decision"] == "denied")
        .count();
    assert!(denied > 100, "denied requests are recorded too ({denied})");

    // A restart continues the same chain in a new file.
    let files_before = audit_files(&log).len();
    let mut child = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&config_path)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Stopped once its new file holds its first record, written whole
    // (stopped in any case).
    let started = common::try_eventually_blocking(Duration::from_secs(60), || {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("serve exited with {status}"));
        }
        let files = audit_files(&log);
        match files.last().filter(|_| files.len() > files_before) {
            Some(new) => match std::fs::read_to_string(new) {
                Ok(text) if text.ends_with('\n') => Ok(()),
                Ok(text) => Err(format!("{}: {text:?}", new.display())),
                Err(e) => Err(format!("{}: {e}", new.display())),
            },
            None => Err(format!("{} audit files, as before", files.len())),
        }
    });
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
    if let Err(state) = started {
        panic!("the restarted gateway's audit file: not so after 60 s; last: {state}");
    }
    let (code, out) = verify(&[&log]);
    assert_eq!(code, Some(0), "after a restart: {out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_authentications_are_recorded_without_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let [a, ..] = shared_agents();
    let hash = jmxgate::pipeline::authenticate::basic::hash_password("right-password").unwrap();
    std::fs::write(
        dir.path().join("users.toml"),
        format!("[[users]]\nname = \"alice\"\npassword_hash = \"{hash}\"\nroles = [\"ops\"]\n"),
    )
    .unwrap();
    let config = format!(
        "{}\n[auth.basic]\nusers_file = \"{}\"\n",
        policy_config(dir.path(), &[a], ""),
        dir.path().join("users.toml").display()
    );
    let gw = Gateway::start(&config).await;
    let url = gw.url("/jolokia/targets/alpha/read/jmxgate.test:type=Types/Name");
    assert_eq!(
        gw.http
            .get(&url)
            .basic_auth("alice", Some("WrongPassword1"))
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    let ok = gw
        .http
        .get(&url)
        .basic_auth("alice", Some("right-password"))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let log = dir.path().join("audit");
    let recs = records(&log);
    let failure = recs
        .iter()
        .find(|r| r["event"] == "auth_failure")
        .expect("an auth_failure record");
    assert_eq!(failure["auth"], "basic");
    assert_eq!(failure["status"], 401);
    assert!(failure["client"].as_str().unwrap().starts_with("127.0.0.1"));
    let item = recs.iter().find(|r| r["event"] == "item").unwrap();
    assert_eq!(item["principal"], "alice");
    assert_eq!(item["auth"], "basic");
    let text: String = audit_files(&log)
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    assert!(!text.contains("WrongPassword1") && !text.contains("right-password"));
}

/// Every request that reaches authentication leaves a record, also when
/// it makes no item: HTTP-level refusals, a virtual URL to no target the
/// caller reaches, MCP requests other than tool calls and MCP refusals,
/// `/jmxgate/explain`. A wrongly typed value in a refused tool call never
/// appears in the record.
#[tokio::test(flavor = "multi_thread")]
async fn every_request_that_reaches_authentication_leaves_a_record() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let [a, ..] = shared_agents();
    let policy = dir.path().join("anon.xml");
    std::fs::write(
        &policy,
        "<restrict><cors><allow-origin>https://good.example</allow-origin></cors></restrict>",
    )
    .unwrap();
    let log = dir.path().join("audit");
    let gw = Gateway::start(&format!(
        "max_body_bytes = 512\nbody_read_timeout = \"1s\"\n{}\
         [access]\nanonymous_role = \"anon\"\n\n[[roles]]\nname = \"anon\"\ntargets = [\"*\"]\n\
         policy = \"{}\"\n\n[audit]\ndir = \"{}\"\nvalues = \"hash\"\n",
        targets_toml(&[a]),
        policy.display(),
        log.display()
    ))
    .await;
    let send = |req: reqwest::RequestBuilder| async move {
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.text().await.unwrap())
    };
    let post = |path: &str, body: String| {
        gw.http
            .post(gw.url(path))
            .header("content-type", "application/json")
            .body(body)
    };
    assert_eq!(send(post("/jolokia", "x".repeat(2000))).await.0, 413);
    assert_eq!(send(post("/jolokia", "{not json".into())).await.0, 400);
    assert_eq!(send(gw.http.put(gw.url("/jolokia"))).await.0, 405);
    assert_eq!(
        send(
            gw.http
                .get(gw.url("/jolokia/targets/no-such-target/version"))
        )
        .await
        .0,
        404
    );
    // A body that never arrives.
    let mut slow = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    slow.write_all(
        b"POST /jolokia HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{",
    )
    .await
    .unwrap();
    let mut answer = String::new();
    let _ = slow.read_to_string(&mut answer).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    // Explain.
    let (status, _) = send(post(
        "/jmxgate/explain",
        json!({"type":"read","mbean":T,"attribute":"Name","target":{"url":a.name}}).to_string(),
    ))
    .await;
    assert_eq!(status, 200);
    // MCP: methods other than tool calls, an unknown one, a refused origin,
    // and a tool call whose arguments have the wrong type.
    let rpc = |body: Value, origin: Option<&str>| {
        let mut r = post("/mcp", body.to_string())
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18");
        if let Some(o) = origin {
            r = r.header("origin", o);
        }
        r
    };
    let initialize = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    assert_eq!(send(rpc(initialize, None)).await.0, 200);
    let list = json!({"jsonrpc":"2.0","id":2,"method":"tools/list"});
    assert_eq!(send(rpc(list.clone(), None)).await.0, 200);
    let (status, text) = send(rpc(
        json!({"jsonrpc":"2.0","id":3,"method":"no/such"}),
        None,
    ))
    .await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("\"error\""), "{text}");
    assert_eq!(send(rpc(list, Some("https://evil.example"))).await.0, 403);
    let typed = json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"execute_operation",
        "arguments":{"target":a.name,"mbean":OPS,"operation":"echo","arguments":"s3cret-value"}}});
    let (status, text) = send(rpc(typed, None)).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("invalid type"), "{text}");

    let records = records(&log);
    let find = |event: &str, status: u64, what: &str| {
        records
            .iter()
            .find(|r| {
                r["event"] == event
                    && r["status"] == status
                    && r["note"].as_str().is_some_and(|n| n.contains(what))
            })
            .unwrap_or_else(|| panic!("no {event} record with {status} and {what:?}: {records:#?}"))
    };
    for (status, what) in [
        (413, "server.max_body_bytes"),
        (400, ""),
        (405, "not supported"),
        (404, ""),
        (408, "server.body_read_timeout"),
    ] {
        let r = find("request", status, what);
        assert_eq!(r["principal"], "anonymous", "{r}");
    }
    assert_eq!(find("request", 404, "")["target"], "no-such-target");
    assert_eq!(
        find("explain", 200, "explained 1 item(s): allow")["decision"],
        "allowed"
    );
    assert_eq!(find("mcp", 200, "initialize")["decision"], "allowed");
    assert_eq!(find("mcp", 200, "tools/list")["channel"], "mcp");
    assert_eq!(
        find("mcp", 200, "no/such: JSON-RPC error -32601")["decision"],
        "invalid"
    );
    assert_eq!(find("mcp", 403, "Origin not allowed")["decision"], "denied");
    let refused = records
        .iter()
        .find(|r| r["tool"] == "execute_operation")
        .unwrap_or_else(|| panic!("no record of the refused call: {records:#?}"));
    assert_eq!(refused["status"], 400);
    let all = std::fs::read_to_string(&audit_files(&log)[0]).unwrap();
    assert!(!all.contains("s3cret-value"), "a value in the audit log");
}
