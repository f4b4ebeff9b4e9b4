//! Shipping the audit log to a real collector: rsyslog (Debian's, with its
//! GnuTLS driver) receiving RFC 5424 over TLS. Every record of the local
//! files arrives, byte for byte; a SIGKILLed gateway and a restarted
//! collector lose nothing and duplicate only what the gateway said it
//! might; a collector that is down at first gets everything once it is up;
//! a full directory holds requests until the collector has its records.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{shared_agents, targets_toml, TestPki};

const BIN: &str = env!("CARGO_BIN_EXE_jmxgate");

/// rsyslogd listening with TLS on a loopback port, writing each message's
/// raw text as one line of `received.log`.
struct Rsyslog {
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl Rsyslog {
    fn configure(dir: &Path, pki: &TestPki, port: u16) -> Rsyslog {
        let (cert, key) = pki.server_cert("collector");
        std::fs::create_dir_all(dir.join("work")).unwrap();
        let conf = format!(
            r#"global(workDirectory="{work}" maxMessageSize="1m"
       defaultNetstreamDriver="gtls"
       defaultNetstreamDriverCAFile="{ca}"
       defaultNetstreamDriverCertFile="{cert}"
       defaultNetstreamDriverKeyFile="{key}")
main_queue(queue.timeoutShutdown="20000")
module(load="imtcp" streamDriver.name="gtls" streamDriver.mode="1" streamDriver.authMode="anon")
input(type="imtcp" port="{port}" address="127.0.0.1")
template(name="raw" type="string" string="%rawmsg%\n")
template(name="record" type="string" string="%msg%\n")
template(name="per-replica" type="string" string="{dir}/replica-%hostname%.jsonl")
if $app-name == "jmxgate" and $msgid == "audit" then {{
    action(type="omfile" file="{out}" template="raw")
    action(type="omfile" dynaFile="per-replica" template="record")
}}
"#,
            work = dir.join("work").display(),
            ca = pki.ca_file().display(),
            cert = cert.display(),
            key = key.display(),
            out = dir.join("received.log").display(),
            dir = dir.display(),
        );
        std::fs::write(dir.join("rsyslog.conf"), conf).unwrap();
        Rsyslog {
            dir: dir.to_path_buf(),
            port,
            child: None,
        }
    }

    fn start(&mut self) {
        let child = Command::new("rsyslogd")
            .arg("-n")
            .arg("-f")
            .arg(self.dir.join("rsyslog.conf"))
            .arg("-i")
            .arg(self.dir.join("rsyslogd.pid"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("rsyslogd (Debian: rsyslog rsyslog-gnutls; scripts/install-deps.sh)");
        self.child = Some(child);
        let what = format!("rsyslogd listens on {}", self.port);
        common::eventually_blocking(&what, Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", self.port))
                .map(drop)
                .map_err(|e| e.to_string())
        });
    }

    /// SIGTERM, as a service manager stops it.
    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let _ = c.wait();
        }
    }

    /// Every message received: (replica, seq, hash) and the JSON payload.
    /// The records rsyslog has written whole: a last line without its
    /// line break is still being written, and read next time.
    fn received(&self) -> Vec<Received> {
        let text = std::fs::read_to_string(self.dir.join("received.log")).unwrap_or_default();
        let whole = text.rfind('\n').map_or("", |end| &text[..end]);
        whole
            .lines()
            .filter(|l| !l.is_empty())
            .map(Received::parse)
            .collect()
    }
}

impl Drop for Rsyslog {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Received {
    replica: String,
    seq: u64,
    hash: String,
    payload: String,
}

impl Received {
    fn parse(raw: &str) -> Received {
        let param = |name: &str| -> String {
            let start = raw
                .find(&format!(" {name}=\""))
                .unwrap_or_else(|| panic!("no {name} in {raw}"))
                + name.len()
                + 3;
            raw[start..].split('"').next().unwrap().to_string()
        };
        assert!(
            raw.starts_with("<133>1 "),
            "PRI local0.notice, version 1: {raw}"
        );
        assert!(raw.contains(" jmxgate - audit [jmxgate@32473 "), "{raw}");
        let payload = raw.split_once("\"] ").expect("SD then MSG").1.to_string();
        Received {
            replica: param("replica"),
            seq: param("seq").parse().unwrap(),
            hash: param("hash"),
            payload,
        }
    }
}

/// The local records: seq → (hash, the line as written).
fn local(dir: &Path) -> HashMap<u64, (String, String)> {
    common::audit_lines(dir)
        .into_iter()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(&l).ok()?;
            let hash = v["hash"].as_str()?.to_string();
            Some((v["seq"].as_u64()?, (hash, l)))
        })
        .collect()
}

