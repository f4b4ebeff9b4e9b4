//! The Prometheus door against real agents: jmx_exporter's own Java agent
//! in the same JVM as the reference (../shared/prometheus), a real
//! Prometheus server scraping through the multi-target recipe with basic
//! auth, policies and the audit, errors, formats and timeouts.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{audit_records, direct, targets_toml, Agent, Gateway, Generation};
use serde_json::{json, Value};

const TYPES: &str = "jmxgate.test:type=Types";

/// jmx_exporter's Java agent, built from upstream (../shared/prometheus, or
/// JMXGATE_JMX_EXPORTER_JAR). Outside CI a missing jar skips the
/// comparisons; in CI it fails them.
fn exporter_jar() -> Option<PathBuf> {
    let jar = std::env::var_os("JMXGATE_JMX_EXPORTER_JAR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../shared/prometheus/jmx_prometheus_javaagent-1.6.0.jar")
        });
    if jar.is_file() {
        return Some(jar);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "no jmx_exporter agent at {} (CI needs ../shared/prometheus)",
        jar.display()
    );
    eprintln!("SKIPPED: no jmx_exporter agent at {}", jar.display());
    None
}

fn rules_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/exporter/{name}"))
}

/// A test JVM with the test MBeans and jmx_exporter's MBeans, its Jolokia
/// agent of the generation under test and, with `rules`, jmx_exporter's
/// agent on its own port reading that rules file. The port too.
fn jvm(name: &str, rules: Option<(&Path, &Path)>) -> (Agent, Option<u16>) {
    let mut options = Vec::new();
    let mut port = None;
    if let Some((jar, rules)) = rules {
        let p = common::free_port();
        options.push(format!(
            "-javaagent:{}=127.0.0.1:{p}:{}",
            jar.display(),
            rules.display()
        ));
        port = Some(p);
    }
    let agent = Agent::start_in_jvm(
        Generation::under_test(),
        name,
        &options,
        &["--exporter-mbeans", "true"],
    );
    (agent, port)
}

/// An exposition's samples, `(name, labels without target) → value`, and
/// its families' TYPE and HELP.
#[derive(Debug, Default)]
struct Parsed {
    samples: BTreeMap<(String, String), f64>,
    types: BTreeMap<String, String>,
    helps: BTreeMap<String, String>,
}

fn parse_exposition(text: &str) -> Parsed {
    let mut p = Parsed::default();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (n, t) = rest.split_once(' ').unwrap();
            p.types.insert(n.into(), t.into());
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (n, h) = rest.split_once(' ').unwrap();
            p.helps.insert(n.into(), h.into());
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = match series.split_once('{') {
            Some((n, l)) => (n, l.trim_end_matches('}')),
            None => (series, ""),
        };
        let labels: BTreeSet<String> = split_labels(labels)
            .into_iter()
            .filter(|l| !l.starts_with("target="))
            .collect();
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("value of {line}")),
        };
        p.samples.insert(
            (
                name.into(),
                labels.into_iter().collect::<Vec<_>>().join(","),
            ),
            value,
        );
    }
    p
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

/// The part of a default HELP after the attribute's (or open type's)
/// description: `domain:name=…,type=…,attribute=…`.
fn help_tail(help: &str) -> &str {
    match help.rfind(":name=") {
        Some(at) => &help[help[..at].rfind(' ').map_or(0, |s| s + 1)..],
        None => help,
    }
}

