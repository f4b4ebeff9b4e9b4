use super::watch::is_suspicious;
use super::*;
use serde_json::json;

/// A Running, Ready pod `shop/orders-1` at 10.1.2.3 with a container
/// port `jolokia` 8778, owned by ReplicaSet `orders-7d9`.
fn pod_json() -> serde_json::Value {
    json!({
        "metadata": {
            "name": "orders-1", "namespace": "shop",
            "labels": {"app": "orders", "tier": "backend"},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "orders-7d9", "uid": "u1", "controller": true}
            ]
        },
        "spec": {
            "nodeName": "node-a",
            "containers": [
                {"name": "app", "ports": [
                    {"name": "http", "containerPort": 8080},
                    {"name": "jolokia", "containerPort": 8778}
                ]},
                {"name": "sidecar", "ports": [{"containerPort": 9000}]}
            ]
        },
        "status": {
            "phase": "Running", "podIP": "10.1.2.3",
            "conditions": [{"type": "Ready", "status": "True"}]
        }
    })
}

fn pod(v: serde_json::Value) -> Pod {
    serde_json::from_value(v).unwrap()
}

fn annotated(annotations: serde_json::Value) -> Pod {
    let mut v = pod_json();
    v["metadata"]["annotations"] = annotations;
    pod(v)
}

fn entry() -> KubernetesDiscovery {
    KubernetesDiscovery::new()
}

#[test]
fn a_ready_pod_becomes_a_target_at_its_own_address() {
    let t = entry().pod_target(&pod(pod_json())).unwrap();
    assert_eq!(t.name, "shop.orders-1");
    assert_eq!(t.url, "http://10.1.2.3:8778/jolokia");
    let labels: Vec<(&str, &str)> = t.labels.iter().collect();
    assert_eq!(
        labels,
        [
            ("app", "orders"),
            ("controller", "orders-7d9"),
            ("controller_kind", "ReplicaSet"),
            ("discovered_by", "kubernetes"),
            ("namespace", "shop"),
            ("node", "node-a"),
            ("pod", "orders-1"),
            ("tier", "backend"),
        ]
    );
    crate::agent_settings::check_name(&t.name).unwrap();
    // Every existing selector works on them.
    let sel = crate::access::TargetSelector::parse("namespace=shop,app=orders").unwrap();
    assert!(matches!(sel, crate::access::TargetSelector::Labels(_)));
}

#[test]
fn pods_of_the_same_name_in_two_namespaces_stay_apart() {
    let a = entry().pod_target(&pod(pod_json())).unwrap();
    let mut v = pod_json();
    v["metadata"]["namespace"] = json!("pay");
    let b = entry().pod_target(&pod(v)).unwrap();
    assert_ne!(a.name, b.name);
    assert_eq!(b.name, "pay.orders-1");
    let mut e = entry();
    e.name_prefix = "prod-".into();
    assert_eq!(
        e.pod_target(&pod(pod_json())).unwrap().name,
        "prod-shop.orders-1"
    );
}

#[test]
fn the_port_is_one_the_pod_declares() {
    let mut e = entry();
    e.port_name = "http".into();
    assert_eq!(
        e.pod_target(&pod(pod_json())).unwrap().url,
        "http://10.1.2.3:8080/jolokia"
    );
    e.port_name = "jmx".into();
    let why = e.pod_target(&pod(pod_json())).unwrap_err();
    assert!(why.contains("no container port named \"jmx\""), "{why}");
    // Opted in without a named port: Jolokia's 8778.
    let p = annotated(json!({"jmxgate.io/scrape": "true"}));
    assert_eq!(
        e.pod_target(&p).unwrap().url,
        "http://10.1.2.3:8778/jolokia"
    );
    // The port annotation chooses among declared ports, by name or number.
    for (v, url) in [
        ("http", "http://10.1.2.3:8080/jolokia"),
        ("9000", "http://10.1.2.3:9000/jolokia"),
    ] {
        let p = annotated(json!({"jmxgate.io/port": v}));
        assert_eq!(entry().pod_target(&p).unwrap().url, url);
    }
    for v in ["22", "65536", "admin", "8778 ", "-1", "0"] {
        let mut p = annotated(json!({ "jmxgate.io/port": v }));
        if v == "8778 " {
            // Trimmed: that one is declared.
            assert!(entry().pod_target(&p).is_ok());
            continue;
        }
        p.spec.as_mut().unwrap().containers[1]
            .ports
            .as_mut()
            .unwrap()[0]
            .container_port = 9000;
        let why = entry().pod_target(&p).unwrap_err();
        assert!(
            why.contains("not a TCP port the pod declares"),
            "{v}: {why}"
        );
    }
    // UDP ports don't count.
    let mut v = pod_json();
    v["spec"]["containers"][0]["ports"][1]["protocol"] = json!("UDP");
    assert!(entry().pod_target(&pod(v)).is_err());
}

