//! Agents' JSON values turned into what jmx_exporter's scraper hands its
//! rules (`JmxScraper.processBeanValue`): numbers, booleans, dates as
//! epoch seconds and strings; composite data walked into with the
//! attribute's name added to the keys; tabular data row by row, its index
//! columns added to the MBean's properties as labels; arrays, lists, maps
//! and other objects left out.
//!
//! Jolokia's JSON loses the Java types the scraper decides by. They come
//! back from the `list` answer: the attribute's declared type, and for
//! MXBeans (Jolokia 2.x, `openTypes`) the whole open type, with each
//! composite's and table's description and index columns. Without an open
//! type (1.x agents, standard MBeans returning open data), tables are
//! recognised by the shapes Jolokia writes them in.

use std::borrow::Cow;

use serde_json::Value;

use super::java_text::{double_to_string, float_to_string};
use super::limits::{Exceeded, Limits, Ticker};
use super::rules::BeanValue;

/// What is known of a value's type.
#[derive(Debug, Clone, Copy)]
pub enum Kind<'a> {
    /// A Java type name from the `list` answer.
    Declared(&'a str),
    /// Jolokia's description of an open type (`openType`).
    Open(&'a Value),
    Unknown,
}

const COMPOSITE: &str = "javax.management.openmbean.CompositeData";
const TABULAR: &str = "javax.management.openmbean.TabularData";

/// One leaf found in an attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The MBean's properties, then a table's index columns.
    pub properties: Vec<(String, String)>,
    pub attr_keys: Vec<String>,
    pub attr_name: String,
    pub description: Option<String>,
    pub value: BeanValue,
}

/// Where a value sits: what the scraper passes down as it recurses.
struct At<'a> {
    properties: Cow<'a, [(String, String)]>,
    attr_keys: Cow<'a, [String]>,
    attr_name: &'a str,
    description: Option<&'a str>,
    /// About how long the text rules are matched against is here, before
    /// the value: the properties, the keys and the attribute's name.
    text_len: usize,
}

/// A walk through one attribute's value: the bounds it keeps, and what it
/// hands each leaf to.
pub struct Walk<'w> {
    limits: &'w Limits,
    ticker: Ticker,
    /// The match text's length before the properties (the domain's).
    base_len: usize,
    /// Leaves (or whole subtrees) left out because the text their rules
    /// would be matched against is longer than `match_length_limit`.
    pub too_long: usize,
    sink: &'w mut dyn FnMut(Found) -> Result<(), Exceeded>,
}

impl<'w> Walk<'w> {
    pub fn new(
        limits: &'w Limits,
        sink: &'w mut dyn FnMut(Found) -> Result<(), Exceeded>,
    ) -> Walk<'w> {
        Walk {
            limits,
            ticker: Ticker::default(),
            base_len: 0,
            too_long: 0,
            sink,
        }
    }

    /// Every leaf of one attribute's value, in the scraper's order, each
    /// handed on as it is found; `base_len` is the length of what comes
    /// before the properties in a match name (the domain). Stops at the
    /// first bound a leaf's sink or the walk itself finds exceeded.
    pub fn attribute(
        &mut self,
        base_len: usize,
        properties: &[(String, String)],
        attr_name: &str,
        description: Option<&str>,
        kind: Kind<'_>,
        value: &Value,
    ) -> Result<(), Exceeded> {
        self.base_len = base_len;
        let at = At {
            properties: Cow::Borrowed(properties),
            attr_keys: Cow::Owned(Vec::new()),
            attr_name,
            description,
            text_len: base_len + properties_len(properties) + attr_name.len() + 4,
        };
        self.visit(&at, kind, value)
    }

    /// Whether a subtree or leaf whose match text is `len` long may be
    /// looked at; counted when not.
    fn fits(&mut self, len: usize) -> bool {
        let fits = len <= self.limits.match_length_limit;
        if !fits {
            self.too_long += 1;
        }
        fits
    }
}

fn properties_len(properties: &[(String, String)]) -> usize {
    properties.iter().map(|(k, v)| k.len() + v.len() + 3).sum()
}

/// Every leaf of one attribute's value, in the scraper's order, within
/// the default limits (no deadline): the walk as a list, for the tests.
#[cfg(test)]
fn leaves(
    properties: &[(String, String)],
    attr_name: &str,
    description: Option<&str>,
    kind: Kind<'_>,
    value: &Value,
) -> Vec<Found> {
    let mut out = Vec::new();
    let limits = Limits::default();
    let mut sink = |f: Found| {
        out.push(f);
        Ok(())
    };
    let mut walk = Walk::new(&limits, &mut sink);
    let _ = walk.attribute(0, properties, attr_name, description, kind, value);
    out
}

