//! Target health against real agents: background `version` probes, the
//! `GET /jolokia/targets` listing, and a circuit breaker that trips when an
//! agent hangs (answering at once instead of after the timeout) and
//! recovers when a real agent is back.

use crate::common;

use std::time::{Duration, Instant};

use common::{eventually, Agent, Gateway};
use serde_json::{json, Value};

const READ: &str = "/read/jmxgate.test:type=Types/Name";

#[tokio::test]
async fn the_target_list_shows_what_the_caller_may_reach_with_health() {
    let [alpha, beta, _] = common::shared_agents();
    let dead = common::dead_port();
    let audit = tempfile::tempdir().unwrap();
    let config = format!(
        "[audit]\ndir = \"{}\"\n[health]\nprobe_interval = \"200ms\"\n\
         [[targets]]\nname = \"alpha\"\nurl = \"{}\"\nlabels = {{ env = \"prod\" }}\n\
         [[targets]]\nname = \"beta\"\nurl = \"{}\"\n\
         [[targets]]\nname = \"gone\"\nurl = \"http://127.0.0.1:{dead}/jolokia\"\nlabels = {{ env = \"prod\" }}\n\
         [access]\nanonymous_role = \"prod\"\n[[roles]]\nname = \"prod\"\ntargets = [\"env=prod\"]\n",
        audit.path().display(),
        alpha.url(),
        beta.url()
    );
    let gw = Gateway::start(&config).await;
    let listed = eventually("every target probed", Duration::from_secs(10), || async {
        let (status, r) = gw.get("/jolokia/targets").await;
        assert_eq!(status, 200);
        let ready = r["value"]
            .as_array()
            .is_some_and(|ts| ts.iter().all(|t| t["health"]["state"] != "unknown"));
        ready.then_some(r.clone()).ok_or(r.to_string())
    })
    .await;
    let targets = listed["value"].as_array().unwrap();
    let names: Vec<&str> = targets
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["alpha", "gone"], "beta is not this role's");
    let alpha_entry = &targets[0];
    assert_eq!(alpha_entry["labels"], json!({"env": "prod"}));
    assert_eq!(alpha_entry["health"]["state"], "up");
    // The agent's own version and protocol, as it states them itself
    // (1.7.1 and 7.2, or 2.x and 8.2, depending on the generation).
    let own = common::direct(alpha, &json!({"type":"version"})).await;
    assert_eq!(own["value"]["agent"], alpha.generation.version(), "{own}");
    assert_eq!(alpha_entry["agent"]["version"], own["value"]["agent"]);
    assert_eq!(alpha_entry["agent"]["protocol"], own["value"]["protocol"]);
    assert!(alpha_entry["health"]["latency_ms"].as_f64().unwrap() > 0.0);
    assert!(
        alpha_entry.get("url").is_none(),
        "agent addresses stay private"
    );
    let gone = &targets[1];
    assert_eq!(gone["health"]["state"], "down");
    assert!(
        gone["health"]["last_error"]
            .as_str()
            .unwrap()
            .contains("cannot connect"),
        "{gone}"
    );
    assert_eq!(gw.post("/jolokia/targets", &json!({})).await.0, 405);

    // Who looked at which part of the fleet is in the audit log.
    let records: Vec<Value> = std::fs::read_dir(audit.path())
        .unwrap()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
            text.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .collect::<Vec<_>>()
        })
        .filter(|r| r["event"] == "target_list")
        .collect();
    let served = records
        .iter()
        .find(|r| r["status"] == 200)
        .expect("a served list is recorded");
    assert_eq!(served["note"], "2 target(s) listed", "{served}");
    assert_eq!(served["roles"], json!(["prod"]), "{served}");
    assert_eq!(served["decision"], "allowed", "{served}");
    let refused = records
        .iter()
        .find(|r| r["status"] == 405)
        .expect("a refused method is recorded");
    assert_eq!(refused["decision"], "invalid", "{refused}");
}

