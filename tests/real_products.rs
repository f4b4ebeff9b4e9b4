//! The Prometheus door against real products, with jmx_exporter as the
//! oracle: Debian's Tomcat 10, ZooKeeper and ActiveMQ, each in a JVM of
//! its own with jmx_exporter's Java agent (../shared/prometheus) and a
//! Jolokia agent (1.7.1, Debian's AgentServlet in Jetty through
//! tests/agent/Jolokia1JvmAgent.java, or the 2.6.0 JVM agent from
//! ../shared/jolokia) side by side. The gateway's answer for jmx_exporter's
//! own example rules file, and for no rules, must hold every series
//! jmx_exporter's `/metrics` holds, and no other.
//!
//! This file covers both agent generations itself, so scripts/test.sh runs
//! it in the 1.7.1 pass only.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{Gateway, Generation};
use serde_json::json;

/// The JVMs start on a busy 2-core machine: generous.
const START_WITHIN: Duration = Duration::from_secs(180);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn shared(path: &str) -> PathBuf {
    repo().join("../shared").join(path)
}

/// What a test needs that may be missing outside CI: in CI a failure,
/// elsewhere a reported skip.
fn present(what: &str, path: &Path) -> bool {
    if path.exists() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "no {what} at {} (scripts/install-deps.sh installs it)",
        path.display()
    );
    eprintln!("SKIPPED: no {what} at {}", path.display());
    false
}

