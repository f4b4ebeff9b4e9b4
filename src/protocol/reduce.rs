//! Fleet answers: jmxgate's own extension of the protocol. A `read` item
//! sent to a selector may carry `"reduce"`, and then gets one answer about
//! the group instead of one value per target:
//!
//! ```json
//! {"type": "read", "mbean": "java.lang:type=Memory", "attribute": "HeapMemoryUsage",
//!  "target": {"url": "env=prod"}, "reduce": {"op": "top", "n": 5, "path": "used"}}
//! ```
//!
//! answered with `{"result": …, "count": N, "errors": {target: error}}`.
//! [`Reduce`] is the request's part (parsed by the gateway, written by the
//! client); [`Folder`] folds the targets' answers one by one as they
//! arrive, holding only what the result needs (a number, `n` entries, the
//! groups), never the answers; [`Reduced`] reads the result back.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::{Attributes, Command, ProtocolError, Read, Response};

/// What to make of the targets' values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Sum,
    Min,
    Max,
    Avg,
    Count,
    /// The `n` largest values.
    Top(usize),
    /// The `n` smallest values.
    Bottom(usize),
    /// Each distinct value with the targets that answered it.
    Group,
}

/// Most entries `top` and `bottom` may ask for.
pub const MAX_RANKED: usize = 10_000;

/// A reduction, as an item's `reduce` field says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reduce {
    pub op: Op,
    /// An inner path into each target's value (after the item's own
    /// `path`), in Jolokia's path syntax.
    pub path: Option<String>,
}

impl Reduce {
    pub fn new(op: Op) -> Reduce {
        Reduce { op, path: None }
    }

    /// Parses an item's `reduce`; errors say what is wrong and what is
    /// accepted.
    pub fn from_raw(raw: &RawValue) -> Result<Reduce, ProtocolError> {
        let bad = |why: String| ProtocolError::bad_request(format!("Invalid \"reduce\": {why}"));
        let fields: Map<String, Value> = serde_json::from_str(raw.get())
            .map_err(|_| bad("it must be an object with an \"op\"".into()))?;
        for key in fields.keys() {
            if !matches!(key.as_str(), "op" | "n" | "path" | "by") {
                return Err(bad(format!(
                    "unknown field \"{key}\" (expected op, n, path, by)"
                )));
            }
        }
        let op = match fields.get("op") {
            Some(Value::String(op)) => op.as_str(),
            Some(_) => return Err(bad("\"op\" must be text".into())),
            None => return Err(bad("\"op\" is missing".into())),
        };
        let n = match fields.get("n") {
            None => None,
            Some(v) => match v.as_u64() {
                Some(n) if (1..=MAX_RANKED as u64).contains(&n) => Some(n as usize),
                _ => {
                    return Err(bad(format!(
                        "\"n\" must be a whole number from 1 to {MAX_RANKED}"
                    )))
                }
            },
        };
        let op = match op {
            "sum" => Op::Sum,
            "min" => Op::Min,
            "max" => Op::Max,
            "avg" => Op::Avg,
            "count" => Op::Count,
            "top" | "bottom" => {
                let n = n.ok_or_else(|| bad(format!("\"{op}\" needs \"n\", how many targets")))?;
                if op == "top" {
                    Op::Top(n)
                } else {
                    Op::Bottom(n)
                }
            }
            "group" => Op::Group,
            other => {
                return Err(bad(format!(
                    "unknown op \"{other}\" (sum, min, max, avg, count, top, bottom, group)"
                )))
            }
        };
        if n.is_some() && !matches!(op, Op::Top(_) | Op::Bottom(_)) {
            return Err(bad("\"n\" is for top and bottom only".into()));
        }
        match fields.get("by") {
            None => {}
            Some(Value::String(by)) if by == "value" && op == Op::Group => {}
            Some(_) => return Err(bad("\"by\" is \"value\", for group only".into())),
        }
        let path = match fields.get("path") {
            None | Some(Value::Null) => None,
            Some(Value::String(p)) if p.is_empty() => None,
            Some(Value::String(p)) => Some(p.clone()),
            Some(_) => return Err(bad("\"path\" must be text".into())),
        };
        Ok(Reduce { op, path })
    }

