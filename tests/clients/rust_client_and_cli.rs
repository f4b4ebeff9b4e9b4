//! The public Rust client (`jmxgate::client::JolokiaClient`, `Poller`) and
//! the `jmxgate read|write|exec|search|list|version|watch` command line,
//! against real agents: directly, over HTTPS with client certificates, and
//! through the gateway in proxy mode.

use crate::common;

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{eventually, targets_toml, Agent, Gateway, TestPki};
use jmxgate::client::{HttpMethod, JolokiaClient, JolokiaError, Poller, TlsVersion};
use jmxgate::protocol::Request;
use serde_json::{json, Value};

const TYPES: &str = "jmxgate.test:type=Types";
const OPS: &str = "jmxgate.test:type=Operations";

fn direct_client(agent: &Agent) -> JolokiaClient {
    JolokiaClient::builder(&agent.url()).build().unwrap()
}

#[tokio::test]
async fn the_six_types_work_against_an_agent_by_get_and_post() {
    let agent = Agent::start("rc-direct");
    let client = direct_client(&agent);
    let version = client.version().await.unwrap();
    // What the agent says of itself when asked directly.
    let own = common::direct(&agent, &json!({"type":"version"})).await;
    assert_eq!(own["value"]["agent"], agent.generation.version(), "{own}");
    assert_eq!(
        (version.agent.as_str(), version.protocol.as_str()),
        (
            own["value"]["agent"].as_str().unwrap(),
            own["value"]["protocol"].as_str().unwrap()
        ),
        "{version:?}"
    );

    // GET (automatic for one attribute) and POST (forced) agree.
    let get = client.read(TYPES, Some("Name")).await.unwrap();
    assert_eq!(get, "rc-direct");
    let post = JolokiaClient::builder(&agent.url())
        .method(HttpMethod::Post)
        .build()
        .unwrap()
        .read(TYPES, Some("Name"))
        .await
        .unwrap();
    assert_eq!(post, get);
    // Several attributes need POST; the automatic method knows.
    let many = client
        .execute(&Request::read_many(TYPES, &["Name", "Int"]).unwrap())
        .await
        .unwrap();
    assert_eq!(many.value["Name"], "rc-direct");
    assert!(many.timestamp > 0);
    let typed = client
        .read_attributes(TYPES, &["Int", "Name"])
        .await
        .unwrap();
    assert_eq!(typed.get("Name"), Some(&json!("rc-direct")), "{typed:?}");
    assert!(typed.contains_key("Int"), "{typed:?}");
    let forced_get = JolokiaClient::builder(&agent.url())
        .method(HttpMethod::Get)
        .build()
        .unwrap()
        .execute(&Request::read_many(TYPES, &["Name", "Int"]).unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(forced_get, JolokiaError::Request(_)),
        "{forced_get}"
    );

    // write returns the old value; a slash in the value survives GET.
    let old = client.write(TYPES, "Name", json!("a/b!c")).await.unwrap();
    assert_eq!(old, "rc-direct");
    assert_eq!(client.read(TYPES, Some("Name")).await.unwrap(), "a/b!c");
    // A structured value goes by POST.
    client
        .write(TYPES, "List", json!(["x", "y"]))
        .await
        .unwrap();
    assert_eq!(
        client.read(TYPES, Some("List")).await.unwrap(),
        json!(["x", "y"])
    );

    assert_eq!(
        client
            .exec(OPS, "add(int,int)", vec![json!(2), json!(40)])
            .await
            .unwrap(),
        42
    );
    let names = client.search("jmxgate.test:type=Pattern,*").await.unwrap();
    assert_eq!(names.len(), 2, "{names:?}");
    let list = client
        .list(Some("jmxgate.test/type=Operations"))
        .await
        .unwrap();
    assert!(list["op"]["sleep"].is_object(), "{list}");
    // The same, typed: domains, MBeans, attributes and signatures.
    let tree = client.list_mbeans(Some("jmxgate.test")).await.unwrap();
    let ops = &tree["jmxgate.test"]["type=Operations"];
    let sleep = ops.op["sleep"].signatures();
    assert_eq!(sleep.len(), 1, "{sleep:?}");
    assert_eq!(sleep[0].args.len(), 1, "{sleep:?}");
    let types = &tree["jmxgate.test"]["type=Types"];
    assert!(types.attr["Name"].rw, "{:?}", types.attr["Name"]);
    assert_eq!(types.attr["Name"].type_name, "java.lang.String");
    // A domain is a name: a `/` in it does not reach into an MBean (1.7.1
    // answers an unknown domain with no MBeans).
    let odd = client
        .list_mbeans(Some("jmxgate.test/type=Types"))
        .await
        .unwrap();
    assert!(odd["jmxgate.test/type=Types"].is_empty(), "{odd:?}");
    let whole = client.list_mbeans(None).await.unwrap();
    assert!(whole["java.lang"].contains_key("type=Memory"));
    // Processing parameters travel with the request.
    let shallow = client
        .execute(&Request::list(None).with_param("maxDepth", "1").unwrap())
        .await
        .unwrap();
    assert!(
        shallow.value["jmxgate.test"].is_string(),
        "{}",
        shallow.value
    );
    // A misspelt parameter or a bad value is refused, not dropped.
    let typo = Request::list(None).with_param("maxdepth", "1").unwrap_err();
    assert!(
        typo.message
            .contains("\"maxdepth\" is not a processing parameter"),
        "{}",
        typo.message
    );
    assert!(Request::list(None).with_param("maxDepth", "deep").is_err());
}

