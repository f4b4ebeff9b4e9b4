//! One target's scrape under OpenTelemetry rules, in the same two round
//! trips as jmx_exporter's: the `list` says which MBeans each rule's
//! `bean`/`beans` patterns match and which of the attributes its
//! mappings and `beanattr()`s name they have; a [`Plan`] reads only those
//! (through [`scrape::Plan`]'s reads, so a bean whose read fails whole is
//! read again attribute by attribute); [`Plan::apply`] turns the answers
//! into points as upstream's engine does:
//!
//! - a value is a JSON number (an item of a composite for `Attr.item`);
//!   text, a boolean or an object where a number is wanted is a counted
//!   drop (`not_numeric`), as is a state attribute that is no scalar;
//! - `dropNegativeValues` leaves a negative value out; `sourceUnit`
//!   converts it (then a double);
//! - a metric attribute whose source is missing (no such key property, no
//!   such attribute, not text) is left off the point;
//! - points of one metric with the same attributes, from MBeans whose
//!   other key properties no attribute names, are aggregated: summed for
//!   counters and up-down counters, the last in the agent's order for
//!   gauges (`MetricAggregationTest`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::Value;

use super::{Extractor, Instrument, Metric, Module, Point, Source};
use crate::exporter::limits::{Exceeded, Limits, Ticker};
use crate::exporter::rules::{MetricType, Sample};
use crate::exporter::scrape::{
    self, attribute_error, exported_kind, AttributeError, PlannedAttribute, PlannedBean, Read,
    Scraped,
};
use crate::protocol::ObjectName;

/// What to read of one target for one module of OpenTelemetry rules.
#[derive(Debug)]
pub struct Plan {
    /// The matched MBeans with the attributes the rules need.
    pub reads: scrape::Plan,
    /// Per planned bean (same index), the rules that match it, in order.
    rules_of: Vec<Vec<usize>>,
    /// More MBeans matched than a scrape may give samples: the scrape
    /// fails with this, without reading them.
    pub too_many: Option<Exceeded>,
}

impl Plan {
    /// The plan for an agent's `list` answer's value; at most `max_beans`
    /// MBeans (each gives a sample at least), more is [`Plan::too_many`].
    pub fn from_list(module: &Module, list: &Value, max_beans: usize) -> Plan {
        let mut beans = Vec::new();
        let mut rules_of = Vec::new();
        let mut too_many = None;
        let names = list
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(domain, names)| Some((domain, names.as_object()?)))
            .flat_map(|(domain, names)| names.iter().map(move |(keys, info)| (domain, keys, info)));
        for (domain, keys, info) in names {
            let Ok(name) = ObjectName::parse(&format!("{domain}:{keys}")) else {
                continue;
            };
            let matching: Vec<usize> = module
                .rules
                .iter()
                .enumerate()
                .filter(|(_, r)| r.beans.iter().any(|p| p.matches(&name)))
                .map(|(i, _)| i)
                .collect();
            if matching.is_empty() {
                continue;
            }
            if beans.len() >= max_beans {
                too_many = Some(Exceeded::Samples(max_beans));
                break;
            }
            let wanted: HashSet<&str> = matching
                .iter()
                .flat_map(|&r| module.rules[r].extractors.iter())
                .flat_map(needed)
                .collect();
            let attributes = planned_attributes(info, &wanted);
            if attributes.is_empty() {
                continue;
            }
            beans.push(PlannedBean {
                name: name.as_str().to_string(),
                domain: name.domain().to_string(),
                properties: name.properties().to_vec(),
                attributes,
                dates: Vec::new(),
                customizer: None,
            });
            rules_of.push(matching);
        }
        Plan {
            reads: scrape::Plan::of_beans(beans),
            rules_of,
            too_many,
        }
    }

    /// The points of the answers to the reads (as [`scrape::Plan::assemble`]
    /// folds them), within `limits`.
    pub fn apply(&self, module: &Module, answers: &[(Read, Value)], limits: &Limits) -> Scraped {
        let mut scraped = Scraped::default();
        if let Some(e) = self.too_many.clone() {
            scraped.exceeded = Some(e);
            return scraped;
        }
        let mut points = Points::default();
        let mut ticker = Ticker::default();
        for (read, answer) in answers {
            let Read::Attributes(b) = *read else {
                continue;
            };
            let bean = &self.reads.beans[b];
            let values = answer.get("value").and_then(Value::as_object);
            // Each attribute read that did not come is counted once, by
            // why: not answered (a value that is no object of its
            // attributes answers none), denied, not supported, failed.
            for a in &bean.attributes {
                match values.and_then(|v| v.get(&a.name)).map(attribute_error) {
                    None => scraped.failed += 1,
                    Some(Some(AttributeError::Denied)) => scraped.denied += 1,
                    Some(Some(AttributeError::Unsupported)) => scraped.unsupported += 1,
                    Some(Some(AttributeError::Failed)) => scraped.failed += 1,
                    Some(None) => {}
                }
            }
            let Some(values) = values else {
                continue;
            };
            for &r in &self.rules_of[b] {
                for extractor in &module.rules[r].extractors {
                    if let Err(e) = ticker.tick(limits) {
                        scraped.exceeded = Some(e);
                        return scraped;
                    }
                    extract(bean, values, extractor, &mut points, &mut scraped);
                }
            }
        }
        for (key, (metric, value)) in points.by_series {
            let sample = Sample {
                name: metric.name.clone(),
                match_name: String::new(),
                metric_type: match metric.instrument {
                    Instrument::Counter => MetricType::Counter,
                    Instrument::Gauge | Instrument::UpDownCounter => MetricType::Gauge,
                },
                help: metric.description.clone().unwrap_or_default(),
                labels: key.1,
                value: value.as_f64(),
                otel: Some(Point {
                    metric,
                    integer: value.is_integer(),
                }),
            };
            if let Err(e) = scraped.admit(sample, limits) {
                scraped.exceeded = Some(e);
                break;
            }
        }
        scraped
    }
}