    /// The `reduce` field as a client sends it.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        let (name, n) = match self.op {
            Op::Sum => ("sum", None),
            Op::Min => ("min", None),
            Op::Max => ("max", None),
            Op::Avg => ("avg", None),
            Op::Count => ("count", None),
            Op::Top(n) => ("top", Some(n)),
            Op::Bottom(n) => ("bottom", Some(n)),
            Op::Group => ("group", None),
        };
        out.insert("op".into(), name.into());
        if let Some(n) = n {
            out.insert("n".into(), n.into());
        }
        if self.op == Op::Group {
            out.insert("by".into(), "value".into());
        }
        if let Some(p) = &self.path {
            out.insert("path".into(), p.clone().into());
        }
        Value::Object(out)
    }

    /// Whether a command can be reduced: reads only.
    pub fn check(&self, command: &Command) -> Result<Shape, ProtocolError> {
        match command {
            Command::Read(read) => Ok(Shape::of(read)),
            other => Err(ProtocolError::bad_request(format!(
                "\"reduce\" works on read items, not {}",
                other.type_name()
            ))),
        }
    }
}

/// How each target's value is laid out, from the read it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// One attribute of one MBean: the value itself.
    Single,
    /// Several attributes (`{attribute: value}`), or, for a pattern, the
    /// MBeans each with theirs (`{mbean: {attribute: value}}`): reduced
    /// per attribute.
    PerAttribute {
        pattern: bool,
        /// The attributes a read of one MBean named, each expected in
        /// every answer (empty for all attributes, and for a pattern,
        /// whose MBeans need not have them all).
        asked: Vec<String>,
    },
}

impl Shape {
    pub fn of(read: &Read) -> Shape {
        let pattern = read.mbean.is_pattern();
        match (&read.attribute, pattern) {
            (Attributes::One(_), false) => Shape::Single,
            (Attributes::Many(names), false) => Shape::PerAttribute {
                pattern,
                asked: names.clone(),
            },
            _ => Shape::PerAttribute {
                pattern,
                asked: Vec::new(),
            },
        }
    }
}

/// A number as exact as the agent wrote it: integers compare and add
/// exactly (a long beyond 2^53 stays itself), the rest as doubles.
#[derive(Debug, Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    fn of(value: &Value) -> Option<Num> {
        match value {
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => Some(Num::Int(i.into())),
                (_, Some(u)) => Some(Num::Int(u.into())),
                _ => n.as_f64().filter(|f| f.is_finite()).map(Num::Float),
            },
            // Jolokia writes some numbers (BigDecimal, longs on request)
            // as text.
            Value::String(s) => match s.trim().parse::<i128>() {
                Ok(i) => Some(Num::Int(i)),
                Err(_) => s
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite())
                    .map(Num::Float),
            },
            _ => None,
        }
    }

    fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }

    fn cmp(self, other: Num) -> Ordering {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => a.cmp(&b),
            (a, b) => a.as_f64().total_cmp(&b.as_f64()),
        }
    }
}

fn number_value(n: Num) -> Value {
    match n {
        Num::Int(i) => i64::try_from(i)
            .map(Value::from)
            .or_else(|_| u64::try_from(i).map(Value::from))
            .unwrap_or_else(|_| json!(i as f64)),
        Num::Float(f) => json!(f),
    }
}

/// Who answered a value: a target, and for a pattern read the MBean.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Answerer {
    target: String,
    mbean: Option<String>,
}

impl Answerer {
    fn to_json(&self) -> Value {
        match &self.mbean {
            None => Value::String(self.target.clone()),
            Some(m) => json!({"target": self.target, "mbean": m}),
        }
    }

    fn entry(&self, value: Value) -> Value {
        let mut out = Map::new();
        out.insert("target".into(), self.target.clone().into());
        if let Some(m) = &self.mbean {
            out.insert("mbean".into(), m.clone().into());
        }
        out.insert("value".into(), value);
        Value::Object(out)
    }
}

/// One ranked value, for min, max, top and bottom.
#[derive(Debug)]
struct Entry {
    num: Num,
    /// As the agent wrote it.
    value: Value,
    who: Answerer,
}

/// The fold of one attribute's values (or the single value's).
#[derive(Debug)]
enum Acc {
    Total {
        /// Exact while every value is an integer and the sum fits.
        exact: Option<i128>,
        float: f64,
    },
    Count,
    Ranked {
        keep: usize,
        largest_first: bool,
        entries: Vec<Entry>,
    },
    Groups(HashMap<String, (Value, Vec<Answerer>)>),
}

