//! Targets from inventory files (TOML, JSON, YAML) next to the main config:
//! read at start, re-read when they change while requests keep flowing,
//! and a broken inventory keeps the previous fleet.

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::Gateway;

const READ: &str = "/read/jmxgate.test:type=Types/Name";

fn yaml_inventory(entries: &[(&str, &str)]) -> String {
    entries
        .iter()
        .map(|(name, url)| format!("- name: {name}\n  url: {url}\n  labels:\n    tier: backend\n"))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn inventories_change_under_load_and_a_broken_one_keeps_the_fleet() {
    let [alpha, beta, gamma] = common::shared_agents();
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("fleet.yaml");
    std::fs::write(&yaml, yaml_inventory(&[("beta", &beta.url())])).unwrap();
    std::fs::write(
        dir.path().join("more.json"),
        format!(
            r#"{{"targets":[{{"name":"gamma","url":"{}"}}]}}"#,
            gamma.url()
        ),
    )
    .unwrap();
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[health]\nprobe_interval = \"0s\"\n\
             [[targets]]\nname = \"alpha\"\nurl = \"{}\"\n\
             [[inventory]]\ntargets_file = \"fleet.yaml\"\nlabels = {{ source = \"cmdb\" }}\n\
             [[inventory]]\ntargets_file = \"more.json\"\n",
            alpha.url()
        ),
    )
    .unwrap();
    let gw = Arc::new(Gateway::start_from_file(&config).await);
    tokio::spawn(jmxgate::reload::watch(
        gw.gateway.clone(),
        jmxgate::config::ConfigSource::file(&config),
        Duration::from_millis(200),
    ));
    for name in ["alpha", "beta", "gamma"] {
        let (_, r) = gw.get(&format!("/jolokia/targets/{name}{READ}")).await;
        assert_eq!(r["value"], name, "{r}");
    }
    let labels = &gw.gateway.fleet().by_name("beta").unwrap().labels.clone();
    assert_eq!(labels.get("source"), Some("cmdb"));
    assert_eq!(labels.get("tier"), Some("backend"));
    // The target list says where each target came from (never the file).
    let (_, list) = gw.get("/jolokia/targets").await;
    let origins: Vec<(&str, &str)> = list["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap(), t["origin"].as_str().unwrap()))
        .collect();
    assert_eq!(
        origins,
        [
            ("alpha", "configuration"),
            ("beta", "inventory"),
            ("gamma", "inventory")
        ],
        "{list}"
    );

    // Load on alpha while the inventory changes: nothing may fail.
    let stop = Arc::new(AtomicBool::new(false));
    let (served, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let load: Vec<_> = (0..4)
        .map(|_| {
            let (gw, stop, served, failed) =
                (gw.clone(), stop.clone(), served.clone(), failed.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let (status, r) = gw.get(&format!("/jolokia/targets/alpha{READ}")).await;
                    if status == 200 && r["value"] == "alpha" {
                        served.fetch_add(1, Ordering::Relaxed);
                    } else {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();

    // beta is renamed beta-2 in the inventory.
    std::fs::write(&yaml, yaml_inventory(&[("beta-2", &beta.url())])).unwrap();
    common::eventually(
        "the inventory change applies",
        Duration::from_secs(60),
        || async {
            let (_, r) = gw.get(&format!("/jolokia/targets/beta-2{READ}")).await;
            if r["value"] == "beta" {
                Ok(())
            } else {
                Err(r.to_string())
            }
        },
    )
    .await;
    let (status, _) = gw.get(&format!("/jolokia/targets/beta{READ}")).await;
    assert_eq!(status, 404, "the old name is gone");

    // A broken inventory: the fleet stays as it was, and the reload is
    // counted as failed.
    std::fs::write(&yaml, "- name: beta-3\n  url: [unclosed\n").unwrap();
    common::eventually(
        "the broken inventory is noticed",
        Duration::from_secs(60),
        || async {
            let metrics = gw.gateway.metrics().encode();
            if metrics.contains(r#"jmxgate_config_reloads_total{status="error"}"#) {
                Ok(())
            } else {
                Err(metrics)
            }
        },
    )
    .await;
    let (_, r) = gw.get(&format!("/jolokia/targets/beta-2{READ}")).await;
    assert_eq!(r["value"], "beta", "the previous fleet stays: {r}");

    stop.store(true, Ordering::Relaxed);
    for l in load {
        l.await.unwrap();
    }
    assert!(served.load(Ordering::Relaxed) > 20, "the load ran");
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "no request failed during the changes"
    );
}

#[test]
fn check_config_names_the_broken_inventory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bad.yaml"),
        "- name: x\n  url: http://h:1/jolokia\n  colour: red\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("dup.json"),
        r#"[{"name":"main","url":"http://h:2/jolokia"},{"name":"twice","url":"http://h:4/jolokia"},{"name":"twice","url":"http://h:5/jolokia"}]"#,
    )
    .unwrap();
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        "[server]\nlisten = \"127.0.0.1:0\"\n[[targets]]\nname = \"main\"\nurl = \"http://h:3/jolokia\"\n\
         [[inventory]]\ntargets_file = \"bad.yaml\"\n[[inventory]]\ntargets_file = \"dup.json\"\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_jmxgate"))
        .args(["check-config", config.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("bad.yaml") && err.contains("colour"), "{err}");
    assert!(
        err.contains("dup.json: target \"twice\" is listed twice in this file"),
        "{err}"
    );
    // A name the configuration has too is the collision rule's, not an error.
    assert!(!err.contains("\"main\""), "{err}");
}

/// A file an inventory's target names (its agent password) is watched like
/// a file the configuration names: changing it reloads the fleet. It once
/// wasn't, so a rotated password only counted after some other change.
#[tokio::test(flavor = "multi_thread")]
async fn a_password_file_named_in_an_inventory_reloads_when_it_changes() {
    let [alpha, ..] = common::shared_agents();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("inv/secrets")).unwrap();
    let password = dir.path().join("inv/secrets/alpha.pw");
    std::fs::write(&password, "first\n").unwrap();
    std::fs::write(
        dir.path().join("inv/fleet.yaml"),
        format!(
            "- name: alpha\n  url: {}\n  user: jolokia\n  password_file: secrets/alpha.pw\n",
            alpha.url()
        ),
    )
    .unwrap();
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        "[server]\nlisten = \"127.0.0.1:0\"\n[health]\nprobe_interval = \"0s\"\n\
         [[inventory]]\ntargets_file = \"inv/fleet.yaml\"\n",
    )
    .unwrap();
    let gw = Gateway::start_from_file(&config).await;
    tokio::spawn(jmxgate::reload::watch(
        gw.gateway.clone(),
        jmxgate::config::ConfigSource::file(&config),
        Duration::from_millis(200),
    ));
    let (_, r) = gw.get(&format!("/jolokia/targets/alpha{READ}")).await;
    assert_eq!(r["value"], "alpha", "{r}");
    // The watcher takes its first look at every file when its task first
    // runs, which nothing shows: the password is rotated again (each time
    // to a new one) until a reload is seen. Only that file changes, so a
    // reload means the watcher watches it.
    let before = gw.gateway.fleet();
    let rotations = AtomicUsize::new(0);
    common::eventually(
        "the fleet is reloaded after the inventory's password file changed",
        Duration::from_secs(60),
        || async {
            if !Arc::ptr_eq(&before, &gw.gateway.fleet()) {
                return Ok(());
            }
            let n = rotations.fetch_add(1, Ordering::Relaxed) + 1;
            std::fs::write(&password, format!("rotated {n} times\n")).unwrap();
            Err(format!("the same fleet after {n} rotation(s)"))
        },
    )
    .await;
    let (_, r) = gw.get(&format!("/jolokia/targets/alpha{READ}")).await;
    assert_eq!(r["value"], "alpha", "{r}");
}