/// The attributes an extractor reads: its own, and those its
/// `beanattr()`s name (the attribute of an item they name).
fn needed(e: &Extractor) -> impl Iterator<Item = &str> {
    let from_sources = e
        .attributes
        .iter()
        .filter_map(|a| bean_attribute(&a.source));
    std::iter::once(e.path[0].as_str()).chain(from_sources)
}

/// The attribute a `beanattr()` reads.
fn bean_attribute(source: &Source) -> Option<&str> {
    match source {
        Source::BeanAttribute(path) => Some(&path[0]),
        Source::Lowercase(inner) => bean_attribute(inner),
        _ => None,
    }
}

/// The readable attributes of a listed MBean that are wanted, once each,
/// in the list's order.
fn planned_attributes(info: &Value, wanted: &HashSet<&str>) -> Vec<PlannedAttribute> {
    let mut out = Vec::new();
    for (attr, a) in info
        .get("attr")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if !wanted.contains(attr.as_str()) || a.get("r").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        let type_name = a
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let has_open_type = a.get("openType").is_some_and(|t| !t.is_null());
        let Some(bounded) = exported_kind(&type_name, has_open_type) else {
            continue;
        };
        out.push(PlannedAttribute {
            name: attr.clone(),
            type_name,
            description: a.get("desc").and_then(Value::as_str).map(str::to_string),
            open_type: None,
            bounded,
        });
    }
    out
}

/// A number as read: integers stay integers until a conversion or a sum
/// with a double makes them one.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Number {
    Integer(i64),
    Double(f64),
}

impl Number {
    fn of(v: &Value) -> Option<Number> {
        let n = v.as_number()?;
        match n.as_i64() {
            Some(i) => Some(Number::Integer(i)),
            None => n.as_f64().filter(|f| f.is_finite()).map(Number::Double),
        }
    }

    fn as_f64(self) -> f64 {
        match self {
            Number::Integer(i) => i as f64,
            Number::Double(d) => d,
        }
    }

    fn is_integer(self) -> bool {
        matches!(self, Number::Integer(_))
    }

