//! One request item answered by a group of agents: `target.url` as a glob
//! over target names or a label selector, against real agents, with a dead
//! target in the group, roles that reach part of it, the per-role limit, and
//! targets asked concurrently.

use crate::common;

use common::{Agent, Gateway};
use serde_json::{json, Value};

const TYPES: &str = "jmxgate.test:type=Types";

/// An answer's field names, sorted.
fn keys(v: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    keys
}

fn name_read(selector: &str) -> Value {
    json!({"type":"read","mbean":TYPES,"attribute":"Name","target":{"url":selector}})
}

/// alpha and beta in prod, gamma in dev, and a dead prod target.
fn fleet(agents: &[Agent; 3], dead: u16) -> String {
    let [alpha, beta, gamma] = agents;
    format!(
        "[[targets]]\nname = \"alpha\"\nurl = \"{}\"\nlabels = {{ env = \"prod\", app = \"orders\" }}\n\
         [[targets]]\nname = \"beta\"\nurl = \"{}\"\nlabels = {{ env = \"prod\", app = \"billing\" }}\n\
         [[targets]]\nname = \"gamma\"\nurl = \"{}\"\nlabels = {{ env = \"dev\", app = \"orders\" }}\n\
         [[targets]]\nname = \"zz-dead\"\nurl = \"http://127.0.0.1:{dead}/jolokia\"\nlabels = {{ env = \"prod\", app = \"gone\" }}\n\
         connect_timeout = \"500ms\"\n",
        alpha.url(),
        beta.url(),
        gamma.url()
    )
}