fn is_own_or_client_java(name: &str) -> bool {
    ["jvm_", "jmx_", "jmxgate_scrape_", "process_"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// Values of MBeans that don't change while the JVM runs or scrapes.
fn is_stable(name: &str) -> bool {
    !name.starts_with("java_lang_") && !name.starts_with("java_nio_") && !name.starts_with("jolokia_")
        && !name.starts_with("JMImplementation")
        // Counts the scrapes' own reads.
        && !name.starts_with("jmxgate_test_Counter")
}

/// What jmx_exporter and the gateway say of the same JVM, with one
/// rules file, are the same samples, types and values; HELP may differ
/// only in the description of values inside composite and tabular data
/// (Jolokia doesn't report composite types' descriptions for standard
/// MBeans). The sample sets are compared again while they differ (for up
/// to 30 s): the JVM's own MBeans (a GC's LastGcInfo) can change between
/// the two scrapes.
async fn compare_with_jmx_exporter(module: &str, rules: &Path, documented: &[&str]) {
    let Some(jar) = exporter_jar() else { return };
    let (agent, port) = jvm(&format!("prom-{module}"), Some((&jar, rules)));
    let gw = Gateway::start(&format!(
        "{}[[prometheus.modules]]\nname = \"{module}\"\nrules_file = \"{}\"\n",
        targets_toml(&[&agent]),
        rules.display()
    ))
    .await;
    // A collection fills every collector's LastGcInfo (maps inside a
    // composite: the JDK's open type for 1.x agents).
    direct(
        &agent,
        &json!({"type":"exec","mbean":"java.lang:type=Memory","operation":"gc"}),
    )
    .await;
    let reference_url = format!("http://127.0.0.1:{}/metrics", port.unwrap());
    let keys = |p: &Parsed| -> BTreeSet<(String, String)> {
        p.samples
            .keys()
            .filter(|(n, _)| !is_own_or_client_java(n))
            .filter(|(n, l)| !documented.iter().any(|d| n.starts_with(d) || l.contains(d)))
            .cloned()
            .collect()
    };
    let ours_url = gw.url(&format!(
        "/prometheus?target={}&module={module}",
        agent.name
    ));
    let (reference, ours, want) = common::eventually(
        &format!("{module}: the sample sets are the same"),
        Duration::from_secs(30),
        || async {
            let reference = parse_exposition(&common::get_text(&gw.http, &reference_url).await);
            let ours = parse_exposition(&common::get_text(&gw.http, &ours_url).await);
            let (want, have) = (keys(&reference), keys(&ours));
            if want == have {
                Ok((reference, ours, want))
            } else {
                Err(format!(
                    "only jmx_exporter: {:#?}\nonly the gateway: {:#?}",
                    want.difference(&have).collect::<Vec<_>>(),
                    have.difference(&want).collect::<Vec<_>>()
                ))
            }
        },
    )
    .await;
    assert!(!want.is_empty(), "{module}: no samples at all");
    if module == "default" {
        assert!(
            want.iter()
                .any(|(n, l)| n.contains("_LastGcInfo_memoryUsageAfterGc_") && l.contains("key=")),
            "no LastGcInfo samples"
        );
    }
    for key in &want {
        if is_stable(&key.0) {
            assert_eq!(
                reference.samples[key], ours.samples[key],
                "{module}: {key:?}"
            );
        }
        let family = key.0.trim_end_matches("_total");
        let (t_ref, t_ours) = (
            reference.types.get(family).or(reference.types.get(&key.0)),
            ours.types.get(family).or(ours.types.get(&key.0)),
        );
        assert_eq!(t_ref, t_ours, "{module}: TYPE of {}", key.0);
        let (h_ref, h_ours) = (
            reference.helps.get(family).or(reference.helps.get(&key.0)),
            ours.helps.get(family).or(ours.helps.get(&key.0)),
        );
        if let (Some(a), Some(b)) = (h_ref, h_ours) {
            // A composite's HELP starts with its type's description:
            // for LastGcInfo the JDK's, which Jolokia doesn't give.
            const GC_INFO: &str = "CompositeType for GC info for ";
            assert_eq!(
                a.starts_with(GC_INFO),
                b.starts_with(GC_INFO),
                "{module}: HELP of {}: {a} / {b}",
                key.0
            );
            let (a, b) = (help_tail(a), help_tail(b));
            if a != b {
                // A family fed by several MBeans or attributes takes
                // the first one's HELP, and neither side's order is
                // defined (jmx_exporter's is the MBean server's name
                // set, 1.x lists attributes in hash order). The
                // domain is the same.
                let domain = |h: &str| h.split_once(':').map(|(d, _)| d.to_string());
                assert_eq!(
                    domain(a),
                    domain(b),
                    "{module}: HELP of {}: {a} / {b}",
                    key.0
                );
            }
        }
    }
}

/// Known differences where the agent can't tell what jmx_exporter sees
/// (docs/prometheus.md): 1.x agents report no open types, so a nested
/// MXBean map reads as composite data.
fn documented_for_generation() -> &'static [&'static str] {
    if Generation::under_test().is_v2() {
        &[]
    } else {
        &["Hadoop_DataNodeInfo_DatanodeNetworkCounts"]
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_default_export_matches_jmx_exporters_own() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("empty.yml");
    std::fs::write(&rules, "{}\n").unwrap();
    compare_with_jmx_exporter("default", &rules, documented_for_generation()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn product_rules_match_jmx_exporters_own() {
    for product in ["kafka", "tomcat", "cassandra"] {
        compare_with_jmx_exporter(product, &rules_file(&format!("{product}.yml")), &[]).await;
    }
}

/// The product rules give the samples their authors meant, with values
/// the agent holds.
#[tokio::test(flavor = "multi_thread")]
async fn product_rules_give_plausible_samples() {
    let (agent, _) = jvm("products", None);
    let modules: String = ["kafka", "tomcat", "cassandra"]
        .iter()
        .map(|m| {
            format!(
                "[[prometheus.modules]]\nname = \"{m}\"\nrules_file = \"{}\"\n",
                rules_file(&format!("{m}.yml")).display()
            )
        })
        .collect();
    let gw = Gateway::start(&format!("{}{modules}", targets_toml(&[&agent]))).await;
    let scrape = |module: &str| {
        let url = gw.url(&format!(
            "/prometheus?target={}&module={module}",
            agent.name
        ));
        let http = gw.http.clone();
        async move { parse_exposition(&common::get_text(&http, &url).await) }
    };
    let kafka = scrape("kafka").await;
    let count = direct(
        &agent,
        &json!({"type":"read","mbean":"kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=orders","attribute":"Count"}),
    )
    .await["value"]
        .as_f64()
        .unwrap();
    assert_eq!(
        kafka.samples[&(
            "kafka_server_brokertopicmetrics_messagesin_total".into(),
            "topic=\"orders\"".into()
        )],
        count
    );
    // client_java strips the reserved `_info` suffix from a gauge's name,
    // and jmx_exporter with it.
    assert!(
        kafka.samples.contains_key(&(
            "kafka_server_app".into(),
            "clientid=\"broker-1\",version=\"3.6.1\"".into()
        )),
        "{:#?}",
        kafka.samples
    );
    let tomcat = scrape("tomcat").await;
    assert_eq!(
        tomcat.samples[&(
            "tomcat_requestcount_total".into(),
            "port=\"8080\",protocol=\"http-nio\"".into()
        )],
        321.0
    );
    assert_eq!(
        tomcat.samples[&(
            "tomcat_max_request_seconds".into(),
            "port=\"8080\",protocol=\"http-nio\"".into()
        )],
        0.12
    );
    let cassandra = scrape("cassandra").await;
    assert_eq!(
        cassandra.samples[&(
            "cassandra_clientrequest_latency_seconds".into(),
            "quantile=\"0.99\",scope=\"Read\"".into()
        )],
        1834.5 * 0.000001
    );
    assert_eq!(
        cassandra.samples[&(
            "cassandra_table_livediskspaceused".into(),
            "keyspace=\"shop\",scope=\"users\"".into()
        )],
        123456789.0
    );
}

/// Prometheus itself (Debian's package) scrapes the gateway with the
/// multi-target recipe and basic auth; its stored series hold the values
/// the agents hold.
#[tokio::test(flavor = "multi_thread")]
async fn a_real_prometheus_scrapes_two_targets_through_the_gateway() {
    let Some(prometheus) = which("prometheus") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "no prometheus binary (scripts/install-deps.sh installs it)"
        );
        eprintln!("SKIPPED: no prometheus binary");
        return;
    };
    let [a, b, ..] = common::shared_agents();
    let dir = tempfile::tempdir().unwrap();
    let users = common::users_file(dir.path(), &[("scraper", "scraper-pw", &["monitoring"])]);
    let gw = Gateway::start(&common::basic_auth_config(
        &users,
        &format!(
            "{}[[roles]]\nname = \"monitoring\"\ntargets = [\"*\"]\n",
            targets_toml(&[a, b])
        ),
    ))
    .await;
    let port = common::free_port();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: jvms\n    metrics_path: /prometheus\n\
             \x20   params:\n      module: [default]\n    basic_auth:\n      username: scraper\n      password: scraper-pw\n\
             \x20   static_configs:\n      - targets: [\"{}\", \"{}\"]\n    relabel_configs:\n\
             \x20     - source_labels: [__address__]\n        target_label: __param_target\n\
             \x20     - source_labels: [__param_target]\n        target_label: instance\n\
             \x20     - target_label: __address__\n        replacement: \"{}\"\n",
            a.name, b.name, gw.addr
        ),
    )
    .unwrap();
    let mut server = start_prometheus(&prometheus, &config, port, dir.path());
    let _kill = KillOnDrop(&mut server);
    let http = common::http_client();
    let query = |q: String| {
        let (http, url) = (
            http.clone(),
            format!("http://127.0.0.1:{port}/api/v1/query"),
        );
        async move {
            let url =
                url::Url::parse_with_params(&url, [("query", q)]).map_err(|e| e.to_string())?;
            let r = http.get(url).send().await.map_err(|e| e.to_string())?;
            let v: Value = serde_json::from_str(&r.text().await.map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(v["data"]["result"].clone())
        }
    };
    for agent in [a, b] {
        let want = direct(
            agent,
            &json!({"type":"read","mbean":TYPES,"attribute":"LongMax"}),
        )
        .await["value"]
            .as_f64()
            .unwrap();
        let series = format!(
            "jmxgate_test_Types_LongMax{{target=\"{}\",job=\"jvms\"}}",
            agent.name
        );
        let got = common::eventually(
            &format!("{series} in Prometheus"),
            Duration::from_secs(60),
            || {
                let q = query(series.clone());
                async move {
                    let result = q.await?;
                    result[0]["value"][1]
                        .as_str()
                        .and_then(|v| v.parse::<f64>().ok())
                        .ok_or(format!("{result}"))
                }
            },
        )
        .await;
        assert_eq!(got, want, "{}", agent.name);
        let up = query(format!("up{{job=\"jvms\",instance=\"{}\"}}", agent.name))
            .await
            .unwrap();
        assert_eq!(up[0]["value"][1], "1", "{up}");
        let error = query(format!("jmx_scrape_error{{target=\"{}\"}}", agent.name))
            .await
            .unwrap();
        assert_eq!(error[0]["value"][1], "0", "{error}");
    }
}

/// Prometheus finds its targets through the gateway (`http_sd_configs`
/// at `/prometheus/sd`, with the scraper's credentials): exactly the
/// targets its role reaches, labelled with theirs, each scraped through
/// the gateway; shards split them; bad queries are clear 400s.
#[tokio::test(flavor = "multi_thread")]
async fn a_real_prometheus_discovers_the_callers_targets_through_http_sd() {
    let Some(prometheus) = which("prometheus") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "no prometheus binary (scripts/install-deps.sh installs it)"
        );
        eprintln!("SKIPPED: no prometheus binary");
        return;
    };
    let [a, b, c] = common::shared_agents();
    let dir = tempfile::tempdir().unwrap();
    let users = common::users_file(
        dir.path(),
        &[
            ("scraper", "scraper-pw", &["monitoring"]),
            ("nobody", "nobody-pw", &[]),
        ],
    );
    let targets = format!(
        "[[targets]]\nname = \"{}\"\nurl = \"{}\"\nlabels = {{ env = \"prod\", \"app.kubernetes.io/name\" = \"orders\", instance = \"x\" }}\n\n\
         [[targets]]\nname = \"{}\"\nurl = \"{}\"\nlabels = {{ env = \"prod\" }}\n\n\
         [[targets]]\nname = \"{}\"\nurl = \"{}\"\nlabels = {{ env = \"dev\" }}\n\n",
        a.name,
        a.url(),
        b.name,
        b.url(),
        c.name,
        c.url()
    );
    let gw = Gateway::start(&common::basic_auth_config(
        &users,
        &format!("{targets}[[roles]]\nname = \"monitoring\"\ntargets = [\"env=prod\"]\n"),
    ))
    .await;
    let sd = |query: &str, user: &str, password: &str| {
        let url = format!("http://{}/prometheus/sd{query}", gw.addr);
        let request = gw.http.get(url).basic_auth(user, Some(password));
        async move {
            let r = request.send().await.unwrap();
            let status = r.status().as_u16();
            (status, r.text().await.unwrap())
        }
    };
    let instances = |text: &str| -> BTreeSet<String> {
        let groups: Value = serde_json::from_str(text).unwrap();
        groups
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["labels"]["instance"].as_str().unwrap().to_string())
            .collect()
    };
    let (status, all) = sd("", "scraper", "scraper-pw").await;
    assert_eq!(status, 200, "{all}");
    let want: BTreeSet<String> = [a.name.clone(), b.name.clone()].into();
    assert_eq!(instances(&all), want, "only the role's targets: {all}");
    let groups: Value = serde_json::from_str(&all).unwrap();
    let of_a = groups
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["labels"]["instance"] == a.name.as_str())
        .unwrap();
    assert_eq!(of_a["targets"], json!([gw.addr.to_string()]), "{of_a}");
    let labels = &of_a["labels"];
    assert_eq!(labels["__metrics_path__"], "/prometheus");
    assert_eq!(labels["__param_target"], a.name.as_str());
    assert_eq!(labels["__param_module"], "default");
    assert_eq!(labels["__scheme__"], "http");
    assert_eq!(labels["app_kubernetes_io_name"], "orders");
    assert_eq!(labels["exported_instance"], "x", "{labels}");
    // Shards: disjoint, together everything; one's share of nothing for
    // a caller with no role, and no hint of what exists.
    let (_, first) = sd("?shard=0&of=2", "scraper", "scraper-pw").await;
    let (_, second) = sd("?shard=1&of=2", "scraper", "scraper-pw").await;
    let (first, second) = (instances(&first), instances(&second));
    assert!(first.is_disjoint(&second), "{first:?} {second:?}");
    assert_eq!(&first | &second, want);
    let (status, none) = sd("", "nobody", "nobody-pw").await;
    assert_eq!((status, none.as_str()), (200, "[]"));
    let me = gw.gateway.cluster().view().me.to_string();
    let (status, mine) = sd(&format!("?member={me}"), "scraper", "scraper-pw").await;
    assert_eq!((status, instances(&mine)), (200, want.clone()));
    for (query, status, says) in [
        (
            "?member=gw-elsewhere",
            404,
            "No member \\\"gw-elsewhere\\\"",
        ),
        ("?target=x", 400, "Unknown parameter"),
        ("?shard=2&of=2", 400, "numbered 0 to 1"),
        ("?module=nope", 400, "Unknown module"),
    ] {
        let (got, said) = sd(query, "scraper", "scraper-pw").await;
        assert_eq!(got, status, "{query}: {said}");
        assert!(said.contains(says), "{query}: {said}");
    }
    let (status, _) = sd("", "scraper", "wrong").await;
    assert_eq!(status, 401);

    let port = common::free_port();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: jvms\n\
             \x20   basic_auth:\n      username: scraper\n      password: scraper-pw\n\
             \x20   http_sd_configs:\n      - url: \"http://{}/prometheus/sd\"\n        refresh_interval: 1s\n\
             \x20       basic_auth:\n          username: scraper\n          password: scraper-pw\n",
            gw.addr
        ),
    )
    .unwrap();
    let mut server = start_prometheus(&prometheus, &config, port, dir.path());
    let _kill = KillOnDrop(&mut server);
    let http = common::http_client();
    let targets_url = format!("http://127.0.0.1:{port}/api/v1/targets");
    common::eventually(
        "Prometheus scrapes the two discovered targets through the gateway",
        Duration::from_secs(90),
        || async {
            let r = http
                .get(&targets_url)
                .send()
                .await
                .map_err(|e| e.to_string())?;
            let v: Value = r.json().await.map_err(|e| e.to_string())?;
            let active = v["data"]["activeTargets"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let up: BTreeSet<String> = active
                .iter()
                .filter(|t| t["health"] == "up")
                .filter_map(|t| t["labels"]["instance"].as_str().map(str::to_string))
                .collect();
            if up == want && active.len() == 2 {
                Ok(())
            } else {
                Err(format!("{active:?}"))
            }
        },
    )
    .await;
    let own = direct(
        a,
        &json!({"type":"read","mbean":TYPES,"attribute":"LongMax"}),
    )
    .await;
    let query = url::Url::parse_with_params(
        &format!("http://127.0.0.1:{port}/api/v1/query"),
        [(
            "query",
            format!(
                "jmxgate_test_Types_LongMax{{instance=\"{}\",app_kubernetes_io_name=\"orders\",env=\"prod\"}}",
                a.name
            ),
        )],
    )
    .unwrap();
    let value = common::eventually(
        "the discovered target's samples carry its labels",
        Duration::from_secs(60),
        || async {
            let v: Value = http
                .get(query.clone())
                .send()
                .await
                .map_err(|e| e.to_string())?
                .json()
                .await
                .map_err(|e| e.to_string())?;
            v["data"]["result"][0]["value"][1]
                .as_str()
                .and_then(|v| v.parse::<f64>().ok())
                .ok_or(v.to_string())
        },
    )
    .await;
    assert_eq!(value, own["value"].as_f64().unwrap());
}

