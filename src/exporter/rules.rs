//! Rule matching, as jmx_exporter's collector does it for each value it
//! finds (`JmxCollector.Receiver.recordBean`): the value's match name
//! `domain<k1=v1, k2=v2><attrKeys>attrName: value` against each rule in
//! order, the first match deciding the metric's name, labels, help, type
//! and value, or the default export for a rule without a name.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use super::java_regex::{JavaRegex, Replacement};
use super::java_text::{double_to_string, parse_double};
use crate::protocol::ObjectName;

/// The compiled form of one rules file (`config.rs` reads it).
#[derive(Debug)]
pub struct Module {
    pub name: String,
    pub lowercase_output_name: bool,
    pub lowercase_output_label_names: bool,
    pub infer_counter_type_from_name: bool,
    /// MBeans to scrape; empty: all of them.
    pub include: Vec<ObjectName>,
    pub exclude: Vec<ObjectName>,
    /// Per MBean (canonical name): attributes to leave out, or the only
    /// ones to read when the include map is not empty.
    pub exclude_attributes: HashMap<String, HashSet<String>>,
    pub include_attributes: HashMap<String, HashSet<String>>,
    pub customizers: Vec<Customizer>,
    pub rules: Vec<Rule>,
    /// The file's `openTelemetry:` block, for OTLP exports of the module.
    pub open_telemetry: Option<super::open_telemetry::OpenTelemetryBlock>,
    /// Keys read and not used, for the log.
    pub ignored: Vec<String>,
}

/// A metric's type, as a rule's `type` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MetricType {
    Gauge,
    Counter,
    Unknown,
}

/// One rule of a rules file, compiled.
#[derive(Debug)]
pub struct Rule {
    /// Wrapped as jmx_exporter wraps it: `^.*(?:pattern).*$`.
    pub pattern: Option<JavaRegex>,
    /// The pattern alone, searched for: on a text without line breaks it
    /// matches exactly where the wrapped one does, and the `regex` crate
    /// finds a miss far faster (literal prefilters, no backtracking).
    pub screen: Option<JavaRegex>,
    pub name: Option<Replacement>,
    pub value: Option<Replacement>,
    pub value_factor: f64,
    pub help: Option<Replacement>,
    pub attr_name_snake_case: bool,
    /// jmx_exporter's `cache: true`: the rule sees `<cache>` instead of
    /// the value.
    pub cache: bool,
    pub metric_type: MetricType,
    /// Label name and value replacements, ordered by the name as written.
    pub labels: Vec<(Replacement, Replacement)>,
}

impl Default for Rule {
    fn default() -> Rule {
        Rule {
            pattern: None,
            screen: None,
            name: None,
            value: None,
            value_factor: 1.0,
            help: None,
            attr_name_snake_case: false,
            cache: false,
            metric_type: MetricType::Unknown,
            labels: Vec::new(),
        }
    }
}

/// `metricCustomizers`: for MBeans of a domain with given properties,
/// other attributes' values as labels, and constant extra metrics.
#[derive(Debug)]
pub struct Customizer {
    pub domain: String,
    pub properties: Vec<(String, String)>,
    pub attributes_as_labels: Vec<String>,
    pub extra_metrics: Vec<ExtraMetric>,
}

#[derive(Debug)]
pub struct ExtraMetric {
    pub name: String,
    pub value: BeanValue,
    pub description: Option<String>,
}

impl Customizer {
    /// Whether it applies to an MBean: its domain, and every property it
    /// names with that value.
    pub fn applies(&self, domain: &str, properties: &[(String, String)]) -> bool {
        self.domain == domain
            && self
                .properties
                .iter()
                .all(|(k, v)| properties.iter().any(|(pk, pv)| pk == k && pv == v))
    }
}

/// A value as the collector sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum BeanValue {
    /// A number, with the text Java's `toString` gives it (`5`, `1.0E7`).
    Number {
        value: f64,
        text: String,
    },
    Bool(bool),
    /// Strings and enum names: exported only through a rule's `value`.
    Text(String),
}

impl BeanValue {
    pub fn number(value: f64) -> BeanValue {
        BeanValue::Number {
            value,
            text: double_to_string(value),
        }
    }

    pub fn java_text(&self) -> Cow<'_, str> {
        match self {
            BeanValue::Number { text, .. } => Cow::Borrowed(text),
            BeanValue::Bool(b) => Cow::Borrowed(if *b { "true" } else { "false" }),
            BeanValue::Text(t) => Cow::Borrowed(t),
        }
    }
}