/// The origin `GET /jolokia/targets` gives the target `name`.
async fn origin_of(gw: &Gateway, name: &str) -> Option<String> {
    let (_, list) = gw.get("/jolokia/targets").await;
    list["value"]
        .as_array()?
        .iter()
        .find(|t| t["name"] == name)
        .map(|t| t["origin"].as_str().unwrap_or_default().to_string())
}

/// An inventory file is one source beside the configuration's targets: a
/// name both give is the configuration's (no error), and a file that
/// names a target twice is refused, naming the file and the name, while
/// every source keeps serving what it had.
#[tokio::test(flavor = "multi_thread")]
async fn an_inventory_naming_a_target_twice_is_refused_and_the_rest_keep_serving() {
    let [alpha, beta, gamma] = common::shared_agents();
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("fleet.yaml");
    std::fs::write(
        &inventory,
        yaml_inventory(&[("beta", &beta.url()), ("main", &gamma.url())]),
    )
    .unwrap();
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[health]\nprobe_interval = \"0s\"\n\
             [[targets]]\nname = \"main\"\nurl = \"{}\"\n\
             [[inventory]]\ntargets_file = \"fleet.yaml\"\n",
            alpha.url()
        ),
    )
    .unwrap();
    let gw = Gateway::start_from_file(&config).await;
    let (_, r) = gw.get(&format!("/jolokia/targets/main{READ}")).await;
    assert_eq!(r["value"], "alpha", "the configured main is kept: {r}");
    assert_eq!(
        origin_of(&gw, "main").await.as_deref(),
        Some("configuration")
    );
    let text = gw.gateway.metrics().encode();
    let inventory_source = format!("source=\"inventory:{}\"", inventory.display());
    for line in [
        format!("jmxgate_discovery_shadowed_targets{{{inventory_source}}} 1"),
        format!("jmxgate_discovery_up{{{inventory_source}}} 1"),
    ] {
        assert!(text.contains(&line), "{line}\n{text}");
    }

    std::fs::write(
        &inventory,
        yaml_inventory(&[
            ("beta", &beta.url()),
            ("newcomer", &gamma.url()),
            ("beta", &gamma.url()),
        ]),
    )
    .unwrap();
    // As SIGHUP or a changed file reloads.
    let err = jmxgate::reload::reload(&gw.gateway, &jmxgate::config::ConfigSource::file(&config))
        .unwrap_err();
    assert!(
        err.contains("fleet.yaml: target \"beta\" is listed twice in this file"),
        "{err}"
    );
    assert!(gw
        .gateway
        .metrics()
        .encode()
        .contains(r#"jmxgate_config_reloads_total{status="error"} 1"#));
    // Nothing of the refused file went in; every source serves as before.
    for (name, agent) in [("main", "alpha"), ("beta", "beta")] {
        let (_, r) = gw.get(&format!("/jolokia/targets/{name}{READ}")).await;
        assert_eq!(r["value"], agent, "{name}: {r}");
    }
    let (status, _) = gw.get(&format!("/jolokia/targets/newcomer{READ}")).await;
    assert_eq!(status, 404);
}
