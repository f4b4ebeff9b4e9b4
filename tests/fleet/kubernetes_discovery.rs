//! Kubernetes discovery against a real kube-apiserver (1.20.2 over etcd,
//! ../shared/kubernetes) and real Jolokia agents standing in for Pods: each
//! agent listens on its own 127.0.0.x address, and a Pod "runs" there once
//! its status (phase, podIP, Ready) is written, as a kubelet would. Every
//! entry lists `allowed_networks = ["127.0.0.0/24"]`, since discovery
//! refuses this machine's addresses by default; a Pod at 127.1.0.5 is
//! refused by that list.
//!
//! One API server for the whole file (it takes seconds and 300 MB to
//! start): a single test runs the scenarios one after the other, each in
//! its own namespaces; the API server's stop and restart come last, under
//! a steady load of reads.

use crate::common;
use crate::kube_api;

use std::time::Duration;

use serde_json::{json, Value};

use common::Agent;
use kube_api::{create_namespace, create_pod, delete_pod, set_running, ApiServer};

const NAME: &str = "/read/jmxgate.test:type=Types/Name";
const WAIT: Duration = Duration::from_secs(60);
/// The Pods' agents are on this machine, which discovery refuses unless
/// an entry lists it.
const LOOPBACK: &str = "allowed_networks = [\"127.0.0.0/24\"]\n";

/// The fleet's target names, sorted, of those starting with `prefix`.
fn names(gw: &common::Gateway, prefix: &str) -> Vec<String> {
    let mut n: Vec<String> = gw
        .gateway
        .fleet()
        .iter()
        .map(|t| t.name.clone())
        .filter(|n| n.starts_with(prefix))
        .collect();
    n.sort();
    n
}

/// Waits until the fleet's names starting with `prefix` are `expected`.
async fn fleet_becomes(gw: &common::Gateway, prefix: &str, expected: &[&str]) {
    common::eventually(
        &format!("targets {prefix}* = {expected:?}"),
        WAIT,
        || async {
            let now = names(gw, prefix);
            if now == expected {
                Ok(())
            } else {
                Err(format!("{now:?}"))
            }
        },
    )
    .await
}

fn metadata(name: &str, labels: Value, annotations: Value) -> Value {
    json!({"name": name, "labels": labels, "annotations": annotations})
}

