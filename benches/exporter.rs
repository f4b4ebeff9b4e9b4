//! The Prometheus door's own work per scrape, without the network: a plan
//! from a `list` answer, samples from the read answers under a rules file
//! (bench/exporter-rules.yml) the first time and when the mappings are
//! remembered, and the exposition text. One JVM with 600 MBeans of eight
//! readable values each, about 5,000 samples, as bench/run.sh scrapes it.
//! OpenTelemetry's JMX rules (bench/otel-rules.yaml, six values of each
//! MBean) beside them, per sample. Run: `cargo bench --bench exporter`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use jmxgate::exporter::exposition::{Exposition, Format};
use jmxgate::exporter::limits::Limits;
use jmxgate::exporter::scrape::{Plan, Read};
use jmxgate::exporter::{otel, Module};
use serde_json::{json, Value};

// The allocator `jmxgate serve` runs with.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const MBEANS: usize = 600;

/// A `list` answer's value as a 2.x agent gives it (registration order,
/// `canonicalNaming=false`) for the test agent's `--many-mbeans` copies.
fn list() -> Value {
    let attr = |t: &str| json!({"type": t, "desc": "Attribute", "rw": false, "r": true});
    let mut domains = serde_json::Map::new();
    for i in 0..MBEANS {
        let domain = domains
            .entry(format!("jmxgate.many{}", i % 40))
            .or_insert_with(|| json!({}));
        domain[format!("type=Component,name=c{i}")] = json!({"attr": {
            "LongMax": attr("long"), "Counter": attr("long"), "Int": attr("int"),
            "Double": attr("double"), "Flag": attr("boolean"), "Name": attr("java.lang.String"),
            "Composite": attr("javax.management.openmbean.CompositeData")}});
    }
    Value::Object(domains)
}

/// OpenTelemetry rules' plan and samples for the same MBeans: points per
/// scrape (every one made anew: the rules match MBeans, not values).
fn bench_otel(c: &mut Criterion, list: &Value) {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/bench/otel-rules.yaml"
    ))
    .unwrap();
    let files = [("bench/otel-rules.yaml".to_string(), text)];
    let module = otel::Module::from_files("otel", &files, &[], &[]).unwrap();
    let limits = Limits::default();
    let mut g = c.benchmark_group("prometheus_scrape_opentelemetry_rules");
    g.sample_size(20);
    g.bench_function("plan from list", |b| {
        b.iter(|| otel::plan::Plan::from_list(black_box(&module), black_box(list), 100_000))
    });
    let plan = otel::plan::Plan::from_list(&module, list, 100_000);
    let answered = plan.reads.assemble(answers(&plan.reads, 0));
    let scraped = plan.apply(&module, &answered, &limits);
    assert_eq!(scraped.samples.len(), 6 * MBEANS);
    eprintln!(
        "OpenTelemetry rules: {} points a scrape",
        scraped.samples.len()
    );
    g.bench_function("a scrape's 3,600 points", |b| {
        b.iter(|| plan.apply(&module, black_box(&answered), &limits))
    });
    g.bench_function("their Prometheus names", |b| {
        b.iter_batched(
            || scraped.samples.clone(),
            otel::prometheus::to_prometheus,
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

/// The read answers, the counter at `tick`.
fn answers(plan: &Plan, tick: i64) -> Vec<(Read, Value)> {
    plan.reads()
        .into_iter()
        .map(|(read, _)| {
            let value = json!({"LongMax": i64::MAX, "Counter": 1000 + tick, "Int": 42,
                "Double": 2.5, "Flag": true, "Name": "component",
                "Composite": {"count": 7 + tick, "ratio": 0.25}});
            (read, json!({"status": 200, "value": value}))
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let rules_file = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/exporter-rules.yml");
    let rules = Module::from_yaml("rules", &std::fs::read_to_string(rules_file).unwrap()).unwrap();
    let default = Module::from_yaml("default", "{}").unwrap();
    let list = list();

    let mut g = c.benchmark_group("prometheus_scrape_5000_values");
    g.sample_size(20);
    g.bench_function("plan from list", |b| {
        b.iter(|| Plan::from_list(black_box(&rules), black_box(&list)))
    });
    let limits = Limits::default();
    for (label, module) in [("rules file", &rules), ("no rules", &default)] {
        g.bench_function(
            format!("{label}: first scrape (every value matched)"),
            |b| {
                b.iter_batched(
                    || {
                        let plan = Plan::from_list(module, &list);
                        let answers = answers(&plan, 0);
                        (plan, answers)
                    },
                    // Returned, so dropping them is not timed.
                    |(plan, answers)| {
                        let scraped = plan.apply(module, &answers, &limits);
                        (plan, answers, scraped)
                    },
                    BatchSize::LargeInput,
                )
            },
        );
        let plan = Plan::from_list(module, &list);
        plan.apply(module, &answers(&plan, 0), &limits);
        let counters_moved = answers(&plan, 1);
        let counters_back = answers(&plan, 0);
        let mut flip = false;
        g.bench_function(format!("{label}: next scrape (counters changed)"), |b| {
            b.iter(|| {
                flip = !flip;
                plan.apply(
                    module,
                    if flip {
                        &counters_moved
                    } else {
                        &counters_back
                    },
                    &limits,
                )
            })
        });
        let scraped = plan.apply(module, &counters_back, &limits);
        // Per sample, for docs/benchmarks.md's ratios.
        eprintln!("{label}: {} samples a scrape", scraped.samples.len());
        assert!(
            scraped.samples.len() >= 4 * MBEANS,
            "{}",
            scraped.samples.len()
        );
        g.bench_function(format!("{label}: exposition text"), |b| {
            b.iter_batched(
                || scraped.samples.clone(),
                |samples| {
                    let mut e = Exposition::default();
                    e.add_target(samples, &[("target".into(), "big".into())], &[]);
                    e.write(Format::Text)
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
    bench_otel(c, &list);
}

criterion_group!(benches, bench);
criterion_main!(benches);