fn exporter_jar() -> PathBuf {
    std::env::var_os("JMXGATE_JMX_EXPORTER_JAR")
        .map(PathBuf::from)
        .unwrap_or_else(|| shared("prometheus/jmx_prometheus_javaagent-1.6.0.jar"))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Product {
    Tomcat,
    ZooKeeper,
    ActiveMq,
}

impl Product {
    /// jmx_exporter's own example for it, unchanged.
    fn example_rules(self) -> PathBuf {
        shared(match self {
            Product::Tomcat => "prometheus/examples/tomcat.yml",
            Product::ZooKeeper => "prometheus/examples/zookeeper.yaml",
            Product::ActiveMq => "prometheus/examples/activemq.yml",
        })
    }

    /// A file of the Debian package the product's JVM is started from.
    fn installed_file(self) -> &'static str {
        match self {
            Product::Tomcat => "/usr/share/tomcat10/bin/bootstrap.jar",
            Product::ZooKeeper => "/usr/share/java/zookeeper.jar",
            Product::ActiveMq => "/usr/share/activemq/bin/activemq.jar",
        }
    }

    /// MBeans that exist once the product has started.
    fn started_pattern(self) -> &'static str {
        match self {
            // Registered as the connector starts, after the web apps.
            Product::Tomcat => "Catalina:type=GlobalRequestProcessor,*",
            Product::ZooKeeper => "org.apache.ZooKeeperService:name1=InMemoryDataTree,*",
            Product::ActiveMq => "org.apache.activemq:destinationName=jmxgate.topic,*",
        }
    }

    /// Writes the product's configuration into `dir` and gives the main
    /// class (or `-jar`) and its arguments, plus its own port if it has
    /// one to be requested once started.
    fn prepare(self, dir: &Path) -> (Vec<String>, Option<u16>) {
        let d = dir.display();
        match self {
            Product::Tomcat => {
                for sub in ["conf", "logs", "temp", "work", "webapps/ROOT"] {
                    std::fs::create_dir_all(dir.join(sub)).unwrap();
                }
                let port = common::free_port();
                // No shutdown port; a connector on loopback only (so its
                // beans are named `http-nio-127.0.0.1-PORT`, which the
                // example's connector rules don't match: jmx_exporter
                // says so too).
                std::fs::write(
                    dir.join("conf/server.xml"),
                    format!(
                        "<Server port=\"-1\" shutdown=\"SHUTDOWN\"><Service name=\"Catalina\">\
                         <Connector port=\"{port}\" address=\"127.0.0.1\" protocol=\"HTTP/1.1\"/>\
                         <Engine name=\"Catalina\" defaultHost=\"localhost\">\
                         <Host name=\"localhost\" appBase=\"webapps\" unpackWARs=\"false\" \
                         autoDeploy=\"false\"/></Engine></Service></Server>\n"
                    ),
                )
                .unwrap();
                // Debian's default web.xml: the default and JSP servlets.
                std::fs::copy("/etc/tomcat10/web.xml", dir.join("conf/web.xml"))
                    .expect("/etc/tomcat10/web.xml (Debian's tomcat10)");
                std::fs::write(dir.join("webapps/ROOT/index.html"), "<p>jmxgate</p>\n").unwrap();
                (
                    vec![
                        "-Dcatalina.home=/usr/share/tomcat10".into(),
                        format!("-Dcatalina.base={d}"),
                        format!("-Djava.io.tmpdir={d}/temp"),
                        "-cp".into(),
                        "/usr/share/tomcat10/bin/bootstrap.jar:/usr/share/tomcat10/bin/tomcat-juli.jar"
                            .into(),
                        "org.apache.catalina.startup.Bootstrap".into(),
                        "start".into(),
                    ],
                    Some(port),
                )
            }
            Product::ZooKeeper => {
                std::fs::create_dir_all(dir.join("data")).unwrap();
                let port = common::free_port();
                // Standalone, no AdminServer (Jetty on a port of its own).
                std::fs::write(
                    dir.join("zoo.cfg"),
                    format!(
                        "dataDir={d}/data\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
                         admin.enableServer=false\ntickTime=2000\n"
                    ),
                )
                .unwrap();
                (
                    vec![
                        "-cp".into(),
                        "/usr/share/java/zookeeper.jar".into(),
                        "org.apache.zookeeper.server.ZooKeeperServerMain".into(),
                        format!("{d}/zoo.cfg"),
                    ],
                    None,
                )
            }
            Product::ActiveMq => {
                std::fs::create_dir_all(dir.join("conf")).unwrap();
                std::fs::create_dir_all(dir.join("data")).unwrap();
                // A broker in memory with a queue and a topic (the rules'
                // destinations), JMX in the platform MBean server only.
                std::fs::write(
                    dir.join("conf/activemq.xml"),
                    "<beans xmlns=\"http://www.springframework.org/schema/beans\" \
                     xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" \
                     xsi:schemaLocation=\"http://www.springframework.org/schema/beans \
                     http://www.springframework.org/schema/beans/spring-beans-2.0.xsd \
                     http://activemq.apache.org/schema/core \
                     http://activemq.apache.org/schema/core/activemq-core.xsd\">\
                     <broker xmlns=\"http://activemq.apache.org/schema/core\" useJmx=\"true\" \
                     brokerName=\"localhost\" persistent=\"false\" useShutdownHook=\"false\">\
                     <managementContext><managementContext createConnector=\"false\"/>\
                     </managementContext><destinations><queue physicalName=\"jmxgate.queue\"/>\
                     <topic physicalName=\"jmxgate.topic\"/></destinations>\
                     <transportConnectors><transportConnector name=\"openwire\" \
                     uri=\"tcp://127.0.0.1:0\"/></transportConnectors></broker></beans>\n",
                )
                .unwrap();
                (
                    vec![
                        "-Dactivemq.home=/usr/share/activemq".into(),
                        format!("-Dactivemq.base={d}"),
                        format!("-Dactivemq.conf={d}/conf"),
                        format!("-Dactivemq.data={d}/data"),
                        "-jar".into(),
                        "/usr/share/activemq/bin/activemq.jar".into(),
                        "start".into(),
                        format!("xbean:file:{d}/conf/activemq.xml"),
                    ],
                    None,
                )
            }
        }
    }
}

