//! A jmx_exporter configuration file (YAML), read unchanged into a
//! [`Module`]: the keys that shape metrics are honoured as jmx_exporter
//! 1.x reads them; the keys that say how to connect to a JVM are refused
//! with the gateway settings to use instead (the gateway reaches JVMs
//! through their targets); the agent's own HTTP server settings are
//! ignored with a note.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use super::java_regex::{JavaRegex, Replacement};
use super::java_text::{double_to_string, parse_double};
use super::open_telemetry::OpenTelemetryBlock;
use super::rules::{BeanValue, Customizer, ExtraMetric, MetricType, Module, Rule};
use crate::protocol::ObjectName;

/// Keys of jmx_exporter's standalone mode: the gateway does what they do
/// through its targets.
const CONNECTION_KEYS: &[(&str, &str)] = &[
    ("hostPort", "the target's `url` (a Jolokia agent, not RMI)"),
    ("jmxUrl", "the target's `url` (a Jolokia agent, not RMI)"),
    ("username", "the target's `user`"),
    ("password", "the target's `password_env` or `password_file`"),
    ("ssl", "an `https://` target `url` with `ca_file`"),
];

/// Keys of the Java agent's own HTTP server, ignored here.
const AGENT_KEYS: &[&str] = &["httpServer", "startDelaySeconds"];

/// Every key jmx_exporter 1.x reads that shapes metrics.
const METRIC_KEYS: &[&str] = &[
    "lowercaseOutputName",
    "lowercaseOutputLabelNames",
    "inferCounterTypeFromName",
    "includeObjectNames",
    "whitelistObjectNames",
    "excludeObjectNames",
    "blacklistObjectNames",
    "excludeJvmMetrics",
    "includeObjectNameAttributes",
    "excludeObjectNameAttributes",
    "autoExcludeObjectNameAttributes",
    "metricCustomizers",
    "rules",
    // Read for the gateway's OTLP exports of the module.
    "openTelemetry",
];

/// What `excludeJvmMetrics: true` leaves out, as jmx_exporter lists it.
const JVM_DOMAINS: &[&str] = &[
    "com.sun.management:*",
    "com.sun.management.jmxremote:*",
    "java.lang:*",
    "java.nio:*",
    "java.util.logging:*",
    "javax.management:*",
    "javax.management.remote:*",
    "jdk.internal:*",
    "jdk.management:*",
    "jdk.management.jfr:*",
    "sun.management:*",
];

impl Module {
    /// Reads a rules file's text; errors name the key (and rule) at fault.
    pub fn from_yaml(name: &str, text: &str) -> Result<Module, String> {
        let root: Value = if text.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            serde_saphyr::from_str(text).map_err(|e| format!("not YAML: {e}"))?
        };
        let root = match root {
            Value::Object(map) => map,
            Value::Null => Default::default(),
            _ => return Err("the top level is not a map of settings".into()),
        };
        for (key, instead) in CONNECTION_KEYS {
            // `ssl: false` or an empty `username:` asks for nothing the
            // targets don't already decide (presto.yml ships `ssl: false`).
            let says_nothing = |v: &Value| match v {
                Value::Null | Value::Bool(false) => true,
                Value::String(s) => s.is_empty(),
                _ => false,
            };
            if root.get(*key).is_some_and(|v| !says_nothing(v)) {
                return Err(format!(
                    "`{key}` says how to connect to a JVM; the gateway reaches JVMs through its \
                     targets: set {instead} instead and remove `{key}` from the rules file"
                ));
            }
        }
        let mut module = Module {
            name: name.to_string(),
            lowercase_output_name: flag(&root, "lowercaseOutputName")?,
            lowercase_output_label_names: flag(&root, "lowercaseOutputLabelNames")?,
            infer_counter_type_from_name: flag(&root, "inferCounterTypeFromName")?,
            include: names(&root, "includeObjectNames")
                .or_else(|| names(&root, "whitelistObjectNames"))
                .transpose()?
                .unwrap_or_default(),
            exclude: names(&root, "excludeObjectNames")
                .or_else(|| names(&root, "blacklistObjectNames"))
                .transpose()?
                .unwrap_or_default(),
            exclude_attributes: attribute_map(&root, "excludeObjectNameAttributes")?,
            include_attributes: attribute_map(&root, "includeObjectNameAttributes")?,
            customizers: customizers(&root)?,
            rules: rules(&root)?,
            open_telemetry: match root.get("openTelemetry") {
                Some(block) => OpenTelemetryBlock::from_value(block)?,
                None => None,
            },
            ignored: root
                .keys()
                .filter(|k| !METRIC_KEYS.contains(&k.as_str()))
                .map(|k| {
                    if CONNECTION_KEYS.iter().any(|(c, _)| c == k) {
                        format!("{k} (empty; the target's settings say how to connect)")
                    } else if AGENT_KEYS.contains(&k.as_str()) {
                        format!("{k} (the Java agent's own setting)")
                    } else {
                        format!("{k} (not a jmx_exporter setting)")
                    }
                })
                .collect(),
        };
        if module
            .open_telemetry
            .as_ref()
            .is_some_and(|b| b.service_instance_id.is_some())
        {
            module.ignored.push(
                "openTelemetry.serviceInstanceId (each target is its own instance: its name)"
                    .into(),
            );
        }
        if flag(&root, "excludeJvmMetrics")? {
            for d in JVM_DOMAINS {
                module
                    .exclude
                    .push(ObjectName::parse(d).expect("a valid pattern"));
            }
        }
        Ok(module)
    }
}

