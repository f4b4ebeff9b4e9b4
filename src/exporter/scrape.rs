//! One target's scrape, as jmx_exporter's scraper does it over JMX, done
//! over Jolokia in two round trips: the agent's `list` (through the
//! gateway's shared list cache) says which MBeans there are and their
//! attributes' types, descriptions and open types; a [`Plan`] made from it
//! once per module and list (cached by the door until the list changes)
//! says what to read; one bulk of reads fetches the values, and
//! [`Plan::apply`] turns the answers into samples.
//!
//! As jmx_exporter: the MBeans `includeObjectNames` selects minus those
//! `excludeObjectNames` names, their readable attributes minus those
//! `excludeObjectNameAttributes` lists (only those
//! `includeObjectNameAttributes` lists when it is set), never the Runtime
//! MBean's class paths and system properties nor the flight recorder's.
//! Dates are read as epoch milliseconds (`path=time`), exactly.
//!
//! Which rule a value matches, and the name, labels and help it gives, is
//! worked out once per place (MBean, keys, attribute) and kept in the plan:
//! a later scrape reuses it while the value's text is the same, or always
//! when no rule tried looked at the value (no rules, `cache: true`).

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use serde_json::{json, Value};

use super::limits::{Exceeded, Limits, Ticker};
use super::rules::{BeanValue, Leaf, Mapping, Module, Outcome, Sample};
use super::values::{describe_gc_info, platform_open_type, Found, Kind, Walk};
use crate::protocol::{ObjectName, ProtocolError, Request};

/// What to read of one target for one module.
#[derive(Debug, Default)]
pub struct Plan {
    pub beans: Vec<PlannedBean>,
    /// Each value's mapping from earlier scrapes, by where it was found.
    mappings: Mutex<HashMap<Place, Remembered>>,
    /// About the bytes the beans take, and the mappings (updated as they
    /// are remembered): what a cache of plans weighs them by.
    beans_bytes: usize,
    mappings_bytes: AtomicUsize,
    /// Beans whose read failed whole (an agent that can't serialise one
    /// attribute fails them all): read attribute by attribute since, so
    /// only that one is lost, as jmx_exporter loses it.
    split: Mutex<HashSet<usize>>,
    /// Attributes that failed when read alone, and how: not asked for
    /// again while the plan holds (the MBeans are the same), counted in
    /// every scrape.
    failing: Mutex<HashMap<(usize, usize), AttributeError>>,
}

/// Where a value was found: the bean, its attribute (`dates` after
/// `attributes`) and the value's position among that attribute's leaves.
type Place = (u32, u32, u32);

/// A mapping made at a place, and what it was made for.
#[derive(Debug)]
struct Remembered {
    /// The leaf's properties, keys, name and attribute labels, hashed: a
    /// table that grew a row moves values to other positions.
    leaf: u64,
    /// The value's text, when the mapping depends on it.
    value: Option<String>,
    mapping: Mapping,
}

#[derive(Debug)]
pub struct PlannedBean {
    /// The name as the agent lists it (keys in registration order).
    pub name: String,
    pub domain: String,
    pub properties: Vec<(String, String)>,
    /// Read together, one request.
    pub attributes: Vec<PlannedAttribute>,
    /// `java.util.Date` attributes, each read as `path=time`.
    pub dates: Vec<PlannedAttribute>,
    /// The `metricCustomizers` entry that applies, by index.
    pub customizer: Option<usize>,
}

impl PlannedBean {
    fn heap_bytes(&self) -> usize {
        let attributes: usize = self
            .attributes
            .iter()
            .chain(&self.dates)
            .map(|a| {
                std::mem::size_of::<PlannedAttribute>()
                    + a.name.capacity()
                    + a.type_name.capacity()
                    + a.description.as_ref().map_or(0, String::capacity)
                    // The open type's JSON tree: a few times its text.
                    + a.open_type.as_ref().map_or(0, |t| 4 * t.to_string().len())
            })
            .sum();
        std::mem::size_of::<PlannedBean>()
            + self.name.capacity()
            + self.domain.capacity()
            + self
                .properties
                .iter()
                .map(|(k, v)| k.capacity() + v.capacity() + 48)
                .sum::<usize>()
            + attributes
    }
}

