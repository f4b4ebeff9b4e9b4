//! Every request type, over GET and POST, through both addressing modes,
//! answered by real Jolokia 1.7.1 agents: the gateway's answer must equal
//! the agent's own (timestamps and echo aside).

use crate::common;

use common::{comparable, direct, shared_agents, targets_toml, Agent, Gateway};
use serde_json::{json, Value};

const T: &str = "jmxgate.test:type=Types";
const OPS: &str = "jmxgate.test:type=Operations";

async fn gateway() -> Gateway {
    let [a, b, c] = shared_agents();
    Gateway::start(&targets_toml(&[a, b, c])).await
}

/// Requests whose answers don't change between two calls.
fn corpus() -> Vec<Value> {
    vec![
        json!({"type":"read","mbean":T,"attribute":"LongMax"}),
        json!({"type":"read","mbean":T,"attribute":"Double"}),
        json!({"type":"read","mbean":T,"attribute":"Special"}),
        json!({"type":"read","mbean":T,"attribute":"IntArray"}),
        json!({"type":"read","mbean":T,"attribute":"Composite"}),
        json!({"type":"read","mbean":T,"attribute":"Tabular"}),
        json!({"type":"read","mbean":T,"attribute":"NullValue"}),
        json!({"type":"read","mbean":T,"attribute":"Date"}),
        json!({"type":"read","mbean":T,"attribute":"ObjectName"}),
        json!({"type":"read","mbean":T,"attribute":"Nested","path":"level1/level2/leaf"}),
        json!({"type":"read","mbean":T,"attribute":"Nested","path":"slash!/key"}),
        json!({"type":"read","mbean":T,"attribute":"Nested","config":{"maxDepth":1}}),
        json!({"type":"read","mbean":T,"attribute":["LongMax","Double"]}),
        json!({"type":"read","mbean":"jmxgate.test:type=Pattern,*","attribute":"Value"}),
        json!({"type":"read","mbean":"jmxgate.test:type=Pattern,name=a"}),
        json!({"type":"read","mbean":T,"attribute":"NoSuchAttribute"}),
        json!({"type":"read","mbean":"jmxgate.test:type=Missing","attribute":"X"}),
        json!({"type":"search","mbean":"jmxgate.test:*"}),
        json!({"type":"search","mbean":"nothing.here:*"}),
        json!({"type":"list","path":"jmxgate.test/type=Operations"}),
        json!({"type":"list","path":"jmxgate.test","config":{"maxDepth":2}}),
        json!({"type":"list","path":"no.such.domain"}),
        json!({"type":"exec","mbean":OPS,"operation":"add(int,int)","arguments":[2,3]}),
        json!({"type":"exec","mbean":OPS,"operation":"add(long,long,long)","arguments":[1,2,3]}),
        json!({"type":"exec","mbean":OPS,"operation":"add(java.lang.String,java.lang.String)","arguments":["a","b"]}),
        json!({"type":"exec","mbean":OPS,"operation":"add","arguments":[1,2]}),
        json!({"type":"exec","mbean":OPS,"operation":"echo","arguments":["héllo/€"]}),
        json!({"type":"exec","mbean":OPS,"operation":"noArgs"}),
        json!({"type":"exec","mbean":OPS,"operation":"arrayLength","arguments":[["a","b","c"]]}),
        json!({"type":"exec","mbean":OPS,"operation":"fail"}),
    ]
}

/// Jolokia 1.7.1 marks what `maxDepth` cut off in a list answer with
/// `"1"`, but now and then, while it answers another request at the same
/// time, with the number 1 (seen straight from the agent, about once in
/// 40 tries with concurrent requests). The gateway sends a bulk's list
/// items apart from its other items, at the same time, so the two answers
/// may differ in that mark alone: make it the same in both.
fn cut_lists_alike(corpus: &[Value], mut answers: Value) -> Value {
    fn mark_as_text(v: &mut Value) {
        match v {
            Value::Number(n) if n.as_u64() == Some(1) => *v = json!("1"),
            Value::Object(o) => o.values_mut().for_each(mark_as_text),
            _ => {}
        }
    }
    for (req, answer) in corpus.iter().zip(answers.as_array_mut().unwrap()) {
        if req["type"] == "list" && req["config"].get("maxDepth").is_some() {
            if let Some(value) = answer.get_mut("value") {
                mark_as_text(value);
            }
        }
    }
    answers
}

