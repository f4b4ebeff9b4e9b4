//! The fleet console, over HTTP against a real agent and stand-in
//! targets: it asks a browser for Basic credentials, shows each caller
//! only the targets their roles reach, counts them up and down per group,
//! pages, escapes what targets carry, forbids framing and scripts, and is
//! audited; an agent's markup (a hostile agent's `<script>` MBean name and
//! `<img onerror>` value) stays text. Browser-driven tests are in
//! `tests/console/console_browser.rs`.

use crate::common;

use std::time::Duration;

use common::{audit_records, basic_auth_config, eventually, users_file, Agent, Gateway};

const HOSTILE: &str = "<script>alert(1)</script>";

/// 120 stand-in targets that answer nothing (down once probed), in two
/// namespaces, and one real agent in `shop`.
fn config(dir: &std::path::Path, agent: &Agent) -> String {
    let users = users_file(
        dir,
        &[
            ("ops", "ops-pw", &["all"]),
            ("shop-team", "shop-pw", &["shop"]),
        ],
    );
    let mut targets = format!(
        "[[targets]]\nname = \"real-1\"\nurl = \"{}\"\nlabels = {{ namespace = \"shop\", note = \"{HOSTILE}\" }}\n",
        agent.url()
    );
    let dead = common::dead_port();
    for i in 0..120 {
        let ns = if i % 2 == 0 { "shop" } else { "billing" };
        targets.push_str(&format!(
            "[[targets]]\nname = \"standin-{i:03}\"\nurl = \"http://127.0.0.1:{dead}/jolokia\"\n\
             labels = {{ namespace = \"{ns}\" }}\n"
        ));
    }
    basic_auth_config(
        &users,
        &format!(
            "{targets}\n[health]\nprobe_interval = \"1s\"\n\n[[roles]]\nname = \"all\"\ntargets = [\"*\"]\n\n\
             [[roles]]\nname = \"shop\"\ntargets = [\"namespace=shop\"]\npolicy = \"{}\"\n\n\
             [audit]\ndir = \"{}\"\n",
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("policies/read-only.xml")
                .display(),
            dir.join("audit").display()
        ),
    )
}