/// One value found in an MBean attribute (a leaf of its composite or
/// tabular data), with where it was found.
#[derive(Debug)]
pub struct Leaf<'a> {
    pub domain: &'a str,
    /// The MBean's key properties in registration order, values as
    /// written; a tabular row's index columns follow.
    pub properties: &'a [(String, String)],
    /// The attribute names above this value, outermost first.
    pub attr_keys: &'a [String],
    pub attr_name: &'a str,
    pub description: Option<&'a str>,
    pub value: &'a BeanValue,
    /// Labels from `metricCustomizers` `attributesAsLabels`.
    pub attribute_labels: &'a [(String, String)],
}

/// What one value became.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Safe, and without a reserved suffix (`_total`, `_info`, …).
    pub name: String,
    /// The text the rules were matched against.
    pub match_name: String,
    pub metric_type: MetricType,
    pub help: String,
    /// In the order the rule gave them (sorted when written).
    pub labels: Vec<(String, String)>,
    pub value: f64,
    /// An OpenTelemetry rule's point: its metric (name, instrument, unit,
    /// description); `name` and `labels` are then OpenTelemetry's until
    /// `/prometheus` translates them. `None` for jmx_exporter's.
    pub otel: Option<super::point::Point>,
}

/// Why a value made no sample, when a rule said something about it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Sample(Sample),
    /// No rule matched, a rule dropped it (empty name), or it is text no
    /// rule turned into a number.
    Nothing,
    /// The sample would carry one label name twice (jmx_exporter fails
    /// the scrape; the gateway leaves the sample out and counts it).
    DuplicateLabel(String),
}

/// What a leaf's place (its MBean, keys and attribute) maps to under a
/// module's rules: the rule's name, labels and help, ready for a value.
/// Made once and reused while the value's text stays the same, or for
/// every value when no rule tried looked at it.
#[derive(Debug, Clone)]
pub struct Mapping {
    mapped: Mapped,
    /// Every rule tried matched without the value (`cache: true`, or no
    /// pattern): the mapping holds for any value, as jmx_exporter's rule
    /// cache assumes.
    pub value_independent: bool,
}

#[derive(Debug, Clone)]
enum Mapped {
    Sample {
        name: String,
        match_name: String,
        metric_type: MetricType,
        help: String,
        labels: Vec<(String, String)>,
        /// The rule's `value`, already a number.
        value: Option<f64>,
        value_factor: f64,
        /// A label name given twice: no sample, counted.
        repeated_label: Option<String>,
    },
    Nothing,
}

/// What Java's `.` doesn't match (and `$` may stop before).
const LINE_TERMINATORS: [char; 5] = ['\n', '\r', '\u{85}', '\u{2028}', '\u{2029}'];

impl Mapping {
    /// About the bytes it holds beyond its own size.
    pub fn heap_bytes(&self) -> usize {
        match &self.mapped {
            Mapped::Nothing => 0,
            Mapped::Sample {
                name,
                match_name,
                help,
                labels,
                repeated_label,
                ..
            } => {
                name.capacity()
                    + match_name.capacity()
                    + help.capacity()
                    + labels
                        .iter()
                        .map(|(k, v)| k.capacity() + v.capacity() + 48)
                        .sum::<usize>()
                    + repeated_label.as_ref().map_or(0, String::capacity)
            }
        }
    }

    /// The sample a value gives at this place.
    pub fn sample(&self, value: &BeanValue) -> Outcome {
        match &self.mapped {
            Mapped::Nothing => Outcome::Nothing,
            Mapped::Sample {
                name,
                match_name,
                metric_type,
                help,
                labels,
                value: fixed,
                value_factor,
                repeated_label,
            } => {
                let value = match (*fixed, value) {
                    (Some(v), _) | (None, &BeanValue::Number { value: v, .. }) => v * value_factor,
                    (None, BeanValue::Bool(b)) => f64::from(u8::from(*b)),
                    (None, BeanValue::Text(_)) => return Outcome::Nothing,
                };
                if let Some(twice) = repeated_label {
                    return Outcome::DuplicateLabel(twice.clone());
                }
                Outcome::Sample(Sample {
                    name: name.clone(),
                    match_name: match_name.clone(),
                    metric_type: *metric_type,
                    help: help.clone(),
                    labels: labels.clone(),
                    value,
                    otel: None,
                })
            }
        }
    }
}

impl Module {
    /// The sample one value gives under this module's rules.
    pub fn record(&self, leaf: &Leaf<'_>) -> Outcome {
        self.mapping(leaf).sample(leaf.value)
    }

