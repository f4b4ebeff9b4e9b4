//! The products themselves: Debian's Tomcat 10, ZooKeeper, ActiveMQ and
//! Jetty 9, each in a JVM of its own with a Jolokia agent of either
//! generation (and jmx_exporter's Java agent where it is the oracle).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::json;

use crate::common::{self, Generation};

/// The JVMs start on a busy 2-core machine: generous.
pub(crate) const START_WITHIN: Duration = Duration::from_secs(180);

pub(crate) fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub(crate) fn shared(path: &str) -> PathBuf {
    repo().join("../shared").join(path)
}

/// What a test needs that may be missing outside CI: in CI a failure,
/// elsewhere a reported skip.
pub(crate) fn present(what: &str, path: &Path) -> bool {
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

pub(crate) fn exporter_jar() -> PathBuf {
    std::env::var_os("JMXGATE_JMX_EXPORTER_JAR")
        .map(PathBuf::from)
        .unwrap_or_else(|| shared("prometheus/jmx_prometheus_javaagent-1.6.0.jar"))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Product {
    Tomcat,
    ZooKeeper,
    ActiveMq,
    /// Jetty 9 itself (tests/real_products/JettyProduct.java), its MBeans in
    /// the platform server.
    Jetty,
}

impl Product {
    /// jmx_exporter's own example for it, unchanged.
    pub(crate) fn example_rules(self) -> PathBuf {
        shared(match self {
            Product::Tomcat => "prometheus/examples/tomcat.yml",
            Product::ZooKeeper => "prometheus/examples/zookeeper.yaml",
            Product::ActiveMq => "prometheus/examples/activemq.yml",
            Product::Jetty => unreachable!("jmx_exporter has no example for Jetty"),
        })
    }

    /// A file of the Debian package the product's JVM is started from.
    pub(crate) fn installed_file(self) -> &'static str {
        match self {
            Product::Tomcat => "/usr/share/tomcat10/bin/bootstrap.jar",
            Product::ZooKeeper => "/usr/share/java/zookeeper.jar",
            Product::ActiveMq => "/usr/share/activemq/bin/activemq.jar",
            Product::Jetty => "/usr/share/java/jetty9-jmx.jar",
        }
    }

    /// MBeans that exist once the product has started.
    fn started_pattern(self) -> &'static str {
        match self {
            // Registered as the connector starts, after the web apps.
            Product::Tomcat => "Catalina:type=GlobalRequestProcessor,*",
            Product::ZooKeeper => "org.apache.ZooKeeperService:name1=InMemoryDataTree,*",
            Product::ActiveMq => "org.apache.activemq:destinationName=jmxgate.topic,*",
            // Its session handler's, once the context has started.
            Product::Jetty => "org.eclipse.jetty.server.session:type=sessionhandler,*",
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
                // A session limit, so the web app's Manager has one to
                // report (OpenTelemetry's tomcat.session.active.limit;
                // Tomcat's default, -1, is no limit and is dropped).
                std::fs::write(
                    dir.join("conf/context.xml"),
                    "<Context><Manager maxActiveSessions=\"500\"/></Context>\n",
                )
                .unwrap();
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
            Product::Jetty => {
                let port = common::free_port();
                let (classes, cp) = jetty_product_classes();
                (
                    vec![
                        "-cp".into(),
                        format!("{}:{cp}", classes.display()),
                        "JettyProduct".into(),
                        port.to_string(),
                    ],
                    Some(port),
                )
            }
        }
    }
}

/// `source` compiled against `cp` into a folder of `CARGO_TARGET_TMPDIR`
/// named by `name` and a stamp of both, once per version: concurrent
/// test processes race safely through a rename. The classes' folder.
fn compiled(name: &str, source: &Path, cp: &str) -> PathBuf {
    let text = std::fs::read(source).unwrap();
    let stamp = format!(
        "{:x}",
        text.iter()
            .chain(cp.as_bytes())
            .fold(0xcbf29ce484222325u64, |h, b| {
                (h ^ u64::from(*b)).wrapping_mul(0x100000001b3)
            })
    );
    let tmp_root = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let classes = tmp_root.join(format!("{name}-{stamp}"));
    if classes.is_dir() {
        return classes;
    }
    let build = tmp_root.join(format!("{name}-build-{}", std::process::id()));
    std::fs::create_dir_all(&build).unwrap();
    let status = Command::new("javac")
        .args(["-nowarn", "-d"])
        .arg(&build)
        .arg("-cp")
        .arg(cp)
        .arg(source)
        .status()
        .expect("run javac (Java 17 is needed)");
    assert!(status.success(), "javac failed on {}", source.display());
    if std::fs::rename(&build, &classes).is_err() {
        let _ = std::fs::remove_dir_all(&build);
    }
    classes
}