#[tokio::test]
async fn globs_and_label_selectors_fan_out_keyed_by_target() {
    let agents = common::shared_agents();
    let gw = Gateway::start(&fleet(agents, common::dead_port())).await;

    let (_, r) = gw.post("/jolokia", &name_read("[a-g]*")).await;
    // `[` is no glob syntax: a name with brackets is no target.
    assert_eq!(r["status"], 404, "{r}");

    let (_, r) = gw.post("/jolokia", &name_read("?e*a")).await;
    assert_eq!(r["status"], 200, "{r}");
    assert_eq!(r["value"], json!({"beta": "beta"}));

    let (_, r) = gw.post("/jolokia", &name_read("app=orders")).await;
    assert_eq!(
        r["value"],
        json!({"alpha": "alpha", "gamma": "gamma"}),
        "{r}"
    );
    // The echoed request is the client's, selector included.
    assert_eq!(r["request"]["target"]["url"], "app=orders");

    let (_, r) = gw.post("/jolokia", &name_read("env=dev,app=orders")).await;
    assert_eq!(r["value"], json!({"gamma": "gamma"}), "{r}");

    // A malformed selector is the item's clear error; the gateway goes on.
    let (status, r) = gw
        .post(
            "/jolokia",
            &json!([name_read("env=,app=orders"), name_read("beta")]),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(r[0]["status"], 400, "{r}");
    assert_eq!(r[0]["error_type"], "jmxgate.BadSelector");
    assert_eq!(
        r[0]["error"],
        "Target selector \"env=,app=orders\": a label selector is key=value[,key=value…]",
        "{r}"
    );
    assert_eq!(r[1]["value"], "beta");

    let (_, r) = gw.post("/jolokia", &name_read("env=staging")).await;
    assert_eq!(r["status"], 404, "{r}");
    assert_eq!(r["error_type"], "jmxgate.UnknownTarget");

    // search and list across targets, keyed the same way.
    let (_, r) = gw
        .post(
            "/jolokia",
            &json!({"type":"search","mbean":"jmxgate.test:type=Pattern,*","target":{"url":"app=orders"}}),
        )
        .await;
    assert_eq!(r["value"]["alpha"].as_array().unwrap().len(), 2, "{r}");
    assert_eq!(r["value"]["gamma"].as_array().unwrap().len(), 2, "{r}");
    let (_, r) = gw
        .post(
            "/jolokia",
            &json!({"type":"list","path":"jmxgate.test/type=Counter","target":{"url":"app=orders"}}),
        )
        .await;
    assert!(r["value"]["alpha"]["attr"]["Reads"].is_object(), "{r}");
    assert!(r["value"]["gamma"]["attr"]["Reads"].is_object(), "{r}");

    // A bulk mixes single and multi-target items and keeps their order.
    let (_, r) = gw
        .post(
            "/jolokia",
            &json!([
                name_read("gamma"),
                name_read("app=orders"),
                {"type":"version"},
                name_read("env=prod,app=billing"),
            ]),
        )
        .await;
    assert_eq!(r[0]["value"], "gamma");
    assert_eq!(r[1]["value"], json!({"alpha": "alpha", "gamma": "gamma"}));
    assert_eq!(r[2]["value"]["protocol"], "8.2");
    assert_eq!(r[3]["value"], json!({"beta": "beta"}));
}

#[tokio::test]
async fn a_dead_target_fails_the_item_unless_errors_are_ignored() {
    let agents = common::shared_agents();
    let gw = Gateway::start(&fleet(agents, common::dead_port())).await;

    let (_, r) = gw.post("/jolokia", &name_read("env=prod")).await;
    assert_eq!(r["status"], 502, "{r}");
    assert_eq!(r["error_type"], "jmxgate.AgentUnreachable");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .starts_with("Target \"zz-dead\""),
        "{r}"
    );
    // The failed target's error and the echo, nothing of the others (the
    // shape the README shows).
    assert_eq!(
        keys(&r),
        ["error", "error_type", "request", "status"],
        "{r}"
    );
    assert_eq!(r["request"]["target"]["url"], "env=prod");

    let mut ignoring = name_read("env=prod");
    ignoring["config"] = json!({"ignoreErrors": true});
    let (_, r) = gw.post("/jolokia", &ignoring).await;
    assert_eq!(r["status"], 200, "{r}");
    assert_eq!(r["value"]["alpha"], "alpha");
    assert_eq!(r["value"]["beta"], "beta");
    assert_eq!(r["value"]["zz-dead"]["status"], 502);
    assert_eq!(
        r["value"]["zz-dead"]["error_type"],
        "jmxgate.AgentUnreachable"
    );
    assert_eq!(
        keys(&r["value"]["zz-dead"]),
        ["error", "error_type", "status"],
        "{r}"
    );
    assert_eq!(keys(&r), ["request", "status", "timestamp", "value"], "{r}");

    // Every target of the group failed: still an answer with a time.
    let mut all_failed = name_read("app=gone");
    all_failed["config"] = json!({"ignoreErrors": true});
    let (_, r) = gw.post("/jolokia", &all_failed).await;
    assert_eq!(r["status"], 200, "{r}");
    // 502, or 503 once its breaker has opened.
    assert!(r["value"]["zz-dead"]["error_type"].is_string(), "{r}");
    assert!(r["timestamp"].as_u64().unwrap() > 1_700_000_000, "{r}");
}