/// tests/agent/Jolokia1JvmAgent.java as a `-javaagent` jar whose manifest
/// names Debian's Jolokia 1.7.1 and Jetty 9 jars; built once per source
/// version (concurrent test processes race safely through a rename).
fn jolokia1_agent_jar() -> &'static PathBuf {
    static JAR: OnceLock<PathBuf> = OnceLock::new();
    JAR.get_or_init(|| {
        let source = repo().join("tests/agent/Jolokia1JvmAgent.java");
        let out = Command::new("sh")
            .arg(repo().join("tests/agent/classpath.sh"))
            .output()
            .expect("run tests/agent/classpath.sh");
        assert!(
            out.status.success(),
            "Jolokia 1.7.1's jars are missing: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let cp = String::from_utf8(out.stdout).unwrap().trim().to_string();
        let text = std::fs::read(&source).unwrap();
        let stamp = format!(
            "{:x}",
            text.iter()
                .chain(cp.as_bytes())
                .fold(0xcbf29ce484222325u64, |h, b| {
                    (h ^ u64::from(*b)).wrapping_mul(0x100000001b3)
                })
        );
        let tmp_root = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let jar = tmp_root.join(format!("jolokia1-agent-{stamp}.jar"));
        if jar.is_file() {
            return jar;
        }
        let build = tmp_root.join(format!("jolokia1-agent-build-{}", std::process::id()));
        let classes = build.join("classes");
        std::fs::create_dir_all(&classes).unwrap();
        let status = Command::new("javac")
            .args(["-nowarn", "-d"])
            .arg(&classes)
            .arg("-cp")
            .arg(&cp)
            .arg(&source)
            .status()
            .expect("run javac (Java 17 is needed)");
        assert!(status.success(), "javac failed on {}", source.display());
        let manifest = build.join("manifest.txt");
        std::fs::write(
            &manifest,
            format!(
                "Premain-Class: Jolokia1JvmAgent\nClass-Path: {}\n",
                cp.replace(':', " ")
            ),
        )
        .unwrap();
        let built = build.join("agent.jar");
        let status = Command::new("jar")
            .arg("--create")
            .arg("--file")
            .arg(&built)
            .arg("--manifest")
            .arg(&manifest)
            .arg("-C")
            .arg(&classes)
            .arg(".")
            .status()
            .expect("run jar (Java 17's JDK)");
        assert!(status.success(), "jar failed on {}", classes.display());
        let _ = std::fs::rename(&built, &jar);
        let _ = std::fs::remove_dir_all(&build);
        jar
    })
}

/// A product's JVM with jmx_exporter's agent (reading `rules`) and a
/// Jolokia agent of `generation`. Dropping it kills the JVM.
struct ProductJvm {
    /// The shell running the JVM; closing `stdin` stops both.
    child: Child,
    stdin: Option<ChildStdin>,
    dir: tempfile::TempDir,
    exporter_url: String,
    jolokia_url: String,
    product_port: Option<u16>,
}

impl ProductJvm {
    /// Starts the JVM; `rules` is the text of jmx_exporter's config file.
    /// Returns once the product's MBeans are there and both agents answer.
    async fn start(product: Product, generation: Generation, rules: &str) -> ProductJvm {
        let dir = tempfile::tempdir().unwrap();
        let rules_path = dir.path().join("exporter.yml");
        std::fs::write(&rules_path, rules).unwrap();
        let (exporter_port, jolokia_port) = (common::free_port(), common::free_port());
        let jolokia_agent = match generation {
            Generation::V1 => format!(
                "-javaagent:{}=port={jolokia_port},host=127.0.0.1",
                jolokia1_agent_jar().display()
            ),
            g => {
                let mut options =
                    format!("port={jolokia_port},host=127.0.0.1,discoveryEnabled=false");
                // ZooKeeper brings Jetty 9; the 2.x agent's server
                // detectors then fail its start (../shared/prometheus/README.md).
                if product == Product::ZooKeeper {
                    options.push_str(",disableDetectors=true");
                }
                format!("-javaagent:{}={options}", g.jar().unwrap().display())
            }
        };
        let (main, product_port) = product.prepare(dir.path());
        let log = std::fs::File::create(dir.path().join("jvm.log")).unwrap();
        // Through a shell that stops the JVM when its stdin closes, so a
        // test process that dies (a timeout's kill) leaves no JVM behind;
        // the shell itself ends when the JVM does.
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(STOP_ON_STDIN_EOF)
            .arg("sh")
            .arg("java")
            .args([
                "-XX:-UsePerfData",
                "-Xmx128m",
                "-Xss512k",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
            ])
            .arg(format!(
                "-javaagent:{}=127.0.0.1:{exporter_port}:{}",
                exporter_jar().display(),
                rules_path.display()
            ))
            .arg(jolokia_agent)
            .args(&main)
            .current_dir(dir.path())
            .stdin(Stdio::piped())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start sh and java");
        let mut jvm = ProductJvm {
            stdin: child.stdin.take(),
            child,
            dir,
            exporter_url: format!("http://127.0.0.1:{exporter_port}/metrics"),
            jolokia_url: format!("http://127.0.0.1:{jolokia_port}/jolokia"),
            product_port,
        };
        jvm.wait_started(product, generation).await;
        jvm
    }