/// A real Prometheus with `config`, serving on 127.0.0.1:`port`, its data
/// under `dir`.
fn start_prometheus(
    prometheus: &Path,
    config: &Path,
    port: u16,
    dir: &Path,
) -> std::process::Child {
    std::process::Command::new(prometheus)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start prometheus")
}

struct KillOnDrop<'a>(&'a mut std::process::Child);

impl Drop for KillOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn which(cmd: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(cmd))
        .find(|p| p.is_file())
}

/// jmx_exporter's own example configs, when a checkout's `examples/` is
/// named by JMXGATE_EXPORTER_EXAMPLES (they are not in ../shared/, and
/// this repository keeps none of their text): every one loads unchanged,
/// and kafka-2_0_0.yml, tomcat.yml and cassandra.yml give the same
/// samples as jmx_exporter's agent for the product-like test MBeans.
#[tokio::test(flavor = "multi_thread")]
async fn jmx_exporters_example_configs_when_given() {
    let Some(dir) = std::env::var_os("JMXGATE_EXPORTER_EXAMPLES").map(PathBuf::from) else {
        eprintln!("JMXGATE_EXPORTER_EXAMPLES not set: jmx_exporter's example configs not tried");
        return;
    };
    let mut loaded = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if !matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yml" | "yaml")
        ) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let module = jmxgate::exporter::Module::from_yaml(&name, &text);
        if text.contains("\nhostPort:") || text.starts_with("hostPort:") {
            // A standalone exporter's config: refused, naming the target settings.
            let e = module
                .err()
                .unwrap_or_else(|| panic!("{name}: hostPort accepted"));
            assert!(e.contains("`url`"), "{name}: {e}");
            continue;
        }
        module.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        loaded += 1;
    }
    assert!(loaded >= 3, "no example configs in {}", dir.display());
    for example in ["kafka-2_0_0", "tomcat", "cassandra"] {
        let path = dir.join(format!("{example}.yml"));
        compare_with_jmx_exporter(example, &path, &[]).await;
    }
}