#[test]
fn hawtio_and_own_annotations_set_scheme_and_path() {
    let p =
        annotated(json!({"hawt.io/protocol": "https", "hawt.io/jolokiaPath": "/actuator/jolokia"}));
    assert_eq!(
        entry().pod_target(&p).unwrap().url,
        "https://10.1.2.3:8778/actuator/jolokia"
    );
    // Ours come first.
    let p = annotated(json!({
        "hawt.io/protocol": "https", "hawt.io/jolokiaPath": "/actuator/jolokia",
        "jmxgate.io/scheme": "HTTP", "jmxgate.io/path": "/jmx"
    }));
    assert_eq!(
        entry().pod_target(&p).unwrap().url,
        "http://10.1.2.3:8778/jmx"
    );
    // The entry's defaults otherwise.
    let mut e = entry();
    e.scheme = Scheme::Https;
    e.path = "/j".into();
    assert_eq!(
        e.pod_target(&pod(pod_json())).unwrap().url,
        "https://10.1.2.3:8778/j"
    );
}

#[test]
fn opting_out_skips_the_pod() {
    for v in ["false", "False"] {
        let why = entry()
            .pod_target(&annotated(json!({ "jmxgate.io/scrape": v })))
            .unwrap_err();
        assert!(why.contains("jmxgate.io/scrape is \"false\""), "{why}");
    }
    let why = entry()
        .pod_target(&annotated(json!({"jmxgate.io/scrape": "maybe"})))
        .unwrap_err();
    assert!(why.contains("not \"true\" or \"false\""), "{why}");
}

#[test]
fn hostile_annotations_give_no_target_elsewhere() {
    let long = "a".repeat(10 * 1024);
    let long_path = format!("/{long}");
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "hawt.io/jolokiaPath",
            "http://evil.example/".into(),
            "must start with '/'",
        ),
        (
            "hawt.io/jolokiaPath",
            "//evil.example/jolokia".into(),
            "contains '//'",
        ),
        ("jmxgate.io/path", "/../../admin".into(), "'..' segment"),
        ("jmxgate.io/path", "/a/./b".into(), "'..' segment"),
        (
            "jmxgate.io/path",
            "/jolokia?host=evil".into(),
            "contains '?'",
        ),
        ("jmxgate.io/path", "/jolokia#x".into(), "contains '#'"),
        ("jmxgate.io/path", "/@evil.example".into(), "contains '@'"),
        ("jmxgate.io/path", "/a%2F..%2F".into(), "contains '%'"),
        ("jmxgate.io/path", "/a\\b".into(), "contains '\\\\'"),
        (
            "jmxgate.io/path",
            "/jolokia\nHost: evil".into(),
            "control characters",
        ),
        ("jmxgate.io/path", "/a b".into(), "contains ' '"),
        ("hawt.io/jolokiaPath", long_path, "bytes long"),
        (
            "hawt.io/protocol",
            "ftp".into(),
            "not \"http\" or \"https\"",
        ),
        (
            "jmxgate.io/scheme",
            "https://evil.example".into(),
            "not \"http\" or \"https\"",
        ),
        ("jmxgate.io/scheme", "http\r\n".into(), "control characters"),
        (
            "jmxgate.io/port",
            "evil.example:80".into(),
            "not a TCP port",
        ),
        ("jmxgate.io/port", long.clone(), "bytes long"),
        ("jmxgate.io/scrape", long, "bytes long"),
    ];
    for (key, value, expected) in cases {
        let p = annotated(json!({ key: value }));
        let why = entry()
            .pod_target(&p)
            .expect_err(&format!("{key}: {value:.40} gave a target"));
        assert!(why.contains(expected), "{key}: {value:.40}: {why}");
        // Logged at warn: input to look at.
        assert!(is_suspicious(&why), "{why}");
        assert!(why.len() < 400, "a long value is not logged whole: {why}");
        assert!(!why.contains('\n') && !why.contains('\r'), "{why}");
    }
    // Annotations that aren't ours may be anything.
    let p = annotated(json!({"other.example/x": "a".repeat(10 * 1024), "note": "a\nb"}));
    assert!(entry().pod_target(&p).is_ok());
}

