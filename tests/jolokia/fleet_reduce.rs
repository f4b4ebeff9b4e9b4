//! Fleet answers: a selector item with `"reduce"` answered as one value
//! about the group, against real agents of the generation under test, with
//! a dead target, a target whose role's policy denies the attribute, text
//! values and ties, and values the agents could not read (a missing
//! attribute, a denied one, a null). Every reduced answer is checked
//! against the same reduction computed here from the unreduced fan-out of
//! the same request, as the same user; the CLI and the Rust client read
//! the same answers.

use crate::common;

use std::process::Command;

use common::{Agent, Gateway};
use jmxgate::client::JolokiaClient;
use jmxgate::protocol::reduce::{Op, Reduce};
use jmxgate::protocol::Request;
use serde_json::{json, Value};

const TYPES: &str = "jmxgate.test:type=Types";
const USER: (&str, &str) = ("ops", "fleet-ops pass");

struct Fleet {
    agents: [Agent; 3],
    gw: Gateway,
    dir: tempfile::TempDir,
}

/// r-alpha, r-beta (role `most`, no policy), r-gamma (role `guarded`,
/// whose policy denies `Int`) and r-dead (no agent there). `ops` holds
/// both roles. Int is 7 on alpha and beta (a tie), 3 on gamma.
async fn fleet(prefix: &str) -> Fleet {
    let names = ["alpha", "beta", "gamma"].map(|n| format!("{prefix}-{n}"));
    let handles: Vec<_> = names
        .iter()
        .cloned()
        .map(|n| std::thread::spawn(move || Agent::start(&n)))
        .collect();
    let mut started = handles.into_iter().map(|h| h.join().unwrap());
    let agents = [(); 3].map(|_| started.next().unwrap());
    for (agent, value) in agents.iter().zip([7, 7, 3]) {
        let w = json!({"type":"write","mbean":TYPES,"attribute":"Int","value":value});
        assert_eq!(common::direct(agent, &w).await["status"], 200);
    }
    let dir = tempfile::tempdir().unwrap();
    let users = common::users_file(dir.path(), &[(USER.0, USER.1, &["most", "guarded"])]);
    let policy = dir.path().join("guarded.xml");
    std::fs::write(
        &policy,
        format!("<restrict><deny><mbean><name>{TYPES}</name><attribute>Int</attribute></mbean></deny></restrict>"),
    )
    .unwrap();
    let [alpha, beta, gamma] = &agents;
    let config = common::basic_auth_config(
        &users,
        &format!(
            "[[targets]]\nname = \"{}\"\nurl = \"{}\"\n\
             [[targets]]\nname = \"{}\"\nurl = \"{}\"\n\
             [[targets]]\nname = \"{}\"\nurl = \"{}\"\n\
             [[targets]]\nname = \"{prefix}-dead\"\nurl = \"http://127.0.0.1:{}/jolokia\"\nconnect_timeout = \"500ms\"\n\
             [[roles]]\nname = \"most\"\ntargets = [\"{prefix}-alpha\", \"{prefix}-beta\", \"{prefix}-dead\"]\n\
             [[roles]]\nname = \"guarded\"\ntargets = [\"{prefix}-gamma\"]\npolicy = \"{}\"\n\
             [audit]\ndir = \"{}\"\n",
            alpha.name,
            alpha.url(),
            beta.name,
            beta.url(),
            gamma.name,
            gamma.url(),
            common::dead_port(),
            policy.display(),
            dir.path().join("audit").display()
        ),
    );
    let gw = Gateway::start(&config).await;
    Fleet { agents, gw, dir }
}

impl Fleet {
    async fn post(&self, body: &Value) -> Value {
        let r = self
            .gw
            .http
            .post(self.gw.url("/jolokia"))
            .basic_auth(USER.0, Some(USER.1))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        common::parse(&r.text().await.unwrap())
    }
}

