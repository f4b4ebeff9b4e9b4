//! Just-in-time access across two replicas of the real `jmxgate serve`
//! binary sharing a real PostgreSQL, behind a real HAProxy, in front of
//! real Jolokia agents: what one replica records the other honours (a
//! request asked on one is reviewed on the other, a grant holds on both,
//! a revoke on one ends it on the other), a four-eyes item survives the
//! replica that took its first approval dying and runs once on the
//! survivor, and a database that dies fails elevation closed (503, no
//! password said or logged) while standing roles keep working.
//!
//! Why these real parts: the promises are about separate processes that
//! share nothing but the database (no in-process shortcut could fake the
//! shared state), about a load balancer sending one person's steps to
//! whichever replica it likes, and about a process and a database dying
//! the way they do in production (SIGKILL). Expected values are read from
//! the agents themselves.

use crate::access;
use crate::common;
use crate::haproxy;
use crate::postgres;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use access::{gc_on, level_on, request_named_by, set_level, As, LOGGING, REQUESTS};
use common::{audit_records, eventually, gateway_toml, targets_toml, users_file, Agent};
use common::{GatewayProcess, Generation};
use serde_json::{json, Value};

/// How long background work (a replica's grant cache, HAProxy's health
/// checks, the store task) may take here; never asserted as a speed.
const PATIENCE: Duration = Duration::from_secs(30);

fn runtime_name(target: &str) -> Value {
    json!({"type":"read","mbean":"java.lang:type=Runtime","attribute":"Name","target":{"url":target}})
}

/// The events of the audit records of one access request, in order.
fn events_of(records: &[Value], request: &str) -> Vec<String> {
    records
        .iter()
        .filter(|r| r["access_request"] == request)
        .map(|r| r["event"].as_str().unwrap_or("?").to_string())
        .collect()
}

const USERS: &[(&str, &str, &[&str])] = &[
    ("dev", "pw", &["developers"]),
    ("oncall", "pw", &["oncall"]),
    ("lead1", "pw", &["sre-leads"]),
    ("lead2", "pw", &["sre-leads"]),
];

/// What both replicas share: users, the read-only policy, targets
/// `orders-1` and `billing-1`.
struct Shared {
    users: PathBuf,
    read_only: PathBuf,
    targets: String,
    store_url: String,
}

/// One replica's config file in `dir`: the shared parts, its own audit
/// directory and replica id. Developers read everything and may ask for
/// `ops` on `orders-*` (one lead approves); `oncall` holds a role whose
/// logger changes need two leads' approval.
fn replica_config(dir: &Path, shared: &Shared, replica: &str, admin: u16) -> PathBuf {
    gateway_toml(
        dir,
        &format!(
            r#"auth = ["basic"]

{targets}
[auth.basic]
users_file = "{users}"

[admin]
listen = "127.0.0.1:{admin}"

[access.store]
url = "{url}"

[audit]
dir = "{audit}"
replica_id = "{replica}"

[[roles]]
name = "developers"
targets = ["*"]
policy = "{read_only}"

[[roles]]
name = "sre-leads"
targets = ["*"]
policy = "{read_only}"

[[roles]]
name = "ops"
targets = ["orders-*"]
requestable_by = ["developers"]
approvers = ["sre-leads"]
max_duration = "1h"
reason = "required"

[[roles]]
name = "oncall"
targets = ["orders-*"]
approvers = ["sre-leads"]
approvals = 2
approval_required = ["exec {LOGGING} setLoggerLevel"]
"#,
            targets = shared.targets,
            users = shared.users.display(),
            url = shared.store_url,
            audit = dir.join("audit").display(),
            read_only = shared.read_only.display(),
        ),
    )
}

fn addr_of(gw: &GatewayProcess) -> SocketAddr {
    gw.addr
        .parse()
        .unwrap_or_else(|_| panic!("not an address: {}", gw.addr))
}