/// A stand-in for a hung agent: accepts TCP connections and holds them
/// open without ever answering, so every exchange with it takes the full
/// `request_timeout` (a closed port would refuse at once and prove nothing
/// about the breaker saving time). Ends, closing all of them, when aborted.
async fn hung_agent() -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    (port, task)
}

#[tokio::test]
async fn a_failing_target_trips_the_breaker_and_a_probe_closes_it() {
    const TIMEOUT: Duration = Duration::from_secs(3);
    let (port, hung) = hung_agent().await;
    let config = format!(
        "[health]\nprobe_interval = \"300ms\"\nfailures_to_open = 2\n\
         [[targets]]\nname = \"flaky\"\nurl = \"http://127.0.0.1:{port}/jolokia\"\n\
         request_timeout = \"{}s\"\n",
        TIMEOUT.as_secs()
    );
    let gw = Gateway::start(&config).await;
    let path = format!("/jolokia/targets/flaky{READ}");

    // While the breaker is closed, an item waits the whole timeout.
    let started = Instant::now();
    let (_, r) = gw.get(&path).await;
    let waited = started.elapsed();
    assert_eq!(r["error_type"], "jmxgate.AgentTimeout", "{r}");
    assert!(waited >= TIMEOUT - Duration::from_millis(100), "{waited:?}");

    // Failed exchanges and probes open the breaker; from then on the
    // gateway answers without waiting for the hung agent.
    let tripped = eventually("the breaker open", Duration::from_secs(30), || async {
        let (_, r) = gw.get(&path).await;
        let open = r["error_type"] == "jmxgate.TargetUnavailable";
        open.then_some(r.clone()).ok_or(r.to_string())
    })
    .await;
    assert_eq!(tripped["status"], 503);
    assert!(
        tripped["error"].as_str().unwrap().contains("circuit open"),
        "{tripped}"
    );
    let started = Instant::now();
    let (_, fast) = gw.get(&path).await;
    let took = started.elapsed();
    assert_eq!(fast["error_type"], "jmxgate.TargetUnavailable", "{fast}");
    assert!(
        took < TIMEOUT / 3,
        "answered without waiting for the timeout: took {took:?}"
    );
    let (_, listed) = gw.get("/jolokia/targets").await;
    assert_eq!(listed["value"][0]["health"]["breaker"], "open", "{listed}");

    // The agent is restarted, a real one on the same port: a probe closes
    // the breaker.
    hung.abort();
    let _ = hung.await;
    let port_arg = port.to_string();
    let _back = Agent::start_with("flaky", &["--port", &port_arg]);
    let recovered = eventually("the breaker closed", Duration::from_secs(30), || async {
        let (_, r) = gw.get(&path).await;
        let ok = r["status"] == 200;
        ok.then_some(r.clone()).ok_or(r.to_string())
    })
    .await;
    assert_eq!(recovered["value"], "flaky");
    let (_, listed) = gw.get("/jolokia/targets").await;
    assert_eq!(listed["value"][0]["health"]["breaker"], "closed");
    assert_eq!(listed["value"][0]["health"]["state"], "up");
}