/// What a reduction must give, computed from the unreduced fan-out's
/// value (`{target: value or error object}`): the test's own reference.
fn expected(op: &str, n: usize, per_target: &Value, path: Option<&str>) -> Value {
    let mut usable = Vec::new();
    let mut errors = serde_json::Map::new();
    for (target, v) in per_target.as_object().unwrap() {
        if v.get("error").is_some() && v.get("status").is_some() {
            errors.insert(target.clone(), v.clone());
            continue;
        }
        let v = match path {
            Some(p) => v[p].clone(),
            None => v.clone(),
        };
        if op != "group" && op != "count" && !v.is_number() {
            errors.insert(target.clone(), json!("not a number"));
            continue;
        }
        usable.push((target.clone(), v));
    }
    let numbers: Vec<f64> = usable.iter().filter_map(|(_, v)| v.as_f64()).collect();
    let mut ranked = usable.clone();
    ranked.sort_by(|a, b| {
        b.1.as_f64()
            .partial_cmp(&a.1.as_f64())
            .unwrap()
            .then(a.0.cmp(&b.0))
    });
    let mut ascending = usable.clone();
    ascending.sort_by(|a, b| {
        a.1.as_f64()
            .partial_cmp(&b.1.as_f64())
            .unwrap()
            .then(a.0.cmp(&b.0))
    });
    let entry = |(t, v): &(String, Value)| json!({"target": t, "value": v});
    let result = match op {
        "sum" => json!(numbers.iter().sum::<f64>()),
        "avg" => json!(numbers.iter().sum::<f64>() / numbers.len() as f64),
        "count" => json!(usable.len()),
        "max" => ranked.first().map_or(Value::Null, entry),
        "min" => ascending.first().map_or(Value::Null, entry),
        "top" => Value::Array(ranked.iter().take(n).map(entry).collect()),
        "bottom" => Value::Array(ascending.iter().take(n).map(entry).collect()),
        "group" => {
            let mut groups: Vec<(Value, Vec<String>)> = Vec::new();
            for (t, v) in &usable {
                match groups.iter_mut().find(|(g, _)| g == v) {
                    Some((_, ts)) => ts.push(t.clone()),
                    None => groups.push((v.clone(), vec![t.clone()])),
                }
            }
            for (_, ts) in &mut groups {
                ts.sort();
            }
            groups.sort_by(|a, b| {
                b.1.len()
                    .cmp(&a.1.len())
                    .then(a.0.to_string().cmp(&b.0.to_string()))
            });
            Value::Array(
                groups
                    .into_iter()
                    .map(|(v, ts)| json!({"value": v, "targets": ts}))
                    .collect(),
            )
        }
        _ => unreachable!(),
    };
    json!({"result": result, "count": usable.len(), "errors": errors})
}