/// A scraper role whose policy denies one attribute never sees it: the
/// sample is missing, the denial counted, one audit record per target.
#[tokio::test(flavor = "multi_thread")]
async fn a_policy_leaves_denied_attributes_out_and_each_scrape_is_audited() {
    let [a, b, ..] = common::shared_agents();
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("scraper.xml");
    std::fs::write(
        &policy,
        format!("<restrict><deny><mbean><name>{TYPES}</name><attribute>Int</attribute></mbean></deny></restrict>"),
    )
    .unwrap();
    let users = common::users_file(dir.path(), &[("scraper", "pw", &["scraper"])]);
    let gw = Gateway::start(&common::basic_auth_config(
        &users,
        &format!(
            "{}[[roles]]\nname = \"scraper\"\ntargets = [\"*\"]\npolicy = \"{}\"\n\n[audit]\ndir = \"{}\"\n",
            targets_toml(&[a, b]),
            policy.display(),
            dir.path().join("audit").display()
        ),
    ))
    .await;
    let text = gw
        .http
        .get(gw.url(&format!(
            "/prometheus?target={}*",
            &a.name[..a.name.len() - 1]
        )))
        .basic_auth("scraper", Some("pw"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let scraped = parse_exposition(&text);
    assert!(
        !scraped
            .samples
            .keys()
            .any(|(n, _)| n == "jmxgate_test_Types_Int"),
        "{text}"
    );
    assert!(scraped
        .samples
        .keys()
        .any(|(n, _)| n == "jmxgate_test_Types_LongMax"));
    assert!(
        text.contains(&format!(
            "jmxgate_scrape_denied_attributes{{target=\"{}\"}} 1.0",
            a.name
        )),
        "{text}"
    );
    let records = audit_records(&dir.path().join("audit"));
    let scrapes: Vec<&Value> = records
        .iter()
        .filter(|r| r["channel"] == "prometheus" && r["event"] == "scrape")
        .collect();
    assert!(
        scrapes.iter().any(|r| r["target"] == a.name.as_str()),
        "{records:#?}"
    );
    assert!(scrapes
        .iter()
        .all(|r| r["principal"] == "scraper" && r["status"] == 200));
    assert!(
        scrapes[0]["note"]
            .as_str()
            .unwrap()
            .contains("1 attributes denied"),
        "{:?}",
        scrapes[0]
    );
    // One record per scrape and target, none per attribute.
    assert!(
        !records.iter().any(|r| r["event"] == "item"),
        "{records:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_are_clear_and_a_failing_target_does_not_fail_the_scrape() {
    let [a, ..] = common::shared_agents();
    let hostile = common::hostile::HostileAgent::start();
    let gw = Gateway::start(&format!(
        "{}{}\n",
        targets_toml(&[a]),
        hostile.targets_toml("request_timeout = \"5s\"\nmax_response_bytes = 1048576")
    ))
    .await;
    let get = |path: &str, headers: &[(&str, &str)]| {
        let mut r = gw.http.get(gw.url(path));
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        async move {
            let r = r.send().await.unwrap();
            let status = r.status().as_u16();
            let ctype = r
                .headers()
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_string());
            (status, ctype, r.text().await.unwrap())
        }
    };
    let (status, _, text) = get("/prometheus", &[]).await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("?target="), "{text}");
    let (status, _, text) = get(&format!("/prometheus?target={}&module=nope", a.name), &[]).await;
    assert_eq!(status, 400);
    // It says no more: neither the name asked for nor the modules there are.
    assert!(
        text.contains("Unknown module") && !text.contains("nope") && !text.contains("default"),
        "{text}"
    );
    let (status, _, _) = get("/prometheus?target=no-such-target", &[]).await;
    assert_eq!(status, 404);
    // Every hostile behaviour: an error sample, the real agent's samples
    // still there, within the scrape timeout the scraper gave.
    let started = std::time::Instant::now();
    let (status, ctype, text) = get(
        "/prometheus?target=*",
        &[("x-prometheus-scrape-timeout-seconds", "3")],
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(status, 200, "{text}");
    assert_eq!(
        ctype.as_deref(),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let scraped = parse_exposition(&text);
    assert!(
        text.contains(&format!("jmx_scrape_error{{target=\"{}\"}} 0.0", a.name)),
        "{text}"
    );
    for b in common::hostile::Behaviour::ALL {
        assert!(
            text.contains(&format!("jmx_scrape_error{{target=\"{}\"}} 1.0", b.name())),
            "{}: {text}",
            b.name()
        );
    }
    assert!(scraped
        .samples
        .keys()
        .any(|(n, _)| n == "jmxgate_test_Types_LongMax"));
    // OpenMetrics when asked for.
    let (_, ctype, text) = get(
        &format!("/prometheus?target={}", a.name),
        &[("accept", "application/openmetrics-text; version=1.0.0")],
    )
    .await;
    assert_eq!(
        ctype.as_deref(),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    assert!(text.ends_with("# EOF\n"), "{}", &text[text.len() - 100..]);
    assert!(text.contains("# TYPE jmx_scrape_error gauge\n"));
}

/// Two scrapers (an HA pair of Prometheus servers) scraping one target and
/// module at once cost the agent one exchange: `SlowReads` counts its own
/// reads, so both scrapes seeing the same count means one read.
#[tokio::test(flavor = "multi_thread")]
async fn concurrent_scrapes_of_one_target_share_one_agent_exchange() {
    let agent = Agent::start("prom-flight");
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("slow.yml");
    std::fs::write(
        &rules,
        "includeObjectNames: ['jmxgate.test:type=Counter']\n\
         includeObjectNameAttributes:\n  'jmxgate.test:type=Counter': [SlowReads]\n",
    )
    .unwrap();
    let gw = Gateway::start(&format!(
        "{}[[prometheus.modules]]\nname = \"slow\"\nrules_file = \"{}\"\n",
        targets_toml(&[&agent]),
        rules.display()
    ))
    .await;
    let url = gw.url(&format!("/prometheus?target={}&module=slow", agent.name));
    // A first scrape fills the list cache and the plan.
    common::get_text(&gw.http, &url).await;
    let (a, b) = tokio::join!(
        common::get_text(&gw.http, &url),
        common::get_text(&gw.http, &url)
    );
    let count = |text: &str| {
        parse_exposition(text).samples
            [&("jmxgate_test_Counter_SlowReads".to_string(), String::new())]
    };
    assert_eq!(count(&a), count(&b), "{a}\n{b}");
    let slow = json!({"type":"read","mbean":"jmxgate.test:type=Counter","attribute":"SlowReads"});
    let next = direct(&agent, &slow).await["value"].as_f64().unwrap();
    assert_eq!(next, count(&a) + 1.0, "one agent read for both scrapes");
}

/// A hostile agent's answers are bounded as Prometheus bounds a target:
/// a composite nested 60 deep (every leaf's name its whole key path) fails
/// its own target with the bound it went over, never multiplied into the
/// answer; an MBean's own `target` and `exported_target` keys are renamed
/// as Prometheus renames; an MBean named like the gateway's own families
/// (`jmx:type=scrape`, attribute `error`) sets none of them. The real
/// agent scraped in the same answer keeps its samples.
#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_agents_answers_stay_within_the_scrape_bounds() {
    use common::hostile::{Behaviour, HostileAgent};
    let [a, ..] = common::shared_agents();
    let hostile = HostileAgent::start();
    let mut config = format!("{}\n", targets_toml(&[a]));
    for b in Behaviour::MBEANS {
        config.push_str(&format!(
            "[[targets]]\nname = \"{}\"\nurl = \"{}\"\nlabels = {{ scrape = \"bounded\" }}\n",
            b.name(),
            hostile.url(b)
        ));
    }
    let audit = tempfile::tempdir().unwrap();
    config.push_str(&format!("[audit]\ndir = \"{}\"\n", audit.path().display()));
    let gw = Gateway::start(&config).await;
    let text = common::get_text(&gw.http, &gw.url("/prometheus?target=*")).await;
    // The deep composite's 38 KB answer once made 75 MB of metrics.
    assert!(text.len() < 1 << 20, "{} bytes", text.len());
    let line = |name: &str, labels: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{name}{{{labels}}} ")))
            .map(|l| l.rsplit_once(' ').unwrap().1.to_string())
    };
    assert_eq!(
        line("jmx_scrape_error", "target=\"deep-composite\"").as_deref(),
        Some("1.0"),
        "{text}"
    );
    assert_eq!(
        line(
            "jmxgate_scrape_failure",
            "reason=\"name_length_limit\",target=\"deep-composite\""
        )
        .as_deref(),
        Some("1.0"),
        "{text}"
    );
    assert!(
        !text.contains("evil_Deep"),
        "no sample of the failed target"
    );
    // The others keep theirs.
    assert_eq!(
        line("jmx_scrape_error", &format!("target=\"{}\"", a.name)).as_deref(),
        Some("0.0")
    );
    assert!(text.contains(&format!(
        "jmxgate_test_Types_LongMax{{target=\"{}\"}}",
        a.name
    )));
    assert_eq!(
        line("jmx_scrape_error", "target=\"own-names\"").as_deref(),
        Some("0.0"),
        "{text}"
    );
    // Each label once: the MBean's `exported_target` kept, its `target`
    // moved on to `exported_exported_target`, the gateway's own `target`.
    assert_eq!(
        line(
            "evil_Labels_Value",
            "exported_exported_target=\"inner\",exported_target=\"outer\",target=\"own-names\""
        )
        .as_deref(),
        Some("7.0"),
        "{text}"
    );
    // `jmx:type=scrape`'s `error` would be `jmx_scrape_error 736`: left
    // out and counted, the family still the gateway's gauge.
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("jmx_scrape_error") && l.ends_with(" 736.0")),
        "{text}"
    );
    assert_eq!(text.matches("# TYPE jmx_scrape_error ").count(), 1);
    assert!(text.contains("# TYPE jmx_scrape_error gauge\n"), "{text}");
    assert_eq!(
        line("jmxgate_scrape_dropped_samples", "target=\"own-names\"").as_deref(),
        Some("1.0"),
        "{text}"
    );
    // The answer parses as Prometheus reads it: no label twice anywhere.
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        if let Some((_, labels)) = l.split_once('{') {
            let labels = labels.rsplit_once('}').unwrap().0;
            let names: Vec<&str> = labels
                .split("\",")
                .map(|kv| kv.split_once('=').unwrap().0)
                .collect();
            let unique: BTreeSet<&str> = names.iter().copied().collect();
            assert_eq!(unique.len(), names.len(), "{l}");
        }
    }
    // The audit record says why the target failed.
    let records = audit_records(audit.path());
    let deep = records
        .iter()
        .find(|r| r["channel"] == "prometheus" && r["target"] == "deep-composite")
        .unwrap();
    assert!(
        deep["note"]
            .as_str()
            .unwrap()
            .contains("prometheus.name_length_limit"),
        "{deep}"
    );
    // The gateway keeps serving: the next scrape is the same.
    let again = common::get_text(&gw.http, &gw.url("/prometheus?target=deep-composite")).await;
    assert!(
        again.contains("jmx_scrape_error{target=\"deep-composite\"} 1.0"),
        "{again}"
    );
}

