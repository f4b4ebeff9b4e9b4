//! Test harness: real Jolokia agents (1.7.1 in embedded Jetty through
//! tests/agent/Launcher.java; 2.x JVM agents from ../shared/jolokia through
//! tests/agent/Agent2.java) and an in-process gateway in front of them.
//!
//! `JMXGATE_TEST_AGENT=2.6.0` (or `2.6.1-SNAPSHOT`) makes the shared agents
//! of every suite 2.x agents; `scripts/test.sh` runs the suites once per
//! generation.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::Value;

pub mod hostile;
pub mod otlp_receiver;

/// An HTTP client for tests (rustls needs its crypto provider chosen).
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The classpath of Debian's Jolokia 1.7.1 and Jetty 9 jars
/// (tests/agent/classpath.sh).
pub fn classpath() -> String {
    let out = Command::new("sh")
        .arg(repo().join("tests/agent/classpath.sh"))
        .output()
        .expect("run tests/agent/classpath.sh");
    assert!(
        out.status.success(),
        "the Jolokia agent's jars are missing: {}\nRun scripts/test.sh, which installs them.",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Compiles the launcher once per source version; concurrent test
/// processes race safely through a rename.
fn launcher_classes() -> &'static (PathBuf, String) {
    static CLASSES: OnceLock<(PathBuf, String)> = OnceLock::new();
    CLASSES.get_or_init(|| {
        let cp = classpath();
        let sources: Vec<PathBuf> = [
            "Launcher.java",
            "TestMBeans.java",
            "Agent2.java",
            "ExporterMBeans.java",
        ]
        .iter()
        .map(|f| repo().join("tests/agent").join(f))
        .collect();
        let text: Vec<u8> = sources
            .iter()
            .flat_map(|f| std::fs::read(f).unwrap())
            .collect();
        let stamp = format!("{:x}", fnv(&text));
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("launcher-{stamp}"));
        if !dir.join("Launcher.class").exists() {
            let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"))
                .join(format!("launcher-build-{}-{stamp}", std::process::id()));
            std::fs::create_dir_all(&tmp).unwrap();
            let status = Command::new("javac")
                .args(["-nowarn", "-d"])
                .arg(&tmp)
                .arg("-cp")
                .arg(&cp)
                .args(&sources)
                .status()
                .expect("run javac (Java 17 is needed)");
            assert!(status.success(), "javac failed on tests/agent/*.java");
            let _ = std::fs::rename(&tmp, &dir);
        }
        (dir, cp)
    })
}

/// The first line a child prints, or `None` if none comes in time.
pub fn first_line(out: impl std::io::Read + Send + 'static, timeout: Duration) -> Option<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(out).read_line(&mut line);
        let _ = tx.send(line);
    });
    rx.recv_timeout(timeout).ok()
}

/// The rest of the first line a child prints that starts with `prefix`
/// (earlier lines are skipped, later ones drained), or `None` if none
/// comes in time.
pub fn line_starting(
    out: impl std::io::Read + Send + 'static,
    prefix: &'static str,
    timeout: Duration,
) -> Option<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix(prefix) {
                let _ = tx.send(rest.trim().to_string());
            }
        }
    });
    rx.recv_timeout(timeout).ok()
}

/// Polls `check` until it gives `Ok`, for at most `within`; panics with
/// `what` and the last state otherwise. For waits on background work
/// (reloads, pollers) whose pace depends on how busy the machine is.
pub async fn eventually<T, F, Fut>(what: &str, within: Duration, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    match try_eventually(within, check).await {
        Ok(v) => v,
        Err(state) => panic!("{what}: not so after {within:?}; last: {state}"),
    }
}