    fn plus(self, other: Number) -> Number {
        match (self, other) {
            (Number::Integer(a), Number::Integer(b)) => match a.checked_add(b) {
                Some(s) => Number::Integer(s),
                None => Number::Double(a as f64 + b as f64),
            },
            (a, b) => Number::Double(a.as_f64() + b.as_f64()),
        }
    }
}

/// A point's identity: its metric's name and its attributes, sorted.
type SeriesKey = (String, Vec<(String, String)>);

/// The points of a scrape as they are aggregated, in the order first made.
#[derive(Default)]
struct Points {
    by_series: IndexMap<SeriesKey, (Arc<Metric>, Number)>,
    /// The metric each name was first made with (a description taken
    /// from the first MBean that gave one).
    metrics: HashMap<String, Arc<Metric>>,
}

impl Points {
    fn add(
        &mut self,
        metric: &Arc<Metric>,
        from_mbean: Option<&str>,
        mut labels: Vec<(String, String)>,
        value: Number,
    ) {
        let metric = self
            .metrics
            .entry(metric.name.clone())
            .or_insert_with(|| metric.described(from_mbean))
            .clone();
        labels.sort();
        match self.by_series.entry((metric.name.clone(), labels)) {
            indexmap::map::Entry::Vacant(v) => {
                v.insert((metric, value));
            }
            indexmap::map::Entry::Occupied(mut o) => {
                let (_, held) = o.get_mut();
                *held = match metric.instrument {
                    Instrument::Gauge => value,
                    Instrument::Counter | Instrument::UpDownCounter => held.plus(value),
                };
            }
        }
    }
}

/// One extractor on one MBean's values.
fn extract(
    bean: &PlannedBean,
    values: &serde_json::Map<String, Value>,
    e: &Extractor,
    points: &mut Points,
    scraped: &mut Scraped,
) {
    // An attribute that did not come is counted where the answer is.
    let Some(raw) = values
        .get(&e.path[0])
        .filter(|v| attribute_error(v).is_none())
    else {
        return;
    };
    let Some(value) = e.path[1..].iter().try_fold(raw, |v, item| v.get(item)) else {
        return;
    };
    let description = bean
        .attributes
        .iter()
        .find(|a| a.name == e.path[0])
        .and_then(|a| a.description.as_deref());
    let mut labels: Vec<(String, String)> = e
        .attributes
        .iter()
        .filter_map(|a| Some((a.name.clone(), source_value(&a.source, bean, values)?)))
        .collect();
    if let Some(state) = &e.state {
        let Some(text) = scalar_text(value) else {
            scraped.not_numeric += 1;
            return;
        };
        let current = state.key_of(&text);
        for key in &state.keys {
            let mut labels = labels.clone();
            labels.push((state.attribute.clone(), key.clone()));
            let one = Number::Integer(i64::from(key == current));
            points.add(&e.metric, description, labels, one);
        }
        return;
    }
    let Some(mut number) = Number::of(value) else {
        scraped.not_numeric += 1;
        return;
    };
    if e.drop_negative && number.as_f64() < 0.0 {
        return;
    }
    if let Some(c) = e.convert {
        number = Number::Double(c.apply(number.as_f64()));
    }
    points.add(&e.metric, description, std::mem::take(&mut labels), number);
}

/// A metric attribute's value on this MBean, if it has one.
fn source_value(
    source: &Source,
    bean: &PlannedBean,
    values: &serde_json::Map<String, Value>,
) -> Option<String> {
    match source {
        Source::Constant(c) => Some(c.clone()),
        Source::Param(key) => bean
            .properties
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone()),
        Source::BeanAttribute(path) => {
            let raw = values.get(&path[0])?;
            if attribute_error(raw).is_some() {
                return None;
            }
            let v = path[1..].iter().try_fold(raw, |v, item| v.get(item))?;
            scalar_text(v)
        }
        Source::Lowercase(inner) => source_value(inner, bean, values).map(|v| v.to_lowercase()),
    }
}

/// A scalar's text as Java's `toString` gives it for what Jolokia sends
/// (a string as is, a boolean `true`, a number); `None` for an object,
/// an array or null.
fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}