/// Each bound is the operator's to set, and a target over it fails alone
/// with the bound's key as its reason.
#[tokio::test(flavor = "multi_thread")]
async fn a_target_over_a_configured_bound_fails_with_that_bound() {
    let [a, b, ..] = common::shared_agents();
    for (bound, setting) in [
        ("sample_limit", "sample_limit = 5"),
        ("body_size_limit", "body_size_limit = 2000"),
        ("label_limit", "label_limit = 1"),
    ] {
        let gw = Gateway::start(&format!(
            "{}[prometheus]\n{setting}\n",
            targets_toml(&[a, b])
        ))
        .await;
        let text =
            common::get_text(&gw.http, &gw.url(&format!("/prometheus?target={}", a.name))).await;
        assert!(
            text.contains(&format!("jmx_scrape_error{{target=\"{}\"}} 1.0", a.name)),
            "{bound}: {text}"
        );
        assert!(
            text.contains(&format!(
                "jmxgate_scrape_failure{{reason=\"{bound}\",target=\"{}\"}} 1.0",
                a.name
            )),
            "{bound}: {text}"
        );
        assert!(!text.contains("jmxgate_test_Types"), "{bound}: {text}");
    }
}

/// A rule that backtracks over long MBean names does its work off the
/// serving threads and stops at the scrape's deadline: the scrape answers
/// with a timeout for that target, not long after, and a Jolokia request
/// sent meanwhile is answered.
#[tokio::test(flavor = "multi_thread")]
async fn a_backtracking_rule_over_long_names_keeps_to_the_deadline() {
    use common::hostile::{Behaviour, HostileAgent};
    let [a, ..] = common::shared_agents();
    let hostile = HostileAgent::start();
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("slow.yml");
    // Alternatives under a lookahead (so the backtracking engine runs the
    // loop) that never find their `Z` after 6,000 `a`s: each match gives up
    // only at the backtracking limit.
    // Fifty such rules: far more work than the deadline allows.
    let slow: String = (0..50)
        .map(|i| {
            format!("- pattern: 'evil<type=Long, name=\\d+((?=a)a|(?=a)aa)*Z{i}'\n  name: never\n")
        })
        .collect();
    std::fs::write(&rules, format!("rules:\n{slow}")).unwrap();
    let gw = Gateway::start(&format!(
        "{}\n[[targets]]\nname = \"long-names\"\nurl = \"{}\"\n\
         [prometheus]\ncpu_threads = 1\n\
         [[prometheus.modules]]\nname = \"slow\"\nrules_file = \"{}\"\n",
        targets_toml(&[a]),
        hostile.url(Behaviour::LongNames),
        rules.display()
    ))
    .await;
    let scrape = {
        let (http, url) = (
            gw.http.clone(),
            gw.url("/prometheus?target=long-names&module=slow"),
        );
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            let r = http
                .get(url)
                .header("x-prometheus-scrape-timeout-seconds", "4")
                .send()
                .await
                .unwrap();
            (r.text().await.unwrap(), started.elapsed())
        })
    };
    // Meanwhile the Jolokia door answers.
    let version = json!({"type": "version", "target": {"url": a.name}});
    let (status, answer) = gw.post("/jolokia", &version).await;
    assert_eq!((status, &answer["status"]), (200, &json!(200)), "{answer}");
    let (text, took) = scrape.await.unwrap();
    assert!(
        text.contains("jmx_scrape_error{target=\"long-names\"} 1.0"),
        "{text}"
    );
    assert!(
        text.contains("jmxgate_scrape_failure{reason=\"timeout\",target=\"long-names\"} 1.0"),
        "{text}"
    );
    // The deadline is 3.5 s; unbounded, the rules take far longer (once
    // 19 s for an 8 s deadline). Room for a loaded machine.
    assert!(took < Duration::from_secs(20), "{took:?}");
}

