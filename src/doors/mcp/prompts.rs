//! The MCP prompts: the common fleet questions as templates an assistant
//! (or its user, from a prompt menu) fills in. Each prompt renders to one
//! user message that states the question and the exact tool calls that
//! answer it, with their arguments as JSON, so an assistant runs them
//! rather than guesses at MBean names. Pure: which targets the caller may
//! see is asked through a closure; nothing here reads the fleet or an
//! agent.

use std::time::{Duration, SystemTime};

use rmcp::model::{Prompt, PromptArgument, PromptMessage, Role};
use serde_json::{json, Map, Value};

use super::tools::ToolName;
use crate::protocol::object_name::ObjectName;
use crate::protocol::reduce::MAX_RANKED;

/// The prompts, in the order `prompts/list` shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptName {
    HighestHeap,
    ThreadsAcrossGroup,
    WhatChangedSince,
    InspectAttribute,
}

/// The longest argument value a prompt takes (a target selector, an
/// ObjectName): longer is a mistake, and it would be echoed back.
const MAX_ARGUMENT_CHARS: usize = 512;

/// The most `what_changed_since` ranks by start time.
const RESTARTS_RANKED: usize = 20;

impl PromptName {
    pub const ALL: [PromptName; 4] = [
        PromptName::HighestHeap,
        PromptName::ThreadsAcrossGroup,
        PromptName::WhatChangedSince,
        PromptName::InspectAttribute,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PromptName::HighestHeap => "highest_heap",
            PromptName::ThreadsAcrossGroup => "threads_across_group",
            PromptName::WhatChangedSince => "what_changed_since",
            PromptName::InspectAttribute => "inspect_attribute",
        }
    }

    pub fn parse(name: &str) -> Option<PromptName> {
        PromptName::ALL.into_iter().find(|p| p.as_str() == name)
    }

    fn title(self) -> &'static str {
        match self {
            PromptName::HighestHeap => "Which JVMs use the most heap?",
            PromptName::ThreadsAcrossGroup => "How many threads run across a group?",
            PromptName::WhatChangedSince => "Which JVMs restarted or changed since a time?",
            PromptName::InspectAttribute => "What does an attribute's value say?",
        }
    }

    fn description(self) -> &'static str {
        match self {
            PromptName::HighestHeap => {
                "Rank the JVMs of a group by heap in use, and compare each with its maximum."
            }
            PromptName::ThreadsAcrossGroup => {
                "Total the live threads of a group's JVMs, and name the JVMs with the most."
            }
            PromptName::WhatChangedSince => {
                "Find the JVMs of a group that started after a time (restarts, new pods), and \
                 which Java versions run where."
            }
            PromptName::InspectAttribute => {
                "Read one MBean's attributes on one JVM and explain what the values say about \
                 its health."
            }
        }
    }

    /// The arguments, as (name, description, required). `target`, `mbean`
    /// and `attribute` are completed (`completion/complete`).
    fn arguments(self) -> &'static [(&'static str, &'static str, bool)] {
        const GROUP: (&str, &str, bool) = (
            "target",
            "The group: a glob over target names (`kafka-*`), labels (`env=prod`), or `*` for \
             every JVM you may reach (the default).",
            false,
        );
        match self {
            PromptName::HighestHeap => &[GROUP, ("n", "How many JVMs to rank (default 5).", false)],
            PromptName::ThreadsAcrossGroup => &[GROUP],
            PromptName::WhatChangedSince => &[
                (
                    "since",
                    "A time (RFC 3339, `2026-11-27T08:00:00Z`) or how long ago (`2h`, `30m`, \
                     `1day`).",
                    true,
                ),
                GROUP,
            ],
            PromptName::InspectAttribute => &[
                (
                    "target",
                    "One target's name, as list_targets shows it.",
                    true,
                ),
                (
                    "mbean",
                    "The MBean's ObjectName, e.g. `java.lang:type=Memory`.",
                    true,
                ),
                (
                    "attribute",
                    "One attribute's name; omit for all of the MBean's readable attributes.",
                    false,
                ),
            ],
        }
    }

    pub fn prompt(self) -> Prompt {
        let arguments = self
            .arguments()
            .iter()
            .map(|(name, description, required)| {
                PromptArgument::new(*name)
                    .with_description(*description)
                    .with_required(*required)
            })
            .collect();
        Prompt::new(self.as_str(), Some(self.description()), Some(arguments))
            .with_title(self.title())
    }

    /// Whether the prompt takes an argument so named (what
    /// `completion/complete` may be asked about).
    pub fn takes(self, argument: &str) -> bool {
        self.arguments()
            .iter()
            .any(|(name, _, _)| *name == argument)
    }

    /// Whether `target` of this prompt names one target (else a group).
    pub fn one_target(self) -> bool {
        self == PromptName::InspectAttribute
    }
}