#[derive(Debug)]
pub struct PlannedAttribute {
    pub name: String,
    pub type_name: String,
    pub description: Option<String>,
    /// Jolokia 2.x's `openType` for MXBean attributes.
    pub open_type: Option<Value>,
    /// Declared so broadly (`java.lang.Object`) that it may hold a number
    /// or a whole object graph: read apart, its answer's depth bounded.
    pub bounded: bool,
}

/// What one request of a plan reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// A bean's attributes (index into `beans`).
    Attributes(usize),
    /// A bean's date attribute (bean, attribute index into `dates`).
    Date(usize, usize),
    /// A bean's broadly declared attributes, read apart with the depth of
    /// their answer bounded; folded into `Attributes` by
    /// [`Plan::assemble`].
    Bounded(usize),
    /// One attribute of a bean read attribute by attribute (bean, index
    /// into `attributes`); folded into `Attributes` too.
    Attribute(usize, usize),
}

/// The processing options of a read of broadly declared attributes: a
/// number is one level deep, an object graph is cut where it starts.
const BOUNDED: [(&str, &str); 3] = [
    ("ignoreErrors", "true"),
    ("maxDepth", "2"),
    ("maxObjects", "1000"),
];

/// One of a plan's reads, as the protocol's typed request (no target yet);
/// an MBean name an agent listed that is no valid one fails at its index.
pub type PlannedRead = Result<Request, ProtocolError>;

/// `request` with each of `params` set.
fn with_params(request: PlannedRead, params: &[(&str, &str)]) -> PlannedRead {
    params
        .iter()
        .try_fold(request?, |r, (key, value)| r.with_param(key, value))
}

/// How one target's scrape went.
#[derive(Debug, Default)]
pub struct Scraped {
    pub samples: Vec<Sample>,
    /// Attributes the caller's policy let no one read.
    pub denied: usize,
    /// Attributes or MBeans the agent could not read.
    pub failed: usize,
    /// Attributes the agent says the MBean does not support (a memory
    /// pool's thresholds) or are write-only: not a failure.
    pub unsupported: usize,
    /// Samples left out for carrying a label name twice.
    pub duplicate_labels: usize,
    /// Values matched against the rules in this scrape; the others reused
    /// an earlier scrape's mapping.
    pub mapped: usize,
    /// Values left out because the text their rules would be matched
    /// against is longer than `match_length_limit`.
    pub too_long: usize,
    /// Values a rule wants as a number that were not one (OpenTelemetry
    /// rules: text, a boolean, an object where a number should be).
    pub not_numeric: usize,
    /// The bound the scrape went over, where it stopped; its samples are
    /// then not to be used.
    pub exceeded: Option<Exceeded>,
    /// What the samples so far would take in an exposition, about.
    bytes: usize,
    /// The metric names seen so far (their HELP and TYPE lines count once).
    families: std::collections::HashSet<String>,
}

impl Scraped {
    /// Takes a sample if it keeps within `limits`: how many, how many
    /// labels (the target's own counted), how long each name and value,
    /// how much text they all make.
    pub(crate) fn admit(&mut self, s: Sample, limits: &Limits) -> Result<(), Exceeded> {
        if self.samples.len() >= limits.sample_limit {
            return Err(Exceeded::Samples(limits.sample_limit));
        }
        if s.labels.len() + 1 > limits.label_limit {
            return Err(Exceeded::Labels(limits.label_limit));
        }
        if s.name.len() > limits.name_length_limit
            || s.labels
                .iter()
                .any(|(k, _)| k.len() > limits.name_length_limit)
        {
            return Err(Exceeded::NameLength(limits.name_length_limit));
        }
        if s.labels
            .iter()
            .any(|(_, v)| v.len() > limits.label_value_length_limit)
        {
            return Err(Exceeded::LabelValueLength(limits.label_value_length_limit));
        }
        // A sample line: the name, each label quoted, a value of up to
        // 24 characters; HELP and TYPE once per name.
        let mut line = s.name.len() + 32;
        line += s
            .labels
            .iter()
            .map(|(k, v)| k.len() + v.len() + 4)
            .sum::<usize>();
        if !self.families.contains(&s.name) {
            line += 3 * s.name.len() + s.help.len() + 32;
            self.families.insert(s.name.clone());
        }
        self.bytes += line;
        if self.bytes > limits.body_size_limit {
            return Err(Exceeded::BodySize(limits.body_size_limit));
        }
        self.samples.push(s);
        Ok(())
    }
}