/// [`eventually`] that gives up rather than panics: the value, or the
/// last state once `within` has passed. For a wait with something to do
/// when it fails (stop a process, then say what it printed).
pub async fn try_eventually<T, F, Fut>(within: Duration, mut check: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = std::time::Instant::now() + within;
    loop {
        match check().await {
            Ok(v) => return Ok(v),
            Err(state) if std::time::Instant::now() >= deadline => return Err(state),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// [`eventually`] for code outside a runtime: polls on this thread.
pub fn eventually_blocking<T>(
    what: &str,
    within: Duration,
    check: impl FnMut() -> Result<T, String>,
) -> T {
    match try_eventually_blocking(within, check) {
        Ok(v) => v,
        Err(state) => panic!("{what}: not so after {within:?}; last: {state}"),
    }
}

/// [`try_eventually`] for code outside a runtime (a `Drop` that must not
/// panic, say): polls on this thread.
pub fn try_eventually_blocking<T>(
    within: Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    let deadline = std::time::Instant::now() + within;
    loop {
        match check() {
            Ok(v) => return Ok(v),
            Err(state) if std::time::Instant::now() >= deadline => return Err(state),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// One series' value in Prometheus text (an admin listener's `/metrics`,
/// or `Metrics::encode`): `series` is the name with its labels as written
/// (`jmxgate_http_requests_total{status="503"}`); 0 when it is absent.
pub fn metric_value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// An exposition's `k="v",…` with its escapes undone.
pub fn exposition_labels(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if key.is_empty() {
            return out;
        }
        assert_eq!(chars.next(), Some('"'), "{text}");
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(other) => value.push(other),
                    None => {}
                },
                '"' => break,
                c => value.push(c),
            }
        }
        out.push((key.trim_start_matches(',').to_string(), value));
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
}

/// GETs a URL and parses the answer as JSON.
pub async fn get_json(http: &reqwest::Client, url: &str) -> Value {
    parse(&get_text(http, url).await)
}

/// Sends a request and parses its answer as JSON.
pub async fn json_of(request: reqwest::RequestBuilder) -> Value {
    request.send().await.unwrap().json().await.unwrap()
}

/// GETs a URL's text (an admin listener's `/metrics`, say).
pub async fn get_text(http: &reqwest::Client, url: &str) -> String {
    http.get(url).send().await.unwrap().text().await.unwrap()
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100000001b3)
    })
}

/// A JVM small and quick to start, as every test agent runs in. No
/// perf-data file: a reused pid's stale `/tmp/hsperfdata_*` file makes
/// the JVM print a warning where the launcher's READY line belongs.
fn test_jvm() -> Command {
    let mut java = Command::new("java");
    java.args([
        "-XX:-UsePerfData",
        "-Xmx64m",
        "-Xss512k",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
    ]);
    java
}

/// Which Jolokia a test agent runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Generation {
    /// 1.7.1 from Debian, protocol 7.2, in embedded Jetty.
    V1,
    /// The 2.6.0 release, protocol 8.2, as a JVM agent.
    V2,
    /// Upstream main (2.6.1-SNAPSHOT), protocol 8.2, as a JVM agent.
    V2Snapshot,
}

impl Generation {
    /// The generation the suites' shared agents run: `JMXGATE_TEST_AGENT`
    /// (`1.7.1`, `2.6.0`, `2.6.1-SNAPSHOT`), 1.7.1 by default.
    pub fn under_test() -> Generation {
        match std::env::var("JMXGATE_TEST_AGENT").as_deref() {
            Err(_) | Ok("") | Ok("1.7.1") => Generation::V1,
            Ok("2.6.0") => Generation::V2,
            Ok("2.6.1-SNAPSHOT") => Generation::V2Snapshot,
            Ok(other) => panic!("JMXGATE_TEST_AGENT={other}: use 1.7.1, 2.6.0 or 2.6.1-SNAPSHOT"),
        }
    }

    pub fn version(self) -> &'static str {
        match self {
            Generation::V1 => "1.7.1",
            Generation::V2 => "2.6.0",
            Generation::V2Snapshot => "2.6.1-SNAPSHOT",
        }
    }

    pub fn is_v2(self) -> bool {
        self != Generation::V1
    }

    /// The 2.x agent jar: in `JMXGATE_JOLOKIA2_DIR`, else `../shared/jolokia`
    /// beside the repository. `None` for 1.7.1.
    pub fn jar(self) -> Option<PathBuf> {
        if !self.is_v2() {
            return None;
        }
        let dir = std::env::var_os("JMXGATE_JOLOKIA2_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo().join("../shared/jolokia"));
        Some(dir.join(format!("jolokia-agent-jvm-{}.jar", self.version())))
    }

    /// Whether this generation's agent can run here. A missing 2.x jar
    /// fails the test in CI and is reported as a skip elsewhere.
    pub fn available(self) -> bool {
        match self.jar() {
            None => true,
            Some(jar) if jar.is_file() => true,
            Some(jar) => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "no Jolokia {} agent at {} (CI must have ../shared/jolokia)",
                    self.version(),
                    jar.display()
                );
                eprintln!(
                    "SKIPPED: no Jolokia {} agent at {}; set JMXGATE_JOLOKIA2_DIR to a \
                     directory holding jolokia-agent-jvm-{}.jar (Maven Central: \
                     org.jolokia:jolokia-agent-jvm:{}:javaagent)",
                    self.version(),
                    jar.display(),
                    self.version(),
                    self.version()
                );
                false
            }
        }
    }
}