#[tokio::test(flavor = "multi_thread")]
async fn pods_are_discovered_through_a_real_api_server() {
    if !kube_api::available() {
        panic!("../shared/kubernetes/run-apiserver.sh or etcd (etcd-server) missing: run scripts/install-deps.sh");
    }
    // The API server and four agents start side by side.
    let server = std::thread::spawn(ApiServer::start);
    let agents: Vec<_> = [
        ("shop-orders", "127.0.0.11"),
        ("pay-orders", "127.0.0.12"),
        ("billing", "127.0.0.13"),
        ("late", "127.0.0.14"),
    ]
    .into_iter()
    .map(|(n, ip)| std::thread::spawn(move || Agent::start_at(n, ip)))
    .collect();
    // Behind HTTP Basic: k3-shop's agent takes that namespace's password,
    // k3-pay's the one of [target_defaults] (so it lets in whoever was
    // handed that password).
    let secured: Vec<_> = [
        ("k3-shop", "127.0.0.16", "shop-pw"),
        ("k3-pay", "127.0.0.17", "defaults-pw"),
    ]
    .into_iter()
    .map(|(n, ip, pw)| {
        std::thread::spawn(move || {
            Agent::start_at_with(n, ip, &["--user", "ops", "--password", pw])
        })
    })
    .collect();
    let agents: Vec<Agent> = agents.into_iter().map(|h| h.join().unwrap()).collect();
    let secured: Vec<Agent> = secured.into_iter().map(|h| h.join().unwrap()).collect();
    let mut server = server.join().unwrap();
    let (shop, pay, billing, late) = (&agents[0], &agents[1], &agents[2], &agents[3]);
    let client = server.client().await.unwrap();
    let jolokia = |agent: &Agent| json!([{"name": "jolokia", "containerPort": agent.port}]);

    for (ns, labels) in [
        ("k1-shop", json!({})),
        ("k1-pay", json!({})),
        ("k1-other", json!({})),
        ("k2-a", json!({"tenant": "k2"})),
        ("k2-b", json!({"tenant": "other"})),
    ] {
        create_namespace(&client, ns, labels).await;
    }
    let orders = json!({"app": "orders"});
    // Entry 0 (namespaces and a pod selector): two pods named orders-1 in
    // two namespaces; a pod the selector leaves out; one in a namespace
    // not listed; one with a hostile path; one not running yet; one found
    // by another port name with hawtio-online's annotations.
    let owned = json!({"name": "orders-1", "labels": {"app": "orders"}, "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "orders-7d9", "uid": "0b7f1c1e-0000-4000-8000-000000000001", "controller": true}]});
    create_pod(&client, "k1-shop", owned.clone(), jolokia(shop)).await;
    set_running(&client, "k1-shop", "orders-1", "127.0.0.11", true).await;
    create_pod(&client, "k1-pay", owned, jolokia(pay)).await;
    set_running(&client, "k1-pay", "orders-1", "127.0.0.12", true).await;
    create_pod(
        &client,
        "k1-shop",
        metadata("web-1", json!({"app": "web"}), json!({})),
        jolokia(billing),
    )
    .await;
    set_running(&client, "k1-shop", "web-1", "127.0.0.13", true).await;
    create_pod(
        &client,
        "k1-other",
        metadata("orders-1", orders.clone(), json!({})),
        jolokia(billing),
    )
    .await;
    set_running(&client, "k1-other", "orders-1", "127.0.0.13", true).await;
    create_pod(
        &client,
        "k1-shop",
        metadata(
            "hostile-1",
            orders.clone(),
            json!({"hawt.io/jolokiaPath": "http://evil.example/", "jmxgate.io/path": "/../../x"}),
        ),
        jolokia(billing),
    )
    .await;
    set_running(&client, "k1-shop", "hostile-1", "127.0.0.13", true).await;
    create_pod(
        &client,
        "k1-shop",
        metadata(
            "hostile-2",
            orders.clone(),
            json!({"jmxgate.io/port": "evil.example:80", "hawt.io/protocol": "https\nHost: evil"}),
        ),
        jolokia(billing),
    )
    .await;
    set_running(&client, "k1-shop", "hostile-2", "127.0.0.13", true).await;
    create_pod(
        &client,
        "k1-shop",
        metadata("pending-1", orders.clone(), json!({})),
        jolokia(billing),
    )
    .await;
    create_pod(
        &client,
        "k1-shop",
        metadata(
            "billing-1",
            json!({"app": "billing"}),
            json!({"jmxgate.io/port": "jmx", "hawt.io/protocol": "http", "hawt.io/jolokiaPath": "/jolokia"}),
        ),
        json!([{"name": "http", "containerPort": 1}, {"name": "jmx", "containerPort": billing.port}]),
    )
    .await;
    set_running(&client, "k1-shop", "billing-1", "127.0.0.13", true).await;
    create_pod(
        &client,
        "k1-shop",
        metadata(
            "billing-tls",
            json!({"app": "billing"}),
            json!({"hawt.io/protocol": "https", "hawt.io/jolokiaPath": "/actuator/jolokia"}),
        ),
        jolokia(billing),
    )
    .await;
    set_running(&client, "k1-shop", "billing-tls", "127.0.0.13", true).await;

    // Entry 1 (a namespace selector, not-ready pods included).
    for (ns, name, ip, ready) in [
        ("k2-a", "p1", "127.0.0.11", true),
        ("k2-a", "p2", "127.0.0.12", false),
        ("k2-b", "p1", "127.0.0.13", true),
    ] {
        create_pod(
            &client,
            ns,
            metadata(name, json!({}), json!({})),
            jolokia(&agents[ip.as_bytes()[9] as usize - b'1' as usize]),
        )
        .await;
        set_running(&client, ns, name, ip, ready).await;
    }

    // Entry 3 (only 127.0.0.0/24; agent credentials for k3-shop only): a
    // pod whose status puts it at 127.1.0.5 is refused, never a target and
    // never connected to (a listener there counts who comes); the pod in
    // k3-pay gets no credentials, neither k3-shop's nor [target_defaults]'.
    let far = std::net::TcpListener::bind("127.1.0.5:0").unwrap();
    far.set_nonblocking(true).unwrap();
    for ns in ["k3-shop", "k3-pay"] {
        create_namespace(&client, ns, json!({})).await;
    }
    for (ns, name, ip, port) in [
        ("k3-shop", "orders-1", "127.0.0.16", secured[0].port),
        ("k3-pay", "orders-1", "127.0.0.17", secured[1].port),
        (
            "k3-shop",
            "far-1",
            "127.1.0.5",
            far.local_addr().unwrap().port(),
        ),
    ] {
        create_pod(
            &client,
            ns,
            metadata(name, json!({"app": "orders"}), json!({})),
            json!([{"name": "jolokia", "containerPort": port}]),
        )
        .await;
        set_running(&client, ns, name, ip, true).await;
    }
    let secrets = tempfile::tempdir().unwrap();
    let shop_password = secrets.path().join("shop.pw");
    std::fs::write(&shop_password, "shop-pw\n").unwrap();

    // Entry 2: a service account that may read Pods in k1-shop only (as
    // the README says: get, list, watch pods; a Role with `namespaces`).
    // Its k1-pay watch is refused; that holds back nothing of k1-shop.
    create_namespace(&client, "jmxgate", json!({})).await;
    let limited = server
        .service_account_kubeconfig(&client, "jmxgate", "gateway", &["k1-shop"])
        .await;

    let kubeconfig = server.kubeconfig.display().to_string();
    let config = format!(
        "[health]\nprobe_interval = \"0s\"\n\
         [target_defaults]\nrequest_timeout = \"120s\"\nuser = \"ops\"\npassword = \"defaults-pw\"\n\
         [[discovery.kubernetes]]\nkubeconfig = \"{kubeconfig}\"\n{LOOPBACK}\
         namespaces = [\"k1-shop\", \"k1-pay\"]\npod_selector = \"app in (orders,billing)\"\n\
         [[discovery.kubernetes]]\nkubeconfig = \"{kubeconfig}\"\n{LOOPBACK}\
         namespace_selector = \"tenant=k2\"\nready_only = false\n\
         [[discovery.kubernetes]]\nkubeconfig = \"{}\"\nname_prefix = \"sa-\"\n{LOOPBACK}\
         namespaces = [\"k1-shop\", \"k1-pay\"]\npod_selector = \"app=orders\"\n\
         [[discovery.kubernetes]]\nkubeconfig = \"{kubeconfig}\"\n{LOOPBACK}\
         namespaces = [\"k3-shop\", \"k3-pay\"]\n\
         [[discovery.kubernetes.credentials]]\nnamespace = \"k3-shop\"\nuser = \"ops\"\n\
         password_file = \"{}\"\n",
        limited.display(),
        shop_password.display()
    );
    let gw = common::Gateway::start(&config).await;
    let _discovery = gw.gateway.spawn_discovery().expect("entries configured");

    fleet_becomes(
        &gw,
        "k1-",
        &[
            "k1-pay.orders-1",
            "k1-shop.billing-1",
            "k1-shop.billing-tls",
            "k1-shop.orders-1",
        ],
    )
    .await;
    fleet_becomes(&gw, "k2-", &["k2-a.p1", "k2-a.p2"]).await;
    fleet_becomes(&gw, "sa-", &["sa-k1-shop.orders-1"]).await;
    common::eventually("the refused watch reported", WAIT, || async {
        let text = gw.gateway.metrics().encode();
        if text.contains("jmxgate_discovery_up{source=\"kubernetes[2]\"} 0")
            && text.contains("jmxgate_discovery_up{source=\"kubernetes[0]\"} 1")
        {
            Ok(())
        } else {
            Err(text
                .lines()
                .filter(|l| l.contains("discovery_up"))
                .collect::<Vec<_>>()
                .join("\n"))
        }
    })
    .await;
    fleet_becomes(&gw, "k3-", &["k3-pay.orders-1", "k3-shop.orders-1"]).await;
    common::eventually("the pod at 127.1.0.5 refused", WAIT, || async {
        let text = gw.gateway.metrics().encode();
        if text.contains("jmxgate_discovery_refused_pods_total{source=\"kubernetes[3]\"} 1") {
            Ok(())
        } else {
            Err(text
                .lines()
                .filter(|l| l.contains("discovery"))
                .collect::<Vec<_>>()
                .join("\n"))
        }
    })
    .await;
    // k3-shop's pod answers with its namespace's password, and a selector
    // over its namespace reaches it alone.
    let (_, r) = gw
        .post(
            "/jolokia",
            &json!({"type": "read", "mbean": "jmxgate.test:type=Types", "attribute": "Name",
                    "target": {"url": "namespace=k3-shop"}}),
        )
        .await;
    assert_eq!(r["value"], json!({"k3-shop.orders-1": "k3-shop"}), "{r}");
    // k3-pay's is sent no password: its agent refuses.
    let (_, r) = gw
        .get(&format!("/jolokia/targets/k3-pay.orders-1{NAME}"))
        .await;
    assert_eq!(r["status"], 502, "{r}");
    assert!(
        r["error"].as_str().unwrap_or_default().contains("HTTP 401"),
        "{r}"
    );
    assert!(!r.to_string().contains("-pw"), "{r}");
    match far.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Ok((_, peer)) => panic!("the refused pod's address was connected to from {peer}"),
        Err(e) => panic!("accept: {e}"),
    }

    // The two hostile pods are counted (each once, however often listed).
    let text = gw.gateway.metrics().encode();
    assert!(
        text.contains("jmxgate_discovery_refused_pods_total{source=\"kubernetes[0]\"} 2"),
        "{}",
        text.lines()
            .filter(|l| l.contains("discovery"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let (status, r) = gw
        .get(&format!("/jolokia/targets/sa-k1-shop.orders-1{NAME}"))
        .await;
    assert_eq!((status, &r["value"]), (200, &json!("shop-orders")), "{r}");

    // The target list says where a target came from.
    let (_, list) = gw.get("/jolokia/targets").await;
    let entry = list["value"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "k1-shop.orders-1")
        .cloned()
        .unwrap_or_default();
    assert_eq!(entry["origin"], "discovery.kubernetes[0]", "{list}");

    // Each read by a discovered name reaches that pod's own agent.
    for (name, value) in [
        ("k1-shop.orders-1", "shop-orders"),
        ("k1-pay.orders-1", "pay-orders"),
        ("k1-shop.billing-1", "billing"),
        ("k2-a.p1", "shop-orders"),
    ] {
        let (status, r) = gw.get(&format!("/jolokia/targets/{name}{NAME}")).await;
        assert_eq!((status, &r["value"]), (200, &json!(value)), "{name}: {r}");
    }
    // Proxy mode, and a label selector over namespace and app.
    let (_, r) = gw
        .post(
            "/jolokia",
            &json!({"type": "read", "mbean": "jmxgate.test:type=Types", "attribute": "Name",
                    "target": {"url": "k1-pay.orders-1"}}),
        )
        .await;
    assert_eq!(r["value"], "pay-orders", "{r}");
    let (_, r) = gw
        .post(
            "/jolokia",
            &json!({"type": "read", "mbean": "jmxgate.test:type=Types", "attribute": "Name",
                    "target": {"url": "namespace=k1-shop,app=orders"}}),
        )
        .await;
    assert_eq!(
        r["value"],
        json!({"k1-shop.orders-1": "shop-orders", "sa-k1-shop.orders-1": "shop-orders"}),
        "{r}"
    );

    // Labels: the pod's, plus namespace, pod, controller; URLs at the
    // pod's own address, the port the pod declares, hawtio's scheme/path.
    let fleet = gw.gateway.fleet();
    let t = fleet.by_name("k1-shop.orders-1").unwrap();
    for (k, v) in [
        ("app", "orders"),
        ("namespace", "k1-shop"),
        ("pod", "orders-1"),
        ("controller_kind", "ReplicaSet"),
        ("controller", "orders-7d9"),
        ("discovered_by", "kubernetes"),
    ] {
        assert_eq!(t.labels.get(k), Some(v), "{k}: {:?}", t.labels);
    }
    let url = |name: &str| fleet.by_name(name).unwrap().client.url().to_string();
    assert_eq!(
        url("k1-shop.orders-1"),
        format!("http://127.0.0.11:{}/jolokia", shop.port)
    );
    assert_eq!(
        url("k1-shop.billing-1"),
        format!("http://127.0.0.13:{}/jolokia", billing.port)
    );
    assert_eq!(
        url("k1-shop.billing-tls"),
        format!("https://127.0.0.13:{}/actuator/jolokia", billing.port)
    );
    // Not ready, ready_only = false: in the fleet, marked, and down.
    assert_eq!(
        fleet.by_name("k2-a.p2").unwrap().labels.get("pod_ready"),
        Some("false")
    );
    // No target anywhere but at the pods' own addresses.
    for t in fleet.iter() {
        let u = t.client.url();
        assert!(u.host_str().unwrap().starts_with("127.0.0.1"), "{u}");
    }
    drop(fleet);

    // A namespace that comes to match the selector brings its pods.
    kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .patch(
            "k2-b",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"labels": {"tenant": "k2"}}})),
        )
        .await
        .unwrap();
    fleet_becomes(&gw, "k2-", &["k2-a.p1", "k2-a.p2", "k2-b.p1"]).await;

    // A pod that stops being ready leaves; a deleted one too.
    set_running(&client, "k1-pay", "orders-1", "127.0.0.12", false).await;
    delete_pod(&client, "k1-shop", "billing-tls").await;
    fleet_becomes(&gw, "k1-", &["k1-shop.billing-1", "k1-shop.orders-1"]).await;
    delete_pod(&client, "k2-a", "p2").await;
    fleet_becomes(&gw, "k2-", &["k2-a.p1", "k2-b.p1"]).await;

    // A request under way when its pod goes (deleted, its JVM ended):
    // the answer says what happened, and the gateway keeps serving.
    let doomed = Agent::start_at("doomed", "127.0.0.15");
    create_pod(
        &client,
        "k1-shop",
        metadata("doomed-1", json!({"app": "billing"}), json!({})),
        jolokia(&doomed),
    )
    .await;
    set_running(&client, "k1-shop", "doomed-1", "127.0.0.15", true).await;
    fleet_becomes(&gw, "k1-shop.d", &["k1-shop.doomed-1"]).await;
    let bulk = json!([{"type": "exec", "mbean": "jmxgate.test:type=Operations", "operation": "sleep",
                 "arguments": [90000], "target": {"url": "k1-shop.doomed-1"}},
                {"type": "read", "mbean": "jmxgate.test:type=Types", "attribute": "Name",
                 "target": {"url": "k1-shop.orders-1"}}]);
    let in_flight = gw.post("/jolokia", &bulk);
    let goes = async {
        // Under way once the agent has been asked to sleep: its own count
        // of operations invoked (nothing else invokes one there; a 1.7.1
        // agent in Jetty answers while the sleep runs).
        common::eventually(
            "the sleep is under way at the doomed agent",
            WAIT,
            || async {
                let r = common::direct(
                    &doomed,
                    &json!({"type": "read", "mbean": "jmxgate.test:type=Counter",
                        "attribute": "Invocations"}),
                )
                .await;
                match r["value"].as_u64() {
                    Some(n) if n > 0 => Ok(()),
                    _ => Err(r.to_string()),
                }
            },
        )
        .await;
        delete_pod(&client, "k1-shop", "doomed-1").await;
        fleet_becomes(&gw, "k1-shop.d", &[]).await;
        drop(doomed);
    };
    let ((status, r), ()) = tokio::join!(in_flight, goes);
    assert_eq!(status, 200, "{r}");
    let message = r[0]["error"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(
            "Target \"k1-shop.doomed-1\" left the fleet while this request was under way"
        ),
        "{r}"
    );
    assert_eq!(r[1]["value"], "shop-orders", "{r}");
    let (status, r) = gw
        .get(&format!("/jolokia/targets/k1-shop.doomed-1{NAME}"))
        .await;
    assert_eq!(status, 404, "{r}");

    // Under load from here on: reads of a pod that stays, none may fail
    // while the API server is away and back and the fleet catches up.
    let load = Load::start(&gw, &format!("/jolokia/targets/k1-shop.orders-1{NAME}"));

    // The API server goes away: the fleet stays, the metric says so.
    server.stop();
    common::eventually("discovery reported down", WAIT, || async {
        let text = gw.gateway.metrics().encode();
        if text.contains("jmxgate_discovery_up{source=\"kubernetes[0]\"} 0") {
            Ok(())
        } else {
            Err(text
                .lines()
                .filter(|l| l.contains("discovery"))
                .collect::<Vec<_>>()
                .join("\n"))
        }
    })
    .await;
    assert_eq!(names(&gw, "k1-"), ["k1-shop.billing-1", "k1-shop.orders-1"]);
    assert_eq!(names(&gw, "k2-"), ["k2-a.p1", "k2-b.p1"]);
    let (status, r) = gw
        .get(&format!("/jolokia/targets/k1-shop.orders-1{NAME}"))
        .await;
    assert_eq!((status, &r["value"]), (200, &json!("shop-orders")), "{r}");

    // Back again: what changed meanwhile is caught up.
    server.restart().await;
    let client = server.client().await.unwrap();
    create_pod(
        &client,
        "k1-shop",
        metadata("orders-2", orders.clone(), json!({})),
        jolokia(late),
    )
    .await;
    set_running(&client, "k1-shop", "orders-2", "127.0.0.14", true).await;
    fleet_becomes(
        &gw,
        "k1-",
        &["k1-shop.billing-1", "k1-shop.orders-1", "k1-shop.orders-2"],
    )
    .await;
    let (status, r) = gw
        .get(&format!("/jolokia/targets/k1-shop.orders-2{NAME}"))
        .await;
    assert_eq!((status, &r["value"]), (200, &json!("late")), "{r}");
    common::eventually("discovery reported up", WAIT, || async {
        let text = gw.gateway.metrics().encode();
        if text.contains("jmxgate_discovery_up{source=\"kubernetes[0]\"} 1") {
            Ok(())
        } else {
            Err(server.log_tail())
        }
    })
    .await;
    let (served, failures) = load.stop().await;
    assert!(served > 0, "no read was served under load");
    assert!(
        failures.is_empty(),
        "{} reads failed under load: {failures:?}",
        failures.len()
    );
}