impl Plan {
    /// The plan for `list`, an agent's `list` answer's value (domains,
    /// then key property lists in registration order, then `attr`).
    pub fn from_list(module: &Module, list: &Value) -> Plan {
        let mut beans = Vec::new();
        let Some(domains) = list.as_object() else {
            return Plan::default();
        };
        for (domain, names) in domains {
            let Some(names) = names.as_object() else {
                continue;
            };
            for (keys, info) in names {
                let full = format!("{domain}:{keys}");
                let Ok(name) = ObjectName::parse(&full) else {
                    continue;
                };
                if let Some(bean) = plan_bean(module, &name, info) {
                    beans.push(bean);
                }
            }
        }
        Plan::of_beans(beans)
    }

    /// A plan that reads these beans' attributes, for rules that chose
    /// them themselves (OpenTelemetry's).
    pub fn of_beans(beans: Vec<PlannedBean>) -> Plan {
        let beans_bytes = beans.iter().map(PlannedBean::heap_bytes).sum();
        Plan {
            beans,
            mappings: Mutex::default(),
            beans_bytes,
            mappings_bytes: AtomicUsize::new(0),
            split: Mutex::default(),
            failing: Mutex::default(),
        }
    }

    /// About how much memory the plan holds now: its beans, and the
    /// mappings scrapes have remembered in it so far.
    pub fn estimated_bytes(&self) -> u32 {
        let bytes = self.beans_bytes + self.mappings_bytes.load(Ordering::Relaxed);
        u32::try_from(bytes).unwrap_or(u32::MAX)
    }

    /// The read requests, typed, without a target, with what each
    /// reads: per bean, its attributes in one read (the broadly declared
    /// ones in another), or one read per attribute once its bean's read
    /// failed whole (attributes known to fail left out); each date apart.
    pub fn reads(&self) -> Vec<(Read, PlannedRead)> {
        let split = self.split.lock().unwrap_or_else(PoisonError::into_inner);
        let failing = self.failing.lock().unwrap_or_else(PoisonError::into_inner);
        let mut reads = Vec::new();
        for (b, bean) in self.beans.iter().enumerate() {
            if split.contains(&b) {
                for (a, attribute) in bean.attributes.iter().enumerate() {
                    if !failing.contains_key(&(b, a)) {
                        reads.push((Read::Attribute(b, a), self.read_one(bean, attribute)));
                    }
                }
            } else {
                for (read, broad) in [(Read::Attributes(b), false), (Read::Bounded(b), true)] {
                    let names: Vec<&str> = bean
                        .attributes
                        .iter()
                        .filter(|a| a.bounded == broad)
                        .map(|a| a.name.as_str())
                        .collect();
                    if names.is_empty() {
                        continue;
                    }
                    let params: &[(&str, &str)] = if broad { &BOUNDED } else { &BOUNDED[..1] };
                    let request = Request::read_many(&bean.name, &names);
                    reads.push((read, with_params(request, params)));
                }
            }
            for (d, date) in bean.dates.iter().enumerate() {
                // A date is read as its milliseconds.
                let request =
                    Request::read(&bean.name, Some(&date.name)).map(|r| r.at_path("time"));
                reads.push((Read::Date(b, d), request));
            }
        }
        reads
    }