#[derive(Debug)]
struct Fold {
    acc: Acc,
    /// Values folded in.
    count: usize,
}

impl Fold {
    fn new(op: Op) -> Fold {
        let acc = match op {
            Op::Sum | Op::Avg => Acc::Total {
                exact: Some(0),
                float: 0.0,
            },
            Op::Count => Acc::Count,
            Op::Min => Acc::Ranked {
                keep: 1,
                largest_first: false,
                entries: Vec::new(),
            },
            Op::Max => Acc::Ranked {
                keep: 1,
                largest_first: true,
                entries: Vec::new(),
            },
            Op::Top(n) => Acc::Ranked {
                keep: n,
                largest_first: true,
                entries: Vec::new(),
            },
            Op::Bottom(n) => Acc::Ranked {
                keep: n,
                largest_first: false,
                entries: Vec::new(),
            },
            Op::Group => Acc::Groups(HashMap::new()),
        };
        Fold { acc, count: 0 }
    }

    /// Folds one value in, or says why it can't be. A JSON `null` is a
    /// value for count and group (an attribute can be null), never a
    /// number.
    fn add(&mut self, who: Answerer, value: Value) -> Result<(), Problem> {
        let num = || Num::of(&value).ok_or_else(|| not_a_number(&value));
        match &mut self.acc {
            Acc::Total { exact, float } => {
                let n = num()?;
                *float += n.as_f64();
                *exact = match (*exact, n) {
                    (Some(sum), Num::Int(i)) => sum.checked_add(i),
                    _ => None,
                };
            }
            Acc::Count => {}
            Acc::Ranked {
                keep,
                largest_first,
                entries,
            } => {
                let num = num()?;
                entries.push(Entry { num, value, who });
                // Sorted and cut now and then: at most twice `keep` held.
                if entries.len() >= 2 * *keep + 16 {
                    rank(entries, *largest_first);
                    entries.truncate(*keep);
                }
            }
            Acc::Groups(groups) => {
                let key = value.to_string();
                groups
                    .entry(key)
                    .or_insert_with(|| (value, Vec::new()))
                    .1
                    .push(who);
            }
        }
        self.count += 1;
        Ok(())
    }

    fn finish(self, op: Op) -> Value {
        match self.acc {
            Acc::Total { exact, float } => match op {
                Op::Avg if self.count == 0 => Value::Null,
                Op::Avg => json!(float / self.count as f64),
                _ => exact.map_or_else(|| json!(float), |e| number_value(Num::Int(e))),
            },
            Acc::Count => Value::from(self.count),
            Acc::Ranked {
                keep,
                largest_first,
                mut entries,
            } => {
                rank(&mut entries, largest_first);
                entries.truncate(keep);
                let mut ranked = entries.into_iter().map(|e| e.who.entry(e.value));
                match op {
                    Op::Min | Op::Max => ranked.next().unwrap_or(Value::Null),
                    _ => Value::Array(ranked.collect()),
                }
            }
            Acc::Groups(groups) => {
                let mut groups: Vec<(String, Value, Vec<Answerer>)> =
                    groups.into_iter().map(|(k, (v, w))| (k, v, w)).collect();
                // Most targets first, then by the value's JSON text.
                groups.sort_by(|a, b| b.2.len().cmp(&a.2.len()).then_with(|| a.0.cmp(&b.0)));
                Value::Array(
                    groups
                        .into_iter()
                        .map(|(_, value, mut who)| {
                            who.sort();
                            json!({"value": value, "targets": who.iter().map(Answerer::to_json).collect::<Vec<_>>()})
                        })
                        .collect(),
                )
            }
        }
    }
}

/// Best first: by value (largest or smallest first), ties by target name,
/// then MBean.
fn rank(entries: &mut [Entry], largest_first: bool) {
    entries.sort_by(|a, b| {
        let by_value = a.num.cmp(b.num);
        let by_value = if largest_first {
            by_value.reverse()
        } else {
            by_value
        };
        by_value.then_with(|| a.who.cmp(&b.who))
    });
}

/// Why a value went unused: a kind (`error_type`) and what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Problem {
    error_type: String,
    error: String,
}

impl Problem {
    fn new(error_type: &str, error: impl Into<String>) -> Problem {
        Problem {
            error_type: error_type.into(),
            error: error.into(),
        }
    }
}