impl Walk<'_> {
    fn visit(&mut self, at: &At<'_>, kind: Kind<'_>, value: &Value) -> Result<(), Exceeded> {
        self.ticker.tick(self.limits)?;
        if !self.fits(at.text_len) {
            return Ok(());
        }
        let emit = |walk: &mut Self, v: BeanValue| {
            if !walk.fits(at.text_len + v.java_text().len()) {
                return Ok(());
            }
            (walk.sink)(Found {
                properties: at.properties.to_vec(),
                attr_keys: at.attr_keys.to_vec(),
                attr_name: at.attr_name.to_string(),
                description: at.description.map(str::to_string),
                value: v,
            })
        };
        let type_name = type_name(kind);
        match value {
            Value::Null | Value::Array(_) => Ok(()),
            Value::Bool(b) => emit(self, BeanValue::Bool(*b)),
            Value::Number(n) => match number(n, type_name) {
                Some(v) => emit(self, v),
                None => Ok(()),
            },
            Value::String(s) => {
                if type_name.is_some_and(|t| t == "java.util.Date") {
                    match iso_seconds(s) {
                        Some(seconds) => emit(self, BeanValue::number(seconds)),
                        None => Ok(()),
                    }
                } else if type_name.is_some_and(is_numeric_type) {
                    // Jolokia writes some numbers (BigDecimal, large longs
                    // on request) as text.
                    match s.parse::<f64>() {
                        Ok(f) => emit(
                            self,
                            BeanValue::Number {
                                value: f,
                                text: s.clone(),
                            },
                        ),
                        Err(_) => Ok(()),
                    }
                } else if self.fits(at.text_len + s.len()) {
                    emit(self, BeanValue::Text(s.clone()))
                } else {
                    Ok(())
                }
            }
            Value::Object(map) => match shape(kind, map) {
                Shape::Composite => self.composite(at, kind, map),
                Shape::Tabular => self.tabular(at, kind, map),
                Shape::Other => Ok(()),
            },
        }
    }
}

/// The JDK's own open types for platform MXBean attributes that 1.x
/// agents list without one, so every JVM's default export is the same
/// whichever generation serves it. Only `GarbageCollector.LastGcInfo`
/// needs one: its `memoryUsage*Gc` items are maps, which Jolokia writes
/// like composites. The text is what a 2.x agent lists (`openTypes`).
pub fn platform_open_type(
    domain: &str,
    properties: &[(String, String)],
    attribute: &str,
    declared: &str,
) -> Option<Value> {
    let garbage_collector = domain == "java.lang"
        && properties
            .iter()
            .any(|(k, v)| k == "type" && v == "GarbageCollector");
    if !(garbage_collector && attribute == "LastGcInfo" && declared == COMPOSITE) {
        return None;
    }
    const MAP: &str = "java.util.Map<java.lang.String, java.lang.management.MemoryUsage>";
    let usage = serde_json::json!({
        "kind": "composite",
        "type": "java.lang.management.MemoryUsage",
        "class": COMPOSITE,
        "desc": "java.lang.management.MemoryUsage",
        "items": {
            "init": "java.lang.Long",
            "committed": "java.lang.Long",
            "max": "java.lang.Long",
            "used": "java.lang.Long"
        }
    });
    let map = serde_json::json!({
        "kind": "tabular",
        "type": MAP,
        "class": TABULAR,
        "desc": MAP,
        "index": ["key"],
        "rowType": {
            "kind": "composite",
            "type": MAP,
            "class": COMPOSITE,
            "desc": MAP,
            "items": {"key": "java.lang.String", "value": usage}
        }
    });
    Some(serde_json::json!({
        "kind": "composite",
        "type": "com.sun.management.GcInfo",
        "class": COMPOSITE,
        "desc": "com.sun.management.GcInfo",
        "items": {
            "duration": "java.lang.Long",
            "startTime": "java.lang.Long",
            "endTime": "java.lang.Long",
            "id": "java.lang.Long",
            "memoryUsageBeforeGc": map.clone(),
            "memoryUsageAfterGc": map
        }
    }))
}