    /// What the first matching rule makes of a leaf (its value included
    /// where a rule looks at it).
    pub fn mapping(&self, leaf: &Leaf<'_>) -> Mapping {
        self.mapping_until(leaf, None).expect("no deadline to pass")
    }

    /// [`mapping`](Self::mapping), or `None` once `deadline` has passed:
    /// the clock is read before each rule, since one rule's match can
    /// take long (it backtracks up to its limit).
    pub fn mapping_until(
        &self,
        leaf: &Leaf<'_>,
        deadline: Option<std::time::Instant>,
    ) -> Option<Mapping> {
        let properties_text = map_text(leaf.properties);
        let keys_text = list_text(leaf.attr_keys);
        let bean_name = format!(
            "{}{}{}",
            leaf.domain,
            angle_brackets(&properties_text),
            angle_brackets(&keys_text)
        );
        let property = |key: &str| {
            leaf.properties
                .iter()
                .find(|(k, _)| k == key)
                .map_or("null", |(_, v)| v.as_str())
        };
        let mut help = format!(
            "{}:name={},type={},attribute={}",
            leaf.domain,
            property("name"),
            property("type"),
            leaf.attr_name
        );
        if let Some(d) = leaf.description.filter(|d| *d != leaf.attr_name) {
            help = format!("{d} {help}");
        }
        let value_text = leaf.value.java_text();
        let one_line =
            !value_text.contains(LINE_TERMINATORS) && !bean_name.contains(LINE_TERMINATORS);
        // The match name for each (attrNameSnakeCase, cache) a rule has,
        // made once.
        let mut match_names: [Option<String>; 4] = Default::default();
        let mut value_independent = true;
        let mapping = |mapped, value_independent| Mapping {
            mapped,
            value_independent,
        };
        for rule in &self.rules {
            if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                return None;
            }
            let attribute: Cow<'_, str> = if rule.attr_name_snake_case {
                Cow::Owned(snake_and_lower_case(leaf.attr_name))
            } else {
                Cow::Borrowed(leaf.attr_name)
            };
            value_independent &= rule.cache || rule.pattern.is_none();
            let variant = usize::from(rule.attr_name_snake_case) * 2 + usize::from(rule.cache);
            let match_name: &str = match_names[variant].get_or_insert_with(|| {
                let shown: &str = if rule.cache { "<cache>" } else { &value_text };
                format!("{bean_name}{attribute}: {shown}")
            });
            let captures = match &rule.pattern {
                Some(p) => {
                    let missed = one_line
                        && rule
                            .screen
                            .as_ref()
                            .is_some_and(|s| s.is_match(match_name) == Some(false));
                    if missed {
                        continue;
                    }
                    match p.captures(match_name) {
                        Some(c) => Some(c),
                        None => continue,
                    }
                }
                None => None,
            };
            let match_name = match_name.to_string();
            let expand =
                |r: &Replacement| captures.as_ref().map_or_else(String::new, |c| r.expand(c));
            let mut value_override = None;
            if let Some(v) = &rule.value {
                match parse_double(&expand(v)) {
                    Some(v) => value_override = Some(v),
                    // Not a number: jmx_exporter gives up on this value.
                    None => return Some(mapping(Mapped::Nothing, value_independent)),
                }
            }
            let (name, metric_type, help, labels) = match &rule.name {
                None => {
                    let (name, labels) = self.default_export(leaf, &attribute);
                    (name, rule.metric_type, help, labels)
                }
                Some(name) => {
                    let mut name = safe_name(&expand(name));
                    if name.is_empty() {
                        return Some(mapping(Mapped::Nothing, value_independent));
                    }
                    if self.lowercase_output_name {
                        name = name.to_lowercase();
                    }
                    let help = rule.help.as_ref().map_or(help, &expand);
                    let mut labels = self.attribute_labels(leaf);
                    for (n, v) in &rule.labels {
                        let mut n = safe_name(&expand(n));
                        let v = expand(v);
                        if self.lowercase_output_label_names {
                            n = n.to_lowercase();
                        }
                        if !n.is_empty() && !v.is_empty() {
                            labels.push((n, v));
                        }
                    }
                    (name, rule.metric_type, help, labels)
                }
            };
            let metric_type = if self.infer_counter_type_from_name && name.ends_with("_total") {
                MetricType::Counter
            } else {
                metric_type
            };
            let mapped = Mapped::Sample {
                repeated_label: repeated_label(&labels),
                name: strip_reserved_suffixes(&name),
                match_name,
                metric_type,
                help,
                labels,
                value: value_override,
                value_factor: rule.value_factor,
            };
            return Some(mapping(mapped, value_independent));
        }
        Some(mapping(Mapped::Nothing, value_independent))
    }

    /// The name and labels of a rule without a name:
    /// `domain_<first property value>_<attrKeys>_<attrName>`, the other
    /// properties as labels.
    fn default_export(&self, leaf: &Leaf<'_>, attribute: &str) -> (String, Vec<(String, String)>) {
        let mut name = leaf.domain.to_string();
        if let Some((_, first)) = leaf.properties.first() {
            name.push('_');
            name.push_str(first);
        }
        for k in leaf.attr_keys {
            name.push('_');
            name.push_str(k);
        }
        name.push('_');
        name.push_str(attribute);
        let mut name = safe_name(&name);
        if self.lowercase_output_name {
            name = name.to_lowercase();
        }
        let mut labels: Vec<(String, String)> = leaf
            .properties
            .iter()
            .skip(1)
            .map(|(k, v)| (self.label_name(k), v.clone()))
            .collect();
        labels.extend(self.attribute_labels(leaf));
        (name, labels)
    }

    fn attribute_labels(&self, leaf: &Leaf<'_>) -> Vec<(String, String)> {
        leaf.attribute_labels
            .iter()
            .map(|(k, v)| (self.label_name(k), v.clone()))
            .collect()
    }

    fn label_name(&self, raw: &str) -> String {
        let n = safe_name(raw);
        if self.lowercase_output_label_names {
            n.to_lowercase()
        } else {
            n
        }
    }
}