fn not_a_number(value: &Value) -> Problem {
    if value.is_null() {
        return Problem::new("jmxgate.NotANumber", "Not a number: the value is null");
    }
    // A composite (or a list): what a path may pick, the same words for
    // every target whatever its numbers.
    match value {
        Value::Object(map) if !map.is_empty() => {
            const SHOWN: usize = 8;
            let mut keys: Vec<&str> = map.keys().take(SHOWN).map(String::as_str).collect();
            if map.len() > SHOWN {
                keys.push("…");
            }
            return Problem::new(
                "jmxgate.NotANumber",
                format!(
                    "Not a number: an object with keys {}; a path picks one (e.g. \"{}\")",
                    keys.join(", "),
                    keys[0]
                ),
            );
        }
        Value::Array(items) => {
            return Problem::new(
                "jmxgate.NotANumber",
                format!(
                    "Not a number: a list of {} values; a path picks one by index (e.g. \"0\")",
                    items.len()
                ),
            );
        }
        _ => {}
    }
    let mut shown = value.to_string();
    if shown.len() > 60 {
        let mut cut = 60;
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        shown.truncate(cut);
        shown.push('…');
    }
    Problem::new("jmxgate.NotANumber", format!("Not a number: {shown}"))
}

/// An agent's error in place of a value, in a read with `ignoreErrors`:
/// an object with `".error": true` (2.x), or `"ERROR: … (class …)"` text
/// (1.x); `mbean_level` also takes the gateway's `"ERROR: …"` for a
/// pattern's MBean whose read failed. As `(error_type, error)`.
fn agent_error(value: &Value, mbean_level: bool) -> Option<(String, String)> {
    match value {
        Value::Object(o) if o.get(".error") == Some(&Value::Bool(true)) => {
            let text = |key: &str| o.get(key).and_then(Value::as_str).map(str::to_string);
            Some((
                text("error_type").unwrap_or_else(|| "jmxgate.Unreadable".into()),
                text("error").unwrap_or_else(|| "no error message".into()),
            ))
        }
        Value::String(s) => {
            let rest = s.strip_prefix("ERROR: ")?;
            match rest
                .strip_suffix(')')
                .and_then(|r| r.rsplit_once(" (class "))
            {
                Some((message, class)) => Some((class.to_string(), message.to_string())),
                None if mbean_level => Some(("jmxgate.Unreadable".into(), rest.to_string())),
                None => None,
            }
        }
        _ => None,
    }
}

fn unreadable((error_type, message): (String, String)) -> Problem {
    Problem {
        error_type,
        error: format!("Could not be read: {message}"),
    }
}

/// The value at an inner path: object keys, or array indexes.
fn at_path(value: Value, path: &[String]) -> Result<Value, Problem> {
    let no_path = |why: String| Problem::new("jmxgate.NoSuchPath", why);
    let mut here = value;
    for segment in path {
        here = match here {
            Value::Object(mut map) => map
                .remove(segment)
                .ok_or_else(|| no_path(format!("No \"{segment}\" in the value")))?,
            Value::Array(mut items) => match segment.parse::<usize>() {
                Ok(i) if i < items.len() => items.swap_remove(i),
                _ => return Err(no_path(format!("No element \"{segment}\" in the list"))),
            },
            other => {
                return Err(no_path(format!(
                    "No \"{segment}\" in the value: it is {}",
                    kind_of(&other)
                )))
            }
        };
    }
    Ok(here)
}

/// [`at_path`] on an answer's raw text: each step finds its member or
/// element by skipping over the others, and only the value at the end is
/// built. A large answer folded for one number costs no tree.
fn raw_at_path(raw: &RawValue, path: &[String]) -> Result<Value, Problem> {
    let no_path = |why: String| Problem::new("jmxgate.NoSuchPath", why);
    let mut here = raw;
    for segment in path {
        here = match here.get().trim_start().as_bytes().first() {
            Some(b'{') => {
                let mut de = serde_json::Deserializer::from_str(here.get());
                serde::de::DeserializeSeed::deserialize(Step::Member(segment), &mut de)
                    .map_err(|e| unreadable_value(&e))?
                    .ok_or_else(|| no_path(format!("No \"{segment}\" in the value")))?
            }
            Some(b'[') => {
                let missing = || no_path(format!("No element \"{segment}\" in the list"));
                let index = segment.parse::<usize>().map_err(|_| missing())?;
                let mut de = serde_json::Deserializer::from_str(here.get());
                serde::de::DeserializeSeed::deserialize(Step::Element(index), &mut de)
                    .map_err(|e| unreadable_value(&e))?
                    .ok_or_else(missing)?
            }
            _ => {
                let scalar = parse_raw(here)?;
                return Err(no_path(format!(
                    "No \"{segment}\" in the value: it is {}",
                    kind_of(&scalar)
                )));
            }
        };
    }
    parse_raw(here)
}