#[tokio::test]
async fn errors_come_back_as_their_kinds() {
    let agent = &common::shared_agents()[0];
    let client = direct_client(agent);

    // Remote: the protocol error with its type, status and request.
    let e = client.exec(OPS, "fail", vec![]).await.unwrap_err();
    let JolokiaError::Remote(remote) = e else {
        panic!("{e}")
    };
    assert_eq!(remote.status, 500);
    assert!(remote.message.contains("deliberate failure"), "{remote:?}");
    assert_eq!(remote.request.as_ref().unwrap()["operation"], "fail");
    // Unless asked, 1.7.1 sends the stack trace (includeStackTrace=true by
    // default) and 2.x does not.
    if agent.generation.is_v2() {
        assert!(remote.stacktrace.is_none(), "{remote:?}");
    } else {
        assert!(remote.stacktrace.is_some(), "{remote:?}");
    }
    // Asked for, both send it, and it comes back with the error.
    let fail = Request::exec(OPS, "fail", vec![])
        .unwrap()
        .with_param("includeStackTrace", "true")
        .unwrap();
    let e = client.execute(&fail).await.unwrap_err();
    let JolokiaError::Remote(remote) = e else {
        panic!("{e}")
    };
    assert_eq!(remote.status, 500);
    assert!(
        remote
            .stacktrace
            .as_deref()
            .is_some_and(|t| t.contains("IllegalStateException")),
        "{remote:?}"
    );

    // Validating mode: not found is None, not an error.
    let missing = Request::read("jmxgate.test:type=Missing", Some("X")).unwrap();
    assert_eq!(client.execute_validating(&missing).await.unwrap(), None);
    let found = Request::read(TYPES, Some("Name")).unwrap();
    assert!(client.execute_validating(&found).await.unwrap().is_some());

    // Bulk: every item's result in order; one failure makes BulkRemote.
    let reqs = vec![found.clone(), missing.clone(), Request::version()];
    let results = client.bulk_results(&reqs).await.unwrap();
    assert!(results[0].is_ok() && results[2].is_ok());
    assert_eq!(results[1].as_ref().unwrap_err().status, 404);
    match client.bulk(&reqs).await {
        Err(JolokiaError::BulkRemote(items)) => {
            assert_eq!(items.len(), 3);
            assert_eq!(items[0].as_ref().unwrap().value, agent.name.as_str());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(client.bulk(&[found.clone(), found]).await.unwrap().len(), 2);

    // Connect, timeout and HTTP status.
    let dead = JolokiaClient::builder(&format!("http://127.0.0.1:{}/jolokia", common::dead_port()))
        .build()
        .unwrap();
    let e = dead.version().await.unwrap_err();
    assert!(matches!(e, JolokiaError::Connect { .. }), "{e}");
    // A deadline far below the agent's answer (20 s): it times out on
    // any machine, however loaded.
    let impatient = JolokiaClient::builder(&agent.url())
        .timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let e = impatient
        .exec(OPS, "sleep", vec![json!(20000)])
        .await
        .unwrap_err();
    assert!(matches!(e, JolokiaError::Timeout { .. }), "{e}");
    let wrong_path = JolokiaClient::builder(&format!("http://127.0.0.1:{}/nothing", agent.port))
        .build()
        .unwrap();
    let e = wrong_path.version().await.unwrap_err();
    assert!(matches!(e, JolokiaError::Http { status: 404, .. }), "{e}");
}

#[tokio::test]
async fn proxy_mode_through_the_gateway_with_credentials() {
    let agents = common::shared_agents();
    let dir = tempfile::tempdir().unwrap();
    let users = common::users_file(dir.path(), &[("ops", "pw", &[])]);
    let gw = Gateway::start(&common::basic_auth_config(
        &users,
        &targets_toml(&[&agents[0], &agents[1]]),
    ))
    .await;
    let url = gw.url("/jolokia");
    let ops = |target: &str| {
        JolokiaClient::builder(&url)
            .user("ops", "pw")
            .target(target)
            .build()
            .unwrap()
    };
    for agent in &agents[..2] {
        let client = ops(&agent.name);
        assert_eq!(
            client.read(TYPES, Some("Name")).await.unwrap(),
            agent.name.as_str()
        );
    }
    // Credentials as a default header work the same.
    let by_header = JolokiaClient::builder(&url)
        .header("Authorization", "Basic b3BzOnB3")
        .target(&agents[1].name)
        .build()
        .unwrap();
    assert_eq!(
        by_header.read(TYPES, Some("Name")).await.unwrap(),
        agents[1].name.as_str()
    );
    let wrong = JolokiaClient::builder(&url)
        .user("ops", "nope")
        .build()
        .unwrap();
    let e = wrong.version().await.unwrap_err();
    assert!(matches!(e, JolokiaError::Http { status: 401, .. }), "{e}");
    let unknown = ops("no-such-target");
    match unknown.version().await.unwrap_err() {
        JolokiaError::Remote(r) => assert_eq!(r.status, 404, "{r:?}"),
        other => panic!("{other}"),
    }
    // A mistyped target is an error in validating mode too, not "absent".
    let read = Request::read(TYPES, Some("Name")).unwrap();
    match unknown.execute_validating(&read).await {
        Err(JolokiaError::Remote(r)) => assert_eq!(r.error_type, "jmxgate.UnknownTarget"),
        other => panic!("{other:?}"),
    }
    let absent = Request::read("jmxgate.test:type=Missing", Some("X")).unwrap();
    assert_eq!(
        ops(&agents[0].name)
            .execute_validating(&absent)
            .await
            .unwrap(),
        None
    );
    // Target credentials may be given before the target; alone they are a
    // setup mistake.
    let before = JolokiaClient::builder(&url)
        .user("ops", "pw")
        .target_user("agent-user", "agent-pw")
        .target(&agents[1].name)
        .build()
        .unwrap();
    assert_eq!(
        before.read(TYPES, Some("Name")).await.unwrap(),
        agents[1].name.as_str()
    );
    let e = JolokiaClient::builder(&url)
        .target_user("agent-user", "agent-pw")
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("target()"), "{e}");
}

#[tokio::test]
async fn https_with_a_ca_file_a_client_certificate_and_tls_1_3() {
    let pki = TestPki::new("client-lib");
    let agent = Agent::start_https("rc-tls", &pki, "localhost", true, &[]);
    let url = format!("https://localhost:{}/jolokia", agent.port);
    let (client_cert, client_key) = pki.client_cert("rc-client", false);
    let client = JolokiaClient::builder(&url)
        .ca_file(pki.ca_file())
        .client_cert(&client_cert, &client_key)
        .min_tls_version(TlsVersion::Tls13)
        .build()
        .unwrap();
    assert_eq!(client.read(TYPES, Some("Name")).await.unwrap(), "rc-tls");
    // An agent that speaks TLS 1.2 at most: refused with TLS 1.3 as the
    // minimum, served with the default minimum (1.2).
    let old = Agent::start_https(
        "rc-tls12",
        &pki,
        "localhost",
        false,
        &["--tls-protocols", "TLSv1.2"],
    );
    let old_url = format!("https://localhost:{}/jolokia", old.port);
    let strict = JolokiaClient::builder(&old_url)
        .ca_file(pki.ca_file())
        .min_tls_version(TlsVersion::Tls13)
        .build()
        .unwrap();
    let e = strict.version().await.unwrap_err();
    assert!(matches!(e, JolokiaError::Connect { .. }), "{e}");
    let lenient = JolokiaClient::builder(&old_url)
        .ca_file(pki.ca_file())
        .build()
        .unwrap();
    assert_eq!(lenient.read(TYPES, Some("Name")).await.unwrap(), "rc-tls12");
    // Without the CA the server is not trusted.
    let untrusting = JolokiaClient::builder(&url)
        .client_cert(&client_cert, &client_key)
        .build()
        .unwrap();
    let e = untrusting.version().await.unwrap_err();
    assert!(e.to_string().to_lowercase().contains("certificate"), "{e}");
}

#[tokio::test]
async fn the_poller_sends_one_bulk_per_period_and_only_changed_lists() {
    let agent = Agent::start("rc-poller");
    let client = direct_client(&agent);
    let reads = Arc::new(Mutex::new(Vec::<Value>::new()));
    let lists = Arc::new(Mutex::new(0usize));
    let mut poller = Poller::new(client.clone());
    let r = reads.clone();
    poller.register(Request::read(TYPES, Some("Name")).unwrap(), move |answer| {
        r.lock().unwrap().push(answer.unwrap().value)
    });
    let l = lists.clone();
    poller.register_only_if_modified(Request::list(Some("jmxgate.test")), move |answer| {
        answer.unwrap();
        *l.lock().unwrap() += 1;
    });
    // Let start-up registrations age: agents count changes by the second.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    poller.start(Duration::from_millis(150));
    assert!(poller.is_running());
    let rounds = || reads.lock().unwrap().len();
    eventually("three rounds", Duration::from_secs(10), || async {
        (rounds() >= 3)
            .then_some(())
            .ok_or(format!("{} rounds", rounds()))
    })
    .await;
    assert!(reads.lock().unwrap().iter().all(|v| v == "rc-poller"));
    assert_eq!(
        *lists.lock().unwrap(),
        1,
        "unchanged lists are not passed on"
    );

    client
        .exec(OPS, "register", vec![json!("polled")])
        .await
        .unwrap();
    let changed_at = rounds();
    eventually(
        "the changed list passed on",
        Duration::from_secs(10),
        || async {
            match *lists.lock().unwrap() {
                2 => Ok(()),
                n => Err(format!("{n} lists")),
            }
        },
    )
    .await;
    // Several more rounds (past the agent's one-second change clock): once.
    eventually("more rounds", Duration::from_secs(10), || async {
        (rounds() >= changed_at + 10)
            .then_some(())
            .ok_or(format!("{} rounds", rounds()))
    })
    .await;
    assert_eq!(
        *lists.lock().unwrap(),
        2,
        "a changed list is passed on once"
    );

    poller.stop();
    assert!(!poller.is_running());
    let stopped_at = reads.lock().unwrap().len();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        reads.lock().unwrap().len(),
        stopped_at,
        "stopped means stopped"
    );
    poller.start(Duration::from_millis(150));
    eventually("restarted", Duration::from_secs(10), || async {
        (rounds() > stopped_at)
            .then_some(())
            .ok_or(format!("{} rounds", rounds()))
    })
    .await;
}