/// Reads of one path over and over until stopped: how many were served,
/// and what each failed one got.
struct Load {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<(usize, Vec<String>)>,
}

impl Load {
    fn start(gw: &common::Gateway, path: &str) -> Load {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (http, url, until) = (gw.http.clone(), gw.url(path), stop.clone());
        let task = tokio::spawn(async move {
            let (mut served, mut failures) = (0, Vec::new());
            while !until.load(std::sync::atomic::Ordering::Relaxed) {
                let answer = match http.get(&url).send().await {
                    Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
                    Err(e) => (0, e.to_string()),
                };
                let value = serde_json::from_str::<Value>(&answer.1).ok();
                match value {
                    Some(v) if answer.0 == 200 && v["value"] == "shop-orders" => served += 1,
                    _ => failures.push(format!("{} {}", answer.0, answer.1)),
                }
                // Paces the load; it waits for nothing.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (served, failures)
        });
        Load { stop, task }
    }

    async fn stop(self) -> (usize, Vec<String>) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.task.await.unwrap()
    }
}

/// A ServiceAccount that may not list the Pods it is told to watch: the
/// API server's refusal is logged once, in its own words (no Debug dump
/// of kube's error), nothing claims the watch works again while it is
/// refused, and once the Role is granted the next try lists the Pods and
/// says so once.
#[tokio::test(flavor = "multi_thread")]
async fn a_forbidden_service_account_is_told_once_in_the_api_servers_words() {
    if !kube_api::available() {
        panic!("../shared/kubernetes/run-apiserver.sh or etcd (etcd-server) missing: run scripts/install-deps.sh");
    }
    let server = tokio::task::spawn_blocking(ApiServer::start).await.unwrap();
    let client = server.client().await.unwrap();
    create_namespace(&client, "locked", json!({})).await;
    let kubeconfig = server
        .service_account_kubeconfig(&client, "locked", "nobody", &[])
        .await;
    create_pod(
        &client,
        "locked",
        metadata("orders-1", json!({"app": "orders"}), json!({})),
        json!([{"name": "jolokia", "containerPort": 8778}]),
    )
    .await;
    set_running(&client, "locked", "orders-1", "127.0.0.41", true).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[health]\nprobe_interval = \"0s\"\n\
             [[discovery.kubernetes]]\nkubeconfig = \"{}\"\nnamespaces = [\"locked\"]\n\
             allowed_networks = [\"127.0.0.0/8\"]\n",
            kubeconfig.display()
        ),
    )
    .unwrap();
    let gw = common::GatewayProcess::start(&config, "info");
    let refused = gw
        .wait_for_line(
            "Kubernetes discovery: pods in locked:",
            Duration::from_secs(120),
        )
        .expect("the refusal is logged");
    assert!(
        refused
            .contains("listing failed: the API server answered 403 Forbidden: pods is forbidden:")
            && refused.contains("system:serviceaccount:locked:nobody")
            && refused.contains("cannot list resource"),
        "{refused}"
    );
    assert!(
        !refused.contains("Status {") && !refused.contains("ErrorResponse"),
        "{refused}"
    );
    kube_api::grant_pod_reading(&client, "locked", "locked", "nobody").await;
    let until_again = gw
        .lines_until(
            "watching pods in locked works again",
            Duration::from_secs(120),
        )
        .expect("the first list after the grant is noticed");
    // Before it, the refusal was not told again (it was told every second
    // or so, with a false "works again" between, before retries backed off).
    let retold: Vec<&String> = until_again
        .iter()
        .filter(|l| l.contains("pods in locked: listing failed"))
        .collect();
    assert!(retold.is_empty(), "{retold:?}");
    let url = format!("http://{}/jolokia/targets", gw.addr);
    common::eventually("the Pod is discovered", Duration::from_secs(60), || async {
        let body = reqwest::get(&url)
            .await
            .map_err(|e| e.to_string())?
            .text()
            .await
            .map_err(|e| e.to_string())?;
        if body.contains("locked.orders-1") {
            Ok(())
        } else {
            Err(body)
        }
    })
    .await;
    let lines = gw.stop();
    let told = |text: &str| lines.iter().filter(|l| l.contains(text)).count();
    assert_eq!(
        told("pods in locked: listing failed"),
        0,
        "after the first, in the rest of the log"
    );
    assert_eq!(told("works again"), 0, "{lines:?}");
    drop(server);
}