fn parse_raw(raw: &RawValue) -> Result<Value, Problem> {
    serde_json::from_str(raw.get()).map_err(|e| unreadable_value(&e))
}

fn unreadable_value(e: &serde_json::Error) -> Problem {
    Problem::new(
        "jmxgate.Unreadable",
        format!("The agent's value could not be read: {e}"),
    )
}

/// One step of [`raw_at_path`]: an object's member (the last one, when a
/// key is given twice, as a parsed map keeps) or a list's element.
enum Step<'p> {
    Member(&'p str),
    Element(usize),
}

impl<'de> serde::de::DeserializeSeed<'de> for Step<'_> {
    type Value = Option<&'de RawValue>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        match self {
            Step::Member(_) => d.deserialize_map(self),
            Step::Element(_) => d.deserialize_seq(self),
        }
    }
}

impl<'de> serde::de::Visitor<'de> for Step<'_> {
    type Value = Option<&'de RawValue>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object or list")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let Step::Member(wanted) = self else {
            return Err(serde::de::Error::custom("a list was expected"));
        };
        let mut found = None;
        while let Some(is_it) = map.next_key_seed(KeyIs(wanted))? {
            if is_it {
                found = Some(map.next_value::<&'de RawValue>()?);
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(found)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let Step::Element(wanted) = self else {
            return Err(serde::de::Error::custom("an object was expected"));
        };
        let mut at = 0;
        let mut found = None;
        loop {
            if at == wanted {
                found = seq.next_element::<&'de RawValue>()?;
                if found.is_none() {
                    break;
                }
            } else if seq.next_element::<serde::de::IgnoredAny>()?.is_none() {
                break;
            }
            at += 1;
        }
        Ok(found)
    }
}

/// Whether an object's key is the wanted one, without keeping it.
struct KeyIs<'p>(&'p str);

impl<'de> serde::de::DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl serde::de::Visitor<'_> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<bool, E> {
        Ok(key == self.0)
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Most problems listed under one target's `attributes` (the summary in
/// its `error` counts them all).
pub const MAX_LISTED_PROBLEMS: usize = 20;

/// A problem and where in a target's value it was: which attribute, and
/// for a pattern read which MBean (neither for a single value).
#[derive(Debug)]
struct Placed {
    attribute: Option<String>,
    mbean: Option<String>,
    problem: Problem,
}

impl Placed {
    fn whole(problem: Problem) -> Placed {
        Placed {
            attribute: None,
            mbean: None,
            problem,
        }
    }

    /// "Name of m: …", "Name: …", "m: …" or the problem alone.
    fn describe(&self) -> String {
        let at = match (&self.attribute, &self.mbean) {
            (Some(a), Some(m)) => format!("{a} of {m}: "),
            (Some(a), None) => format!("{a}: "),
            (None, Some(m)) => format!("{m}: "),
            (None, None) => String::new(),
        };
        format!("{at}{}", self.problem.error)
    }