/// A `jmxgate serve` process with its log lines.
struct Gateway {
    child: Child,
    addr: String,
    admin: String,
    log: Arc<Mutex<Vec<String>>>,
    /// Reads the log until the process's stderr closes.
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Gateway {
    fn start(config: &Path) -> Gateway {
        let mut child = Command::new(BIN)
            .args(["serve", "--config"])
            .arg(config)
            .env(
                "RUST_LOG",
                "info,jmxgate::audit::ship=debug,jmxgate::audit=warn",
            )
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let kept = log.clone();
        let reader = std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                for (marker, kind) in [
                    ("admin listening on http://", "admin"),
                    ("listening on http://", "http"),
                ] {
                    if let Some(rest) = line.split(marker).nth(1) {
                        let _ = tx.send((kind, rest.split('/').next().unwrap().to_string()));
                        break;
                    }
                }
                kept.lock().unwrap().push(line);
            }
        });
        let (mut addr, mut admin) = (None, None);
        while addr.is_none() || admin.is_none() {
            match rx.recv_timeout(Duration::from_secs(30)) {
                Ok(("admin", a)) => admin = Some(a),
                Ok((_, a)) => addr = Some(a),
                Err(_) => panic!("gateway did not start: {:?}", log.lock().unwrap()),
            }
        }
        Gateway {
            child,
            addr: addr.unwrap(),
            admin: admin.unwrap(),
            log,
            reader: Some(reader),
        }
    }

    fn kill(self) -> Vec<String> {
        self.end("-KILL")
    }

    fn stop(self) -> Vec<String> {
        self.end("-TERM")
    }

    /// Sends `signal`, waits for the process, then for its log's reader
    /// (it ends when stderr closes): every line it wrote.
    fn end(mut self, signal: &str) -> Vec<String> {
        let _ = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            reader.join().expect("the log reader");
        }
        let log = self.log.lock().unwrap().clone();
        log
    }

    fn metric(&self, name: &str) -> Option<f64> {
        let text = reqwest::blocking_get(&format!("http://{}/metrics", self.admin))?;
        text.lines()
            .find(|l| l.starts_with(&format!("{name}{{sink=\"siem\"}} ")))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Minimal blocking HTTP over std (the tests' reqwest is async only).
mod reqwest {
    use std::io::{Read, Write};
    pub fn blocking_get(url: &str) -> Option<String> {
        request("GET", url)
    }
    pub fn request(method: &str, url: &str) -> Option<String> {
        send(method, url, "")
    }
    pub fn send(method: &str, url: &str, body: &str) -> Option<String> {
        let rest = url.strip_prefix("http://")?;
        let (host, path) = rest.split_once('/').map(|(h, p)| (h, format!("/{p}")))?;
        let mut s = std::net::TcpStream::connect(host).ok()?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .ok()?;
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        let (head, body) = out.split_once("\r\n\r\n")?;
        head.starts_with("HTTP/1.1 200").then(|| body.to_string())
    }
}

fn config(dir: &Path, pki: &TestPki, port: u16) -> PathBuf {
    config_with(dir, pki, port, "")
}

/// [`config`] with more `[audit]` settings.
fn config_with(dir: &Path, pki: &TestPki, port: u16, audit_extra: &str) -> PathBuf {
    let [a, ..] = shared_agents();
    let path = dir.join("gateway.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.1:0\"\n{}\
             [audit]\ndir = \"{}\"\nreplica_id = \"{REPLICA}\"\nrotate_bytes = 40000\n{audit_extra}\
             [[audit.sinks]]\nname = \"siem\"\naddress = \"127.0.0.1:{port}\"\nca_file = \"{}\"\nbatch_records = 200\n",
            targets_toml(&[a]),
            dir.join("audit").display(),
            pki.ca_file().display()
        ),
    )
    .unwrap();
    path
}

/// `n` requests through the gateway (reads and execs, some in bulk).
fn load(addr: &str, n: usize) {
    for i in 0..n {
        let path = if i % 3 == 0 {
            "/jolokia/targets/alpha/exec/jmxgate.test:type=Operations/noArgs".to_string()
        } else {
            format!("/jolokia/targets/alpha/read/jmxgate.test:type=Types/Name?n={i}")
        };
        let _ = reqwest::request("GET", &format!("http://{addr}{path}"));
    }
}

/// Waits until the collector has every local record (by seq).
fn wait_for_all(
    rsyslog: &Rsyslog,
    audit: &Path,
    within: Duration,
) -> (Vec<Received>, HashMap<u64, (String, String)>) {
    common::eventually_blocking("every local record reaches the collector", within, || {
        let local = local(audit);
        let received = rsyslog.received();
        let got: HashSet<u64> = received.iter().map(|r| r.seq).collect();
        let missing = local.keys().filter(|s| !got.contains(s)).count();
        if missing == 0 && !local.is_empty() {
            Ok((received, local))
        } else {
            Err(format!(
                "{missing} of {} local records missing",
                local.len()
            ))
        }
    })
}

/// The gateway's `audit.replica_id`.
const REPLICA: &str = "syslog-test-1";

/// Every received message is a local record, byte for byte, from this
/// replica.
fn check_payloads(received: &[Received], local: &HashMap<u64, (String, String)>, replica: &str) {
    for r in received {
        let (hash, line) = local
            .get(&r.seq)
            .unwrap_or_else(|| panic!("seq {} received but not in the local files", r.seq));
        assert_eq!(&r.hash, hash, "seq {}", r.seq);
        assert_eq!(
            &r.payload, line,
            "seq {}: payload differs from the local line",
            r.seq
        );
        assert_eq!(r.replica, replica);
        assert!(
            line.contains(&format!("\"replica\":\"{replica}\"")),
            "seq {}: the record names its replica: {line}",
            r.seq
        );
    }
}

fn resent_ranges(log: &[String]) -> Vec<(u64, u64)> {
    log.iter()
        .filter_map(|l| {
            let rest = l.split("resending seq ").nth(1)?;
            let (a, rest) = rest.split_once("..=")?;
            let b: String = rest.chars().take_while(char::is_ascii_digit).collect();
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .collect()
}

/// `jmxgate audit verify` passes: with `public_key`, every checkpoint's
/// signature too.
fn verify(audit: &Path, public_key: Option<&Path>) {
    let mut verify = Command::new(BIN);
    verify.args(["audit", "verify"]);
    if let Some(key) = public_key {
        verify.arg("--public-key").arg(key);
    }
    let out = verify.arg(audit).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_record_arrives_once_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new("syslog");
    let port = common::free_port();
    let mut rsyslog = Rsyslog::configure(&dir.path().join("rsyslog"), &pki, port);
    rsyslog.start();
    let gw = Gateway::start(&config(dir.path(), &pki, port));
    load(&gw.addr, 300);
    let audit = dir.path().join("audit");
    let (received, local) = wait_for_all(&rsyslog, &audit, Duration::from_secs(60));
    check_payloads(&received, &local, REPLICA);
    let mut seen = HashSet::new();
    for r in &received {
        assert!(seen.insert(r.seq), "seq {} received twice", r.seq);
    }
    assert!(
        jmxgate::audit::chain::files_in(&audit).unwrap().len() > 1,
        "rotated"
    );
    let sent = gw.metric("jmxgate_audit_sink_records_sent_total").unwrap();
    assert!(sent >= local.len() as f64 - 1.0, "{sent}");
    let log = gw.stop();
    assert!(resent_ranges(&log).is_empty(), "{log:#?}");
    // The records of the shutdown itself were delivered before the exit:
    // the gateway is gone, so nothing else could send them now.
    let (received, local) = wait_for_all(&rsyslog, &audit, Duration::from_secs(10));
    let last = local.keys().max().unwrap();
    assert!(
        local[last].1.contains("\"event\":\"log_closed\""),
        "the log ends with log_closed: {}",
        local[last].1
    );
    assert!(received.iter().any(|r| r.seq == *last));
    rsyslog.stop();
    // The collector's copy, the records alone in one file per replica,
    // verifies like the local files.
    let copy = dir
        .path()
        .join("rsyslog")
        .join(format!("replica-{REPLICA}.jsonl"));
    verify(&copy, None);
    let copied = std::fs::read_to_string(&copy).unwrap();
    assert_eq!(copied.lines().count(), local.len(), "{copied}");
}

#[test]
fn crash_and_collector_restart_lose_nothing_and_duplicate_only_what_was_said() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new("syslog-crash");
    let port = common::free_port();
    let mut rsyslog = Rsyslog::configure(&dir.path().join("rsyslog"), &pki, port);
    rsyslog.start();
    // Checkpoints signed as the log grows: the chain the crashes leave
    // must verify with the public key, not only hash by hash.
    let key = dir.path().join("audit.key");
    let made = Command::new(BIN)
        .args(["audit", "keygen", "--out"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let cfg = config_with(
        dir.path(),
        &pki,
        port,
        &format!(
            "signing_key_file = \"{}\"\ncheckpoint_records = 50\n",
            key.display()
        ),
    );
    let audit = dir.path().join("audit");
    let gw = Gateway::start(&cfg);
    let addr = Arc::new(Mutex::new(gw.addr.clone()));
    let stop = Arc::new(AtomicBool::new(false));
    let client = {
        let (addr, stop) = (addr.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let a = addr.lock().unwrap().clone();
                load(&a, 5);
            }
        })
    };
    let count = |audit: &Path| local(audit).len();
    let wait_records = |n: usize| {
        let what = format!("{n} records written");
        common::eventually_blocking(&what, Duration::from_secs(60), || match count(&audit) {
            now if now >= n => Ok(()),
            now => Err(format!("{now} records (load too slow)")),
        })
    };
    wait_records(400);
    let mut logs = gw.kill();
    let gw = Gateway::start(&cfg);
    *addr.lock().unwrap() = gw.addr.clone();
    wait_records(count(&audit) + 300);
    rsyslog.stop();
    wait_records(count(&audit) + 200);
    rsyslog.start();
    wait_records(count(&audit) + 300);
    // A second crash, while the collector has just come back.
    logs.extend(gw.kill());
    let gw = Gateway::start(&cfg);
    *addr.lock().unwrap() = gw.addr.clone();
    wait_records(count(&audit) + 200);
    stop.store(true, Ordering::Relaxed);
    client.join().unwrap();

    let (received, local) = wait_for_all(&rsyslog, &audit, Duration::from_secs(120));
    logs.extend(gw.stop());
    // Records written after wait_for_all (the stop's own) are not in `local`.
    let received: Vec<Received> = received
        .into_iter()
        .filter(|r| local.contains_key(&r.seq))
        .collect();
    check_payloads(&received, &local, REPLICA);
    let resent = resent_ranges(&logs);
    let mut times: HashMap<u64, usize> = HashMap::new();
    for r in &received {
        *times.entry(r.seq).or_default() += 1;
    }
    let dups: Vec<u64> = times
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(s, _)| *s)
        .collect();
    for s in &dups {
        assert!(
            resent.iter().any(|(a, b)| a <= s && s <= b),
            "seq {s} arrived twice but the gateway never said it might resend it; said: {resent:?}"
        );
    }
    eprintln!(
        "{} records, {} duplicates, resent ranges {resent:?}",
        local.len(),
        dups.len()
    );
    verify(&audit, Some(&key.with_extension("key.pub")));
    rsyslog.stop();
}

#[test]
fn a_collector_down_at_start_gets_everything_once_up() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new("syslog-late");
    let port = common::free_port();
    let mut rsyslog = Rsyslog::configure(&dir.path().join("rsyslog"), &pki, port);
    let gw = Gateway::start(&config(dir.path(), &pki, port));
    load(&gw.addr, 200);
    // A backlog to measure the shipping rate with: bulk reads, one record
    // per item.
    let bulk = serde_json::Value::Array(
        (0..50)
            .map(|_| serde_json::json!({"type":"read","mbean":"jmxgate.test:type=Types","attribute":"Name","target":{"url":"alpha"}}))
            .collect(),
    )
    .to_string();
    for _ in 0..100 {
        reqwest::send("POST", &format!("http://{}/jolokia", gw.addr), &bulk).unwrap();
    }
    common::eventually_blocking(
        "the sink lags and has failed sends",
        Duration::from_secs(30),
        || {
            let lag = gw.metric("jmxgate_audit_sink_lag_records").unwrap_or(0.0);
            let failures = gw
                .metric("jmxgate_audit_sink_send_failures_total")
                .unwrap_or(0.0);
            if lag > 0.0 && failures > 0.0 {
                Ok(())
            } else {
                Err(format!("lag {lag}, failures {failures}"))
            }
        },
    );
    rsyslog.start();
    let audit = dir.path().join("audit");
    let first = common::eventually_blocking(
        "something arrives after the collector started",
        Duration::from_secs(60),
        || {
            if rsyslog.received().is_empty() {
                Err("nothing yet".to_string())
            } else {
                Ok(Instant::now())
            }
        },
    );
    let (received, local) = wait_for_all(&rsyslog, &audit, Duration::from_secs(90));
    eprintln!(
        "shipped a backlog of {} records in {:?} ({:.0} records/s, batches of 200)",
        received.len(),
        first.elapsed(),
        received.len() as f64 / first.elapsed().as_secs_f64()
    );
    check_payloads(&received, &local, REPLICA);
    assert_eq!(received.len(), local.len(), "each exactly once");
    common::eventually_blocking("the sink's lag is 0", Duration::from_secs(30), || {
        let lag = gw.metric("jmxgate_audit_sink_lag_records");
        if lag == Some(0.0) {
            Ok(())
        } else {
            Err(format!("lag {lag:?}"))
        }
    });
    let log = gw.stop();
    let warned = log
        .iter()
        .filter(|l| l.contains("audit sink cannot deliver"))
        .count();
    assert_eq!(
        warned, 1,
        "one warning per state change, not per retry: {log:#?}"
    );
    assert!(log
        .iter()
        .any(|l| l.contains("audit sink delivering again")));
    rsyslog.stop();
}