/// Waits until a replica's background task has opened the store (503
/// until then).
async fn store_open(http: &reqwest::Client, base: &str) {
    let dev = As {
        http,
        base: base.to_string(),
        user: "dev",
    };
    eventually(
        &format!("the access store opens on {base}"),
        PATIENCE,
        || async {
            match dev.get(REQUESTS).await {
                (200, _) => Ok(()),
                (status, v) => Err(format!("{status} {v}")),
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_behind_haproxy_share_requests_grants_and_four_eyes() {
    if !Generation::under_test().available() {
        return;
    }
    let (orders, billing) = {
        let o = std::thread::spawn(|| Agent::start("orders-1"));
        let b = std::thread::spawn(|| Agent::start("billing-1"));
        (o.join().unwrap(), b.join().unwrap())
    };
    let mut pg = postgres::Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let read_only = dir.path().join("read-only.xml");
    std::fs::write(
        &read_only,
        "<restrict><commands><command>read</command><command>list</command>\
         <command>search</command><command>version</command></commands></restrict>",
    )
    .unwrap();
    let shared = Shared {
        users: users_file(dir.path(), USERS),
        read_only,
        targets: targets_toml(&[&orders, &billing]),
        store_url: pg.url(),
    };
    let (dir_a, dir_b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&dir_a).unwrap();
    std::fs::create_dir_all(&dir_b).unwrap();
    let admin_b = common::free_port();
    let mut a = GatewayProcess::start(
        &replica_config(&dir_a, &shared, "gw-a", common::free_port()),
        "info",
    );
    let b = GatewayProcess::start(&replica_config(&dir_b, &shared, "gw-b", admin_b), "info");
    let lb = haproxy::Haproxy::start(&[addr_of(&a), addr_of(&b)]);
    let http = common::http_client();
    let (base_a, base_b, base_lb) = (
        format!("http://{}", a.addr),
        format!("http://{}", b.addr),
        lb.url(""),
    );
    // Both open (and migrate) the one database at about the same time.
    tokio::join!(store_open(&http, &base_a), store_open(&http, &base_b));
    let at = |base: &String, user| As {
        http: &http,
        base: base.clone(),
        user,
    };
    let (dev_a, dev_b, dev_lb) = (at(&base_a, "dev"), at(&base_b, "dev"), at(&base_lb, "dev"));
    let (lead1_a, lead1_b, lead2_b) = (
        at(&base_a, "lead1"),
        at(&base_b, "lead1"),
        at(&base_b, "lead2"),
    );

    // HAProxy answers, from both replicas in turn, what the agent itself
    // says (lead2's reads here are counted in B's audit at the end).
    let expected_name = common::direct(
        &orders,
        &json!({"type":"read","mbean":"java.lang:type=Runtime","attribute":"Name"}),
    )
    .await["value"]
        .clone();
    assert!(expected_name.is_string(), "{expected_name}");
    for _ in 0..4 {
        let read = at(&base_lb, "lead2")
            .jolokia(&runtime_name("orders-1"))
            .await;
        assert_eq!(read["status"], 200, "{read}");
        assert_eq!(read["value"], expected_name, "{read}");
    }

    // --- A request made on A is seen and approved on B; the grant holds on both.
    for dev in [&dev_a, &dev_b] {
        let before = dev.jolokia(&gc_on("orders-1")).await;
        assert_eq!(before["status"], 403, "read-only before: {before}");
    }
    let (status, asked) = dev_a
        .ask(&json!({"role":"ops","duration":"30m","targets":"orders-*","reason":"INC-7"}))
        .await;
    assert_eq!(status, 201, "{asked}");
    assert_eq!(asked["state"], "pending", "{asked}");
    let id = asked["id"].as_str().unwrap().to_string();

    let (status, listed) = lead1_b.get(REQUESTS).await;
    assert_eq!(status, 200, "{listed}");
    let seen = listed["requests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id.as_str())
        .unwrap_or_else(|| panic!("A's request is not listed on B: {listed}"));
    assert_eq!(seen["state"], "pending");
    assert_eq!(seen["requester"], "dev");
    assert_eq!(seen["reason"], "INC-7");
    assert_eq!(seen["may_review"], true);

    let (status, approved) = lead1_b.review(&id, "approve", "go").await;
    assert_eq!(status, 200, "{approved}");
    assert_eq!(approved["state"], "approved", "{approved}");
    // B forgets what it knew of dev's grants at the review: held at once.
    let on_b = dev_b.jolokia(&gc_on("orders-1")).await;
    assert_eq!(on_b["status"], 200, "granted on B: {on_b}");
    // A learns of it from the store (its cache of dev's empty grants
    // lapses).
    eventually("the grant holds on A", PATIENCE, || async {
        let r = dev_a.jolokia(&gc_on("orders-1")).await;
        if r["status"] == 200 {
            Ok(())
        } else {
            Err(r.to_string())
        }
    })
    .await;
    // Narrowed to the request's targets, on both.
    for dev in [&dev_a, &dev_b] {
        let elsewhere = dev.jolokia(&gc_on("billing-1")).await;
        assert_eq!(elsewhere["status"], 403, "{elsewhere}");
    }
    let (_, on_a) = dev_a.get(&format!("{REQUESTS}/{id}")).await;
    assert_eq!(on_a["state"], "approved", "A shows B's approval: {on_a}");

    // --- Revoked on A: ended on A at once, and on B soon after.
    let (status, revoked) = dev_a
        .post(&format!("{REQUESTS}/{id}/revoke"), &json!({}))
        .await;
    assert_eq!(status, 200, "{revoked}");
    assert_eq!(revoked["state"], "revoked");
    let after_a = dev_a.jolokia(&gc_on("orders-1")).await;
    assert_eq!(after_a["status"], 403, "revoked on A: {after_a}");
    eventually("the revoke reaches B", PATIENCE, || async {
        let r = dev_b.jolokia(&gc_on("orders-1")).await;
        if r["status"] == 403 {
            Ok(())
        } else {
            Err(r.to_string())
        }
    })
    .await;
    let (status, again) = lead1_b.review(&id, "approve", "").await;
    assert_eq!(
        status, 409,
        "a revoked request is not approved again: {again}"
    );

    // --- Four eyes: asked through HAProxy, first yes on A, A dies, second
    // yes on B, run once on B.
    let oncall_lb = at(&base_lb, "oncall");
    let oncall_b = at(&base_b, "oncall");
    let original = level_on(&orders).await;
    assert_ne!(original, "FINE", "the test needs a level to change");
    let refused = oncall_lb.jolokia(&set_level("orders-1", "FINE")).await;
    assert_eq!(refused["status"], 403, "{refused}");
    let item = request_named_by(&refused);
    assert_eq!(level_on(&orders).await, original, "nothing ran yet");

    let (status, first) = lead1_a.review(&item, "approve", "one").await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["state"], "pending", "{first}");
    assert_eq!(first["approvals"], 1, "{first}");

    // Replica A dies as a crashed process does.
    a.child.kill().unwrap();
    let killed = a.child.wait().unwrap();
    assert!(!killed.success());
    let leaked = a.wait_for_line(postgres::PASSWORD, Duration::from_secs(5));
    assert!(
        leaked.is_none(),
        "A's log names the database password: {leaked:?}"
    );
    // What A did is in its own audit (access steps are on disk before
    // their answer), as A's.
    let records_a = audit_records(&dir_a.join("audit"));
    assert!(
        records_a.iter().all(|r| r["replica"] == "gw-a"),
        "{records_a:?}"
    );
    assert_eq!(
        events_of(&records_a, &id),
        ["access_requested", "access_revoked"],
        "{records_a:?}"
    );
    assert!(
        events_of(&records_a, &item).contains(&"access_reviewed".to_string()),
        "{records_a:?}"
    );

    // HAProxy sends everything to B now; the request is as A left it.
    let (_, shown) = eventually("HAProxy answers from B", PATIENCE, || async {
        match at(&base_lb, "lead2")
            .get(&format!("{REQUESTS}/{item}"))
            .await
        {
            (200, v) => Ok((200, v)),
            (status, v) => Err(format!("{status} {v}")),
        }
    })
    .await;
    assert_eq!(shown["state"], "pending", "{shown}");
    assert_eq!(shown["kind"], "item", "{shown}");
    assert_eq!(shown["item"]["arguments"], json!(["global", "FINE"]));
    assert_eq!(shown["may_review"], true, "{shown}");

    // The same lead again on B counts once; the other lead approves.
    let (status, twice) = lead1_b.review(&item, "approve", "again").await;
    assert_eq!(
        status, 409,
        "a reviewer counts once across replicas: {twice}"
    );
    let (status, second) = lead2_b.review(&item, "approve", "two").await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["state"], "approved", "{second}");

    let ran = oncall_b.jolokia(&set_level("orders-1", "FINE")).await;
    assert_eq!(ran["status"], 200, "{ran}");
    assert_eq!(level_on(&orders).await, "FINE", "it ran on the agent");
    let (_, used) = oncall_b.get(&format!("{REQUESTS}/{item}")).await;
    assert!(used["used"].is_string(), "{used}");
    // Once: the same item again is a new request, and runs nothing.
    common::direct(
        &orders,
        &json!({"type":"exec","mbean":LOGGING,"operation":"setLoggerLevel","arguments":["global", "INFO"]}),
    )
    .await;
    let replay = oncall_lb.jolokia(&set_level("orders-1", "FINE")).await;
    assert_eq!(replay["status"], 403, "{replay}");
    assert_ne!(
        request_named_by(&replay),
        item,
        "a new request, not the used one"
    );
    assert_eq!(level_on(&orders).await, "INFO", "the replay ran nothing");

    // --- PostgreSQL dies: elevation fails closed, standing roles go on.
    let (status, pending) = dev_b
        .ask(&json!({"role":"ops","duration":"10m","targets":"orders-1","reason":"INC-8"}))
        .await;
    assert_eq!(status, 201, "{pending}");
    let pending = pending["id"].as_str().unwrap().to_string();
    pg.kill();

    let down = eventually("the API answers 503", PATIENCE, || async {
        match dev_lb.get(REQUESTS).await {
            (503, v) => Ok(v),
            (status, v) => Err(format!("{status} {v}")),
        }
    })
    .await;
    let said = down["error"]
        .as_str()
        .unwrap_or_else(|| panic!("a 503 says why in \"error\": {down}"));
    // Still ready (everything else is served), and /readyz says what is not.
    let ready = http
        .get(format!("http://127.0.0.1:{admin_b}/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status().as_u16(), 200);
    let ready = ready.text().await.unwrap();
    assert!(
        ready.starts_with("ready; access requests unavailable"),
        "{ready}"
    );
    assert!(!ready.contains(postgres::PASSWORD), "{ready}");
    assert!(!said.is_empty(), "{down}");
    let answers = vec![
        dev_b
            .ask(&json!({"role":"ops","duration":"10m","targets":"orders-1","reason":"INC-9"}))
            .await,
        lead1_b.review(&pending, "approve", "while down").await,
        oncall_b.get(&format!("{REQUESTS}/{item}")).await,
        dev_lb.get(REQUESTS).await,
        (503, down.clone()),
    ];
    for (status, answer) in answers {
        assert_eq!(status, 503, "{answer}");
        assert!(answer["error"].is_string(), "{answer}");
        let text = answer.to_string();
        assert!(
            !text.contains(postgres::PASSWORD) && !text.contains(&shared.store_url),
            "a 503 names the database password: {answer}"
        );
    }
    // The approval asked while the store was down granted nothing.
    let still = dev_b.jolokia(&gc_on("orders-1")).await;
    assert_eq!(still["status"], 403, "no grant without the store: {still}");
    // A guarded item is refused, not run.
    let guarded = oncall_b.jolokia(&set_level("orders-1", "FINE")).await;
    assert_eq!(guarded["status"], 503, "{guarded}");
    assert!(
        !guarded.to_string().contains(postgres::PASSWORD),
        "{guarded}"
    );
    assert_eq!(
        level_on(&orders).await,
        "INFO",
        "nothing ran without the store"
    );
    // Standing roles: reads as before, directly and through HAProxy.
    for dev in [&dev_b, &dev_lb] {
        let read = dev.jolokia(&runtime_name("orders-1")).await;
        assert_eq!(read["status"], 200, "{read}");
        assert_eq!(read["value"], expected_name, "{read}");
    }

    // B's audit tells the story of the steps it took, as B's.
    let records = audit_records(&dir_b.join("audit"));
    assert!(
        records.iter().all(|r| r["replica"] == "gw-b"),
        "{records:?}"
    );
    let granted = "access_granted".to_string();
    assert!(events_of(&records, &id).contains(&granted), "{records:?}");
    assert!(events_of(&records, &item).contains(&granted), "{records:?}");
    // Both replicas answered some of lead2's reads through HAProxy.
    let lead2_reads = records
        .iter()
        .filter(|r| r["event"] == "item" && r["principal"] == "lead2" && r["type"] == "read")
        .count();
    assert!(
        (1..4).contains(&lead2_reads),
        "B answered {lead2_reads} of the 4 reads HAProxy balanced"
    );
    for r in records.iter().chain(&records_a) {
        assert!(!r.to_string().contains(postgres::PASSWORD), "{r}");
    }

    // No log line of B names the password; B stops cleanly with the
    // database gone.
    let log = b.stop();
    let leaked: Vec<&String> = log
        .iter()
        .filter(|l| l.contains(postgres::PASSWORD))
        .collect();
    assert!(leaked.is_empty(), "B's log names the password: {leaked:?}");
    drop(lb);
}
