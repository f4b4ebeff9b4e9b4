//! One rules file of OpenTelemetry's JMX Metric Insight format, read as
//! upstream's `RuleParser` and `JmxRule.buildMetricDef` read it: the same
//! keys (anything else is "Unrecognized key(s) found"), the same defaults
//! (a rule's `type`, `unit`, `sourceUnit`, `dropNegativeValues`,
//! `metricAttribute` and state mapping for each of its mappings that
//! doesn't set its own; `gauge` without a type; `prefix` before each
//! metric name, the attribute's name where no `metric` is given) and the
//! same refusals, each naming the file, the rule and its line. Stricter
//! than upstream where upstream fails later: a `sourceUnit` with no
//! conversion to its `unit`, and a metric name that is no OpenTelemetry
//! instrument name, are refused when the file is read.

use std::collections::HashMap;
use std::sync::Arc;

use indexmap::IndexMap;
use serde::Deserialize;
use serde_saphyr::Spanned;

use super::units::Conversion;
use super::{Extractor, Instrument, Metric, MetricAttribute, Rule, Source, State};
use crate::protocol::ObjectName;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileYaml {
    rules: Option<Vec<Spanned<RuleYaml>>>,
}

/// What a rule and a mapping share (`MetricStructure`).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RuleYaml {
    bean: Option<String>,
    beans: Option<Vec<String>>,
    handler: Option<String>,
    handlers: Option<Vec<String>>,
    prefix: Option<String>,
    mapping: Option<IndexMap<String, Spanned<Option<MetricYaml>>>>,
    #[serde(rename = "type")]
    metric_type: Option<String>,
    metric_attribute: Option<IndexMap<String, AttributeYaml>>,
    unit: Option<String>,
    source_unit: Option<String>,
    drop_negative_values: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct MetricYaml {
    metric: Option<String>,
    desc: Option<String>,
    #[serde(rename = "type")]
    metric_type: Option<String>,
    metric_attribute: Option<IndexMap<String, AttributeYaml>>,
    unit: Option<String>,
    source_unit: Option<String>,
    drop_negative_values: Option<bool>,
}

/// A metric attribute: an expression, or a state mapping.
#[derive(Deserialize)]
#[serde(untagged)]
enum AttributeYaml {
    Expression(String),
    State(IndexMap<String, OneOrMany>),
    Other(serde_json::Value),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
    Other(serde_json::Value),
}

/// A metric's type as written: upstream's names, any case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Gauge,
    Counter,
    UpDownCounter,
    State,
}

fn kind(text: &str) -> Result<Kind, String> {
    match text.trim().to_ascii_uppercase().as_str() {
        "GAUGE" => Ok(Kind::Gauge),
        "COUNTER" => Ok(Kind::Counter),
        "UPDOWNCOUNTER" => Ok(Kind::UpDownCounter),
        "STATE" => Ok(Kind::State),
        other => Err(format!(
            "Invalid metric type: {other} (one of gauge, counter, updowncounter, state)"
        )),
    }
}

/// Every rule of one file; `origin` names it in messages (a path, or
/// `built-in jvm`). Errors: every problem found, each with its rule and
/// line. `ignored`: what can't run here, for the log.
pub fn read(origin: &str, text: &str) -> Result<(Vec<Rule>, Vec<String>), Vec<String>> {
    let parsed: Option<FileYaml> = if is_empty_document(text) {
        None
    } else {
        serde_saphyr::from_str(text).map_err(|e| vec![format!("{origin}: {e}")])?
    };
    let mut rules = Vec::new();
    let mut problems = Vec::new();
    let mut ignored = Vec::new();
    let entries = parsed.and_then(|f| f.rules).unwrap_or_default();
    for (i, spanned) in entries.into_iter().enumerate() {
        let at = format!(
            "{origin}: rule {} (line {})",
            i + 1,
            spanned.referenced.line()
        );
        let rule = spanned.value;
        for handler in rule.handler.iter().chain(rule.handlers.iter().flatten()) {
            ignored.push(format!(
                "{at}: handler {handler} is Java code inside OpenTelemetry's agent; its metrics are not made over Jolokia"
            ));
        }
        match build(&at, rule) {
            Ok(Some(r)) => rules.push(r),
            Ok(None) => {}
            Err(mut e) => problems.append(&mut e),
        }
    }
    if problems.is_empty() {
        Ok((rules, ignored))
    } else {
        Err(problems)
    }
}