/// What the agent itself answers, asked the way the gateway asks it.
fn as_forwarded(req: &Value) -> Value {
    let mut r = req.clone();
    let config = r
        .as_object_mut()
        .unwrap()
        .entry("config")
        .or_insert_with(|| json!({}));
    config["includeStackTrace"] = json!("false");
    r
}

/// Whether a 2.x agent refuses this corpus item as structurally bad: it
/// answers such an item, and any bulk holding it, with a whole plain-text
/// HTTP 400 instead of a JSON error (1.7.1 answers a JSON error with status
/// 400 for the item alone). In the corpus: exec of the overloaded `add`
/// without a signature.
fn refused_whole_by_v2(req: &Value) -> bool {
    req["type"] == "exec" && req["operation"] == "add"
}

/// Sends `req` alone straight to a 2.x agent and checks that it refuses it
/// with a plain-text HTTP 400; returns the agent's message (the text after
/// the `400 (Bad Request)` line).
async fn v2_refusal(agent: &Agent, req: &Value) -> String {
    let resp = common::http_client()
        .post(agent.url())
        .header("content-type", "application/json")
        .body(as_forwarded(req).to_string())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let content_type = resp.headers()["content-type"].to_str().unwrap().to_string();
    let text = resp.text().await.unwrap();
    assert_eq!(status, 400, "{req}: the agent's own answer {text}");
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    let message = text
        .strip_prefix("400 (Bad Request)")
        .unwrap_or_else(|| panic!("{req}: the agent's own answer {text}"))
        .trim();
    assert!(!message.is_empty(), "{req}: the agent's own answer {text}");
    message.to_string()
}