    async fn wait_started(&mut self, product: Product, generation: Generation) {
        let http = common::http_client();
        let search = json!({"type": "search", "mbean": product.started_pattern()});
        let (jolokia_url, exporter_url) = (self.jolokia_url.clone(), self.exporter_url.clone());
        let started = common::try_eventually(START_WITHIN, || {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "{product:?} with Jolokia {} exited ({status}); its log ends:\n{}",
                    generation.version(),
                    self.log_tail()
                );
            }
            let (http, search, jolokia_url, exporter_url) =
                (&http, &search, &jolokia_url, &exporter_url);
            async move {
                let found = match http
                    .post(jolokia_url)
                    .header("content-type", "application/json")
                    .body(search.to_string())
                    .send()
                    .await
                {
                    Ok(r) => r
                        .text()
                        .await
                        .ok()
                        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                        .and_then(|v| v["value"].as_array().map(|a| !a.is_empty()))
                        .unwrap_or(false),
                    Err(_) => false,
                };
                let exporting = match http.get(exporter_url).send().await {
                    Ok(r) => r.status().is_success(),
                    Err(_) => false,
                };
                if found && exporting {
                    Ok(())
                } else {
                    Err(format!("MBeans found: {found}, exporting: {exporting}"))
                }
            }
        })
        .await;
        if let Err(state) = started {
            panic!(
                "{product:?} with Jolokia {} did not start within {START_WITHIN:?} ({state}); its log ends:\n{}",
                generation.version(),
                self.log_tail()
            );
        }
        // Some work, so counters and gauges have moved (and values other
        // than 0 are compared) before either side reads them: a page and a
        // 404 from Tomcat, messages on ActiveMQ's queue.
        if let Some(port) = self.product_port {
            for (path, status) in [("/", 200), ("/nothing-here", 404)] {
                let r = http
                    .get(format!("http://127.0.0.1:{port}{path}"))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), status, "{product:?}: GET {path}");
            }
        }
        if product == Product::ActiveMq {
            let send = json!({
                "type": "exec",
                "mbean": "org.apache.activemq:type=Broker,brokerName=localhost,\
                          destinationType=Queue,destinationName=jmxgate.queue",
                "operation": "sendTextMessage(java.lang.String)",
                "arguments": ["from jmxgate's tests"],
            });
            for _ in 0..3 {
                let (status, answer) = common::post_json(&http, &self.jolokia_url, &send).await;
                assert_eq!(
                    (status, answer["status"].as_u64()),
                    (200, Some(200)),
                    "{answer}"
                );
            }
        }
    }

    fn log_tail(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(self.dir.path().join("jvm.log")) {
            let _ = f.read_to_string(&mut text);
        }
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for ProductJvm {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// `sh -c` script running `"$@"` (the JVM) with stdin from /dev/null,
/// stopping it when the shell's own stdin reaches EOF (kept on fd 3: an
/// asynchronous list's stdin is /dev/null otherwise), killing it 20 s
/// later if its shutdown hangs; exits with it.
const STOP_ON_STDIN_EOF: &str = "exec 3<&0; \"$@\" </dev/null & jvm=$!; \
     (read -r _ <&3; kill $jvm 2>/dev/null; i=0; \
      while kill -0 $jvm 2>/dev/null && [ $i -lt 20 ]; do sleep 1; i=$((i+1)); done; \
      kill -9 $jvm 2>/dev/null) & \
     wait $jvm";

/// An exposition's series, `name{labels}` (labels sorted, without
/// `target`) → value, and its families' TYPE.
#[derive(Debug, Default)]
struct Exposition {
    series: BTreeMap<String, f64>,
    types: BTreeMap<String, String>,
    helps: BTreeMap<String, String>,
}

fn parse_exposition(text: &str) -> Exposition {
    let mut e = Exposition::default();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest
                .split_once(' ')
                .unwrap_or_else(|| panic!("TYPE line {line:?}"));
            e.types.insert(name.into(), kind.into());
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            e.helps.insert(name.into(), help.into());
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("sample line {line:?}"));
        let (name, labels) = match series.split_once('{') {
            Some((n, l)) => (n, l.strip_suffix('}').unwrap_or(l)),
            None => (series, ""),
        };
        let labels: BTreeSet<String> = split_labels(labels)
            .into_iter()
            .filter(|l| !l.starts_with("target="))
            .collect();
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("value of {line:?}")),
        };
        let labels: Vec<String> = labels.into_iter().collect();
        e.series
            .insert(format!("{name}{{{}}}", labels.join(",")), value);
    }
    e
}