    fn to_json(&self) -> Value {
        let mut out = Map::new();
        if let Some(a) = &self.attribute {
            out.insert("attribute".into(), a.clone().into());
        }
        if let Some(m) = &self.mbean {
            out.insert("mbean".into(), m.clone().into());
        }
        out.insert("error_type".into(), self.problem.error_type.clone().into());
        out.insert("error".into(), self.problem.error.clone().into());
        Value::Object(out)
    }
}

/// A target's entry under `errors` for what it answered but could not be
/// used: the first problem (and how many more) as `error_type` and
/// `error`; per attribute, each problem under `attributes` too.
fn problems_entry(problems: &[Placed], per_attribute: bool) -> Value {
    let first = &problems[0];
    let more = match problems.len() {
        1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    let mut out = Map::new();
    out.insert("error_type".into(), first.problem.error_type.clone().into());
    out.insert("error".into(), format!("{}{more}", first.describe()).into());
    out.insert("status".into(), 400.into());
    if per_attribute {
        out.insert(
            "attributes".into(),
            problems
                .iter()
                .take(MAX_LISTED_PROBLEMS)
                .map(Placed::to_json)
                .collect(),
        );
    }
    Value::Object(out)
}

/// The targets' answers to one reduced item, folded as they arrive.
#[derive(Debug)]
pub struct Folder {
    op: Op,
    path: Vec<String>,
    shape: Shape,
    single: Fold,
    by_attribute: BTreeMap<String, Fold>,
    /// Each target that gave nothing usable (or, per attribute, not
    /// everything), with its error object.
    errors: Vec<(String, Value)>,
    /// The latest of the answers' timestamps.
    pub timestamp: u64,
}

impl Folder {
    pub fn new(reduce: &Reduce, shape: Shape) -> Folder {
        Folder {
            op: reduce.op,
            path: reduce
                .path
                .as_deref()
                .map(super::path::split)
                .unwrap_or_default(),
            shape,
            single: Fold::new(reduce.op),
            by_attribute: BTreeMap::new(),
            errors: Vec::new(),
            timestamp: 0,
        }
    }

    /// Folds in one target's answer: its value, or its error. A value
    /// that is missing or that the agent could not read is listed under
    /// `errors`, never folded in.
    pub fn add(&mut self, target: &str, answer: &Response) {
        self.timestamp = self.timestamp.max(answer.timestamp().unwrap_or(0));
        if answer.is_error() {
            self.errors.push((target.to_string(), error_object(answer)));
            return;
        }
        let per_attribute = !matches!(self.shape, Shape::Single);
        let problems = match (answer.get("value"), &self.shape) {
            (None, _) => vec![Placed::whole(Problem::new(
                "jmxgate.NoValue",
                "The agent's answer has no value",
            ))],
            // One number per target: only what the path leads to is
            // parsed, the rest of the answer skipped over.
            (Some(raw), Shape::Single) => {
                let who = Answerer {
                    target: target.to_string(),
                    mbean: None,
                };
                match raw_at_path(raw, &self.path).and_then(|v| self.single.add(who, v)) {
                    Ok(()) => Vec::new(),
                    Err(problem) => vec![Placed::whole(problem)],
                }
            }
            (Some(raw), Shape::PerAttribute { pattern, .. }) => {
                let pattern = *pattern;
                match serde_json::from_str::<Value>(raw.get()) {
                    Ok(value) => self.add_per_attribute(target, value, pattern),
                    Err(e) => vec![Placed::whole(unreadable_value(&e))],
                }
            }
        };
        if !problems.is_empty() {
            self.errors
                .push((target.to_string(), problems_entry(&problems, per_attribute)));
        }
    }

    fn add_per_attribute(&mut self, target: &str, value: Value, pattern: bool) -> Vec<Placed> {
        let mut problems = Vec::new();
        let Value::Object(outer) = value else {
            return vec![Placed::whole(Problem::new(
                "jmxgate.NoSuchPath",
                format!("Expected attributes, got {}", kind_of(&value)),
            ))];
        };
        let beans: Vec<(Option<String>, Value)> = if pattern {
            outer.into_iter().map(|(m, v)| (Some(m), v)).collect()
        } else {
            vec![(None, Value::Object(outer))]
        };
        for (mbean, attributes) in beans {
            let Value::Object(attributes) = attributes else {
                // A pattern's MBean whose read failed, with ignoreErrors.
                let problem = match agent_error(&attributes, true) {
                    Some(e) => unreadable(e),
                    None => Problem::new(
                        "jmxgate.NoSuchPath",
                        format!("Expected attributes, got {}", kind_of(&attributes)),
                    ),
                };
                problems.push(Placed {
                    attribute: None,
                    mbean,
                    problem,
                });
                continue;
            };
            // An attribute the read named that the answer lacks.
            if let Shape::PerAttribute { asked, .. } = &self.shape {
                for name in asked.iter().filter(|a| !attributes.contains_key(*a)) {
                    self.by_attribute
                        .entry(name.clone())
                        .or_insert_with(|| Fold::new(self.op));
                    problems.push(Placed {
                        attribute: Some(name.clone()),
                        mbean: mbean.clone(),
                        problem: Problem::new("jmxgate.NoValue", "Missing from the agent's answer"),
                    });
                }
            }
            for (attribute, v) in attributes {
                let fold = self
                    .by_attribute
                    .entry(attribute.clone())
                    .or_insert_with(|| Fold::new(self.op));
                let folded = match agent_error(&v, false) {
                    Some(e) => Err(unreadable(e)),
                    None => {
                        let who = Answerer {
                            target: target.to_string(),
                            mbean: mbean.clone(),
                        };
                        at_path(v, &self.path).and_then(|v| fold.add(who, v))
                    }
                };
                if let Err(problem) = folded {
                    problems.push(Placed {
                        attribute: Some(attribute),
                        mbean: mbean.clone(),
                        problem,
                    });
                }
            }
        }
        problems
    }

    /// The answer's value: `{"result", "count", "errors"}`; per attribute,
    /// `result` and `count` are keyed by attribute.
    pub fn finish(mut self) -> Value {
        // By target name, whatever order the answers came in.
        self.errors.sort_by(|a, b| a.0.cmp(&b.0));
        let errors: Map<String, Value> = self.errors.into_iter().collect();
        let (result, count) = match self.shape {
            Shape::Single => {
                let count = self.single.count;
                (self.single.finish(self.op), Value::from(count))
            }
            Shape::PerAttribute { .. } => {
                let mut results = Map::new();
                let mut counts = Map::new();
                for (attribute, fold) in self.by_attribute {
                    counts.insert(attribute.clone(), Value::from(fold.count));
                    results.insert(attribute, fold.finish(self.op));
                }
                (Value::Object(results), Value::Object(counts))
            }
        };
        json!({"result": result, "count": count, "errors": errors})
    }
}

/// A failed answer as a fan-out reports it: `error_type`, `error`,
/// `status`.
fn error_object(answer: &Response) -> Value {
    let mut out = Map::new();
    for key in ["error_type", "error", "status"] {
        if let Some(v) = answer
            .get(key)
            .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
        {
            out.insert(key.into(), v);
        }
    }
    Value::Object(out)
}

/// A reduced answer's value, as a client reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reduced {
    /// A number (sum, avg, count), an entry (min, max), a list of entries
    /// (top, bottom) or of groups (group); per attribute, keyed by
    /// attribute.
    pub result: Value,
    /// Values folded in (per attribute: keyed by attribute).
    pub count: Value,
    /// Each target that gave nothing usable (per attribute: not
    /// everything), with its error object.
    #[serde(default)]
    pub errors: BTreeMap<String, TargetError>,
}

/// One target's error in a reduced answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetError {
    #[serde(default)]
    pub status: Option<u16>,
    #[serde(default)]
    pub error_type: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
    /// Per attribute: each attribute (and for a pattern read, MBean) that
    /// gave no usable value, up to [`MAX_LISTED_PROBLEMS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<AttributeError>,
}