/// Numbers compare as numbers (a sum may come back as 17 or 17.0).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_reduction_equals_the_reduction_of_the_unreduced_fan_out() {
    let f = fleet("rd").await;
    let read = |attribute: &str, path: Option<&str>| {
        let mut r = json!({"type":"read","mbean":TYPES,"attribute":attribute,
                           "target":{"url":"rd-*"},"config":{"ignoreErrors":true}});
        if let Some(p) = path {
            r["path"] = json!(p);
        }
        r
    };
    let unreduced = f.post(&read("Int", None)).await;
    assert_eq!(unreduced["status"], 200, "{unreduced}");
    let per_target = &unreduced["value"];
    assert_eq!(per_target["rd-gamma"]["status"], 403, "{per_target}");
    assert!(per_target["rd-dead"]["error"].is_string(), "{per_target}");
    for (op, n) in [
        ("sum", 0),
        ("avg", 0),
        ("count", 0),
        ("min", 0),
        ("max", 0),
        ("top", 2),
        ("bottom", 1),
        ("group", 0),
    ] {
        let mut reduce = json!({"op": op});
        if n > 0 {
            reduce["n"] = json!(n);
        }
        let mut item = read("Int", None);
        item["reduce"] = reduce;
        let answer = f.post(&item).await;
        assert_eq!(answer["status"], 200, "{op}: {answer}");
        let want = expected(op, n, per_target, None);
        let got = &answer["value"];
        assert!(
            same(&got["result"], &want["result"]),
            "{op}: {got} / {want}"
        );
        assert_eq!(got["count"], want["count"], "{op}");
        let mut failed: Vec<&String> = got["errors"].as_object().unwrap().keys().collect();
        failed.sort();
        assert_eq!(failed, ["rd-dead", "rd-gamma"], "{op}: {got}");
        assert_eq!(got["errors"]["rd-gamma"], per_target["rd-gamma"], "{op}");
        // The client's own request is echoed, reduce included.
        assert_eq!(answer["request"]["reduce"], item["reduce"], "{op}");
    }
    // Ties go by target name: alpha before beta.
    let mut top = read("Int", None);
    top["reduce"] = json!({"op": "top", "n": 1});
    assert_eq!(
        f.post(&top).await["value"]["result"],
        json!([{"target": "rd-alpha", "value": 7}])
    );
    // An inner path, and the item's own path.
    let heap = f.post(&read("HeapMemoryUsage", None)).await;
    let mut by_path = read("HeapMemoryUsage", None);
    by_path["reduce"] = json!({"op": "count", "path": "max"});
    let got = f.post(&by_path).await;
    assert!(
        same(
            &got["value"]["count"],
            &expected("count", 0, &heap["value"], Some("max"))["count"]
        ),
        "{got}"
    );
    // Text values: grouped; summed, each is a listed error.
    let names = f.post(&read("Name", None)).await;
    let mut group = read("Name", None);
    group["reduce"] = json!({"op": "group", "by": "value"});
    let got = f.post(&group).await;
    assert!(
        same(
            &got["value"]["result"],
            &expected("group", 0, &names["value"], None)["result"]
        ),
        "{got}"
    );
    let mut sum = read("Name", None);
    sum["reduce"] = json!({"op": "sum"});
    let got = f.post(&sum).await;
    assert_eq!(got["value"]["count"], 0);
    let error = &got["value"]["errors"]["rd-alpha"];
    assert_eq!(error["error_type"], "jmxgate.NotANumber", "{got}");
    assert_eq!(error["error"], "Not a number: \"rd-alpha\"");
    for a in &f.agents {
        let reset =
            json!({"type":"exec","mbean":"jmxgate.test:type=Operations","operation":"reset"});
        common::direct(a, &reset).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pattern_reads_reduce_each_attribute_over_every_mbean() {
    let f = fleet("rp").await;
    let read = json!({"type":"read","mbean":"jmxgate.test:type=Pattern,name=*","attribute":"Level",
                      "target":{"url":"rp-*"},"config":{"ignoreErrors":true}});
    let unreduced = f.post(&read).await;
    let mut item = read.clone();
    item["reduce"] = json!({"op": "top", "n": 3});
    let got = f.post(&item).await;
    // From the unreduced answers: (target, mbean, Level), largest first.
    let mut levels: Vec<(i64, String, String)> = Vec::new();
    for (target, v) in unreduced["value"].as_object().unwrap() {
        for (mbean, attrs) in v.as_object().unwrap() {
            if let Some(level) = attrs.get("Level").and_then(Value::as_i64) {
                levels.push((level, target.clone(), mbean.clone()));
            }
        }
    }
    levels.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let want: Vec<Value> = levels
        .iter()
        .take(3)
        .map(|(l, t, m)| json!({"target": t, "mbean": m, "value": l}))
        .collect();
    assert_eq!(got["value"]["result"]["Level"], json!(want), "{got}");
    assert_eq!(got["value"]["count"]["Level"], json!(levels.len()));
    // Three live targets with two Pattern MBeans each (gamma's policy
    // denies Int only).
    assert_eq!(levels.len(), 6, "{unreduced}");
}

#[tokio::test(flavor = "multi_thread")]
async fn misuse_is_a_clear_error_and_every_target_is_audited() {
    let f = fleet("rm").await;
    let [alpha, ..] = &f.agents;
    let with = |target: &str, reduce: Value| json!({"type":"read","mbean":TYPES,"attribute":"Int","target":{"url":target},"reduce":reduce});
    let answer = f.post(&with(&alpha.name, json!({"op": "sum"}))).await;
    assert_eq!(answer["status"], 400);
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("address the item to a selector"),
        "{answer}"
    );
    let answer = f.post(&with("rm-*", json!({"op": "median"}))).await;
    assert_eq!(answer["status"], 400);
    assert!(answer["error"]
        .as_str()
        .unwrap()
        .contains("unknown op \"median\""));
    let write = json!({"type":"write","mbean":TYPES,"attribute":"Int","value":1,
                       "target":{"url":"rm-*"},"reduce":{"op":"sum"}});
    let answer = f.post(&write).await;
    assert_eq!(answer["status"], 400);
    assert!(answer["error"]
        .as_str()
        .unwrap()
        .contains("works on read items, not write"));
    // A bulk: the bad item fails alone.
    let bulk = json!([
        with("rm-*", json!({"op": "top"})),
        with("rm-*", json!({"op": "max"}))
    ]);
    let answers = f.post(&bulk).await;
    assert_eq!(answers[0]["status"], 400, "{answers}");
    assert_eq!(answers[1]["status"], 200, "{answers}");
    // One audit record per target of the reduced item, as for any fan-out.
    let records = common::audit_records(&f.dir.path().join("audit"));
    let max_rows: Vec<&Value> = records
        .iter()
        .filter(|r| {
            r["event"] == "item" && r["target"].as_str().is_some_and(|t| t.starts_with("rm-"))
        })
        .collect();
    for target in ["rm-alpha", "rm-beta", "rm-gamma", "rm-dead"] {
        assert!(
            max_rows.iter().any(|r| r["target"] == target),
            "{target}: {max_rows:#?}"
        );
    }
    assert!(max_rows
        .iter()
        .any(|r| r["target"] == "rm-gamma" && r["decision"] == "denied"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_and_the_rust_client_read_reduced_answers() {
    let f = fleet("rc").await;
    let url = f.gw.url("/jolokia");
    let run = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_jmxgate"))
            .args([
                "read", "--url", &url, "--user", USER.0, "--target", "rc-*", TYPES, "Int",
            ])
            .args(extra)
            .env("JMXGATE_PASSWORD", USER.1)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (top, errors) = run(&["--top", "2"]);
    assert_eq!(top, "rc-alpha  7\nrc-beta   7\n");
    assert!(
        errors.starts_with("2 target(s) gave no usable value:"),
        "{errors}"
    );
    assert!(
        errors.contains("rc-gamma: ") && errors.contains("rc-dead: "),
        "{errors}"
    );
    let (sum, _) = run(&["--sum"]);
    assert_eq!(sum, "14  (2 values)\n");
    let item = json!({"type":"read","mbean":TYPES,"attribute":"Int","target":{"url":"rc-*"},
                      "reduce":{"op":"top","n":2}});
    let (json_out, _) = run(&["--top", "2", "--json"]);
    assert_eq!(common::parse(&json_out), f.post(&item).await["value"]);
    let out = Command::new(env!("CARGO_BIN_EXE_jmxgate"))
        .args([
            "read", "--url", &url, "--user", USER.0, "--target", "rc-*", TYPES, "Int", "--top",
            "2", "--sum",
        ])
        .env("JMXGATE_PASSWORD", USER.1)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with"));

    let client = JolokiaClient::builder(&url)
        .user(USER.0, USER.1)
        .target("rc-*")
        .build()
        .unwrap();
    let request = Request::read(TYPES, Some("Int")).unwrap();
    let max = client
        .reduce(&request, &Reduce::new(Op::Max))
        .await
        .unwrap();
    let ranked = max.ranked().unwrap();
    assert_eq!(
        (ranked[0].target.as_str(), &ranked[0].value),
        ("rc-alpha", &json!(7))
    );
    assert_eq!(max.counted(), Some(2));
    assert_eq!(max.errors.len(), 2);
    assert_eq!(max.errors["rc-gamma"].status, Some(403));
    let avg = client
        .reduce(&request, &Reduce::new(Op::Avg))
        .await
        .unwrap();
    assert_eq!(avg.number(), Some(7.0));
    let no_selector = JolokiaClient::builder(&url)
        .user(USER.0, USER.1)
        .build()
        .unwrap();
    let e = no_selector
        .reduce(&request, &Reduce::new(Op::Sum))
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("set the proxy target to a selector"),
        "{e}"
    );
}

/// An agent's per-attribute error in a read with `ignoreErrors` (2.x: an
/// object with `.error`; 1.x: `"ERROR: … (class …)"` text), as
/// `(error_type, error)`.
fn attribute_error(v: &Value) -> Option<(String, String)> {
    if v.get(".error") == Some(&json!(true)) {
        return Some((
            v["error_type"].as_str()?.to_string(),
            v["error"].as_str()?.to_string(),
        ));
    }
    let (message, class) = v
        .as_str()?
        .strip_prefix("ERROR: ")?
        .strip_suffix(')')?
        .rsplit_once(" (class ")?;
    Some((class.to_string(), message.to_string()))
}

/// A read of three attributes with `ignoreErrors`: `Int` (7, 7, and
/// denied on gamma by its policy), `NoSuch` (no such attribute anywhere:
/// each agent's own error) and `NullValue` (null). What no agent could
/// read is listed under `errors` per target and attribute, for every op,
/// count and group included, never folded in as `null`; the null
/// attribute is a value for count and group and no number for the rest.
/// The expectations come from the unreduced fan-out's answers.
#[tokio::test(flavor = "multi_thread")]
async fn values_the_agents_could_not_read_are_listed_never_folded_as_null() {
    let f = fleet("ru").await;
    let attributes = ["Int", "NoSuch", "NullValue"];
    let read = json!({"type":"read","mbean":TYPES,"attribute":attributes,
                      "target":{"url":"ru-*"},"config":{"ignoreErrors":true}});
    let unreduced = f.post(&read).await;
    assert_eq!(unreduced["status"], 200, "{unreduced}");
    let per_target = unreduced["value"].as_object().unwrap();
    assert!(per_target["ru-dead"]["error"].is_string(), "{unreduced}");
    // What each live target's agent answered for NoSuch and for gamma's
    // denied Int: an error in place of the value, in its generation's form.
    for t in ["ru-alpha", "ru-beta", "ru-gamma"] {
        assert!(
            attribute_error(&per_target[t]["NoSuch"]).is_some(),
            "{t}: {unreduced}"
        );
        assert_eq!(per_target[t]["NullValue"], Value::Null, "{t}: {unreduced}");
    }
    assert!(attribute_error(&per_target["ru-gamma"]["Int"]).is_some());

    for op in [
        "count", "group", "sum", "avg", "min", "max", "top", "bottom",
    ] {
        let mut item = read.clone();
        item["reduce"] = match op {
            "top" | "bottom" => json!({"op": op, "n": 5}),
            _ => json!({"op": op}),
        };
        let answer = f.post(&item).await;
        assert_eq!(answer["status"], 200, "{op}: {answer}");
        let got = &answer["value"];
        let counts_null = matches!(op, "count" | "group");
        for attribute in attributes {
            // The reference: each target's value of this attribute that
            // may go in, from the unreduced answers.
            let mut usable = serde_json::Map::new();
            for (target, v) in per_target {
                let Some(v) = v.get(attribute) else { continue };
                let number = v.is_number();
                if attribute_error(v).is_none() && (number || (v.is_null() && counts_null)) {
                    usable.insert(target.clone(), v.clone());
                }
            }
            let want = expected(op, 5, &Value::Object(usable), None);
            assert!(
                same(&got["result"][attribute], &want["result"]),
                "{op} {attribute}: {got} / {want}"
            );
            assert_eq!(
                got["count"][attribute], want["count"],
                "{op} {attribute}: {got}"
            );
        }
        assert_eq!(got["count"]["NoSuch"], 0, "{op}: {got}");
        // Every target is listed: dead as the fan-out says, the live ones
        // with each attribute that gave nothing, in the agents' words.
        let errors = got["errors"].as_object().unwrap();
        assert_eq!(errors.len(), 4, "{op}: {got}");
        // (Its wording changes once its circuit opens.)
        assert!(
            errors["ru-dead"]["status"].as_u64() >= Some(500),
            "{op}: {got}"
        );
        for t in ["ru-alpha", "ru-beta", "ru-gamma"] {
            let listed = errors[t]["attributes"].as_array().unwrap();
            let mut names: Vec<&str> = listed
                .iter()
                .map(|e| e["attribute"].as_str().unwrap())
                .collect();
            names.sort();
            let mut want: Vec<&str> = attributes
                .into_iter()
                .filter(|a| {
                    let v = &per_target[t][*a];
                    attribute_error(v).is_some() || (v.is_null() && !counts_null)
                })
                .collect();
            want.sort();
            assert_eq!(names, want, "{op} {t}: {}", errors[t]);
            for e in listed {
                let v = &per_target[t][e["attribute"].as_str().unwrap()];
                match attribute_error(v) {
                    Some((class, message)) => {
                        assert_eq!(e["error_type"], class.as_str(), "{op} {t}: {e}");
                        assert_eq!(
                            e["error"],
                            format!("Could not be read: {message}"),
                            "{op} {t}"
                        );
                    }
                    None => assert_eq!(
                        e["error"], "Not a number: the value is null",
                        "{op} {t}: {e}"
                    ),
                }
            }
            assert_eq!(errors[t]["status"], 400, "{op} {t}");
            // The summary: the first, and how many more.
            let more = match listed.len() {
                1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            };
            let first = &listed[0];
            assert_eq!(
                errors[t]["error"],
                format!(
                    "{}: {}{more}",
                    first["attribute"].as_str().unwrap(),
                    first["error"].as_str().unwrap()
                ),
                "{op} {t}"
            );
        }
    }

    // One attribute that is null on every target: counted and grouped,
    // and for a sum each target says why it gave no number.
    let null = json!({"type":"read","mbean":TYPES,"attribute":"NullValue",
                      "target":{"url":"ru-*"},"config":{"ignoreErrors":true}});
    let unreduced = f.post(&null).await;
    let mut item = null.clone();
    item["reduce"] = json!({"op": "group", "by": "value"});
    let got = f.post(&item).await;
    let mut live = unreduced["value"].as_object().unwrap().clone();
    live.remove("ru-dead");
    assert!(
        same(
            &got["value"]["result"],
            &expected("group", 0, &Value::Object(live), None)["result"]
        ),
        "{got}"
    );
    item["reduce"] = json!({"op": "sum"});
    let got = f.post(&item).await;
    assert_eq!(got["value"]["count"], 0, "{got}");
    assert_eq!(
        got["value"]["errors"]["ru-alpha"],
        json!({"error_type": "jmxgate.NotANumber", "error": "Not a number: the value is null", "status": 400})
    );
}