/// The description the JDK gives `GarbageCollector.LastGcInfo`'s
/// composite type (`GcInfoCompositeData`: `"CompositeType for GC info for
/// <collector>"`), which jmx_exporter's HELP shows; Jolokia's open type
/// says only the type's name. Set on `open_type` where it is that one.
pub fn describe_gc_info(
    domain: &str,
    properties: &[(String, String)],
    attribute: &str,
    open_type: &mut Value,
) {
    let is_gc = |k: &str, v: &str| properties.iter().any(|(pk, pv)| pk == k && pv == v);
    if domain != "java.lang" || attribute != "LastGcInfo" || !is_gc("type", "GarbageCollector") {
        return;
    }
    let Some(collector) = properties.iter().find(|(k, _)| k == "name") else {
        return;
    };
    if open_type.get("type").and_then(Value::as_str) == Some("com.sun.management.GcInfo") {
        open_type["desc"] = Value::String(format!("CompositeType for GC info for {}", collector.1));
    }
}

/// The Java type name of a value, where one is known.
fn type_name(kind: Kind<'_>) -> Option<&str> {
    match kind {
        Kind::Declared(t) => Some(t),
        Kind::Open(Value::String(t)) => Some(t),
        Kind::Open(o) => o.get("class").and_then(Value::as_str),
        Kind::Unknown => None,
    }
}

fn is_numeric_type(t: &str) -> bool {
    matches!(
        t,
        "java.math.BigDecimal" | "java.math.BigInteger" | "java.lang.Number"
    )
}

/// A JSON number with the text Java's `toString` gives its type.
fn number(n: &serde_json::Number, type_name: Option<&str>) -> Option<BeanValue> {
    let text = n.to_string();
    let value: f64 = text.parse().ok()?;
    let integral = !text.contains(['.', 'e', 'E']);
    let java = match type_name {
        Some("float" | "java.lang.Float") => float_to_string(value as f32),
        Some("java.math.BigDecimal" | "java.math.BigInteger") => text,
        _ if integral => text,
        _ => double_to_string(value),
    };
    let value = match type_name {
        // A float widened to double, as `Number.doubleValue()` does.
        Some("float" | "java.lang.Float") => f64::from(value as f32),
        _ => value,
    };
    Some(BeanValue::Number { value, text: java })
}

enum Shape {
    Composite,
    Tabular,
    Other,
}

fn shape(kind: Kind<'_>, map: &serde_json::Map<String, Value>) -> Shape {
    match kind {
        Kind::Open(o) => match o.get("kind").and_then(Value::as_str) {
            Some("composite") => Shape::Composite,
            Some("tabular") => Shape::Tabular,
            _ => Shape::Other,
        },
        Kind::Declared(t) if t == COMPOSITE || t.ends_with("CompositeDataSupport") => {
            Shape::Composite
        }
        Kind::Declared(t) if t == TABULAR || t.ends_with("TabularDataSupport") => Shape::Tabular,
        // Other declared objects (maps, beans) are not open data.
        Kind::Declared(_) => Shape::Other,
        // Inside open data everything is open data: a table if it has
        // the full form's shape, else a composite.
        Kind::Unknown if is_full_table(map) => Shape::Tabular,
        Kind::Unknown => Shape::Composite,
    }
}

fn is_full_table(map: &serde_json::Map<String, Value>) -> bool {
    map.len() == 2
        && map.get("indexNames").is_some_and(Value::is_array)
        && map.get("values").is_some_and(Value::is_array)
}

/// A composite: each item (in key order) with the attribute's name added
/// to the keys and the composite type's description.
impl Walk<'_> {
    fn composite(
        &mut self,
        at: &At<'_>,
        kind: Kind<'_>,
        map: &serde_json::Map<String, Value>,
    ) -> Result<(), Exceeded> {
        let items = match kind {
            Kind::Open(o) => o.get("items").and_then(Value::as_object),
            _ => None,
        };
        let description = match kind {
            Kind::Open(o) => o.get("desc").and_then(Value::as_str),
            _ => at.description,
        };
        let mut keys = at.attr_keys.to_vec();
        keys.push(at.attr_name.to_string());
        let mut names: Vec<&String> = map.keys().collect();
        names.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
        for name in names {
            let item_kind = items
                .and_then(|i| i.get(name.as_str()))
                .map_or(Kind::Unknown, Kind::Open);
            let child = At {
                properties: Cow::Borrowed(&at.properties),
                attr_keys: Cow::Borrowed(&keys),
                attr_name: name,
                description,
                text_len: at.text_len + name.len() + 2,
            };
            self.visit(&child, item_kind, &map[name.as_str()])?;
        }
        Ok(())
    }
}