/// A prompt's arguments that can't be used: said to the caller as an
/// invalid-params error it can act on.
#[derive(Debug, Clone, PartialEq)]
pub struct BadPromptArguments(pub String);

/// A rendered prompt: its message text and the tool calls it names (kept
/// apart for tests and the audit note).
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    pub description: String,
    pub text: String,
    pub calls: Vec<(ToolName, Value)>,
}

impl Rendered {
    pub fn message(&self) -> PromptMessage {
        PromptMessage::new_text(Role::User, self.text.clone())
    }
}

/// What the caller may see, asked by `render`: how many of the targets
/// the caller reaches a selector matches (an error for a bad selector),
/// and whether the caller reaches the one target so named.
pub trait Visible {
    fn matching(&self, selector: &str) -> Result<usize, String>;
    fn reaches(&self, name: &str) -> bool;
}

/// Renders a prompt for its arguments (all strings, as MCP sends them).
/// `now` dates `since` given as a duration.
pub fn render(
    prompt: PromptName,
    given: Option<&Map<String, Value>>,
    visible: &dyn Visible,
    now: SystemTime,
) -> Result<Rendered, BadPromptArguments> {
    let empty = Map::new();
    let given = Given {
        prompt,
        values: given.unwrap_or(&empty),
        visible,
    };
    if let Some(unknown) = given.values.keys().find(|k| !prompt.takes(k)) {
        let takes: Vec<&str> = prompt.arguments().iter().map(|a| a.0).collect();
        return Err(given.bad(format!(
            "no argument {:?}; it takes {}",
            cut(unknown),
            takes.join(", ")
        )));
    }
    match prompt {
        PromptName::HighestHeap => highest_heap(&given),
        PromptName::ThreadsAcrossGroup => threads_across_group(&given),
        PromptName::WhatChangedSince => what_changed_since(&given, now),
        PromptName::InspectAttribute => inspect_attribute(&given),
    }
}

/// A prompt's arguments, each read and checked where the prompt needs it.
struct Given<'a> {
    prompt: PromptName,
    values: &'a Map<String, Value>,
    visible: &'a dyn Visible,
}

impl Given<'_> {
    /// An error naming the prompt.
    fn bad(&self, what: String) -> BadPromptArguments {
        BadPromptArguments(format!("{}: {what}", self.prompt.as_str()))
    }

    /// An argument's text, trimmed; `None` when absent or blank.
    fn text(&self, key: &str) -> Result<Option<String>, BadPromptArguments> {
        match self.values.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
            Some(Value::String(s)) if s.chars().count() > MAX_ARGUMENT_CHARS => Err(self.bad(
                format!("`{key}` is longer than {MAX_ARGUMENT_CHARS} characters"),
            )),
            Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
            // Clients send strings; a number for `n` is meant all the same.
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(_) => Err(self.bad(format!("`{key}` must be a string"))),
        }
    }

    fn required(&self, key: &str) -> Result<String, BadPromptArguments> {
        self.text(key)?
            .ok_or_else(|| self.bad(format!("`{key}` is required")))
    }

    /// `n`: how many JVMs to rank (5 unless given).
    fn ranked(&self) -> Result<usize, BadPromptArguments> {
        match self.text("n")? {
            None => Ok(5),
            Some(n) => n
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=MAX_RANKED).contains(n))
                .ok_or_else(|| {
                    self.bad(format!("`n` must be a whole number from 1 to {MAX_RANKED}"))
                }),
        }
    }

    /// `target` as a group (`*` unless given): a selector that matches
    /// some target the caller may see.
    fn group(&self) -> Result<String, BadPromptArguments> {
        let target = self.text("target")?.unwrap_or_else(|| "*".into());
        // fleet_summary answers for groups; one JVM is read_attributes'.
        if !target.contains(['*', '?', '=']) {
            return Err(self.bad(format!(
                "`target` {:?} is one target's name; give a selector for a group \
                 (`orders-*`, `env=prod`, `*`), or use inspect_attribute for one JVM",
                cut(&target)
            )));
        }
        match self.visible.matching(&target) {
            Err(e) => Err(self.bad(format!("`target` {e}"))),
            Ok(0) => Err(self.bad(format!(
                "`target` {:?} matches no target you may reach; list_targets shows them",
                cut(&target)
            ))),
            Ok(_) => Ok(target),
        }
    }

    /// `target` as one target the caller reaches (one it doesn't reads
    /// as one that doesn't exist).
    fn one_target(&self) -> Result<String, BadPromptArguments> {
        let target = self.required("target")?;
        if !self.visible.reaches(&target) {
            return Err(self.bad(format!(
                "no target {:?} that you may reach; list_targets shows them",
                cut(&target)
            )));
        }
        Ok(target)
    }

    /// `mbean` as one MBean's name (not a pattern).
    fn one_mbean(&self) -> Result<String, BadPromptArguments> {
        let mbean = self.required("mbean")?;
        let parsed = ObjectName::parse(&mbean).map_err(|e| {
            self.bad(format!(
                "`mbean` {:?} is not an ObjectName ({e})",
                cut(&mbean)
            ))
        })?;
        if parsed.is_pattern() {
            return Err(self.bad(format!(
                "`mbean` {:?} is a pattern; give one MBean's name",
                cut(&mbean)
            )));
        }
        Ok(mbean)
    }
}