#[test]
fn only_running_and_ready_pods_by_default() {
    let cases: Vec<(serde_json::Value, &str)> = vec![
        (
            json!({"phase": "Pending"}),
            "not Running and Ready (phase Pending)",
        ),
        (
            json!({"phase": "Running", "podIP": "10.1.2.3", "conditions": [{"type": "Ready", "status": "False"}]}),
            "not Running and Ready",
        ),
        (
            json!({"phase": "Running", "podIP": "10.1.2.3"}),
            "not Running and Ready",
        ),
        (
            json!({"phase": "Succeeded", "podIP": "10.1.2.3", "conditions": [{"type": "Ready", "status": "True"}]}),
            "phase Succeeded",
        ),
    ];
    for (status, expected) in cases {
        let mut v = pod_json();
        v["status"] = status.clone();
        let why = entry().pod_target(&pod(v)).unwrap_err();
        assert!(why.contains(expected), "{status}: {why}");
        // The cluster's ordinary state: logged at debug.
        assert!(!is_suspicious(&why), "{why}");
    }
    let mut v = pod_json();
    v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    assert!(entry()
        .pod_target(&pod(v.clone()))
        .unwrap_err()
        .contains("being deleted"));

    // ready_only = false: a pod with an IP is in, marked not ready.
    let mut e = entry();
    e.ready_only = false;
    let t = e.pod_target(&pod(v)).unwrap();
    assert_eq!(t.labels.get("pod_ready"), Some("false"));
    let mut v = pod_json();
    v["status"]["conditions"][0]["status"] = json!("False");
    assert_eq!(
        e.pod_target(&pod(v)).unwrap().labels.get("pod_ready"),
        Some("false")
    );
    assert!(!e
        .pod_target(&pod(pod_json()))
        .unwrap()
        .labels
        .contains_key("pod_ready"));
    // Without an IP, never.
    let mut v = pod_json();
    v["status"] = json!({"phase": "Pending"});
    assert!(e.pod_target(&pod(v)).unwrap_err().contains("no IP address"));
}

#[test]
fn the_address_is_a_real_unicast_ip() {
    for (ip, expected) in [
        ("", "no IP address"),
        ("evil.example", "not an IP address"),
        ("10.0.0.1:80", "not an IP address"),
        ("10.0.0.1/evil", "not an IP address"),
        ("0.0.0.0", "not a unicast address"),
        ("224.0.0.1", "not a unicast address"),
        ("::", "not a unicast address"),
    ] {
        let mut v = pod_json();
        v["status"]["podIP"] = json!(ip);
        let why = entry().pod_target(&pod(v)).unwrap_err();
        assert!(why.contains(expected), "{ip}: {why}");
        assert_eq!(is_suspicious(&why), !ip.is_empty(), "{why}");
    }
    let mut v = pod_json();
    v["status"]["podIP"] = json!("fd00::7");
    let t = entry().pod_target(&pod(v)).unwrap();
    assert_eq!(t.url, "http://[fd00::7]:8778/jolokia");
}

#[test]
fn labels_are_bounded_and_own_labels_win() {
    let mut v = pod_json();
    let mut labels = serde_json::Map::new();
    for i in 0..200 {
        labels.insert(format!("l{i:03}"), json!("v"));
    }
    labels.insert("namespace".into(), json!("kube-system"));
    labels.insert("pod".into(), json!("other"));
    labels.insert("discovered_by".into(), json!("dns"));
    labels.insert("pod_ready".into(), json!("true"));
    labels.insert("long".into(), json!("x".repeat(100)));
    v["metadata"]["labels"] = serde_json::Value::Object(labels);
    let t = entry().pod_target(&pod(v)).unwrap();
    assert!(
        t.labels.len() <= MAX_LABELS + OWN_LABELS.len(),
        "{}",
        t.labels.len()
    );
    assert_eq!(t.labels.get("namespace"), Some("shop"));
    assert_eq!(t.labels.get("pod"), Some("orders-1"));
    assert_eq!(t.labels.get("discovered_by"), Some("kubernetes"));
    assert!(!t.labels.contains_key("long"));
    assert!(!t.labels.contains_key("pod_ready"));
    // The entry's labels over the pod's.
    let mut e = entry();
    e.labels.insert("app".into(), "from-config".into());
    assert_eq!(
        e.pod_target(&pod(pod_json())).unwrap().labels.get("app"),
        Some("from-config")
    );
}

