//! What a large fleet needs from the gateway, against real agents: the
//! target list read in pages, and the gateway-wide bound on exchanges in
//! flight (`server.max_agent_exchanges`) holding for a fan-out. Memory,
//! start-up and time at 100,000 targets are measured by bench/scale.sh,
//! not here.

use crate::common;

use std::time::{Duration, Instant};

use common::{shared_agents, Agent, Gateway};
use serde_json::{json, Value};

/// `count` targets named `t-01`…, all served by the same real agent (a
/// fleet's names are what the features below are about).
fn fleet(url: &str, count: usize) -> String {
    (1..=count)
        .map(|i| {
            format!(
                "[[targets]]\nname = \"t-{i:02}\"\nurl = \"{url}\"\nlabels = {{ half = \"{}\" }}\n",
                if i % 2 == 0 { "even" } else { "odd" }
            )
        })
        .collect()
}

fn names(page: &Value) -> Vec<String> {
    page["value"]
        .as_array()
        .unwrap_or_else(|| panic!("{page}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_target_list_is_read_in_pages_in_fleet_order() {
    let [a, ..] = shared_agents();
    let gw = Gateway::start(&format!("max_agent_exchanges = 4\n{}", fleet(&a.url(), 25))).await;
    let (status, whole) = gw.get("/jolokia/targets").await;
    assert_eq!(status, 200);
    let all = names(&whole);
    assert_eq!(all.len(), 25);
    assert!(whole.get("next").is_none(), "{whole}");

    let mut read = Vec::new();
    let mut query = "limit=10".to_string();
    loop {
        let (status, page) = gw.get(&format!("/jolokia/targets?{query}")).await;
        assert_eq!(status, 200, "{page}");
        let got = names(&page);
        assert!(got.len() <= 10);
        read.extend(got.clone());
        match page["next"].as_str() {
            Some(next) => {
                assert_eq!(Some(next), got.last().map(String::as_str));
                query = format!("limit=10&after={next}");
            }
            None => break,
        }
    }
    assert_eq!(read, all, "pages must cover the list once, in order");

    for bad in ["limit=0", "limit=many", "after=no-such-target"] {
        let (status, body) = gw.get(&format!("/jolokia/targets?{bad}")).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_name_the_caller_cannot_see_is_no_place_to_start_a_page() {
    let dir = tempfile::tempdir().unwrap();
    let [a, ..] = shared_agents();
    let users = common::users_file(dir.path(), &[("odd", "pw-odd-1", &["odd"])]);
    let gw = Gateway::start(&common::basic_auth_config(
        &users,
        &format!(
            "{}\n[[roles]]\nname = \"odd\"\ntargets = [\"half=odd\"]\n",
            fleet(&a.url(), 6)
        ),
    ))
    .await;
    let get = |query: &'static str| {
        gw.http
            .get(gw.url(&format!("/jolokia/targets?{query}")))
            .basic_auth("odd", Some("pw-odd-1"))
            .send()
    };
    let r = get("limit=2").await.unwrap();
    let page: Value = r.json().await.unwrap();
    assert_eq!(names(&page), ["t-01", "t-03"]);
    let hidden = get("after=t-02").await.unwrap();
    let unknown = get("after=t-99").await.unwrap();
    assert_eq!(
        (hidden.status().as_u16(), unknown.status().as_u16()),
        (400, 400)
    );
    // The same words for a hidden name and a missing one.
    let (h, u) = (hidden.text().await.unwrap(), unknown.text().await.unwrap());
    assert_eq!(h.replace("t-02", "X"), u.replace("t-99", "X"));
}

/// An exec of `sleep(ms)` fanned out to every target, and how long it took.
async fn sleep_everywhere(gw: &Gateway, ms: u64) -> (Value, Duration) {
    let started = Instant::now();
    let (_, r) = gw
        .post(
            "/jolokia",
            &json!({"type": "exec", "mbean": "jmxgate.test:type=Operations",
                    "operation": "sleep", "arguments": [ms], "target": {"url": "t-*"}}),
        )
        .await;
    (r, started.elapsed())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fan_out_waits_for_the_gateways_exchange_bound_and_completes() {
    let [a, ..] = shared_agents();
    // 12 targets, at most 2 exchanges at a time in the whole gateway.
    let gw = Gateway::start(&format!("max_agent_exchanges = 2\n{}", fleet(&a.url(), 12))).await;
    let (warm, _) = sleep_everywhere(&gw, 1).await;
    assert_eq!(warm["status"], 200, "{warm}");
    let (r, took) = sleep_everywhere(&gw, 200).await;
    assert_eq!(r["status"], 200, "{r}");
    let answers = r["value"].as_object().unwrap();
    assert_eq!(answers.len(), 12, "{r}");
    assert!(answers.values().all(|v| *v == json!(200)), "{r}");
    // Six rounds of two 200 ms sleeps at the least: the bound held (the
    // targets are separate, so nothing else would serialise them).
    assert!(
        took >= Duration::from_millis(6 * 200),
        "12 sleeps of 200 ms under a bound of 2 took only {took:?}"
    );
}

/// A read fanned out to the 24 targets `t-*`, three times, every one
/// answering.
async fn read_everywhere_thrice(gw: &Gateway) {
    let read = json!({"type": "read", "mbean": "java.lang:type=Runtime",
                      "attribute": "Uptime", "target": {"url": "t-*"}});
    for _ in 0..3 {
        let (_, r) = gw.post("/jolokia", &read).await;
        assert_eq!(r["status"], 200, "{r}");
        assert_eq!(r["value"].as_object().map(|v| v.len()), Some(24), "{r}");
        assert!(r.get("errors").is_none(), "{r}");
    }
}

/// A fan-out to more agents than `server.max_kept_agent_connections`
/// leaves no more connections open than the bound (plus the exchanges in
/// flight when it was decided), and every target still answers; without
/// the bound each agent keeps its own. 24 targets at their own loopback
/// addresses are 24 agents to the gateway, however many JVMs answer.
/// Agent connections are counted per process: nextest gives each test
/// its own.
#[tokio::test(flavor = "multi_thread")]
async fn a_fan_out_to_many_agents_keeps_no_more_connections_than_the_bound() {
    let agent = Agent::start_at("kept", "0.0.0.0");
    let port = agent.port;
    let targets: String = (0..24)
        .map(|i| {
            format!(
                "[[targets]]\nname = \"t-{i:02}\"\nurl = \"http://127.0.0.{}:{port}/jolokia\"\n",
                40 + i
            )
        })
        .collect();
    let bounded = Gateway::start(&format!(
        "max_agent_exchanges = 2\nmax_kept_agent_connections = 4\n{targets}"
    ))
    .await;
    read_everywhere_thrice(&bounded).await;
    // Those past the bound were asked to close after their answer.
    common::eventually(
        "connections within the bound",
        Duration::from_secs(20),
        || async {
            match jmxgate::client::open_agent_connections() {
                open if open <= 4 + 2 => Ok(()),
                open => Err(format!("{open} agent connections open")),
            }
        },
    )
    .await;
    drop(bounded);

    let unbounded = Gateway::start(&format!("max_agent_exchanges = 2\n{targets}")).await;
    read_everywhere_thrice(&unbounded).await;
    let open = jmxgate::client::open_agent_connections();
    assert!(
        open >= 24,
        "each of 24 agents keeps a connection; {open} open"
    );
}