fn cli(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_jmxgate"))
        .args(args)
        .env_remove("JMXGATE_URL")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_command_line_reads_writes_lists_and_watches() {
    let agent = Agent::start("rc-cli");
    let url = agent.url();
    let u = ["--url", url.as_str()];
    let with = |args: &[&str]| -> Vec<String> {
        args.iter().chain(u.iter()).map(|s| s.to_string()).collect()
    };
    let run = |args: &[&str]| {
        let args = with(args);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        cli(&refs, &[])
    };

    let (code, out, err) = run(&["read", "java.lang:type=Memory", "HeapMemoryUsage"]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<&str> = out.lines().collect();
    assert!(rows.iter().any(|r| r.starts_with("used ")), "{out}");
    assert!(rows.iter().any(|r| r.starts_with("max ")), "{out}");

    let (code, out, _) = run(&["read", TYPES, "Name", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), "rc-cli");

    let (code, out, _) = run(&["write", TYPES, "Int", "17"]);
    assert_eq!(code, 0, "{out}");
    let (_, out, _) = run(&["read", TYPES, "Int"]);
    assert_eq!(out, "17\n");

    let (code, out, _) = run(&["exec", OPS, "add(int,int)", "20", "22"]);
    assert_eq!((code, out.as_str()), (0, "42\n"));

    let (_, out, _) = run(&["search", "jmxgate.test:type=Pattern,*"]);
    let mut names: Vec<&str> = out.lines().collect();
    names.sort();
    // 1.7.1 writes ObjectNames with their keys in canonical (sorted) order;
    // 2.x keeps the order the names were registered with.
    let want = if agent.generation.is_v2() {
        vec![
            "jmxgate.test:type=Pattern,name=a",
            "jmxgate.test:type=Pattern,name=b",
        ]
    } else {
        vec![
            "jmxgate.test:name=a,type=Pattern",
            "jmxgate.test:name=b,type=Pattern",
        ]
    };
    assert_eq!(names, want);

    let (code, out, _) = run(&["list", "jmxgate.test"]);
    assert_eq!(code, 0);
    assert!(out.contains("type=Operations\n"), "{out}");
    assert!(out.contains("op   sleep(millis: long) -> long"), "{out}");
    assert!(out.contains("attr Name: java.lang.String rw"), "{out}");
    // Below an MBean the answer is a map: printed, not dropped.
    let (code, out, err) = run(&["list", "jmxgate.test/type=Types/attr"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("Name.type ") && l.ends_with("java.lang.String")),
        "{out}"
    );
    // Down to one operation: 1.7.1 follows the path to `sleep`; 2.x takes
    // at most three list path segments (domain/MBean/op) and refuses a
    // fourth as a bad request, so there `sleep` is listed one level up.
    let (code, out, err) = run(&["list", "jmxgate.test/type=Operations/op/sleep"]);
    if agent.generation.is_v2() {
        assert_eq!(code, 1, "{out}");
        assert!(err.contains("HTTP 400"), "{err}");
        let (code, out, err) = run(&["list", "jmxgate.test/type=Operations/op"]);
        assert_eq!(code, 0, "{err}");
        assert!(
            out.lines()
                .any(|l| l.starts_with("sleep.ret ") && l.ends_with("long")),
            "{out}"
        );
    } else {
        assert_eq!(code, 0, "{err}");
        assert!(
            out.lines()
                .any(|l| l.starts_with("ret ") && l.ends_with("long")),
            "{out}"
        );
    }
    // --depth is maxDepth: domains only.
    let (code, out, _) = run(&["list", "--depth", "1"]);
    assert_eq!(code, 0);
    assert!(out.lines().any(|l| l == "jmxgate.test"), "{out}");
    assert!(!out.contains("type=Operations"), "{out}");

    // The protocol the agent states itself (7.2 for 1.7.1, 8.2 for 2.x).
    let own = common::direct(&agent, &json!({"type":"version"})).await;
    assert_eq!(own["value"]["agent"], agent.generation.version(), "{own}");
    let protocol = own["value"]["protocol"].as_str().unwrap();
    let (code, out, err) = run(&["version"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("protocol") && l.ends_with(protocol)),
        "{out}"
    );

    let (code, _, err) = run(&["read", "jmxgate.test:type=Missing", "X"]);
    assert_eq!(code, 1);
    assert!(err.starts_with("jmxgate: not found:"), "{err}");

    let (code, out, err) = run(&[
        "watch",
        TYPES,
        "Name",
        "Int",
        "--interval",
        "200ms",
        "--count",
        "3",
    ]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines.iter().all(|l| l.ends_with("Name=rc-cli  Int=17")),
        "{out}"
    );
    let (code, out, err) = run(&[
        "watch",
        TYPES,
        "Name",
        "Missing",
        "--interval",
        "200ms",
        "--count",
        "2",
        "--json",
    ]);
    assert_eq!(code, 1, "a failed read fails a counted watch: {err}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{out}");
    for line in &lines {
        assert_eq!(line["values"], json!({"Name": "rc-cli"}), "{line}");
        assert!(line["errors"]["Missing"].is_string(), "{line}");
        assert!(line["time"].is_string(), "{line}");
    }
    // The same attribute twice would never fill a round: refused.
    let (code, _, err) = run(&["watch", TYPES, "Name", "Name", "--count", "1"]);
    assert_eq!(code, 1);
    assert!(err.contains("\"Name\" is given twice"), "{err}");

    // No URL: a clear error.
    let (code, _, err) = cli(&["version"], &[]);
    assert_eq!(code, 1);
    assert!(err.contains("no URL"), "{err}");
}

#[tokio::test]
async fn the_command_line_takes_settings_from_a_file_and_the_environment() {
    let agents = common::shared_agents();
    let dir = tempfile::tempdir().unwrap();
    let users = common::users_file(dir.path(), &[("ops", "s3cret", &[])]);
    let gw = Gateway::start(&common::basic_auth_config(
        &users,
        &targets_toml(&[&agents[2]]),
    ))
    .await;
    let password_file = dir.path().join("password");
    std::fs::write(&password_file, "s3cret\n").unwrap();
    let config = dir.path().join("client.toml");
    std::fs::write(
        &config,
        format!(
            "url = \"{}\"\nuser = \"ops\"\npassword_file = \"{}\"\ntarget = \"{}\"\n",
            gw.url("/jolokia"),
            password_file.display(),
            agents[2].name
        ),
    )
    .unwrap();
    let first = config.clone();
    let out = tokio::task::spawn_blocking(move || {
        cli(
            &[
                "read",
                TYPES,
                "Name",
                "--client-config",
                first.to_str().unwrap(),
            ],
            &[],
        )
    })
    .await
    .unwrap();
    assert_eq!(out.0, 0, "{}", out.2);
    assert_eq!(out.1, format!("{}\n", agents[2].name));

    // Flags, then the environment, then the file: the environment's wrong
    // password beats the file's right one, and a flag's file beats both.
    let wrong_env = {
        let config = config.clone();
        tokio::task::spawn_blocking(move || {
            cli(
                &[
                    "read",
                    TYPES,
                    "Name",
                    "--client-config",
                    config.to_str().unwrap(),
                ],
                &[("JMXGATE_PASSWORD", "wrong")],
            )
        })
        .await
        .unwrap()
    };
    assert_eq!(wrong_env.0, 1, "{wrong_env:?}");
    assert!(wrong_env.2.contains("401"), "{}", wrong_env.2);
    let flags = {
        let (config, password_file, url) =
            (config.clone(), password_file.clone(), gw.url("/jolokia"));
        let other = agents[1].name.clone();
        tokio::task::spawn_blocking(move || {
            cli(
                &[
                    "read",
                    TYPES,
                    "Name",
                    "--client-config",
                    config.to_str().unwrap(),
                    "--url",
                    url.as_str(),
                    "--user",
                    "ops",
                    "--password-file",
                    password_file.to_str().unwrap(),
                    "--target",
                    other.as_str(),
                    "--timeout",
                    "5s",
                ],
                &[("JMXGATE_PASSWORD", "wrong")],
            )
        })
        .await
        .unwrap()
    };
    // agents[1] is not in this gateway's fleet: the flag reached it.
    assert_eq!(flags.0, 1, "{flags:?}");
    assert!(
        flags.2.contains("not found") && flags.2.contains(&agents[1].name),
        "{}",
        flags.2
    );

    let url = gw.url("/jolokia");
    let target = agents[2].name.clone();
    let out = tokio::task::spawn_blocking(move || {
        cli(
            &["read", TYPES, "Name"],
            &[
                ("JMXGATE_URL", url.as_str()),
                ("JMXGATE_USER", "ops"),
                ("JMXGATE_PASSWORD", "s3cret"),
                ("JMXGATE_TARGET", target.as_str()),
            ],
        )
    })
    .await
    .unwrap();
    assert_eq!(out.0, 0, "{}", out.2);
    assert_eq!(out.1, format!("{}\n", agents[2].name));
}

/// A forward HTTP proxy for the test: reads the first request line
/// (`GET http://host:port/… HTTP/1.1`), connects to that host and relays
/// bytes both ways. Agents accept the absolute form of the request line,
/// so nothing is rewritten. Counts the connections it relayed and keeps
/// each connection's first request line (method and URL), and how many
/// connections are open at once at most.
async fn forward_proxy() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    let (url, log) = recording_proxy().await;
    (url, log.relayed.clone())
}

#[derive(Default)]
struct ProxyLog {
    relayed: Arc<std::sync::atomic::AtomicUsize>,
    lines: Mutex<Vec<String>>,
    open: std::sync::atomic::AtomicUsize,
    most_open: std::sync::atomic::AtomicUsize,
}

async fn recording_proxy() -> (String, Arc<ProxyLog>) {
    use std::sync::atomic::Ordering::SeqCst;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let log = Arc::new(ProxyLog::default());
    let shared = log.clone();
    tokio::spawn(async move {
        loop {
            let (client, _) = listener.accept().await.unwrap();
            let log = shared.clone();
            let count = log.relayed.clone();
            tokio::spawn(async move {
                let open = log.open.fetch_add(1, SeqCst) + 1;
                log.most_open.fetch_max(open, SeqCst);
                let mut client = BufReader::new(client);
                let mut line = String::new();
                client.read_line(&mut line).await.unwrap();
                let uri = line.split_whitespace().nth(1).unwrap_or_default();
                let authority = uri
                    .strip_prefix("http://")
                    .and_then(|rest| rest.split('/').next())
                    .unwrap_or_default()
                    .to_string();
                log.lines.lock().unwrap().push(line.trim_end().to_string());
                let Ok(mut upstream) = tokio::net::TcpStream::connect(&authority).await else {
                    log.open.fetch_sub(1, SeqCst);
                    return;
                };
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                upstream.write_all(line.as_bytes()).await.unwrap();
                upstream.write_all(client.buffer()).await.unwrap();
                let mut client = client.into_inner();
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                log.open.fetch_sub(1, SeqCst);
            });
        }
    });
    (format!("http://{addr}"), log)
}

/// Through a recording proxy with no idle connections kept, every call is
/// a connection of its own, so its first line is the call's method and URL.
#[tokio::test]
async fn the_automatic_method_is_get_where_a_url_can_carry_it_and_post_otherwise() {
    let agent = &common::shared_agents()[2];
    let (proxy, log) = recording_proxy().await;
    let client = |method| {
        JolokiaClient::builder(&agent.url())
            .http_proxy(&proxy)
            .pool_max_idle_per_host(0)
            .method(method)
            .build()
            .unwrap()
    };
    let last_line = || {
        log.lines
            .lock()
            .unwrap()
            .last()
            .cloned()
            .unwrap_or_default()
    };
    let auto = client(HttpMethod::Auto);
    auto.read(TYPES, Some("Name")).await.unwrap();
    assert!(
        last_line().starts_with("GET ")
            && last_line().contains("/read/jmxgate.test:type=Types/Name"),
        "{}",
        last_line()
    );
    auto.read_attributes(TYPES, &["Name", "Int"]).await.unwrap();
    assert!(last_line().starts_with("POST "), "{}", last_line());
    auto.bulk(&[Request::version(), Request::version()])
        .await
        .unwrap();
    assert!(last_line().starts_with("POST "), "{}", last_line());
    client(HttpMethod::Post)
        .read(TYPES, Some("Name"))
        .await
        .unwrap();
    assert!(last_line().starts_with("POST "), "{}", last_line());
    client(HttpMethod::Get).version().await.unwrap();
    assert!(last_line().starts_with("GET "), "{}", last_line());
}

#[tokio::test]
async fn max_connections_bounds_the_calls_in_flight() {
    use std::sync::atomic::Ordering::SeqCst;
    let agent = &common::shared_agents()[2];
    let (proxy, log) = recording_proxy().await;
    let client = JolokiaClient::builder(&agent.url())
        .http_proxy(&proxy)
        .max_connections(2)
        .build()
        .unwrap();
    let calls = (0..6).map(|_| client.exec(OPS, "sleep", vec![json!(200)]));
    let started = std::time::Instant::now();
    for result in futures::future::join_all(calls).await {
        result.unwrap();
    }
    assert!(
        log.most_open.load(SeqCst) <= 2,
        "{} connections open at once",
        log.most_open.load(SeqCst)
    );
    // Six calls of 200 ms, two at a time: three rounds at least.
    assert!(
        started.elapsed() >= Duration::from_millis(590),
        "{:?}",
        started.elapsed()
    );
    assert!(JolokiaClient::builder(&agent.url())
        .max_connections(0)
        .build()
        .is_err());
}

/// All registered requests go out as one bulk per round, and a failed
/// exchange reaches each callback as its own error kind.
#[tokio::test]
async fn the_poller_sends_one_http_request_per_round() {
    let agent = &common::shared_agents()[2];
    let (proxy, log) = recording_proxy().await;
    let client = JolokiaClient::builder(&agent.url())
        .http_proxy(&proxy)
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let answers = Arc::new(Mutex::new(Vec::<usize>::new()));
    let mut poller = Poller::new(client);
    for job in 0..3 {
        let answers = answers.clone();
        poller.register(Request::read(TYPES, Some("Name")).unwrap(), move |a| {
            a.unwrap();
            answers.lock().unwrap().push(job);
        });
    }
    poller.start(Duration::from_millis(100));
    eventually("four rounds", Duration::from_secs(10), || async {
        let n = answers.lock().unwrap().len();
        (n >= 12).then_some(()).ok_or(format!("{n} answers"))
    })
    .await;
    poller.stop();
    let answered = answers.lock().unwrap().len();
    let requests = log.lines.lock().unwrap().len();
    assert_eq!(answered % 3, 0, "every round answers all three jobs");
    assert_eq!(requests, answered / 3, "one request per round");
    assert!(log
        .lines
        .lock()
        .unwrap()
        .iter()
        .all(|l| l.starts_with("POST ")));

    let dead = JolokiaClient::builder(&format!("http://127.0.0.1:{}/jolokia", common::dead_port()))
        .build()
        .unwrap();
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut failing = Poller::new(dead);
    for _ in 0..2 {
        let errors = errors.clone();
        failing.register(Request::version(), move |a| {
            let kind = match a {
                Err(JolokiaError::Connect { .. }) => "connect".to_string(),
                other => format!("{other:?}"),
            };
            errors.lock().unwrap().push(kind);
        });
    }
    failing.start(Duration::from_secs(60));
    eventually("both callbacks told", Duration::from_secs(10), || async {
        let e = errors.lock().unwrap().clone();
        (e.len() >= 2).then_some(()).ok_or(format!("{e:?}"))
    })
    .await;
    failing.stop();
    assert_eq!(errors.lock().unwrap()[..2], ["connect", "connect"]);
}

#[tokio::test]
async fn calls_go_through_an_http_proxy_when_told_or_by_the_environment() {
    let agent = &common::shared_agents()[1];
    let (proxy, relayed) = forward_proxy().await;
    let via_builder = JolokiaClient::builder(&agent.url())
        .http_proxy(&proxy)
        .build()
        .unwrap();
    assert_eq!(
        via_builder.read(TYPES, Some("Name")).await.unwrap(),
        agent.name.as_str()
    );
    let after_builder = relayed.load(std::sync::atomic::Ordering::SeqCst);
    assert!(after_builder >= 1, "the proxy relayed the call");

    // The protocol the agent states itself (7.2 for 1.7.1, 8.2 for 2.x),
    // asked before the variable below is set.
    let own = common::direct(agent, &json!({"type":"version"})).await;
    assert_eq!(own["value"]["agent"], agent.generation.version(), "{own}");
    let protocol = own["value"]["protocol"].as_str().unwrap();

    // Each test runs in its own process: the variable reaches only this one.
    std::env::set_var("http_proxy", &proxy);
    let from_env = JolokiaClient::builder(&agent.url()).build().unwrap();
    assert_eq!(from_env.version().await.unwrap().protocol, protocol);
    assert!(relayed.load(std::sync::atomic::Ordering::SeqCst) > after_builder);
    let unproxied = JolokiaClient::builder(&agent.url())
        .no_proxy()
        .build()
        .unwrap();
    let before = relayed.load(std::sync::atomic::Ordering::SeqCst);
    unproxied.version().await.unwrap();
    assert_eq!(relayed.load(std::sync::atomic::Ordering::SeqCst), before);
    std::env::remove_var("http_proxy");
}
