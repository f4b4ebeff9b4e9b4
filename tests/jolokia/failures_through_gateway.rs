//! Failures stay per item and the gateway keeps serving: unknown, dead,
//! slow and misconfigured agents, malformed items, hostile target URLs,
//! garbage bodies.

use crate::common;

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{dead_port, shared_agents, targets_toml, Agent, Gateway, Generation};
use serde_json::{json, Value};

const T: &str = "jmxgate.test:type=Types";
const OPS: &str = "jmxgate.test:type=Operations";

fn read_name(target: &str) -> Value {
    json!({"type":"read","mbean":T,"attribute":"Name","target":{"url":target}})
}

async fn assert_still_serving(gw: &Gateway) {
    let (status, r) = gw
        .get("/jolokia/targets/alpha/read/jmxgate.test:type=Types/Name")
        .await;
    assert_eq!(status, 200);
    assert_eq!(r["value"], "alpha", "gateway no longer serves: {r}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_mixed_bulk_comes_back_complete_in_order_within_the_slow_agents_timeout() {
    let [a, b, c] = shared_agents();
    let slow = Agent::start("slow");
    let config = format!(
        "{}[[targets]]\nname = \"dead\"\nurl = \"http://127.0.0.1:{}/jolokia\"\nconnect_timeout = \"1s\"\n\n\
         [[targets]]\nname = \"slow\"\nurl = \"{}\"\nrequest_timeout = \"1500ms\"\n",
        targets_toml(&[a, b, c]),
        dead_port(),
        slow.url()
    );
    let gw = Gateway::start(&config).await;
    let bulk = json!([
        read_name("alpha"),
        read_name("nobody"),
        {"type":"exec","mbean":OPS,"operation":"sleep","arguments":[10000],"target":{"url":"slow"}},
        read_name("beta"),
        read_name("dead"),
        {"type":"read","mbean":"not an object name","target":{"url":"gamma"}},
        read_name("gamma"),
        {"type":"frobnicate","target":{"url":"alpha"}},
        {"type":"read","mbean":T,"target":{"url":"alpha"}},
        read_name("alpha"),
    ]);
    let started = Instant::now();
    let (status, r) = gw.post("/jolokia", &bulk).await;
    let elapsed = started.elapsed();
    assert_eq!(status, 200);
    let r = r.as_array().unwrap();
    assert_eq!(r.len(), 10);
    let statuses: Vec<u64> = r.iter().map(|x| x["status"].as_u64().unwrap()).collect();
    assert_eq!(
        statuses,
        vec![200, 404, 504, 200, 502, 400, 200, 400, 200, 200],
        "{r:#?}"
    );
    assert_eq!(r[0]["value"], "alpha");
    assert_eq!(r[3]["value"], "beta");
    assert_eq!(r[6]["value"], "gamma");
    assert_eq!(r[9]["value"], "alpha");
    assert!(r[8]["value"]["LongMax"].is_number(), "{}", r[8]);
    // Each error says what went wrong, and echoes the request.
    assert!(
        r[1]["error"]
            .as_str()
            .unwrap()
            .contains("that you may reach is configured"),
        "{}",
        r[1]
    );
    assert!(
        r[2]["error"]
            .as_str()
            .unwrap()
            .contains("did not answer within"),
        "{}",
        r[2]
    );
    assert_eq!(r[2]["error_type"], "jmxgate.AgentTimeout");
    assert!(
        r[4]["error"].as_str().unwrap().contains("cannot connect"),
        "{}",
        r[4]
    );
    assert!(
        r[5]["error"]
            .as_str()
            .unwrap()
            .contains("Invalid object name"),
        "{}",
        r[5]
    );
    assert!(
        r[7]["error"].as_str().unwrap().contains("frobnicate"),
        "{}",
        r[7]
    );
    assert_eq!(r[4]["request"]["target"]["url"], "dead");
    // Concurrent, bounded by the slow agent's own deadline.
    assert!(
        elapsed < Duration::from_millis(1500 + 2500),
        "bulk took {elapsed:?}; the slow agent's timeout is 1.5 s"
    );
    assert_still_serving(&gw).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_agent_does_not_delay_the_others() {
    let [a, ..] = shared_agents();
    let slow = Agent::start("slow2");
    let config = format!(
        "{}[[targets]]\nname = \"slow\"\nurl = \"{}\"\nrequest_timeout = \"30s\"\n",
        targets_toml(&[a]),
        slow.url()
    );
    let gw = Arc::new(Gateway::start(&config).await);
    let blocker = {
        let gw = gw.clone();
        tokio::spawn(async move {
            gw.post(
                "/jolokia/targets/slow",
                &json!({"type":"exec","mbean":OPS,"operation":"sleep","arguments":[3000]}),
            )
            .await
        })
    };
    // The blocker is under way at the slow agent once the gateway has a
    // connection open to it (health probes' own connections aside; nextest
    // gives each test a process of its own).
    common::eventually(
        "the blocker is under way at the slow agent",
        Duration::from_secs(60),
        || async {
            match jmxgate::client::open_agent_connections() {
                0 => Err("no agent connection open".to_string()),
                _ => Ok(()),
            }
        },
    )
    .await;
    let started = Instant::now();
    assert_still_serving(&gw).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "fast agent waited {:?}",
        started.elapsed()
    );
    let (_, r) = blocker.await.unwrap();
    assert_eq!(r["value"], 3000);
}

/// Stand-in for an agent whose accept backlog is full (Jolokia 2.x's is
/// 10): a listener that never accepts, filled until the kernel drops new
/// connection attempts, so connecting hangs.
fn full_backlog_listener() -> (tokio::net::TcpListener, Vec<std::net::TcpStream>) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut queued = Vec::new();
    while queued.len() < 64 {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(s) => queued.push(s),
            Err(_) => return (listener, queued),
        }
    }
    panic!("the kernel kept accepting connections into a full backlog");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_that_never_accepts_fails_its_items_at_the_connect_timeout() {
    let [a, ..] = shared_agents();
    let (hung, _queued) = full_backlog_listener();
    let config = format!(
        "{}[[targets]]\nname = \"hung\"\nurl = \"http://{}/jolokia\"\nconnect_timeout = \"300ms\"\n",
        targets_toml(&[a]),
        hung.local_addr().unwrap()
    );
    let gw = Gateway::start(&config).await;
    let started = Instant::now();
    let (status, r) = gw
        .post("/jolokia", &json!([read_name("hung"), read_name("alpha")]))
        .await;
    assert_eq!(status, 200);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(r[0]["status"], 502, "{r}");
    assert_eq!(r[0]["error_type"], "jmxgate.AgentUnreachable", "{r}");
    let error = r[0]["error"].as_str().unwrap();
    assert!(error.contains("timed out (connect_timeout)"), "{error}");
    assert_eq!(r[1]["value"], "alpha", "{r}");
    assert_still_serving(&gw).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_target_urls_are_refused_without_any_connection() {
    // A listener standing in for an attacker-chosen host: it counts every
    // connection attempt. None may arrive.
    let trap = TcpListener::bind("127.0.0.1:0").unwrap();
    let trap_port = trap.local_addr().unwrap().port();
    trap.set_nonblocking(true).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let counter = {
        let done = done.clone();
        // Counts every connection that arrives until the test is done with
        // the bulk, then those still queued: a connection the gateway made
        // is in the backlog before the bulk's answer leaves (the kernel
        // completes it), so none goes unseen. A non-blocking accept, looked
        // at every 10 ms, so the count ends when told.
        std::thread::spawn(move || {
            let mut hits = 0;
            loop {
                match trap.accept() {
                    Ok(_) => hits += 1,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        if done.load(Ordering::SeqCst) {
                            return hits;
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Err(e) => panic!("the trap's accept failed: {e}"),
                }
            }
        })
    };
    let [a, ..] = shared_agents();
    let gw = Gateway::start(&targets_toml(&[a])).await;
    let hostile = [
        (format!("http://127.0.0.1:{trap_port}/jolokia"), 404),
        (
            format!("service:jmx:jolokia://127.0.0.1:{trap_port}/jolokia"),
            404,
        ),
        (
            format!("service:jmx:rmi:///jndi/rmi://127.0.0.1:{trap_port}/jmxrmi"),
            403,
        ),
        (
            format!("service:jmx:rmi:///jndi/ldap://127.0.0.1:{trap_port}/o=x"),
            403,
        ),
        (format!("service:jmx:jmxmp://127.0.0.1:{trap_port}"), 403),
        (format!("ldap://127.0.0.1:{trap_port}/o=evil"), 404),
        (
            format!("http://admin:secret@127.0.0.1:{trap_port}/jolokia"),
            400,
        ),
        ("file:///etc/passwd".to_string(), 404),
        ("".to_string(), 404),
    ];
    let bulk: Vec<Value> = hostile
        .iter()
        .map(|(url, _)| read_name(url))
        .chain([read_name("alpha")])
        .collect();
    let (status, r) = gw.post("/jolokia", &Value::Array(bulk)).await;
    assert_eq!(status, 200);
    for (i, (url, want)) in hostile.iter().enumerate() {
        assert_eq!(r[i]["status"], *want, "{url}: {}", r[i]);
        assert!(
            !r[i]["error"].as_str().unwrap().contains("secret"),
            "{}",
            r[i]
        );
    }
    assert_eq!(r[hostile.len()]["value"], "alpha");
    done.store(true, Ordering::SeqCst);
    assert_eq!(
        counter.join().unwrap(),
        0,
        "the gateway connected to a client-supplied address"
    );
    // A type given as target object other than an object is a clear error.
    let (_, r) = gw
        .post("/jolokia", &json!({"type":"version","target":"alpha"}))
        .await;
    assert_eq!(r["status"], 400);
    assert_still_serving(&gw).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn agent_http_errors_become_item_errors() {
    let [a, ..] = shared_agents();
    let secured = Agent::start_with("secured", &["--user", "ops", "--password", "s3cret"]);
    let config = format!(
        "{}[[targets]]\nname = \"wrong-path\"\nurl = \"http://127.0.0.1:{}/not-jolokia\"\n\n\
         [[targets]]\nname = \"no-creds\"\nurl = \"{}\"\n\n\
         [[targets]]\nname = \"with-creds\"\nurl = \"{}/\"\nuser = \"ops\"\npassword = \"s3cret\"\n",
        targets_toml(&[a]),
        a.port,
        secured.url(),
        secured.url()
    );
    let gw = Gateway::start(&config).await;
    let (_, r) = gw
        .post(
            "/jolokia",
            &json!([
                read_name("wrong-path"),
                read_name("no-creds"),
                read_name("with-creds"),
                read_name("alpha")
            ]),
        )
        .await;
    assert_eq!(r[0]["status"], 502, "{}", r[0]);
    // Jetty answers a POST to a path without a servlet with 405.
    let e = r[0]["error"].as_str().unwrap();
    assert!(e.contains("HTTP 404") || e.contains("HTTP 405"), "{e}");
    assert!(
        !e.contains("not-jolokia"),
        "the agent URL is not echoed: {e}"
    );
    assert_eq!(r[1]["status"], 502, "{}", r[1]);
    assert!(
        r[1]["error"].as_str().unwrap().contains("HTTP 401"),
        "{}",
        r[1]
    );
    assert_eq!(r[2]["value"], "secured", "{}", r[2]);
    assert_eq!(r[3]["value"], "alpha");
    let text = serde_json::to_string(&r).unwrap();
    assert!(!text.contains("s3cret"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_http_requests_get_clear_errors() {
    let [a, ..] = shared_agents();
    let gw = Gateway::start(&format!(
        "max_body_bytes = 2048\nmax_bulk_items = 5\n{}",
        targets_toml(&[a])
    ))
    .await;
    let post_raw = |body: Vec<u8>| {
        let gw = &gw;
        async move {
            let r = gw
                .http
                .post(gw.url("/jolokia/targets/alpha"))
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let ct = r.headers()["content-type"].to_str().unwrap().to_string();
            let body: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
            (status, ct, body)
        }
    };
    for (body, status, msg) in [
        (b"{\"type\":\"read\",".to_vec(), 400, "Invalid JSON request"),
        (b"garbage".to_vec(), 400, "Invalid JSON request"),
        (b"".to_vec(), 400, "Empty request body"),
        (b"42".to_vec(), 400, "expected an object or an array"),
        (vec![b' '; 4096], 413, "exceeds 2048 bytes"),
        (
            serde_json::to_vec(&vec![json!({"type":"version"}); 6]).unwrap(),
            400,
            "at most 5",
        ),
    ] {
        let (got, ct, r) = post_raw(body).await;
        assert_eq!(got, status, "{r}");
        assert!(ct.starts_with("application/json"));
        assert_eq!(r["status"], status);
        assert!(r["error"].as_str().unwrap().contains(msg), "{r}");
    }
    // Wrong method, unknown endpoint, unknown virtual target.
    let resp = gw
        .http
        .put(gw.url("/jolokia"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    assert_eq!(resp.headers()["allow"], "GET, POST, OPTIONS");
    let (status, r) = gw.get("/elsewhere").await;
    assert_eq!(status, 404, "{r}");
    let (status, r) = gw.get("/jolokia/targets/nobody/version").await;
    assert_eq!(status, 404);
    assert!(r["error"].as_str().unwrap().contains("nobody"), "{r}");
    // A target inside a virtual-URL request is refused per item.
    let (_, r) = gw
        .post(
            "/jolokia/targets/alpha",
            &json!({"type":"version","target":{"url":"alpha"}}),
        )
        .await;
    assert_eq!(r["status"], 400, "{r}");
    // Without a target and without default_target: a per-item error.
    let (_, r) = gw.get("/jolokia/read/jmxgate.test:type=Types/Name").await;
    assert_eq!(r["status"], 400, "{r}");
    assert!(
        r["error"].as_str().unwrap().contains("default_target"),
        "{r}"
    );
    // GET grammar errors are per-item, with Jolokia's wording.
    let (status, r) = gw.get("/jolokia/targets/alpha/read/java.lang").await;
    assert_eq!(status, 200);
    assert_eq!(r["status"], 400);
    assert_eq!(
        r["error_type"],
        "javax.management.MalformedObjectNameException"
    );
    let (_, r) = gw
        .get("/jolokia/targets/alpha/exec/jmxgate.test:type=Operations")
        .await;
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("at least two path elements"),
        "{r}"
    );
    assert_still_serving(&gw).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn default_target_receives_untargeted_requests() {
    let [_, b, ..] = shared_agents();
    let gw = Gateway::start(&format!(
        "default_target = \"beta\"\n{}",
        targets_toml(&[b])
    ))
    .await;
    let (_, r) = gw.get("/jolokia/read/jmxgate.test:type=Types/Name").await;
    assert_eq!(r["value"], "beta", "{r}");
    // version stays the gateway's own.
    let (_, r) = gw.get("/jolokia/version").await;
    assert_eq!(r["value"]["info"]["jmxgate"]["targets"], 1, "{r}");
}

#[tokio::test(flavor = "multi_thread")]
async fn cors_preflight_and_headers() {
    let [a, ..] = shared_agents();
    let gw = Gateway::start(&targets_toml(&[a])).await;
    let resp = gw
        .http
        .request(reqwest::Method::OPTIONS, gw.url("/jolokia"))
        .header("origin", "https://console.example")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let h = resp.headers();
    assert_eq!(h["access-control-allow-origin"], "https://console.example");
    assert_eq!(h["access-control-allow-credentials"], "true");
    assert_eq!(
        h["access-control-allow-headers"],
        "authorization, content-type"
    );
    let resp = gw
        .http
        .get(gw.url("/jolokia/version"))
        .header("origin", "https://console.example")
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.headers()["access-control-allow-origin"],
        "https://console.example"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn oversized_answers_fail_their_items_only() {
    let [a, ..] = shared_agents();
    let config = format!(
        "{}[[targets]]\nname = \"small\"\nurl = \"{}/\"\nmax_response_bytes = 2000\n",
        targets_toml(&[a]),
        a.url()
    );
    let gw = Gateway::start(&config).await;
    let big = json!({"type":"exec","mbean":OPS,"operation":"repeat","arguments":["x", 5000]});
    let (_, r) = gw.post("/jolokia/targets/small", &big).await;
    assert_eq!(r["status"], 502, "{r}");
    assert_eq!(r["error_type"], "jmxgate.AgentAnswerTooLarge");
    assert!(
        r["error"].as_str().unwrap().contains("exceeds 2000 bytes"),
        "{r}"
    );
    // The same agent through the unrestricted target, and small answers
    // through the restricted one, still work.
    let (_, r) = gw.post("/jolokia/targets/alpha", &big).await;
    assert_eq!(r["value"].as_str().unwrap().len(), 5000);
    let (_, r) = gw
        .get("/jolokia/targets/small/read/jmxgate.test:type=Types/Name")
        .await;
    assert_eq!(r["value"], "alpha");
}

#[tokio::test(flavor = "multi_thread")]
async fn exchanges_per_agent_are_bounded() {
    // A 2.x JVM agent's HTTP server runs one exchange at a time by default
    // (single-threaded executor), which would serialise the "parallel"
    // pair by itself; give it threads so that only the gateway's bound is
    // measured. 1.7.1 in Jetty is multi-threaded already.
    let generation = Generation::under_test();
    let agent = if generation.is_v2() {
        Agent::start_v2(generation, "bounded", &["executor=fixed", "threadNr=4"])
    } else {
        Agent::start("bounded")
    };
    let config = format!(
        "[[targets]]\nname = \"one-at-a-time\"\nurl = \"{u}\"\nmax_in_flight = 1\n\n[[targets]]\nname = \"parallel\"\nurl = \"{u}/\"\n",
        u = agent.url()
    );
    let gw = Arc::new(Gateway::start(&config).await);
    let sleep = json!({"type":"exec","mbean":OPS,"operation":"sleep","arguments":[600]});
    let pair = |target: &'static str| {
        let (gw, sleep) = (gw.clone(), sleep.clone());
        async move {
            let started = Instant::now();
            let path = format!("/jolokia/targets/{target}");
            let (a, b) = tokio::join!(gw.post(&path, &sleep), gw.post(&path, &sleep));
            assert_eq!(
                (a.1["value"].clone(), b.1["value"].clone()),
                (json!(600), json!(600))
            );
            started.elapsed()
        }
    };
    let serial = pair("one-at-a-time").await;
    assert!(
        serial >= Duration::from_millis(1200),
        "max_in_flight = 1 let two run at once ({serial:?})"
    );
    let parallel = pair("parallel").await;
    assert!(
        parallel < Duration::from_millis(1150),
        "the default bound serialised two exchanges ({parallel:?})"
    );
}
