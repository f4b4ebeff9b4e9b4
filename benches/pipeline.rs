//! The pure steps of the pipeline, per request: parse (GET and POST),
//! route, merge, and the JSON forms going to the agent and back. Run:
//! `cargo bench --bench pipeline`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use jmxgate::pipeline::route::{resolve_target_url, route_item, Addressing, Reach};
use jmxgate::pipeline::{merge, parse};
use jmxgate::protocol::{parse_bulk_answer, serialize_bulk, Response};

fn bulk_body(n: usize) -> Vec<u8> {
    let items: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            serde_json::json!({
                "type": "read", "mbean": "java.lang:type=Memory", "attribute": "HeapMemoryUsage",
                "path": "used", "target": {"url": format!("orders-{}", i % 5)}, "config": {"ignoreErrors": true}
            })
        })
        .collect();
    serde_json::to_vec(&items).unwrap()
}

fn answer(n: usize) -> Vec<u8> {
    let one = r#"{"request":{"mbean":"java.lang:type=Memory","attribute":"HeapMemoryUsage","type":"read"},"value":{"init":67108864,"committed":64880640,"max":64880640,"used":7527472},"timestamp":1795312410,"status":200}"#;
    format!("[{}]", vec![one; n].join(",")).into_bytes()
}

fn fleet() -> jmxgate::fleet::Fleet {
    let mut text = "[server]\nlisten = \"127.0.0.1:1\"\n".to_string();
    for i in 0..50 {
        text += &format!(
            "[[targets]]\nname = \"orders-{i}\"\nurl = \"http://10.0.0.{i}:8778/jolokia\"\n"
        );
    }
    let config = jmxgate::Config::parse(&text).unwrap().validate().unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    jmxgate::fleet::Fleet::new(&config.targets, &config.target_defaults).unwrap()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse");
    g.bench_function("GET read path", |b| {
        b.iter(|| {
            parse::parse_get(
                black_box("/read/java.lang:type=Memory/HeapMemoryUsage/used"),
                Some("ignoreErrors=true"),
            )
        })
    });
    for n in [1, 10, 100] {
        let body = bulk_body(n);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(format!("POST bulk of {n}"), |b| {
            b.iter(|| parse::parse_post(black_box(&body), None, 1000))
        });
    }
    g.finish();

    let fleet = fleet();
    let named = parse::parse_post(
        br#"{"type":"version","target":{"url":"orders-42"}}"#,
        None,
        1,
    )
    .unwrap();
    let item = named.items[0].parsed.as_ref().unwrap();
    let reach = Reach {
        reaches: &|_| true,
        max_targets: 100,
    };
    let mut g = c.benchmark_group("route");
    g.bench_function("by name", |b| {
        b.iter(|| {
            route_item(
                &fleet,
                Addressing::Proxy {
                    default_target: None,
                },
                black_box(item),
                &reach,
            )
        })
    });
    g.bench_function("by connector URL", |b| {
        b.iter(|| {
            resolve_target_url(
                &fleet,
                black_box("service:jmx:jolokia://10.0.0.42:8778/jolokia"),
            )
        })
    });
    g.finish();

    let mut g = c.benchmark_group("json");
    let parsed = parse::parse_post(&bulk_body(10), None, 1000).unwrap();
    let requests: Vec<_> = parsed
        .items
        .iter()
        .map(|i| i.parsed.as_ref().unwrap().request.clone())
        .collect();
    g.throughput(Throughput::Elements(10));
    g.bench_function("serialise a bulk of 10 for the agent", |b| {
        b.iter(|| serialize_bulk(black_box(&requests)))
    });
    let raw = answer(10);
    g.bench_function("parse an agent's answer of 10", |b| {
        b.iter(|| parse_bulk_answer(black_box(&raw)).unwrap())
    });
    g.finish();

    let mut g = c.benchmark_group("merge");
    let answers = parse_bulk_answer(&answer(100)).unwrap();
    let echo = serde_json::value::to_raw_value(&serde_json::json!({"type":"read","mbean":"java.lang:type=Memory","attribute":"HeapMemoryUsage"})).unwrap();
    g.throughput(Throughput::Elements(100));
    g.bench_function("100 answers back in order, echoed, serialised", |b| {
        b.iter(|| {
            let pairs: Vec<(usize, Response)> = answers.iter().cloned().enumerate().rev().collect();
            let mut merged = merge::merge(100, pairs);
            for a in &mut merged {
                merge::echo_request(a, &echo, true);
            }
            jmxgate::pipeline::respond::body(&merged, true)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