#[test]
fn odd_names_are_skipped_not_panicked_on() {
    for (key, value) in [
        ("name", json!("Orders_1")),
        ("name", json!("")),
        ("namespace", json!("a.b")),
        ("namespace", json!(null)),
    ] {
        let mut v = pod_json();
        v["metadata"][key] = value.clone();
        assert!(entry().pod_target(&pod(v)).is_err(), "{key}: {value}");
    }
    let empty: Pod = serde_json::from_value(json!({})).unwrap();
    assert!(entry().pod_target(&empty).is_err());
}

#[test]
fn label_selectors_are_checked() {
    for ok in [
        "app=orders",
        "app==orders,tier!=front",
        "app in (orders,billing)",
        "app in (orders, billing), env notin (dev)",
        "tenant",
        "!canary",
        "example.com/team=shop",
        "app=",
    ] {
        check_label_selector(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
    for bad in [
        "",
        "app in (orders",
        "app in orders)",
        "app within (a)",
        "app in ()",
        "-app=x",
        "app=x y",
        "app=(x)",
        "a/b/c=x",
    ] {
        assert!(check_label_selector(bad).is_err(), "{bad}");
    }
}

#[test]
fn entries_parse_and_problems_name_their_key() {
    let e: KubernetesDiscovery = toml::from_str(
        r#"
        namespaces = ["shop", "pay"]
        pod_selector = "app in (orders,billing)"
        user = "monitor"
        password_env = "PW"
        "#,
    )
    .unwrap();
    assert_eq!(e.port_name, "jolokia");
    assert_eq!(e.path, "/jolokia");
    assert!(e.ready_only);
    assert_eq!(e.problems(), Vec::<String>::new());
    let err = toml::from_str::<KubernetesDiscovery>("namespace = \"shop\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("namespace"), "{err}");

    let mut e = entry();
    e.kubeconfig = Some("/nonexistent/kubeconfig".into());
    e.namespaces = vec!["Shop".into()];
    e.namespace_selector = Some("tenant in (".into());
    e.pod_selector = Some("app=a b".into());
    e.port_name = "Jolokia_port_long".into();
    e.path = "/a/../b".into();
    e.name_prefix = "a/b".into();
    e.labels.insert("namespace".into(), "x".into());
    let problems = e.problems();
    for key in [
        "kubeconfig:",
        "namespace_selector: give namespaces",
        "namespaces[0]:",
        "namespace_selector: \"tenant",
        "pod_selector:",
        "port_name:",
        "path:",
        "name_prefix:",
        "labels.namespace:",
    ] {
        assert!(
            problems.iter().any(|p| p.starts_with(key)),
            "{key} missing in {problems:?}"
        );
    }
}

#[test]
fn configuration_check_reports_kubernetes_problems_by_key() {
    let problems = crate::Config::parse(
        r#"
        [server]
        listen = "127.0.0.1:8080"

        [[discovery.kubernetes]]
        namespaces = ["shop"]

        [[discovery.kubernetes]]
        pod_selector = "app in ("
        "#,
    )
    .unwrap()
    .validate()
    .unwrap_err();
    let all = problems.join("\n");
    assert!(
        all.contains("discovery.kubernetes[1].pod_selector:"),
        "{all}"
    );
    assert!(!all.contains("discovery.kubernetes[0]"), "{all}");
}

fn pod_in(ns: &str, name: &str) -> Pod {
    let mut v = pod_json();
    v["metadata"]["namespace"] = json!(ns);
    v["metadata"]["name"] = json!(name);
    pod(v)
}

fn names(set: &PodSet) -> Vec<String> {
    set.targets().into_iter().map(|t| t.name).collect()
}

fn list(set: &mut PodSet, e: &KubernetesDiscovery, scope: Option<&str>, pods: Vec<Pod>) {
    let scope = scope.map(str::to_string);
    assert!(!set.pods_event(e, scope.clone(), watcher::Event::Init));
    for p in pods {
        assert!(!set.pods_event(e, scope.clone(), watcher::Event::InitApply(p)));
    }
    assert!(set.pods_event(e, scope, watcher::Event::InitDone));
}

#[test]
fn changes_name_only_the_pods_that_changed() {
    use crate::fleet::Change;
    let e = entry();
    let mut set = PodSet::new(&e);
    let change = |set: &mut PodSet| match set.take_change() {
        None => (vec![], vec![]),
        Some(Change::Apply { upserts, removed }) => {
            let mut up: Vec<String> = upserts.into_iter().map(|t| t.name.clone()).collect();
            up.sort();
            (up, removed)
        }
        Some(other) => panic!("{other:?}"),
    };
    list(
        &mut set,
        &e,
        None,
        vec![pod_in("shop", "a"), pod_in("shop", "b")],
    );
    // The first time: everything.
    assert_eq!(
        change(&mut set),
        (vec!["shop.a".into(), "shop.b".into()], vec![])
    );
    assert_eq!(change(&mut set), (vec![], vec![]));
    // One pod's IP changes, one is deleted, one arrives.
    let mut v = serde_json::to_value(pod_in("shop", "a")).unwrap();
    v["status"]["podIP"] = json!("10.1.2.4");
    set.pods_event(&e, None, watcher::Event::Apply(pod(v)));
    set.pods_event(&e, None, watcher::Event::Delete(pod_in("shop", "b")));
    set.pods_event(&e, None, watcher::Event::Apply(pod_in("pay", "c")));
    assert_eq!(
        change(&mut set),
        (
            vec!["pay.c".into(), "shop.a".into()],
            vec!["shop.b".to_string()]
        )
    );
    // An event that changes nothing the target shows, and a re-list
    // with the same pods: nothing to hand over.
    set.pods_event(&e, None, watcher::Event::Apply(pod_in("pay", "c")));
    assert_eq!(change(&mut set), (vec![], vec![]));
    let mut a = serde_json::to_value(pod_in("shop", "a")).unwrap();
    a["status"]["podIP"] = json!("10.1.2.4");
    list(&mut set, &e, None, vec![pod(a), pod_in("pay", "c")]);
    assert_eq!(change(&mut set), (vec![], vec![]));
    // A re-list that lacks a pod: only that one goes.
    list(&mut set, &e, None, vec![pod_in("pay", "c")]);
    assert_eq!(change(&mut set), (vec![], vec!["shop.a".to_string()]));
}

#[test]
fn a_new_list_replaces_the_pods_once_complete() {
    let e = entry();
    let mut set = PodSet::new(&e);
    list(
        &mut set,
        &e,
        None,
        vec![pod_in("shop", "a"), pod_in("pay", "a")],
    );
    assert_eq!(names(&set), ["pay.a", "shop.a"]);
    // After 410 Gone the watcher lists again: while that list is under
    // way the old set stands; once complete, a pod it lacks is gone.
    set.pods_event(&e, None, watcher::Event::Init);
    set.pods_event(&e, None, watcher::Event::InitApply(pod_in("shop", "a")));
    assert_eq!(names(&set), ["pay.a", "shop.a"]);
    set.pods_event(&e, None, watcher::Event::InitApply(pod_in("shop", "b")));
    set.pods_event(&e, None, watcher::Event::InitDone);
    assert_eq!(names(&set), ["shop.a", "shop.b"]);
    // A pod that stops being ready leaves; a deleted one too.
    let mut v = serde_json::to_value(pod_in("shop", "a")).unwrap();
    v["status"]["conditions"][0]["status"] = json!("False");
    assert!(set.pods_event(&e, None, watcher::Event::Apply(pod(v))));
    assert_eq!(names(&set), ["shop.b"]);
    assert!(set.pods_event(&e, None, watcher::Event::Delete(pod_in("shop", "b"))));
    assert!(names(&set).is_empty());
    assert!(!set.pods_event(&e, None, watcher::Event::Delete(pod_in("shop", "b"))));
}

#[test]
fn a_namespace_watch_relists_only_its_namespace() {
    let mut e = entry();
    e.namespaces = vec!["shop".into(), "pay".into()];
    let mut set = PodSet::new(&e);
    list(&mut set, &e, Some("shop"), vec![pod_in("shop", "a")]);
    list(
        &mut set,
        &e,
        Some("pay"),
        vec![pod_in("pay", "a"), pod_in("pay", "b")],
    );
    assert_eq!(names(&set), ["pay.a", "pay.b", "shop.a"]);
    // Two lists under way at once don't mix.
    set.pods_event(&e, Some("pay".into()), watcher::Event::Init);
    set.pods_event(&e, Some("shop".into()), watcher::Event::Init);
    set.pods_event(
        &e,
        Some("shop".into()),
        watcher::Event::InitApply(pod_in("shop", "c")),
    );
    set.pods_event(&e, Some("pay".into()), watcher::Event::InitDone);
    assert_eq!(names(&set), ["shop.a"]);
    set.pods_event(&e, Some("shop".into()), watcher::Event::InitDone);
    assert_eq!(names(&set), ["shop.c"]);
}

#[test]
fn a_namespace_selector_filters_and_follows_namespaces() {
    let mut e = entry();
    e.namespace_selector = Some("tenant=shop".into());
    let mut set = PodSet::new(&e);
    list(
        &mut set,
        &e,
        None,
        vec![pod_in("shop", "a"), pod_in("pay", "a")],
    );
    // No namespace listed yet: none selected.
    assert!(names(&set).is_empty());
    let ns = |name: &str| -> Namespace {
        serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
    };
    set.namespaces_event(watcher::Event::Init);
    set.namespaces_event(watcher::Event::InitApply(ns("shop")));
    assert!(set.namespaces_event(watcher::Event::InitDone));
    assert_eq!(names(&set), ["shop.a"]);
    assert!(set.namespaces_event(watcher::Event::Apply(ns("pay"))));
    assert_eq!(names(&set), ["pay.a", "shop.a"]);
    assert!(set.namespaces_event(watcher::Event::Delete(ns("shop"))));
    assert_eq!(names(&set), ["pay.a"]);
    // Without a selector every namespace counts.
    let e = entry();
    let mut set = PodSet::new(&e);
    list(
        &mut set,
        &e,
        None,
        vec![pod_in("shop", "a"), pod_in("pay", "a")],
    );
    assert_eq!(names(&set).len(), 2);
}

#[test]
fn pods_refused_for_what_they_say_are_counted_once_each() {
    let e = entry();
    let mut set = PodSet::new(&e);
    let hostile = || annotated(json!({"hawt.io/jolokiaPath": "http://evil.example/"}));
    list(&mut set, &e, None, vec![hostile(), pod_in("pay", "a")]);
    assert_eq!(set.refused, 1);
    // Listed again, the same reason: no news. Not ready: no oddity.
    list(&mut set, &e, None, vec![hostile(), pod_in("pay", "a")]);
    set.pods_event(&e, None, watcher::Event::Apply(hostile()));
    let mut v = serde_json::to_value(pod_in("pay", "b")).unwrap();
    v["status"]["conditions"][0]["status"] = json!("False");
    set.pods_event(&e, None, watcher::Event::Apply(pod(v)));
    assert_eq!(set.refused, 1);
    // Another odd thing about it: counted.
    let other = annotated(json!({"jmxgate.io/path": "/../../x"}));
    set.pods_event(&e, None, watcher::Event::Apply(other));
    assert_eq!(set.refused, 2);
}

#[test]
fn pods_at_addresses_the_entry_does_not_allow_are_refused() {
    // By default: not this machine, not link-local, not the gateway.
    let mut e = entry();
    e.gateway_addresses = vec!["10.1.2.9".parse().unwrap()];
    for (ip, why) in [
        ("127.0.0.1", "a loopback address"),
        ("127.1.0.5", "a loopback address"),
        ("::1", "a loopback address"),
        ("::ffff:127.0.0.1", "a loopback address"),
        ("169.254.169.254", "a link-local address"),
        ("fe80::1", "a link-local address"),
        ("10.1.2.9", "the gateway's own addresses"),
    ] {
        let mut v = pod_json();
        v["status"]["podIP"] = json!(ip);
        let why_not = e.pod_target(&pod(v)).unwrap_err();
        assert!(why_not.contains(why), "{ip}: {why_not}");
        // A pod's status claiming such an address is worth a warning.
        assert!(is_suspicious(&why_not), "{why_not}");
    }
    assert!(e.pod_target(&pod(pod_json())).is_ok());
    // Listed networks are the only ones, and allow what they list.
    e.allowed_networks = Some(vec!["127.0.0.0/24".into(), "10.1.2.9".into()]);
    for (ip, ok) in [
        ("127.0.0.11", true),
        ("10.1.2.9", true),
        ("127.1.0.5", false),
        ("10.1.2.3", false),
        ("169.254.169.254", false),
    ] {
        let mut v = pod_json();
        v["status"]["podIP"] = json!(ip);
        let judged = e.pod_target(&pod(v));
        assert_eq!(judged.is_ok(), ok, "{ip}: {judged:?}");
        if let Err(why) = judged {
            assert_eq!(why, format!("status.podIP {ip} is not in allowed_networks"));
        }
    }
    // A refused pod is no target of the set, and counted once.
    let mut set = PodSet::new(&e);
    let mut far = serde_json::to_value(pod_in("shop", "far-1")).unwrap();
    far["status"]["podIP"] = json!("127.1.0.5");
    let mut near = serde_json::to_value(pod_in("shop", "near-1")).unwrap();
    near["status"]["podIP"] = json!("127.0.0.11");
    list(
        &mut set,
        &e,
        None,
        vec![pod(far.clone()), pod(near.clone())],
    );
    list(&mut set, &e, None, vec![pod(far), pod(near)]);
    assert_eq!(names(&set), ["shop.near-1"]);
    assert_eq!(set.refused, 1);
}

fn credentials(namespace: &str, user: &str, password: &str) -> NamespaceCredentials {
    NamespaceCredentials {
        namespace: namespace.into(),
        user: user.into(),
        password: Some(crate::secret::Secret::new(password)),
        password_env: None,
        password_file: None,
    }
}

#[test]
fn credentials_go_only_to_the_pods_of_their_namespace() {
    let defaults: crate::agent_settings::AgentSettings =
        toml::from_str("user = \"fleet\"\npassword = \"fleet-pw\"\n").unwrap();
    let mut e = entry();
    e.credentials = vec![credentials("shop", "shop-user", "shop-pw")];
    let in_ns = |e: &KubernetesDiscovery, ns: &str| {
        e.pod_target(&pod_in(ns, "orders-1"))
            .unwrap()
            .agent
            .over(&defaults)
    };
    let shop = in_ns(&e, "shop");
    assert_eq!(shop.user.as_deref(), Some("shop-user"));
    assert_eq!(shop.password, Some(crate::secret::Secret::new("shop-pw")));
    // Another namespace: none, not even [target_defaults]'.
    let pay = in_ns(&e, "pay");
    assert_eq!((pay.user, pay.password), (None, None));
    // A pod's labels choose nothing: one claiming to be in shop is not.
    let mut v = serde_json::to_value(pod_in("pay", "orders-1")).unwrap();
    v["metadata"]["labels"]["namespace"] = json!("shop");
    let t = e.pod_target(&pod(v)).unwrap();
    assert_eq!(t.labels.get("namespace"), Some("pay"));
    assert_eq!(t.agent.over(&defaults).user, None);
    // The entry's own credentials go where no namespace has its own.
    e.agent.user = Some("entry".into());
    e.agent.password_env = Some("ENTRY_PW".into());
    let pay = in_ns(&e, "pay");
    assert_eq!(pay.user.as_deref(), Some("entry"));
    assert_eq!(pay.password_env.as_deref(), Some("ENTRY_PW"));
    let shop = in_ns(&e, "shop");
    assert_eq!(shop.user.as_deref(), Some("shop-user"));
    assert_eq!(
        shop.password_env, None,
        "the entry's password stays with its user"
    );
    // Other settings still come from the defaults.
    let defaults: crate::agent_settings::AgentSettings =
        toml::from_str("request_timeout = \"3s\"\n").unwrap();
    assert_eq!(
        e.pod_target(&pod(pod_json()))
            .unwrap()
            .agent
            .over(&defaults)
            .request_timeout(),
        Duration::from_secs(3)
    );
}

#[test]
fn the_entrys_own_credentials_are_warned_about() {
    let mut e = entry();
    assert!(e.warnings().is_empty());
    e.credentials = vec![credentials("shop", "u", "p")];
    assert!(e.warnings().is_empty(), "per namespace: nothing to warn of");
    e.agent.user = Some("monitor".into());
    let warnings = e.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("in every namespace it watches"),
        "{warnings:?}"
    );
    e.namespaces = vec!["shop".into(), "pay".into(), "web".into()];
    let warnings = e.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].starts_with("user: "), "{warnings:?}");
    assert!(
        warnings[0].contains("every pod it takes in namespaces pay, web;"),
        "{warnings:?}"
    );
    // Every namespace with its own: the entry's reach no pod.
    let mut all_own = e.clone();
    all_own.namespaces = vec!["shop".into()];
    assert!(all_own.warnings().is_empty());
    let config = crate::discovery::DiscoveryConfig {
        dns: Vec::new(),
        kubernetes: vec![entry(), e],
    };
    let all = config.warnings();
    assert_eq!(all.len(), 1);
    assert!(
        all[0].starts_with("discovery.kubernetes[1].user: "),
        "{all:?}"
    );
}