/// With `JMXGATE_TEST_ROLES=1`, a gateway config without roles or
/// authentication of its own gets every caller a role whose policy allows
/// everything but one unrelated attribute: the answers the suites compare
/// with the agent's own then pass through the role-filtered paths (reads
/// of all attributes expanded, lists and searches filtered), and must come
/// out the same.
fn under_a_role(config_body: &str) -> String {
    let wanted = std::env::var("JMXGATE_TEST_ROLES").is_ok_and(|v| v == "1");
    let own = ["[[roles]]", "[access]", "auth =", "auth=", "[auth"]
        .iter()
        .any(|k| config_body.contains(k));
    if !wanted || own {
        return String::new();
    }
    static POLICY: OnceLock<PathBuf> = OnceLock::new();
    let policy = POLICY.get_or_init(|| {
        let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("allow-nearly-all-{}.xml", std::process::id()));
        std::fs::write(
            &path,
            "<restrict><deny><mbean><name>jmxgate.nowhere:type=None</name>\
             <attribute>Nothing</attribute></mbean></deny></restrict>",
        )
        .unwrap();
        path
    });
    format!(
        "\n[access]\nanonymous_role = \"everyone\"\n\n[[roles]]\nname = \"everyone\"\n\
         targets = [\"*\"]\npolicy = \"{}\"\n",
        policy.display()
    )
}

