//! Three replicas of one configuration, their members in PostgreSQL or in
//! Kubernetes Leases: each target probed by one of them; one killed (or
//! paused past its lease) and its targets probed again by the others;
//! a second process with a replica id in use refused; the engine down
//! and back.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::{eventually, free_port, http_client, GatewayProcess};
use crate::counting::CountingAgents;

const TARGETS: usize = 6;
const LEASE: &str = "4s";
const RENEW: &str = "1s";

fn names() -> Vec<String> {
    (0..TARGETS).map(|i| format!("orders-{i}")).collect()
}

struct Replica {
    id: String,
    admin: u16,
    process: Option<GatewayProcess>,
}

/// The configuration of replica `id`: the targets, probes every second,
/// `cluster` (the engine's keys).
fn replica_config(dir: &Path, id: &str, agents: &CountingAgents, cluster: &str) -> (PathBuf, u16) {
    let admin = free_port();
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[admin]\nlisten = \"127.0.0.1:{admin}\"\n\n\
         [health]\nprobe_interval = \"1s\"\nstable_probe_interval = \"1s\"\n\n\
         [cluster]\nreplica_id = \"{id}\"\nlease_duration = \"{LEASE}\"\nrenew_interval = \"{RENEW}\"\n{cluster}\n\n{}",
        agents.targets_toml(&names())
    );
    let path = dir.join(format!("{id}.toml"));
    std::fs::write(&path, text).unwrap();
    (path, admin)
}

fn start(dir: &Path, id: &str, agents: &CountingAgents, cluster: &str) -> Replica {
    let (config, admin) = replica_config(dir, id, agents, cluster);
    let process = GatewayProcess::start(&config, "info");
    Replica {
        id: id.to_string(),
        admin,
        process: Some(process),
    }
}

impl Replica {
    async fn cluster(&self, query: &str) -> Result<Value, String> {
        let r = http_client()
            .get(format!("http://127.0.0.1:{}/cluster{query}", self.admin))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        r.json().await.map_err(|e| e.to_string())
    }

    /// A text answer of its admin listener (`/readyz`, `/metrics`), or
    /// why there is none.
    async fn admin_text(&self, path: &str) -> String {
        match http_client()
            .get(format!("http://127.0.0.1:{}{path}", self.admin))
            .send()
            .await
        {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(e) => e.to_string(),
        }
    }

    /// `GET /jolokia/targets` on its Jolokia listener: `name`'s entry.
    async fn target(&self, name: &str) -> Result<Value, String> {
        let addr = &self.process.as_ref().unwrap().addr;
        let r = http_client()
            .get(format!("http://{addr}/jolokia/targets"))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let list: Value = r.json().await.map_err(|e| e.to_string())?;
        list["value"]
            .as_array()
            .and_then(|l| l.iter().find(|t| t["name"] == name).cloned())
            .ok_or_else(|| format!("{}: no {name} in {list}", self.id))
    }