/// `a="x",b="y, z"` into its `name="value"` parts.
fn split_labels(text: &str) -> Vec<String> {
    let (mut out, mut cur, mut quoted, mut escaped) = (Vec::new(), String::new(), false, false);
    for c in text.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Families each side writes about its own scrape, not about the MBeans.
fn is_scrapers_own(series: &str) -> bool {
    [
        "jmx_scrape_",
        "jmx_exporter_",
        "jmx_config_reload_",
        "jmxgate_",
        "jvm_",
        "process_",
    ]
    .iter()
    .any(|p| series.starts_with(p))
}

fn family(series: &str) -> &str {
    series.split_once('{').map_or(series, |(n, _)| n)
}

/// One comparison's findings; empty when the gateway matched.
#[derive(Debug, Default)]
struct Differences {
    missing: Vec<String>,
    extra: Vec<String>,
    values: Vec<String>,
    types: Vec<String>,
    helps: Vec<String>,
    /// Series whose value jmx_exporter held still, so was compared.
    values_compared: usize,
}

impl Differences {
    fn is_empty(&self) -> bool {
        self.missing.is_empty()
            && self.extra.is_empty()
            && self.values.is_empty()
            && self.types.is_empty()
            && self.helps.is_empty()
    }
}

/// The gateway's answer against jmx_exporter's two, one taken just before
/// and one just after it. A series is missing when jmx_exporter gave it
/// both times and the gateway not; extra when the gateway gave it and
/// jmx_exporter neither time (MBeans a product registers meanwhile are
/// neither). Values are compared only where jmx_exporter read the same
/// value both times: the products' counters and gauges (uptime, bytes,
/// timings) move between the scrapes, and the three reads are not at one
/// instant.
fn compare(before: &Exposition, ours: &Exposition, after: &Exposition) -> Differences {
    let own = |e: &Exposition| -> BTreeSet<String> {
        e.series
            .keys()
            .filter(|s| !is_scrapers_own(s))
            .cloned()
            .collect()
    };
    let (before_set, ours_set, after_set) = (own(before), own(ours), own(after));
    let mut d = Differences::default();
    for s in before_set.intersection(&after_set) {
        if !ours_set.contains(s) {
            d.missing.push(s.clone());
            continue;
        }
        let (b, a, o) = (before.series[s], after.series[s], ours.series[s]);
        if b.to_bits() == a.to_bits() {
            d.values_compared += 1;
            if o.to_bits() != b.to_bits() && !(o.is_nan() && b.is_nan()) {
                d.values.push(format!("{s}: jmx_exporter {b}, gateway {o}"));
            }
        }
    }
    for s in &ours_set {
        if !before_set.contains(s) && !after_set.contains(s) {
            d.extra.push(s.clone());
        }
    }
    // OpenMetrics names a counter's family without the `_total` its
    // samples carry.
    let families: BTreeSet<&str> = ours_set
        .iter()
        .map(|s| {
            let name = family(s);
            match name.strip_suffix("_total") {
                Some(f) if !before.types.contains_key(name) => f,
                _ => name,
            }
        })
        .collect();
    for f in families {
        if let (Some(theirs), Some(mine)) = (before.types.get(f), ours.types.get(f)) {
            if theirs != mine {
                d.types
                    .push(format!("{f}: jmx_exporter {theirs}, gateway {mine}"));
            }
        }
        if let (Some(theirs), Some(mine)) = (before.helps.get(f), ours.helps.get(f)) {
            if theirs != mine && !same_default_help_but_for_order(theirs, mine) {
                d.helps
                    .push(format!("{f}: jmx_exporter {theirs:?}, gateway {mine:?}"));
            }
        }
    }
    d
}

/// Whether two default HELPs (`<description> <domain>:<keys>,attribute=<name>`)
/// differ only in which of the MBeans or attributes feeding one family
/// came first: the family takes the first one's HELP, and neither side's
/// order is defined (docs/prometheus.md, "Where it differs": jmx_exporter's is the
/// MBean server's name set and MBeanInfo's, the gateway's the agent's
/// list). Both must still be default HELPs of the same domain.
fn same_default_help_but_for_order(theirs: &str, mine: &str) -> bool {
    let domain = |help: &str| -> Option<String> {
        let (_, object) = help.rsplit_once(' ')?;
        object.contains(",attribute=").then_some(())?;
        object.split_once(':').map(|(d, _)| d.to_string())
    };
    matches!((domain(theirs), domain(mine)), (Some(a), Some(b)) if a == b)
}

/// The gateway's scrape as Prometheus sends it (10 s: Prometheus's default
/// scrape timeout).
async fn scrape(http: &reqwest::Client, url: &str, format: Format) -> (String, Duration) {
    let started = Instant::now();
    let r = http
        .get(url)
        .header("X-Prometheus-Scrape-Timeout-Seconds", "10")
        .header("accept", format.accept())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{url}");
    let content_type = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(
        content_type.starts_with(format.content_type()),
        "{url}: Content-Type {content_type:?} for {format:?}"
    );
    (r.text().await.unwrap(), started.elapsed())
}

/// The two exposition formats both sides speak, asked for as Prometheus
/// asks.
#[derive(Clone, Copy, Debug)]
enum Format {
    Text,
    OpenMetrics,
}

impl Format {
    fn accept(self) -> &'static str {
        match self {
            Format::Text => "text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
            Format::OpenMetrics => {
                "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
            }
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Format::Text => "text/plain",
            Format::OpenMetrics => "application/openmetrics-text",
        }
    }
}