/// Java's `LinkedHashMap.toString()`: `{k1=v1, k2=v2}`.
fn map_text(properties: &[(String, String)]) -> String {
    let inner: Vec<String> = properties.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{{{}}}", inner.join(", "))
}

/// Java's `List.toString()`: `[a, b]`.
fn list_text(items: &[String]) -> String {
    format!("[{}]", items.join(", "))
}

/// jmx_exporter's `angleBrackets`: the outer brackets replaced by `<>`.
fn angle_brackets(s: &str) -> String {
    let mut chars = s.chars();
    if s.chars().count() < 2 {
        return format!("<{s}>");
    }
    chars.next();
    chars.next_back();
    format!("<{}>", chars.as_str())
}

/// jmx_exporter's `toSafeName`: every character outside `[a-zA-Z0-9:_]`
/// becomes `_`, runs of `_` one, and a leading digit gets a `_` before it.
pub fn safe_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 1);
    if name.chars().next().is_some_and(char::is_numeric) {
        out.push('_');
    }
    let mut previous_underscore = false;
    for c in name.chars() {
        let legal = c == ':' || c.is_ascii_alphanumeric();
        if legal {
            out.push(c);
            previous_underscore = false;
        } else if !previous_underscore {
            out.push('_');
            previous_underscore = true;
        }
    }
    out
}

/// jmx_exporter's `toSnakeAndLowerCase`: `replaceBlockOpMinTime` →
/// `replace_block_op_min_time`.
pub fn snake_and_lower_case(name: &str) -> String {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return String::new();
    };
    let mut out: String = first.to_lowercase().collect();
    let mut previous_upper_or_underscore = first.is_uppercase() || first == '_';
    for c in chars {
        let upper = c.is_uppercase();
        if !previous_upper_or_underscore && upper {
            out.push('_');
        }
        out.extend(c.to_lowercase());
        previous_upper_or_underscore = upper || c == '_';
    }
    out
}

/// client_java's `sanitizeMetricName`: reserved suffixes (`_total`,
/// `_created`, `_bucket`, `_info`) taken off, again until none is left.
pub fn strip_reserved_suffixes(name: &str) -> String {
    const RESERVED: [&str; 8] = [
        "_total", "_created", "_bucket", "_info", ".total", ".created", ".bucket", ".info",
    ];
    let mut name = name;
    loop {
        if let Some(exact) = RESERVED.iter().find(|s| name == **s) {
            return exact[1..].to_string();
        }
        match RESERVED.iter().find(|s| name.ends_with(**s)) {
            Some(s) => name = &name[..name.len() - s.len()],
            None => return name.to_string(),
        }
    }
}

fn repeated_label(labels: &[(String, String)]) -> Option<String> {
    let mut seen = std::collections::HashSet::new();
    labels
        .iter()
        .find(|(n, _)| !seen.insert(n.as_str()))
        .map(|(n, _)| n.clone())
}

#[cfg(test)]
mod tests;