    fn read_one(&self, bean: &PlannedBean, attribute: &PlannedAttribute) -> PlannedRead {
        let read = Request::read(&bean.name, Some(&attribute.name));
        if attribute.bounded {
            with_params(read, &BOUNDED)
        } else {
            read
        }
    }

    /// The beans whose read (of all their attributes, or of the broadly
    /// declared ones) failed whole in `answers`, not for the caller's
    /// policy: from now on read attribute by attribute. Their reads, to
    /// send now; the failed answers are then left out of what
    /// [`assemble`](Self::assemble) is given.
    pub fn split_failed(&self, answers: &[(Read, Value)]) -> Vec<(Read, PlannedRead)> {
        let failed: Vec<usize> = answers
            .iter()
            .filter_map(|(read, answer)| match read {
                Read::Attributes(b) | Read::Bounded(b) => {
                    let status = answer.get("status").and_then(Value::as_u64);
                    (status != Some(200) && status != Some(403)).then_some(*b)
                }
                _ => None,
            })
            .collect();
        if failed.is_empty() {
            return Vec::new();
        }
        self.split
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(failed.iter().copied());
        let mut reads = Vec::new();
        for b in failed {
            let bean = &self.beans[b];
            if reads
                .iter()
                .any(|(r, _)| matches!(r, Read::Attribute(x, _) if *x == b))
            {
                continue;
            }
            for (a, attribute) in bean.attributes.iter().enumerate() {
                reads.push((Read::Attribute(b, a), self.read_one(bean, attribute)));
            }
        }
        reads
    }

    /// The answers as [`apply`](Self::apply) takes them: a bean's
    /// attributes read apart (broadly declared, or one by one) folded into
    /// one `Attributes` answer, each attribute that failed alone an error
    /// in it (and remembered, so it is not asked for again), each known
    /// to fail one too. Failed whole-bean reads of split beans are left
    /// out.
    pub fn assemble(&self, answers: Vec<(Read, Value)>) -> Vec<(Read, Value)> {
        let split = self.split.lock().unwrap_or_else(PoisonError::into_inner);
        let mut failing = self.failing.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out: Vec<(Read, Value)> = Vec::with_capacity(answers.len());
        // Where each bean's `Attributes` answer is in `out`.
        let mut at: HashMap<usize, usize> = HashMap::new();
        let mut slot = |b: usize, out: &mut Vec<(Read, Value)>| -> usize {
            *at.entry(b).or_insert_with(|| {
                out.push((Read::Attributes(b), json!({"status": 200, "value": {}})));
                out.len() - 1
            })
        };
        for (read, answer) in answers {
            let ok = answer.get("status").and_then(Value::as_u64) == Some(200);
            match read {
                // Its attributes are being read one by one.
                Read::Attributes(b) | Read::Bounded(b) if split.contains(&b) && !ok => {}
                Read::Attributes(b) | Read::Bounded(b) => {
                    let i = slot(b, &mut out);
                    let Some(into) = out[i].1["value"].as_object_mut() else {
                        continue;
                    };
                    if ok {
                        if let Some(Value::Object(from)) = answer.get("value") {
                            into.extend(from.iter().map(|(k, v)| (k.clone(), v.clone())));
                        }
                    } else {
                        // Denied whole (or not split): each attribute it
                        // read fails in place.
                        let error = AttributeError::of_answer(&answer);
                        let broad = matches!(read, Read::Bounded(_));
                        for a in self.beans[b]
                            .attributes
                            .iter()
                            .filter(|a| a.bounded == broad)
                        {
                            into.insert(a.name.clone(), error.as_value());
                        }
                    }
                }
                Read::Date(..) => out.push((read, answer)),
                Read::Attribute(b, a) => {
                    let name = self.beans[b].attributes[a].name.clone();
                    let value = if ok {
                        answer.get("value").cloned().unwrap_or(Value::Null)
                    } else {
                        let error = AttributeError::of_answer(&answer);
                        if error != AttributeError::Denied {
                            failing.insert((b, a), error);
                        }
                        error.as_value()
                    };
                    let i = slot(b, &mut out);
                    if let Some(into) = out[i].1["value"].as_object_mut() {
                        into.insert(name, value);
                    }
                }
            }
        }
        // Attributes known to fail, not asked for: their error again.
        for (&(b, a), error) in failing.iter() {
            if split.contains(&b) {
                let i = slot(b, &mut out);
                let name = self.beans[b].attributes[a].name.clone();
                if let Some(into) = out[i].1["value"].as_object_mut() {
                    into.entry(name).or_insert_with(|| error.as_value());
                }
            }
        }
        out
    }