/// tests/agent/Jolokia1JvmAgent.java as a `-javaagent` jar whose manifest
/// names Debian's Jolokia 1.7.1 and Jetty 9 jars; built once per source
/// version.
fn jolokia1_agent_jar() -> &'static PathBuf {
    static JAR: OnceLock<PathBuf> = OnceLock::new();
    JAR.get_or_init(|| {
        let source = repo().join("tests/agent/Jolokia1JvmAgent.java");
        let cp = common::classpath();
        let classes = compiled("jolokia1-agent", &source, &cp);
        let jar = classes.with_extension("jar");
        if jar.is_file() {
            return jar;
        }
        let manifest = classes.with_extension(format!("manifest-{}", std::process::id()));
        std::fs::write(
            &manifest,
            format!(
                "Premain-Class: Jolokia1JvmAgent\nClass-Path: {}\n",
                cp.replace(':', " ")
            ),
        )
        .unwrap();
        let built = classes.with_extension(format!("jar-{}", std::process::id()));
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
        let _ = std::fs::remove_file(&manifest);
        jar
    })
}

/// tests/real_products/JettyProduct.java compiled against Debian's Jetty
/// 9 jars: its classes' folder and the classpath.
fn jetty_product_classes() -> (PathBuf, String) {
    static BUILT: OnceLock<(PathBuf, String)> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let source = repo().join("tests/real_products/JettyProduct.java");
            let cp = [
                "servlet-api",
                "jetty9-server",
                "jetty9-servlet",
                "jetty9-security",
                "jetty9-http",
                "jetty9-io",
                "jetty9-util",
                "jetty9-jmx",
            ]
            .map(|jar| format!("/usr/share/java/{jar}.jar"))
            .join(":");
            (compiled("jetty-product", &source, &cp), cp)
        })
        .clone()
}

/// A product's JVM with a Jolokia agent of `generation`, and
/// jmx_exporter's agent reading `rules` when given. Dropping it kills the
/// JVM.
pub(crate) struct ProductJvm {
    /// The shell running the JVM; closing `stdin` stops both.
    child: Child,
    stdin: Option<ChildStdin>,
    dir: tempfile::TempDir,
    /// jmx_exporter's `/metrics`, when its agent runs.
    pub(crate) exporter_url: Option<String>,
    pub(crate) jolokia_url: String,
    pub(crate) product_port: Option<u16>,
}

impl ProductJvm {
    /// Starts the JVM; `rules` is the text of jmx_exporter's config file
    /// (none: no jmx_exporter agent). Returns once the product's MBeans
    /// are there and the agents answer.
    pub(crate) async fn start(
        product: Product,
        generation: Generation,
        rules: Option<&str>,
    ) -> ProductJvm {
        let dir = tempfile::tempdir().unwrap();
        let rules_path = dir.path().join("exporter.yml");
        if let Some(rules) = rules {
            std::fs::write(&rules_path, rules).unwrap();
        }
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
                if matches!(product, Product::ZooKeeper | Product::Jetty) {
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
            .args(rules.map(|_| {
                format!(
                    "-javaagent:{}=127.0.0.1:{exporter_port}:{}",
                    exporter_jar().display(),
                    rules_path.display()
                )
            }))
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
            exporter_url: rules.map(|_| format!("http://127.0.0.1:{exporter_port}/metrics")),
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
                let exporting = match exporter_url {
                    None => true,
                    Some(url) => match http.get(url).send().await {
                        Ok(r) => r.status().is_success(),
                        Err(_) => false,
                    },
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
                let url = format!("http://127.0.0.1:{port}{path}");
                // A product may register its MBeans before its connector
                // listens (Jetty's session handler does).
                let r = common::eventually(
                    &format!("{product:?} answers GET {path}"),
                    START_WITHIN,
                    || async { http.get(&url).send().await.map_err(|e| e.to_string()) },
                )
                .await;
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