/// A file of nothing but comments and document markers: no rules, as
/// upstream reads an empty document.
fn is_empty_document(text: &str) -> bool {
    text.lines().all(|l| {
        let l = l.trim();
        l.is_empty() || l.starts_with('#') || l == "---" || l == "..."
    })
}

/// One rule's extractors (`buildMetricDef`); `None` for a rule of
/// handlers only.
fn build(at: &str, rule: RuleYaml) -> Result<Option<Rule>, Vec<String>> {
    let mut problems = Vec::new();
    let mut beans = Vec::new();
    for name in rule.bean.iter().chain(rule.beans.iter().flatten()) {
        match ObjectName::parse(name.trim()) {
            Ok(n) => beans.push(n),
            Err(e) => problems.push(format!(
                "{at}: '{name}' is not a valid JMX object name: {e}"
            )),
        }
    }
    if rule.bean.is_none() && rule.beans.as_ref().is_none_or(Vec::is_empty) {
        problems.push(format!("{at}: No ObjectName specified (bean or beans)"));
    }
    let has_handlers =
        rule.handler.is_some() || rule.handlers.as_ref().is_some_and(|h| !h.is_empty());
    let mapping = rule.mapping.as_ref().map(IndexMap::len).unwrap_or(0);
    if mapping == 0 && !has_handlers {
        problems.push(format!("{at}: No MBean attributes specified (mapping)"));
    }
    if let Some(p) = &rule.prefix {
        if p.trim().is_empty() {
            problems.push(format!("{at}: The metric name prefix is empty"));
        }
    }
    let shared = match Shared::of(&rule) {
        Ok(s) => Some(s),
        Err(e) => {
            problems.push(format!("{at}: {e}"));
            None
        }
    };
    let mut extractors = Vec::new();
    if let Some(shared) = &shared {
        for (attribute, metric) in rule.mapping.iter().flatten() {
            let line = metric.referenced.line();
            let here = format!("{at}, mapping {attribute} (line {line})");
            match extractor(attribute, metric.value.as_ref(), &rule, shared) {
                Ok(e) => extractors.push(e),
                Err(e) => problems.push(format!("{here}: {e}")),
            }
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    if extractors.is_empty() {
        return Ok(None);
    }
    Ok(Some(Rule {
        at: at.to_string(),
        beans,
        extractors,
    }))
}

/// A rule's settings its mappings inherit.
struct Shared {
    kind: Option<Kind>,
    attributes: Vec<MetricAttribute>,
    state: Option<(String, StateBuilder)>,
}

impl Shared {
    fn of(rule: &RuleYaml) -> Result<Shared, String> {
        let kind = rule.metric_type.as_deref().map(kind).transpose()?;
        let (attributes, state) = attributes(rule.metric_attribute.as_ref())?;
        Ok(Shared {
            kind,
            attributes,
            state,
        })
    }
}

/// The attributes of a `metricAttribute` map, and its state mapping if
/// one holds one.
#[allow(clippy::type_complexity)]
fn attributes(
    map: Option<&IndexMap<String, AttributeYaml>>,
) -> Result<(Vec<MetricAttribute>, Option<(String, StateBuilder)>), String> {
    let mut out = Vec::new();
    let mut state = None;
    for (key, value) in map.into_iter().flatten() {
        match value {
            AttributeYaml::Expression(text) => out.push(MetricAttribute {
                name: key.clone(),
                source: expression(key, text.trim())?,
            }),
            AttributeYaml::State(map) => {
                if state.is_some() {
                    return Err("only a single state map is expected".into());
                }
                if map.is_empty() {
                    return Err(format!("state map is empty for key {key}"));
                }
                let mut builder = StateBuilder::default();
                for (state_key, values) in map {
                    match values {
                        OneOrMany::One(v) => builder.map(v, state_key)?,
                        OneOrMany::Many(vs) => {
                            for v in vs {
                                builder.map(v, state_key)?;
                            }
                        }
                        OneOrMany::Other(v) => {
                            return Err(format!("unexpected state list value for {state_key}: {v}"))
                        }
                    }
                }
                state = Some((key.clone(), builder));
            }
            AttributeYaml::Other(serde_json::Value::Null) => {
                return Err(format!(
                    "nothing specified for metric attribute key '{key}'"
                ))
            }
            AttributeYaml::Other(v) => return Err(format!("unexpected metric attribute: {v}")),
        }
    }
    Ok((out, state))
}

/// `param(x)`, `beanattr(x)`, `const(x)`, optionally in `lowercase(…)`.
pub fn expression(key: &str, text: &str) -> Result<Source, String> {
    let bad = || format!("Invalid metric attribute expression for '{key}' : '{text}'");
    let call = |function: &str, expr: &str| -> Result<Option<String>, String> {
        let Some(rest) = expr.strip_prefix(function) else {
            return Ok(None);
        };
        let rest = rest.trim();
        let inner = rest
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .ok_or_else(bad)?
            .trim();
        if inner.is_empty() {
            return Err(bad());
        }
        Ok(Some(inner.to_string()))
    };
    let (lower, expr) = match call("lowercase", text)? {
        Some(inner) => (true, inner),
        None => (false, text.to_string()),
    };
    let source = if let Some(p) = call("param", &expr)? {
        Source::Param(p)
    } else if let Some(a) = call("beanattr", &expr)? {
        Source::BeanAttribute(attribute_path(&a)?)
    } else if let Some(c) = call("const", &expr)? {
        Source::Constant(c)
    } else {
        return Err(bad());
    };
    Ok(if lower {
        Source::Lowercase(Box::new(source))
    } else {
        source
    })
}

/// An attribute name and the composite items inside it: split at each
/// `.` not escaped by `\`.
pub fn attribute_path(name: &str) -> Result<Vec<String>, String> {
    let mut parts = vec![String::new()];
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'.') => {
                chars.next();
                parts.last_mut().expect("one part").push('.');
            }
            '.' => parts.push(String::new()),
            c => parts.last_mut().expect("one part").push(c),
        }
    }
    if parts.iter().any(|p| p.trim().is_empty()) {
        return Err(format!("Invalid attribute name '{name}'"));
    }
    Ok(parts)
}