#[tokio::test]
async fn roles_see_only_their_part_of_a_group_and_have_a_limit() {
    let agents = common::shared_agents();
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("no-gamma-writes.xml");
    std::fs::write(
        &policy,
        "<restrict><commands><command>read</command></commands></restrict>",
    )
    .unwrap();
    let audit = dir.path().join("audit");
    let config = format!(
        "{}[access]\nanonymous_role = \"orders-ops\"\n\n\
         [[roles]]\nname = \"orders-ops\"\ntargets = [\"alpha\", \"beta\"]\npolicy = \"{}\"\nmax_targets_per_item = 2\n\n\
         [audit]\ndir = \"{}\"\n",
        fleet(agents, common::dead_port()),
        policy.display(),
        audit.display()
    );
    let gw = Gateway::start(&config).await;

    // "*" matches four targets, but this role reaches two of them.
    let (_, r) = gw.post("/jolokia", &name_read("*")).await;
    assert_eq!(r["value"], json!({"alpha": "alpha", "beta": "beta"}), "{r}");
    // The policy applies on every target of the group.
    let (_, r) = gw
        .post(
            "/jolokia",
            &json!({"type":"write","mbean":TYPES,"attribute":"Name","value":"x","target":{"url":"*"}}),
        )
        .await;
    assert_eq!(r["status"], 403, "{r}");
    for agent in &agents[..2] {
        let name = common::direct(
            agent,
            &json!({"type":"read","mbean":TYPES,"attribute":"Name"}),
        )
        .await;
        assert_eq!(name["value"], agent.name.as_str(), "the write never ran");
    }

    // explain shows the decision for each target of the group.
    let (_, e) = gw.post("/jmxgate/explain", &name_read("*")).await;
    assert_eq!(e["decision"], "allow", "{e}");
    let per_target: Vec<(&str, &str)> = e["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["target"].as_str().unwrap(),
                t["decision"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(per_target, vec![("alpha", "allow"), ("beta", "allow")]);
    let (_, e) = gw
        .post(
            "/jmxgate/explain",
            &json!({"type":"write","mbean":TYPES,"attribute":"Name","value":"x","target":{"url":"*"}}),
        )
        .await;
    assert_eq!(e["decision"], "deny", "{e}");
    assert_eq!(e["targets"][0]["status"], 403, "{e}");

    // A role limit below the group's size refuses the item.
    let limited = config.replace("max_targets_per_item = 2", "max_targets_per_item = 1");
    let limited = limited.replace(
        &audit.display().to_string(),
        &dir.path().join("audit2").display().to_string(),
    );
    let gw1 = Gateway::start(&limited).await;
    let (_, r) = gw1.post("/jolokia", &name_read("*")).await;
    assert_eq!(r["status"], 400, "{r}");
    assert_eq!(r["error_type"], "jmxgate.TooManyTargets");
    assert_eq!(
        r["error"],
        "Target selector \"*\" matches 2 targets; one item may reach at most 1 \
         (max_targets_per_item); narrow the selector or split the request",
        "{r}"
    );
    let (_, r) = gw1.post("/jolokia", &name_read("a*")).await;
    assert_eq!(r["value"], json!({"alpha": "alpha"}), "{r}");

    // The audit log has one record per target of a fan-out.
    drop(gw1);
    let log = gw.gateway.audit().unwrap();
    log.close().await.unwrap();
    let mut records: Vec<Value> = Vec::new();
    for entry in std::fs::read_dir(&audit).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        records.extend(
            text.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap()),
        );
    }
    let reads: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "item" && r["type"] == "read")
        .collect();
    let mut targets: Vec<&str> = reads
        .iter()
        .map(|r| r["target"].as_str().unwrap())
        .collect();
    targets.sort();
    assert_eq!(targets, vec!["alpha", "beta"], "{reads:?}");
    let writes: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "item" && r["type"] == "write")
        .collect();
    assert_eq!(writes.len(), 2, "{writes:?}");
    assert!(
        writes.iter().all(|w| w["decision"] == "denied"),
        "{writes:?}"
    );
}

