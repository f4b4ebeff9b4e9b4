//! Roles and restrictor policies through the gateway, against real agents.
//! Every denial is also checked on the agent itself: a denied call must
//! not happen there (the launcher's Counter MBean counts invocations and
//! attribute reads).

use crate::common;

use std::time::Duration;

use common::{direct, targets_toml, Agent, Gateway};
use serde_json::{json, Value};

const T: &str = "jmxgate.test:type=Types";
const OPS: &str = "jmxgate.test:type=Operations";

/// Writes policies and builds a gateway config with roles around them.
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        Setup {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn policy(&self, name: &str, body: &str) -> String {
        let path = self.dir.path().join(format!("{name}.xml"));
        std::fs::write(
            &path,
            format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<restrict>\n{body}\n</restrict>\n"
            ),
        )
        .unwrap();
        path.display().to_string()
    }
}

/// An agent of the generation under test whose own restrictor reads the
/// policy file at `policy`: the reference for what Jolokia decides.
fn restricted_by(name: &str, policy: &str) -> Agent {
    match common::Generation::under_test() {
        common::Generation::V1 => Agent::start_with(name, &["--policy", policy]),
        g => Agent::start_v2(g, name, &[&format!("policyLocation=file://{policy}")]),
    }
}

/// A gateway whose anonymous callers hold one role reaching `targets`
/// under the policy `body`.
async fn gateway_with(setup: &Setup, agents: &[&Agent], targets: &str, body: &str) -> Gateway {
    let policy = setup.policy("role", body);
    let config = format!(
        "{}[access]\nanonymous_role = \"tenant\"\n\n[[roles]]\nname = \"tenant\"\ntargets = {targets}\npolicy = \"{policy}\"\n",
        targets_toml(agents)
    );
    Gateway::start(&config).await
}

async fn counter(agent: &Agent, attribute: &str) -> i64 {
    let r = direct(
        agent,
        &json!({"type":"read","mbean":"jmxgate.test:type=Counter","attribute":attribute}),
    )
    .await;
    r["value"]
        .as_i64()
        .unwrap_or_else(|| panic!("counter: {r}"))
}