/// The series of the gateway's own families for the target, `name → value`.
fn own_families(text: &str) -> BTreeMap<String, f64> {
    parse_exposition(text)
        .series
        .into_iter()
        .filter(|(s, _)| s.starts_with("jmx_scrape_error") || s.starts_with("jmxgate_scrape_"))
        .collect()
}

/// Compares one JVM's jmx_exporter `/metrics` with the gateway's scrape of
/// the same JVM (`query`), again while they differ (for up to a minute): a
/// product may register MBeans (ActiveMQ's advisory topics) after it has
/// started. Panics with the last differences.
async fn compare_with_jmx_exporter(
    label: &str,
    gw: &Gateway,
    jvm: &ProductJvm,
    query: &str,
    format: Format,
) {
    let label = format!("{label}, {format:?}");
    let gateway_url = gw.url(&format!("/prometheus?{query}"));
    let tries = std::cell::Cell::new(0);
    let what = format!("{label}: the gateway's answer is jmx_exporter's");
    let (series, d, own, gateway_took, exporter_took) =
        common::eventually(&what, Duration::from_secs(60), || async {
            tries.set(tries.get() + 1);
            let reference = |_: ()| async {
                let (text, took) = scrape(&gw.http, &jvm.exporter_url, format).await;
                (parse_exposition(&text), took)
            };
            let (before, exporter_took) = reference(()).await;
            let (text, gateway_took) = scrape(&gw.http, &gateway_url, format).await;
            let (after, _) = reference(()).await;
            let ours = parse_exposition(&text);
            let own = own_families(&text);
            // A complete answer: the target's scrape neither failed nor left
            // attributes out because the agent failed them.
            assert_eq!(
                own.get("jmx_scrape_error{}"),
                Some(&0.0),
                "{label}: the scrape failed: {own:?}"
            );
            assert!(
                !own.keys().any(|s| s.starts_with("jmxgate_scrape_failure")),
                "{label}: {own:?}"
            );
            let d = compare(&before, &ours, &after);
            let series = before.series.keys().filter(|s| !is_scrapers_own(s)).count();
            if d.is_empty() {
                Ok((series, d, own, gateway_took, exporter_took))
            } else {
                Err(format!("{d:#?}"))
            }
        })
        .await;
    assert!(series > 0, "{label}: jmx_exporter gave no series at all");
    assert!(
        d.values_compared > 0,
        "{label}: no value held still long enough to be compared"
    );
    eprintln!(
        "{label}: {series} series match, {} values compared (gateway {gateway_took:?}, \
         jmx_exporter {exporter_took:?}; {own:?}; try {})",
        d.values_compared,
        tries.get()
    );
}

