//! What the gateway does for agents under load, against real agents: one
//! shared copy of list answers revalidated with `ifModifiedSince`, one
//! agent call for identical concurrent reads, and the gateway-wide limits
//! (concurrent requests, bytes of answers held) with their clear errors.

use crate::common;

use common::{direct, targets_toml, Agent, Gateway};
use futures::future::join_all;
use serde_json::{json, Value};

const OPS: &str = "jmxgate.test:type=Operations";

fn list(config: Value) -> Value {
    json!({"type": "list", "config": config})
}

fn policy(dir: &std::path::Path, name: &str, domain: &str) -> String {
    let path = dir.join(format!("{name}.xml"));
    std::fs::write(
        &path,
        format!(
            "<restrict><commands><command>list</command></commands>\
             <allow><mbean><name>{domain}:*</name><attribute>*</attribute></mbean></allow></restrict>"
        ),
    )
    .unwrap();
    path.display().to_string()
}

/// Basic auth with one user per role (password `pw`), each role seeing
/// every target, limited to one domain by a policy when one is named.
fn one_user_per_role(
    agent: &Agent,
    dir: &std::path::Path,
    roles: &[(&str, Option<&str>)],
) -> String {
    let users: Vec<(&str, &str, &[&str])> = roles
        .iter()
        .map(|(name, _)| (*name, "pw", std::slice::from_ref(name)))
        .collect();
    let mut config = format!(
        "auth = [\"basic\"]\n{}[auth.basic]\nusers_file = \"{}\"\n",
        targets_toml(&[agent]),
        common::users_file(dir, &users).display(),
    );
    for (name, domain) in roles {
        config += &format!("\n[[roles]]\nname = \"{name}\"\ntargets = [\"*\"]\n");
        if let Some(domain) = domain {
            config += &format!("policy = \"{}\"\n", policy(dir, name, domain));
        }
    }
    config
}