/// `jmxgate_health_probes_total{result}` as the gateway counts it.
fn probes(gw: &Gateway, result: &str) -> u64 {
    let text = gw.gateway.metrics().encode();
    let series = format!("jmxgate_health_probes_total{{result=\"{result}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .map_or(0, |n| n.trim().parse().unwrap())
}

#[tokio::test]
async fn targets_answering_real_traffic_are_not_probed_and_quiet_ones_are() {
    let [alpha, beta, _] = common::shared_agents();
    let config = format!(
        "[health]\nprobe_interval = \"300ms\"\n\
         [[targets]]\nname = \"busy\"\nurl = \"{}\"\n\
         [[targets]]\nname = \"quiet\"\nurl = \"{}\"\n",
        alpha.url(),
        beta.url()
    );
    let gw = Gateway::start(&config).await;
    eventually(
        "the first round learnt both agents",
        Duration::from_secs(30),
        || async {
            let (_, r) = gw.get("/jolokia/targets").await;
            let known = r["value"]
                .as_array()
                .is_some_and(|ts| ts.iter().all(|t| t["agent"]["version"].is_string()));
            known.then_some(()).ok_or(r.to_string())
        },
    )
    .await;
    // Reads of busy, over and over: its probes are skipped, quiet's sent.
    let (skipped, sent) = (probes(&gw, "skipped"), probes(&gw, "sent"));
    eventually(
        "busy's probes skipped, quiet's sent",
        Duration::from_secs(60),
        || async {
            let (status, r) = gw.get(&format!("/jolokia/targets/busy{READ}")).await;
            assert_eq!((status, &r["value"]), (200, &json!(alpha.name)), "{r}");
            tokio::time::sleep(Duration::from_millis(20)).await;
            let now = (probes(&gw, "skipped"), probes(&gw, "sent"));
            if now.0 >= skipped + 3 && now.1 >= sent + 3 {
                Ok(())
            } else {
                Err(format!(
                    "skipped {} sent {} since",
                    now.0 - skipped,
                    now.1 - sent
                ))
            }
        },
    )
    .await;
    // Both still up: the traffic said so for busy, probes for quiet.
    let (_, r) = gw.get("/jolokia/targets").await;
    for t in r["value"].as_array().unwrap() {
        assert_eq!(t["health"]["state"], "up", "{t}");
    }
}

/// One target's health state as `GET /jolokia/targets` shows it.
async fn state_of(gw: &Gateway, name: &str) -> String {
    let (_, r) = gw.get("/jolokia/targets").await;
    r["value"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["name"] == name))
        .map_or(String::new(), |t| {
            t["health"]["state"].as_str().unwrap_or("").to_string()
        })
}

#[tokio::test]
async fn a_stable_target_is_probed_less_often_and_still_found_down_when_it_stops() {
    // Stable after 3 answers in a row, then probed every 4th round: at
    // most 1.2 s apart, so found down within that (plus the probe's own
    // timeout) once it stops; the deadline below is generous.
    let agent = common::Agent::start("steady");
    let config = format!(
        "[health]\nprobe_interval = \"300ms\"\nstable_probe_interval = \"1200ms\"\n\
         [[targets]]\nname = \"steady\"\nurl = \"{}\"\nrequest_timeout = \"2s\"\n",
        agent.url()
    );
    let gw = Gateway::start(&config).await;
    eventually(
        "steady stable: rounds skip it",
        Duration::from_secs(60),
        || async {
            let skipped = probes(&gw, "stable_skipped");
            (skipped >= 3)
                .then_some(())
                .ok_or(format!("stable_skipped {skipped}"))
        },
    )
    .await;
    assert_eq!(state_of(&gw, "steady").await, "up");
    assert!(probes(&gw, "sent") >= 3, "its first answers were probed");
    drop(agent);
    eventually(
        "steady found down without traffic",
        Duration::from_secs(30),
        || async {
            let state = state_of(&gw, "steady").await;
            (state == "down").then_some(()).ok_or(state)
        },
    )
    .await;
}

#[tokio::test]
async fn a_down_target_is_probed_every_round() {
    let dead = common::dead_port();
    let config = format!(
        "[health]\nprobe_interval = \"200ms\"\nstable_probe_interval = \"2s\"\n\
         [[targets]]\nname = \"gone\"\nurl = \"http://127.0.0.1:{dead}/jolokia\"\n"
    );
    let gw = Gateway::start(&config).await;
    let sent = probes(&gw, "sent");
    eventually(
        "gone probed round after round",
        Duration::from_secs(30),
        || async {
            let now = probes(&gw, "sent");
            (now >= sent + 8).then_some(()).ok_or(format!("sent {now}"))
        },
    )
    .await;
    // Never skipped: neither as stable nor for traffic.
    assert_eq!(probes(&gw, "stable_skipped"), 0);
    assert_eq!(probes(&gw, "skipped"), 0);
    assert_eq!(state_of(&gw, "gone").await, "down");
}