    fn pid(&self) -> u32 {
        self.process.as_ref().unwrap().child.id()
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

/// Waits until every replica of `live` sees exactly them as members.
async fn members_agree(live: &[&Replica]) {
    let mut want: Vec<&str> = live.iter().map(|r| r.id.as_str()).collect();
    want.sort_unstable();
    eventually(
        "every replica sees the same members",
        Duration::from_secs(90),
        || async {
            for r in live {
                let c = r.cluster("").await?;
                let ids: Vec<&str> = c["members"]
                    .as_array()
                    .map(|m| m.iter().filter_map(|m| m["id"].as_str()).collect())
                    .unwrap_or_default();
                if ids != want || c["duties"]["state"] != "active" {
                    return Err(format!("{}: {c}", r.id));
                }
            }
            Ok(())
        },
    )
    .await;
}

/// Each target's owner, as each of `live` names it: they must agree.
async fn owners(live: &[&Replica]) -> HashMap<String, String> {
    let mut owners = HashMap::new();
    for name in names() {
        let mut said = Vec::new();
        for r in live {
            let c = r.cluster(&format!("?target={name}")).await.unwrap();
            said.push(c["owner"].as_str().unwrap().to_string());
            assert_eq!(
                c["this_replica"].as_bool(),
                Some(said.last() == Some(&r.id)),
                "{}: {c}",
                r.id
            );
        }
        said.dedup();
        assert_eq!(said.len(), 1, "{name}: the replicas disagree: {said:?}");
        owners.insert(name, said.pop().unwrap());
    }
    owners
}

/// Probes each target gets while `window` passes, counted by the agents.
async fn probes_over(agents: &CountingAgents, window: Duration) -> HashMap<String, u64> {
    let before = agents.counts();
    // The window is what is measured, not a wait for something to happen.
    tokio::time::sleep(window).await;
    let after = agents.counts();
    names()
        .into_iter()
        .map(|n| {
            let got = after.get(&n).copied().unwrap_or(0) - before.get(&n).copied().unwrap_or(0);
            (n, got)
        })
        .collect()
}

/// No target probed by more than one replica: at one probe a second, a
/// window of 10 s holds at most 10 and a little from one prober; three
/// probers would give about 30. Slowness only lowers the counts.
fn probed_once_each(counts: &HashMap<String, u64>) {
    for (name, n) in counts {
        assert!(
            *n <= 15,
            "{name} was probed {n} times in 10 s: by more than one replica ({counts:?})"
        );
    }
}

/// Waits until every target has been probed again since `since`.
async fn all_probed_since(agents: &CountingAgents, since: &HashMap<String, u64>, what: &str) {
    eventually(what, Duration::from_secs(90), || async {
        let now = agents.counts();
        let behind: Vec<String> = names()
            .into_iter()
            .filter(|n| now.get(n).copied().unwrap_or(0) <= since.get(n).copied().unwrap_or(0))
            .collect();
        if behind.is_empty() {
            Ok(())
        } else {
            Err(format!("not probed again: {behind:?}"))
        }
    })
    .await;
}

/// The run both engines must pass.
async fn three_replicas_share_the_probes(cluster: &str) {
    let agents = CountingAgents::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut replicas: Vec<Replica> = ["gw-a", "gw-b", "gw-c"]
        .iter()
        .map(|id| start(dir.path(), id, &agents, cluster))
        .collect();
    members_agree(&replicas.iter().collect::<Vec<_>>()).await;
    let owners_of_three = owners(&replicas.iter().collect::<Vec<_>>()).await;
    let counts = probes_over(&agents, Duration::from_secs(10)).await;
    probed_once_each(&counts);
    assert!(
        counts.values().all(|n| *n > 0),
        "every target probed: {counts:?}"
    );
    // Every replica counts its own share.
    let owned_total: u64 = {
        let mut total = 0;
        for r in &replicas {
            let c = r.cluster("").await.unwrap();
            let me = c["members"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["id"] == r.id.as_str())
                .unwrap()
                .clone();
            total += me["owned"].as_u64().unwrap();
        }
        total
    };
    assert_eq!(
        owned_total,
        (TARGETS as u64),
        "members' owned counts add up to the fleet"
    );

    // One killed: its targets are probed again by the others within a
    // lease and a renewal; no target is probed by two afterwards.
    let killed = replicas.remove(1);
    killed.signal("-KILL");
    let at_kill = agents.counts();
    drop(killed);
    members_agree(&replicas.iter().collect::<Vec<_>>()).await;
    all_probed_since(
        &agents,
        &at_kill,
        "the killed replica's targets are probed again",
    )
    .await;
    let owners_of_two = owners(&replicas.iter().collect::<Vec<_>>()).await;
    for (target, owner) in &owners_of_three {
        if owner != "gw-b" {
            assert_eq!(
                &owners_of_two[target], owner,
                "{target} moved between replicas that stayed"
            );
        }
    }
    probed_once_each(&probes_over(&agents, Duration::from_secs(10)).await);

    // A replica added takes its share at once.
    replicas.push(start(dir.path(), "gw-d", &agents, cluster));
    members_agree(&replicas.iter().collect::<Vec<_>>()).await;
    probed_once_each(&probes_over(&agents, Duration::from_secs(10)).await);

    // A second process with a replica id in use is refused, clearly,
    // and the first keeps its place.
    let (dup_config, _) = replica_config(dir.path(), "gw-a", &agents, cluster);
    let dup = Command::new(env!("CARGO_BIN_EXE_jmxgate"))
        .args(["serve", "--config"])
        .arg(&dup_config)
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&dup.stderr);
    assert!(!dup.status.success(), "{said}");
    assert!(said.contains("replica id \"gw-a\" is in use"), "{said}");
    members_agree(&replicas.iter().collect::<Vec<_>>()).await;

    // Paused past its lease (SIGSTOP): the others take its share; once
    // it runs again, it is a member again.
    let paused = &replicas[0];
    paused.signal("-STOP");
    let at_pause = agents.counts();
    members_agree(&replicas[1..].iter().collect::<Vec<_>>()).await;
    all_probed_since(
        &agents,
        &at_pause,
        "the paused replica's targets are probed by the others",
    )
    .await;
    paused.signal("-CONT");
    members_agree(&replicas.iter().collect::<Vec<_>>()).await;
    probed_once_each(&probes_over(&agents, Duration::from_secs(10)).await);

    for mut r in replicas {
        r.process.take().unwrap().stop();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_members_share_the_probes() {
    let mut pg = crate::postgres::Postgres::start();
    let cluster = format!("membership = \"postgres\"\nurl = \"{}\"", pg.url());
    three_replicas_share_the_probes(&cluster).await;
    pg.kill();
}

#[tokio::test(flavor = "multi_thread")]
async fn kubernetes_members_share_the_probes() {
    let api = crate::kube_api::ApiServer::start();
    let cluster = format!(
        "membership = \"kubernetes\"\nnamespace = \"default\"\nkubeconfig = \"{}\"",
        api.kubeconfig.display()
    );
    three_replicas_share_the_probes(&cluster).await;
}

/// Waits until every replica of `live` shows `name` with `state` and its
/// breaker `breaker` in `/jolokia/targets` and `jmxgate_agent_up` `up`.
async fn all_show(live: &[&Replica], name: &str, state: &str, breaker: &str, up: f64) {
    let what = format!("every replica shows {name} {state}, its breaker {breaker}");
    eventually(&what, Duration::from_secs(90), || async {
        for r in live {
            let t = r.target(name).await?;
            if t["health"]["state"] != state || t["health"]["breaker"] != breaker {
                return Err(format!("{}: {t}", r.id));
            }
            let metrics = r.admin_text("/metrics").await;
            let series = format!("jmxgate_agent_up{{target=\"{name}\"}}");
            if crate::common::metric_value(&metrics, &series) != up {
                return Err(format!("{}: {series} is not {up}", r.id));
            }
        }
        Ok(())
    })
    .await;
}

/// One health view: only a target's owner probes it, and every replica
/// shows what the owner saw (state, breaker, `jmxgate_agent_up`): down
/// with its breaker open, then up again, on replicas that never sent it
/// a request.
#[tokio::test(flavor = "multi_thread")]
async fn every_replica_shows_the_owners_probes() {
    let mut pg = crate::postgres::Postgres::start();
    let cluster = format!("membership = \"postgres\"\nurl = \"{}\"", pg.url());
    let agents = CountingAgents::start().await;
    let dir = tempfile::tempdir().unwrap();
    let replicas: Vec<Replica> = ["gw-a", "gw-b", "gw-c"]
        .iter()
        .map(|id| start(dir.path(), id, &agents, &cluster))
        .collect();
    let all: Vec<&Replica> = replicas.iter().collect();
    members_agree(&all).await;
    let owners = owners(&all).await;
    let name = "orders-0";
    all_show(&all, name, "up", "closed", 1.0).await;
    for r in &all {
        let t = r.target(name).await.unwrap();
        assert_eq!(t["agent"]["version"], "1.7.1", "{}: {t}", r.id);
    }
    agents.set_down(name, true);
    all_show(&all, name, "down", "open", 0.0).await;
    // Only its owner probed it while it was down: the others did not
    // open their breakers by their own probes (they sent none).
    let owner = &owners[name];
    for r in all.iter().filter(|r| r.id != *owner) {
        let t = r.target(name).await.unwrap();
        assert!(
            t["health"]["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("503")),
            "{}: the owner's error: {t}",
            r.id
        );
    }
    agents.set_down(name, false);
    all_show(&all, name, "up", "closed", 1.0).await;
    // The other targets stayed up everywhere.
    for other in names().iter().filter(|n| *n != name) {
        for r in &all {
            let t = r.target(other).await.unwrap();
            assert_eq!(t["health"]["state"], "up", "{}: {t}", r.id);
        }
    }
    // What the others read is on the admin listener, bounded by its
    // query: a bad one is a clear 400.
    let bad = http_client()
        .get(format!(
            "http://127.0.0.1:{}/cluster/health?since=soon",
            replicas[0].admin
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let said = bad.text().await.unwrap();
    assert!(said.contains("since"), "{said}");
    for mut r in replicas {
        r.process.take().unwrap().stop();
    }
    pg.kill();
}

/// A membership engine the test can stop and start again.
enum Engine {
    Kubernetes(crate::kube_api::ApiServer),
    Postgres(crate::postgres::Postgres),
}

impl Engine {
    /// The `[cluster]` keys that use it.
    fn cluster(&self) -> String {
        match self {
            Engine::Kubernetes(api) => format!(
                "membership = \"kubernetes\"\nnamespace = \"default\"\nkubeconfig = \"{}\"",
                api.kubeconfig.display()
            ),
            Engine::Postgres(pg) => format!("membership = \"postgres\"\nurl = \"{}\"", pg.url()),
        }
    }

    /// Stopped at once: the API server (etcd keeps the Leases), or
    /// PostgreSQL as a crash would (its data stays).
    fn stop(&mut self) {
        match self {
            Engine::Kubernetes(api) => api.stop(),
            Engine::Postgres(pg) => pg.kill(),
        }
    }

    async fn restart(&mut self) {
        match self {
            Engine::Kubernetes(api) => api.restart().await,
            Engine::Postgres(pg) => pg.restart(),
        }
    }
}

/// The engine down: each replica keeps the last members it saw, says so
/// on `/readyz` and in `jmxgate_cluster_engine_up`, and keeps probing its
/// share; back, everything is as before, and a replica killed after that
/// is noticed again.
async fn the_engine_down_keeps_the_last_membership(mut engine: Engine) {
    let cluster = engine.cluster();
    let agents = CountingAgents::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut replicas: Vec<Replica> = ["gw-a", "gw-b"]
        .iter()
        .map(|id| start(dir.path(), id, &agents, &cluster))
        .collect();
    members_agree(&replicas.iter().collect::<Vec<_>>()).await;
    engine.stop();
    eventually(
        "readyz says the engine is away",
        Duration::from_secs(90),
        || async {
            let said = replicas[0].admin_text("/readyz").await;
            if said.starts_with("ready")
                && said.contains("cluster: cannot renew")
                && said.contains("keeping the last membership (2 members)")
            {
                Ok(())
            } else {
                Err(said)
            }
        },
    )
    .await;
    let metrics = replicas[0].admin_text("/metrics").await;
    assert!(
        metrics.lines().any(|l| l == "jmxgate_cluster_engine_up 0"),
        "{metrics}"
    );
    let c = replicas[0].cluster("").await.unwrap();
    assert_eq!(c["members"].as_array().unwrap().len(), 2, "{c}");
    assert!(c["trouble"].is_string(), "{c}");
    let at_stop = agents.counts();
    all_probed_since(&agents, &at_stop, "probes go on while the engine is away").await;
    probed_once_each(&probes_over(&agents, Duration::from_secs(10)).await);
    engine.restart().await;
    for r in &replicas {
        eventually(
            "the engine answers again",
            Duration::from_secs(90),
            || async {
                let c = r.cluster("").await?;
                if c["trouble"].is_null() {
                    Ok(())
                } else {
                    Err(c.to_string())
                }
            },
        )
        .await;
    }
    members_agree(&replicas.iter().collect::<Vec<_>>()).await;
    // Membership is live again, not frozen: one killed now, the other
    // takes its share.
    let killed = replicas.remove(1);
    killed.signal("-KILL");
    let at_kill = agents.counts();
    drop(killed);
    members_agree(&replicas.iter().collect::<Vec<_>>()).await;
    all_probed_since(&agents, &at_kill, "the survivor probes every target").await;
    for mut r in replicas {
        r.process.take().unwrap().stop();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_api_server_down_keeps_the_last_membership() {
    the_engine_down_keeps_the_last_membership(Engine::Kubernetes(
        crate::kube_api::ApiServer::start(),
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_down_keeps_the_last_membership() {
    the_engine_down_keeps_the_last_membership(Engine::Postgres(crate::postgres::Postgres::start()))
        .await;
}

/// The sent-probe count on a replica's admin listener.
async fn probes_sent(r: &Replica) -> f64 {
    let metrics = r.admin_text("/metrics").await;
    crate::common::metric_value(&metrics, "jmxgate_health_probes_total{result=\"sent\"}")
}

/// Fenced: a replica paused past its lease while a new instance took its
/// replica id does no background work once it runs again: it says so,
/// sends no probe, and each target is still probed by one replica.
#[tokio::test(flavor = "multi_thread")]
async fn a_fenced_replica_does_no_work() {
    let engine = Engine::Postgres(crate::postgres::Postgres::start());
    let cluster = engine.cluster();
    let agents = CountingAgents::start().await;
    let dir = tempfile::tempdir().unwrap();
    let first = start(dir.path(), "gw-a", &agents, &cluster);
    let other = start(dir.path(), "gw-b", &agents, &cluster);
    members_agree(&[&first, &other]).await;
    first.signal("-STOP");
    members_agree(&[&other]).await;
    // Its id is free again: a new instance takes it (its own directory,
    // so its configuration names a fresh admin port).
    let again_dir = tempfile::tempdir().unwrap();
    let again = start(again_dir.path(), "gw-a", &agents, &cluster);
    members_agree(&[&again, &other]).await;
    first.signal("-CONT");
    eventually(
        "the first instance knows it is fenced",
        Duration::from_secs(90),
        || async {
            let c = first.cluster("").await?;
            let readyz = first.admin_text("/readyz").await;
            if c["duties"]["state"] == "fenced" && readyz.contains("fenced, no background work") {
                Ok(())
            } else {
                Err(format!("{c} / {readyz}"))
            }
        },
    )
    .await;
    let before = probes_sent(&first).await;
    assert!(before > 0.0, "it probed its share before the pause");
    probed_once_each(&probes_over(&agents, Duration::from_secs(10)).await);
    assert_eq!(probes_sent(&first).await, before, "the fenced one probed");
    assert!(probes_sent(&again).await > 0.0, "the new instance probes");
    let c = first.cluster("?target=orders-0").await.unwrap();
    assert_eq!(c["this_replica"], false, "{c}");
    for mut r in [first, other, again] {
        r.process.take().unwrap().stop();
    }
    drop(engine);
}

/// OTLP with three replicas: each `(export, target)` pushed by one of
/// them, so VictoriaMetrics holds each series once per interval, not
/// three times; one replica killed, its targets' series go on.
#[tokio::test(flavor = "multi_thread")]
async fn each_series_is_pushed_once_per_interval() {
    let pg = crate::postgres::Postgres::start();
    let vm = crate::victoria::Victoria::start().await;
    let agent = crate::common::Agent::start("otlp-shared");
    let dir = tempfile::tempdir().unwrap();
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otlp/threads.yml");
    // Three targets, one real agent behind them all.
    let targets: String = (0..3)
        .map(|i| {
            format!(
                "[[targets]]\nname = \"jvm-{i}\"\nurl = \"{}\"\n",
                agent.url()
            )
        })
        .collect();
    let config = |id: &str| {
        let text = format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n[admin]\nlisten = \"127.0.0.1:{admin}\"\n\n\
             [cluster]\nmembership = \"postgres\"\nurl = \"{url}\"\nreplica_id = \"{id}\"\n\
             lease_duration = \"{LEASE}\"\nrenew_interval = \"{RENEW}\"\nwait_for_members = 3\n\n\
             [[prometheus.modules]]\nname = \"threads\"\nrules_file = \"{rules}\"\n\n\
             [[otlp.exports]]\nname = \"vm\"\nendpoint = \"{endpoint}\"\ninterval = \"2s\"\n\
             targets = \"jvm-*\"\nmodule = \"threads\"\n\n{targets}",
            admin = free_port(),
            url = pg.url(),
            rules = rules.display(),
            endpoint = vm.url("/opentelemetry"),
        );
        let path = dir.path().join(format!("{id}.toml"));
        std::fs::write(&path, &text).unwrap();
        let admin: u16 = text
            .split("[admin]\nlisten = \"127.0.0.1:")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .and_then(|p| p.parse().ok())
            .unwrap();
        Replica {
            id: id.to_string(),
            admin,
            process: Some(GatewayProcess::start(&path, "info")),
        }
    };
    let mut replicas: Vec<Replica> = ["gw-a", "gw-b", "gw-c"]
        .iter()
        .map(|id| config(id))
        .collect();
    members_agree(&replicas.iter().collect::<Vec<_>>()).await;
    // Samples of one series per target, by their timestamps.
    let samples = |instance: String| {
        let vm = &vm;
        async move {
            vm.export(&format!(
                "jvm_threads_started_total{{service_instance_id=\"{instance}\"}}"
            ))
            .await
            .into_iter()
            .flat_map(|v| v["timestamps"].as_array().cloned().unwrap_or_default())
            .filter_map(|t| t.as_i64())
            .collect::<Vec<i64>>()
        }
    };
    eventually(
        "every target's series is in VictoriaMetrics",
        Duration::from_secs(90),
        || async {
            for i in 0..3 {
                if samples(format!("jvm-{i}")).await.len() < 3 {
                    return Err(format!("jvm-{i} has fewer than 3 samples"));
                }
            }
            Ok(())
        },
    )
    .await;
    // Over any window, at most one sample per interval (and a little):
    // three pushers would give three. Slowness only lowers the count.
    let per_interval = |ts: &[i64]| {
        let span = (ts.iter().max().unwrap() - ts.iter().min().unwrap()) as f64 / 2000.0;
        ts.len() as f64 / (span + 1.0)
    };
    for i in 0..3 {
        let ts = samples(format!("jvm-{i}")).await;
        let ratio = per_interval(&ts);
        assert!(ratio <= 1.5, "jvm-{i}: {ratio:.2} samples per interval ({} samples): pushed by more than one replica", ts.len());
    }
    // One killed: the others push its targets within a lease.
    let killed = replicas.remove(0);
    killed.signal("-KILL");
    drop(killed);
    let before: Vec<usize> = {
        let mut counts = Vec::new();
        for i in 0..3 {
            counts.push(samples(format!("jvm-{i}")).await.len());
        }
        counts
    };
    eventually(
        "every series grows after the kill",
        Duration::from_secs(90),
        || async {
            for (i, was) in before.iter().enumerate() {
                if samples(format!("jvm-{i}")).await.len() <= *was + 1 {
                    return Err(format!("jvm-{i} has not grown by two since the kill"));
                }
            }
            Ok(())
        },
    )
    .await;
    for i in 0..3 {
        let ts = samples(format!("jvm-{i}")).await;
        assert!(per_interval(&ts) <= 1.5, "jvm-{i} after the kill: {ts:?}");
    }
    for mut r in replicas {
        r.process.take().unwrap().stop();
    }
}
