//! Values as Jolokia 1.7.1 and 2.6.0 agents answer them for the MBeans of
//! jmx_exporter's tests (tests/agent/ExporterMBeans.java), and the leaves
//! jmx_exporter's scraper finds in the same MBeans.

use serde_json::json;

use super::*;

fn props(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// (properties, attrKeys, attrName, value) of a leaf.
type Shape = (Vec<(String, String)>, Vec<String>, String, BeanValue);

fn shape(found: &[Found]) -> Vec<Shape> {
    found
        .iter()
        .map(|f| {
            (
                f.properties.clone(),
                f.attr_keys.clone(),
                f.attr_name.clone(),
                f.value.clone(),
            )
        })
        .collect()
}

fn n(v: i64) -> BeanValue {
    BeanValue::Number {
        value: v as f64,
        text: v.to_string(),
    }
}

/// Jolokia 2.x's `openType` for `Map<String, Map<String, Long>>`.
fn nested_map_type() -> Value {
    json!({"rowType":{"kind":"composite","type":"java.util.Map<java.lang.String, java.util.Map<java.lang.String, java.lang.Long>>",
      "class":"javax.management.openmbean.CompositeData","items":{"value":{"rowType":{"kind":"composite",
      "type":"java.util.Map<java.lang.String, java.lang.Long>","class":"javax.management.openmbean.CompositeData",
      "items":{"value":"java.lang.Long","key":"java.lang.String"},"desc":"java.util.Map<java.lang.String, java.lang.Long>"},
      "kind":"tabular","index":["key"],"type":"java.util.Map<java.lang.String, java.lang.Long>",
      "class":"javax.management.openmbean.TabularData","desc":"java.util.Map<java.lang.String, java.lang.Long>"},
      "key":"java.lang.String"},"desc":"java.util.Map<java.lang.String, java.util.Map<java.lang.String, java.lang.Long>>"},
      "kind":"tabular","index":["key"],"type":"java.util.Map<java.lang.String, java.util.Map<java.lang.String, java.lang.Long>>",
      "class":"javax.management.openmbean.TabularData",
      "desc":"java.util.Map<java.lang.String, java.util.Map<java.lang.String, java.lang.Long>>"})
}

#[test]
fn an_mxbean_map_of_maps_gives_key_and_key_labels() {
    let bean = props(&[("name", "DataNodeInfo"), ("service", "DataNode")]);
    let value = json!({"1.2.3.4": {"networkErrors": 338}});
    let open = nested_map_type();
    let found = leaves(
        &bean,
        "DatanodeNetworkCounts",
        Some("DatanodeNetworkCounts"),
        Kind::Open(&open),
        &value,
    );
    let mut labels = bean.clone();
    labels.push(("key".into(), "1.2.3.4".into()));
    labels.push(("key_".into(), "networkErrors".into()));
    assert_eq!(
        shape(&found),
        vec![(labels, vec![], "DatanodeNetworkCounts".into(), n(338))]
    );
    // The HELP jmx_exporter writes: the inner table's row description.
    assert_eq!(
        found[0].description.as_deref(),
        Some("java.util.Map<java.lang.String, java.lang.Long>")
    );
}

#[test]
fn a_table_with_a_composite_index_in_the_full_form() {
    let bean = props(&[("type", "ProcessReport")]);
    let value = json!({"indexNames":["key"],"values":[
        {"value":{"path":"/db/query1.xq","startedAtTime":1700000000001i64,"id":1,"elapsedTime":1000},"key":{"path":"/db/query1.xq","id":1}}]});
    let found = leaves(
        &bean,
        "RunningQueries",
        None,
        Kind::Declared(TABULAR),
        &value,
    );
    let mut labels = bean.clone();
    labels.push(("key_id".into(), "1".into()));
    labels.push(("key_path".into(), "/db/query1.xq".into()));
    let keys = vec!["RunningQueries".to_string()];
    assert_eq!(
        shape(&found),
        vec![
            (labels.clone(), keys.clone(), "elapsedTime".into(), n(1000)),
            (labels.clone(), keys.clone(), "id".into(), n(1)),
            (
                labels.clone(),
                keys.clone(),
                "path".into(),
                BeanValue::Text("/db/query1.xq".into())
            ),
            (labels, keys, "startedAtTime".into(), n(1700000000001)),
        ]
    );
}

#[test]
fn a_table_keyed_by_its_index_column_without_an_open_type() {
    let bean = props(&[("type", "Pools")]);
    let value = json!({"cache":{"idle":7,"pool":"cache","active":1},"db":{"idle":5,"pool":"db","active":3}});
    let found = leaves(&bean, "Pools", None, Kind::Declared(TABULAR), &value);
    let keys = vec!["Pools".to_string()];
    let with = |pool: &str| {
        let mut p = bean.clone();
        p.push(("pool".into(), pool.into()));
        p
    };
    assert_eq!(
        shape(&found),
        vec![
            (with("cache"), keys.clone(), "active".into(), n(1)),
            (with("cache"), keys.clone(), "idle".into(), n(7)),
            (with("db"), keys.clone(), "active".into(), n(3)),
            (with("db"), keys.clone(), "idle".into(), n(5)),
        ]
    );
    // A plain java.util.Map is not open data: nothing.
    assert!(leaves(
        &bean,
        "PlainMap",
        None,
        Kind::Declared("java.util.Map"),
        &json!({"a": 1})
    )
    .is_empty());
}

#[test]
fn composites_are_walked_in_key_order() {
    let bean = props(&[("name", "PerformanceMetricsMBean")]);
    let value = json!({"Bootstraps":4,"ActiveSessions":2,"BootstrapsDeferred":6});
    let found = leaves(
        &bean,
        "PerformanceMetrics",
        Some("d"),
        Kind::Declared(COMPOSITE),
        &value,
    );
    let names: Vec<&str> = found.iter().map(|f| f.attr_name.as_str()).collect();
    assert_eq!(
        names,
        ["ActiveSessions", "Bootstraps", "BootstrapsDeferred"]
    );
    assert!(found.iter().all(|f| f.attr_keys == ["PerformanceMetrics"]));
}

#[test]
fn numbers_get_javas_text_for_their_type() {
    let bean = props(&[("type", "x")]);
    let one = |kind: Kind<'_>, v: Value| leaves(&bean, "a", None, kind, &v).remove(0).value;
    assert_eq!(
        one(Kind::Declared("float"), json!(0.2)),
        BeanValue::Number {
            value: f64::from(0.2f32),
            text: "0.2".into()
        }
    );
    // 2.x writes 1.0E+7; Java's toString is 1.0E7.
    let huge: Value = serde_json::from_str("1.0E+7").unwrap();
    assert_eq!(
        one(Kind::Declared("double"), huge),
        BeanValue::Number {
            value: 1.0e7,
            text: "1.0E7".into()
        }
    );
    assert_eq!(
        one(Kind::Declared("long"), json!(9007199254740993i64)),
        BeanValue::Number {
            value: 9007199254740992.0,
            text: "9007199254740993".into()
        }
    );
    assert_eq!(
        one(Kind::Declared("boolean"), json!(true)),
        BeanValue::Bool(true)
    );
    assert_eq!(
        one(
            Kind::Declared("java.util.Date"),
            json!("2019-11-09T07:52:25.111Z")
        ),
        BeanValue::number(1.573285945111e9)
    );
    assert!(leaves(&bean, "a", None, Kind::Declared("[I"), &json!([1, 2])).is_empty());
    assert!(leaves(
        &bean,
        "a",
        None,
        Kind::Declared("java.lang.Object"),
        &Value::Null
    )
    .is_empty());
}

#[test]
fn iso_dates_with_offsets() {
    assert_eq!(iso_seconds("1970-01-01T00:00:00Z"), Some(0.0));
    assert_eq!(iso_seconds("2019-11-09T07:52:25Z"), Some(1573285945.0));
    assert_eq!(iso_seconds("2019-11-09T08:52:25+01:00"), Some(1573285945.0));
    assert_eq!(iso_seconds("2019-11-09T02:52:25-0500"), Some(1573285945.0));
    assert_eq!(iso_seconds("yesterday"), None);
}

/// A 1.x agent lists `LastGcInfo` as plain composite data; the JDK's own
/// open type makes its memory maps tables, as jmx_exporter sees them.
#[test]
fn last_gc_info_from_a_1x_agent_is_read_with_the_jdks_open_type() {
    let bean = props(&[("name", "Copy"), ("type", "GarbageCollector")]);
    let open = platform_open_type("java.lang", &bean, "LastGcInfo", COMPOSITE)
        .expect("LastGcInfo has a known type");
    let value = json!({"id": 3, "memoryUsageAfterGc": {
        "Eden Space": {"init": 1, "committed": 2, "max": -1, "used": 4}}});
    let found = leaves(&bean, "LastGcInfo", None, Kind::Open(&open), &value);
    let with_key = props(&[
        ("name", "Copy"),
        ("type", "GarbageCollector"),
        ("key", "Eden Space"),
    ]);
    let keys = |k: &[&str]| k.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        shape(&found),
        vec![
            (bean.clone(), keys(&["LastGcInfo"]), "id".into(), n(3)),
            (
                with_key.clone(),
                keys(&["LastGcInfo", "memoryUsageAfterGc"]),
                "committed".into(),
                n(2)
            ),
            (
                with_key.clone(),
                keys(&["LastGcInfo", "memoryUsageAfterGc"]),
                "init".into(),
                n(1)
            ),
            (
                with_key.clone(),
                keys(&["LastGcInfo", "memoryUsageAfterGc"]),
                "max".into(),
                n(-1)
            ),
            (
                with_key,
                keys(&["LastGcInfo", "memoryUsageAfterGc"]),
                "used".into(),
                n(4)
            ),
        ]
    );
    assert_eq!(
        found[1].description.as_deref(),
        Some("java.lang.management.MemoryUsage")
    );
    assert!(platform_open_type("java.lang", &bean, "CollectionCount", "long").is_none());
    let other = props(&[("type", "Memory")]);
    assert!(platform_open_type("java.lang", &other, "LastGcInfo", COMPOSITE).is_none());
}