/// The example rules file and no rules, for one product through one
/// agent generation: two JVMs (jmx_exporter reads one config per JVM),
/// started together.
async fn product_matches_jmx_exporter(product: Product, generation: Generation) {
    if !present("jmx_exporter agent", &exporter_jar())
        || !present(
            &format!("{product:?} (Debian)"),
            Path::new(product.installed_file()),
        )
        || !generation.available()
    {
        return;
    }
    // `excludeJvmMetrics`: client_java's own jvm_* samples, which no
    // Jolokia-based scrape can give; the rest of the file as it is.
    let example = std::fs::read_to_string(product.example_rules()).unwrap();
    let with_rules = format!("{}\nexcludeJvmMetrics: true\n", example.trim_end());
    let no_rules = "excludeJvmMetrics: true\n".to_string();
    let (ruled, bare) = tokio::join!(
        ProductJvm::start(product, generation, &with_rules),
        ProductJvm::start(product, generation, &no_rules)
    );
    let dir = tempfile::tempdir().unwrap();
    let (rules_file, no_rules_file) = (dir.path().join("rules.yml"), dir.path().join("none.yml"));
    std::fs::write(&rules_file, &with_rules).unwrap();
    std::fs::write(&no_rules_file, &no_rules).unwrap();
    // Every agent answer a scrape fetches is bounded: the reads never ask
    // for an object graph (Tomcat's `managedResource`s), which is what
    // once made a scrape of Tomcat through 1.7.1 outlast Prometheus's
    // timeout. An answer over this fails the scrape (`jmx_scrape_error`).
    const ANSWER_BOUND: &str = "max_response_bytes = 1048576";
    let gw = Gateway::start(&format!(
        "[[targets]]\nname = \"ruled\"\nurl = \"{}\"\n{ANSWER_BOUND}\n\n\
         [[targets]]\nname = \"bare\"\nurl = \"{}\"\n{ANSWER_BOUND}\n\n\
         [[prometheus.modules]]\nname = \"default\"\nrules_file = \"{}\"\n\n\
         [[prometheus.modules]]\nname = \"example\"\nrules_file = \"{}\"\n",
        ruled.jolokia_url,
        bare.jolokia_url,
        no_rules_file.display(),
        rules_file.display()
    ))
    .await;
    let label = format!("{product:?} through Jolokia {}", generation.version());
    for format in [Format::Text, Format::OpenMetrics] {
        compare_with_jmx_exporter(
            &format!("{label}, example rules"),
            &gw,
            &ruled,
            "target=ruled&module=example",
            format,
        )
        .await;
        // No `module=`: the module named `default`.
        compare_with_jmx_exporter(
            &format!("{label}, no rules"),
            &gw,
            &bare,
            "target=bare",
            format,
        )
        .await;
    }
}