/// One row of a table: its index columns' values and its other columns.
struct Row<'v> {
    /// Owned where the value is a map's key (an MXBean map's `key`).
    index: Vec<(String, Cow<'v, Value>)>,
    columns: Vec<(String, &'v Value)>,
}

impl Walk<'_> {
    /// A table, row by row: each row's index columns become properties (a
    /// name already there gets `_` appended; a composite index one property
    /// per item, `index_item`), and its other columns are values, named after
    /// the column, except a column called `value`, which keeps the attribute's
    /// own name.
    fn tabular(
        &mut self,
        at: &At<'_>,
        kind: Kind<'_>,
        map: &serde_json::Map<String, Value>,
    ) -> Result<(), Exceeded> {
        let open = match kind {
            Kind::Open(o) => Some(o),
            _ => None,
        };
        let row_type = open.and_then(|o| o.get("rowType"));
        let items = row_type
            .and_then(|r| r.get("items"))
            .and_then(Value::as_object);
        let description = row_type
            .and_then(|r| r.get("desc"))
            .and_then(Value::as_str)
            .or(at.description);
        let index_names: Option<Vec<String>> = open.and_then(|o| o.get("index")).and_then(|i| {
            i.as_array().map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
        });
        let rows = rows(map, index_names.as_deref(), items);
        let mut extended = at.attr_keys.to_vec();
        extended.push(at.attr_name.to_string());
        for row in rows {
            let mut properties = at.properties.to_vec();
            for (index, value) in &row.index {
                let mut name = index.clone();
                let mut suffixes = 0;
                while properties.iter().any(|(k, _)| *k == name) && suffixes < 1000 {
                    name.push('_');
                    suffixes += 1;
                }
                match value.as_ref() {
                    Value::Object(key) => {
                        let mut items: Vec<&String> = key.keys().collect();
                        items.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
                        for item in items {
                            properties
                                .push((format!("{name}_{item}"), java_string(&key[item.as_str()])));
                        }
                    }
                    Value::Null => {}
                    other => properties.push((name, java_string(other))),
                }
            }
            let mut columns = row.columns;
            columns.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            for (column, value) in columns {
                let (keys, name): (&[String], &str) = if column.eq_ignore_ascii_case("value") {
                    (&at.attr_keys, at.attr_name)
                } else {
                    (&extended, &column)
                };
                let column_kind = items
                    .and_then(|i| i.get(column.as_str()))
                    .map_or(Kind::Unknown, Kind::Open);
                let child = At {
                    text_len: self.base_len
                        + properties_len(&properties)
                        + keys.iter().map(|k| k.len() + 2).sum::<usize>()
                        + name.len()
                        + 4,
                    properties: Cow::Borrowed(&properties),
                    attr_keys: Cow::Borrowed(keys),
                    attr_name: name,
                    description,
                };
                self.visit(&child, column_kind, value)?;
            }
        }
        Ok(())
    }
}

/// A table's rows from the forms Jolokia writes: `{"indexNames","values"}`
/// (any index), `{key: value}` for a table of `key` and `value` columns (an
/// MXBean's map), or maps nested by the index columns' values down to the
/// rows (`{"db": {"pool": "db", "active": 3}}`). Without the open type,
/// the nesting is told from the rows themselves: a row holds its index
/// columns, with the values its keys give.
fn rows<'v>(
    map: &'v serde_json::Map<String, Value>,
    index_names: Option<&[String]>,
    items: Option<&serde_json::Map<String, Value>>,
) -> Vec<Row<'v>> {
    if is_full_table(map) {
        let names: Vec<String> = map["indexNames"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        return map["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_object)
            .map(|row| split_row(row, &names))
            .collect();
    }
    let key_value_table = match items {
        Some(items) => items.len() == 2 && items.contains_key("key") && items.contains_key("value"),
        None => false,
    };
    if key_value_table {
        return mxbean_map_rows(map);
    }
    if let Some(names) = index_names {
        let mut rows = Vec::new();
        nested_rows(map, names, &mut rows);
        return rows;
    }
    // No open type: the shallowest nesting whose rows hold their keys.
    for depth in 1..=3 {
        if let Some(names) = index_at_depth(map, depth) {
            let mut rows = Vec::new();
            nested_rows(map, &names, &mut rows);
            return rows;
        }
    }
    mxbean_map_rows(map)
}

fn mxbean_map_rows(map: &serde_json::Map<String, Value>) -> Vec<Row<'_>> {
    map.iter()
        .map(|(k, v)| Row {
            index: vec![("key".to_string(), Cow::Owned(Value::String(k.clone())))],
            columns: vec![("value".to_string(), v)],
        })
        .collect()
}