async fn page(gw: &Gateway, user: &str, password: &str, path: &str) -> reqwest::Response {
    gw.http
        .get(gw.url(path))
        .basic_auth(user, Some(password))
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_overview_shows_each_caller_what_their_roles_reach() {
    let agent = Agent::start("console-a");
    let dir = tempfile::tempdir().unwrap();
    let gw = Gateway::start(&config(dir.path(), &agent)).await;

    // A browser is asked for Basic credentials.
    let r = gw.http.get(gw.url("/console/")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert!(
        r.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Basic"),
        "{:?}",
        r.headers()
    );

    // Probed: the real agent up, the stand-ins down.
    let text = eventually("every target probed", Duration::from_secs(90), || async {
        let r = page(&gw, "ops", "ops-pw", "/console/?group=namespace&limit=1000").await;
        let text = r.text().await.unwrap();
        text.contains("1 up</span> · <span class=\"down\">120 down")
            .then_some(text.clone())
            .ok_or(text)
    })
    .await;
    // Counted per group.
    for (group, up, down) in [("shop", 1, 60), ("billing", 0, 60)] {
        let row = format!("{group}</a></td><td>{up}</td><td>{down}</td>");
        assert!(text.contains(&row), "{row} in {text}");
    }
    // What a target carries is text, never markup.
    assert!(!text.contains(HOSTILE), "{text}");
    assert!(
        text.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{text}"
    );

    // The shop team sees shop targets only, and the counts are theirs.
    let r = page(
        &gw,
        "shop-team",
        "shop-pw",
        "/console/?group=namespace&limit=1000",
    )
    .await;
    let headers = r.headers().clone();
    let text = r.text().await.unwrap();
    assert!(
        text.contains("standin-000") && !text.contains("standin-001"),
        "{text}"
    );
    assert!(
        !text.contains("billing"),
        "another team's group shown: {text}"
    );
    assert!(
        text.contains("1 up</span> · <span class=\"down\">60 down"),
        "{text}"
    );
    // No framing, no scripts, nothing cached.
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("frame-ancestors 'none'") && csp.contains("default-src 'none'"));
    assert_eq!(headers["x-frame-options"], "DENY");
    assert_eq!(headers["cache-control"], "no-store");
    assert!(!text.contains("<script"), "{text}");

    // Pages of 50: the next link leads on, and the pages cover all.
    let mut path = "/console/?limit=50".to_string();
    let mut seen = 0;
    for _ in 0..10 {
        let text = page(&gw, "ops", "ops-pw", &path)
            .await
            .text()
            .await
            .unwrap();
        seen += text.matches("<td class=\"name\">").count();
        let Some(at) = text.find("class=\"next\" href=\"") else {
            break;
        };
        let href = &text[at + "class=\"next\" href=\"".len()..];
        path = href[..href.find('"').unwrap()].replace("&amp;", "&");
    }
    assert_eq!(seen, 121);

    // A filter that names no target, a bad selector: said, not guessed.
    let r = page(&gw, "ops", "ops-pw", "/console/?selector=namespace%3D").await;
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("selector"));
    let r = page(&gw, "shop-team", "shop-pw", "/console/?after=standin-001").await;
    assert_eq!(r.status(), 400, "another team's target as a page start");

    // Reading only; audited as the caller's.
    let r = gw
        .http
        .post(gw.url("/console/"))
        .basic_auth("ops", Some("ops-pw"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    let records = audit_records(&dir.path().join("audit"));
    assert!(
        records
            .iter()
            .any(|r| r["channel"] == "console" && r["principal"] == "shop-team"),
        "{records:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_can_be_moved_or_turned_off() {
    let agent = Agent::start("console-b");
    let dir = tempfile::tempdir().unwrap();
    let base = config(dir.path(), &agent);
    let gw = Gateway::start(&format!("{base}\n[console]\npath = \"/fleet\"\n")).await;
    assert_eq!(page(&gw, "ops", "ops-pw", "/fleet/").await.status(), 200);
    let css = page(&gw, "ops", "ops-pw", "/fleet/assets/console.css").await;
    assert_eq!(css.headers()["content-type"], "text/css; charset=utf-8");
    drop(gw);
    let gw = Gateway::start(&format!("{base}\n[console]\nenabled = false\n")).await;
    assert_eq!(page(&gw, "ops", "ops-pw", "/console/").await.status(), 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_targets_page_reads_as_the_viewer_and_shows_what_they_may_run() {
    let agent = Agent::start("console-c");
    let dir = tempfile::tempdir().unwrap();
    let gw = Gateway::start(&config(dir.path(), &agent)).await;
    let memory = "/console/targets/real-1?mbean=java.lang%3Atype%3DMemory";

    // The tree, as listed for the viewer, links to each MBean.
    let text = page(&gw, "shop-team", "shop-pw", "/console/targets/real-1")
        .await
        .text()
        .await
        .unwrap();
    assert!(text.contains("<summary>java.lang</summary>"), "{text}");
    assert!(text.contains("mbean=java.lang%3Atype%3DMemory"), "{text}");
    // The read-only policy's <filter> hides the flight recorder.
    assert!(!text.contains("jdk.management.jfr"), "{text}");

    // One MBean: values as the agent has them; its operation not for a
    // read-only role, and for a role without a policy.
    let direct = common::direct(
        &agent,
        &serde_json::json!({"type":"read","mbean":"java.lang:type=Memory","attribute":"Verbose"}),
    )
    .await["value"]
        .clone();
    let r = page(&gw, "shop-team", "shop-pw", memory).await;
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    let verbose = format!("<td>Verbose</td><td class=\"value\">{direct}</td>");
    assert!(text.contains(&verbose), "{verbose} in {text}");
    assert!(text.contains("<code>gc</code>"), "{text}");
    assert!(
        text.contains("not allowed to you") && !text.contains("<form class=\"exec\""),
        "{text}"
    );
    let text = page(&gw, "ops", "ops-pw", memory)
        .await
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("<form class=\"exec\"") && text.contains("value=\"gc\""),
        "{text}"
    );

    // A target the viewer's roles don't reach is no target at all.
    let hidden = page(&gw, "shop-team", "shop-pw", "/console/targets/standin-001").await;
    assert_eq!(hidden.status(), 404);
    let hidden = hidden.text().await.unwrap();
    let missing = page(&gw, "shop-team", "shop-pw", "/console/targets/no-such")
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(
        hidden.replace("standin-001", "NAME"),
        missing.replace("no-such", "NAME")
    );

    // Each read is audited as the viewer's, on the console's channel.
    let records = audit_records(&dir.path().join("audit"));
    for kind in ["list", "read"] {
        assert!(
            records.iter().any(|r| r["channel"] == "console"
                && r["principal"] == "shop-team"
                && r["type"] == kind
                && r["target"] == "real-1"),
            "{kind}: {records:?}"
        );
    }
}

fn discovered(name: &str, namespace: &str) -> jmxgate::config::TargetConfig {
    toml::from_str(&format!(
        "name = \"{name}\"\nurl = \"http://127.0.0.1:{}/jolokia\"\nlabels = {{ namespace = \"{namespace}\" }}\n",
        common::dead_port()
    ))
    .unwrap()
}

async fn events(gw: &Gateway, user: &str, password: &str, query: &str) -> serde_json::Value {
    let r = page(gw, user, password, &format!("/jmxgate/events{query}")).await;
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

/// Kinds and target names of a journal answer.
fn told(v: &serde_json::Value) -> Vec<(String, Vec<String>)> {
    v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let names = e["targets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap().to_string())
                .collect();
            (e["kind"].as_str().unwrap().to_string(), names)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn events_tell_each_caller_what_changed_among_the_targets_they_reach() {
    let agent = Agent::start("console-d");
    let dir = tempfile::tempdir().unwrap();
    let text = config(dir.path(), &agent);
    let gw = Gateway::start(&text).await;

    // Targets going down are told within seconds (probes every second).
    eventually("the stand-ins' downs", Duration::from_secs(90), || async {
        let all = told(&events(&gw, "ops", "ops-pw", "?limit=1000").await);
        let down = |n: &str| {
            all.iter()
                .any(|(k, t)| k == "target_down" && t == &[n.to_string()])
        };
        (down("standin-000") && down("standin-001"))
            .then_some(())
            .ok_or(format!("{all:?}"))
    })
    .await;
    // The shop team hears of theirs only.
    let shop = events(&gw, "shop-team", "shop-pw", "?limit=1000").await;
    let text_of_shop = shop.to_string();
    assert!(text_of_shop.contains("standin-000"), "{shop}");
    assert!(!text_of_shop.contains("standin-001"), "{shop}");

    // Discovery: what came and went, each team its own, also once gone.
    gw.gateway
        .set_discovered(vec![
            discovered("found-shop", "shop"),
            discovered("found-billing", "billing"),
        ])
        .unwrap();
    gw.gateway.set_discovered(vec![]).unwrap();
    let shop = told(&events(&gw, "shop-team", "shop-pw", "?limit=1000").await);
    for kind in ["targets_discovered", "targets_removed"] {
        assert!(
            shop.contains(&(kind.to_string(), vec!["found-shop".to_string()])),
            "{kind}: {shop:?}"
        );
    }
    assert!(!format!("{shop:?}").contains("found-billing"), "{shop:?}");
    let ops = told(&events(&gw, "ops", "ops-pw", "?limit=1000").await);
    assert!(
        ops.iter()
            .any(|(k, t)| k == "targets_discovered" && t.len() == 2),
        "{ops:?}"
    );

    // A reload is told to whoever reaches some target.
    let config = jmxgate::Config::parse(&format!("[server]\nlisten = \"127.0.0.1:0\"\n{text}"))
        .and_then(|c| c.validate())
        .unwrap();
    gw.gateway.reload(&config).unwrap();
    let shop = told(&events(&gw, "shop-team", "shop-pw", "?limit=1000").await);
    assert_eq!(shop.last().unwrap().0, "config_reloaded", "{shop:?}");

    // Paged by seq.
    let first = events(&gw, "ops", "ops-pw", "?limit=5").await;
    assert_eq!(first["events"].as_array().unwrap().len(), 5);
    let next = first["next"].as_u64().unwrap();
    let second = events(&gw, "ops", "ops-pw", &format!("?after={next}&limit=5")).await;
    assert!(second["events"][0]["seq"].as_u64().unwrap() > next);
    let bad = page(&gw, "ops", "ops-pw", "/jmxgate/events?after=soon").await;
    assert_eq!(bad.status(), 400);

    // The console's page of the same, and the reads audited.
    let html = page(&gw, "shop-team", "shop-pw", "/console/events?limit=1000")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        html.contains("config reloaded") && html.contains("found-shop"),
        "{html}"
    );
    assert!(!html.contains("found-billing"), "{html}");
    let records = audit_records(&dir.path().join("audit"));
    assert!(
        records
            .iter()
            .any(|r| r["event"] == "events" && r["principal"] == "shop-team"),
        "{records:?}"
    );
}

/// An attribute of `java.lang:type=Runtime`, as the agent answers it.
async fn runtime(agent: &Agent, attribute: &str) -> serde_json::Value {
    common::direct(
        agent,
        &serde_json::json!({"type":"read","mbean":"java.lang:type=Runtime","attribute":attribute}),
    )
    .await["value"]
        .clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn fleet_answers_are_a_table_and_a_chart_of_what_the_agents_say() {
    let (agent, second) = (Agent::start("console-e"), Agent::start("console-f"));
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "{}\n[[targets]]\nname = \"real-2\"\nurl = \"{}\"\nlabels = {{ namespace = \"shop\" }}\n",
        config(dir.path(), &agent),
        second.url()
    );
    let gw = Gateway::start(&text).await;
    let mut expected = [
        (
            "real-1",
            runtime(&agent, "StartTime").await.as_u64().unwrap(),
        ),
        (
            "real-2",
            runtime(&second, "StartTime").await.as_u64().unwrap(),
        ),
    ];
    // Best first, ties by name.
    expected.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));

    // The empty form asks nothing.
    let r = page(&gw, "shop-team", "shop-pw", "/console/answers").await;
    assert_eq!(r.status(), 200);
    let form = r.text().await.unwrap();
    assert!(
        form.contains("<form class=\"question\"") && !form.contains("<svg"),
        "{form}"
    );

    // The shop team's top 2 start times: the agents' own, in order, drawn;
    // the shop stand-ins (and no billing one) listed as giving no value.
    let top = "/console/answers?mbean=java.lang%3Atype%3DRuntime&attribute=StartTime\
               &selector=namespace%3Dshop&op=top&n=2";
    let html = page(&gw, "shop-team", "shop-pw", top)
        .await
        .text()
        .await
        .unwrap();
    let rows: Vec<String> = expected
        .iter()
        .map(|(name, v)| format!("<tr><td>{name}</td><td class=\"value\">{v}</td></tr>"))
        .collect();
    let first = html
        .find(&rows[0])
        .unwrap_or_else(|| panic!("{} in {html}", rows[0]));
    let then = html
        .find(&rows[1])
        .unwrap_or_else(|| panic!("{} in {html}", rows[1]));
    assert!(first < then, "{html}");
    assert_eq!(html.matches("<rect").count(), 2, "{html}");
    assert!(html.contains("60 targets gave no value"), "{html}");
    assert!(
        html.contains("standin-000") && !html.contains("standin-001"),
        "{html}"
    );

    // Grouped: one Java vendor over both JVMs.
    let vendor = runtime(&agent, "VmVendor").await;
    let vendor = vendor.as_str().unwrap();
    let html = page(
        &gw,
        "ops",
        "ops-pw",
        "/console/answers?mbean=java.lang%3Atype%3DRuntime&attribute=VmVendor&selector=real-*&op=group",
    )
    .await
    .text()
    .await
    .unwrap();
    let row =
        format!("<tr><td>{vendor}</td><td class=\"value\">2</td><td>real-1, real-2</td></tr>");
    assert!(html.contains(&row), "{row} in {html}");

    // A number: how many answered.
    let html = page(
        &gw,
        "ops",
        "ops-pw",
        "/console/answers?mbean=java.lang%3Atype%3DRuntime&attribute=StartTime&selector=real-*&op=count",
    )
    .await
    .text()
    .await
    .unwrap();
    assert!(
        html.contains("<strong class=\"number\">2</strong> from 2 values"),
        "{html}"
    );

    // Wrong questions are said; the agents' refusals are shown, not hidden.
    let r = page(
        &gw,
        "ops",
        "ops-pw",
        "/console/answers?mbean=x%3Ay%3Dz&attribute=A&op=median",
    )
    .await;
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("op &quot;median&quot;"));
    let html = page(
        &gw,
        "ops",
        "ops-pw",
        "/console/answers?mbean=java.lang%3Atype%3DRuntime&attribute=VmVendor&selector=real-*&op=sum",
    )
    .await
    .text()
    .await
    .unwrap();
    assert!(html.contains("jmxgate.NotANumber"), "{html}");

    // One audit record per target read, as the viewer's.
    let records = audit_records(&dir.path().join("audit"));
    assert!(
        records.iter().any(|r| r["channel"] == "console"
            && r["principal"] == "shop-team"
            && r["type"] == "read"
            && r["target"] == "real-2"),
        "{records:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_audit_trail_shows_own_records_and_auditors_everyones_and_the_chain() {
    let agent = Agent::start("console-g");
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "{}\n[console]\nauditors = [\"all\"]\n",
        config(dir.path(), &agent)
    );
    let gw = Gateway::start(&text).await;
    let audit = dir.path().join("audit");
    assert_eq!(page(&gw, "ops", "ops-pw", "/console/").await.status(), 200);
    let read = page(
        &gw,
        "shop-team",
        "shop-pw",
        "/console/targets/real-1?mbean=java.lang%3Atype%3DMemory",
    )
    .await;
    assert_eq!(read.status(), 200);

    // The shop team's own records, newest first; nobody else's.
    let html = page(&gw, "shop-team", "shop-pw", "/console/audit")
        .await
        .text()
        .await
        .unwrap();
    let records = audit_records(&audit);
    let newest_own = records
        .iter()
        .rev()
        // Not the page's own record, written after it searched.
        .find(|r| r["principal"] == "shop-team" && r["event"] != "audit_trail")
        .unwrap();
    let row = format!(
        "<td>{}</td><td>{}</td><td>shop-team</td>",
        newest_own["seq"],
        newest_own["time"].as_str().unwrap()
    );
    assert!(html.contains(&row), "{row} in {html}");
    assert!(!html.contains("<td>ops</td>"), "{html}");
    assert!(html.contains("Your own records"), "{html}");
    for asked in ["?principal=ops", "?verify=1"] {
        let r = page(
            &gw,
            "shop-team",
            "shop-pw",
            &format!("/console/audit{asked}"),
        )
        .await;
        assert_eq!(r.status(), 403, "{asked}");
    }
    let r = page(
        &gw,
        "shop-team",
        "shop-pw",
        "/console/audit?since=yesterday",
    )
    .await;
    assert_eq!(r.status(), 400);

    // An auditor searches everyone's, by principal and target.
    let html = page(
        &gw,
        "ops",
        "ops-pw",
        "/console/audit?principal=shop-team&target=real-1&limit=1000",
    )
    .await
    .text()
    .await
    .unwrap();
    let expected = audit_records(&audit)
        .iter()
        .filter(|r| r["principal"] == "shop-team" && r["target"] == "real-1")
        .count();
    assert!(expected >= 2, "a list and a read");
    assert_eq!(
        html.matches("<td>shop-team</td>").count(),
        expected,
        "{html}"
    );

    // The chain verifies; edited, it does not, and the page says so.
    let html = page(&gw, "ops", "ops-pw", "/console/audit?verify=1")
        .await
        .text()
        .await
        .unwrap();
    assert!(html.contains("The chain verifies"), "{html}");
    let file = jmxgate::audit::chain::files_in(&audit).unwrap().remove(0);
    let original = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, original.replacen("shop-team", "shop-teem", 1)).unwrap();
    let html = page(&gw, "ops", "ops-pw", "/console/audit?verify=1")
        .await
        .text()
        .await
        .unwrap();
    assert!(html.contains("The chain does not verify"), "{html}");

    // Reading the trail is itself recorded.
    assert!(
        audit_records(&audit)
            .iter()
            .any(|r| r["event"] == "audit_trail" && r["principal"] == "shop-team"),
        "the audit page's own record"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agents_markup_is_shown_as_text() {
    use common::hostile::{Behaviour, HostileAgent, MARKUP_MBEAN, MARKUP_VALUE};
    let hostile = HostileAgent::start();
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path(), &[("ops", "ops-pw", &["all"])]);
    let gw = Gateway::start(&basic_auth_config(
        &users,
        &format!(
            "[[targets]]\nname = \"evil\"\nurl = \"{}\"\n\n[[roles]]\nname = \"all\"\ntargets = [\"*\"]\n",
            hostile.url(Behaviour::Markup)
        ),
    ))
    .await;
    let tree = page(&gw, "ops", "ops-pw", "/console/targets/evil")
        .await
        .text()
        .await
        .unwrap();
    let key = MARKUP_MBEAN.split_once(':').unwrap().1;
    assert!(!tree.contains("<script>alert"), "{tree}");
    let shown = key.replace('<', "&lt;").replace('>', "&gt;");
    assert!(tree.contains(&shown), "{shown} in {tree}");

    let query: String = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("mbean", MARKUP_MBEAN)
        .finish();
    let detail = page(
        &gw,
        "ops",
        "ops-pw",
        &format!("/console/targets/evil?{query}"),
    )
    .await
    .text()
    .await
    .unwrap();
    assert!(
        !detail.contains("<script>alert") && !detail.contains("<img"),
        "{detail}"
    );
    let value = MARKUP_VALUE.replace('<', "&lt;").replace('>', "&gt;");
    assert!(
        detail.contains(&format!("<td class=\"value\">{value}</td>")),
        "{value} in {detail}"
    );
    // The fleet answer of the same value, grouped.
    let answers: String = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("mbean", MARKUP_MBEAN)
        .append_pair("attribute", "Value")
        .append_pair("selector", "evil*")
        .append_pair("op", "group")
        .finish();
    let grouped = page(&gw, "ops", "ops-pw", &format!("/console/answers?{answers}"))
        .await
        .text()
        .await
        .unwrap();
    assert!(!grouped.contains("<img"), "{grouped}");
    assert!(grouped.contains(&value), "{value} in {grouped}");
}

/// A webhook receiver: the JSON bodies posted to it, by path.
async fn hook_receiver() -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<(String, serde_json::Value)>>>,
) {
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = got.clone();
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri, body: axum::body::Bytes| {
        let keep = keep.clone();
        async move {
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            keep.lock().unwrap().push((uri.path().to_string(), v));
            "ok"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, got)
}

#[tokio::test(flavor = "multi_thread")]
async fn webhooks_hear_the_kinds_and_targets_they_ask_for() {
    let agent = Agent::start("console-h");
    let dir = tempfile::tempdir().unwrap();
    let (hooks, got) = hook_receiver().await;
    let text = format!(
        "{}\n[[events.webhooks]]\nurl = \"{hooks}/shop\"\nkinds = [\"target_down\"]\ntargets = \"namespace=shop\"\n\n\
         [[events.webhooks]]\nurl = \"{hooks}/reloads\"\nkinds = [\"config_reloaded\"]\nformat = \"slack\"\n",
        config(dir.path(), &agent)
    );
    let gw = Gateway::start(&text).await;

    // The shop hook hears of shop stand-ins going down, and of nothing else.
    eventually(
        "the shop stand-ins' downs",
        Duration::from_secs(90),
        || async {
            let seen: Vec<String> = got
                .lock()
                .unwrap()
                .iter()
                .filter(|(path, _)| path == "/shop")
                .flat_map(|(_, v)| v["targets"].as_array().cloned().unwrap_or_default())
                .map(|t| t.as_str().unwrap_or("").to_string())
                .collect();
            (seen.len() == 60)
                .then_some(())
                .ok_or(format!("{} of 60: {seen:?}", seen.len()))
        },
    )
    .await;
    for (path, v) in got.lock().unwrap().iter() {
        assert_eq!(path, "/shop", "{v}");
        assert_eq!(v["event"], "target_down", "{v}");
        let names = v["targets"].to_string();
        assert!(
            names.contains("standin-") && !names.contains("real-1"),
            "{v}"
        );
        let n: usize = v["targets"][0].as_str().unwrap()["standin-".len()..]
            .parse()
            .unwrap();
        assert_eq!(n % 2, 0, "only shop stand-ins (the even ones): {v}");
    }

    // A reload goes to the hook that asked for reloads, as Slack text.
    let config = jmxgate::Config::parse(&format!("[server]\nlisten = \"127.0.0.1:0\"\n{text}"))
        .and_then(|c| c.validate())
        .unwrap();
    gw.gateway.reload(&config).unwrap();
    let said = eventually("the reload's notice", Duration::from_secs(60), || async {
        got.lock()
            .unwrap()
            .iter()
            .find(|(path, _)| path == "/reloads")
            .map(|(_, v)| v["text"].as_str().unwrap_or("").to_string())
            .ok_or("not yet".to_string())
    })
    .await;
    assert!(said.starts_with("config reloaded"), "{said}");
    let metrics = gw.gateway.metrics().encode();
    assert!(!metrics.contains(&hooks), "the hook's URL is a secret");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hawtio_elsewhere_opens_each_targets_connection_from_the_viewers_own_list() {
    let agent = Agent::start("console-elsewhere");
    let dir = tempfile::tempdir().unwrap();
    let base = config(dir.path(), &agent);
    let gw = Gateway::start(&format!(
        "{base}\n[console]\nhawtio = \"https://hawtio.example/hawtio/\"\n"
    ))
    .await;
    // "Open in Hawtio" opens that Hawtio at the target's connection, and
    // says where the connections come from.
    let text = page(&gw, "shop-team", "shop-pw", "/console/targets/real-1")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("href=\"https://hawtio.example/hawtio/?con=real-1\""),
        "{text}"
    );
    assert!(
        text.contains("href=\"/console/hawtio-connections.json\""),
        "{text}"
    );
    // Nothing is served as Hawtio here.
    let served = page(&gw, "shop-team", "shop-pw", "/console/hawtio/real-1/").await;
    assert_eq!(served.status(), 404);

    // The viewer's targets, and only those, as Hawtio connections to their
    // virtual URLs on this gateway; a download.
    let r = page(
        &gw,
        "shop-team",
        "shop-pw",
        "/console/hawtio-connections.json",
    )
    .await;
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .starts_with("attachment"));
    let listed: Vec<serde_json::Value> = r.json().await.unwrap();
    assert_eq!(listed.len(), 61, "real-1 and the 60 shop stand-ins");
    let real = listed.iter().find(|c| c["name"] == "real-1").unwrap();
    assert_eq!(
        real,
        &serde_json::json!({"name": "real-1", "scheme": "http", "host": "127.0.0.1",
                            "port": gw.addr.port(), "path": "/jolokia/targets/real-1"})
    );
    assert!(listed.iter().all(|c| {
        let name = c["name"].as_str().unwrap();
        let n = name
            .strip_prefix("standin-")
            .map(|n| n.parse::<usize>().unwrap());
        name == "real-1" || n.is_some_and(|n| n % 2 == 0)
    }));
    // Through that connection's path the viewer reaches the target as here.
    let version = gw
        .http
        .get(gw.url("/jolokia/targets/real-1/version"))
        .basic_auth("shop-team", Some("shop-pw"))
        .send()
        .await
        .unwrap();
    assert_eq!(version.status(), 200);
    // Narrowed by a selector; a bad one is named.
    let narrowed: Vec<serde_json::Value> = page(
        &gw,
        "ops",
        "ops-pw",
        "/console/hawtio-connections.json?selector=namespace%3Dbilling",
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(narrowed.len(), 60);
    let bad = page(
        &gw,
        "ops",
        "ops-pw",
        "/console/hawtio-connections.json?selector=%3D%3D",
    )
    .await;
    assert_eq!(bad.status(), 400);
    let records = audit_records(&dir.path().join("audit"));
    assert!(records
        .iter()
        .any(|r| r["event"] == "hawtio_connections" && r["principal"] == "shop-team"));
}

/// A console page's form as a browser would send it: the token cookie
/// the page set and the same token in the form, from the page's own
/// origin.
struct Forms<'a> {
    gw: &'a Gateway,
    user: &'a str,
    password: &'a str,
    cookie: String,
    token: String,
}

impl<'a> Forms<'a> {
    /// Opens `path` (a page with forms) and keeps its token.
    async fn open(
        gw: &'a Gateway,
        user: &'a str,
        password: &'a str,
        path: &str,
    ) -> (Forms<'a>, String) {
        let r = page(gw, user, password, path).await;
        assert_eq!(r.status(), 200, "{path}");
        let cookie = r
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|c| c.starts_with("jmxgate_console_csrf="))
            .map(|c| c.split(';').next().unwrap().to_string())
            .unwrap_or_default();
        let text = r.text().await.unwrap();
        let token = text
            .split("name=\"csrf\" value=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_default()
            .to_string();
        (
            Forms {
                gw,
                user,
                password,
                cookie,
                token,
            },
            text,
        )
    }

    /// Posts `fields` (and the token) to `path`: the status and the page.
    async fn post(&self, path: &str, fields: &[(&str, &str)]) -> (u16, String) {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("csrf", &self.token);
        for (k, v) in fields {
            form.append_pair(k, v);
        }
        let r = self
            .gw
            .http
            .post(self.gw.url(path))
            .basic_auth(self.user, Some(self.password))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("cookie", &self.cookie)
            .header("origin", format!("http://{}", self.gw.addr))
            .body(form.finish())
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }
}

/// How many operations the agent has run (all callers).
async fn invocations(agent: &Agent) -> i64 {
    common::direct(
        agent,
        &serde_json::json!({"type":"read","mbean":"jmxgate.test:type=Counter","attribute":"Invocations"}),
    )
    .await["value"]
        .as_i64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_targets_page_runs_operations_and_writes_attributes_as_the_viewer() {
    use serde_json::json;
    let agent = Agent::start("console-forms");
    let dir = tempfile::tempdir().unwrap();
    let gw = Gateway::start(&config(dir.path(), &agent)).await;
    let types = "/console/targets/real-1?mbean=jmxgate.test%3Atype%3DTypes";
    let operations = "/console/targets/real-1?mbean=jmxgate.test%3Atype%3DOperations";
    common::direct(
        &agent,
        &json!({"type":"exec","mbean":"jmxgate.test:type=Operations","operation":"reset"}),
    )
    .await;

    // The header says what the gateway knows of the target, as the agent
    // says it; the domains are in order.
    let version = common::direct(&agent, &json!({"type":"version"})).await["value"].clone();
    let (ops, text) = Forms::open(&gw, "ops", "ops-pw", types).await;
    eventually("the target probed", Duration::from_secs(30), || async {
        let text = page(&gw, "ops", "ops-pw", "/console/targets/real-1")
            .await
            .text()
            .await
            .unwrap();
        if text.contains("<dd class=\"state\">up</dd>") {
            Ok(())
        } else {
            Err(text)
        }
    })
    .await;
    let header = page(&gw, "ops", "ops-pw", "/console/targets/real-1")
        .await
        .text()
        .await
        .unwrap();
    for expected in [
        version["agent"].as_str().unwrap().to_string(),
        format!("protocol {}", version["protocol"].as_str().unwrap()),
        "<span class=\"label\">namespace=shop</span>".to_string(),
    ] {
        assert!(header.contains(&expected), "{expected} in {header}");
    }
    let domains: Vec<&str> = header
        .split("<summary>")
        .skip(1)
        .map(|s| s.split("</summary>").next().unwrap())
        .collect();
    let mut sorted = domains.clone();
    sorted.sort();
    assert!(domains.len() > 3 && domains == sorted, "{domains:?}");
    assert!(!ops.token.is_empty() && !ops.cookie.is_empty(), "{text}");
    assert!(text.contains("<form class=\"write\""), "{text}");

    // A write, typed by the attribute's own type, as the agent then has it.
    let (status, text) = ops
        .post(
            "/console/targets/real-1",
            &[
                ("action", "write"),
                ("mbean", "jmxgate.test:type=Types"),
                ("attribute", "Int"),
                ("value", "42"),
            ],
        )
        .await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("Int = 42: done"), "{text}");
    let now = common::direct(
        &agent,
        &json!({"type":"read","mbean":"jmxgate.test:type=Types","attribute":"Int"}),
    )
    .await;
    assert_eq!(now["value"], 42, "{now}");
    // A value that isn't one: said, kept in the form, and not sent.
    let (_, text) = ops
        .post(
            "/console/targets/real-1",
            &[
                ("action", "write"),
                ("mbean", "jmxgate.test:type=Types"),
                ("attribute", "Int"),
                ("value", "forty"),
            ],
        )
        .await;
    assert!(
        text.contains("Int: &quot;forty&quot; is not a whole number (int)"),
        "{text}"
    );
    assert!(
        text.contains("value=\"forty\""),
        "the typed value stays in its form: {text}"
    );

    // An overloaded operation with its arguments typed by its signature:
    // the agent's own answer to the same call.
    let expected = common::direct(
        &agent,
        &json!({"type":"exec","mbean":"jmxgate.test:type=Operations",
                                                  "operation":"add(int,int)","arguments":[2, 40]}),
    )
    .await;
    let (_, text) = Forms::open(&gw, "ops", "ops-pw", operations).await;
    let overload = text
        .split("<form class=\"exec\"")
        .find(|f| f.contains("value=\"add\"") && f.contains("placeholder=\"int\""))
        .and_then(|f| f.split("name=\"overload\" value=\"").nth(1))
        .and_then(|v| v.split('"').next())
        .unwrap_or_else(|| panic!("no add(int, int) form in {text}"))
        .to_string();
    let before = invocations(&agent).await;
    let (_, text) = ops
        .post(
            "/console/targets/real-1",
            &[
                ("action", "exec"),
                ("mbean", "jmxgate.test:type=Operations"),
                ("operation", "add"),
                ("overload", &overload),
                ("arg0", "2"),
                ("arg1", "40"),
            ],
        )
        .await;
    assert!(text.contains("add(2, 40): done"), "{text}");
    assert!(
        text.contains(&format!("it returned </span>{}</div>", expected["value"])),
        "{text}"
    );
    assert_eq!(invocations(&agent).await, before + 1);
    let (_, text) = ops
        .post(
            "/console/targets/real-1",
            &[
                ("action", "exec"),
                ("mbean", "jmxgate.test:type=Operations"),
                ("operation", "add"),
                ("overload", &overload),
                ("arg0", "two"),
                ("arg1", "40"),
            ],
        )
        .await;
    assert!(
        text.contains("argument 1 of add: &quot;two&quot; is not a whole number (int)"),
        "{text}"
    );
    assert_eq!(
        invocations(&agent).await,
        before + 1,
        "a bad argument is not sent"
    );

    // Without the page's token, or from another site: refused, not run.
    let forged = Forms {
        gw: &gw,
        user: "ops",
        password: "ops-pw",
        cookie: ops.cookie.clone(),
        token: "0".repeat(32),
    };
    let (status, text) = forged
        .post(
            "/console/targets/real-1",
            &[
                ("action", "exec"),
                ("mbean", "jmxgate.test:type=Operations"),
                ("operation", "noArgs"),
            ],
        )
        .await;
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("token"), "{text}");
    let r = gw
        .http
        .post(gw.url("/console/targets/real-1"))
        .basic_auth("ops", Some("ops-pw"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("cookie", &ops.cookie)
        .header("origin", "http://elsewhere.example")
        .body(format!(
            "csrf={}&action=exec&mbean=jmxgate.test%3Atype%3DOperations&operation=noArgs",
            ops.token
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(
        invocations(&agent).await,
        before + 1,
        "a refused form runs nothing"
    );

    // A read-only role gets no forms, and its forged post is the policy's
    // refusal, the agent untouched.
    let (mut team, text) = Forms::open(&gw, "shop-team", "shop-pw", operations).await;
    assert!(
        !text.contains("<form class=\"exec\"") && !text.contains("<form class=\"write\""),
        "{text}"
    );
    // No form on the page: the post is made with the cookie's own token.
    team.token = team.cookie.split_once('=').unwrap().1.to_string();
    let (status, text) = team
        .post(
            "/console/targets/real-1",
            &[
                ("action", "exec"),
                ("mbean", "jmxgate.test:type=Operations"),
                ("operation", "noArgs"),
            ],
        )
        .await;
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains("noArgs(): ") && text.contains("not allowed"),
        "{text}"
    );
    assert_eq!(invocations(&agent).await, before + 1);

    // Each change is audited as the viewer's, on the console's channel.
    let records = audit_records(&dir.path().join("audit"));
    for (kind, decision) in [
        ("write", "allowed"),
        ("exec", "allowed"),
        ("exec", "denied"),
    ] {
        assert!(
            records.iter().any(|r| r["channel"] == "console"
                && r["type"] == kind
                && r["decision"] == decision
                && r["target"] == "real-1"),
            "{kind} {decision}: {records:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_four_eyes_operation_from_the_page_waits_for_its_approval_then_runs() {
    use crate::four_eyes;
    let orders = Agent::start("console-four-eyes");
    let dir = tempfile::tempdir().unwrap();
    let gw = four_eyes::started(&four_eyes::four_eyes_config(dir.path(), &orders)).await;
    let operations = "/console/targets/orders-1?mbean=jmxgate.test%3Atype%3DOperations";
    let (oncall, text) = Forms::open(&gw, "oncall", "pw", operations).await;
    assert!(
        text.contains("value=\"echo\""),
        "oncall's ops may run echo, with approval: {text}"
    );
    let echo = [
        ("action", "exec"),
        ("mbean", "jmxgate.test:type=Operations"),
        ("operation", "echo"),
        ("arg0", "from the console"),
    ];
    let before = invocations(&orders).await;

    // Asked from the form: not run, the page names the access request.
    let (_, text) = oncall.post("/console/targets/orders-1", &echo).await;
    assert!(text.contains("This item needs approval"), "{text}");
    assert!(text.contains("press the same button again"), "{text}");
    assert!(
        text.contains("value=\"from the console\""),
        "the form keeps its values: {text}"
    );
    let id = text
        .split_whitespace()
        .find(|w| w.starts_with("ar-"))
        .unwrap_or_else(|| panic!("no request in {text}"))
        .trim_end_matches([';', ',', '.', ')', ':'])
        .to_string();
    assert_eq!(
        invocations(&orders).await,
        before,
        "not run before the approval"
    );

    // A lead approves it; the same form, sent again, runs it once.
    let lead = four_eyes::at(&gw, "lead");
    let (status, approved) = lead.review(&id, "approve", "ok from the page").await;
    assert_eq!(status, 200, "{approved}");
    let (_, text) = oncall.post("/console/targets/orders-1", &echo).await;
    assert!(
        text.contains("echo(&quot;from the console&quot;): done"),
        "{text}"
    );
    assert!(
        text.contains("it returned </span>from the console"),
        "{text}"
    );
    assert_eq!(invocations(&orders).await, before + 1);
    // Used: a third time asks anew.
    let (_, text) = oncall.post("/console/targets/orders-1", &echo).await;
    assert!(text.contains("This item needs approval"), "{text}");
    assert_eq!(invocations(&orders).await, before + 1);

    // The run is audited with its request, on the console's channel.
    drop(gw);
    let records = audit_records(&dir.path().join("audit"));
    assert!(
        records.iter().any(|r| r["channel"] == "console"
            && r["type"] == "exec"
            && r["decision"] == "allowed"
            && r["rule"]
                .as_str()
                .is_some_and(|rule| rule.contains(&format!("approved by access request {id}")))),
        "{records:?}"
    );
}

/// The header offers what applies to the viewer: no Sign out for a caller
/// nobody authenticated (a password's holder has one), no Access link
/// where no role is requestable or four-eyes; the fleet and events pages
/// ask for themselves again, within the policy that forbids scripts.
#[tokio::test(flavor = "multi_thread")]
async fn the_header_offers_only_what_applies_to_the_viewer() {
    let agent = Agent::start("console-header");
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path(), &[("ops", "ops-pw", &["all"])]);
    // The manual's first configuration: Basic, and an anonymous role.
    let gw = Gateway::start(&format!(
        "{}[auth.basic]\nusers_file = \"{}\"\n\n[access]\nanonymous_role = \"readers\"\n\n\
         [[roles]]\nname = \"readers\"\ntargets = [\"*\"]\n\n\
         [[roles]]\nname = \"all\"\ntargets = [\"*\"]\n",
        common::targets_toml(&[&agent]),
        users.display()
    ))
    .await;
    let anonymous = gw.http.get(gw.url("/console/")).send().await.unwrap();
    assert_eq!(anonymous.status(), 200);
    let csp = anonymous.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(!csp.contains("script-src"), "{csp}");
    let text = anonymous.text().await.unwrap();
    assert!(text.contains(&agent.name), "{text}");
    assert!(!text.contains("Sign out"), "nobody to sign out: {text}");
    assert!(
        !text.contains("/console/access"),
        "nothing to request: {text}"
    );
    assert!(
        text.contains("<meta http-equiv=\"refresh\" content=\"15\">"),
        "{text}"
    );
    let ops = page(&gw, "ops", "ops-pw", "/console/events")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        ops.contains("Sign out") && !ops.contains("/console/access"),
        "{ops}"
    );
    assert!(ops.contains("http-equiv=\"refresh\""), "{ops}");
    // A target's page asks for itself again (its trend goes on), but not
    // under a person typing in an MBean's forms.
    let target = format!("/console/targets/{}", agent.name);
    let text = page(&gw, "ops", "ops-pw", &target)
        .await
        .text()
        .await
        .unwrap();
    assert!(text.contains("http-equiv=\"refresh\""), "{text}");
    let memory = format!("{target}?mbean=java.lang%3Atype%3DMemory");
    let text = page(&gw, "ops", "ops-pw", &memory)
        .await
        .text()
        .await
        .unwrap();
    assert!(!text.contains("http-equiv=\"refresh\""), "{text}");
}

/// A target's trend: heap, threads and CPU as read each time its page is
/// shown, each line drawn only for a viewer whose policy reads it.
#[tokio::test(flavor = "multi_thread")]
async fn a_targets_trend_draws_only_what_the_viewer_may_read() {
    let agent = Agent::start("console-trend");
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(
        dir.path(),
        &[
            ("ops", "ops-pw", &["all"]),
            ("guarded", "g-pw", &["guarded"]),
        ],
    );
    let no_heap = dir.path().join("no-heap.xml");
    std::fs::write(
        &no_heap,
        "<restrict><deny><mbean><name>java.lang:type=Memory</name>\
         <attribute>HeapMemoryUsage</attribute></mbean></deny></restrict>",
    )
    .unwrap();
    let gw = Gateway::start(&basic_auth_config(
        &users,
        &format!(
            "{}\n[[roles]]\nname = \"all\"\ntargets = [\"*\"]\n\n\
             [[roles]]\nname = \"guarded\"\ntargets = [\"*\"]\npolicy = \"{}\"\n\n\
             [audit]\ndir = \"{}\"\n",
            common::targets_toml(&[&agent]),
            no_heap.display(),
            dir.path().join("audit").display()
        ),
    ))
    .await;
    let target = format!("/console/targets/{}", agent.name);
    let shown_threads = |text: &str| -> i64 {
        let after = text
            .split("threads <svg")
            .nth(1)
            .unwrap_or_else(|| panic!("no threads line in {text}"));
        let after = after.split("</svg> ").nth(1).unwrap();
        after
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let mut text = String::new();
    for _ in 0..2 {
        text = page(&gw, "ops", "ops-pw", &target)
            .await
            .text()
            .await
            .unwrap();
    }
    assert!(text.contains("heap used <svg class=\"trend\""), "{text}");
    assert!(text.contains("<polyline points="), "{text}");
    let direct = common::direct(
        &agent,
        &serde_json::json!({"type":"read","mbean":"java.lang:type=Threading","attribute":"ThreadCount"}),
    )
    .await["value"]
        .as_i64()
        .unwrap();
    let threads = shown_threads(&text);
    assert!(
        (threads - direct).abs() <= 5,
        "{threads} threads shown, the agent says {direct}"
    );
    // The guarded viewer's policy denies the heap: no heap line, from
    // anyone's points.
    let text = page(&gw, "guarded", "g-pw", &target)
        .await
        .text()
        .await
        .unwrap();
    assert!(!text.contains("heap used"), "{text}");
    assert!(text.contains("threads <svg"), "{text}");
    // Each point is the viewer's own audited reads.
    let records = audit_records(&dir.path().join("audit"));
    for who in ["ops", "guarded"] {
        assert!(
            records.iter().any(|r| r["channel"] == "console"
                && r["principal"] == who
                && r["type"] == "read"
                && r["mbean"] == "java.lang:type=Threading"),
            "{who}: {records:?}"
        );
    }
    assert!(records.iter().any(|r| r["principal"] == "guarded"
        && r["mbean"] == "java.lang:type=Memory"
        && r["decision"] == "denied"));
}
