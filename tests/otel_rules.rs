//! OpenTelemetry's JMX rules through the Prometheus door as jmx_exporter's
//! are: the caller's policy, selectors, the bounds and the audit apply
//! alike; values of the wrong shape from a hostile agent of our own are
//! counted, visible drops that cost nothing else; `check-config` names
//! every problem of a rules file with its rule and line. (The shipped
//! files against real products: tests/real_products/opentelemetry.rs.)

mod common;

use std::process::Command;

use common::hostile::{Behaviour, HostileAgent};
use common::{audit_records, targets_toml, Gateway};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_jmxgate");

/// A series' value in an exposition, by its whole `name{labels}`.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit_once(' '))
        .and_then(|(_, v)| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread")]
async fn policy_selectors_bounds_and_audit_apply_as_to_jmx_exporters_rules() {
    let [a, b, ..] = common::shared_agents();
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("scraper.xml");
    std::fs::write(
        &policy,
        "<restrict><deny><mbean><name>java.lang:type=Threading</name><attribute>ThreadCount</attribute></mbean></deny></restrict>",
    )
    .unwrap();
    let users = common::users_file(dir.path(), &[("scraper", "pw", &["scraper"])]);
    let audit = dir.path().join("audit");
    let gw = Gateway::start(&common::basic_auth_config(
        &users,
        &format!(
            "{}[[roles]]\nname = \"scraper\"\ntargets = [\"*\"]\npolicy = \"{}\"\n\n\
             [[prometheus.modules]]\nname = \"otel\"\notel_rules = [\"jvm\"]\n\n\
             [audit]\ndir = \"{}\"\n",
            targets_toml(&[a, b]),
            policy.display(),
            audit.display()
        ),
    ))
    .await;
    // A glob over both agents.
    let text = gw
        .http
        .get(gw.url("/prometheus?target=*&module=otel"))
        .basic_auth("scraper", Some("pw"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for t in [a, b] {
        let on = |name: &str| format!("{name}{{target=\"{}\"}}", t.name);
        assert_eq!(value(&text, &on("jmx_scrape_error")), Some(0.0), "{text}");
        // Denied by the caller's policy: left out, and counted.
        assert_eq!(value(&text, &on("jvm_thread_count")), None, "{text}");
        assert_eq!(
            value(&text, &on("jmxgate_scrape_denied_attributes")),
            Some(1.0),
            "{text}"
        );
        // The rest as OpenTelemetry's names and the agent's values.
        assert!(
            value(&text, &on("jvm_class_count")).is_some_and(|v| v > 100.0),
            "{text}"
        );
        assert!(
            value(&text, &on("jvm_class_loaded_total")).is_some(),
            "{text}"
        );
    }
    assert!(
        text.contains("# TYPE jvm_class_loaded_total counter"),
        "{text}"
    );
    assert!(
        text.contains("# HELP jvm_class_count Number of classes currently loaded."),
        "{text}"
    );
    // One record per target and scrape, naming the module.
    let records = audit_records(&audit);
    let scrapes: Vec<&Value> = records
        .iter()
        .filter(|r| r["channel"] == "prometheus" && r["event"] == "scrape")
        .collect();
    assert_eq!(scrapes.len(), 2, "{records:#?}");
    for r in &scrapes {
        assert_eq!(r["principal"], "scraper");
        let note = r["note"].as_str().unwrap();
        assert!(
            note.starts_with("module otel: ") && note.contains("1 attributes denied"),
            "{note}"
        );
    }

    // A bound a target goes over fails that target, saying which.
    let bounded = Gateway::start(&format!(
        "{}[prometheus]\nsample_limit = 5\n\n[[prometheus.modules]]\nname = \"otel\"\notel_rules = [\"jvm\"]\n",
        targets_toml(&[a])
    ))
    .await;
    let text = common::get_text(
        &bounded.http,
        &bounded.url(&format!("/prometheus?target={}&module=otel", a.name)),
    )
    .await;
    let on = format!("target=\"{}\"", a.name);
    assert_eq!(
        value(&text, &format!("jmx_scrape_error{{{on}}}")),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            &format!("jmxgate_scrape_failure{{reason=\"sample_limit\",{on}}}")
        ),
        Some(1.0),
        "{text}"
    );
    assert!(
        !text.contains("jvm_class_count"),
        "no sample of the failed target: {text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn values_of_the_wrong_shape_are_counted_drops_that_cost_nothing_else() {
    let hostile = HostileAgent::start();
    let [a, ..] = common::shared_agents();
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("shifty.yaml");
    std::fs::write(
        &rules,
        "rules:
  - bean: shifty:type=Values
    prefix: shifty.
    unit: '1'
    mapping:
      Count:
        metric: count
      Shape:
        metric: shape
      Fine:
        metric: fine
        type: updowncounter
      State:
        metric: state
        type: state
        metricAttribute:
          shifty.state:
            running: RUNNING
            other: '*'
  - bean: shifty:type=Array
    unit: '1'
    mapping:
      Value:
        metric: shifty.array
  - bean: java.lang:type=ClassLoading
    unit: '{class}'
    mapping:
      LoadedClassCount:
        metric: classes
",
    )
    .unwrap();
    let gw = Gateway::start(&format!(
        "{}[[targets]]\nname = \"shifty\"\nurl = \"{}\"\n\n\
         [[prometheus.modules]]\nname = \"shifty\"\notel_rules = [\"{}\"]\n",
        targets_toml(&[a]),
        hostile.url(Behaviour::Shifty),
        rules.display()
    ))
    .await;
    let scrape = || async {
        common::get_text(&gw.http, &gw.url("/prometheus?target=*&module=shifty")).await
    };
    let mut counts = Vec::new();
    for _ in 0..2 {
        let text = scrape().await;
        let on = |name: &str| format!("{name}{{target=\"shifty\"}}");
        assert_eq!(value(&text, &on("jmx_scrape_error")), Some(0.0), "{text}");
        assert_eq!(value(&text, &on("shifty_fine")), Some(7.0), "{text}");
        assert_eq!(
            value(
                &text,
                "shifty_state{shifty_state=\"running\",target=\"shifty\"}"
            ),
            Some(1.0),
            "{text}"
        );
        assert_eq!(
            value(
                &text,
                "shifty_state{shifty_state=\"other\",target=\"shifty\"}"
            ),
            Some(0.0),
            "{text}"
        );
        // `Shape` every time, `Count` when it is text: dropped, counted.
        let dropped = value(&text, &on("jmxgate_scrape_dropped_samples")).unwrap();
        let count = value(&text, &on("shifty_count_ratio"));
        assert_eq!(dropped, if count.is_some() { 1.0 } else { 2.0 }, "{text}");
        // The array answer: its attribute lost, counted as failed.
        assert_eq!(
            value(&text, &on("jmxgate_scrape_failed_attributes")),
            Some(1.0),
            "{text}"
        );
        assert!(!text.contains("shifty_array"), "{text}");
        // The well-behaved target alongside keeps every sample.
        let other = format!("classes{{target=\"{}\"}}", a.name);
        assert!(value(&text, &other).is_some_and(|v| v > 100.0), "{text}");
        counts.push(count);
    }
    // A number on one read, text on the next.
    assert!(
        counts.iter().any(Option::is_some) && counts.iter().any(Option::is_none),
        "{counts:?}"
    );
}

#[test]
fn check_config_names_every_problem_of_a_rules_file_with_its_rule_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("mine.yaml");
    std::fs::write(
        &rules,
        "rules:
  - bean: a:type=b
    mapping:
      A:
        type: gage
        unit: '1'
  - bean: a:type=c
    mapping:
      B:
        type: gauge
      C:
        unit: ms
        sourceUnit: h
",
    )
    .unwrap();
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n[[prometheus.modules]]\nname = \"mine\"\notel_rules = [\"jvm\", \"{}\", \"tomcta\"]\n\n\
             [[prometheus.modules]]\nname = \"both\"\nrules_file = \"x.yml\"\notel_rules = [\"jvm\"]\n",
            rules.display()
        ),
    )
    .unwrap();
    let out = Command::new(BIN)
        .arg("check-config")
        .arg(&config)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    let file = rules.display().to_string();
    for problem in [
        format!("{file}: rule 1 (line 2), mapping A (line 5): Invalid metric type: GAGE"),
        format!(
            "{file}: rule 2 (line 7), mapping B (line 10): Metric unit is required for metric 'B'"
        ),
        format!(
            "{file}: rule 2 (line 7), mapping C (line 12): Unsupported conversion from [h] to [ms]"
        ),
        "\"tomcta\" is no built-in system".to_string(),
        "prometheus.modules[1] (both): give rules_file (jmx_exporter's rules) or otel_rules"
            .to_string(),
    ] {
        assert!(text.contains(&problem), "missing {problem:?} in:\n{text}");
    }
    // A good module of the built-in files passes.
    std::fs::write(
        &config,
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[[prometheus.modules]]\nname = \"otel\"\notel_rules = [\"jvm\", \"tomcat\", \"kafka-broker\"]\notel_excluded = [\"jvm.memory.init\"]\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .arg("check-config")
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