/// A state mapping as it is written (`StateMapping.Builder`).
#[derive(Default, Clone)]
struct StateBuilder {
    keys: Vec<String>,
    default: Option<String>,
    by_value: HashMap<String, String>,
}

impl StateBuilder {
    fn map(&mut self, value: &str, key: &str) -> Result<(), String> {
        if !self.keys.iter().any(|k| k == key) {
            self.keys.push(key.to_string());
        }
        if value == "*" {
            if self.default.is_some() {
                return Err("a state mapping has one default ('*'), not two".into());
            }
            self.default = Some(key.to_string());
        } else if self
            .by_value
            .insert(value.to_string(), key.to_string())
            .is_some()
        {
            return Err(format!("the value {value} is mapped to two states"));
        }
        Ok(())
    }

    fn build(self, attribute: &str) -> Result<State, String> {
        let default = self.default.ok_or_else(|| {
            format!(
                "the state mapping of {attribute} has no default: map '*' (quoted) to the state of any other value"
            )
        })?;
        Ok(State {
            attribute: attribute.to_string(),
            keys: self.keys,
            default,
            by_value: self.by_value,
        })
    }
}

/// One mapping's extractor (`Metric.buildMetricInfo` and the rest of
/// `buildMetricDef`).
fn extractor(
    attribute: &str,
    metric: Option<&MetricYaml>,
    rule: &RuleYaml,
    shared: &Shared,
) -> Result<Extractor, String> {
    let path = attribute_path(attribute)?;
    let nice = path.join(".");
    let empty = MetricYaml::default();
    let m = metric.unwrap_or(&empty);
    if let Some(name) = &m.metric {
        if name.trim().is_empty() {
            return Err("The metric name is empty".into());
        }
    }
    let own = m.metric.as_deref().map(str::trim).unwrap_or(&nice);
    let name = format!(
        "{}{own}",
        rule.prefix.as_deref().map(str::trim).unwrap_or("")
    );
    check_instrument_name(&name)?;
    let (own_attributes, own_state) = attributes(m.metric_attribute.as_ref())?;
    // Metric-level attributes override the rule's of the same name.
    let mut combined: Vec<MetricAttribute> = shared
        .attributes
        .iter()
        .filter(|a| !own_attributes.iter().any(|o| o.name == a.name))
        .cloned()
        .collect();
    combined.extend(own_attributes);
    let kind_written = m.metric_type.as_deref().map(kind).transpose()?;
    let state = match own_state.or_else(|| shared.state.clone()) {
        Some((key, builder)) => {
            combined.retain(|a| a.name != key);
            Some(builder.build(&key)?)
        }
        None => None,
    };
    let kind = kind_written.or(shared.kind).unwrap_or(Kind::Gauge);
    if kind == Kind::State && state.is_none() {
        return Err(format!(
            "metric '{name}' is of type state but has no state mapping: give one metricAttribute a map of states to values"
        ));
    }
    let description = m.desc.as_ref().map(|d| d.trim().to_string());
    if let Some(state) = state {
        let metric = Metric {
            name,
            description,
            unit: "1".into(),
            instrument: Instrument::UpDownCounter,
        };
        return Ok(Extractor {
            path,
            metric: Arc::new(metric),
            attributes: combined,
            drop_negative: false,
            convert: None,
            state: Some(state),
        });
    }
    let unit = m
        .unit
        .as_ref()
        .or(rule.unit.as_ref())
        .map(|u| u.trim().to_string());
    if metric.is_some() && unit.is_none() {
        return Err(format!(
            "Metric unit is required for metric '{name}' (set unit here or on the rule)"
        ));
    }
    let source_unit = m.source_unit.as_ref().or(rule.source_unit.as_ref());
    if source_unit.is_some_and(|s| s.trim().is_empty()) {
        return Err("Metric unit is empty (sourceUnit)".into());
    }
    let convert = Conversion::between(source_unit.map(|s| s.trim()), unit.as_deref())?;
    let drop_negative = m
        .drop_negative_values
        .or(rule.drop_negative_values)
        .unwrap_or(false);
    Ok(Extractor {
        path,
        metric: Arc::new(Metric {
            name,
            description,
            unit: unit.unwrap_or_default(),
            instrument: match kind {
                Kind::Counter => Instrument::Counter,
                Kind::UpDownCounter => Instrument::UpDownCounter,
                Kind::Gauge | Kind::State => Instrument::Gauge,
            },
        }),
        attributes: combined,
        drop_negative,
        convert,
        state: None,
    })
}

/// OpenTelemetry's instrument name syntax: a letter, then up to 254
/// letters, digits, `_`, `.`, `-` or `/`.
fn check_instrument_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "_.-/".contains(c))
        && name.len() <= 255;
    if ok {
        Ok(())
    } else {
        Err(format!(
            "'{name}' is not an OpenTelemetry instrument name (a letter, then up to 254 letters, digits, _ . - /)"
        ))
    }
}
