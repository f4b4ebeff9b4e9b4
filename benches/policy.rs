//! Policy evaluation cost per item, for a 200-rule policy (docs/benchmarks.md
//! reports the numbers). Run: `cargo bench --bench policy`.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use jmxgate::pipeline::authorize::{check_policy, RequestFacts};
use jmxgate::policy::Policy;
use jmxgate::protocol::{ObjectName, Params, Request};

/// 200 rules: 150 exact MBeans and 50 patterns, split over <allow> and
/// <deny>, with attributes, wildcards and operations, plus <remote>,
/// <http>, <cors> and <filter> sections that every request passes through.
fn policy_200() -> String {
    let mut xml = String::from(
        "<restrict>\n<remote><host>10.0.0.0/8</host><host>192.168.0.0/16</host><host>127.0.0.1</host></remote>\n\
         <http><method>post</method><method>get</method></http>\n\
         <commands><command>read</command><command>list</command><command>search</command><command>version</command></commands>\n\
         <filter><mbean>secret.*:*</mbean></filter>\n<allow>\n",
    );
    for i in 0..100 {
        if i % 4 == 0 {
            xml += &format!(
                "<mbean><name>app{i}:type=Pool,*</name><operation>reset*</operation><attribute mode=\"read\">Stat*</attribute></mbean>\n"
            );
        } else {
            xml += &format!(
                "<mbean><name>app{i}:type=Service,name=s{i}</name><operation>restart</operation><operation>flush(int)</operation><attribute>Level</attribute></mbean>\n"
            );
        }
    }
    xml += "</allow>\n<deny>\n";
    for i in 0..100 {
        if i % 4 == 0 {
            xml += &format!(
                "<mbean><name>app{i}:type=Cache,*</name><attribute>Secret*</attribute></mbean>\n"
            );
        } else {
            xml += &format!(
                "<mbean><name>app{i}:type=Service,name=s{i}</name><attribute>Password</attribute><attribute>Key*</attribute></mbean>\n"
            );
        }
    }
    xml + "</deny>\n</restrict>\n"
}

fn bench(c: &mut Criterion) {
    let policy = Policy::parse(&policy_200()).expect("benchmark policy parses");
    let hit = ObjectName::parse("app57:type=Service,name=s57").unwrap();
    let pattern_hit = ObjectName::parse("app48:type=Pool,name=p9").unwrap();
    let miss = ObjectName::parse("other:type=Nothing").unwrap();

    let mut g = c.benchmark_group("policy_200_rules");
    g.bench_function("read_allowed exact hit", |b| {
        b.iter(|| policy.read_allowed(black_box(&hit), black_box("Password")))
    });
    g.bench_function("read_allowed via pattern", |b| {
        b.iter(|| policy.read_allowed(black_box(&pattern_hit), black_box("StatCount")))
    });
    g.bench_function("read_allowed no rule", |b| {
        b.iter(|| policy.read_allowed(black_box(&miss), black_box("Anything")))
    });
    g.bench_function("exec_allowed with signature", |b| {
        b.iter(|| policy.exec_allowed(black_box(&hit), black_box("flush(int)")))
    });
    g.bench_function("remote_allowed", |b| {
        b.iter(|| policy.remote_allowed(black_box(&["10.20.30.40"])))
    });

    // The whole per-item decision the gateway makes: <http>, <remote>,
    // <cors>, then the MBean rules.
    let policy = Arc::new(policy);
    let chain = vec!["10.1.2.3".to_string()];
    let facts = RequestFacts {
        method: "POST",
        chain: &chain,
        origin: None,
        scheme: "http",
        denied_reads_in_place: false,
    };
    let item = serde_json::json!({"type":"exec","mbean":"app57:type=Service,name=s57","operation":"restart"});
    let (request, _) = Request::from_json(&item, &Params::default()).unwrap();
    g.bench_function("full item decision (exec)", |b| {
        b.iter(|| check_policy(policy.clone(), black_box(&facts), black_box(&request)))
    });
    g.finish();

    c.bench_function("policy parse (200 rules)", |b| {
        let text = policy_200();
        b.iter(|| Policy::parse(black_box(&text)).unwrap())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