fn highest_heap(given: &Given) -> Result<Rendered, BadPromptArguments> {
    let n = given.ranked()?;
    let target = given.group()?;
    let rank = json!({
        "target": target, "mbean": "java.lang:type=Memory",
        "attribute": "HeapMemoryUsage", "path": "used", "op": "top", "n": n
    });
    let limits = json!({
        "target": target, "mbean": "java.lang:type=Memory",
        "attributes": ["HeapMemoryUsage"]
    });
    let text = format!(
        "Which {n} JVMs in `{target}` use the most heap, and how close is each to its \
         maximum?\n\n\
         1. Rank them by heap in use:\n{}\n\
         2. Read each one's heap limits (`max` is -1 where the heap has no limit; then \
         compare with `committed`):\n{}\n\
         Answer with a table (JVM, heap used in MiB, heap max in MiB, used as a share of \
         max), the highest first; name any JVM above 80 % of its maximum, and any JVM \
         the summary lists under `errors` with its reason.",
        call(ToolName::FleetSummary, &rank),
        call(ToolName::ReadAttributes, &limits),
    );
    Ok(Rendered {
        description: format!("The {n} JVMs using the most heap in {target}"),
        text,
        calls: vec![
            (ToolName::FleetSummary, rank),
            (ToolName::ReadAttributes, limits),
        ],
    })
}

fn threads_across_group(given: &Given) -> Result<Rendered, BadPromptArguments> {
    let target = given.group()?;
    let sum = json!({
        "target": target, "mbean": "java.lang:type=Threading",
        "attribute": "ThreadCount", "op": "sum"
    });
    let top = json!({
        "target": target, "mbean": "java.lang:type=Threading",
        "attribute": "ThreadCount", "op": "top", "n": 5
    });
    let peak = json!({
        "target": target, "mbean": "java.lang:type=Threading",
        "attribute": "PeakThreadCount", "op": "max"
    });
    let text = format!(
        "How many threads run across `{target}`, and which JVMs run the most?\n\n\
         1. The total of live threads:\n{}\n\
         2. The five JVMs with the most:\n{}\n\
         3. The highest peak any JVM reached since it started:\n{}\n\
         Answer with the total, how many JVMs answered (`count`), the five with the most \
         threads, and the peak; name the JVMs listed under `errors`, with their reasons.",
        call(ToolName::FleetSummary, &sum),
        call(ToolName::FleetSummary, &top),
        call(ToolName::FleetSummary, &peak),
    );
    Ok(Rendered {
        description: format!("Threads across {target}"),
        text,
        calls: vec![
            (ToolName::FleetSummary, sum),
            (ToolName::FleetSummary, top),
            (ToolName::FleetSummary, peak),
        ],
    })
}

fn what_changed_since(given: &Given, now: SystemTime) -> Result<Rendered, BadPromptArguments> {
    let since =
        since_of(&given.required("since")?, now).map_err(|e| given.bad(format!("`since` {e}")))?;
    let since_ms = since
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let since_text = humantime::format_rfc3339_seconds(since);
    let target = given.group()?;
    let starts = json!({
        "target": target, "mbean": "java.lang:type=Runtime",
        "attribute": "StartTime", "op": "top", "n": RESTARTS_RANKED
    });
    let versions = json!({
        "target": target, "mbean": "java.lang:type=Runtime",
        "attribute": "VmVersion", "op": "group"
    });
    let health = json!({ "selector": target });
    let text = format!(
        "Which JVMs in `{target}` started after {since_text}, and which Java versions \
         run where?\n\n\
         1. The most recent start times ({RESTARTS_RANKED} at most; `StartTime` counts \
         milliseconds since 1970): every JVM whose value is above {since_ms} started \
         after {since_text}:\n{}\n\
         2. The Java versions, and which JVMs run each:\n{}\n\
         3. The JVMs' health now:\n{}\n\
         Answer with the JVMs that started after {since_text} (with their start times \
         in UTC), the versions and where each runs, and any JVM that is down or did \
         not answer. If all {RESTARTS_RANKED} ranked JVMs started after then, say more \
         may have.",
        call(ToolName::FleetSummary, &starts),
        call(ToolName::FleetSummary, &versions),
        call(ToolName::ListTargets, &health),
    );
    Ok(Rendered {
        description: format!("What changed in {target} since {since_text}"),
        text,
        calls: vec![
            (ToolName::FleetSummary, starts),
            (ToolName::FleetSummary, versions),
            (ToolName::ListTargets, health),
        ],
    })
}

