//! Hostile request bodies, generated (proptest) and picked by hand: deep
//! nesting, numbers beyond Java's, lone UTF-16 surrogates, duplicate and
//! escaped keys, NULs, huge strings, broken JSON. The parser never panics
//! and forwards only what it checked; a real gateway process answers every
//! body over HTTP, keeps serving, logs no panic, and its audit log verifies.

use crate::common;

use std::collections::HashMap;
use std::process::Command;

use common::{shared_agents, targets_toml, GatewayProcess};
use jmxgate::pipeline::parse::{parse_get, parse_post};
use jmxgate::protocol::{AgentForm, Params, Request};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::value::RawValue;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_jmxgate");

/// Field names, some spelled with escapes or doubled.
const KEYS: &[&str] = &[
    "type",
    "mbean",
    "attribute",
    "path",
    "value",
    "operation",
    "arguments",
    "config",
    "target",
    "url",
    "user",
    "password",
    "maxDepth",
    "ignoreErrors",
    "t\\u0061rget",
    "typ\\u0065",
    "k\\ud800",
    "",
];

/// Scalars as JSON text, hostile ones among them.
fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| format!("{f:e}")),
        "[1-9][0-9]{18,400}",
        "-[1-9][0-9]{18,40}",
        Just("1e400".to_string()),
        Just("-1e400".to_string()),
        Just("1e-400".to_string()),
        Just("-0".to_string()),
        Just("true".to_string()),
        Just("null".to_string()),
        "[a-zA-Z0-9:=,*/!. ]{0,24}".prop_map(|s| format!("\"{s}\"")),
        prop_oneof![
            Just(r#""\ud800""#),
            Just(r#""x\udc00""#),
            Just(r#""\ud83d\ude00""#),
            Just(r#""\ud800\u0041""#),
            Just(r#""\u0000""#),
            Just(r#""a\"b\\""#),
            Just(r#""read""#),
            Just(r#""write""#),
            Just(r#""exec""#),
            Just(r#""list""#),
            Just(r#""search""#),
            Just(r#""version""#),
            Just(r#""jmxgate.test:type=Types""#),
            Just(r#""jmxgate.test:type=Operations""#),
            Just(r#""java.lang:type=Memory""#),
            Just(r#""Name""#),
            Just(r#""echo""#),
            Just(r#""alpha""#),
            Just(r#""http://u:secret@127.0.0.1:1/jolokia""#),
        ]
        .prop_map(str::to_string),
        (1usize..70_000).prop_map(|n| format!("\"{}\"", "x".repeat(n))),
    ]
}

/// JSON text: scalars, arrays, objects with duplicate keys, deep wrappers.
fn json() -> impl Strategy<Value = String> {
    let tree = scalar().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|kv| {
                let fields: Vec<String> = kv.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                format!("{{{}}}", fields.join(","))
            }),
        ]
    });
    (tree, 0usize..300, any::<bool>()).prop_map(|(v, depth, objects)| {
        if objects {
            format!("{}{v}{}", "{\"k\":".repeat(depth), "}".repeat(depth))
        } else {
            format!("{}{v}{}", "[".repeat(depth), "]".repeat(depth))
        }
    })
}

/// One request-shaped object: a type and fields from [`KEYS`].
fn item() -> impl Strategy<Value = String> {
    let kind = prop::sample::select(
        &[
            "read", "write", "exec", "search", "list", "version", "READ", "bogus", "config",
            "\\ud800",
        ][..],
    );
    let mbean = prop::sample::select(
        &[
            "jmxgate.test:type=Types",
            "jmxgate.test:type=Operations",
            "java.lang:type=Memory",
            "*:*",
            "bad",
        ][..],
    );
    (
        kind,
        mbean,
        prop::collection::vec((prop::sample::select(KEYS), json()), 0..5),
    )
        .prop_map(|(kind, mbean, fields)| {
            let mut text = format!("{{\"type\":\"{kind}\",\"mbean\":\"{mbean}\"");
            for (k, v) in fields {
                text.push_str(&format!(",\"{k}\":{v}"));
            }
            text.push('}');
            text
        })
}

/// A POST body: one item, a bulk, any JSON, or one of those broken.
fn body() -> impl Strategy<Value = Vec<u8>> {
    let whole = prop_oneof![
        3 => item(),
        3 => prop::collection::vec(item(), 0..6).prop_map(|v| format!("[{}]", v.join(","))),
        1 => json(),
    ];
    (whole, any::<u8>(), any::<prop::sample::Index>(), 0u8..8).prop_map(|(text, byte, at, how)| {
        let mut bytes = text.into_bytes();
        let i = at.index(bytes.len() + 1);
        match how {
            0 => bytes.truncate(i),
            1 => bytes.insert(i, byte),
            _ => {}
        }
        bytes
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// No body makes the parser panic; every item's echo is JSON; a parsed
    /// item is forwarded as JSON that parses back to the same command.
    #[test]
    fn the_parser_takes_any_body(body in body()) {
        if let Ok(parsed) = parse_post(&body, None, 100) {
            for item in &parsed.items {
                prop_assert!(serde_json::from_str::<&RawValue>(item.echo.get()).is_ok());
                if let Ok(p) = &item.parsed {
                    let forwarded = serde_json::to_string(&AgentForm(&p.request)).unwrap();
                    let raw: &RawValue = serde_json::from_str(&forwarded).unwrap();
                    let (again, _) = Request::from_item(raw, &Params::default()).unwrap();
                    prop_assert_eq!(&again.command, &p.request.command);
                }
            }
        }
    }

    #[test]
    fn any_get_path_parses_or_fails_cleanly(path in "(/[a-zA-Z0-9:=,*!%\"\\[\\]. ]{0,12}){0,6}") {
        let _ = parse_get(&path, None);
    }
}

/// `count` bodies from [`body`], the same in every run.
fn sample_bodies(count: usize) -> Vec<Vec<u8>> {
    let mut runner = TestRunner::deterministic();
    let strategy = body();
    (0..count)
        .map(|_| strategy.new_tree(&mut runner).unwrap().current())
        .collect()
}

/// The issue's cases, each in a bulk next to an item that must still be
/// answered.
fn hand_picked() -> Vec<(String, &'static str)> {
    let big = "9".repeat(400);
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let w = |value: &str| {
        format!(
            r#"{{"type":"write","mbean":"jmxgate.test:type=Types","attribute":"Name","value":{value}}}"#
        )
    };
    let x = |args: &str| {
        format!(
            r#"{{"type":"exec","mbean":"jmxgate.test:type=Operations","operation":"echo","arguments":[{args}]}}"#
        )
    };
    vec![
        (w(r#""\ud800""#), "lone UTF-16 surrogate"),
        (w("1e400"), "outside the range of a Java double"),
        (w(&big), "outside the range of a Java long"),
        (w(&deep), "deeper than 64 levels"),
        (x(&big), "\"arguments[0]\""),
        (x(&deep), "deeper than 64 levels"),
        (x(r#""\udc00""#), "lone UTF-16 surrogate"),
        (
            r#"{"type":"version","config":{"maxDepth":1e400}}"#.into(),
            "Invalid value of maxDepth",
        ),
        (
            format!(r#"{{"type":"version","config":{{"maxDepth":{big}}}}}"#),
            "Invalid value of maxDepth",
        ),
        (
            r#"{"type":"read","mbean":"jmxgate.test:type=\ud800","target":{"url":"alpha","password":"p"}}"#
                .into(),
            "lone UTF-16 surrogate",
        ),
    ]
}

#[test]
fn a_gateway_process_answers_every_hostile_body_and_keeps_serving() {
    let [a, ..] = shared_agents();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\ndefault_target = \"alpha\"\n\n{}[audit]\ndir = \"{}\"\n",
            targets_toml(&[a]),
            dir.path().join("audit").display()
        ),
    )
    .unwrap();
    let gateway = GatewayProcess::start(&config, "warn,jmxgate=info");
    let url = format!("http://{}/jolokia", gateway.addr);

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let http = common::http_client();
        let post = |body: Vec<u8>| {
            http.post(&url)
                .header("content-type", "application/json")
                .body(body)
                .send()
        };
        // Each case fails alone, says why, and its neighbour is answered.
        for (case, says) in hand_picked() {
            let body = format!(r#"[{case},{{"type":"version"}}]"#);
            let resp = post(body.into_bytes())
                .await
                .unwrap_or_else(|e| panic!("no answer to {case}: {e}"));
            assert_eq!(resp.status(), 200, "{case}");
            let text = resp.text().await.unwrap();
            // The echo holds the client's own numbers, beyond what a JSON
            // tree here takes: read the answers' fields one by one.
            let answer: Vec<HashMap<String, Box<RawValue>>> = serde_json::from_str(&text).unwrap();
            let field =
                |i: usize, k: &str| serde_json::from_str::<Value>(answer[i][k].get()).unwrap();
            assert_eq!(field(0, "status"), 400, "{case}: {text}");
            let error = field(0, "error");
            assert!(error.as_str().unwrap().contains(says), "{case}: {error}");
            assert_eq!(field(1, "status"), 200, "{case}: {text}");
            assert!(!text.contains("\"p\""), "{text}");
        }
        // Generated bodies: every one gets an HTTP answer.
        for body in sample_bodies(300) {
            let shown = String::from_utf8_lossy(&body[..body.len().min(300)]).to_string();
            let resp = post(body)
                .await
                .unwrap_or_else(|e| panic!("no answer to {shown}: {e}"));
            let status = resp.status().as_u16();
            assert!(matches!(status, 200 | 400 | 413), "{status} for {shown}");
            resp.bytes().await.unwrap();
        }
        // Still serving: a read reaches the agent.
        let answer = common::get_json(
            &http,
            &format!("{url}/read/jmxgate.test:type=Types/LongMax"),
        )
        .await;
        assert_eq!(answer["value"], i64::MAX, "{answer}");
    });

    let log = gateway.stop();
    assert!(
        !log.iter().any(|l| l.contains("panicked")),
        "the gateway panicked:\n{}",
        log.join("\n")
    );
    // The hostile items were audited as invalid, and the chain holds.
    let files = jmxgate::audit::chain::files_in(&dir.path().join("audit")).unwrap();
    let invalid = files
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|l| l.contains("\"decision\":\"invalid\"") && l.contains("\"status\":400"))
        .count();
    assert!(
        invalid >= hand_picked().len(),
        "{invalid} invalid items audited"
    );
    let verified = Command::new(BIN)
        .args(["audit", "verify"])
        .args(&files)
        .output()
        .unwrap();
    assert!(
        verified.status.success(),
        "{}{}",
        String::from_utf8_lossy(&verified.stdout),
        String::from_utf8_lossy(&verified.stderr)
    );
}