/// A running Jolokia agent. Dropping it closes its stdin, which stops it.
pub struct Agent {
    pub port: u16,
    pub name: String,
    pub generation: Generation,
    base_url: String,
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Agent {
    /// An agent of the generation under test (see `Generation::under_test`).
    pub fn start(name: &str) -> Agent {
        match Generation::under_test() {
            Generation::V1 => Agent::start_with(name, &[]),
            generation => Agent::start_v2(generation, name, &[]),
        }
    }

    /// A Jolokia 2.x JVM agent with the test MBeans; `options` are agent
    /// options (`user=u`, `policyLocation=file:///…`). Panics when its jar
    /// is missing: check `Generation::available` first.
    pub fn start_v2(generation: Generation, name: &str, options: &[&str]) -> Agent {
        Agent::launch_v2(generation, name, options, &[], &[])
    }

    /// A test JVM of `generation` with more JVM options (another
    /// `-javaagent`) and more arguments for its main class
    /// (`--exporter-mbeans true`).
    pub fn start_in_jvm(
        generation: Generation,
        name: &str,
        jvm_options: &[String],
        args: &[&str],
    ) -> Agent {
        match generation {
            Generation::V1 => Agent::launch_v1(name, jvm_options, args),
            g => Agent::launch_v2(g, name, &[], jvm_options, args),
        }
    }

    fn launch_v2(
        generation: Generation,
        name: &str,
        options: &[&str],
        jvm_options: &[String],
        args: &[&str],
    ) -> Agent {
        let jar = generation.jar().expect("a 2.x generation");
        let (classes, _) = launcher_classes();
        let mut agent_options = vec!["port=0", "host=127.0.0.1", "discoveryEnabled=false"];
        agent_options.extend(options);
        let mut child = test_jvm()
            .args(jvm_options)
            .arg(format!(
                "-javaagent:{}={}",
                jar.display(),
                agent_options.join(",")
            ))
            .arg("-cp")
            .arg(classes)
            .arg("Agent2")
            .args(["--name", name])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start java");
        let line = line_starting(
            child.stdout.take().unwrap(),
            "READY url=",
            Duration::from_secs(60),
        )
        .unwrap_or_else(|| {
            panic!(
                "Jolokia {} agent did not start within 60 s",
                generation.version()
            )
        });
        let base_url = line.trim_end_matches('/').to_string();
        let port = url::Url::parse(&base_url)
            .ok()
            .and_then(|u| u.port())
            .unwrap_or_else(|| panic!("unexpected agent URL {base_url:?}"));
        Agent {
            port,
            name: name.to_string(),
            generation,
            base_url,
            stdin: child.stdin.take(),
            child,
        }
    }

    /// A 1.7.1 agent in embedded Jetty; `extra` are Launcher flags.
    pub fn start_with(name: &str, extra: &[&str]) -> Agent {
        Agent::launch_v1(name, &[], extra)
    }

    fn launch_v1(name: &str, jvm_options: &[String], extra: &[&str]) -> Agent {
        let (classes, cp) = launcher_classes();
        let mut child = test_jvm()
            .args(jvm_options)
            .arg("-cp")
            .arg(format!("{}:{cp}", classes.display()))
            .arg("Launcher")
            .args(["--name", name])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start java");
        // JVM warnings may come first; the READY line is what counts.
        let line = line_starting(
            child.stdout.take().unwrap(),
            "READY port=",
            Duration::from_secs(60),
        )
        .expect("agent did not report READY within 60 s");
        let port = line
            .parse()
            .unwrap_or_else(|_| panic!("unexpected launcher output READY port={line:?}"));
        Agent {
            port,
            name: name.to_string(),
            generation: Generation::V1,
            base_url: format!("http://127.0.0.1:{port}/jolokia"),
            stdin: child.stdin.take(),
            child,
        }
    }

    /// A 1.7.1 agent listening on `host` only (any 127.0.0.0/8 address
    /// is this machine: a stand-in for a Pod's IP).
    pub fn start_at(name: &str, host: &str) -> Agent {
        Agent::start_at_with(name, host, &[])
    }

    /// A 1.7.1 agent listening on `host` only, with more Launcher flags
    /// (`--user u --password p`).
    pub fn start_at_with(name: &str, host: &str, extra: &[&str]) -> Agent {
        let mut args = vec!["--host", host];
        args.extend_from_slice(extra);
        let mut agent = Agent::launch_v1(name, &[], &args);
        agent.base_url = format!("http://{host}:{}/jolokia", agent.port);
        agent
    }

    pub fn url(&self) -> String {
        self.base_url.clone()
    }

    /// An HTTPS agent with a certificate for `host` from `pki`; with
    /// `client_ca`, it requires client certificates signed by `pki`.
    pub fn start_https(
        name: &str,
        pki: &TestPki,
        host: &str,
        client_ca: bool,
        extra: &[&str],
    ) -> Agent {
        let (cert, key) = pki.server_cert(host);
        let ca = pki.ca_file();
        let mut args = vec![
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ];
        if client_ca {
            args.extend(["--tls-client-ca", ca.to_str().unwrap()]);
        }
        args.extend(extra);
        Agent::start_with(name, &args)
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Three agents shared by the tests of one test binary (they stop when the
/// binary exits and their stdin closes). Tests must not depend on state
/// another test changes: writes go to dedicated agents.
pub fn shared_agents() -> &'static [Agent; 3] {
    static AGENTS: OnceLock<[Agent; 3]> = OnceLock::new();
    AGENTS.get_or_init(|| {
        let handles: Vec<_> = ["alpha", "beta", "gamma"]
            .into_iter()
            .map(|n| std::thread::spawn(move || Agent::start(n)))
            .collect();
        let agents: Vec<Agent> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        agents.try_into().ok().unwrap()
    })
}

/// A users file for `[auth.basic]`: one user per (name, password, roles).
pub fn users_file(dir: &Path, users: &[(&str, &str, &[&str])]) -> PathBuf {
    let path = dir.join("users.toml");
    let text: String = users
        .iter()
        .map(|(name, password, roles)| {
            let hash = jmxgate::pipeline::authenticate::basic::hash_password(password).unwrap();
            format!("[[users]]\nname = \"{name}\"\npassword_hash = \"{hash}\"\nroles = {roles:?}\n")
        })
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

/// A gateway config body with Basic authentication against `users` and
/// the given `[[targets]]` (and anything else) in `rest`.
pub fn basic_auth_config(users: &Path, rest: &str) -> String {
    format!(
        "auth = [\"basic\"]\n{rest}\n[auth.basic]\nusers_file = \"{}\"\n",
        users.display()
    )
}

/// Every line of the audit files in `dir`, in order.
pub fn audit_lines(dir: &Path) -> Vec<String> {
    jmxgate::audit::chain::lines_in(dir).unwrap()
}

/// Every record of the audit files in `dir`, in order; a line that is not
/// JSON fails the test.
pub fn audit_records(dir: &Path) -> Vec<Value> {
    audit_lines(dir).iter().map(|l| parse(l)).collect()
}

/// A port that refuses connections for as long as the test runs: it stays
/// bound without listening, so no agent or gateway a parallel test starts
/// can take it (a port only free when asked was once taken by another
/// test's agent, which then answered for a "dead" target).
pub fn dead_port() -> u16 {
    static HELD: std::sync::Mutex<Vec<socket2::Socket>> = std::sync::Mutex::new(Vec::new());
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    socket.bind(&any.into()).unwrap();
    let port = socket.local_addr().unwrap().as_socket().unwrap().port();
    HELD.lock().unwrap().push(socket);
    port
}

/// A port free now for a child process to listen on. Taken below the
/// kernel's ephemeral range (32768 and up by default), where the suite's
/// own outgoing connections would otherwise take it between this check
/// and the child's bind (a JVM that then exits without a word).
///
/// Claimed across the suite's test processes with a lock file held until
/// this process ends: two processes once handed out the same port, and
/// the second JVM to bind it failed its start.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    static CLAIMS: std::sync::Mutex<Vec<std::fs::File>> = std::sync::Mutex::new(Vec::new());
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    let claims_dir = std::env::temp_dir().join("jmxgate-test-ports");
    std::fs::create_dir_all(&claims_dir).unwrap();
    // Spread over the range by process, so parallel processes rarely
    // contend for the same lock files.
    let start = std::process::id() % SPAN;
    for _ in 0..SPAN {
        let step = NEXT.fetch_add(7, Ordering::Relaxed) % SPAN;
        let port = (LOW + (start + step) % SPAN) as u16;
        let Ok(claim) = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(claims_dir.join(port.to_string()))
        else {
            continue;
        };
        if claim.try_lock().is_err() {
            continue;
        }
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            CLAIMS.lock().unwrap().push(claim);
            return port;
        }
    }
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Writes `dir/gateway.toml`: `[server]` listening on a free local port,
/// then `rest` (more `[server]` keys, or further sections).
pub fn gateway_toml(dir: &Path, rest: &str) -> PathBuf {
    let path = dir.join("gateway.toml");
    std::fs::write(&path, format!("[server]\nlisten = \"127.0.0.1:0\"\n{rest}")).unwrap();
    path
}

/// `[[targets]]` entries for agents, named by agent name.
pub fn targets_toml(agents: &[&Agent]) -> String {
    agents
        .iter()
        .map(|a| {
            format!(
                "[[targets]]\nname = \"{}\"\nurl = \"{}\"\nlabels = {{ role = \"test\" }}\n\n",
                a.name,
                a.url()
            )
        })
        .collect()
}

/// A gateway running in this test's runtime.
pub struct Gateway {
    pub addr: SocketAddr,
    pub http: reqwest::Client,
    pub gateway: Arc<jmxgate::Gateway>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Gateway {
    /// Starts an HTTPS-only gateway; `tls` holds the `[server.tls]` keys
    /// other than `listen`. `addr` is the TLS listener's.
    pub async fn start_tls(tls: &str, config_body: &str) -> Gateway {
        Gateway::start_tls_with("", tls, config_body).await
    }

    /// [`start_tls`](Self::start_tls) with more `[server]` keys
    /// (`auth = [...]`).
    pub async fn start_tls_with(server: &str, tls: &str, config_body: &str) -> Gateway {
        let text = format!(
            "{config_body}\n[server]\n{server}\n[server.tls]\nlisten = \"127.0.0.1:0\"\n{tls}\n"
        );
        let config = jmxgate::Config::parse(&text)
            .and_then(|c| c.validate())
            .unwrap_or_else(|e| panic!("bad test config: {e:?}\n{text}"));
        Gateway::serve(&config).await
    }

    /// Waits until the access-request store has opened (its task opens
    /// it after start; until then the access API answers 503).
    pub async fn access_store_opened(&self) {
        eventually(
            "the access store opens",
            Duration::from_secs(60),
            || async {
                match jmxgate::doors::access::access_store_trouble(&self.gateway) {
                    None => Ok(()),
                    Some(why) => Err(why),
                }
            },
        )
        .await;
    }

    /// Starts a gateway from config text; `listen` is filled in.
    pub async fn start(config_body: &str) -> Gateway {
        let text = format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n{config_body}{}",
            under_a_role(config_body)
        );
        let config = jmxgate::Config::parse(&text)
            .and_then(|c| c.validate())
            .unwrap_or_else(|e| panic!("bad test config: {e:?}\n{text}"));
        Gateway::serve(&config).await
    }

    /// Starts a gateway from a config file (relative paths resolved).
    pub async fn start_from_file(path: &Path) -> Gateway {
        let config = jmxgate::Config::load(path).unwrap_or_else(|e| panic!("{e}"));
        Gateway::serve(&config).await
    }

    async fn serve(config: &jmxgate::Config) -> Gateway {
        let gateway = Arc::new(jmxgate::Gateway::new(config).expect("gateway starts"));
        // As `jmxgate serve` does; the task ends with the gateway.
        // Subscribed first: every event the probes record is told.
        let _event_webhooks = jmxgate::jobs::webhooks::spawn_event_webhooks(&gateway);
        let _probes = jmxgate::jobs::probes::spawn(&gateway);
        let _access_store = jmxgate::doors::access::spawn_access_store(&gateway);
        let _otlp = jmxgate::jobs::otlp::spawn_otlp_exports(&gateway);
        if let Some(tls) = &config.server.tls {
            let reloading =
                Arc::new(jmxgate::tls::ReloadingTls::new(tls.clone()).expect("TLS config loads"));
            let listener = jmxgate::tls::TlsListener::bind(reloading).await.unwrap();
            let addr = axum::serve::Listener::local_addr(&listener).unwrap();
            let (tx, rx) = tokio::sync::oneshot::channel();
            tokio::spawn(jmxgate::pipeline::listen::serve_tls(
                listener,
                gateway.clone(),
                async {
                    let _ = rx.await;
                },
            ));
            return Gateway {
                addr,
                http: http_client(),
                gateway,
                shutdown: Some(tx),
            };
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(jmxgate::pipeline::listen::serve(
            listener,
            gateway.clone(),
            async {
                let _ = rx.await;
            },
        ));
        Gateway {
            addr,
            http: http_client(),
            gateway,
            shutdown: Some(tx),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = self.http.get(self.url(path)).send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        (status, parse(&text))
    }

    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        post_json(&self.http, &self.url(path), body).await
    }

    /// One series of this gateway's metrics, as `/metrics` shows it (see
    /// [`metric_value`]).
    pub fn metric(&self, series: &str) -> f64 {
        metric_value(&self.gateway.metrics().encode(), series)
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

pub async fn post_json(http: &reqwest::Client, url: &str, body: &Value) -> (u16, Value) {
    let r = http
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, parse(&text))
}

pub fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Sends a request straight to an agent, as the gateway would forward it.
pub async fn direct(agent: &Agent, body: &Value) -> Value {
    post_json(&http_client(), &agent.url(), body).await.1
}

/// Drops the fields that legitimately differ between two answers to the
/// same request (time of answer, and the echo, which the gateway sets from
/// the client's own request).
pub fn comparable(mut v: Value) -> Value {
    match &mut v {
        Value::Array(items) => {
            for i in items {
                *i = comparable(i.take());
            }
        }
        Value::Object(o) => {
            o.remove("timestamp");
            o.remove("request");
        }
        _ => {}
    }
    v
}

/// A certificate authority made for one test, with PEM files on disk.
pub struct TestPki {
    pub dir: tempfile::TempDir,
    issuer: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
}

impl TestPki {
    pub fn new(name: &str) -> TestPki {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("{name} test CA"));
        let key = rcgen::KeyPair::generate().unwrap();
        let issuer = rcgen::CertifiedIssuer::self_signed(params, key).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), issuer.pem()).unwrap();
        TestPki { dir, issuer }
    }

    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// Issues a client certificate with this CN (expired if asked).
    pub fn client_cert(&self, cn: &str, expired: bool) -> (PathBuf, PathBuf) {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        static SERIAL: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cert_path = self.dir.path().join(format!("client-{cn}-{n}.pem"));
        let key_path = self.dir.path().join(format!("client-{cn}-{n}.key"));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        (cert_path, key_path)
    }

    /// An HTTPS client trusting this CA, presenting `identity` if given.
    pub fn https_client(&self, identity: Option<&(PathBuf, PathBuf)>) -> reqwest::Client {
        use rustls_pki_types::pem::PemObject;
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut roots = rustls::RootCertStore::empty();
        for c in rustls_pki_types::CertificateDer::pem_file_iter(self.ca_file()).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
        let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
        let config = match identity {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let certs: Vec<_> = rustls_pki_types::CertificateDer::pem_file_iter(cert)
                    .unwrap()
                    .map(|c| c.unwrap())
                    .collect();
                let key = rustls_pki_types::PrivateKeyDer::from_pem_file(key).unwrap();
                builder.with_client_auth_cert(certs, key).unwrap()
            }
        };
        reqwest::Client::builder()
            .tls_backend_preconfigured(config)
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap()
    }

    /// Issues a server certificate for 127.0.0.1 and localhost; returns the
    /// certificate and key file paths.
    pub fn server_cert(&self, name: &str) -> (PathBuf, PathBuf) {
        let mut params =
            rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
                .unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let cert_path = self.dir.path().join(format!("{name}.pem"));
        let key_path = self.dir.path().join(format!("{name}.key"));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        (cert_path, key_path)
    }
}

/// `jmxgate serve`'s HTTP address, read from its log lines: it says
/// "listening on http://ADDR/jolokia" once it listens.
pub fn listening_address(lines: impl IntoIterator<Item = std::io::Result<String>>) -> String {
    for line in lines {
        let line = line.expect("serve's log is readable");
        if let Some(rest) = line.split("listening on http://").nth(1) {
            return rest.split('/').next().unwrap().to_string();
        }
    }
    panic!("serve ended without saying where it listens");
}

/// A `jmxgate serve` process: its HTTP address and its log lines
/// (stderr), collected as they come.
pub struct GatewayProcess {
    pub child: Child,
    pub addr: String,
    log: std::sync::mpsc::Receiver<String>,
}

impl GatewayProcess {
    /// Starts `jmxgate serve --config CONFIG` with `RUST_LOG=rust_log`.
    pub fn start(config: &Path, rust_log: &str) -> GatewayProcess {
        Self::start_command(
            Command::new(env!("CARGO_BIN_EXE_jmxgate")),
            config,
            rust_log,
        )
    }