fn inspect_attribute(given: &Given) -> Result<Rendered, BadPromptArguments> {
    let target = given.one_target()?;
    let mbean = given.one_mbean()?;
    let attribute = given.text("attribute")?;
    let describe = json!({ "target": target, "mbean": mbean });
    let mut read = json!({ "target": target, "mbean": mbean });
    if let Some(a) = &attribute {
        read["attributes"] = json!([a]);
    }
    let what = attribute
        .as_deref()
        .map_or_else(|| "the attributes".to_string(), |a| format!("`{a}`"));
    let text = format!(
        "What does {what} of `{mbean}` on `{target}` say about that JVM?\n\n\
         1. What the MBean offers (types, descriptions):\n{}\n\
         2. The values:\n{}\n\
         Explain each value in plain words (units, what is normal, what would be a \
         warning sign), and say which values you could not read and why.",
        call(ToolName::DescribeMbean, &describe),
        call(ToolName::ReadAttributes, &read),
    );
    Ok(Rendered {
        description: format!("{what} of {mbean} on {target}"),
        text,
        calls: vec![
            (ToolName::DescribeMbean, describe),
            (ToolName::ReadAttributes, read),
        ],
    })
}

/// One tool call as the message shows it: the tool's name, then its
/// arguments as a JSON block.
fn call(tool: ToolName, arguments: &Value) -> String {
    format!(
        "   Call `{}` with:\n```json\n{}\n```\n",
        tool.as_str(),
        serde_json::to_string_pretty(arguments).expect("JSON values serialise")
    )
}

/// `since` as a time: RFC 3339 (a date alone is its midnight UTC), or a
/// duration before `now`.
fn since_of(given: &str, now: SystemTime) -> Result<SystemTime, String> {
    if let Ok(d) = humantime::parse_duration(given) {
        return now
            .checked_sub(d)
            .ok_or_else(|| format!("{given:?} reaches before 1970"));
    }
    let as_time = if given.len() == 10 {
        format!("{given}T00:00:00Z")
    } else {
        given.to_string()
    };
    let at = humantime::parse_rfc3339_weak(&as_time).map_err(|_| {
        format!(
            "{:?} is neither a time (`2026-11-27T08:00:00Z`) nor a duration (`2h`, `1day`)",
            cut(given)
        )
    })?;
    if at > now + Duration::from_secs(60) {
        return Err(format!("{given:?} is in the future"));
    }
    Ok(at)
}

