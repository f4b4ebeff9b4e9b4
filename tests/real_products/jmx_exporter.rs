//! The Prometheus door against jmx_exporter: the gateway's answer for
//! jmx_exporter's own example rules file, and for no rules, must hold
//! every series jmx_exporter's `/metrics` holds, and no other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{self, Gateway, Generation};
use crate::products::{exporter_jar, present, Product, ProductJvm};

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
                let (text, took) = scrape(
                    &gw.http,
                    jvm.exporter_url.as_deref().expect("jmx_exporter's agent"),
                    format,
                )
                .await;
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
        ProductJvm::start(product, generation, Some(&with_rules)),
        ProductJvm::start(product, generation, Some(&no_rules))
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
