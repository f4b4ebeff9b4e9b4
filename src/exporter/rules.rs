//! Rule matching, as jmx_exporter's collector does it for each value it
//! finds (`JmxCollector.Receiver.recordBean`): the value's match name
//! `domain<k1=v1, k2=v2><attrKeys>attrName: value` against each rule in
//! order, the first match deciding the metric's name, labels, help, type
//! and value, or the default export for a rule without a name.

use std::borrow::Cow;

use super::config::Module;
use super::java_regex::{JavaRegex, Replacement};
use super::java_text::{double_to_string, parse_double};

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

    fn java_text(&self) -> Cow<'_, str> {
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

impl Module {
    /// The sample one value gives under this module's rules.
    pub fn record(&self, leaf: &Leaf<'_>) -> Outcome {
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
        for rule in &self.rules {
            let attribute: Cow<'_, str> = if rule.attr_name_snake_case {
                Cow::Owned(snake_and_lower_case(leaf.attr_name))
            } else {
                Cow::Borrowed(leaf.attr_name)
            };
            let shown: &str = if rule.cache { "<cache>" } else { &value_text };
            let match_name = format!("{bean_name}{attribute}: {shown}");
            let captures = match &rule.pattern {
                Some(p) => match p.captures(&match_name) {
                    Some(c) => Some(c),
                    None => continue,
                },
                None => None,
            };
            let expand =
                |r: &Replacement| captures.as_ref().map_or_else(String::new, |c| r.expand(c));
            let mut value_override = None;
            if let Some(v) = &rule.value {
                match parse_double(&expand(v)) {
                    Some(v) => value_override = Some(v),
                    // Not a number: jmx_exporter gives up on this value.
                    None => return Outcome::Nothing,
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
                        return Outcome::Nothing;
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
            let value = match (value_override, leaf.value) {
                (Some(v), _) | (None, &BeanValue::Number { value: v, .. }) => v * rule.value_factor,
                (None, BeanValue::Bool(b)) => f64::from(u8::from(*b)),
                (None, BeanValue::Text(_)) => return Outcome::Nothing,
            };
            if let Some(twice) = repeated_label(&labels) {
                return Outcome::DuplicateLabel(twice);
            }
            return Outcome::Sample(Sample {
                name: strip_reserved_suffixes(&name),
                match_name,
                metric_type,
                help,
                labels,
                value,
            });
        }
        Outcome::Nothing
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