/// The directory's disk budget with the collector down: the gateway
/// refuses requests (`on_failure = "closed"`) rather than delete records
/// nobody has yet, says why on `/readyz`, and serves again once the
/// collector is back, has everything and the shipped files are gone.
#[test]
fn a_full_directory_holds_requests_until_the_collector_has_the_records() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new("syslog-full");
    let port = common::free_port();
    let mut rsyslog = Rsyslog::configure(&dir.path().join("rsyslog"), &pki, port);
    // rotate_bytes is 40000 (config_with): two files and a bit exceed it.
    let cfg = config_with(dir.path(), &pki, port, "max_dir_bytes = 90000\n");
    let gw = Gateway::start(&cfg);
    let audit = dir.path().join("audit");
    let read = |gw: &Gateway| {
        reqwest::request(
            "GET",
            &format!(
                "http://{}/jolokia/targets/alpha/read/jmxgate.test:type=Types/Name",
                gw.addr
            ),
        )
        .is_some()
    };
    // Load until the gateway refuses: the budget is reached, nothing shipped.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut answered = 0;
    while read(&gw) {
        answered += 1;
        assert!(
            Instant::now() < deadline,
            "never held after {answered} requests"
        );
    }
    let before = local(&audit);
    let bytes = |dir: &Path| -> u64 {
        jmxgate::audit::chain::files_in(dir)
            .unwrap()
            .iter()
            .map(|f| std::fs::metadata(f).unwrap().len())
            .sum()
    };
    assert!(bytes(&audit) > 90000, "held only beyond the budget");
    let ready = reqwest::blocking_get(&format!("http://{}/readyz", gw.admin));
    assert!(ready.is_none(), "not ready while held");
    assert!(!read(&gw), "still held while the collector is down");
    // The collector comes up: everything arrives, shipped files go, and
    // requests are answered again.
    rsyslog.start();
    common::eventually_blocking("served again", Duration::from_secs(60), || {
        read(&gw)
            .then_some(())
            .ok_or_else(|| "still held".to_string())
    });
    // Every record is at the collector or still here (the sink may not
    // have sent the newest yet): none was deleted unshipped.
    let got: HashSet<u64> = rsyslog.received().iter().map(|r| r.seq).collect();
    let here = local(&audit);
    let lost: Vec<&u64> = before
        .keys()
        .filter(|s| !got.contains(s) && !here.contains_key(s))
        .collect();
    assert!(lost.is_empty(), "records deleted before shipping: {lost:?}");
    assert!(
        jmxgate::audit::chain::files_in(&audit)
            .unwrap()
            .iter()
            .all(|f| jmxgate::audit::chain::first_seq_in_name(f) != Some(0)),
        "the first, shipped file was deleted"
    );
    gw.stop();
    rsyslog.stop();
}