fn flag(root: &serde_json::Map<String, Value>, key: &str) -> Result<bool, String> {
    match root.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(format!("`{key}` must be true or false, not {other}")),
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(match n.as_f64() {
            Some(f) if !n.is_i64() && !n.is_u64() => double_to_string(f),
            _ => n.to_string(),
        }),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn names(
    root: &serde_json::Map<String, Value>,
    key: &str,
) -> Option<Result<Vec<ObjectName>, String>> {
    let list = root.get(key)?;
    Some(match list {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let s = text(v).ok_or_else(|| format!("`{key}[{i}]` is not an ObjectName"))?;
                ObjectName::parse(&s).map_err(|e| format!("`{key}[{i}]`: {e}"))
            })
            .collect(),
        _ => Err(format!("`{key}` must be a list of ObjectNames")),
    })
}

fn attribute_map(
    root: &serde_json::Map<String, Value>,
    key: &str,
) -> Result<HashMap<String, HashSet<String>>, String> {
    let mut out: HashMap<String, HashSet<String>> = HashMap::new();
    match root.get(key) {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (name, attrs) in map {
                let parsed = ObjectName::parse(name).map_err(|e| format!("`{key}`: {e}"))?;
                let Value::Array(attrs) = attrs else {
                    return Err(format!("`{key}.{name}` must be a list of attribute names"));
                };
                let set = out.entry(parsed.canonical()).or_default();
                for a in attrs {
                    set.insert(text(a).ok_or_else(|| format!("`{key}.{name}` holds a non-name"))?);
                }
            }
        }
        Some(_) => return Err(format!("`{key}` must map ObjectNames to attribute lists")),
    }
    Ok(out)
}