#[test]
fn networks_and_credentials_are_checked_by_key() {
    let config = crate::Config::parse(
        r#"
        [server]
        listen = "127.0.0.1:8080"

        [[discovery.kubernetes]]
        namespaces = ["shop", "pay"]
        allowed_networks = ["10.0.0.0/8", "10.0.0.0/33", "pods"]

        [[discovery.kubernetes.credentials]]
        namespace = "shop"
        user = "monitor"
        password_file = "/etc/jmxgate/shop.pw"

        [[discovery.kubernetes.credentials]]
        namespace = "shop"
        user = ""
        password = "x"
        password_env = "Y"

        [[discovery.kubernetes.credentials]]
        namespace = "billing"
        user = "monitor"

        [[discovery.kubernetes.credentials]]
        namespace = "Shop_1"
        user = "monitor"

        [[discovery.kubernetes]]
        allowed_networks = []
        "#,
    )
    .unwrap();
    let k = &config.discovery.kubernetes[0];
    assert_eq!(k.credentials.len(), 4);
    assert_eq!(
        k.credentials[0].password_file.as_deref(),
        Some(std::path::Path::new("/etc/jmxgate/shop.pw"))
    );
    let problems = config.validate().unwrap_err();
    let all = problems.join("\n");
    for key in [
        "discovery.kubernetes[0].allowed_networks[1]: \"10.0.0.0/33\" is not a network",
        "discovery.kubernetes[0].allowed_networks[2]: \"pods\" is not a network",
        "discovery.kubernetes[0].credentials[1].namespace: \"shop\" already has credentials[0]",
        "discovery.kubernetes[0].credentials[1].user: must not be empty",
        "discovery.kubernetes[0].credentials[1].password: give only one",
        "discovery.kubernetes[0].credentials[2].namespace: \"billing\" is not among namespaces",
        "discovery.kubernetes[0].credentials[3].namespace: \"Shop_1\" is not a namespace name",
        "discovery.kubernetes[1].allowed_networks: an empty list allows no pod",
    ] {
        assert!(all.contains(key), "{key} missing in\n{all}");
    }
    assert!(!all.contains("allowed_networks[0]"), "{all}");
    assert!(!all.contains("credentials[0]."), "{all}");
    // A password never shows in a problem.
    assert!(!all.contains("\"x\""), "{all}");
    // Unknown keys of a credentials table are refused.
    let err = crate::Config::parse(
        "[server]\nlisten = \"127.0.0.1:1\"\n[[discovery.kubernetes]]\n\
         [[discovery.kubernetes.credentials]]\nnamespace = \"shop\"\nuser = \"u\"\npasword = \"x\"\n",
    )
    .unwrap_err()
    .join("\n");
    assert!(err.contains("unknown field `pasword`"), "{err}");
    // And the gateway's own addresses are no key at all.
    let err = toml::from_str::<KubernetesDiscovery>("gateway_addresses = [\"10.0.0.1\"]\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown field"), "{err}");
}