async fn post_as(gw: &Gateway, user: &str, path: &str, body: &Value) -> Value {
    let r = gw
        .http
        .post(gw.url(path))
        .basic_auth(user, Some("pw"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    serde_json::from_str(&r.text().await.unwrap()).unwrap()
}

#[tokio::test]
async fn list_answers_are_shared_and_revalidated_with_if_modified_since() {
    let agent = Agent::start("cached");
    let gw = Gateway::start(&targets_toml(&[&agent])).await;
    let path = "/jolokia/targets/cached";
    // Agents count changes by the second: a change in the second a list
    // was made counts as after it. Let start-up's registrations age.
    let next_second = || tokio::time::sleep(std::time::Duration::from_millis(1100));
    next_second().await;

    // The new MBean's key in a list: 1.7.1 writes an ObjectName's keys in
    // canonical (sorted) order, 2.x in the order they were registered with
    // (`type=Dynamic,name=one`).
    let dynamic = if agent.generation.is_v2() {
        "type=Dynamic,name=one"
    } else {
        "name=one,type=Dynamic"
    };
    let (_, first) = gw.post(path, &list(json!({}))).await;
    assert_eq!(first["status"], 200, "{first}");
    assert!(first["value"]["jmxgate.test"]["type=Types"].is_object());
    assert!(first["value"]["jmxgate.test"].get(dynamic).is_none());
    let t1 = first["timestamp"].as_u64().unwrap();
    // The agent answers the same question the same way.
    let agent_says = direct(&agent, &list(json!({"ifModifiedSince": t1}))).await;
    assert_eq!(agent_says["status"], 304, "{agent_says}");

    // Nothing changed since t1: the gateway says so without the value.
    let (_, again) = gw.post(path, &list(json!({"ifModifiedSince": t1}))).await;
    assert_eq!(again["status"], 304, "{again}");
    assert!(again.get("value").is_none());
    assert_eq!(again["request"]["type"], "list");
    // Without the client's time, the full (cached) value.
    let (_, full) = gw.post(path, &list(json!({}))).await;
    assert_eq!(full["value"], first["value"]);

    // An MBean registered on the agent shows at once: the cached copy is
    // revalidated, not trusted.
    let (_, reg) = gw
        .post(
            path,
            &json!({"type":"exec","mbean":OPS,"operation":"register","arguments":["one"]}),
        )
        .await;
    assert_eq!(reg["status"], 200, "{reg}");
    next_second().await;
    let (_, changed) = gw.post(path, &list(json!({"ifModifiedSince": t1}))).await;
    assert_eq!(changed["status"], 200, "{changed}");
    assert!(
        changed["value"]["jmxgate.test"][dynamic].is_object(),
        "{}",
        changed["value"]["jmxgate.test"]
    );
    let t2 = changed["timestamp"].as_u64().unwrap();
    let (_, settled) = gw.post(path, &list(json!({"ifModifiedSince": t2}))).await;
    assert_eq!(settled["status"], 304, "{settled}");

    // Different parameters are different entries.
    let (_, shallow) = gw.post(path, &list(json!({"maxDepth": 1}))).await;
    assert!(shallow["value"]["jmxgate.test"].is_string(), "{shallow}");

    let metrics = gw.gateway.metrics().encode();
    assert!(
        metrics.contains(r#"jmxgate_cache_requests_total{cache="list",result="hit"}"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn each_role_sees_its_own_part_of_one_cached_list() {
    let agent = Agent::start("shared");
    let dir = tempfile::tempdir().unwrap();
    let config = one_user_per_role(
        &agent,
        dir.path(),
        &[("lang", Some("java.lang")), ("test", Some("jmxgate.test"))],
    );
    let gw = Gateway::start(&config).await;
    let path = "/jolokia/targets/shared";
    for _ in 0..2 {
        let lang = post_as(&gw, "lang", path, &list(json!({}))).await;
        let domains: Vec<&String> = lang["value"].as_object().unwrap().keys().collect();
        assert_eq!(domains, vec!["java.lang"], "{lang}");
        let test = post_as(&gw, "test", path, &list(json!({}))).await;
        let domains: Vec<&String> = test["value"].as_object().unwrap().keys().collect();
        assert_eq!(domains, vec!["jmxgate.test"], "{test}");
    }
    // A list of domains only (maxDepth=1) is filtered too, and keeps the
    // agent's own shape for a domain cut short.
    let lang = post_as(&gw, "lang", path, &list(json!({"maxDepth": 1}))).await;
    let agent_domains = direct(&agent, &list(json!({"maxDepth": 1}))).await;
    assert_eq!(
        lang["value"],
        json!({"java.lang": agent_domains["value"]["java.lang"]}),
        "{lang}"
    );
}

#[tokio::test]
async fn identical_concurrent_reads_share_one_agent_call_and_execs_never_do() {
    let agent = Agent::start("flight");
    let gw = Gateway::start(&targets_toml(&[&agent])).await;
    let path = "/jolokia/targets/flight";
    let slow = json!({"type":"read","mbean":"jmxgate.test:type=Counter","attribute":"SlowReads"});
    let answers = join_all((0..6).map(|_| gw.post(path, &slow))).await;
    let values: Vec<&Value> = answers.iter().map(|(_, a)| &a["value"]).collect();
    // Each SlowReads read on the agent counts itself: one shared call
    // gives every caller the same count.
    assert!(values.iter().all(|v| *v == values[0]), "{values:?}");
    let next = direct(&agent, &slow).await;
    assert_eq!(
        next["value"].as_i64().unwrap(),
        values[0].as_i64().unwrap() + 1
    );

    let invocations =
        json!({"type":"read","mbean":"jmxgate.test:type=Counter","attribute":"Invocations"});
    let before = direct(&agent, &invocations).await["value"]
        .as_i64()
        .unwrap();
    let echo = json!({"type":"exec","mbean":OPS,"operation":"sleep","arguments":[200]});
    let runs = join_all((0..4).map(|_| gw.post(path, &echo))).await;
    assert!(runs.iter().all(|(_, a)| a["status"] == 200), "{runs:?}");
    let after = direct(&agent, &invocations).await["value"]
        .as_i64()
        .unwrap();
    assert_eq!(after - before, 4, "every exec runs on the agent");
}

#[tokio::test]
async fn requests_beyond_max_concurrent_requests_get_503_and_the_gateway_recovers() {
    let agent = &common::shared_agents()[0];
    // Anonymous callers may take every slot here: the general cap is
    // what is tested (their own share is in anonymous_callers_…).
    let gw = Gateway::start(&format!(
        "max_concurrent_requests = 2\nmax_anonymous_requests = 2\n{}",
        targets_toml(&[agent])
    ))
    .await;
    let path = format!("/jolokia/targets/{}", agent.name);
    let sleep = json!({"type":"exec","mbean":OPS,"operation":"sleep","arguments":[600]});
    let sends = (0..6).map(|_| async {
        let r = gw
            .http
            .post(gw.url(&path))
            .header("content-type", "application/json")
            .body(sleep.to_string())
            .send()
            .await
            .unwrap();
        let retry_after = r.headers().get("retry-after").cloned();
        let status = r.status().as_u16();
        let body: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
        (status, retry_after, body)
    });
    let results = join_all(sends).await;
    let ok = results.iter().filter(|(s, _, _)| *s == 200).count();
    let busy: Vec<_> = results.iter().filter(|(s, _, _)| *s == 503).collect();
    assert_eq!(ok + busy.len(), 6, "{results:?}");
    assert!((1..=2).contains(&ok), "{results:?}");
    for (_, retry_after, body) in &busy {
        assert_eq!(retry_after.as_ref().unwrap(), "1");
        assert_eq!(body["error_type"], "jmxgate.GatewayBusy");
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("server.max_concurrent_requests"),
            "{body}"
        );
    }
    let (_, after) = gw.post(&path, &json!({"type":"version"})).await;
    assert_eq!(after["status"], 200, "{after}");
}

/// `/jmxgate/explain` takes a request slot like any request: at the
/// limit, it is refused too.
#[tokio::test]
async fn explain_obeys_max_concurrent_requests() {
    let agent = &common::shared_agents()[0];
    let gw = Gateway::start(&format!(
        "max_concurrent_requests = 1\n{}",
        targets_toml(&[agent])
    ))
    .await;
    let sleep = json!({"type":"exec","mbean":OPS,"operation":"sleep","arguments":[1500]});
    let path = format!("/jolokia/targets/{}", agent.name);
    let busy = gw.post(&path, &sleep);
    let explain = async {
        // The exec holds the slot from its arrival to its answer: once the
        // gateway has a connection open to the agent (health probes' own
        // connections aside; nextest gives each test a process of its
        // own), it is under way there.
        common::eventually(
            "the sleeping exec is under way at the agent",
            std::time::Duration::from_secs(60),
            || async {
                match jmxgate::client::open_agent_connections() {
                    0 => Err("no agent connection open".to_string()),
                    _ => Ok(()),
                }
            },
        )
        .await;
        gw.post("/jmxgate/explain", &json!({"type":"version"}))
            .await
    };
    let ((status, held), (explained, refusal)) = tokio::join!(busy, explain);
    assert_eq!(status, 200, "{held}");
    assert_eq!(explained, 503, "{refusal}");
    assert_eq!(refusal["error_type"], "jmxgate.GatewayBusy");
    // Once the slot is free, explain answers again.
    let (status, report) = gw
        .post("/jmxgate/explain", &json!({"type":"version"}))
        .await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["decision"], "allow");
}

/// Anonymous callers (here with slow bodies) hold at most
/// `server.max_anonymous_requests` of the slots:
/// callers with credentials still get in.
#[tokio::test]
async fn anonymous_callers_hold_only_their_share_of_the_slots() {
    use tokio::io::AsyncWriteExt;
    let agent = &common::shared_agents()[0];
    let dir = tempfile::tempdir().unwrap();
    let users = common::users_file(dir.path(), &[("ops", "pw", &["ops"])]);
    let gw = Gateway::start(&format!(
        "max_concurrent_requests = 4\nmax_anonymous_requests = 2\nbody_read_timeout = \"30s\"\n\
         auth = [\"basic\", \"anonymous\"]\n{}\
         [auth.basic]\nusers_file = \"{}\"\n\n[access]\nanonymous_role = \"ops\"\n\n\
         [[roles]]\nname = \"ops\"\ntargets = [\"*\"]\n",
        targets_toml(&[agent]),
        users.display()
    ))
    .await;
    let with_credentials = || {
        gw.http
            .post(gw.url(&format!("/jolokia/targets/{}", agent.name)))
            .basic_auth("ops", Some("pw"))
            .body(
                json!({"type":"read","mbean":"jmxgate.test:type=Types","attribute":"Name"})
                    .to_string(),
            )
            .send()
    };
    // Verified once before the flood: a password check is work for a
    // caller not yet known and takes a slot of the anonymous share (a new
    // login during the flood gets 429 with Retry-After); verified
    // credentials are decided without one.
    assert_eq!(with_credentials().await.unwrap().status(), 200);
    // Eight anonymous requests that promise a body and never send it.
    let mut stalled = Vec::new();
    for _ in 0..8 {
        let mut s = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
        s.write_all(
            format!(
                "POST /jolokia/targets/{} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
                 content-length: 100\r\n\r\n{{",
                agent.name
            )
            .as_bytes(),
        )
        .await
        .unwrap();
        stalled.push(s);
    }
    // Two of them hold the anonymous share (and two of the four slots)
    // while they wait for their bodies; the six others are refused at
    // once, for the share or for the slots.
    common::eventually(
        "six of the eight stalled requests are refused",
        std::time::Duration::from_secs(60),
        || async {
            match gw.metric("jmxgate_http_requests_total{status=\"503\"}") {
                n if n >= 6.0 => Ok(()),
                n => Err(format!("{n} refused")),
            }
        },
    )
    .await;
    // Anonymous: refused, naming the share.
    let (status, body) = gw
        .post(
            &format!("/jolokia/targets/{}", agent.name),
            &json!({"type":"version"}),
        )
        .await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("server.max_anonymous_requests"),
        "{body}"
    );
    // With credentials: two slots are still free.
    for _ in 0..2 {
        let r = with_credentials().await.unwrap();
        assert_eq!(r.status(), 200);
        let v: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
        assert_eq!(v["value"], agent.name.as_str());
    }
    drop(stalled);
}

#[tokio::test]
async fn an_answer_beyond_the_buffer_budget_fails_its_exchange_with_503() {
    let agent = &common::shared_agents()[1];
    let gw = Gateway::start(&format!(
        "max_buffered_bytes = 1048576\n{}",
        targets_toml(&[agent])
    ))
    .await;
    let path = format!("/jolokia/targets/{}", agent.name);
    let repeat =
        |n: u64| json!({"type":"exec","mbean":OPS,"operation":"repeat","arguments":["x", n]});
    let (status, answers) = gw
        .post(&path, &json!([repeat(2_000_000), {"type":"version"}]))
        .await;
    assert_eq!(status, 200);
    assert_eq!(answers[0]["status"], 503, "{}", answers[0]);
    assert_eq!(answers[0]["error_type"], "jmxgate.GatewayBusy");
    assert!(answers[0]["error"]
        .as_str()
        .unwrap()
        .contains("server.max_buffered_bytes"));
    // One bulk is one answer: the small item shared its fate.
    assert_eq!(answers[1]["status"], 503);
    // Answers that fit pass, and the budget was given back.
    let (_, small) = gw.post(&path, &repeat(500_000)).await;
    assert_eq!(small["status"], 200);
    assert_eq!(small["value"].as_str().unwrap().len(), 500_000);
    assert_eq!(
        gw.gateway.buffer_budget_available(),
        1024 * 1024,
        "all budget returned"
    );
}

/// A list answer large enough to be sent from the cache as it is (without
/// a copy into each answer): still exactly the agent's list, with a
/// `Content-Length` that matches, as JSON and as JSONP, to several clients
/// at once, and filtered (so copied) for a role whose policy hides part.
#[tokio::test(flavor = "multi_thread")]
async fn a_large_cached_list_reaches_every_client_whole() {
    // 300 more MBeans: a list of about half a megabyte.
    let agent = Agent::start_with("large", &["--many-mbeans", "300"]);
    let dir = tempfile::tempdir().unwrap();
    let config = one_user_per_role(
        &agent,
        dir.path(),
        &[("all", None), ("narrow", Some("jmxgate.many7"))],
    );
    let gw = Gateway::start(&config).await;
    let expected = direct(&agent, &list(json!({}))).await["value"].clone();
    assert!(
        expected.to_string().len() > 256 * 1024,
        "the agent's list is large"
    );

    let fetch = |query: &'static str| {
        let (http, url) = (
            gw.http.clone(),
            gw.url(&format!("/jolokia/targets/large{query}")),
        );
        async move {
            let r = http
                .post(url)
                .basic_auth("all", Some("pw"))
                // JSONP is answered to a page whose origin the roles admit.
                .header("referer", "http://console.example/app/")
                .header("content-type", "application/json")
                .body(list(json!({})).to_string())
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            let declared: usize = r.headers()["content-length"]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            let body = r.bytes().await.unwrap();
            assert_eq!(declared, body.len(), "Content-Length matches the body");
            String::from_utf8(body.to_vec()).unwrap()
        }
    };
    let answers = join_all((0..6).map(|_| fetch(""))).await;
    for text in &answers {
        let answer: Value = serde_json::from_str(text).unwrap();
        assert_eq!(answer["status"], 200);
        assert_eq!(
            answer["request"],
            list(json!({})),
            "the client's own request"
        );
        assert_eq!(answer["value"], expected);
    }
    let jsonp = fetch("?callback=seen").await;
    let inner = jsonp
        .strip_prefix("seen(")
        .and_then(|t| t.strip_suffix(");"))
        .expect("wrapped in the callback");
    assert_eq!(
        serde_json::from_str::<Value>(inner).unwrap()["value"],
        expected
    );

    // A role that sees one domain gets that domain only.
    let narrowed = post_as(&gw, "narrow", "/jolokia/targets/large", &list(json!({}))).await;
    let domains: Vec<&String> = narrowed["value"].as_object().unwrap().keys().collect();
    assert_eq!(domains, ["jmxgate.many7"], "{}", narrowed["value"]);
    assert_eq!(
        narrowed["value"]["jmxgate.many7"],
        expected["jmxgate.many7"]
    );
}