    /// The samples of the answers to [`reads`](Self::reads), each an
    /// answer object (`value` and `status`), in the same order, within
    /// `limits`: at the first bound exceeded it stops and says which
    /// (`Scraped::exceeded`).
    pub fn apply(&self, module: &Module, answers: &[(Read, Value)], limits: &Limits) -> Scraped {
        let mut scraped = Scraped::default();
        if let Err(e) = self.apply_within(module, answers, limits, &mut scraped) {
            scraped.exceeded = Some(e);
        }
        scraped
    }

    fn apply_within(
        &self,
        module: &Module,
        answers: &[(Read, Value)],
        limits: &Limits,
        scraped: &mut Scraped,
    ) -> Result<(), Exceeded> {
        let mut mappings = self.mappings.lock().unwrap_or_else(PoisonError::into_inner);
        let mut remembered = Remembering {
            mappings: &mut mappings,
            bytes: &self.mappings_bytes,
        };
        let mappings = &mut remembered;
        let mut ticker = Ticker::default();
        for (read, answer) in answers {
            ticker.tick(limits)?;
            let ok = answer.get("status").and_then(Value::as_u64) == Some(200);
            match *read {
                Read::Attributes(b) => {
                    let bean = &self.beans[b];
                    if !ok {
                        if answer.get("status").and_then(Value::as_u64) == Some(403) {
                            scraped.denied += bean.attributes.len();
                        } else {
                            scraped.failed += bean.attributes.len();
                        }
                        continue;
                    }
                    let values = answer.get("value").and_then(Value::as_object);
                    let customizer = bean.customizer.map(|c| &module.customizers[c]);
                    let attribute_labels: Vec<(String, String)> = customizer
                        .map(|c| {
                            c.attributes_as_labels
                                .iter()
                                .filter_map(|a| {
                                    let v = values?.get(a.as_str())?;
                                    (!v.is_null() && attribute_error(v).is_none())
                                        .then(|| (a.clone(), super::values::java_string(v)))
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    if let Some(c) = customizer {
                        for extra in &c.extra_metrics {
                            let leaf = Leaf {
                                domain: &bean.domain,
                                properties: &bean.properties,
                                attr_keys: &[],
                                attr_name: &extra.name,
                                description: extra.description.as_deref(),
                                value: &extra.value,
                                attribute_labels: &attribute_labels,
                            };
                            count(module.record(&leaf), scraped, limits)?;
                        }
                    }
                    for (a, attribute) in bean.attributes.iter().enumerate() {
                        let Some(value) = values.and_then(|v| v.get(attribute.name.as_str()))
                        else {
                            scraped.failed += 1;
                            continue;
                        };
                        match attribute_error(value) {
                            Some(AttributeError::Denied) => {
                                scraped.denied += 1;
                                continue;
                            }
                            Some(AttributeError::Failed) => {
                                scraped.failed += 1;
                                continue;
                            }
                            Some(AttributeError::Unsupported) => {
                                scraped.unsupported += 1;
                                continue;
                            }
                            None => {}
                        }
                        let kind = attribute
                            .open_type
                            .as_ref()
                            .map_or(Kind::Declared(&attribute.type_name), Kind::Open);
                        let mut k = 0u32;
                        let mut sink = |found: Found| {
                            let leaf = Leaf {
                                domain: &bean.domain,
                                properties: &found.properties,
                                attr_keys: &found.attr_keys,
                                attr_name: &found.attr_name,
                                description: found.description.as_deref(),
                                value: &found.value,
                                attribute_labels: &attribute_labels,
                            };
                            let place = (b as u32, a as u32, k);
                            k += 1;
                            record_at(module, mappings, place, &leaf, scraped, limits)
                        };
                        let mut walk = Walk::new(limits, &mut sink);
                        let walked = walk.attribute(
                            bean.domain.len(),
                            &bean.properties,
                            &attribute.name,
                            attribute.description.as_deref(),
                            kind,
                            value,
                        );
                        let too_long = walk.too_long;
                        walked?;
                        scraped.too_long += too_long;
                    }
                }
                // Folded into `Attributes` by `assemble`; alone, a read
                // of part of a bean's attributes.
                Read::Bounded(_) | Read::Attribute(..) => {}
                Read::Date(b, d) => {
                    let bean = &self.beans[b];
                    let date = &bean.dates[d];
                    if !ok {
                        match answer.get("status").and_then(Value::as_u64) {
                            Some(403) => scraped.denied += 1,
                            _ => scraped.failed += 1,
                        }
                        continue;
                    }
                    let Some(millis) = answer.get("value").and_then(Value::as_f64) else {
                        // Null: no date set; nothing to export.
                        continue;
                    };
                    let value = BeanValue::number(millis / 1000.0);
                    let leaf = Leaf {
                        domain: &bean.domain,
                        properties: &bean.properties,
                        attr_keys: &[],
                        attr_name: &date.name,
                        description: date.description.as_deref(),
                        value: &value,
                        attribute_labels: &[],
                    };
                    let place = (b as u32, (bean.attributes.len() + d) as u32, 0);
                    record_at(module, mappings, place, &leaf, scraped, limits)?;
                }
            }
        }
        Ok(())
    }
}

/// A leaf's sample through the mapping remembered at its place, made
/// (and remembered) when there is none that fits.
/// The plan's mappings while a scrape holds them, and the count of the
/// bytes they hold.
struct Remembering<'p> {
    mappings: &'p mut HashMap<Place, Remembered>,
    bytes: &'p AtomicUsize,
}

impl Remembering<'_> {
    fn insert(&mut self, place: Place, r: Remembered) {
        // The map's own entry, the mapping's strings, the value's text.
        let size = |r: &Remembered| {
            96 + r.mapping.heap_bytes() + r.value.as_ref().map_or(0, String::capacity)
        };
        self.bytes.fetch_add(size(&r), Ordering::Relaxed);
        if let Some(old) = self.mappings.insert(place, r) {
            self.bytes.fetch_sub(size(&old), Ordering::Relaxed);
        }
    }
}

fn record_at(
    module: &Module,
    mappings: &mut Remembering<'_>,
    place: Place,
    leaf: &Leaf<'_>,
    scraped: &mut Scraped,
    limits: &Limits,
) -> Result<(), Exceeded> {
    let identity = {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (
            leaf.properties,
            leaf.attr_keys,
            leaf.attr_name,
            leaf.attribute_labels,
        )
            .hash(&mut h);
        h.finish()
    };
    let text = leaf.value.java_text();
    if let Some(r) = mappings.mappings.get(&place) {
        let fits = r.leaf == identity
            && (r.mapping.value_independent || r.value.as_deref() == Some(&*text));
        if fits {
            return count(r.mapping.sample(leaf.value), scraped, limits);
        }
    }
    // Matching rules is the costly part, and one value's rules can take
    // long (backtracking): the clock is read before each rule.
    let mapping = module
        .mapping_until(leaf, limits.deadline)
        .ok_or(Exceeded::Deadline)?;
    scraped.mapped += 1;
    let counted = count(mapping.sample(leaf.value), scraped, limits);
    let value = (!mapping.value_independent).then(|| text.into_owned());
    mappings.insert(
        place,
        Remembered {
            leaf: identity,
            value,
            mapping,
        },
    );
    counted
}

fn count(outcome: Outcome, scraped: &mut Scraped, limits: &Limits) -> Result<(), Exceeded> {
    match outcome {
        Outcome::Sample(s) => return scraped.admit(s, limits),
        Outcome::DuplicateLabel(_) => scraped.duplicate_labels += 1,
        Outcome::Nothing => {}
    }
    Ok(())
}

/// Attributes jmx_exporter never reads: costly and unexported.
fn skipped(name: &ObjectName, attribute: &str) -> bool {
    let canonical = name.canonical_str();
    (canonical == "java.lang:type=Runtime"
        && [
            "SystemProperties",
            "ClassPath",
            "BootClassPath",
            "LibraryPath",
        ]
        .iter()
        .any(|a| a.eq_ignore_ascii_case(attribute)))
        || canonical == "jdk.management.jfr:type=FlightRecorder"
}

fn plan_bean(module: &Module, name: &ObjectName, info: &Value) -> Option<PlannedBean> {
    let included = module.include.is_empty() || module.include.iter().any(|p| p.matches(name));
    if !included || module.exclude.iter().any(|p| p.matches(name)) {
        return None;
    }
    let canonical = name.canonical();
    let excluded = module.exclude_attributes.get(&canonical);
    let only =
        (!module.include_attributes.is_empty()).then(|| module.include_attributes.get(&canonical));
    let customizer = module
        .customizers
        .iter()
        .position(|c| c.applies(name.domain(), name.properties()));
    let labels_from: &[String] = customizer
        .map(|c| module.customizers[c].attributes_as_labels.as_slice())
        .unwrap_or(&[]);
    let mut attributes = Vec::new();
    let mut dates = Vec::new();
    for (attr, a) in info
        .get("attr")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        // 2.x says whether it is readable; 1.x lists readable ones only.
        if a.get("r").and_then(Value::as_bool) == Some(false)
            || skipped(name, attr)
            || excluded.is_some_and(|x| x.contains(attr))
            || only.is_some_and(|set| !set.is_some_and(|s| s.contains(attr)))
        {
            continue;
        }
        let type_name = a
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let for_label = labels_from.contains(attr);
        let has_open_type = a.get("openType").is_some_and(|t| !t.is_null());
        // Arrays are never exported; other types that never hold what
        // jmx_exporter exports (a number, text, a boolean, a date, open
        // data) are not read at all, but for a label.
        let bounded = match exported_kind(&type_name, has_open_type) {
            Some(bounded) if !type_name.starts_with('[') => bounded,
            _ if for_label => true,
            _ => continue,
        };
        let planned = PlannedAttribute {
            name: attr.clone(),
            description: a.get("desc").and_then(Value::as_str).map(str::to_string),
            open_type: a
                .get("openType")
                .filter(|t| !t.is_null())
                .cloned()
                .or_else(|| platform_open_type(name.domain(), name.properties(), attr, &type_name))
                .map(|mut t| {
                    describe_gc_info(name.domain(), name.properties(), attr, &mut t);
                    t
                }),
            type_name,
            bounded,
        };
        if planned.type_name == "java.util.Date" {
            dates.push(planned);
        } else {
            attributes.push(planned);
        }
    }
    Some(PlannedBean {
        name: name.as_str().to_string(),
        domain: name.domain().to_string(),
        properties: name.properties().to_vec(),
        attributes,
        dates,
        customizer,
    })
}

/// Whether an attribute of this declared type can give what jmx_exporter
/// exports: `Some(false)` for the types that do (numbers, booleans, text,
/// dates, open data, and any MXBean attribute with an open type), `None`
/// for those that never do (names, collections), `Some(true)` for the
/// rest: `java.lang.Object`, which may hold a number, and other classes,
/// an enum among them (exported through a rule's `value`) or an object
/// graph (a Tomcat `managedResource`): read apart, their answer's depth
/// bounded, so no agent serialises a whole graph for a scrape.
pub(crate) fn exported_kind(type_name: &str, has_open_type: bool) -> Option<bool> {
    const EXPORTED: [&str; 26] = [
        "int",
        "long",
        "short",
        "byte",
        "double",
        "float",
        "boolean",
        "java.lang.Integer",
        "java.lang.Long",
        "java.lang.Short",
        "java.lang.Byte",
        "java.lang.Double",
        "java.lang.Float",
        "java.lang.Boolean",
        "java.lang.Number",
        "java.lang.String",
        "java.math.BigDecimal",
        "java.math.BigInteger",
        "java.util.Date",
        "java.util.concurrent.atomic.AtomicInteger",
        "java.util.concurrent.atomic.AtomicLong",
        "javax.management.openmbean.CompositeData",
        "javax.management.openmbean.TabularData",
        "javax.management.openmbean.CompositeDataSupport",
        "javax.management.openmbean.TabularDataSupport",
        "java.util.Optional",
    ];
    const NEVER: [&str; 8] = [
        "javax.management.ObjectName",
        "java.util.Map",
        "java.util.List",
        "java.util.Set",
        "java.util.Collection",
        "java.util.Properties",
        "java.util.HashMap",
        "java.util.ArrayList",
    ];
    if has_open_type || EXPORTED.contains(&type_name) {
        Some(false)
    } else if NEVER.contains(&type_name) || type_name.starts_with('[') {
        None
    } else {
        Some(true)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttributeError {
    /// The caller's policy denied reading it.
    Denied,
    /// The agent says the MBean doesn't support it
    /// (`UnsupportedOperationException`), or that it is write-only.
    Unsupported,
    Failed,
}

const UNSUPPORTED: &str = "java.lang.UnsupportedOperationException";

impl AttributeError {
    fn of(message: &str, class: &str) -> AttributeError {
        if class == "java.lang.SecurityException" && message.contains("is forbidden") {
            AttributeError::Denied
        } else if class == UNSUPPORTED
            || (class == "javax.management.AttributeNotFoundException"
                && message.contains("Write-only attribute"))
        {
            // Not supported by the MBean, or write-only (1.x lists those
            // as if readable): never readable, so no failure.
            AttributeError::Unsupported
        } else {
            AttributeError::Failed
        }
    }

    /// How a failed answer to a read of one attribute failed.
    fn of_answer(answer: &Value) -> AttributeError {
        if answer.get("status").and_then(Value::as_u64) == Some(403) {
            return AttributeError::Denied;
        }
        let text = |k: &str| answer.get(k).and_then(Value::as_str).unwrap_or("");
        AttributeError::of(text("error"), text("error_type"))
    }

    /// The error as a read with `ignoreErrors` writes it in place (2.x).
    fn as_value(self) -> Value {
        let (class, error) = match self {
            AttributeError::Denied => ("java.lang.SecurityException", "Reading is forbidden"),
            AttributeError::Unsupported => (UNSUPPORTED, "Not supported"),
            AttributeError::Failed => ("java.lang.Exception", "Could not be read"),
        };
        json!({".error": true, "error_type": class, "error": error})
    }
}

/// An attribute's error in a read with `ignoreErrors`: an object with
/// `.error` (2.x) or `"ERROR: … (class …)"` text (1.x).
pub(crate) fn attribute_error(v: &Value) -> Option<AttributeError> {
    let (message, class) = match v {
        Value::Object(o) if o.get(".error").and_then(Value::as_bool) == Some(true) => (
            o.get("error").and_then(Value::as_str).unwrap_or(""),
            o.get("error_type").and_then(Value::as_str).unwrap_or(""),
        ),
        Value::String(s)
            if s.starts_with("ERROR: ") && s.ends_with(')') && s.contains(" (class ") =>
        {
            let (m, c) = s.rsplit_once(" (class ")?;
            (m, c.trim_end_matches(')'))
        }
        _ => return None,
    };
    Some(AttributeError::of(message, class))
}

#[cfg(test)]
mod tests;