/// Jolokia 2.6.0 fails a read of all of Tomcat's `Catalina:type=Server`
/// attributes when one can't be serialised: the hostile agent does the
/// same. The bean is read again attribute by attribute, so only that one
/// is lost (as jmx_exporter loses it), and later scrapes don't ask for it.
/// A type that never gives a sample (an object graph) is never read.
#[tokio::test(flavor = "multi_thread")]
async fn a_bean_that_fails_whole_loses_only_its_broken_attribute() {
    use common::hostile::{Behaviour, HostileAgent, BROKEN_READS};
    use std::sync::atomic::Ordering;
    let hostile = HostileAgent::start();
    let gw = Gateway::start(&format!(
        "[[targets]]\nname = \"tomcat\"\nurl = \"{}\"\n",
        hostile.url(Behaviour::BrokenBean)
    ))
    .await;
    let url = gw.url("/prometheus?target=tomcat");
    for scrape in 0..2 {
        let text = common::get_text(&gw.http, &url).await;
        let parsed = parse_exposition(&text);
        let sample = |name: &str| {
            parsed
                .samples
                .get(&(name.to_string(), String::new()))
                .copied()
        };
        assert_eq!(sample("Catalina_Server_port"), Some(8005.0), "{text}");
        assert_eq!(sample("Catalina_Server_value"), Some(3.0), "{text}");
        assert!(
            text.contains("jmx_scrape_error{target=\"tomcat\"} 0.0"),
            "{text}"
        );
        assert!(
            text.contains("jmxgate_scrape_failed_attributes{target=\"tomcat\"} 1.0"),
            "scrape {scrape}: {text}"
        );
        assert!(!text.contains("managedResource"), "{text}");
    }
    // The bean's read, then `broken` alone; not again in the second scrape.
    assert_eq!(BROKEN_READS.load(Ordering::Relaxed), 2);
}

/// A healthy JVM's memory pools say their thresholds are not supported
/// (2.x), a write-only attribute can't be read (1.x lists it): counted
/// apart, never as failed attributes an operator would alert on.
#[tokio::test(flavor = "multi_thread")]
async fn unsupported_attributes_are_no_failures() {
    let [a, ..] = common::shared_agents();
    let gw = Gateway::start(&targets_toml(&[a])).await;
    let text = common::get_text(&gw.http, &gw.url(&format!("/prometheus?target={}", a.name))).await;
    let parsed = parse_exposition(&text);
    let own = |name: &str| {
        parsed
            .samples
            .iter()
            .find(|((n, _), _)| n == name)
            .map(|(_, v)| *v)
            .unwrap_or_else(|| panic!("no {name}: {text}"))
    };
    assert!(own("jmxgate_scrape_unsupported_attributes") > 0.0, "{text}");
    assert_eq!(own("jmxgate_scrape_failed_attributes"), 0.0, "{text}");
}