fn error(r: &Value) -> &str {
    r["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error in {r}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn roles_reach_only_their_targets() {
    let (a, b) = (Agent::start("a1"), Agent::start("b1"));
    let setup = Setup::new();
    let gw = gateway_with(&setup, &[&a, &b], "[\"a*\"]", "").await;
    let read = |t: &str| json!({"type":"read","mbean":T,"attribute":"Name","target":{"url":t}});
    let (_, r) = gw.post("/jolokia", &json!([read("a1"), read("b1")])).await;
    assert_eq!(r[0]["value"], "a1", "{}", r[0]);
    // A target the roles don't reach is answered as one that doesn't exist.
    assert_eq!(r[1]["status"], 404, "{}", r[1]);
    assert_eq!(r[1]["error_type"], "jmxgate.UnknownTarget");
    assert!(
        error(&r[1]).contains("No target \"b1\" that you may reach"),
        "{}",
        r[1]
    );
    let (status, r) = gw.get("/jolokia/targets/b1/version").await;
    assert_eq!((status, &r["status"]), (404, &json!(404)), "{r}");
}

#[tokio::test(flavor = "multi_thread")]
async fn label_selectors_and_anonymous_without_role() {
    let a = Agent::start("lab");
    let setup = Setup::new();
    let policy = setup.policy("p", "");
    let config = format!(
        "[[targets]]\nname = \"lab\"\nurl = \"{}\"\nlabels = {{ env = \"prod\", app = \"x\" }}\n\n\
         [[roles]]\nname = \"prod\"\ntargets = [\"env=prod,app=x\"]\npolicy = \"{policy}\"\n",
        a.url()
    );
    // Roles exist but anonymous callers hold none.
    let gw = Gateway::start(&config).await;
    let (_, r) = gw.get("/jolokia/targets/lab/version").await;
    assert_eq!(r["status"], 403, "{r}");
    assert!(error(&r).contains("anonymous has no role"), "{r}");
    let gw = Gateway::start(&format!("{config}\n[access]\nanonymous_role = \"prod\"\n")).await;
    let (_, r) = gw
        .get("/jolokia/targets/lab/read/jmxgate.test:type=Types/Name")
        .await;
    assert_eq!(r["value"], "lab", "{r}");
}

#[tokio::test(flavor = "multi_thread")]
async fn denied_operations_never_run_even_with_a_signature() {
    let a = Agent::start("ops1");
    let setup = Setup::new();
    let gw = gateway_with(
        &setup,
        &[&a],
        "[\"ops1\"]",
        r#"<deny><mbean><name>jmxgate.test:type=Operations</name><operation>reset</operation><operation>fa*</operation></mbean></deny>"#,
    )
    .await;
    let before = counter(&a, "Invocations").await;
    let exec = |op: &str| json!({"type":"exec","mbean":OPS,"operation":op,"target":{"url":"ops1"}});
    let (_, r) = gw
        .post(
            "/jolokia",
            &json!([
                exec("reset"),
                exec("reset()"),
                exec("fail()"),
                exec("noArgs")
            ]),
        )
        .await;
    for i in 0..3 {
        assert_eq!(r[i]["status"], 403, "{}", r[i]);
    }
    assert_eq!(
        error(&r[1]),
        "Operation reset() forbidden for MBean jmxgate.test:type=Operations"
    );
    assert_eq!(r[3]["value"], "ok");
    // Only noArgs ran.
    assert_eq!(counter(&a, "Invocations").await, before + 1);
    // GET with a signature is the same request.
    let (_, r) = gw
        .get("/jolokia/targets/ops1/exec/jmxgate.test:type=Operations/reset()")
        .await;
    assert_eq!(r["status"], 403);
    assert_eq!(counter(&a, "Invocations").await, before + 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn denied_attributes_are_not_read_or_written() {
    let a = Agent::start("attrs");
    let setup = Setup::new();
    let gw = gateway_with(
        &setup,
        &[&a],
        "[\"attrs\"]",
        r#"<deny>
             <mbean><name>jmxgate.test:type=Types</name><attribute>Double</attribute><attribute mode="read">Special</attribute></mbean>
           </deny>"#,
    )
    .await;
    gw.wait_until_probed().await;
    let reads = counter(&a, "Reads").await;
    let (_, r) = gw
        .get("/jolokia/targets/attrs/read/jmxgate.test:type=Types/Double")
        .await;
    assert_eq!(r["status"], 403);
    assert_eq!(
        error(&r),
        "Reading attribute Double is forbidden for MBean jmxgate.test:type=Types"
    );
    let (_, r) = gw
        .get("/jolokia/targets/attrs/read/jmxgate.test:type=Types/Double,LongMax")
        .await;
    assert_eq!(r["status"], 403, "{r}");
    assert_eq!(
        counter(&a, "Reads").await,
        reads,
        "a denied read reached the MBean"
    );

    // With ignoreErrors the allowed part runs and the denied one is an error value.
    let (_, r) = gw
        .get("/jolokia/targets/attrs/read/jmxgate.test:type=Types/Double,LongMax?ignoreErrors=true")
        .await;
    assert_eq!(r["status"], 200, "{r}");
    assert_eq!(r["value"]["LongMax"], json!(9223372036854775807i64));
    assert_eq!(
        r["value"]["Double"],
        common::denied_attribute_value(a.generation, "Double", T),
        "{r}"
    );
    assert_eq!(counter(&a, "Reads").await, reads + 1);

    // A write to `Double` (no mode: read and write) is refused; `Special`
    // is denied for reading only.
    let invocations = counter(&a, "Invocations").await;
    let (_, r) = gw
        .post(
            "/jolokia/targets/attrs",
            &json!({"type":"write","mbean":T,"attribute":"Double","value":1}),
        )
        .await;
    assert_eq!(
        error(&r),
        "Setting attribute Double is forbidden for MBean jmxgate.test:type=Types"
    );
    assert_eq!(counter(&a, "Invocations").await, invocations);
}

/// A read of all attributes treats a denied one as an agent's own
/// restrictor does: the read is refused, or with `ignoreErrors` the
/// attribute's value is the error; only the allowed ones are read.
#[tokio::test(flavor = "multi_thread")]
async fn reading_all_attributes_reads_only_allowed_ones() {
    let a = Agent::start("all");
    let setup = Setup::new();
    let gw = gateway_with(
        &setup,
        &[&a],
        "[\"all\"]",
        r#"<deny><mbean><name>jmxgate.test:type=Types</name><attribute>Double</attribute><attribute>Nest*</attribute></mbean></deny>"#,
    )
    .await;
    gw.wait_until_probed().await;
    let unrestricted = direct(&a, &json!({"type":"read","mbean":T})).await;
    let total = unrestricted["value"].as_object().unwrap().len() as i64;
    let reads = counter(&a, "Reads").await;
    let (_, r) = gw
        .get("/jolokia/targets/all/read/jmxgate.test:type=Types")
        .await;
    assert_eq!(r["status"], 403, "{r}");
    assert!(error(&r).starts_with("Reading attribute "), "{r}");
    assert!(
        error(&r).ends_with(" is forbidden for MBean jmxgate.test:type=Types"),
        "{r}"
    );
    assert_eq!(
        counter(&a, "Reads").await,
        reads,
        "a refused read read nothing"
    );

    let (_, r) = gw
        .get("/jolokia/targets/all/read/jmxgate.test:type=Types?ignoreErrors=true")
        .await;
    assert_eq!(r["status"], 200, "{r}");
    let value = r["value"].as_object().unwrap();
    assert_eq!(value.len() as i64, total, "{r}");
    for denied in ["Double", "Nested"] {
        assert_eq!(
            value[denied],
            common::denied_attribute_value(a.generation, denied, T),
            "{r}"
        );
    }
    assert_eq!(value["LongMax"], unrestricted["value"]["LongMax"], "{r}");
    assert_eq!(value["Name"], unrestricted["value"]["Name"], "{r}");
    // Exactly the allowed attributes were read on the agent.
    assert_eq!(counter(&a, "Reads").await, reads + total - 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn pattern_reads_touch_only_allowed_pairs() {
    let a = Agent::start("pat");
    let setup = Setup::new();
    let gw = gateway_with(
        &setup,
        &[&a],
        "[\"pat\"]",
        r#"<deny><mbean><name>jmxgate.test:type=Pattern,name=b</name><attribute>Value</attribute></mbean></deny>"#,
    )
    .await;
    gw.wait_until_probed().await;
    let base = "/jolokia/targets/pat/read/jmxgate.test:type=Pattern,*";
    let (_, r) = gw.get(&format!("{base}/Value")).await;
    assert_eq!(r["status"], 403, "{r}");
    let (_, r) = gw.get(&format!("{base}/Value?ignoreErrors=true")).await;
    assert_eq!(r["status"], 200, "{r}");
    let v = r["value"].as_object().unwrap();
    let a_key = v.keys().find(|k| k.contains("name=a")).unwrap();
    let b_key = v.keys().find(|k| k.contains("name=b")).unwrap();
    assert_eq!(v[a_key]["Value"], "value-a");
    assert_eq!(
        v[b_key]["Value"],
        common::denied_attribute_value(a.generation, "Value", b_key),
        "{r}"
    );
    // All attributes: name=b's Value is denied, as if named.
    let (_, r) = gw.get(base).await;
    assert_eq!(r["status"], 403, "{r}");
    let (_, r) = gw.get(&format!("{base}?ignoreErrors=true")).await;
    assert_eq!(r["status"], 200, "{r}");
    let v = r["value"].as_object().unwrap();
    let (b_name, b) = v.iter().find(|(k, _)| k.contains("name=b")).unwrap();
    assert_eq!(b["Level"], 2, "{r}");
    assert_eq!(
        b["Value"],
        common::denied_attribute_value(a.generation, "Value", b_name),
        "{r}"
    );
    let a_val = v.iter().find(|(k, _)| k.contains("name=a")).unwrap().1;
    assert_eq!(a_val["Value"], "value-a");
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_and_execs_on_patterns_need_every_match_allowed() {
    let a = Agent::start("wpat");
    let setup = Setup::new();
    let gw = gateway_with(
        &setup,
        &[&a],
        "[\"wpat\"]",
        r#"<deny><mbean><name>jmxgate.test:type=Pattern,name=b</name><attribute>Level</attribute></mbean>
                 <mbean><name>jmxgate.test:type=Operations</name><operation>reset</operation></mbean></deny>"#,
    )
    .await;
    let invocations = counter(&a, "Invocations").await;
    let (_, r) = gw
        .post(
            "/jolokia/targets/wpat",
            &json!([
                {"type":"write","mbean":"jmxgate.test:type=Pattern,*","attribute":"Level","value":9},
                {"type":"exec","mbean":"jmxgate.test:type=Op*","operation":"reset"},
                {"type":"exec","mbean":"jmxgate.test:type=Op*","operation":"noArgs"},
            ]),
        )
        .await;
    assert_eq!(r[0]["status"], 403, "{}", r[0]);
    assert!(error(&r[0]).contains("name=b"), "{}", r[0]);
    assert_eq!(r[1]["status"], 403, "{}", r[1]);
    // Allowed on every match: the agent gets it (and answers as it does
    // for patterns).
    assert_ne!(r[2]["status"], 403, "{}", r[2]);
    for (name, level) in [("a", 1), ("b", 2)] {
        let v = direct(&a, &json!({"type":"read","mbean":format!("jmxgate.test:type=Pattern,name={name}"),"attribute":"Level"})).await;
        assert_eq!(v["value"], level, "Level of {name} changed");
    }
    assert!(
        counter(&a, "Invocations").await <= invocations + 1,
        "reset ran"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn wildcards_are_anchored_globs_with_a_literal_dot() {
    let a = Agent::start("glob");
    let setup = Setup::new();
    // read is not in <commands>, so only <allow> admits reads. Jolokia
    // would read `Nam.` as a regex and allow `Name`.
    let gw = gateway_with(
        &setup,
        &[&a],
        "[\"glob\"]",
        r#"<commands><command>version</command></commands>
           <allow><mbean><name>jmxgate.test:type=Types</name><attribute>Nam.</attribute><attribute>Long*</attribute></mbean></allow>"#,
    )
    .await;
    let (_, r) = gw
        .get("/jolokia/targets/glob/read/jmxgate.test:type=Types/Name")
        .await;
    assert_eq!(r["status"], 403, "{r}");
    let (_, r) = gw
        .get("/jolokia/targets/glob/read/jmxgate.test:type=Types/LongMax")
        .await;
    assert_eq!(r["status"], 200, "{r}");
    let (_, r) = gw.get("/jolokia/targets/glob/search/*:*").await;
    assert_eq!(r["status"], 403, "search is not in <commands>: {r}");
    assert_eq!(
        error(&r),
        "Command type SEARCH not allowed due to policy used"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn version_is_subject_to_commands_and_http() {
    let a = Agent::start("ver");
    let setup = Setup::new();
    let gw = gateway_with(
        &setup,
        &[&a],
        "[\"ver\"]",
        r#"<commands><command>read</command></commands><http><method>post</method></http>"#,
    )
    .await;
    let (status, r) = gw.get("/jolokia/version").await;
    assert_eq!(status, 200);
    assert_eq!(
        error(&r),
        "HTTP method GET is not allowed according to the installed security policy"
    );
    let (_, r) = gw.post("/jolokia", &json!({"type":"version"})).await;
    assert_eq!(
        error(&r),
        "Command type VERSION not allowed due to policy used"
    );
    let (_, r) = gw
        .post("/jolokia/targets/ver", &json!({"type":"version"}))
        .await;
    assert_eq!(r["status"], 403, "{r}");
    let (_, r) = gw
        .post(
            "/jolokia/targets/ver",
            &json!({"type":"read","mbean":T,"attribute":"Name"}),
        )
        .await;
    assert_eq!(r["value"], "ver", "{r}");
}

#[tokio::test(flavor = "multi_thread")]
async fn forwarded_for_counts_only_from_trusted_proxies() {
    let a = Agent::start("fwd");
    let setup = Setup::new();
    let remote = r#"<remote><host>127.0.0.1</host><host>10.0.0.0/8</host></remote>"#;
    let read = "/jolokia/targets/fwd/read/jmxgate.test:type=Types/Name";
    let send = |gw: &Gateway, xff: Option<&str>| {
        let mut req = gw.http.get(gw.url(read));
        if let Some(x) = xff {
            req = req.header("x-forwarded-for", x);
        }
        async move {
            serde_json::from_str::<Value>(&req.send().await.unwrap().text().await.unwrap()).unwrap()
        }
    };
    // Not trusted: the header is ignored, the peer (127.0.0.1) decides.
    let gw = gateway_with(&setup, &[&a], "[\"fwd\"]", remote).await;
    assert_eq!(send(&gw, Some("203.0.113.9")).await["value"], "fwd");
    // Trusted: every hop must pass.
    let policy = setup.policy("fwdp", remote);
    let config = format!(
        "{}[access]\nanonymous_role = \"t\"\ntrusted_proxies = [\"127.0.0.1\"]\n\n[[roles]]\nname = \"t\"\ntargets = [\"*\"]\npolicy = \"{policy}\"\n",
        targets_toml(&[&a])
    );
    let gw = Gateway::start(&config).await;
    let r = send(&gw, Some("203.0.113.9")).await;
    assert_eq!(r["status"], 403, "{r}");
    assert_eq!(
        error(&r),
        "No access from client [203.0.113.9, 127.0.0.1] allowed"
    );
    assert_eq!(send(&gw, Some("10.1.2.3")).await["value"], "fwd");
    assert_eq!(send(&gw, None).await["value"], "fwd");
}

#[tokio::test(flavor = "multi_thread")]
async fn list_and_search_show_only_what_the_role_may_touch() {
    let a = Agent::start("lst");
    let setup = Setup::new();
    let gw = gateway_with(
        &setup,
        &[&a],
        "[\"lst\"]",
        r#"<commands><command>list</command><command>search</command><command>version</command></commands>
           <filter><mbean>jmxgate.test:type=Counter</mbean></filter>
           <allow>
             <mbean><name>jmxgate.test:type=Types</name><attribute>Name</attribute></mbean>
             <mbean><name>jmxgate.test:type=Counter</name><attribute>Reads</attribute></mbean>
             <mbean><name>jmxgate.test:type=Pattern,*</name><attribute>Value</attribute></mbean>
           </allow>"#,
    )
    .await;
    let (_, r) = gw.get("/jolokia/targets/lst/search/jmxgate.test:*").await;
    let mut names: Vec<String> = r["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    names.sort();
    // 1.7.1 writes ObjectNames with their keys in canonical (sorted) order;
    // 2.x keeps the order the names were given (registered) in.
    let want = if a.generation.is_v2() {
        vec![
            "jmxgate.test:type=Pattern,name=a",
            "jmxgate.test:type=Pattern,name=b",
            "jmxgate.test:type=Types",
        ]
    } else {
        vec![
            "jmxgate.test:name=a,type=Pattern",
            "jmxgate.test:name=b,type=Pattern",
            "jmxgate.test:type=Types",
        ]
    };
    assert_eq!(names, want, "{r}");
    let (_, r) = gw.get("/jolokia/targets/lst/list/jmxgate.test").await;
    let mut keys: Vec<&String> = r["value"].as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys.len(), 3, "{r}");
    assert!(
        keys.iter()
            .all(|k| !k.contains("Counter") && !k.contains("Operations")),
        "{keys:?}"
    );
    let (_, r) = gw.get("/jolokia/targets/lst/list").await;
    let domains = r["value"].as_object().unwrap();
    assert_eq!(
        domains.keys().collect::<Vec<_>>(),
        vec!["jmxgate.test"],
        "java.lang is not touchable: {r}"
    );
    let (_, r) = gw
        .get("/jolokia/targets/lst/list/jmxgate.test/type=Operations")
        .await;
    assert_eq!(r["status"], 403, "{r}");
}

#[tokio::test(flavor = "multi_thread")]
async fn cors_follows_the_policy() {
    let a = Agent::start("cors");
    let setup = Setup::new();
    let gw = gateway_with(
        &setup,
        &[&a],
        "[\"cors\"]",
        r#"<cors><allow-origin>http://good.example</allow-origin><strict-checking/></cors>"#,
    )
    .await;
    let get = |origin: &'static str| {
        gw.http
            .get(gw.url("/jolokia/targets/cors/read/jmxgate.test:type=Types/Name"))
            .header("origin", origin)
            .send()
    };
    let good = get("http://good.example").await.unwrap();
    assert_eq!(
        good.headers()["access-control-allow-origin"],
        "http://good.example"
    );
    assert!(good.text().await.unwrap().contains("\"value\":\"cors\""));
    let evil = get("http://evil.example").await.unwrap();
    assert!(evil.headers().get("access-control-allow-origin").is_none());
    let body: Value = serde_json::from_str(&evil.text().await.unwrap()).unwrap();
    assert_eq!(
        error(&body),
        "Origin http://evil.example is not allowed to call this agent"
    );
    let preflight = gw
        .http
        .request(reqwest::Method::OPTIONS, gw.url("/jolokia"))
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert!(preflight
        .headers()
        .get("access-control-allow-origin")
        .is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn explain_reports_decisions_without_touching_agents() {
    let a = Agent::start("exp");
    let setup = Setup::new();
    let gw = gateway_with(
        &setup,
        &[&a],
        "[\"exp\"]",
        r#"<deny><mbean><name>jmxgate.test:type=Operations</name><operation>reset</operation></mbean></deny>"#,
    )
    .await;
    let invocations = counter(&a, "Invocations").await;
    let (status, r) = gw
        .post(
            "/jmxgate/explain",
            &json!([
                {"type":"exec","mbean":OPS,"operation":"reset","target":{"url":"exp"}},
                {"type":"exec","mbean":OPS,"operation":"noArgs","target":{"url":"exp"}},
                {"type":"read","mbean":"jmxgate.test:*","target":{"url":"exp"}},
                {"type":"read","mbean":T,"target":{"url":"nowhere"}},
            ]),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(r[0]["decision"], "deny", "{r}");
    assert!(r[0]["rule"].as_str().unwrap().contains("reset"), "{r}");
    assert_eq!(r[1]["decision"], "allow");
    assert_eq!(r[1]["roles"], json!(["tenant"]));
    assert_eq!(r[2]["decision"], "allow");
    assert!(r[2]["plan"].as_str().unwrap().contains("resolve"), "{r}");
    assert_eq!(r[3]["decision"], "deny");
    assert_eq!(r[3]["status"], 404);
    let (_, one) = gw
        .post(
            "/jmxgate/explain?target=exp&method=GET",
            &json!({"type":"exec","mbean":OPS,"operation":"reset"}),
        )
        .await;
    assert_eq!(one["decision"], "deny", "{one}");
    assert_eq!(
        counter(&a, "Invocations").await,
        invocations,
        "explain ran an operation"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn policies_reload_atomically_and_keep_the_old_set_when_broken() {
    let a = Agent::start("rel");
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("p.xml");
    let write_policy = |ops: &str| {
        std::fs::write(
            &policy,
            format!("<restrict><deny><mbean><name>{OPS}</name><operation>{ops}</operation></mbean></deny></restrict>"),
        )
        .unwrap()
    };
    write_policy("noArgs");
    let config_path = dir.path().join("gateway.toml");
    std::fs::write(
        &config_path,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n{}[access]\nanonymous_role = \"t\"\n[[roles]]\nname = \"t\"\ntargets = [\"*\"]\npolicy = \"p.xml\"\n",
            targets_toml(&[&a])
        ),
    )
    .unwrap();
    let gw = Gateway::start_from_file(&config_path).await;
    tokio::spawn(jmxgate::reload::watch(
        gw.gateway.clone(),
        config_path.clone(),
        Duration::from_millis(100),
    ));
    let exec = "/jolokia/targets/rel/exec/jmxgate.test:type=Operations/noArgs";
    assert_eq!(gw.get(exec).await.1["status"], 403);

    write_policy("reset");
    common::eventually(
        "the changed policy is picked up",
        Duration::from_secs(60),
        || async {
            let (_, r) = gw.get(exec).await;
            if r["status"] == 200 {
                Ok(())
            } else {
                Err(r.to_string())
            }
        },
    )
    .await;

    // A broken policy is refused; the last good one stays in force.
    let failed = "jmxgate_config_reloads_total{status=\"error\"}";
    let failed_before = gw.metric(failed);
    std::fs::write(
        &policy,
        "<restrict><deny><mbean><operation>x</operation></mbean></deny>",
    )
    .unwrap();
    // Once the watcher has seen it, its reload fails and is counted.
    common::eventually(
        "the broken policy's reload is refused",
        Duration::from_secs(60),
        || async {
            match gw.metric(failed) {
                n if n > failed_before => Ok(()),
                n => Err(format!("{n} failed reloads counted, as before")),
            }
        },
    )
    .await;
    assert_eq!(gw.get(exec).await.1["status"], 200);
    let (_, r) = gw
        .get("/jolokia/targets/rel/exec/jmxgate.test:type=Operations/reset")
        .await;
    assert_eq!(r["status"], 403, "old policy still denies reset: {r}");
    let err = jmxgate::reload::reload_access(&gw.gateway, &config_path).unwrap_err();
    assert!(err.contains("p.xml"), "the error names the file: {err}");
}

/// A read of all attributes under a role answers as the agent does: a
/// write-only attribute is not read (the agent skips it), nothing fails.
#[tokio::test(flavor = "multi_thread")]
async fn reading_all_attributes_skips_write_only_ones_as_the_agent_does() {
    let a = Agent::start("wo");
    let setup = Setup::new();
    // A role with a policy that allows everything: the read is expanded.
    let gw = gateway_with(&setup, &[&a], "[\"wo\"]", "").await;
    let secretive = "jmxgate.extra:type=Secretive";
    let mine = direct(&a, &json!({"type":"read","mbean":secretive})).await;
    assert_eq!(mine["status"], 200, "{mine}");
    assert!(mine["value"].get("Password").is_none(), "{mine}");
    let (_, r) = gw
        .get(&format!("/jolokia/targets/wo/read/{secretive}"))
        .await;
    assert_eq!(r["status"], 200, "{r}");
    assert_eq!(r["value"], mine["value"], "{r}");
}

/// Hawtio's RBAC: an ACL search finds the gateway's ACL MBean, and every
/// `canInvoke` form answers what the caller's policy decides, without
/// reaching the agent (which has no such MBean).
#[tokio::test(flavor = "multi_thread")]
async fn hawtio_rbac_queries_are_answered_from_the_callers_policy() {
    let a = Agent::start("rbac");
    let setup = Setup::new();
    let gw = gateway_with(
        &setup,
        &[&a],
        "[\"rbac\"]",
        r#"<filter><mbean>jmxgate.test:type=Counter</mbean></filter>
           <deny><mbean><name>jmxgate.test:type=Operations</name><operation>reset</operation></mbean>
                 <mbean><name>jmxgate.test:type=Types</name><attribute mode="write">Name</attribute></mbean></deny>"#,
    )
    .await;
    let acl = "hawtio:type=security,area=jmx,name=JmxgateRBAC";
    let ops = "jmxgate.test:type=Operations";
    let (_, r) = gw
        .post(
            "/jolokia/targets/rbac",
            &json!([
                {"type":"search","mbean":"*:type=security,area=jmx,*"},
                {"type":"exec","mbean":acl,"operation":"canInvoke(java.lang.String)","arguments":[ops]},
                {"type":"exec","mbean":acl,"operation":"canInvoke(java.lang.String)","arguments":["jmxgate.test:type=Counter"]},
                {"type":"exec","mbean":acl,"operation":"canInvoke(java.util.Map)",
                 "arguments":[{ops:["reset()","noArgs()"]}]},
                {"type":"exec","mbean":acl,"operation":"canInvoke(java.lang.String,java.lang.String,[Ljava.lang.String;)",
                 "arguments":[T,"setName",["java.lang.String"]]},
                {"type":"exec","mbean":acl,"operation":"canInvoke(java.lang.String,java.lang.String,[Ljava.lang.String;)",
                 "arguments":[T,"setInt",["int"]]},
            ]),
        )
        .await;
    assert_eq!(r[0]["value"], json!([acl]), "{r}");
    assert_eq!(r[1]["value"], true, "{r}");
    assert_eq!(r[2]["value"], false, "hidden by <filter>: {r}");
    assert_eq!(r[3]["value"][ops]["reset()"]["CanInvoke"], false, "{r}");
    assert_eq!(r[3]["value"][ops]["noArgs()"]["CanInvoke"], true, "{r}");
    assert_eq!(r[4]["value"], false, "{r}");
    assert_eq!(r[5]["value"], true, "{r}");
    // Hawtio reads the request back from the answer.
    assert_eq!(r[1]["request"]["arguments"], json!([ops]));
    // The decisions are the real items' own.
    let (_, real) = gw
        .post(
            "/jolokia/targets/rbac",
            &json!([
                {"type":"exec","mbean":ops,"operation":"reset()"},
                {"type":"write","mbean":T,"attribute":"Name","value":"x"},
            ]),
        )
        .await;
    assert_eq!(real[0]["status"], 403, "{real}");
    assert_eq!(real[1]["status"], 403, "{real}");
}

/// An overloaded operation allowed by its signature under a policy that
/// does not list `exec`: the gateway answers as a real agent with the same
/// policy file answers, for the allowed overload, another one, and the
/// bare name.
#[tokio::test(flavor = "multi_thread")]
async fn an_overload_allowed_by_its_signature_runs_as_on_the_agent() {
    let setup = Setup::new();
    let body = "<commands><command>read</command></commands>\
                <allow><mbean><name>jmxgate.test:type=Operations</name>\
                <operation>add(int,int)</operation></mbean></allow>";
    let policy = setup.policy("agent-side", body);
    // The same file on the agent itself: its restrictor is the reference.
    let restricted = restricted_by("ovl-ref", &policy);
    let open = Agent::start("ovl");
    let gw = gateway_with(&setup, &[&open], "[\"*\"]", body).await;
    for (operation, arguments) in [
        ("add(int,int)", json!([40, 2])),
        ("add(long,long,long)", json!([1, 2, 3])),
        ("add", json!([40, 2])),
    ] {
        let item = json!({"type":"exec","mbean":OPS,"operation":operation,"arguments":arguments});
        // 2.x refuses a bare overloaded name with a plain-text 400.
        let text = common::http_client()
            .post(restricted.url())
            .header("content-type", "application/json")
            .body(item.to_string())
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let reference: Value = serde_json::from_str(&text).unwrap_or(json!({"status": 400}));
        let mut via = item.clone();
        via["target"] = json!({"url": "ovl"});
        let (_, through) = gw.post("/jolokia", &via).await;
        let allowed = |r: &Value| r["status"] == 200;
        assert_eq!(
            allowed(&through),
            allowed(&reference),
            "{operation}: gateway {through}, agent {reference}"
        );
        if allowed(&reference) {
            assert_eq!(through["value"], reference["value"], "{operation}");
        }
    }
    // The allowed overload did run.
    let item = json!({"type":"exec","mbean":OPS,"operation":"add(int,int)","arguments":[40,2],"target":{"url":"ovl"}});
    assert_eq!(gw.post("/jolokia", &item).await.1["value"], 42);
}

/// The shipped `policies/operator.xml`, on a real agent and through the
/// gateway: `gc` and Hawtio's `gc()` (and `setLoggerLevel` with its
/// signature) run on both or on neither, as the agent's own restrictor
/// decides, and the gateway's `canInvoke` answers what the exec gets,
/// so Hawtio unlocks what the policy means to allow.
#[tokio::test(flavor = "multi_thread")]
async fn the_shipped_operator_policy_runs_gc_as_the_agent_does_and_can_invoke_agrees() {
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/operator.xml");
    let text = std::fs::read_to_string(&shipped).unwrap();
    let body = &text
        [text.find("<restrict>").unwrap() + "<restrict>".len()..text.rfind("</restrict>").unwrap()];
    let setup = Setup::new();
    let policy = setup.policy("operator", body);
    let restricted = restricted_by("op-ref", &policy);
    let open = Agent::start("op");
    let gw = gateway_with(&setup, &[&open], "[\"*\"]", body).await;
    let logging = "java.util.logging:type=Logging";
    let items = [
        json!({"type":"exec","mbean":"java.lang:type=Memory","operation":"gc"}),
        json!({"type":"exec","mbean":"java.lang:type=Memory","operation":"gc()"}),
        json!({"type":"exec","mbean":logging,"operation":"setLoggerLevel(java.lang.String,java.lang.String)","arguments":["global","INFO"]}),
        json!({"type":"exec","mbean":"java.lang:type=Threading","operation":"resetPeakThreadCount()"}),
    ];
    for item in &items {
        let reference = direct(&restricted, item).await;
        let mut via = item.clone();
        via["target"] = json!({"url": "op"});
        let (_, through) = gw.post("/jolokia", &via).await;
        // Refused by policy: 403 on both, whatever else goes wrong.
        assert_eq!(
            through["status"] == 403,
            reference["status"] == 403,
            "{item}: gateway {through}, agent {reference}"
        );
    }
    // What the policy means to allow, it allows (on the agent too).
    for item in &items[..3] {
        assert_eq!(direct(&restricted, item).await["status"], 200, "{item}");
    }
    let acl = "hawtio:type=security,area=jmx,name=JmxgateRBAC";
    let (_, r) = gw
        .post(
            "/jolokia/targets/op",
            &json!({"type":"exec","mbean":acl,"operation":"canInvoke(java.util.Map)",
                    "arguments":[{"java.lang:type=Memory":["gc()","gc"],
                                  logging:["setLoggerLevel(java.lang.String,java.lang.String)"],
                                  "java.lang:type=Threading":["resetPeakThreadCount()"]}]}),
        )
        .await;
    let v = &r["value"];
    assert_eq!(v["java.lang:type=Memory"]["gc()"]["CanInvoke"], true, "{r}");
    assert_eq!(v["java.lang:type=Memory"]["gc"]["CanInvoke"], true, "{r}");
    assert_eq!(
        v[logging]["setLoggerLevel(java.lang.String,java.lang.String)"]["CanInvoke"], true,
        "{r}"
    );
    assert_eq!(
        v["java.lang:type=Threading"]["resetPeakThreadCount()"]["CanInvoke"], false,
        "{r}"
    );
}