fn customizers(root: &serde_json::Map<String, Value>) -> Result<Vec<Customizer>, String> {
    let Some(list) = root.get("metricCustomizers") else {
        return Ok(Vec::new());
    };
    let Value::Array(list) = list else {
        return Err("`metricCustomizers` must be a list".into());
    };
    list.iter()
        .enumerate()
        .map(|(i, c)| {
            let at = format!("`metricCustomizers[{i}]`");
            let filter = c
                .get("mbeanFilter")
                .ok_or_else(|| format!("{at}: needs an mbeanFilter"))?;
            let domain = filter
                .get("domain")
                .and_then(text)
                .ok_or_else(|| format!("{at}: mbeanFilter needs a domain"))?;
            let properties = match filter.get("properties") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Object(m)) => m
                    .iter()
                    .map(|(k, v)| {
                        text(v)
                            .map(|v| (k.clone(), v))
                            .ok_or_else(|| format!("{at}: property {k} is not a value"))
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(format!("{at}: mbeanFilter.properties must be a map")),
            };
            let attributes_as_labels = match c.get("attributesAsLabels") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(a)) => a.iter().filter_map(text).collect(),
                Some(_) => return Err(format!("{at}: attributesAsLabels must be a list")),
            };
            let extra_metrics = match c.get("extraMetrics") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(a)) => a
                    .iter()
                    .enumerate()
                    .map(|(j, m)| {
                        let name = m
                            .get("name")
                            .and_then(text)
                            .ok_or_else(|| format!("{at}.extraMetrics[{j}]: needs a name"))?;
                        let value = match m.get("value") {
                            Some(Value::Bool(b)) => BeanValue::Bool(*b),
                            Some(Value::Number(n)) => BeanValue::Number {
                                value: n.as_f64().unwrap_or(0.0),
                                text: text(&Value::Number(n.clone())).unwrap_or_default(),
                            },
                            Some(Value::String(s)) => BeanValue::Text(s.clone()),
                            _ => return Err(format!("{at}.extraMetrics[{j}]: needs a value")),
                        };
                        Ok(ExtraMetric {
                            name,
                            value,
                            description: m.get("description").and_then(text),
                        })
                    })
                    .collect::<Result<_, String>>()?,
                Some(_) => return Err(format!("{at}: extraMetrics must be a list")),
            };
            if c.get("attributesAsLabels").is_none() && c.get("extraMetrics").is_none() {
                return Err(format!("{at}: needs attributesAsLabels or extraMetrics"));
            }
            Ok(Customizer {
                domain,
                properties,
                attributes_as_labels,
                extra_metrics,
            })
        })
        .collect()
}

fn rules(root: &serde_json::Map<String, Value>) -> Result<Vec<Rule>, String> {
    let list = match root.get("rules") {
        // No rules: the single default rule (export everything by default).
        None => return Ok(vec![Rule::default()]),
        Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(_) => return Err("`rules` must be a list".into()),
    };
    list.iter()
        .enumerate()
        .map(|(i, r)| rule(r).map_err(|e| format!("`rules[{i}]`: {e}")))
        .collect()
}

