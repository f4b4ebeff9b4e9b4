//! The project's `docker/kubernetes/` manifests against a real API server
//! (kube-apiserver 1.20.2, ../shared/kubernetes): rendered by `kubectl
//! kustomize` and applied server-side as an operator would; then the
//! gateway's own service account (a TokenRequest token for `jmxgate` in
//! namespace `jmxgate`, as its pod would mount) is allowed what discovery
//! needs and nothing more (its own Leases in its namespace included: a
//! replica with the ConfigMap's `[cluster]` joins with that token and
//! gives its Lease up on a clean stop), and with it the ConfigMap's own
//! `[[discovery.kubernetes]]` entry refuses a Pod on this machine's
//! loopback (its safe default), while a copy that allows 127.0.0.0/24
//! finds it and its agent then answers a read through the gateway.

use crate::common;
use crate::kube_api;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use common::Agent;
use kube_api::{create_namespace, create_pod, set_running, ApiServer};

fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> (bool, String) {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl (Debian's kubernetes-client) is installed");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The rendered manifests, one YAML document each.
fn rendered() -> Vec<serde_json::Value> {
    let out = Command::new("kubectl")
        .args(["kustomize", "docker/kubernetes"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("kubectl");
    assert!(
        out.status.success(),
        "kubectl kustomize: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    text.split("\n---\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_saphyr::from_str(d).expect("a YAML document"))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_manifests_apply_and_their_service_account_discovers_pods() {
    if !kube_api::available() {
        panic!("../shared/kubernetes/run-apiserver.sh or etcd (etcd-server) missing: run scripts/install-deps.sh");
    }
    let server = std::thread::spawn(ApiServer::start);
    let agent = Agent::start_at("manifests-orders", "127.0.0.21");
    let server = server.join().unwrap();
    let admin = server.client().await.unwrap();

    // The HorizontalPodAutoscaler is autoscaling/v2, which 1.20 doesn't
    // know yet (it came in 1.23): everything else is applied as rendered.
    let documents = rendered();
    let kinds: Vec<&str> = documents
        .iter()
        .filter_map(|d| d["kind"].as_str())
        .collect();
    for kind in [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "ConfigMap",
    ] {
        assert!(kinds.contains(&kind), "no {kind} in {kinds:?}");
    }
    let applied: Vec<&serde_json::Value> = documents
        .iter()
        .filter(|d| d["kind"] != "HorizontalPodAutoscaler")
        .collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": applied});
    let (ok, said) = kubectl(
        &server.kubeconfig,
        &[
            "apply",
            "--server-side",
            "--field-manager=jmxgate-tests",
            "-f",
            "-",
        ],
        Some(&list.to_string()),
    );
    assert!(ok, "kubectl apply --server-side: {said}");
    let (ok, said) = kubectl(
        &server.kubeconfig,
        &[
            "get",
            "-n",
            "jmxgate",
            "serviceaccount/jmxgate",
            "deployment/jmxgate",
        ],
        None,
    );
    assert!(ok, "{said}");
    let deployment = documents
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .unwrap();
    let pod_spec = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod_spec["serviceAccountName"], "jmxgate");
    assert_eq!(pod_spec["automountServiceAccountToken"], true);

    // What the service account may do, as the API server decides it.
    let sa = "system:serviceaccount:jmxgate:jmxgate";
    let can = |args: &[&str]| {
        let mut all = vec!["auth", "can-i"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--as", sa]);
        let (_, said) = kubectl(&server.kubeconfig, &all, None);
        said.lines().next().unwrap_or_default().trim().to_string()
    };
    for allowed in [
        &["watch", "pods", "--all-namespaces"][..],
        &["list", "pods", "-n", "orders"],
        &["list", "namespaces"],
        &["create", "leases", "-n", "jmxgate"],
        &["update", "leases", "-n", "jmxgate"],
        &["delete", "leases", "-n", "jmxgate"],
        &["watch", "leases", "-n", "jmxgate"],
    ] {
        assert_eq!(can(allowed), "yes", "{allowed:?}");
    }
    for refused in [
        &["create", "pods", "-n", "orders"][..],
        &["get", "secrets", "-n", "jmxgate"],
        &["get", "pods", "--subresource=proxy", "-n", "orders"],
        &["create", "tokenreviews"],
        &["create", "leases", "-n", "orders"],
    ] {
        assert_eq!(can(refused), "no", "{refused:?}");
    }

    // The ConfigMap's own discovery entry, with the service account's
    // token in place of the in-cluster one.
    let config_map = documents
        .iter()
        .find(|d| d["kind"] == "ConfigMap" && d["data"]["gateway.toml"].is_string())
        .unwrap();
    let shipped: toml::Value =
        toml::from_str(config_map["data"]["gateway.toml"].as_str().unwrap()).unwrap();
    a_replica_joins_with_the_service_accounts_leases(&server, &admin, &shipped).await;
    let mut entry = shipped["discovery"]["kubernetes"][0].clone();
    let namespaces: Vec<String> = entry["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    let kubeconfig = server.token_kubeconfig(&admin, "jmxgate", "jmxgate").await;
    entry.as_table_mut().unwrap().insert(
        "kubeconfig".into(),
        toml::Value::String(kubeconfig.display().to_string()),
    );
    // The shipped entry keeps the safe default, which refuses this
    // machine's addresses (where the test's "Pod" runs): it runs as
    // shipped, and beside it a copy that allows loopback finds the Pod.
    assert!(
        entry.get("allowed_networks").is_none(),
        "the ConfigMap's entry sets allowed_networks: {entry}"
    );
    let mut on_loopback = entry.clone();
    let copy = on_loopback.as_table_mut().unwrap();
    copy.insert(
        "allowed_networks".into(),
        toml::Value::Array(vec![toml::Value::String("127.0.0.0/24".into())]),
    );
    copy.insert("name_prefix".into(), toml::Value::String("test-".into()));
    let mut discovery = toml::map::Map::new();
    discovery.insert(
        "kubernetes".into(),
        toml::Value::Array(vec![entry.clone(), on_loopback]),
    );
    let mut root = toml::map::Map::new();
    root.insert("discovery".into(), toml::Value::Table(discovery));
    let gw = common::Gateway::start(&toml::to_string(&root).unwrap()).await;
    let _discovery = gw.gateway.spawn_discovery().expect("an entry configured");

    for ns in &namespaces {
        create_namespace(&admin, ns, json!({})).await;
    }
    let home = &namespaces[0];
    let port_name = entry["port_name"].as_str().unwrap_or("jolokia");
    create_pod(
        &admin,
        home,
        json!({"name": "orders-0", "labels": {"app": "orders"}}),
        json!([{"name": port_name, "containerPort": agent.port}]),
    )
    .await;
    set_running(&admin, home, "orders-0", "127.0.0.21", true).await;

    let name = format!("test-{home}.orders-0");
    let own = common::direct(
        &agent,
        &json!({"type": "read", "mbean": "jmxgate.test:type=Types", "attribute": "Name"}),
    )
    .await;
    common::eventually(
        &format!("{name} answers through the gateway"),
        Duration::from_secs(60),
        || async {
            let (status, r) = gw
                .get(&format!(
                    "/jolokia/targets/{name}/read/jmxgate.test:type=Types/Name"
                ))
                .await;
            if status == 200 && r["value"] == own["value"] {
                Ok(())
            } else {
                Err(format!("{status} {r}"))
            }
        },
    )
    .await;
    // The shipped entry refused it (counted as a Pod that says something
    // odd), and has no target of it.
    common::eventually(
        "the shipped entry refuses the pod on loopback",
        Duration::from_secs(60),
        || async {
            let text = gw.gateway.metrics().encode();
            if text.contains("jmxgate_discovery_refused_pods_total{source=\"kubernetes[0]\"} 1") {
                Ok(())
            } else {
                Err(text
                    .lines()
                    .filter(|l| l.contains("discovery"))
                    .collect::<Vec<_>>()
                    .join("\n"))
            }
        },
    )
    .await;
    assert!(
        gw.gateway
            .fleet()
            .by_name(&format!("{home}.orders-0"))
            .is_none(),
        "the shipped entry took a pod on loopback"
    );
    // Labelled as the ConfigMap says, so its roles select it.
    let target = gw.gateway.fleet().by_name(&name).unwrap().clone();
    for (key, value) in entry["labels"].as_table().unwrap() {
        assert_eq!(target.labels.get(key.as_str()), value.as_str(), "{key}");
    }
    assert_eq!(target.labels.get("app"), Some("orders"));
    assert_eq!(target.labels.get("namespace"), Some(home.as_str()));
    // Its roles select by what a Pod cannot say of itself: the labels
    // discovery sets (namespace, pod, …) and the entry's own, never a
    // Pod's own labels such as app.
    let pod_proof: Vec<String> = jmxgate::discovery::kubernetes::OWN_LABELS
        .iter()
        .map(|l| l.to_string())
        .chain(entry["labels"].as_table().unwrap().keys().cloned())
        .collect();
    for role in shipped["roles"].as_array().unwrap() {
        for selector in role["targets"].as_array().unwrap() {
            let selector = selector.as_str().unwrap();
            if let Ok(jmxgate::access::TargetSelector::Labels(labels)) =
                jmxgate::access::TargetSelector::parse(selector)
            {
                for (key, _) in labels {
                    assert!(
                        pod_proof.contains(&key),
                        "role {}: \"{selector}\" selects on {key}, which a Pod sets itself",
                        role["name"]
                    );
                }
            }
        }
    }
}

/// The ConfigMap's `[cluster]` as a replica in the pod runs it, with the
/// service account's token: it keeps its own Lease in the gateway's
/// namespace (the service account's, which a pod's client defaults to),
/// saying where its admin listener is, and gives it up on a clean stop.
async fn a_replica_joins_with_the_service_accounts_leases(
    server: &ApiServer,
    admin: &kube::Client,
    shipped: &toml::Value,
) {
    use k8s_openapi::api::coordination::v1::Lease;
    let mut cluster = shipped["cluster"].clone();
    assert_eq!(cluster["membership"].as_str(), Some("kubernetes"));
    let kubeconfig = server.token_kubeconfig(admin, "jmxgate", "jmxgate").await;
    let table = cluster.as_table_mut().unwrap();
    table.insert("kubeconfig".into(), kubeconfig.display().to_string().into());
    table.insert("namespace".into(), "jmxgate".into());
    table.insert("replica_id".into(), "jmxgate-0".into());
    let admin_port = common::free_port();
    let mut root = toml::map::Map::new();
    root.insert("cluster".into(), cluster);
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[admin]\nlisten = \"127.0.0.1:{admin_port}\"\n\n{}",
        toml::to_string(&root).unwrap()
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("replica.toml");
    std::fs::write(&path, config).unwrap();
    let replica = common::GatewayProcess::start(&path, "info");
    let leases: kube::Api<Lease> = kube::Api::namespaced(admin.clone(), "jmxgate");
    let lease = common::eventually(
        "the replica's Lease is in namespace jmxgate",
        Duration::from_secs(60),
        || async {
            leases
                .get_opt("jmxgate-member-jmxgate-0")
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| "no Lease yet".to_string())
        },
    )
    .await;
    let annotations = lease.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations.get("jmxgate.io/admin-url").map(String::as_str),
        Some(format!("http://127.0.0.1:{admin_port}").as_str()),
        "{annotations:?}"
    );
    let view = common::get_json(
        &common::http_client(),
        &format!("http://127.0.0.1:{admin_port}/cluster"),
    )
    .await;
    assert_eq!(view["membership"], "kubernetes", "{view}");
    assert_eq!(view["members"][0]["id"], "jmxgate-0", "{view}");
    replica.stop();
    common::eventually(
        "a clean stop gives the Lease up",
        Duration::from_secs(60),
        || async {
            match leases.get_opt("jmxgate-member-jmxgate-0").await {
                Ok(None) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
}
