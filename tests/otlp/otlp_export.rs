//! OTLP exports against a real receiver: VictoriaMetrics (from
//! `../shared/victoriametrics/`, with OpenTelemetry's Prometheus naming),
//! fed by the gateway from real agents. What comes back over PromQL must be
//! the series `/prometheus` gives for the same target and module.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::otlp_receiver::{Answer, GrpcReceiver, Receiver};
use common::{audit_records, eventually, free_port, targets_toml, Agent, Gateway};

use crate::victoria::Victoria;

/// `/prometheus` samples as (name, labels without the target label).
fn exposition_series(text: &str) -> BTreeSet<(String, BTreeMap<String, String>)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (series, _value) = l.rsplit_once(' ')?;
            let (name, labels) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels: BTreeMap<String, String> = common::exposition_labels(labels)
                .into_iter()
                .filter(|(k, _)| k != "target")
                // OpenTelemetry's Prometheus compatibility: a label that
                // starts with `_` comes back as `key_…`.
                .map(|(k, v)| {
                    if k.starts_with('_') {
                        (format!("key{k}"), v)
                    } else {
                        (k, v)
                    }
                })
                .collect();
            Some((name.to_string(), labels))
        })
        // The door's own series about each scrape are not the target's.
        .filter(|(name, _)| !name.starts_with("jmx_") && !name.starts_with("jmxgate_scrape_"))
        .collect()
}

fn rules() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otlp/threads.yml")
}

#[tokio::test(flavor = "multi_thread")]
async fn pushed_series_are_the_ones_prometheus_scrapes() {
    let vm = Victoria::start().await;
    let agent = Agent::start("otlp-a");
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        r#"{targets}
[[prometheus.modules]]
name = "threads"
rules_file = "{rules}"

[audit]
dir = "{audit}"

[[otlp.exports]]
name = "vm"
endpoint = "{endpoint}"
interval = "1s"
targets = "otlp-*"
module = "threads"
service_name_label = "role"
"#,
        targets = targets_toml(&[&agent]),
        rules = rules().display(),
        audit = dir.path().join("audit").display(),
        endpoint = vm.url("/opentelemetry"),
    );
    let gw = Gateway::start(&config).await;

    // Pushed: every series /prometheus has, with its labels, under the
    // target's resource.
    let (_, scraped) = {
        let r = gw
            .http
            .get(gw.url("/prometheus?target=otlp-a&module=threads"))
            .send()
            .await
            .unwrap();
        (r.status(), r.text().await.unwrap())
    };
    let want = exposition_series(&scraped);
    assert!(
        want.iter().any(|(n, _)| n == "jvm_threads_started_total"),
        "{scraped}"
    );
    assert!(
        want.iter().any(|(n, _)| n == "jvm_classes_loaded"),
        "{scraped}"
    );
    let got = eventually(
        "VictoriaMetrics has the target's series",
        Duration::from_secs(90),
        || async {
            let series = vm.series("otlp-a").await;
            let have: BTreeSet<(String, BTreeMap<String, String>)> = series
                .iter()
                .map(|s| {
                    let name = s["__name__"].clone();
                    let labels = s
                        .iter()
                        .filter(|(k, _)| want.iter().any(|(_, l)| l.contains_key(k.as_str())))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    (name, labels)
                })
                .collect();
            if want.is_subset(&have) && have.len() == want.len() {
                Ok(series)
            } else {
                Err(format!("want {want:?}\nhave {have:?}"))
            }
        },
    )
    .await;
    // The resource: the target's name, the service from its label, its
    // labels, and what sent it.
    let one = &got[0];
    assert_eq!(one["service_instance_id"], "otlp-a");
    assert_eq!(one["service_name"], "test");
    assert_eq!(one["role"], "test");
    assert_eq!(one["telemetry_sdk_name"], "jmxgate");
    assert_eq!(one["scope_name"], "jmxgate");

    // A counter stays a counter, and never goes down across pushes.
    let counted = eventually("several pushes", Duration::from_secs(90), || async {
        let v = vm.values("jvm_threads_started_total", "otlp-a").await;
        if v.len() >= 3 {
            Ok(v)
        } else {
            Err(format!("{v:?}"))
        }
    })
    .await;
    assert!(counted.windows(2).all(|w| w[0] <= w[1]), "{counted:?}");
    // Its value is the agent's own.
    let direct = common::direct(
        &agent,
        &serde_json::json!({"type":"read","mbean":"java.lang:type=Threading","attribute":"TotalStartedThreadCount"}),
    )
    .await["value"]
        .as_f64()
        .unwrap();
    assert!(
        counted.iter().all(|v| *v <= direct),
        "{counted:?} vs {direct}"
    );

    // Audited: one record per push and target.
    let pushes = audit_records(&dir.path().join("audit"))
        .into_iter()
        .filter(|r| r["channel"] == "otlp" && r["target"] == "otlp-a")
        .count();
    assert!(pushes >= 3, "{pushes} push records");
    let metrics = gw.gateway.metrics().encode();
    assert!(
        metrics.contains("jmxgate_otlp_points_total{export=\"vm\",outcome=\"sent\"}"),
        "{metrics}"
    );
}

fn hostile_rules() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otlp/hostile.yml")
}

/// A gateway metric's value (0 when absent).
fn metric(gw: &Gateway, series: &str) -> f64 {
    let text = gw.gateway.metrics().encode();
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
}

fn points_total(export: &str, outcome: &str) -> String {
    format!("jmxgate_otlp_points_total{{export=\"{export}\",outcome=\"{outcome}\"}}")
}

/// Waits until a gateway metric counts something.
async fn until_counted(gw: &Gateway, series: &str) {
    eventually(
        &format!("{series} counted"),
        Duration::from_secs(90),
        || async {
            let n = metric(gw, series);
            (n > 0.0).then_some(()).ok_or(format!("{n}"))
        },
    )
    .await;
}