fn rule(r: &Value) -> Result<Rule, String> {
    let Value::Object(r) = r else {
        return Err("a rule is a map of settings".into());
    };
    let string = |key: &str| -> Result<Option<String>, String> {
        match r.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => text(v)
                .map(Some)
                .ok_or_else(|| format!("`{key}` must be text")),
        }
    };
    let written = string("pattern")?;
    // The pattern alone first: its errors then quote what the file says.
    let screen = written.as_deref().map(JavaRegex::new).transpose()?;
    let pattern = written
        .map(|p| JavaRegex::new(&format!("^.*(?:{p}).*$")))
        .transpose()?;
    let name = string("name")?;
    let help = string("help")?;
    // `value:` left empty is Java's String.valueOf(null): "null", which
    // is no number, so the rule gives nothing.
    let value = match r.get("value") {
        Some(Value::Null) => Some("null".to_string()),
        _ => string("value")?,
    };
    let labels: BTreeMap<String, String> = match r.get("labels") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| {
                text(v)
                    .map(|v| (k.clone(), v))
                    .ok_or_else(|| format!("label {k:?} must be text"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("`labels` must be a map".into()),
    };
    if (!labels.is_empty() || r.contains_key("labels") || help.is_some()) && name.is_none() {
        return Err("a rule with `help` or `labels` needs a `name`".into());
    }
    if pattern.is_none() && (name.is_some() || value.as_deref().is_some_and(|v| !v.is_empty())) {
        return Err("a rule with a `name` or a `value` needs a `pattern`".into());
    }
    let expansion = |text: Option<String>| -> Result<Option<Replacement>, String> {
        match (&pattern, text) {
            (Some(p), Some(t)) => p.replacement(&t).map(Some),
            _ => Ok(None),
        }
    };
    let value_factor = match r.get("valueFactor") {
        None => 1.0,
        Some(v) => text(v)
            .as_deref()
            .and_then(parse_double)
            .ok_or_else(|| "`valueFactor` must be a number".to_string())?,
    };
    let bool_key = |key: &str| match r.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(format!("`{key}` must be true or false")),
    };
    let metric_type = match string("type")?.as_deref() {
        None | Some("UNTYPED") | Some("UNKNOWN") => MetricType::Unknown,
        Some("GAUGE") => MetricType::Gauge,
        Some("COUNTER") => MetricType::Counter,
        // jmx_exporter exports any other type as unknown.
        Some(_) => MetricType::Unknown,
    };
    let labels = labels
        .into_iter()
        .map(|(k, v)| Ok((expansion(Some(k))?.unwrap(), expansion(Some(v))?.unwrap())))
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Rule {
        name: expansion(name)?,
        help: expansion(help)?,
        value: expansion(value.filter(|v| !v.is_empty()))?,
        value_factor,
        attr_name_snake_case: bool_key("attrNameSnakeCase")?,
        cache: bool_key("cache")?,
        metric_type,
        labels,
        pattern,
        screen,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_keys_are_refused_with_what_to_set_instead() {
        for (key, instead) in [
            ("hostPort: localhost:9999", "`url`"),
            ("jmxUrl: service:jmx:rmi:///jndi/rmi://h:1/jmxrmi", "`url`"),
            ("username: u", "`user`"),
            ("password: p", "password_file"),
            ("ssl: true", "ca_file"),
        ] {
            let e = Module::from_yaml("m", key).unwrap_err();
            assert!(e.contains(instead) && e.contains("targets"), "{e}");
        }
        // Empty ones ask for nothing: ignored, with a note.
        let m = Module::from_yaml("m", "ssl: false\nusername:\npassword: ''\n").unwrap();
        assert_eq!(m.ignored.len(), 3, "{:?}", m.ignored);
        assert!(m.ignored[0].contains("empty"), "{:?}", m.ignored);
    }

    #[test]
    fn rules_are_checked_as_jmx_exporter_checks_them() {
        let bad = |yaml: &str| Module::from_yaml("m", yaml).unwrap_err();
        assert!(bad("rules:\n- help: foo").contains("needs a `name`"));
        assert!(bad("rules:\n- labels: {}").contains("needs a `name`"));
        assert!(bad("rules:\n- name: foo").contains("needs a `pattern`"));
        assert!(bad("rules:\n- pattern: '(a'\n").contains("does not compile"));
        assert!(bad("rules:\n- pattern: 'a'\n  name: x_$2").contains("no group 2"));
        assert!(bad("rules:\n- pattern: a\n  valueFactor: lots").contains("valueFactor"));
        assert!(bad("lowercaseOutputName: 3").contains("true or false"));
        assert!(bad("[1, 2]").contains("top level"));
    }

    #[test]
    fn defaults_and_the_agents_own_keys() {
        let m = Module::from_yaml("m", "{}").unwrap();
        assert_eq!(m.rules.len(), 1, "no rules: the default rule");
        assert!(m.rules[0].pattern.is_none());
        let m = Module::from_yaml("m", "").unwrap();
        assert_eq!(m.rules.len(), 1);
        let m = Module::from_yaml(
            "m",
            "httpServer:\n  threads: {minimum: 1}\nexcludeJvmMetrics: true\nrules: []\n",
        )
        .unwrap();
        assert!(m.rules.is_empty());
        assert_eq!(m.ignored, vec!["httpServer (the Java agent's own setting)"]);
        assert!(m.exclude.iter().any(|n| n.as_str() == "java.lang:*"));
        let m = Module::from_yaml(
            "m",
            "whitelistObjectNames: ['kafka.server:*']\nblacklistObjectNames: ['kafka.server:type=x']\n",
        )
        .unwrap();
        assert_eq!(m.include[0].as_str(), "kafka.server:*");
        assert_eq!(m.exclude[0].as_str(), "kafka.server:type=x");
    }

    #[test]
    fn product_rules_files_load() {
        for (name, text) in [
            ("kafka", include_str!("../../tests/exporter/kafka.yml")),
            ("tomcat", include_str!("../../tests/exporter/tomcat.yml")),
            (
                "cassandra",
                include_str!("../../tests/exporter/cassandra.yml"),
            ),
        ] {
            let m = Module::from_yaml(name, text).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(m.rules.len() > 3, "{name}");
        }
    }
}