/// One attribute's problem in a target's error, per attribute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttributeError {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribute: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mbean: Option<String>,
    #[serde(default)]
    pub error_type: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
}

/// An entry of min, max, top and bottom.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ranked {
    pub target: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mbean: Option<String>,
    pub value: Value,
}

/// A group: a value and who answered it (target names; for a pattern
/// read, `{"target", "mbean"}` objects).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grouped {
    pub value: Value,
    pub targets: Vec<Value>,
}

impl Reduced {
    /// The result of sum, avg and count.
    pub fn number(&self) -> Option<f64> {
        self.result.as_f64()
    }

    /// The entries of min and max (one) and of top and bottom.
    pub fn ranked(&self) -> Option<Vec<Ranked>> {
        match &self.result {
            Value::Array(_) => serde_json::from_value(self.result.clone()).ok(),
            Value::Object(o) if o.contains_key("target") => {
                serde_json::from_value(self.result.clone())
                    .ok()
                    .map(|r| vec![r])
            }
            _ => None,
        }
    }

    /// The groups of group.
    pub fn groups(&self) -> Option<Vec<Grouped>> {
        serde_json::from_value(self.result.clone()).ok()
    }

    /// Values folded in, for a single attribute.
    pub fn counted(&self) -> Option<u64> {
        self.count.as_u64()
    }
}

#[cfg(test)]
mod tests;