/// The gateway's answer for an item a 2.x agent refuses whole: a JSON error
/// for that item alone, status 400, carrying the agent's message.
fn assert_refusal_as_item(got: &Value, message: &str, what: &str) {
    assert_eq!(got["status"], 400, "{what}: {got}");
    assert_eq!(
        got["error_type"], "java.lang.IllegalArgumentException",
        "{what}: {got}"
    );
    assert!(
        got["error"].as_str().is_some_and(|e| e.contains(message)),
        "{what}: the agent's message {message:?} in {got}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn post_answers_equal_the_agents_own_in_both_modes() {
    let gw = gateway().await;
    let alpha = &shared_agents()[0];
    for req in corpus() {
        let mut proxied = req.clone();
        proxied["target"] = json!({"url": "alpha"});
        let (status, virt) = gw.post("/jolokia/targets/alpha", &req).await;
        assert_eq!(status, 200, "virtual URL, {req}: {virt}");
        let (status, prox) = gw.post("/jolokia", &proxied).await;
        assert_eq!(status, 200, "proxy mode, {req}: {prox}");

        if alpha.generation.is_v2() && refused_whole_by_v2(&req) {
            // 2.x refuses the item with a plain-text HTTP 400, which is
            // not a Jolokia answer; the gateway turns it into one.
            let message = v2_refusal(alpha, &req).await;
            assert_refusal_as_item(&virt, &message, &format!("virtual URL, {req}"));
            assert_refusal_as_item(&prox, &message, &format!("proxy mode, {req}"));
            continue;
        }
        let want = comparable(direct(alpha, &as_forwarded(&req)).await);
        assert_eq!(comparable(virt), want, "virtual URL, {req}");
        assert_eq!(comparable(prox), want, "proxy mode, {req}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bulk_answers_equal_the_agents_own_bulk() {
    let gw = gateway().await;
    let beta = &shared_agents()[1];
    let corpus = corpus();
    let (status, got) = gw
        .post("/jolokia/targets/beta", &Value::Array(corpus.clone()))
        .await;
    assert_eq!(status, 200, "{got}");
    if !beta.generation.is_v2() {
        let direct_bulk: Vec<Value> = corpus.iter().map(as_forwarded).collect();
        let want = comparable(direct(beta, &Value::Array(direct_bulk)).await);
        assert_eq!(
            cut_lists_alike(&corpus, comparable(got)),
            cut_lists_alike(&corpus, want)
        );
        return;
    }
    // 2.x refuses a whole bulk with a plain-text HTTP 400 when one item is
    // structurally bad: ask it for those items alone, and for the rest as
    // one bulk. Through the gateway, only the bad item fails.
    let got = got.as_array().unwrap_or_else(|| panic!("an array: {got}"));
    assert_eq!(got.len(), corpus.len(), "{got:?}");
    let (refused, rest): (Vec<_>, Vec<_>) = corpus
        .iter()
        .zip(got)
        .partition(|(req, _)| refused_whole_by_v2(req));
    assert!(!refused.is_empty());
    for (req, got) in refused {
        let message = v2_refusal(beta, req).await;
        assert_refusal_as_item(got, &message, &format!("bulk item {req}"));
    }
    let direct_bulk: Vec<Value> = rest.iter().map(|(req, _)| as_forwarded(req)).collect();
    let want = comparable(direct(beta, &Value::Array(direct_bulk)).await);
    let got_rest: Vec<Value> = rest.iter().map(|(_, got)| (*got).clone()).collect();
    assert_eq!(comparable(Value::Array(got_rest)), want);
}

#[tokio::test(flavor = "multi_thread")]
async fn get_paths_equal_their_post_form() {
    let gw = gateway().await;
    let gamma = &shared_agents()[2];
    let cases = [
        (
            "read/jmxgate.test:type=Types/LongMax",
            json!({"type":"read","mbean":T,"attribute":"LongMax"}),
        ),
        (
            "read/jmxgate.test:type=Types/LongMax,Double",
            json!({"type":"read","mbean":T,"attribute":["LongMax","Double"]}),
        ),
        (
            "read/jmxgate.test:type=Types/Nested/level1/level2/leaf",
            json!({"type":"read","mbean":T,"attribute":"Nested","path":"level1/level2/leaf"}),
        ),
        // `!/` is a slash inside a segment.
        (
            "read/jmxgate.test:type=Types/Nested/slash!/key",
            json!({"type":"read","mbean":T,"attribute":"Nested","path":"slash!/key"}),
        ),
        // `*` as the attribute means all of them.
        (
            "read/jmxgate.test:type=Pattern,name=b/*",
            json!({"type":"read","mbean":"jmxgate.test:type=Pattern,name=b"}),
        ),
        (
            "read/jmxgate.test:type=Pattern,*/Value",
            json!({"type":"read","mbean":"jmxgate.test:type=Pattern,*","attribute":"Value"}),
        ),
        (
            "search/jmxgate.test:type=Pattern,*",
            json!({"type":"search","mbean":"jmxgate.test:type=Pattern,*"}),
        ),
        (
            "list/jmxgate.test/type=Counter",
            json!({"type":"list","path":"jmxgate.test/type=Counter"}),
        ),
        (
            "exec/jmxgate.test:type=Operations/add(int,int)/20/22",
            json!({"type":"exec","mbean":OPS,"operation":"add(int,int)","arguments":["20","22"]}),
        ),
        (
            "exec/jmxgate.test:type=Operations/echo/a!!b!/c",
            json!({"type":"exec","mbean":OPS,"operation":"echo","arguments":["a!b/c"]}),
        ),
        (
            "exec/jmxgate.test:type=Operations/echo/\"\"",
            json!({"type":"exec","mbean":OPS,"operation":"echo","arguments":[""]}),
        ),
        (
            "exec/jmxgate.test:type=Operations/echo/[null]",
            json!({"type":"exec","mbean":OPS,"operation":"echo","arguments":[null]}),
        ),
        (
            "exec/jmxgate.test:type=Operations/arrayLength/x,y",
            json!({"type":"exec","mbean":OPS,"operation":"arrayLength","arguments":["x,y"]}),
        ),
    ];
    for (path, post_form) in cases {
        let want = comparable(direct(gamma, &as_forwarded(&post_form)).await);
        assert_eq!(want["status"], 200, "{path}: direct answer {want}");
        let (status, got) = gw.get(&format!("/jolokia/targets/gamma/{path}")).await;
        assert_eq!(status, 200);
        assert_eq!(comparable(got.clone()), want, "GET {path}");
        // The echo is the typed request, as agents echo GETs.
        assert_eq!(got["request"], post_form, "echo of GET {path}");
        // The same path through the `p=` parameter.
        let encoded: String =
            url::form_urlencoded::byte_serialize(format!("/{path}").as_bytes()).collect();
        let (_, via_p) = gw
            .get(&format!("/jolokia/targets/gamma/?p={encoded}"))
            .await;
        assert_eq!(comparable(via_p), want, "p={path}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn percent_encoded_paths_are_decoded_once() {
    let gw = gateway().await;
    let (_, got) = gw
        .get("/jolokia/targets/alpha/read/jmxgate.test%3Atype%3DTypes/Nested/slash%21%2Fkey")
        .await;
    assert_eq!(got["value"], "slashed", "{got}");
    let (_, got) = gw
        .get("/jolokia/targets/alpha/exec/jmxgate.test:type=Operations/echo/h%C3%A9llo%20w")
        .await;
    assert_eq!(got["value"], "héllo w", "{got}");
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_return_the_old_value_over_get_and_post() {
    let agent = Agent::start("writer");
    let gw = Gateway::start(&targets_toml(&[&agent])).await;
    let (_, r) = gw
        .get("/jolokia/targets/writer/write/jmxgate.test:type=Types/Name/first")
        .await;
    assert_eq!(r["status"], 200, "{r}");
    assert_eq!(r["value"], "writer");
    let (_, r) = gw
        .post(
            "/jolokia",
            &json!({"type":"write","mbean":T,"attribute":"Name","value":"second","target":{"url":"writer"}}),
        )
        .await;
    assert_eq!(r["value"], "first", "{r}");
    let (_, r) = gw
        .get("/jolokia/targets/writer/write/jmxgate.test:type=Types/Name/[null]")
        .await;
    assert_eq!(r["value"], "second");
    let (_, r) = gw
        .get("/jolokia/targets/writer/read/jmxgate.test:type=Types/Name")
        .await;
    assert_eq!(r["value"], Value::Null);
    let (_, r) = gw
        .get("/jolokia/targets/writer/write/jmxgate.test:type=Types/Name/\"\"")
        .await;
    assert_eq!(r["value"], Value::Null);
    let (_, r) = gw
        .get("/jolokia/targets/writer/read/jmxgate.test:type=Types/Name")
        .await;
    assert_eq!(r["value"], "");
    // A write into a map along an inner path, and typed values.
    let (_, r) = gw
        .post(
            "/jolokia/targets/writer",
            &json!([
                {"type":"write","mbean":T,"attribute":"Counter","value":9223372036854775807i64},
                {"type":"read","mbean":T,"attribute":"Counter"},
                {"type":"write","mbean":T,"attribute":"Flag","value":true},
                {"type":"write","mbean":T,"attribute":"Map","value":5,"path":"two"},
                {"type":"read","mbean":T,"attribute":"Map","path":"two"},
            ]),
        )
        .await;
    assert_eq!(r[0]["value"], 0, "{r}");
    assert_eq!(r[1]["value"], json!(9223372036854775807i64), "{r}");
    assert_eq!(r[2]["value"], false, "{r}");
    assert_eq!(r[3]["value"], 2, "{r}");
    assert_eq!(r[4]["value"], 5, "{r}");
}

#[tokio::test(flavor = "multi_thread")]
async fn version_without_target_is_the_gateways_own() {
    let gw = gateway().await;
    let (status, r) = gw.get("/jolokia/version").await;
    assert_eq!(status, 200);
    let v = &r["value"];
    assert!(v["protocol"].as_str().unwrap().starts_with("8."), "{r}");
    assert_eq!(v["agent"], env!("CARGO_PKG_VERSION"));
    assert_eq!(v["details"]["agent_id"], v["id"]);
    assert_eq!(v["details"]["secured"], false);
    assert_eq!(v["details"]["url"], gw.url("/jolokia"));
    assert_eq!(v["info"]["jmxgate"]["targets"], 3);
    assert_eq!(r["request"], json!({"type":"version"}));
    // Bare /jolokia and POST give the same answer.
    let (_, bare) = gw.get("/jolokia").await;
    assert_eq!(bare["value"], *v);
    let (_, post) = gw.post("/jolokia", &json!({"type":"version"})).await;
    assert_eq!(post["value"], *v);
    // With a target, the agent's own version comes back: what the agent
    // says when asked directly (1.7.1 / 7.2 or 2.x / 8.2).
    let alpha = &shared_agents()[0];
    let own = direct(alpha, &json!({"type":"version"})).await;
    assert_eq!(own["value"]["agent"], alpha.generation.version(), "{own}");
    let (_, agent) = gw.get("/jolokia/targets/alpha/version").await;
    assert_eq!(agent["value"]["agent"], own["value"]["agent"], "{agent}");
    assert_eq!(
        agent["value"]["protocol"], own["value"]["protocol"],
        "{agent}"
    );
}

/// `version` reports the request limits in force: after a reload changes
/// them, the new ones (they once stayed those of the start).
#[tokio::test(flavor = "multi_thread")]
async fn version_reports_the_limits_a_reload_set() {
    let [a, b, c] = shared_agents();
    let targets = targets_toml(&[a, b, c]);
    let gw = Gateway::start(&format!("max_bulk_items = 7\n{targets}")).await;
    let (_, r) = gw.get("/jolokia/version").await;
    assert_eq!(r["value"]["config"]["maxBulkItems"], "7", "{r}");
    let reloaded = jmxgate::Config::parse(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nmax_bulk_items = 9\nmax_body_bytes = 100000\n{targets}"
    ))
    .and_then(|c| c.validate())
    .unwrap();
    gw.gateway.reload(&reloaded).unwrap();
    let (_, r) = gw.get("/jolokia/version").await;
    assert_eq!(r["value"]["config"]["maxBulkItems"], "9", "{r}");
    assert_eq!(r["value"]["config"]["maxBodyBytes"], "100000", "{r}");
    // And they are the limits enforced: a bulk of 9 passes, 10 does not.
    let bulk = |n: usize| Value::Array(vec![json!({"type":"version"}); n]);
    let (status, r) = gw.post("/jolokia", &bulk(9)).await;
    assert_eq!((status, r.as_array().map(Vec::len)), (200, Some(9)), "{r}");
    let (status, _) = gw.post("/jolokia", &bulk(10)).await;
    assert_eq!(status, 400);
}

#[tokio::test(flavor = "multi_thread")]
async fn echo_is_the_clients_request_without_credentials() {
    let gw = gateway().await;
    let req = json!({"type":"read","mbean":T,"attribute":"LongMax",
        "target":{"url":"alpha","user":"someone","password":"hunter2"},"config":{"ignoreErrors":true}});
    let (_, r) = gw.post("/jolokia", &req).await;
    assert_eq!(
        r["request"],
        json!({"type":"read","mbean":T,"attribute":"LongMax","target":{"url":"alpha"},"config":{"ignoreErrors":true}})
    );
    let text = gw
        .http
        .post(gw.url("/jolokia"))
        .body(req.to_string())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !text.contains("hunter2") && !text.contains("someone"),
        "{text}"
    );

    let (_, r) = gw
        .get("/jolokia/targets/alpha/read/jmxgate.test:type=Types/LongMax?includeRequest=false")
        .await;
    assert!(r.get("request").is_none(), "{r}");
    assert_eq!(r["value"], json!(9223372036854775807i64));
}

#[tokio::test(flavor = "multi_thread")]
async fn stack_traces_only_when_asked() {
    let gw = gateway().await;
    let path = "/jolokia/targets/alpha/exec/jmxgate.test:type=Operations/fail";
    let (_, r) = gw.get(path).await;
    assert_eq!(r["status"], 500);
    assert!(
        r["error"].as_str().unwrap().contains("deliberate failure"),
        "{r}"
    );
    assert!(r.get("stacktrace").is_none(), "{r}");
    let (_, r) = gw.get(&format!("{path}?includeStackTrace=true")).await;
    assert!(
        r["stacktrace"]
            .as_str()
            .unwrap()
            .contains("IllegalStateException"),
        "{r}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn processing_parameters_reach_the_agent_and_are_validated() {
    let gw = gateway().await;
    // Once in a while 1.7.1 answered this first read at full depth when the
    // gateway's start-up health probe reached the agent at the same moment
    // (never seen directly, nor after the probe): let the probe finish.
    gw.wait_until_probed().await;
    let (_, r) = gw
        .get("/jolokia/targets/alpha/read/jmxgate.test:type=Types/Nested?maxDepth=1")
        .await;
    assert!(r["value"]["level1"].is_string(), "maxDepth=1 flattens: {r}");
    let (_, r) = gw
        .get("/jolokia/targets/alpha/read/jmxgate.test:type=Types/LongMax,NoSuch?ignoreErrors=true")
        .await;
    assert_eq!(r["status"], 200, "{r}");
    assert_eq!(r["value"]["LongMax"], json!(9223372036854775807i64), "{r}");
    // An ignored error is a string "ERROR: …" in 1.7.1; 2.x answers an
    // error object marked `.error` in its place.
    if shared_agents()[0].generation.is_v2() {
        let err = &r["value"]["NoSuch"];
        assert_eq!(err[".error"], true, "{r}");
        assert_eq!(
            err["error_type"], "javax.management.AttributeNotFoundException",
            "{r}"
        );
        assert!(err["error"].as_str().unwrap().contains("NoSuch"), "{r}");
    } else {
        assert!(
            r["value"]["NoSuch"].as_str().unwrap().starts_with("ERROR"),
            "{r}"
        );
    }
    let (_, r) = gw
        .get("/jolokia/targets/alpha/read/jmxgate.test:type=Types/LongMax,NoSuch")
        .await;
    assert_eq!(r["status"], 404, "without ignoreErrors: {r}");
    // A request's own config beats the query.
    let (_, r) = gw
        .post(
            "/jolokia/targets/alpha?maxDepth=1",
            &json!({"type":"read","mbean":T,"attribute":"Nested","config":{"maxDepth":"5"}}),
        )
        .await;
    assert_eq!(r["value"]["level1"]["level2"]["num"], 7, "{r}");

    for bad in [
        "maxDepth=abc",
        "ignoreErrors=maybe",
        "mimeType=text/html",
        "callback=x()",
    ] {
        let resp = gw
            .http
            .get(gw.url(&format!("/jolokia/targets/alpha/version?{bad}")))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "{bad}");
        let body: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
        let key = bad.split('=').next().unwrap();
        assert_eq!(body["error"], format!("Invalid value of {key} parameter"));
    }
    // A bad value in one item's config fails that item only.
    let (status, r) = gw
        .post(
            "/jolokia/targets/alpha",
            &json!([{"type":"version","config":{"maxDepth":"x"}}, {"type":"version"}]),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(r[0]["status"], 400);
    assert_eq!(r[1]["status"], 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn mime_type_and_jsonp() {
    let gw = gateway().await;
    let resp = gw
        .http
        .get(gw.url("/jolokia/version"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.headers()["content-type"],
        "application/json; charset=utf-8"
    );
    let resp = gw
        .http
        .get(gw.url("/jolokia/version?mimeType=text/plain"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/plain; charset=utf-8");
    // JSONP is answered to a page (its Referer) the caller's roles admit.
    let resp = gw
        .http
        .get(gw.url("/jolokia/version?callback=handle"))
        .header("referer", "http://console.example/page.html")
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );
    let text = resp.text().await.unwrap();
    assert!(
        text.starts_with("handle({") && text.ends_with("});"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_are_reachable_by_every_documented_target_form() {
    let gw = gateway().await;
    let port = shared_agents()[1].port;
    // Jolokia reads `service:jmx:jolokia` with a port ending in 443 as
    // HTTPS; the agent's port is random, so such a port says http.
    let connector = if port.to_string().ends_with("443") {
        "service:jmx:jolokia+http"
    } else {
        "service:jmx:jolokia"
    };
    for url in [
        "beta".to_string(),
        format!("http://127.0.0.1:{port}/jolokia"),
        format!("http://127.0.0.1:{port}/jolokia/"),
        format!("{connector}://127.0.0.1:{port}/jolokia"),
        format!("service:jmx:jolokia+http://127.0.0.1:{port}/jolokia/"),
    ] {
        let (_, r) = gw
            .post(
                "/jolokia",
                &json!({"type":"read","mbean":T,"attribute":"Name","target":{"url":url}}),
            )
            .await;
        assert_eq!(r["value"], "beta", "{url}: {r}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_with_jolokias_default_text_plain_answers_work() {
    // Jolokia 1.x answers `text/plain` unless configured otherwise; the
    // gateway reads the JSON regardless and answers `application/json`.
    let agent = Agent::start_with("plain", &["--mime", "text/plain"]);
    let direct_type = common::http_client()
        .get(format!("{}/version", agent.url()))
        .send()
        .await
        .unwrap()
        .headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(direct_type.starts_with("text/plain"), "{direct_type}");
    let gw = Gateway::start(&targets_toml(&[&agent])).await;
    let resp = gw
        .http
        .get(gw.url("/jolokia/targets/plain/read/jmxgate.test:type=Types/LongMax"))
        .send()
        .await
        .unwrap();
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    let body: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    assert_eq!(body["value"], json!(9223372036854775807i64));
}