fn split_row<'v>(row: &'v serde_json::Map<String, Value>, index: &[String]) -> Row<'v> {
    Row {
        index: index
            .iter()
            .filter_map(|n| row.get(n.as_str()).map(|v| (n.clone(), Cow::Borrowed(v))))
            .collect(),
        columns: row
            .iter()
            .filter(|(k, _)| !index.contains(k))
            .map(|(k, v)| (k.clone(), v))
            .collect(),
    }
}

fn nested_rows<'v>(
    map: &'v serde_json::Map<String, Value>,
    names: &[String],
    rows: &mut Vec<Row<'v>>,
) {
    if names.len() <= 1 {
        for row in map.values().filter_map(Value::as_object) {
            rows.push(split_row(row, names));
        }
        return;
    }
    // The outer index levels: rows further down hold those columns too.
    for inner in map.values().filter_map(Value::as_object) {
        nested_rows(inner, names, rows);
    }
}

/// The index columns of a table nested `depth` deep, if every row at that
/// depth holds, for each key on its path, a column with that value.
fn index_at_depth(map: &serde_json::Map<String, Value>, depth: usize) -> Option<Vec<String>> {
    let mut found: Option<Vec<String>> = None;
    check_rows(map, depth, &mut Vec::new(), &mut found).then_some(())?;
    found
}

/// Whether every row `depth` levels down names its path's keys in the
/// same columns (collected in `found`).
fn check_rows(
    map: &serde_json::Map<String, Value>,
    depth: usize,
    path: &mut Vec<String>,
    found: &mut Option<Vec<String>>,
) -> bool {
    for (key, value) in map {
        let Some(inner) = value.as_object() else {
            return false;
        };
        path.push(key.clone());
        let ok = if depth <= 1 {
            let columns: Option<Vec<String>> = path
                .iter()
                .map(|key| {
                    inner
                        .iter()
                        .find(|(_, v)| !v.is_object() && java_string(v) == *key)
                        .map(|(c, _)| c.clone())
                })
                .collect();
            match (columns, &*found) {
                (Some(c), None) => {
                    *found = Some(c);
                    true
                }
                (Some(c), Some(f)) => c == *f,
                (None, _) => false,
            }
        } else {
            check_rows(inner, depth - 1, path, found)
        };
        path.pop();
        if !ok {
            return false;
        }
    }
    true
}

/// `Object.toString()` of a JSON value, for a label.
pub(super) fn java_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => {
            let t = n.to_string();
            if t.contains(['.', 'e', 'E']) {
                t.parse().map(double_to_string).unwrap_or(t)
            } else {
                t
            }
        }
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

/// Epoch seconds of an ISO-8601 date as Jolokia writes one
/// (`2019-11-09T07:52:25.111Z`, `…+01:00`, `…+0100`).
pub fn iso_seconds(text: &str) -> Option<f64> {
    let (date, rest) = text.split_once('T')?;
    let mut d = date.split('-');
    let (y, m, day): (i64, i64, i64) = (
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
    );
    let zone_at = rest.find(['Z', '+', '-']).unwrap_or(rest.len());
    let (time, zone) = rest.split_at(zone_at);
    let mut t = time.split(':');
    let hours: i64 = t.next()?.parse().ok()?;
    let minutes: i64 = t.next()?.parse().ok()?;
    let seconds: f64 = t.next().unwrap_or("0").parse().ok()?;
    let offset_minutes = match zone {
        "" | "Z" => 0,
        z => {
            let sign = if z.starts_with('-') { -1 } else { 1 };
            let digits: String = z[1..].chars().filter(char::is_ascii_digit).collect();
            if digits.len() < 4 {
                return None;
            }
            sign * (digits[..2].parse::<i64>().ok()? * 60 + digits[2..4].parse::<i64>().ok()?)
        }
    };
    // Days since the epoch (proleptic Gregorian, civil from days).
    let (y, m) = if m <= 2 { (y - 1, m + 12) } else { (y, m) };
    let era_days = 365 * y + y / 4 - y / 100 + y / 400 + (153 * (m - 3) + 2) / 5 + day - 719469;
    let whole = era_days * 86400 + hours * 3600 + minutes * 60 - offset_minutes * 60;
    Some(whole as f64 + seconds)
}

#[cfg(test)]
mod tests;