/// The gateway answers a request of its own door meanwhile.
async fn still_serving(gw: &Gateway, target: &str) {
    let (status, v) = gw
        .post(
            "/jolokia",
            &serde_json::json!({"type":"version","target":{"url":target}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["status"], 200, "{v}");
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_points_are_found_and_dropped_alone_and_busy_receivers_retried() {
    let agent = Agent::start("otlp-hostile");
    // 429 (Retry-After) and 503 are retried until it takes the request.
    let script = std::sync::Mutex::new(std::collections::VecDeque::from([429, 503]));
    let busy =
        Receiver::start(move |_| Answer::Status(script.lock().unwrap().pop_front().unwrap_or(200)))
            .await;
    // A NaN is a malformed point to this one: 400 for any request with one.
    let picky = Receiver::start(|r| {
        Answer::Status(if common::otlp_receiver::has_nan(r) {
            400
        } else {
            200
        })
    })
    .await;
    // Too large, past two points.
    let small = Receiver::start(|r| {
        Answer::Status(if common::otlp_receiver::points_in(r) > 2 {
            413
        } else {
            200
        })
    })
    .await;
    let config = format!(
        r#"{targets}
[[prometheus.modules]]
name = "hostile"
rules_file = "{rules}"

[[otlp.exports]]
name = "busy"
endpoint = "{busy}"
interval = "60s"
targets = "otlp-*"
module = "hostile"

[[otlp.exports]]
name = "picky"
endpoint = "{picky}"
interval = "2s"
targets = "otlp-*"
module = "hostile"

[[otlp.exports]]
name = "small"
endpoint = "{small}"
interval = "60s"
targets = "otlp-*"
module = "hostile"
"#,
        targets = targets_toml(&[&agent]),
        rules = hostile_rules().display(),
        busy = busy.url,
        picky = picky.url,
        small = small.url,
    );
    let gw = Gateway::start(&config).await;
    let scraped = common::get_text(
        &gw.http,
        &gw.url("/prometheus?target=otlp-hostile&module=hostile"),
    )
    .await;
    let want: BTreeSet<String> = exposition_series(&scraped)
        .into_iter()
        .map(|(name, _)| name.trim_end_matches("_total").to_string())
        .collect();
    for name in [
        "jvm_threads_nan",
        "jvm_threads_inf",
        "jvm_threads_minus_inf",
    ] {
        assert!(want.contains(name), "{name} in {scraped}");
    }
    let names =
        |r: &Receiver| -> BTreeSet<String> { r.points().into_iter().map(|p| p.metric).collect() };

    eventually(
        "the busy receiver takes it on the third try",
        Duration::from_secs(60),
        || async {
            let seen = busy.answered();
            (seen == [429, 503, 200])
                .then_some(())
                .ok_or(format!("{seen:?}"))
        },
    )
    .await;
    assert_eq!(names(&busy), want, "nothing lost to the retries");
    assert_eq!(metric(&gw, &points_total("busy", "failed")), 0.0);

    // Halved down to the one NaN point, which alone is dropped and counted;
    // the infinities are points like any other.
    eventually(
        "the picky receiver has every point but the NaN one",
        Duration::from_secs(60),
        || async {
            let have = names(&picky);
            let mut expected = want.clone();
            expected.remove("jvm_threads_nan");
            (have == expected)
                .then_some(())
                .ok_or(format!("have {have:?}, want {expected:?}"))
        },
    )
    .await;
    let infinities: Vec<f64> = picky
        .points()
        .into_iter()
        .filter(|p| p.metric.ends_with("inf"))
        .map(|p| p.value)
        .collect();
    assert!(infinities.contains(&f64::INFINITY), "{infinities:?}");
    assert!(infinities.contains(&f64::NEG_INFINITY), "{infinities:?}");
    assert!(metric(&gw, &points_total("picky", "rejected")) >= 1.0);
    assert_eq!(metric(&gw, &points_total("picky", "failed")), 0.0);
    assert!(picky.answered().contains(&400));

    // 413: halved until each part fits; every point arrives.
    eventually(
        "the small receiver has every point",
        Duration::from_secs(60),
        || async {
            let have = names(&small);
            (have == want).then_some(()).ok_or(format!("{have:?}"))
        },
    )
    .await;
    assert!(small.answered().contains(&413));
    assert_eq!(metric(&gw, &points_total("small", "rejected")), 0.0);
    // The picky one says why in /readyz detail, and the door serves.
    still_serving(&gw, "otlp-hostile").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn receivers_that_are_down_stall_or_hang_up_cost_points_never_service() {
    let agent = Agent::start("otlp-gone");
    let stalling = Receiver::start(|_| Answer::Stall).await;
    let hang_up = common::otlp_receiver::hanging_up().await;
    let down = format!("http://127.0.0.1:{}", common::dead_port());
    let export = |name: &str, url: &str| {
        format!(
            "[[otlp.exports]]\nname = \"{name}\"\nendpoint = \"{url}\"\ninterval = \"1s\"\n\
             timeout = \"1s\"\ntargets = \"otlp-*\"\nmodule = \"threads\"\nmax_queued_requests = 2\n"
        )
    };
    let config = format!(
        "{targets}\n[[prometheus.modules]]\nname = \"threads\"\nrules_file = \"{rules}\"\n\n{a}\n{b}\n{c}",
        targets = targets_toml(&[&agent]),
        rules = rules().display(),
        a = export("down", &down),
        b = export("stalling", &stalling.url),
        c = export("hangs-up", &hang_up),
    );
    let gw = Gateway::start(&config).await;
    for name in ["down", "stalling", "hangs-up"] {
        until_counted(&gw, &points_total(name, "failed")).await;
    }
    // Pushes keep coming every second while requests take several: the
    // queue stays at its bound and the oldest go, counted.
    until_counted(&gw, &points_total("stalling", "dropped")).await;
    assert_eq!(metric(&gw, &points_total("down", "sent")), 0.0);
    // What /readyz adds to its detail (the real binary's is tested with
    // reloads).
    let trouble = jmxgate::jobs::otlp::otlp_trouble(&gw.gateway).join("\n");
    for name in ["down", "stalling", "hangs-up"] {
        assert!(
            trouble.contains(&format!(
                "OTLP export {name}: the last request was not delivered"
            )),
            "{trouble}"
        );
    }
    still_serving(&gw, "otlp-gone").await;
}

/// `java.lang:type=Runtime` `StartTime` as the agent says it (ms).
async fn jvm_start_ms(agent: &Agent) -> u64 {
    common::direct(
        agent,
        &serde_json::json!({"type":"read","mbean":"java.lang:type=Runtime","attribute":"StartTime"}),
    )
    .await["value"]
        .as_u64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_counters_start_is_the_jvms_and_moves_when_the_jvm_restarts() {
    // A 1.7.1 agent on a port of our choosing, so a new JVM can take it.
    let port = free_port().to_string();
    let first = Agent::start_with("otlp-restart", &["--port", &port]);
    let receiver = Receiver::accepting().await;
    let config = format!(
        "{targets}\n[[prometheus.modules]]\nname = \"threads\"\nrules_file = \"{rules}\"\n\n\
         [[otlp.exports]]\nname = \"r\"\nendpoint = \"{url}\"\ninterval = \"1s\"\n\
         targets = \"otlp-*\"\nmodule = \"threads\"\n",
        targets = targets_toml(&[&first]),
        rules = rules().display(),
        url = receiver.url,
    );
    let gw = Gateway::start(&config).await;
    let starts = |since: usize| {
        let points = receiver.points();
        points[since.min(points.len())..]
            .iter()
            .filter(|p| p.metric == "jvm_threads_started")
            .map(|p| {
                assert_eq!(p.monotonic, Some(true), "{p:?}");
                assert!(p.time_unix_nano >= p.start_unix_nano, "{p:?}");
                p.start_unix_nano
            })
            .collect::<BTreeSet<u64>>()
    };
    let before = jvm_start_ms(&first).await * 1_000_000;
    eventually(
        "points starting at the JVM's start",
        Duration::from_secs(60),
        || async {
            let s = starts(0);
            (s == BTreeSet::from([before]))
                .then_some(())
                .ok_or(format!("{s:?} vs {before}"))
        },
    )
    .await;
    // Gauges carry no start time.
    assert!(receiver
        .points()
        .iter()
        .filter(|p| p.monotonic.is_none())
        .all(|p| p.start_unix_nano == 0));

    drop(first);
    // Pushes go on while the target is away (no points for it, counted).
    until_counted(
        &gw,
        "jmxgate_otlp_pushes_total{export=\"r\",outcome=\"target_failed\"}",
    )
    .await;
    let second = Agent::start_with("otlp-restart", &["--port", &port]);
    let after = jvm_start_ms(&second).await * 1_000_000;
    assert!(after > before);
    let seen = receiver.points().len();
    eventually(
        "points starting at the new JVM's start",
        Duration::from_secs(60),
        || async {
            let s = starts(seen);
            (s.last() == Some(&after))
                .then_some(())
                .ok_or(format!("{s:?} vs {after}"))
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn pushes_that_cannot_finish_in_time_are_skipped_never_piled_up() {
    // Stand-ins: 1,000 targets that all lead to one agent that never
    // answers in time (there are not 1,000 JVMs here), on a 1 s interval
    // with a 3 s deadline.
    let stand_in = common::hostile::HostileAgent::start();
    let real = Agent::start("otlp-real");
    let slow = stand_in.url(common::hostile::Behaviour::Slow);
    let mut targets = targets_toml(&[&real]);
    for i in 0..1000 {
        targets.push_str(&format!(
            "[[targets]]\nname = \"standin-{i}\"\nurl = \"{slow}\"\nlabels = {{ fleet = \"standin\" }}\n"
        ));
    }
    let receiver = Receiver::accepting().await;
    // Past the default bound of one selector's reach (which holds for
    // exports as for any caller, and says so).
    let narrow = format!(
        "{targets}\n[[otlp.exports]]\nname = \"many\"\nendpoint = \"{url}\"\ninterval = \"1s\"\n\
         targets = \"fleet=standin\"\n",
        url = receiver.url,
    );
    let gw = Gateway::start(&narrow).await;
    let trouble = eventually(
        "the export says why it can't push",
        Duration::from_secs(60),
        || async {
            let t = jmxgate::jobs::otlp::otlp_trouble(&gw.gateway).join("\n");
            t.contains("max_targets_per_item")
                .then_some(t.clone())
                .ok_or(t)
        },
    )
    .await;
    assert!(trouble.contains("OTLP export many: targets:"), "{trouble}");
    drop(gw);
    let config = format!(
        "max_targets_per_item = 1000\n{targets}\n[[otlp.exports]]\nname = \"many\"\nendpoint = \"{url}\"\ninterval = \"1s\"\n\
         timeout = \"3s\"\ntargets = \"fleet=standin\"\n",
        url = receiver.url,
    );
    let gw = Gateway::start(&config).await;
    eventually(
        "pushes skipped while one runs",
        Duration::from_secs(120),
        || async {
            let skipped = metric(
                &gw,
                "jmxgate_otlp_pushes_total{export=\"many\",outcome=\"skipped\"}",
            );
            // Finished: no target gave points, so each push was empty.
            let ok = metric(
                &gw,
                "jmxgate_otlp_pushes_total{export=\"many\",outcome=\"empty\"}",
            );
            let failed = metric(
                &gw,
                "jmxgate_otlp_pushes_total{export=\"many\",outcome=\"target_failed\"}",
            );
            if skipped >= 4.0 && ok >= 2.0 && failed >= 2000.0 {
                Ok(())
            } else {
                Err(format!(
                    "skipped {skipped}, ok {ok}, target_failed {failed}"
                ))
            }
        },
    )
    .await;
    // One push at a time: never more finished than were started, each
    // taking its deadline, while the ticks were skipped.
    let ok = metric(
        &gw,
        "jmxgate_otlp_pushes_total{export=\"many\",outcome=\"empty\"}",
    );
    let skipped = metric(
        &gw,
        "jmxgate_otlp_pushes_total{export=\"many\",outcome=\"skipped\"}",
    );
    assert!(skipped >= ok, "skipped {skipped}, ok {ok}");
    // Targets that failed are not pushed as zeros: nothing was sent.
    assert!(receiver.answered().is_empty(), "{:?}", receiver.answered());
    still_serving(&gw, "otlp-real").await;
}

/// A rules file with an `openTelemetry:` block pointing at `endpoint`,
/// whose one rule labels its sample `pool`.
fn blocked_rules(endpoint: &str, pool: &str) -> String {
    format!(
        "openTelemetry:\n  endpoint: {endpoint}\n  protocol: http/protobuf\n  interval: 1\n  \
         serviceName: shop\n  resourceAttributes:\n    deployment.environment: test\n\
         rules:\n  - pattern: 'java.lang<type=Threading><>ThreadCount'\n    \
         name: jvm_threads_live\n    type: GAUGE\n    labels:\n      pool: {pool}\n"
    )
}

fn reload(process: &common::GatewayProcess) {
    let status = Command::new("kill")
        .args(["-HUP", &process.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// How many requests a receiver has answered, once that has not changed
/// for two seconds (what was under way when an export stopped is let in).
async fn settled(r: &Receiver) -> usize {
    let since = std::cell::Cell::new((r.answered().len(), std::time::Instant::now()));
    eventually(
        "the receiver's count stays put for 2 s",
        Duration::from_secs(120),
        || async {
            let now = r.answered().len();
            if now != since.get().0 {
                since.set((now, std::time::Instant::now()));
            }
            let still = since.get().1.elapsed();
            if still >= Duration::from_secs(2) {
                Ok(now)
            } else {
                Err(format!("{now} answered, the last change {still:?} ago"))
            }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_running_binary_starts_changes_and_stops_exports_on_reload() {
    let agent = Agent::start("otlp-reload");
    let (r1, r2, r3, r4) = (
        Receiver::accepting().await,
        Receiver::accepting().await,
        Receiver::accepting().await,
        Receiver::accepting().await,
    );
    let dir = tempfile::tempdir().unwrap();
    let blocked = dir.path().join("blocked.yml");
    std::fs::write(&blocked, blocked_rules(&r4.url, "a")).unwrap();
    std::fs::write(dir.path().join("token"), "Bearer not-in-any-log-42\n").unwrap();
    let admin = free_port();
    let head = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[admin]\nlisten = \"127.0.0.1:{admin}\"\n\n{targets}\n\
         [[prometheus.modules]]\nname = \"threads\"\nrules_file = \"{rules}\"\n\n\
         [[prometheus.modules]]\nname = \"blocked\"\nrules_file = \"blocked.yml\"\n\n",
        targets = targets_toml(&[&agent]),
        rules = rules().display(),
    );
    let export = |name: &str, url: &str| {
        format!(
            "[[otlp.exports]]\nname = \"{name}\"\nendpoint = \"{url}\"\ninterval = \"1s\"\n\
             targets = \"otlp-*\"\nmodule = \"threads\"\n\
             headers = {{ Authorization = {{ file = \"token\" }} }}\n\n"
        )
    };
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "{head}{}{}",
            export("moves", &r1.url),
            export("goes", &r2.url)
        ),
    )
    .unwrap();
    let gw = common::GatewayProcess::start(&config, "info");
    let http = common::http_client();
    let has = |r: &Receiver| !r.answered().is_empty();
    eventually("both exports push", Duration::from_secs(60), || async {
        (has(&r1) && has(&r2))
            .then_some(())
            .ok_or("not yet".to_string())
    })
    .await;

    // Changed, removed, added (its endpoint, interval and resource from
    // its module's openTelemetry block).
    std::fs::write(
        &config,
        format!(
            "{head}{}[[otlp.exports]]\nname = \"comes\"\ntargets = \"otlp-*\"\nmodule = \"blocked\"\n",
            export("moves", &r3.url)
        ),
    )
    .unwrap();
    reload(&gw);
    eventually(
        "the changed and the added export push",
        Duration::from_secs(60),
        || async {
            (has(&r3) && has(&r4))
                .then_some(())
                .ok_or("not yet".to_string())
        },
    )
    .await;
    let (from_r1, from_r2) = (settled(&r1).await, settled(&r2).await);
    let pool_of = |r: &Receiver| -> BTreeSet<String> {
        r.points()
            .into_iter()
            .filter_map(|p| p.labels.get("pool").cloned())
            .collect()
    };
    let p = r4.points().into_iter().next().unwrap();
    assert_eq!(p.resource["service.name"], "shop", "{p:?}");
    assert_eq!(p.resource["service.instance.id"], "otlp-reload");
    assert_eq!(p.resource["deployment.environment"], "test");
    assert_eq!(pool_of(&r4), BTreeSet::from(["a".to_string()]));

    // The rules change their labels; the block is the same, so the export
    // runs on and its next pushes carry the new label set.
    std::fs::write(&blocked, blocked_rules(&r4.url, "b")).unwrap();
    reload(&gw);
    eventually(
        "the new label set arrives",
        Duration::from_secs(60),
        || async {
            let pools = pool_of(&r4);
            pools
                .contains("b")
                .then_some(())
                .ok_or(format!("{pools:?}"))
        },
    )
    .await;

    // A broken export is refused whole; the running ones go on.
    std::fs::write(
        &config,
        format!(
            "{head}{}[[otlp.exports]]\nname = \"comes\"\ntargets = \"otlp-*\"\nmodule = \"threads\"\n",
            export("moves", &r3.url)
        ),
    )
    .unwrap();
    reload(&gw);
    gw.wait_for_line(
        "endpoint: not set, here or in module",
        Duration::from_secs(30),
    )
    .expect("the refused reload says why");
    let before = r4.answered().len();
    eventually(
        "the running export goes on",
        Duration::from_secs(60),
        || async {
            (r4.answered().len() > before)
                .then_some(())
                .ok_or("no more pushes".to_string())
        },
    )
    .await;

    // An export whose receiver is gone: /readyz stays ready and says so.
    let gone = format!("http://127.0.0.1:{}", common::dead_port());
    std::fs::write(&config, format!("{head}{}", export("moves", &gone))).unwrap();
    reload(&gw);
    let ready = eventually(
        "/readyz names the export",
        Duration::from_secs(60),
        || async {
            let r = http
                .get(format!("http://127.0.0.1:{admin}/readyz"))
                .send()
                .await
                .map_err(|e| e.to_string())?;
            let status = r.status();
            let text = r.text().await.unwrap_or_default();
            (status == 200
                && text.contains("OTLP export moves: the last request was not delivered"))
            .then_some(text.clone())
            .ok_or(format!("{status} {text}"))
        },
    )
    .await;
    assert!(ready.starts_with("ready"), "{ready}");
    let metrics = common::get_text(&http, &format!("http://127.0.0.1:{admin}/metrics")).await;
    assert!(
        metrics.contains("jmxgate_otlp_points_total{export=\"moves\",outcome=\"failed\"}"),
        "{metrics}"
    );
    assert_eq!(
        settled(&r1).await,
        from_r1,
        "the changed export's old receiver"
    );
    assert_eq!(settled(&r2).await, from_r2, "the removed export's receiver");
    let log = gw.stop().join("\n");
    assert!(log.contains("OTLP export changed: restarted"), "{log}");
    assert!(log.contains("OTLP export stopped"), "{log}");
    assert!(
        !log.contains("not-in-any-log-42"),
        "a header's secret in the log"
    );
    assert!(!metrics.contains("not-in-any-log-42"));
}

/// `/prometheus` samples of one target and module: (name, labels without
/// the target label) → value.
fn exposition_values(text: &str) -> BTreeMap<(String, BTreeMap<String, String>), String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let key = exposition_series(series_line(series).as_str())
                .into_iter()
                .next()?;
            Some((key, value.to_string()))
        })
        .collect()
}

/// A series with a dummy value, for `exposition_series`.
fn series_line(series: &str) -> String {
    format!("{series} 0")
}

impl Victoria {
    /// Every series of a target under one `service.name`, with its last
    /// value.
    async fn last_values(
        &self,
        instance: &str,
        service: &str,
    ) -> Vec<(BTreeMap<String, String>, f64)> {
        self.export(&format!(
            "{{service_instance_id=\"{instance}\",service_name=\"{service}\"}}"
        ))
        .await
        .into_iter()
        .filter_map(|v| {
            let labels: BTreeMap<String, String> =
                serde_json::from_value(v["metric"].clone()).ok()?;
            let last = v["values"].as_array()?.last()?.as_f64()?;
            Some((labels, last))
        })
        .collect()
    }
}

/// The rules files the Prometheus door's tests hold against jmx_exporter's
/// own agent (its default export, and the Kafka, Tomcat and Cassandra
/// rules over product-like MBeans), pushed to VictoriaMetrics: the series
/// that come back are the ones `/prometheus` gives, and values that held
/// still across the push are equal.
#[tokio::test(flavor = "multi_thread")]
async fn the_prometheus_doors_rules_files_push_the_series_it_scrapes() {
    let vm = Victoria::start().await;
    let agent = Agent::start_in_jvm(
        common::Generation::under_test(),
        "otlp-products",
        &[],
        &["--exporter-mbeans", "true"],
    );
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.yml");
    std::fs::write(&empty, "{}\n").unwrap();
    let exporter = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/exporter");
    let modules: Vec<(&str, PathBuf)> = vec![
        ("default", empty),
        ("kafka", exporter.join("kafka.yml")),
        ("tomcat", exporter.join("tomcat.yml")),
        ("cassandra", exporter.join("cassandra.yml")),
    ];
    let mut config = targets_toml(&[&agent]);
    for (name, rules) in &modules {
        config.push_str(&format!(
            "[[prometheus.modules]]\nname = \"{name}\"\nrules_file = \"{}\"\n\n\
             [[otlp.exports]]\nname = \"{name}\"\nendpoint = \"{}\"\ninterval = \"2s\"\n\
             targets = \"otlp-products\"\nmodule = \"{name}\"\n\n",
            rules.display(),
            vm.url("/opentelemetry"),
        ));
    }
    let gw = Gateway::start(&config).await;
    for (module, _) in &modules {
        let scrape = || async {
            let text = common::get_text(
                &gw.http,
                &gw.url(&format!("/prometheus?target=otlp-products&module={module}")),
            )
            .await;
            exposition_values(&text)
                .into_iter()
                .filter(|((n, _), _)| !n.starts_with("jmx_") && !n.starts_with("jmxgate_scrape_"))
                .collect::<BTreeMap<_, _>>()
        };
        let first = scrape().await;
        assert!(first.len() > 3, "{module}: {first:?}");
        let label_keys: BTreeSet<String> =
            first.keys().flat_map(|(_, l)| l.keys().cloned()).collect();
        let pushed = eventually(
            &format!("{module}: VictoriaMetrics has the series /prometheus gives"),
            Duration::from_secs(120),
            || async {
                let got = vm.last_values("otlp-products", module).await;
                let have: BTreeMap<(String, BTreeMap<String, String>), f64> = got
                    .into_iter()
                    .map(|(labels, v)| {
                        let name = labels["__name__"].clone();
                        let kept = labels
                            .into_iter()
                            .filter(|(k, _)| label_keys.contains(k))
                            .collect();
                        ((name, kept), v)
                    })
                    .collect();
                let want: BTreeSet<_> = first.keys().cloned().collect();
                let got: BTreeSet<_> = have.keys().cloned().collect();
                if want == got {
                    Ok(have)
                } else {
                    Err(format!(
                        "only /prometheus: {:?}\nonly VictoriaMetrics: {:?}",
                        want.difference(&got).collect::<Vec<_>>(),
                        got.difference(&want).collect::<Vec<_>>()
                    ))
                }
            },
        )
        .await;
        // Values that held still from before the push to after it.
        let second = scrape().await;
        let mut compared = 0;
        for (key, value) in &first {
            if second.get(key) != Some(value) {
                continue;
            }
            let Ok(want) = value.parse::<f64>() else {
                continue;
            };
            let got = pushed[key];
            // VictoriaMetrics keeps about 12 significant digits.
            let close = (got - want).abs() <= 1e-11 * want.abs().max(1.0);
            assert!(
                got == want || close || (got.is_nan() && want.is_nan()),
                "{module} {key:?}: pushed {got}, scraped {want}"
            );
            compared += 1;
        }
        assert!(compared > 3, "{module}: only {compared} steady values");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_receiver_behind_mutual_tls_takes_only_the_export_with_the_certificate() {
    let pki = common::TestPki::new("otlp");
    let (cert, key) = pki.server_cert("receiver");
    let receiver = Receiver::accepting_tls(&format!(
        "cert_file = \"{}\"\nkey_file = \"{}\"\nclient_ca_file = \"{}\"\nclient_auth = \"required\"\n",
        cert.display(),
        key.display(),
        pki.ca_file().display()
    ))
    .await;
    let (client_cert, client_key) = pki.client_cert("jmxgate-otlp", false);
    let agent = Agent::start("otlp-tls");
    let export = |name: &str, identity: &str| {
        format!(
            "[[otlp.exports]]\nname = \"{name}\"\nendpoint = \"{url}\"\ninterval = \"1s\"\n\
             targets = \"otlp-*\"\nmodule = \"threads\"\nca_file = \"{ca}\"\n{identity}\n",
            url = receiver.url,
            ca = pki.ca_file().display(),
        )
    };
    let config = format!(
        "{targets}\n[[prometheus.modules]]\nname = \"threads\"\nrules_file = \"{rules}\"\n\n{a}\n{b}",
        targets = targets_toml(&[&agent]),
        rules = rules().display(),
        a = export(
            "with-cert",
            &format!(
                "client_cert_file = \"{}\"\nclient_key_file = \"{}\"",
                client_cert.display(),
                client_key.display()
            )
        ),
        b = export("without", ""),
    );
    let gw = Gateway::start(&config).await;
    eventually(
        "points over mutual TLS",
        Duration::from_secs(60),
        || async {
            let n = receiver.points().len();
            (n > 0).then_some(()).ok_or(format!("{n}"))
        },
    )
    .await;
    until_counted(&gw, &points_total("without", "failed")).await;
    assert!(metric(&gw, &points_total("with-cert", "sent")) > 0.0);
    assert_eq!(metric(&gw, &points_total("without", "sent")), 0.0);
}

/// A series' name as an OTLP point carries it (a counter without `_total`)
/// and its labels, from `/prometheus`.
fn otlp_series(scraped: &str) -> BTreeSet<(String, BTreeMap<String, String>)> {
    exposition_series(scraped)
        .into_iter()
        .map(|(name, labels)| (name.trim_end_matches("_total").to_string(), labels))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_grpc_receiver_takes_the_series_prometheus_scrapes_retried_as_otlp_says() {
    // UNAVAILABLE is retried; RESOURCE_EXHAUSTED with a RetryInfo too.
    let receiver = GrpcReceiver::start(&["--script", "UNAVAILABLE,RESOURCE_EXHAUSTED:1"]).await;
    let agent = Agent::start("otlp-grpc");
    let dir = tempfile::tempdir().unwrap();
    // The module's own block names the endpoint and no protocol: gRPC,
    // as jmx_exporter pushes it.
    let rules_file = dir.path().join("threads.yml");
    std::fs::write(
        &rules_file,
        format!(
            "openTelemetry:\n  endpoint: http://127.0.0.1:{}\n  interval: 1\n{}",
            receiver.port,
            std::fs::read_to_string(rules()).unwrap()
        ),
    )
    .unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "tenant-7\n").unwrap();
    let config = format!(
        r#"{targets}
[[prometheus.modules]]
name = "threads"
rules_file = "{rules}"

[[otlp.exports]]
name = "grpc"
targets = "otlp-*"
module = "threads"
headers = {{ "X-Scope-OrgID" = {{ file = "{token}" }} }}
"#,
        targets = targets_toml(&[&agent]),
        rules = rules_file.display(),
        token = token.display(),
    );
    let gw = Gateway::start(&config).await;
    let scraped = common::get_text(
        &gw.http,
        &gw.url("/prometheus?target=otlp-grpc&module=threads"),
    )
    .await;
    let want = otlp_series(&scraped);
    assert!(
        want.iter().any(|(n, _)| n == "jvm_threads_started"),
        "{scraped}"
    );
    let points = eventually(
        "the gRPC receiver took the target's series",
        Duration::from_secs(90),
        || async {
            let points = receiver.points();
            let have: BTreeSet<_> = points
                .iter()
                .map(|p| (p.metric.clone(), p.labels.clone()))
                .collect();
            (have == want)
                .then_some(points)
                .ok_or(format!("want {want:?}\nhave {have:?}"))
        },
    )
    .await;
    let calls = receiver.calls();
    let answered: Vec<&str> = calls.iter().map(|c| c.answered.as_str()).collect();
    assert_eq!(
        answered[..3],
        ["UNAVAILABLE", "RESOURCE_EXHAUSTED", "OK"],
        "retried until taken: {answered:?}"
    );
    let started = points
        .iter()
        .find(|p| p.metric == "jvm_threads_started")
        .unwrap();
    assert_eq!(
        started.monotonic,
        Some(true),
        "a counter is a monotonic sum"
    );
    assert!(started.start_unix_nano > 0 && started.start_unix_nano < started.time_unix_nano);
    assert_eq!(started.resource["service.instance.id"], "otlp-grpc");
    assert_eq!(started.resource["telemetry.sdk.name"], "jmxgate");
    // The header from its file. (The message is gzipped: grpcio takes a
    // compressed one only with the call's `grpc-encoding: gzip`.)
    let call = &calls[2];
    assert_eq!(
        call.metadata.get("x-scope-orgid").map(String::as_str),
        Some("tenant-7"),
        "{:?}",
        call.metadata
    );
    assert_eq!(metric(&gw, &points_total("grpc", "failed")), 0.0);
    assert_eq!(metric(&gw, &points_total("grpc", "rejected")), 0.0);
    until_counted(&gw, &points_total("grpc", "sent")).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn over_grpc_a_bad_point_is_dropped_alone_and_a_size_limit_halves_requests() {
    let pki = common::TestPki::new("otlp-grpc");
    let (cert, key) = pki.server_cert("receiver");
    let (cert, key) = (cert.display().to_string(), key.display().to_string());
    // Over TLS (HTTP/2 by ALPN); INVALID_ARGUMENT for a request with a NaN.
    let picky = GrpcReceiver::start(&["--nan-invalid", "--tls", &cert, &key]).await;
    // grpcio's own message size limit: RESOURCE_EXHAUSTED past 2 KiB.
    let small = GrpcReceiver::start(&["--max-receive-bytes", "2048"]).await;
    let agent = Agent::start("otlp-grpc-hostile");
    // jmx_exporter's default export: every attribute.
    let dir = tempfile::tempdir().unwrap();
    let all = dir.path().join("all.yml");
    std::fs::write(&all, "{}\n").unwrap();
    let config = format!(
        r#"{targets}
[[prometheus.modules]]
name = "hostile"
rules_file = "{rules}"

[[otlp.exports]]
name = "picky"
protocol = "grpc"
endpoint = "https://localhost:{picky}"
ca_file = "{ca}"
interval = "2s"
targets = "otlp-*"
module = "hostile"

[[prometheus.modules]]
name = "all"
rules_file = "{all}"

[[otlp.exports]]
name = "small"
protocol = "grpc"
endpoint = "http://127.0.0.1:{small}"
interval = "60s"
targets = "otlp-*"
module = "all"
"#,
        all = all.display(),
        targets = targets_toml(&[&agent]),
        rules = hostile_rules().display(),
        picky = picky.port,
        small = small.port,
        ca = pki.ca_file().display(),
    );
    let gw = Gateway::start(&config).await;
    let hostile = otlp_series(
        &common::get_text(
            &gw.http,
            &gw.url("/prometheus?target=otlp-grpc-hostile&module=hostile"),
        )
        .await,
    );
    let mut expected: BTreeSet<String> = hostile.into_iter().map(|(n, _)| n).collect();
    assert!(expected.remove("jvm_threads_nan"));
    eventually(
        "the picky receiver has every point but the NaN one",
        Duration::from_secs(90),
        || async {
            let have: BTreeSet<String> = picky.points().into_iter().map(|p| p.metric).collect();
            (have == expected)
                .then_some(())
                .ok_or(format!("have {have:?}, want {expected:?}"))
        },
    )
    .await;
    assert!(picky
        .calls()
        .iter()
        .any(|c| c.answered == "INVALID_ARGUMENT" && c.points == 1));
    assert!(metric(&gw, &points_total("picky", "rejected")) >= 1.0);
    assert_eq!(metric(&gw, &points_total("picky", "failed")), 0.0);

    // The default module's many samples are more than 2 KiB: halved until
    // each part fits, and every series arrives.
    let scraped = common::get_text(
        &gw.http,
        &gw.url("/prometheus?target=otlp-grpc-hostile&module=all"),
    )
    .await;
    assert!(scraped.len() > 8192, "{} bytes: {scraped}", scraped.len());
    let names = |points: Vec<common::otlp_receiver::Point>| -> BTreeSet<String> {
        points.into_iter().map(|p| p.metric).collect()
    };
    let want: BTreeSet<String> = otlp_series(&scraped).into_iter().map(|(n, _)| n).collect();
    eventually(
        "the small receiver has the default module's series",
        Duration::from_secs(90),
        || async {
            let have = names(small.points());
            // A series the JVM adds between the scrape and the push is
            // no loss; one missing is.
            want.is_subset(&have).then_some(()).ok_or(format!(
                "missing {:?}",
                want.difference(&have).collect::<Vec<_>>()
            ))
        },
    )
    .await;
    assert!(small.calls().len() > 1, "cut into several requests");
    assert_eq!(metric(&gw, &points_total("small", "rejected")), 0.0);
    assert_eq!(metric(&gw, &points_total("small", "failed")), 0.0);
    still_serving(&gw, "otlp-grpc-hostile").await;
}

/// `/readyz` on an admin listener, as text.
async fn readyz(admin: u16) -> Result<String, String> {
    let r = common::http_client()
        .get(format!("http://127.0.0.1:{admin}/readyz"))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = r.status();
    let text = r.text().await.map_err(|e| e.to_string())?;
    if status == 200 {
        Ok(text)
    } else {
        Err(format!("{status} {text}"))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn receivers_echoing_the_credentials_sent_leave_them_out_of_readyz_and_the_log() {
    const TOKEN: &str = "echoed-token-5f1c9a";
    const KEY: &str = "echoed-key-8b2d47";
    let agent = Agent::start("otlp-echo");
    // Both answer with every header they were sent in their body.
    let refusing = Receiver::start(|_| Answer::Echo(400)).await;
    let unauthorized = Receiver::start(|_| Answer::Echo(401)).await;
    // Over gRPC, in its grpc-message.
    let grpc = GrpcReceiver::start(&["--echo", "UNAUTHENTICATED"]).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), format!("Bearer {TOKEN}\n")).unwrap();
    let admin = free_port();
    let export = |name: &str, url: &str, protocol: &str| {
        format!(
            "[[otlp.exports]]\nname = \"{name}\"\nendpoint = \"{url}\"\nprotocol = \"{protocol}\"\n\
             interval = \"1s\"\ntargets = \"otlp-*\"\nmodule = \"threads\"\n\
             headers = {{ Authorization = {{ file = \"token\" }}, \"X-Api-Key\" = \"{KEY}\" }}\n\n"
        )
    };
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n[admin]\nlisten = \"127.0.0.1:{admin}\"\n\n\
             {targets}\n[[prometheus.modules]]\nname = \"threads\"\nrules_file = \"{rules}\"\n\n{a}{b}{c}",
            targets = targets_toml(&[&agent]),
            rules = rules().display(),
            a = export("refusing", &refusing.url, "http/protobuf"),
            b = export("unauthorized", &unauthorized.url, "http/protobuf"),
            c = export(
                "grpc",
                &format!("http://127.0.0.1:{}", grpc.port),
                "grpc"
            ),
        ),
    )
    .unwrap();
    let gw = common::GatewayProcess::start(&config, "debug");
    let ready = eventually(
        "/readyz says how both exports fail",
        Duration::from_secs(60),
        || async {
            let text = readyz(admin).await?;
            (text.contains(
                "OTLP export unauthorized: the receiver refuses the export's requests \
                 (HTTP 401): check its endpoint and credentials",
            ) && text.contains(
                "OTLP export refusing: the receiver refuses the export's requests (HTTP 400)",
            ) && text.contains(
                "OTLP export grpc: the receiver refuses the export's requests \
                 (UNAUTHENTICATED)",
            ))
            .then_some(text.clone())
            .ok_or(text)
        },
    )
    .await;
    // They did echo the secrets.
    for r in [&refusing, &unauthorized] {
        assert!(
            r.received()
                .iter()
                .any(|r| r.reply.contains(&format!("Bearer {TOKEN}")) && r.reply.contains(KEY)),
            "{:?}",
            r.received().first().map(|r| &r.reply)
        );
    }
    let call = grpc.calls().into_iter().next().unwrap();
    assert_eq!(
        call.metadata.get("authorization").map(String::as_str),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    // /readyz says only how each export fails: never the receiver's words.
    for secret in [TOKEN, KEY, "you sent"] {
        assert!(!ready.contains(secret), "{secret} in /readyz: {ready}");
    }
    let metrics = common::get_text(
        &common::http_client(),
        &format!("http://127.0.0.1:{admin}/metrics"),
    )
    .await;
    assert!(!metrics.contains(TOKEN) && !metrics.contains(KEY));
    // The log keeps the start of what they said, the export's own values
    // masked.
    let log = gw.stop().join("\n");
    for secret in [TOKEN, KEY] {
        assert!(!log.contains(secret), "{secret} in the log:\n{log}");
    }
    // The push refused as such is said once, not once per point dropped.
    let pushes: BTreeSet<u64> = refusing
        .received()
        .iter()
        .filter_map(|r| {
            common::otlp_receiver::points_of(std::slice::from_ref(&r.request))
                .first()
                .map(|p| p.time_unix_nano)
        })
        .collect();
    let said = |what: &str| {
        log.lines()
            .filter(|l| l.contains("export=refusing") && l.contains(what))
            .count()
    };
    assert!(
        (1..=pushes.len()).contains(&said("OTLP push not delivered")),
        "{} pushes:\n{log}",
        pushes.len()
    );
    assert_eq!(said("OTLP points dropped"), 0, "{log}");
    for export in ["refusing", "unauthorized", "grpc"] {
        let said = log
            .lines()
            .find(|l| l.contains(&format!("export={export}")) && l.contains("you sent"))
            .unwrap_or_else(|| panic!("{export}'s refusal not logged:\n{log}"));
        assert!(
            said.contains("authorization: ***") && said.contains("x-api-key: ***"),
            "{said}"
        );
    }
}

/// A receiver that refuses every request as bad (400), one without points
/// too, refuses the export's requests as such, whatever they hold (as
/// VictoriaMetrics answers a path it doesn't serve): per push it gets the
/// first request and one without points, never halves
/// (docs/opentelemetry.md); the points count as failed, not as refused
/// one by one.

#[tokio::test(flavor = "multi_thread")]
async fn a_receiver_refusing_every_request_gets_two_per_push_never_halves() {
    let agent = Agent::start("otlp-refused");
    let refusing = Receiver::start(|_| Answer::Status(400)).await;
    // jmx_exporter's default export (hundreds of points), cut into many
    // requests per push.
    let dir = tempfile::tempdir().unwrap();
    let all = dir.path().join("all.yml");
    std::fs::write(&all, "{}\n").unwrap();
    let config = format!(
        "{targets}\n[[prometheus.modules]]\nname = \"all\"\nrules_file = \"{all}\"\n\n\
         [[otlp.exports]]\nname = \"refused\"\nendpoint = \"{url}\"\ninterval = \"2s\"\n\
         targets = \"otlp-*\"\nmodule = \"all\"\nmax_request_bytes = 1024\n\
         max_queued_requests = 1000\n",
        targets = targets_toml(&[&agent]),
        all = all.display(),
        url = refusing.url,
    );
    let gw = Gateway::start(&config).await;
    // A push's points all carry its time: the receiver counts by it.
    let per_push = || {
        let mut pushes: BTreeMap<u64, usize> = BTreeMap::new();
        for r in refusing.received() {
            // The request without points counts apart (at 0).
            let at = common::otlp_receiver::points_of(&[r.request])
                .first()
                .map_or(0, |p| p.time_unix_nano);
            *pushes.entry(at).or_default() += 1;
        }
        let empty = pushes.remove(&0).unwrap_or(0);
        (pushes, empty)
    };
    let (pushes, empty) = eventually("three pushes refused", Duration::from_secs(90), || async {
        let (pushes, empty) = per_push();
        (pushes.len() >= 3)
            .then_some((pushes.clone(), empty))
            .ok_or(format!("{pushes:?}"))
    })
    .await;
    for (at, requests) in &pushes {
        assert_eq!(*requests, 1, "push at {at}: {pushes:?}");
    }
    assert!(
        (pushes.len() - 1..=pushes.len() + 1).contains(&empty),
        "{empty} requests without points for {} pushes",
        pushes.len()
    );
    // Each push was many requests: the bound holds for the push, not for
    // one of its requests.
    let scraped = common::get_text(
        &gw.http,
        &gw.url("/prometheus?target=otlp-refused&module=all"),
    )
    .await;
    let samples = scraped
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .count();
    let largest = refusing
        .received()
        .iter()
        .map(|r| common::otlp_receiver::points_in(&r.request))
        .max()
        .unwrap();
    assert!(largest * 4 < samples, "{largest} of {samples} points");
    until_counted(&gw, &points_total("refused", "failed")).await;
    assert_eq!(metric(&gw, &points_total("refused", "rejected")), 0.0);
    still_serving(&gw, "otlp-refused").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endpoints_query_stays_after_the_path_v1_metrics_is_appended_to() {
    let agent = Agent::start("otlp-query");
    let receiver = Receiver::accepting().await;
    let export = |name: &str, endpoint: &str| {
        format!(
            "[[otlp.exports]]\nname = \"{name}\"\nendpoint = \"{endpoint}\"\ninterval = \"1s\"\n\
             targets = \"otlp-*\"\nmodule = \"threads\"\n\n"
        )
    };
    let config =
        format!(
        "{targets}\n[[prometheus.modules]]\nname = \"threads\"\nrules_file = \"{rules}\"\n\n{a}{b}",
        targets = targets_toml(&[&agent]),
        rules = rules().display(),
        a = export("base", &format!("{}/otlp?tenant=a", receiver.url)),
        b = export("full", &format!("{}/otlp/v1/metrics/?tenant=b", receiver.url)),
    );
    let _gw = Gateway::start(&config).await;
    let want = BTreeSet::from([
        "/otlp/v1/metrics?tenant=a".to_string(),
        "/otlp/v1/metrics?tenant=b".to_string(),
    ]);
    eventually(
        "both exports push to their path with their query",
        Duration::from_secs(60),
        || async {
            let seen: BTreeSet<String> = receiver
                .received()
                .into_iter()
                .map(|r| r.path_and_query)
                .collect();
            (seen == want).then_some(()).ok_or(format!("{seen:?}"))
        },
    )
    .await;
    // Both took points; each request went where its export says.
    assert!(receiver.answered().iter().all(|s| *s == 200));
}

/// The easiest mistake: an endpoint without VictoriaMetrics'
/// `/opentelemetry` path, which it answers with 400 whatever the request
/// holds. Seen for what it is: one configuration error per push, naming
/// the path to check, no halving (VictoriaMetrics gets the request and
/// one without points per push), its points counted as failed; and an
/// endpoint where nothing listens says "connection refused" on /readyz.
#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_path_is_one_configuration_error_per_push_and_a_closed_port_says_so() {
    let vm = Victoria::start().await;
    let agent = Agent::start("otlp-path");
    let closed = free_port();
    let admin = free_port();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n[admin]\nlisten = \"127.0.0.1:{admin}\"\n\n\
             {targets}\n[[prometheus.modules]]\nname = \"threads\"\nrules_file = \"{rules}\"\n\n\
             [[otlp.exports]]\nname = \"nopath\"\nendpoint = \"{endpoint}\"\ninterval = \"1s\"\n\
             targets = \"otlp-*\"\nmodule = \"threads\"\nmax_request_bytes = 1024\n\n\
             [[otlp.exports]]\nname = \"closed\"\nendpoint = \"http://127.0.0.1:{closed}\"\n\
             interval = \"1s\"\ntargets = \"otlp-*\"\nmodule = \"threads\"\n",
            targets = targets_toml(&[&agent]),
            rules = rules().display(),
            endpoint = vm.url(""),
        ),
    )
    .unwrap();
    let gw = common::GatewayProcess::start(&config, "info");
    eventually("/readyz says how both exports fail", Duration::from_secs(90), || async {
        let text = readyz(admin).await?;
        (text.contains(
            "OTLP export nopath: the receiver refuses the export's requests (HTTP 400): \
             check its endpoint and credentials",
        ) && text.contains("OTLP export closed: the last request was not delivered: could not connect: connection refused"))
        .then_some(())
        .ok_or(text)
    })
    .await;
    let metrics = || async {
        common::get_text(
            &common::http_client(),
            &format!("http://127.0.0.1:{admin}/metrics"),
        )
        .await
    };
    eventually(
        "a few pushes' points counted failed",
        Duration::from_secs(90),
        || async {
            let text = metrics().await;
            let failed = text
                .lines()
                .find(|l| {
                    l.starts_with("jmxgate_otlp_points_total{export=\"nopath\",outcome=\"failed\"}")
                })
                .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .unwrap_or(0.0);
            (failed > 0.0).then_some(()).ok_or(text)
        },
    )
    .await;
    let text = metrics().await;
    assert!(
        !text.contains("jmxgate_otlp_points_total{export=\"nopath\",outcome=\"rejected\"}"),
        "nothing refused point by point:\n{text}"
    );
    let log = gw.stop();
    let lines = |what: &str| {
        log.iter()
            .filter(|l| l.contains("export=nopath") && l.contains(what))
            .cloned()
            .collect::<Vec<_>>()
    };
    let told = lines("OTLP push not delivered");
    assert!(!told.is_empty(), "{log:?}");
    assert!(
        told[0].contains("the receiver answered HTTP 400 to the request itself")
            && told[0].contains("/opentelemetry/v1/metrics")
            && told[0].contains("unsupported path requested"),
        "{}",
        told[0]
    );
    assert!(lines("OTLP points dropped").is_empty() && lines("OTLP push refused").is_empty());
    // VictoriaMetrics took nothing under that name.
    assert!(vm.series("otlp-path").await.is_empty());
}
