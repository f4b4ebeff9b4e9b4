//! Audit log cost: records per second with durability on (group commit
//! under concurrency), and the gateway's own request rate with audit off
//! and on. Run: `cargo bench --bench audit`; docs/benchmarks.md reports the
//! numbers. Requests go to `version` without a target, which the gateway
//! answers itself, so no agent's speed is measured.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use jmxgate::audit::{AuditConfig, AuditLog, Durability, Entry};

const CONCURRENCY: usize = 64;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `iters` calls spread over [`CONCURRENCY`] tasks and returns the
/// time scaled to exactly `iters` calls.
fn timed<F, Fut>(rt: &tokio::runtime::Runtime, iters: u64, call: F) -> Duration
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    rt.block_on(async move {
        let per_task = (iters as usize).div_ceil(CONCURRENCY);
        let started = Instant::now();
        let tasks: Vec<_> = (0..CONCURRENCY)
            .map(|_| {
                let call = call.clone();
                tokio::spawn(async move {
                    for _ in 0..per_task {
                        call().await;
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        started
            .elapsed()
            .mul_f64(iters as f64 / (per_task * CONCURRENCY) as f64)
    })
}

fn audit_config(dir: &std::path::Path, durable: Durability) -> AuditConfig {
    let text = format!(
        "dir = \"{}\"\ndurable = \"{}\"\n",
        dir.display(),
        if durable == Durability::All {
            "all"
        } else {
            "write-exec"
        }
    );
    toml::from_str(&text).unwrap()
}

fn record() -> Entry {
    Entry {
        time: "2026-11-22T00:00:00.000Z".into(),
        event: "item".into(),
        request_id: Some("bench-1".into()),
        principal: Some("alice".into()),
        target: Some("orders-1".into()),
        kind: Some("exec".into()),
        mbean: Some("java.lang:type=Memory".into()),
        operation: Some("gc".into()),
        decision: Some("allowed".into()),
        status: Some(200),
        ..Entry::default()
    }
}

fn writer(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let log = AuditLog::start(
        &audit_config(dir.path(), Durability::All),
        Default::default(),
    )
    .unwrap();
    let mut g = c.benchmark_group("audit_writer");
    g.throughput(Throughput::Elements(1));
    g.bench_function(
        format!("durable record, {CONCURRENCY} concurrent writers"),
        |b| {
            b.iter_custom(|iters| {
                let log = log.clone();
                timed(&rt, iters, move || {
                    let log = log.clone();
                    async move { log.write(vec![record()], true).await.unwrap() }
                })
            })
        },
    );
    g.finish();
}

/// Requests per second through the whole pipeline (HTTP, parse, route,
/// authorize, merge, audit, respond) for `version`.
fn gateway(c: &mut Criterion) {
    let rt = runtime();
    let mut g = c.benchmark_group("gateway_version");
    g.throughput(Throughput::Elements(1));
    g.measurement_time(Duration::from_secs(8));
    for (name, audit) in [
        ("audit off", None),
        ("audit on, default durability", Some(Durability::WriteExec)),
        ("audit on, all durable", Some(Durability::All)),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut text = "[server]\nlisten = \"127.0.0.1:0\"\n".to_string();
        if let Some(d) = audit {
            text += &format!(
                "[audit]\ndir = \"{}\"\ndurable = \"{}\"\n",
                dir.path().display(),
                if d == Durability::All {
                    "all"
                } else {
                    "write-exec"
                }
            );
        }
        let config = jmxgate::Config::parse(&text).unwrap().validate().unwrap();
        let gateway = Arc::new(jmxgate::Gateway::new(&config).unwrap());
        let addr = rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(jmxgate::pipeline::listen::serve(
                listener,
                gateway,
                std::future::pending(),
            ));
            addr
        });
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder().build().unwrap();
        let url = format!("http://{addr}/jolokia/version");
        g.bench_function(format!("{name}, {CONCURRENCY} concurrent clients"), |b| {
            b.iter_custom(|iters| {
                let (http, url) = (http.clone(), url.clone());
                timed(&rt, iters, move || {
                    let (http, url) = (http.clone(), url.clone());
                    async move {
                        let r = http.get(&url).send().await.unwrap();
                        r.bytes().await.unwrap();
                    }
                })
            })
        });
    }
    g.finish();
}

criterion_group!(benches, writer, gateway);
criterion_main!(benches);