    /// [`start`](Self::start) with the open-files limit at `soft` under
    /// `hard`, as a service manager would start it.
    pub fn start_with_open_files(
        config: &Path,
        rust_log: &str,
        soft: u64,
        hard: u64,
    ) -> GatewayProcess {
        use std::os::unix::process::CommandExt;
        let mut command = Command::new(env!("CARGO_BIN_EXE_jmxgate"));
        // SAFETY: setrlimit is async-signal-safe and touches only the child.
        unsafe {
            command.pre_exec(move || {
                let limit = libc::rlimit {
                    rlim_cur: soft as libc::rlim_t,
                    rlim_max: hard as libc::rlim_t,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Self::start_command(command, config, rust_log)
    }

    fn start_command(mut command: Command, config: &Path, rust_log: &str) -> GatewayProcess {
        let mut child = command
            .args(["serve", "--config"])
            .arg(config)
            .env("RUST_LOG", rust_log)
            .env("NO_COLOR", "1")
            .env("RUST_BACKTRACE", "0")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start jmxgate serve");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let (tx, log) = std::sync::mpsc::channel();
        // The lines before the address stay readable (start-up warnings).
        let addr = listening_address(lines.by_ref().inspect(|line| {
            if let Ok(line) = line {
                let _ = tx.send(line.clone());
            }
        }));
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        GatewayProcess { child, addr, log }
    }

    /// Waits for a log line that contains `text`; the lines before it are
    /// dropped.
    /// Every line up to and including the first that contains `text`,
    /// `None` when none does within `within`.
    pub fn lines_until(&self, text: &str, within: Duration) -> Option<Vec<String>> {
        let deadline = std::time::Instant::now() + within;
        let mut lines = Vec::new();
        loop {
            let left = deadline.checked_duration_since(std::time::Instant::now())?;
            let line = self.log.recv_timeout(left).ok()?;
            let found = line.contains(text);
            lines.push(line);
            if found {
                return Some(lines);
            }
        }
    }

    pub fn wait_for_line(&self, text: &str, within: Duration) -> Option<String> {
        let deadline = std::time::Instant::now() + within;
        loop {
            let left = deadline.checked_duration_since(std::time::Instant::now())?;
            match self.log.recv_timeout(left) {
                Ok(line) if line.contains(text) => return Some(line),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }

    /// Stops it with SIGTERM; checks it exits cleanly and returns every
    /// log line it wrote after starting.
    pub fn stop(mut self) -> Vec<String> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "jmxgate serve exited with {status}");
        self.log.iter().collect()
    }
}

/// A test that fails before `stop` leaves no gateway running.
impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Gateway {
    /// Waits until the health probe has reported every target's protocol
    /// (what decides, for example, how an attribute's error is written in
    /// its place). Needs a caller that may list targets.
    pub async fn wait_until_probed(&self) {
        eventually(
            "every target's protocol is probed",
            Duration::from_secs(60),
            || async {
                let (_, r) = self.get("/jolokia/targets").await;
                if r["value"].as_array().is_some_and(|ts| {
                    !ts.is_empty() && ts.iter().all(|t| t["agent"]["protocol"].is_string())
                }) {
                    Ok(())
                } else {
                    Err(r.to_string())
                }
            },
        )
        .await;
    }
}

/// What an agent of `generation` puts in place of an attribute its
/// restrictor denies, with `ignoreErrors`.
pub fn denied_attribute_value(generation: Generation, attribute: &str, mbean: &str) -> Value {
    let message = format!("Reading attribute {attribute} is forbidden for MBean {mbean}");
    if generation.is_v2() {
        serde_json::json!({"error_type": "java.lang.SecurityException", ".error": true, "error": message})
    } else {
        Value::String(format!(
            "ERROR: {message} (class java.lang.SecurityException)"
        ))
    }
}

/// Runs a client program to its end (or kills it after `limit`) without
/// blocking the runtime the gateway serves on; panics with its output
/// unless it exits 0. Returns its standard output and error.
pub async fn run_client(mut cmd: Command, limit: Duration) -> (String, String) {
    use std::io::Read;
    let shown = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {shown}: {e}"));
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let ended = try_eventually(limit, || {
        let status = child.try_wait().unwrap();
        async move { status.ok_or_else(|| "still running".to_string()) }
    })
    .await;
    let status = match ended {
        Ok(status) => Some(status),
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            None
        }
    };
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    match status {
        Some(s) if s.success() => (out, err),
        Some(s) => panic!("{shown} failed ({s}):\n--- stdout\n{out}\n--- stderr\n{err}"),
        None => panic!("{shown} still ran after {limit:?}:\n--- stdout\n{out}\n--- stderr\n{err}"),
    }
}

/// Debian's Chromium, which the browser tests drive.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// tests/clients/hawtio: Hawtio's console and playwright-core from npm.
pub fn hawtio_dir() -> PathBuf {
    repo().join("tests/clients/hawtio")
}

/// Whether Hawtio's packages and Debian's Chromium are here; outside CI
/// a missing one skips the test with a message, in CI it fails it.
pub fn hawtio_available() -> bool {
    let missing: Vec<String> = [
        (
            hawtio_dir().join("node_modules/@hawtio/react/package.json"),
            "npm ci in tests/clients/hawtio",
        ),
        (
            hawtio_dir().join("node_modules/playwright-core/package.json"),
            "npm ci in tests/clients/hawtio",
        ),
        (PathBuf::from(CHROMIUM), "Debian package chromium"),
    ]
    .iter()
    .filter(|(p, _)| !p.exists())
    .map(|(p, what)| format!("{} ({what})", p.display()))
    .collect();
    if missing.is_empty() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "missing: {}; run scripts/install-deps.sh",
        missing.join(", ")
    );
    eprintln!(
        "SKIPPED: missing {}; run scripts/install-deps.sh",
        missing.join(", ")
    );
    false
}

/// Two tenants: `ann` (role `a`: target alpha, `<cors>` admits only
/// https://good.example.com and http://pages.example.com) and `bob` (role
/// `b`: target beta, no `<cors>`, so any origin), `carol`, who holds both
/// roles, and `eve`, who holds no configured role; with an audit log.
/// `server` goes into `[server]`.
pub fn tenants_config(dir: &std::path::Path, server: &str) -> String {
    let [a, b, ..] = shared_agents();
    let users = users_file(
        dir,
        &[
            ("ann", "ann-pw", &["a"]),
            ("bob", "bob-pw", &["b"]),
            ("carol", "carol-pw", &["a", "b"]),
            ("eve", "eve-pw", &["no-such-role"]),
        ],
    );
    let policy = |name: &str, body: &str| {
        let path = dir.join(format!("{name}.xml"));
        std::fs::write(&path, format!("<restrict>{body}</restrict>")).unwrap();
        path.display().to_string()
    };
    let pa = policy(
        "a",
        "<cors><allow-origin>https://good.example.com</allow-origin>\
         <allow-origin>http://pages.example.com</allow-origin></cors>",
    );
    let pb = policy("b", "");
    basic_auth_config(
        &users,
        &format!(
            "{server}\n{}[[roles]]\nname = \"a\"\ntargets = [\"alpha\"]\npolicy = \"{pa}\"\n\n\
             [[roles]]\nname = \"b\"\ntargets = [\"beta\"]\npolicy = \"{pb}\"\n\n\
             [audit]\ndir = \"{}\"\n",
            targets_toml(&[a, b]),
            dir.join("audit").display()
        ),
    )
}

pub fn header<'a>(resp: &'a reqwest::Response, name: &str) -> Option<&'a str> {
    resp.headers().get(name).map(|v| v.to_str().unwrap())
}