#[tokio::test]
async fn a_role_without_a_limit_has_the_server_default() {
    let agents = common::shared_agents();
    let dir = tempfile::tempdir().unwrap();
    let users = common::users_file(
        dir.path(),
        &[
            ("w", "pw", &["wide"]),
            ("n", "pw", &["narrow"]),
            ("both", "pw", &["wide", "narrow"]),
        ],
    );
    // Server default 3; "wide" sets no limit of its own, "narrow" sets 1.
    let config = common::basic_auth_config(
        &users,
        &format!(
            "max_targets_per_item = 3\n{}\
             [[roles]]\nname = \"wide\"\ntargets = [\"*\"]\n\n\
             [[roles]]\nname = \"narrow\"\ntargets = [\"*\"]\nmax_targets_per_item = 1\n",
            fleet(agents, common::dead_port())
        ),
    );
    let gw = Gateway::start(&config).await;
    let post_as = |user: &'static str, body: Value| {
        let request = gw
            .http
            .post(gw.url("/jolokia"))
            .basic_auth(user, Some("pw"))
            .header("content-type", "application/json")
            .body(body.to_string());
        async move {
            let text = request.send().await.unwrap().text().await.unwrap();
            serde_json::from_str::<Value>(&text).unwrap()
        }
    };
    let too_many = |r: &Value, matches: usize, limit: usize| {
        assert_eq!(r["status"], 400, "{r}");
        assert_eq!(r["error_type"], "jmxgate.TooManyTargets", "{r}");
        let error = r["error"].as_str().unwrap();
        assert!(
            error.contains(&format!("matches {matches} targets"))
                && error.contains(&format!("at most {limit} ")),
            "{r}"
        );
    };

    // No role of the caller sets a limit: server.max_targets_per_item.
    too_many(&post_as("w", name_read("*")).await, 4, 3);
    let r = post_as("w", name_read("app=orders")).await;
    assert_eq!(
        r["value"],
        json!({"alpha": "alpha", "gamma": "gamma"}),
        "{r}"
    );

    // The role's own limit, alone.
    too_many(&post_as("n", name_read("app=orders")).await, 2, 1);

    // Both roles: the one without a limit counts as the server's 3, which
    // is larger than "narrow"'s 1.
    let r = post_as("both", name_read("app=orders")).await;
    assert_eq!(
        r["value"],
        json!({"alpha": "alpha", "gamma": "gamma"}),
        "{r}"
    );
    too_many(&post_as("both", name_read("*")).await, 4, 3);
}

#[tokio::test]
async fn a_group_is_asked_concurrently() {
    let agents = common::shared_agents();
    let gw = Gateway::start(&fleet(agents, common::dead_port())).await;
    let sleep = |millis: u64| {
        json!({"type":"exec","mbean":"jmxgate.test:type=Operations","operation":"sleep",
               "arguments":[millis],"target":{"url":"app=orders"}})
    };
    // Warm both agents' exec path first, so the timing below is the sleep.
    let (_, r) = gw.post("/jolokia", &sleep(1)).await;
    assert_eq!(r["value"], json!({"alpha": 1, "gamma": 1}), "{r}");

    // Each of the two targets sleeps 1.5 s: one after the other would be
    // 3 s or more, concurrently about 1.5 s.
    let started = std::time::Instant::now();
    let (_, r) = gw.post("/jolokia", &sleep(1500)).await;
    let took = started.elapsed();
    assert_eq!(r["value"], json!({"alpha": 1500, "gamma": 1500}), "{r}");
    assert!(took >= std::time::Duration::from_millis(1500), "{took:?}");
    assert!(
        took < std::time::Duration::from_millis(2900),
        "the group's targets were not asked concurrently: took {took:?}"
    );
}

/// One role per tenant by a glob in a label value (`namespace=shop-*`, as
/// a role per Kubernetes namespace prefix), and the same glob as a
/// request's selector: only the tenant's targets answer, with their
/// agents' own values.
#[tokio::test]
async fn a_glob_in_a_label_value_scopes_a_tenant() {
    let [alpha, beta, gamma] = common::shared_agents();
    let config = format!(
        "[[targets]]\nname = \"alpha\"\nurl = \"{}\"\nlabels = {{ namespace = \"shop-eu\" }}\n\
         [[targets]]\nname = \"beta\"\nurl = \"{}\"\nlabels = {{ namespace = \"shop-us\" }}\n\
         [[targets]]\nname = \"gamma\"\nurl = \"{}\"\nlabels = {{ namespace = \"pay\" }}\n\
         [access]\nanonymous_role = \"shop\"\n\n\
         [[roles]]\nname = \"shop\"\ntargets = [\"namespace=shop-*\"]\n",
        alpha.url(),
        beta.url(),
        gamma.url()
    );
    let gw = Gateway::start(&config).await;
    let own = |agent: &'static Agent| async move {
        common::direct(
            agent,
            &json!({"type":"read","mbean":TYPES,"attribute":"Name"}),
        )
        .await["value"]
            .clone()
    };

    let (_, r) = gw.post("/jolokia", &name_read("*")).await;
    assert_eq!(
        r["value"],
        json!({"alpha": own(alpha).await, "beta": own(beta).await}),
        "{r}"
    );
    let (_, r) = gw.post("/jolokia", &name_read("namespace=shop-u?")).await;
    assert_eq!(r["value"], json!({"beta": own(beta).await}), "{r}");
    // Another tenant's target is as unknown as one that doesn't exist.
    for hidden in ["gamma", "namespace=pay", "namespace=p*"] {
        let (_, r) = gw.post("/jolokia", &name_read(hidden)).await;
        assert_eq!(r["status"], 404, "{hidden}: {r}");
        assert_eq!(r["error_type"], "jmxgate.UnknownTarget", "{hidden}: {r}");
    }
}