/// The comparison itself, on expositions made up for it: what it calls
/// missing, extra, a changed value or a changed type.
#[test]
fn the_comparison_finds_missing_extra_and_changed_series() {
    let exporter = |v: &str| {
        parse_exposition(&format!(
            "# TYPE a gauge\na{{k=\"1\"}} 1.0\na{{k=\"2\"}} {v}\n# TYPE b counter\nb 3.0\n\
             jmx_scrape_error 0.0\n"
        ))
    };
    let (before, after) = (exporter("2.0"), exporter("5.0"));
    // The same series, the `target` label and the gateway's own families
    // aside; a value that moved between jmx_exporter's scrapes is not
    // compared.
    let same = parse_exposition(
        "# TYPE a gauge\na{target=\"t\",k=\"1\"} 1.0\na{k=\"2\",target=\"t\"} 9.0\n\
         # TYPE b counter\nb{target=\"t\"} 3.0\njmxgate_scrape_samples{target=\"t\"} 3\n",
    );
    let d = compare(&before, &same, &after);
    assert!(d.is_empty(), "{d:?}");
    assert_eq!(d.values_compared, 2);

    let different = parse_exposition("# TYPE a untyped\na{k=\"1\"} 1.5\n# TYPE c gauge\nc 1.0\n");
    let d = compare(&before, &different, &after);
    assert_eq!(d.missing, ["a{k=\"2\"}", "b{}"]);
    assert_eq!(d.extra, ["c{}"]);
    assert_eq!(d.values, ["a{k=\"1\"}: jmx_exporter 1, gateway 1.5"]);
    assert_eq!(d.types, ["a: jmx_exporter gauge, gateway untyped"]);

    // OpenMetrics: a counter's family is named without `_total`.
    let om = |kind: &str| parse_exposition(&format!("# TYPE b {kind}\nb_total 3.0\n# EOF\n"));
    let d = compare(&om("counter"), &om("unknown"), &om("counter"));
    assert_eq!(d.types, ["b: jmx_exporter counter, gateway unknown"]);

    // HELP: another first MBean of the same domain is no difference, a
    // HELP of another kind is.
    let helped =
        |help: &str| parse_exposition(&format!("# HELP b {help}\n# TYPE b counter\nb 3.0\n"));
    let theirs = helped("Valve's own. Catalina:name=ErrorReportValve,type=Valve,attribute=async");
    for (mine, differs) in [
        (
            "Another? Catalina:name=StandardContextValve,type=Valve,attribute=async",
            false,
        ),
        (
            "Valve's own. java.lang:name=x,type=Valve,attribute=async",
            true,
        ),
        ("Tomcat global async", true),
    ] {
        let d = compare(&theirs, &helped(mine), &theirs);
        assert_eq!(d.helps.len(), usize::from(differs), "{mine}: {d:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tomcat_through_jolokia_1_7_1() {
    product_matches_jmx_exporter(Product::Tomcat, Generation::V1).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn tomcat_through_jolokia_2_6_0() {
    product_matches_jmx_exporter(Product::Tomcat, Generation::V2).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn zookeeper_through_jolokia_1_7_1() {
    product_matches_jmx_exporter(Product::ZooKeeper, Generation::V1).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn zookeeper_through_jolokia_2_6_0() {
    product_matches_jmx_exporter(Product::ZooKeeper, Generation::V2).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn activemq_through_jolokia_1_7_1() {
    product_matches_jmx_exporter(Product::ActiveMq, Generation::V1).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn activemq_through_jolokia_2_6_0() {
    product_matches_jmx_exporter(Product::ActiveMq, Generation::V2).await;
}
