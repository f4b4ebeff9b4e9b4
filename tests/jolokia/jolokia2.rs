//! Jolokia 2.x agents behind the gateway, where they differ from 1.x:
//! protocol 8.2 (`config`), plain-text HTTP 400 refusals, and Fetch
//! Metadata and forwarding headers that 2.6.1-SNAPSHOT judges itself. The
//! suites that compare answers run against 2.x too (`JMXGATE_TEST_AGENT`,
//! see scripts/test.sh); this file holds what only 2.x shows.

use crate::common;

use common::{Agent, Gateway, Generation};
use serde_json::{json, Value};

const OPS: &str = "jmxgate.test:type=Operations";

/// A 2.x agent of `generation` and a gateway with it as target `two`, or
/// `None` (reported) when the jar is not here outside CI.
async fn setup(generation: Generation) -> Option<(Agent, Gateway)> {
    if !generation.available() {
        return None;
    }
    let agent = Agent::start_v2(generation, "two", &[]);
    let gw = Gateway::start(&format!(
        "[[targets]]\nname = \"two\"\nurl = \"{}\"\n",
        agent.url()
    ))
    .await;
    Some((agent, gw))
}

async fn direct(agent: &Agent, body: &Value) -> (u16, String) {
    let resp = common::http_client()
        .post(agent.url())
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn config_is_the_gateways_own_without_a_target_and_the_agents_with_one() {
    let Some((agent, gw)) = setup(Generation::V2).await else {
        return;
    };
    let (status, own) = gw.post("/jolokia", &json!({"type":"config"})).await;
    assert_eq!(status, 200);
    assert_eq!(own["value"]["protocol"], "8.2", "{own}");
    assert_eq!(own["value"]["agent"], env!("CARGO_PKG_VERSION"));
    // This listener is anonymous: no method to present.
    assert_eq!(own["value"]["security"], json!({"authentication": []}));
    let (_, version) = gw.get("/jolokia/version").await;
    assert_eq!(version["value"]["protocol"], "8.2");
    assert_eq!(own["value"]["id"], version["value"]["id"]);

    let (_, through) = gw.get("/jolokia/targets/two/config").await;
    let (_, text) = direct(&agent, &json!({"type":"config"})).await;
    let mine: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(through["value"], mine["value"], "{through}");
    assert_eq!(through["value"]["protocol"], "8.2");
    // The proxy form reaches the agent too.
    let (_, proxied) = gw
        .post("/jolokia", &json!({"type":"config","target":{"url":"two"}}))
        .await;
    assert_eq!(proxied["value"], mine["value"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_item_the_agent_refuses_with_http_400_fails_alone_with_the_agents_message() {
    let Some((agent, gw)) = setup(Generation::V2).await else {
        return;
    };
    let overloaded = json!({"type":"exec","mbean":OPS,"operation":"add","arguments":[1,2]});
    // The gateway can't know the attribute's type; the agent refuses it.
    let bad_value =
        json!({"type":"write","mbean":"jmxgate.test:type=Types","attribute":"Int","value":"abc"});
    // What the agent says of each on its own: a plain-text 400.
    let mut reasons = Vec::new();
    for item in [&overloaded, &bad_value] {
        let (status, text) = direct(&agent, item).await;
        assert_eq!(status, 400, "{text}");
        let reason = text.lines().last().unwrap().trim().to_string();
        assert!(!reason.is_empty(), "{text}");
        reasons.push(reason);
    }
    let ok = json!({"type":"read","mbean":"jmxgate.test:type=Types","attribute":"Name"});
    let (status, r) = gw
        .post(
            "/jolokia/targets/two",
            &json!([ok, overloaded, bad_value, ok]),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(r[0]["value"], "two", "{r}");
    assert_eq!(r[3]["value"], "two", "{r}");
    for (answer, reason) in [&r[1], &r[2]].into_iter().zip(&reasons) {
        assert_eq!(answer["status"], 400, "{answer}");
        assert_eq!(answer["error_type"], "java.lang.IllegalArgumentException");
        assert_eq!(
            answer["error"],
            format!("java.lang.IllegalArgumentException : {reason}")
        );
    }
    // The same as a single request.
    let (status, single) = gw.post("/jolokia/targets/two", &overloaded).await;
    assert_eq!(status, 200);
    assert_eq!(single["status"], 400, "{single}");
}

/// 2.6.1-SNAPSHOT refuses a cross-site request by its Fetch Metadata; the
/// gateway has decided those headers already and never forwards them.
#[tokio::test(flavor = "multi_thread")]
async fn browser_and_forwarding_headers_never_reach_the_agent() {
    let Some((agent, gw)) = setup(Generation::V2Snapshot).await else {
        return;
    };
    let path = "/read/jmxgate.test:type=Types/Name";
    let headers = [
        ("origin", "https://elsewhere.example"),
        ("sec-fetch-site", "cross-site"),
        ("sec-fetch-mode", "no-cors"),
        ("sec-fetch-dest", "image"),
        ("x-forwarded-for", "203.0.113.9"),
        ("forwarded", "for=203.0.113.9"),
        ("x-real-ip", "203.0.113.9"),
    ];
    let with_headers = |req: reqwest::RequestBuilder| {
        headers
            .iter()
            .fold(req, |req, (name, value)| req.header(*name, *value))
    };
    // Directly, the agent refuses it: the test can tell.
    let direct = with_headers(common::http_client().get(format!("{}{path}", agent.url())))
        .send()
        .await
        .unwrap();
    let direct_status = direct.status().as_u16();
    let direct_text = direct.text().await.unwrap();
    assert!(
        direct_status != 200 || !direct_text.contains("\"value\":\"two\""),
        "the agent itself accepted it: {direct_status} {direct_text}"
    );
    let through = with_headers(gw.http.get(gw.url(&format!("/jolokia/targets/two{path}"))))
        .send()
        .await
        .unwrap();
    assert_eq!(through.status(), 200);
    let text = through.text().await.unwrap();
    assert!(text.contains("\"value\":\"two\""), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_snapshot_answers_the_everyday_requests() {
    let Some((agent, gw)) = setup(Generation::V2Snapshot).await else {
        return;
    };
    let (_, version) = gw.get("/jolokia/targets/two/version").await;
    let (_, text) = direct(&agent, &json!({"type":"version"})).await;
    let mine: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        version["value"]["agent"], mine["value"]["agent"],
        "{version}"
    );
    assert_eq!(version["value"]["protocol"], "8.2");
    let (_, r) = gw
        .post(
            "/jolokia/targets/two",
            &json!([
                {"type":"read","mbean":"jmxgate.test:type=Types","attribute":"Name"},
                {"type":"search","mbean":"jmxgate.test:type=Pattern,*"},
                {"type":"exec","mbean":OPS,"operation":"echo","arguments":["hi"]},
                {"type":"list","path":"jmxgate.test"},
            ]),
        )
        .await;
    assert_eq!(r[0]["value"], "two", "{r}");
    assert_eq!(r[1]["value"].as_array().unwrap().len(), 2, "{r}");
    assert_eq!(r[2]["value"], "hi", "{r}");
    assert!(
        r[3]["value"]["type=Types"]["attr"]["Name"].is_object(),
        "{r}"
    );
}

/// `list` with `listCache=true` (what Hawtio and other 8.x clients send)
/// answers `{"domains":…,"cache":…}`; under roles the gateway filters that
/// shape: hidden MBeans go, and the cache entries only they named.
#[tokio::test(flavor = "multi_thread")]
async fn cached_lists_are_filtered_under_roles() {
    if !Generation::V2.available() {
        return;
    }
    let agent = Agent::start_v2(Generation::V2, "two", &[]);
    let dir = tempfile::tempdir().unwrap();
    let users = common::users_file(
        dir.path(),
        &[
            ("open", "open-pw", &["open"]),
            ("narrow", "narrow-pw", &["narrow"]),
        ],
    );
    let policy = dir.path().join("narrow.xml");
    std::fs::write(
        &policy,
        "<restrict><filter><mbean>java.lang:type=MemoryPool,*</mbean><mbean>jmxgate.test:type=Counter</mbean></filter></restrict>",
    )
    .unwrap();
    let gw = Gateway::start(&common::basic_auth_config(
        &users,
        &format!(
            "[[targets]]\nname = \"two\"\nurl = \"{}\"\n\n\
             [[roles]]\nname = \"open\"\ntargets = [\"two\"]\n\n\
             [[roles]]\nname = \"narrow\"\ntargets = [\"two\"]\npolicy = \"{}\"\n",
            agent.url(),
            policy.display()
        ),
    ))
    .await;
    let list = json!({"type":"list","config":{"listCache":"true"}});
    let (_, text) = direct(&agent, &list).await;
    let mine: Value = serde_json::from_str(&text).unwrap();
    let mine = &mine["value"];
    assert!(mine["cache"]["java.lang:MemoryPool"].is_object(), "{mine}");
    let through = |user: &'static str| {
        let gw = &gw;
        let list = list.clone();
        async move {
            let resp = gw
                .http
                .post(gw.url("/jolokia/targets/two"))
                .basic_auth(user, Some(format!("{user}-pw")))
                .body(list.to_string())
                .send()
                .await
                .unwrap();
            common::parse(&resp.text().await.unwrap())
        }
    };
    // A role without a policy sees the agent's own answer.
    assert_eq!(through("open").await["value"], *mine);
    // The narrow role: the agent's answer minus what its policy hides.
    let mut expected = mine.clone();
    let domains = expected["domains"].as_object_mut().unwrap();
    domains["java.lang"]
        .as_object_mut()
        .unwrap()
        .retain(|props, _| !props.contains("type=MemoryPool"));
    domains["jmxgate.test"]
        .as_object_mut()
        .unwrap()
        .remove("type=Counter");
    expected["cache"]
        .as_object_mut()
        .unwrap()
        .remove("java.lang:MemoryPool");
    let narrow = through("narrow").await;
    assert_eq!(narrow["value"], expected, "{narrow}");
    assert!(narrow["value"]["domains"]["java.lang"]["type=Memory"].is_object());
}

/// Every list option of protocol 8, alone and with `listCache`, under a
/// role whose policy hides nothing these lists show: the gateway's
/// filtered answer is the agent's own.
#[tokio::test(flavor = "multi_thread")]
async fn lists_with_every_8x_option_equal_the_agents_under_a_role() {
    if !Generation::V2.available() {
        return;
    }
    let agent = Agent::start_v2(Generation::V2, "two", &[]);
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.xml");
    std::fs::write(
        &policy,
        "<restrict><deny><mbean><name>jmxgate.nowhere:type=None</name><attribute>X</attribute></mbean></deny></restrict>",
    )
    .unwrap();
    let gw = Gateway::start(&format!(
        "[[targets]]\nname = \"two\"\nurl = \"{}\"\n\n[access]\nanonymous_role = \"r\"\n\n\
         [[roles]]\nname = \"r\"\ntargets = [\"two\"]\npolicy = \"{}\"\n",
        agent.url(),
        policy.display()
    ))
    .await;
    let mut checked = 0;
    let mut differing = Vec::new();
    for path in [None, Some("jmxgate.test"), Some("jmxgate.test/type=Types")] {
        for option in [
            None,
            Some("listKeys"),
            Some("openTypes"),
            Some("listInterfaces"),
        ] {
            for cache in [false, true] {
                for depth in [None, Some("1"), Some("2"), Some("3")] {
                    let mut config = serde_json::Map::new();
                    if let Some(o) = option {
                        config.insert(o.into(), json!("true"));
                    }
                    if cache {
                        config.insert("listCache".into(), json!("true"));
                    }
                    if let Some(d) = depth {
                        config.insert("maxDepth".into(), json!(d));
                    }
                    let mut list = json!({"type":"list","config":config});
                    if let Some(p) = path {
                        list["path"] = json!(p);
                    }
                    let (_, text) = direct(&agent, &list).await;
                    let mine: Value = serde_json::from_str(&text).unwrap();
                    let (_, through) = gw.post("/jolokia/targets/two", &list).await;
                    let same = (&through["status"], &through["value"])
                        == (&mine["status"], &mine["value"]);
                    // Known gaps (docs/compatibility.md): a list cut at the
                    // domain level below a path (2.x counts maxDepth from
                    // the root), and 2.6.0's openTypes with maxDepth, which
                    // writes the cut part as a JSON string. Under a role the
                    // gateway can't check what such a placeholder stands
                    // for: it shows nothing rather than guess.
                    let gap = (path == Some("jmxgate.test") && depth == Some("1"))
                        || (option == Some("openTypes")
                            && depth.is_some()
                            && (path.is_none() || cache));
                    if gap {
                        let nothing = through["value"] == json!({})
                            || through["value"].as_object().is_some_and(|domains| {
                                domains.values().all(|v| v == &json!({}) || v.is_string())
                            });
                        assert!(same || nothing, "{list}: {through}");
                    } else if !same {
                        differing.push(list.to_string());
                    }
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 96);
    assert!(differing.is_empty(), "answers differ for {differing:#?}");
}

/// The released 2.6.0 holds the last piece of each answer on a kept-alive
/// connection until the previous piece is acknowledged, and Linux delays
/// that acknowledgement (44 ms per answer). The gateway notices an answer
/// held back like that and acknowledges at once on that agent's
/// connections from then on (agents that don't stall are spared the
/// extra system calls); every answer stays the agent's own.
#[tokio::test(flavor = "multi_thread")]
async fn an_agent_that_stalls_on_delayed_acks_is_acknowledged_at_once() {
    if !Generation::V2.available() {
        return;
    }
    let agent = Agent::start_v2(Generation::V2, "stalls", &[]);
    let dir = tempfile::tempdir().unwrap();
    let config = common::gateway_toml(dir.path(), &common::targets_toml(&[&agent]));
    let gw = common::GatewayProcess::start(&config, "info,jmxgate::client::quick_ack=debug");
    let http = common::http_client();
    let url = format!("http://{}/jolokia/targets/stalls", gw.addr);
    // Distinct requests, one after another on kept-alive connections.
    for i in 0..40 {
        let word = format!("echo-{i}");
        let (status, answer) = common::post_json(
            &http,
            &url,
            &json!({"type":"exec","mbean":OPS,"operation":"echo","arguments":[word]}),
        )
        .await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["value"], word, "{answer}");
    }
    let port = agent
        .url()
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let line = gw
        .wait_for_line(
            "delayed acknowledgement",
            std::time::Duration::from_secs(10),
        )
        .expect("the gateway notices 2.6.0's stalled answers");
    assert!(line.contains(&format!("127.0.0.1:{port}")), "{line}");
    // And keeps answering right afterwards.
    let (_, answer) = common::post_json(
        &http,
        &url,
        &json!({"type":"exec","mbean":OPS,"operation":"echo","arguments":["after"]}),
    )
    .await;
    assert_eq!(answer["value"], "after", "{answer}");
    gw.stop();
}