/// A caller's text, cut for an error message.
fn cut(s: &str) -> String {
    s.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fleet(&'static [&'static str]);

    impl Visible for Fleet {
        fn matching(&self, selector: &str) -> Result<usize, String> {
            if selector.starts_with('=') {
                return Err("has no label name".into());
            }
            let prefix = selector.trim_end_matches('*');
            Ok(self.0.iter().filter(|n| n.starts_with(prefix)).count())
        }
        fn reaches(&self, name: &str) -> bool {
            self.0.contains(&name)
        }
    }

    const FLEET: Fleet = Fleet(&["orders-1", "orders-2", "billing-1"]);

    fn args(pairs: &[(&str, &str)]) -> Map<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect()
    }

    fn now() -> SystemTime {
        humantime::parse_rfc3339("2026-11-27T12:00:00Z").unwrap()
    }

    #[test]
    fn every_prompt_is_listed_with_its_arguments() {
        for p in PromptName::ALL {
            let listed = p.prompt();
            assert_eq!(PromptName::parse(&listed.name), Some(p));
            assert!(listed.description.is_some() && listed.title.is_some());
            assert!(!listed.arguments.unwrap().is_empty());
        }
        assert_eq!(PromptName::parse("nope"), None);
    }

    #[test]
    fn highest_heap_names_the_calls_that_answer_it() {
        let r = render(
            PromptName::HighestHeap,
            Some(&args(&[("target", "orders-*"), ("n", "2")])),
            &FLEET,
            now(),
        )
        .unwrap();
        assert_eq!(r.calls[0].0, ToolName::FleetSummary);
        assert_eq!(r.calls[0].1["n"], 2);
        assert_eq!(r.calls[0].1["target"], "orders-*");
        // The message holds each call's arguments as JSON.
        let shown = serde_json::to_string_pretty(&r.calls[0].1).unwrap();
        assert!(r.text.contains(&shown), "{}", r.text);
        // Defaults: every target, five.
        let r = render(PromptName::HighestHeap, None, &FLEET, now()).unwrap();
        assert_eq!(r.calls[0].1["target"], "*");
        assert_eq!(r.calls[0].1["n"], 5);
    }

    #[test]
    fn a_group_prompt_takes_a_selector_not_a_name() {
        let r = render(
            PromptName::ThreadsAcrossGroup,
            Some(&args(&[("target", "orders-1")])),
            &FLEET,
            now(),
        );
        assert!(r.unwrap_err().0.contains("one target's name"));
    }

    #[test]
    fn bad_arguments_say_what_is_wrong() {
        let bad = |p, pairs: &[(&str, &str)]| render(p, Some(&args(pairs)), &FLEET, now());
        let said = |r: Result<Rendered, BadPromptArguments>| r.unwrap_err().0;
        assert!(said(bad(PromptName::HighestHeap, &[("n", "0")])).contains("from 1 to"));
        assert!(said(bad(PromptName::HighestHeap, &[("n", "many")])).contains("whole number"));
        assert!(said(bad(PromptName::HighestHeap, &[("x", "1")])).contains("no argument \"x\""));
        assert!(said(bad(PromptName::HighestHeap, &[("target", "shop-*")]))
            .contains("matches no target you may reach"));
        assert!(said(bad(PromptName::HighestHeap, &[("target", "=x")])).contains("no label"));
        assert!(said(bad(PromptName::WhatChangedSince, &[])).contains("`since` is required"));
        assert!(
            said(bad(PromptName::WhatChangedSince, &[("since", "yesterday")]))
                .contains("neither a time")
        );
        assert!(said(bad(
            PromptName::WhatChangedSince,
            &[("since", "2027-01-01")]
        ))
        .contains("in the future"));
        assert!(said(bad(
            PromptName::InspectAttribute,
            &[("target", "payments-1"), ("mbean", "java.lang:type=Memory")]
        ))
        .contains("no target \"payments-1\" that you may reach"));
        assert!(said(bad(
            PromptName::InspectAttribute,
            &[("target", "orders-1"), ("mbean", "java.lang:type=*")]
        ))
        .contains("is a pattern"));
        let long = "x".repeat(MAX_ARGUMENT_CHARS + 1);
        assert!(
            said(bad(PromptName::ThreadsAcrossGroup, &[("target", &long)])).contains("longer than")
        );
    }

    #[test]
    fn since_is_a_time_or_a_duration_before_now() {
        let at = |s| since_of(s, now()).map(|t| humantime::format_rfc3339_seconds(t).to_string());
        assert_eq!(at("2h").unwrap(), "2026-11-27T10:00:00Z");
        assert_eq!(at("1day").unwrap(), "2026-11-26T12:00:00Z");
        assert_eq!(at("2026-11-27T08:30:00Z").unwrap(), "2026-11-27T08:30:00Z");
        assert_eq!(at("2026-11-20").unwrap(), "2026-11-20T00:00:00Z");
        let r = render(
            PromptName::WhatChangedSince,
            Some(&args(&[("since", "2h")])),
            &FLEET,
            now(),
        )
        .unwrap();
        let ms = humantime::parse_rfc3339("2026-11-27T10:00:00Z")
            .unwrap()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis();
        assert!(r.text.contains(&ms.to_string()), "{}", r.text);
    }

    #[test]
    fn inspect_attribute_reads_one_or_all() {
        let r = render(
            PromptName::InspectAttribute,
            Some(&args(&[
                ("target", "orders-1"),
                ("mbean", "java.lang:type=Memory"),
                ("attribute", "HeapMemoryUsage"),
            ])),
            &FLEET,
            now(),
        )
        .unwrap();
        assert_eq!(r.calls[1].1["attributes"], json!(["HeapMemoryUsage"]));
        let r = render(
            PromptName::InspectAttribute,
            Some(&args(&[
                ("target", "orders-1"),
                ("mbean", "java.lang:type=Memory"),
            ])),
            &FLEET,
            now(),
        )
        .unwrap();
        assert!(r.calls[1].1.get("attributes").is_none());
    }
}