/// A reload while a fan-out is under way: the request keeps the grant it
/// was authorized with (its search answers filtered by the old policy),
/// and the next request gets the new one.
#[tokio::test(flavor = "multi_thread")]
async fn a_reload_mid_fan_out_keeps_that_requests_grant() {
    let (a, b) = (Agent::start("grant-a"), Agent::start("grant-b"));
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("p.xml");
    std::fs::write(&policy, "<restrict></restrict>").unwrap();
    let config_path = dir.path().join("gateway.toml");
    std::fs::write(
        &config_path,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\
             [[targets]]\nname = \"grant-a\"\nurl = \"{}\"\nlabels = {{ app = \"orders\" }}\n\
             [[targets]]\nname = \"grant-b\"\nurl = \"{}\"\nlabels = {{ app = \"orders\" }}\n\
             [access]\nanonymous_role = \"t\"\n\
             [[roles]]\nname = \"t\"\ntargets = [\"*\"]\npolicy = \"p.xml\"\n",
            a.url(),
            b.url()
        ),
    )
    .unwrap();
    let gw = Gateway::start_from_file(&config_path).await;
    let invocations = |agent: &Agent| {
        let agent_url = agent.url();
        async move {
            let r = common::post_json(
                &common::http_client(),
                &agent_url,
                &json!({"type":"read","mbean":"jmxgate.test:type=Counter","attribute":"Invocations"}),
            )
            .await
            .1;
            r["value"].as_i64().unwrap_or_else(|| panic!("{r}"))
        }
    };
    let before = (invocations(&a).await, invocations(&b).await);
    let search = json!({"type":"search","mbean":"jmxgate.test:*","target":{"url":"app=orders"}});
    let body = json!([
        {"type":"exec","mbean":"jmxgate.test:type=Operations","operation":"sleep",
         "arguments":[4000],"target":{"url":"app=orders"}},
        search,
    ]);
    let url = gw.url("/jolokia");
    let in_flight =
        tokio::spawn(async move { common::post_json(&common::http_client(), &url, &body).await });
    // Both agents are sleeping: the request was authorized and sent.
    common::eventually(
        "both targets running the fan-out's exec",
        std::time::Duration::from_secs(60),
        || async {
            let now = (invocations(&a).await, invocations(&b).await);
            if now.0 > before.0 && now.1 > before.1 {
                Ok(())
            } else {
                Err(format!("invocations {before:?} -> {now:?}"))
            }
        },
    )
    .await;
    std::fs::write(
        &policy,
        "<restrict><filter><mbean>jmxgate.test:type=Counter</mbean></filter></restrict>",
    )
    .unwrap();
    jmxgate::reload::reload_access(&gw.gateway, &config_path).unwrap();

    let (status, r) = in_flight.await.unwrap();
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        r[0]["value"],
        json!({"grant-a": 4000, "grant-b": 4000}),
        "{r}"
    );
    let counter = json!("jmxgate.test:type=Counter");
    for target in ["grant-a", "grant-b"] {
        let found = r[1]["value"][target]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"));
        assert!(
            found.contains(&counter),
            "old grant: Counter visible on {target}: {r}"
        );
    }
    let (_, after) = gw.post("/jolokia", &search).await;
    for target in ["grant-a", "grant-b"] {
        let found = after["value"][target]
            .as_array()
            .unwrap_or_else(|| panic!("{after}"));
        assert!(
            !found.is_empty() && !found.contains(&counter),
            "new grant: {after}"
        );
    }
}
