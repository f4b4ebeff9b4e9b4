//! A tool call's arguments, checked and turned into an ordinary Jolokia
//! request item (a JSON object with a proxy-mode `target`), or a request
//! for access. Pure: no I/O, no gateway state.

use serde::Deserialize;
use serde_json::Value;

use super::tools::ToolName;
use crate::pipeline::parse::ParsedItem;
use crate::protocol::object_name::ObjectName;
use crate::protocol::path::escape_segment;
use crate::protocol::reduce::Reduce;
use crate::protocol::Request;

/// A tool call whose arguments were understood.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    ListTargets {
        selector: Option<String>,
    },
    /// `explain`: the item to judge for `target` (never sent).
    Explain {
        target: String,
        item: ParsedItem,
    },
    /// `request_access`.
    RequestAccess {
        role: String,
        duration: std::time::Duration,
        targets: Option<String>,
        reason: Option<String>,
    },
    /// `access_request_status`: one request, or the caller's recent ones.
    AccessStatus {
        id: Option<String>,
    },
    /// Everything else becomes one Jolokia item for `target`.
    Item {
        tool: ToolName,
        target: String,
        /// A selector rather than one target's name.
        fan_out: bool,
        /// The Jolokia item, typed (the protocol's own constructors).
        item: ParsedItem,
        /// `describe_mbean`'s ObjectName, to title the answer.
        mbean: Option<String>,
        /// `search_mbeans`: which page of its names (the first without a
        /// cursor).
        page: Option<super::page::Page>,
    },
}

/// The arguments of the access-request tools.
fn access_call(tool: ToolName, given: Value) -> Result<Call, BadArguments> {
    match tool {
        ToolName::RequestAccess => {
            let a: RequestAccessArgs = args(tool, given)?;
            nonempty(tool, "role", &a.role)?;
            let duration = humantime::parse_duration(a.duration.trim()).map_err(|e| {
                BadArguments(format!(
                    "{}: duration \"{}\" is not a duration like 30m ({e})",
                    tool.as_str(),
                    a.duration.chars().take(40).collect::<String>()
                ))
            })?;
            Ok(Call::RequestAccess {
                role: a.role,
                duration,
                targets: a.targets.filter(|t| !t.trim().is_empty()),
                reason: a.reason,
            })
        }
        ToolName::AccessRequestStatus => {
            let a: AccessStatusArgs = args(tool, given)?;
            Ok(Call::AccessStatus {
                id: a.id.filter(|i| !i.trim().is_empty()),
            })
        }
        _ => unreachable!("only the access-request tools"),
    }
}

/// Bad arguments: said to the assistant as a tool error it can act on.
#[derive(Debug, Clone, PartialEq)]
pub struct BadArguments(pub String);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestAccessArgs {
    role: String,
    duration: String,
    targets: Option<String>,
    reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AccessStatusArgs {
    id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListTargetsArgs {
    selector: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    target: String,
    pattern: Option<String>,
    cursor: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DescribeArgs {
    target: String,
    mbean: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    target: String,
    mbean: String,
    attributes: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SummaryArgs {
    target: String,
    mbean: String,
    attribute: String,
    path: Option<String>,
    op: SummaryOp,
    n: Option<usize>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum SummaryOp {
    Top,
    Bottom,
    Max,
    Min,
    Sum,
    Avg,
    Count,
    Group,
}

impl SummaryOp {
    /// The reduction asked for; `n` (default 5) counts for top and bottom.
    fn reduce(self, n: Option<usize>) -> Result<crate::protocol::reduce::Reduce, BadArguments> {
        use crate::protocol::reduce::{Op, Reduce, MAX_RANKED};
        let n = n.unwrap_or(5);
        if matches!(self, SummaryOp::Top | SummaryOp::Bottom) && !(1..=MAX_RANKED).contains(&n) {
            return Err(BadArguments(format!(
                "fleet_summary: `n` must be from 1 to {MAX_RANKED}"
            )));
        }
        Ok(Reduce::new(match self {
            SummaryOp::Top => Op::Top(n),
            SummaryOp::Bottom => Op::Bottom(n),
            SummaryOp::Max => Op::Max,
            SummaryOp::Min => Op::Min,
            SummaryOp::Sum => Op::Sum,
            SummaryOp::Avg => Op::Avg,
            SummaryOp::Count => Op::Count,
            SummaryOp::Group => Op::Group,
        }))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExplainArgs {
    target: String,
    #[serde(rename = "type")]
    kind: ExplainType,
    mbean: Option<String>,
    attribute: Option<String>,
    operation: Option<String>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum ExplainType {
    Read,
    Write,
    Exec,
    List,
    Search,
}

impl ExplainType {
    fn as_str(self) -> &'static str {
        match self {
            ExplainType::Read => "read",
            ExplainType::Write => "write",
            ExplainType::Exec => "exec",
            ExplainType::List => "list",
            ExplainType::Search => "search",
        }
    }
}

/// `explain`'s item: the request a tool would send, as plain Jolokia (one
/// attribute, no `ignoreErrors`), so that a denied attribute is a denial
/// with its rule. Arguments a type doesn't take are refused, not ignored.
fn explain_item(a: ExplainArgs) -> Result<Call, BadArguments> {
    let tool = ToolName::Explain;
    let kind = a.kind.as_str();
    let given = |v: &Option<String>, key: &str| -> Result<Option<String>, BadArguments> {
        match v {
            Some(v) => nonempty(tool, key, v).map(|()| Some(v.clone())),
            None => Ok(None),
        }
    };
    let mbean = given(&a.mbean, "mbean")?;
    let attribute = given(&a.attribute, "attribute")?;
    let operation = given(&a.operation, "operation")?;
    let takes = |key: &str, ok: bool, v: &Option<String>| match (ok, v) {
        (false, Some(_)) => Err(BadArguments(format!(
            "explain: `{key}` is not for type {kind}"
        ))),
        _ => Ok(()),
    };
    takes(
        "attribute",
        matches!(a.kind, ExplainType::Read | ExplainType::Write),
        &attribute,
    )?;
    takes("operation", a.kind == ExplainType::Exec, &operation)?;
    let needs = |key: &str, v: Option<String>| {
        v.ok_or_else(|| BadArguments(format!("explain: type {kind} needs `{key}`")))
    };
    let typed = |made: Result<Request, crate::protocol::ProtocolError>| {
        made.map_err(|e| BadArguments(format!("{}: {}", tool.as_str(), e.message)))
    };
    let request = match a.kind {
        ExplainType::Read => {
            let mbean = needs("mbean", mbean)?;
            object_name(tool, "mbean", &mbean)?;
            typed(Request::read(&mbean, attribute.as_deref()))?
        }
        ExplainType::Write => {
            let mbean = needs("mbean", mbean)?;
            object_name(tool, "mbean", &mbean)?;
            let attribute = needs("attribute", attribute)?;
            // The value does not count in the decision.
            typed(Request::write(&mbean, &attribute, Value::Null))?
        }
        ExplainType::Exec => {
            let mbean = needs("mbean", mbean)?;
            object_name(tool, "mbean", &mbean)?;
            let operation = needs("operation", operation)?;
            typed(Request::exec(&mbean, &operation, Vec::new()))?
        }
        ExplainType::List => match mbean {
            Some(mbean) => {
                let name = object_name(tool, "mbean", &mbean)?;
                Request::list(Some(&list_path(&name)))
            }
            None => Request::list(None),
        },
        ExplainType::Search => {
            let pattern = mbean.unwrap_or_else(|| "*:*".into());
            object_name(tool, "mbean", &pattern)?;
            typed(Request::search(&pattern))?
        }
    };
    nonempty(tool, "target", &a.target)?;
    let item = ParsedItem::to(&a.target, request);
    Ok(Call::Explain {
        target: a.target,
        item,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    target: String,
    mbean: String,
    attribute: String,
    value: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExecArgs {
    target: String,
    mbean: String,
    operation: String,
    arguments: Option<Vec<Value>>,
}

/// The arguments as `T`; an error names the argument at fault.
fn args<T: for<'de> Deserialize<'de>>(tool: ToolName, given: Value) -> Result<T, BadArguments> {
    serde_path_to_error::deserialize(given).map_err(|e| {
        let at = e.path().to_string();
        let inner = without_value(&e.into_inner().to_string());
        BadArguments(if at == "." {
            format!("{}: invalid arguments: {inner}", tool.as_str())
        } else {
            format!("{}: invalid arguments: `{at}`: {inner}", tool.as_str())
        })
    })
}

/// serde's "invalid type: string \"s3cret\", expected a sequence" without
/// the value: the message goes to the audit note and the log, where
/// written values and exec arguments never appear as text.
fn without_value(message: &str) -> String {
    let Some((head, rest)) = ["invalid type: ", "invalid value: "]
        .iter()
        .find_map(|p| message.strip_prefix(p).map(|rest| (p.trim_end(), rest)))
    else {
        return message.to_string();
    };
    let Some((unexpected, expected)) = rest.rsplit_once(", expected ") else {
        return format!("{head} (value left out)");
    };
    // `string "…"`, `integer `5``, `map`: the kind, then the value quoted.
    let kind = unexpected
        .split(['"', '`'])
        .next()
        .unwrap_or_default()
        .trim();
    format!("{head} {kind}, expected {expected}")
}

fn nonempty(tool: ToolName, key: &str, value: &str) -> Result<(), BadArguments> {
    if value.trim().is_empty() {
        return Err(BadArguments(format!("{}: `{key}` is empty", tool.as_str())));
    }
    Ok(())
}

/// An ObjectName the agent can take: checked here so the assistant hears
/// what is wrong with it in the tool's own terms.
fn object_name(tool: ToolName, key: &str, value: &str) -> Result<ObjectName, BadArguments> {
    ObjectName::parse(value).map_err(|e| {
        BadArguments(format!(
            "{}: `{key}` {value:?} is not an ObjectName ({e}); write it as `domain:key=value,…`",
            tool.as_str()
        ))
    })
}

/// Write and exec go to one named target, never to a selector's group.
fn one_target(
    tool: ToolName,
    target: &str,
    is_selector: &dyn Fn(&str) -> bool,
) -> Result<(), BadArguments> {
    nonempty(tool, "target", target)?;
    if is_selector(target) {
        return Err(BadArguments(format!(
            "{}: `target` {target:?} is a selector; this tool takes one target's name (see list_targets)",
            tool.as_str()
        )));
    }
    Ok(())
}

/// Reads a call's arguments. `is_selector` tells a selector from a name
/// (the router's own rule).
pub fn parse_call(
    tool: ToolName,
    given: Option<serde_json::Map<String, Value>>,
    is_selector: &dyn Fn(&str) -> bool,
) -> Result<Call, BadArguments> {
    let given = Value::Object(given.unwrap_or_default());
    let typed = |made: Result<Request, crate::protocol::ProtocolError>| {
        made.map_err(|e| BadArguments(format!("{}: {}", tool.as_str(), e.message)))
    };
    let item = |target: String,
                fan_out: bool,
                request: Request,
                reduce: Option<Reduce>,
                mbean: Option<String>,
                page: Option<super::page::Page>| {
        // Each target's failure stays in its own place, and so does each
        // attribute's: a read of one target answers as a group of one
        // would.
        let request = if fan_out || tool == ToolName::ReadAttributes {
            typed(request.with_param("ignoreErrors", "true"))?
        } else {
            request
        };
        let mut item = ParsedItem::to(&target, request);
        item.reduce = reduce;
        Ok(Call::Item {
            tool,
            target,
            fan_out,
            item,
            mbean,
            page,
        })
    };
    match tool {
        ToolName::RequestAccess | ToolName::AccessRequestStatus => access_call(tool, given),
        ToolName::ListTargets => {
            let a: ListTargetsArgs = args(tool, given)?;
            Ok(Call::ListTargets {
                selector: a.selector.filter(|s| !s.trim().is_empty()),
            })
        }
        ToolName::SearchMbeans => {
            let a: SearchArgs = args(tool, given)?;
            nonempty(tool, "target", &a.target)?;
            let pattern = a.pattern.unwrap_or_else(|| "*:*".into());
            object_name(tool, "pattern", &pattern)?;
            let page = a
                .cursor
                .as_deref()
                .map_or(Ok(super::page::Page::default()), super::page::Page::decode)
                .map_err(|e| BadArguments(format!("search_mbeans: `cursor`: {e}")))?;
            let fan_out = is_selector(&a.target);
            item(
                a.target,
                fan_out,
                typed(Request::search(&pattern))?,
                None,
                None,
                Some(page),
            )
        }
        ToolName::DescribeMbean => {
            let a: DescribeArgs = args(tool, given)?;
            one_target(tool, &a.target, is_selector)?;
            let name = object_name(tool, "mbean", &a.mbean)?;
            if name.is_pattern() {
                return Err(BadArguments(format!(
                    "describe_mbean: `mbean` {:?} is a pattern; give one MBean's name (search_mbeans finds them)",
                    a.mbean
                )));
            }
            let path = list_path(&name);
            item(
                a.target,
                false,
                Request::list(Some(&path)),
                None,
                Some(a.mbean),
                None,
            )
        }
        ToolName::ReadAttributes => {
            let a: ReadArgs = args(tool, given)?;
            nonempty(tool, "target", &a.target)?;
            object_name(tool, "mbean", &a.mbean)?;
            let read = typed_read(&a.mbean, a.attributes)?;
            let fan_out = is_selector(&a.target);
            item(a.target, fan_out, read, None, None, None)
        }
        ToolName::FleetSummary => {
            let a: SummaryArgs = args(tool, given)?;
            nonempty(tool, "target", &a.target)?;
            if !is_selector(&a.target) {
                return Err(BadArguments(format!(
                    "fleet_summary: `target` {:?} is one target's name; give a selector for a group \
                     (`kafka-*`, `env=prod`, `*`), or use read_attributes for one JVM",
                    a.target
                )));
            }
            object_name(tool, "mbean", &a.mbean)?;
            nonempty(tool, "attribute", &a.attribute)?;
            let reduce = a.op.reduce(a.n)?;
            let mut read = typed(Request::read(&a.mbean, Some(&a.attribute)))?;
            if let Some(p) = a.path.filter(|p| !p.is_empty()) {
                read = read.at_path(&p);
            }
            item(a.target, true, read, Some(reduce), None, None)
        }
        ToolName::Explain => explain_item(args(tool, given)?),
        ToolName::WriteAttribute => {
            let a: WriteArgs = args(tool, given)?;
            one_target(tool, &a.target, is_selector)?;
            object_name(tool, "mbean", &a.mbean)?;
            nonempty(tool, "attribute", &a.attribute)?;
            item(
                a.target,
                false,
                typed(Request::write(&a.mbean, &a.attribute, a.value))?,
                None,
                None,
                None,
            )
        }
        ToolName::ExecuteOperation => {
            let a: ExecArgs = args(tool, given)?;
            one_target(tool, &a.target, is_selector)?;
            object_name(tool, "mbean", &a.mbean)?;
            nonempty(tool, "operation", &a.operation)?;
            let arguments = a.arguments.unwrap_or_default();
            item(
                a.target,
                false,
                typed(Request::exec(&a.mbean, &a.operation, arguments))?,
                None,
                None,
                None,
            )
        }
    }
}

/// `read_attributes`'s read: the named attributes as a list, even of one
/// (values come keyed by attribute), or all of them.
fn typed_read(mbean: &str, attributes: Option<Vec<String>>) -> Result<Request, BadArguments> {
    let read = match attributes {
        Some(list) if list.iter().any(|n| n.trim().is_empty()) => {
            return Err(BadArguments(
                "read_attributes: `attributes` has an empty name".into(),
            ))
        }
        Some(list) if !list.is_empty() => {
            let names: Vec<&str> = list.iter().map(String::as_str).collect();
            Request::read_many(mbean, &names)
        }
        _ => Request::read(mbean, None),
    };
    read.map_err(|e| BadArguments(format!("read_attributes: {}", e.message)))
}

/// The `list` path of one MBean: its domain, then its canonical key
/// properties (how agents key their list), each `!`-escaped.
fn list_path(name: &ObjectName) -> String {
    let canonical = name.canonical_str();
    let (domain, properties) = canonical.split_once(':').unwrap_or((canonical, ""));
    format!("{}/{}", escape_segment(domain), escape_segment(properties))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doors::mcp::tools::offered;

    fn selector(s: &str) -> bool {
        s.contains(['*', '='])
    }

    fn call(tool: ToolName, given: Value) -> Result<Call, BadArguments> {
        let Value::Object(map) = given else { panic!() };
        parse_call(tool, Some(map), &selector)
    }

    use serde_json::json;

    /// An item as the agent gets it, with its target (and reduction).
    fn wire(item: &ParsedItem) -> Value {
        let mut out = item.request.to_agent_json();
        if let Some(t) = &item.target {
            out["target"] = json!({ "url": t.url });
        }
        if let Some(r) = &item.reduce {
            out["reduce"] = r.to_json();
        }
        out
    }

    fn item_of(c: Call) -> Value {
        match c {
            Call::Item { item, .. } => wire(&item),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn read_becomes_one_item_with_the_target_an_attribute_list_and_errors_in_place() {
        let item = item_of(
            call(
                ToolName::ReadAttributes,
                json!({"target": "a", "mbean": "java.lang:type=Memory", "attributes": ["Verbose"]}),
            )
            .unwrap(),
        );
        assert_eq!(
            item,
            json!({"type":"read","mbean":"java.lang:type=Memory","attribute":["Verbose"],"target":{"url":"a"},
                   "config":{"ignoreErrors":"true"}})
        );
    }

    #[test]
    fn a_selector_fans_out_with_errors_kept_per_target() {
        let c = call(
            ToolName::SearchMbeans,
            json!({"target": "env=prod", "pattern": "java.lang:*"}),
        )
        .unwrap();
        let Call::Item { fan_out, item, .. } = c else {
            panic!()
        };
        assert!(fan_out);
        assert_eq!(wire(&item)["config"], json!({"ignoreErrors": "true"}));
    }

    #[test]
    fn write_and_exec_refuse_selectors() {
        let e = call(
            ToolName::WriteAttribute,
            json!({"target": "kafka-*", "mbean": "a:b=c", "attribute": "X", "value": 1}),
        )
        .unwrap_err();
        assert!(e.0.contains("is a selector"), "{e:?}");
        let e = call(
            ToolName::ExecuteOperation,
            json!({"target": "env=prod", "mbean": "a:b=c", "operation": "gc"}),
        )
        .unwrap_err();
        assert!(e.0.contains("one target's name"), "{e:?}");
    }

    #[test]
    fn bad_arguments_name_the_problem() {
        let e = call(ToolName::ReadAttributes, json!({"target": "a"})).unwrap_err();
        assert!(e.0.contains("missing field `mbean`"), "{e:?}");
        let e = call(
            ToolName::ReadAttributes,
            json!({"target": "a", "mbean": "x", "attribute": "Y"}),
        )
        .unwrap_err();
        assert!(e.0.contains("unknown field `attribute`"), "{e:?}");
        let e = call(
            ToolName::ReadAttributes,
            json!({"target": "a", "mbean": "no colon"}),
        )
        .unwrap_err();
        assert!(e.0.contains("is not an ObjectName"), "{e:?}");
        let e = call(
            ToolName::DescribeMbean,
            json!({"target": "a", "mbean": "java.lang:*"}),
        )
        .unwrap_err();
        assert!(e.0.contains("is a pattern"), "{e:?}");
        let e = call(ToolName::SearchMbeans, json!({"target": 3})).unwrap_err();
        assert!(e.0.contains("`target`: invalid type"), "{e:?}");
        let e = call(
            ToolName::ReadAttributes,
            json!({"target": "a", "mbean": "a:b=c", "attributes": ["X", 5]}),
        )
        .unwrap_err();
        assert!(e.0.contains("`attributes[1]`: invalid type"), "{e:?}");
    }

    #[test]
    fn bad_arguments_never_repeat_the_value() {
        for arguments in [
            json!("s3cret, expected x"),
            json!(17017),
            json!({"k": "s3cret"}),
        ] {
            let e = call(
                ToolName::ExecuteOperation,
                json!({"target": "a", "mbean": "a:b=c", "operation": "op", "arguments": arguments}),
            )
            .unwrap_err();
            assert!(!e.0.contains("s3cret") && !e.0.contains("17017"), "{e:?}");
            assert!(e.0.contains("`arguments`: invalid type: "), "{e:?}");
            assert!(e.0.ends_with("expected a sequence"), "{e:?}");
        }
        assert_eq!(
            without_value("invalid type: string \"a\", expected a map"),
            "invalid type: string, expected a map"
        );
        assert_eq!(
            without_value("invalid value: integer `5`, expected one of a, b"),
            "invalid value: integer, expected one of a, b"
        );
        assert_eq!(without_value("missing field `x`"), "missing field `x`");
    }

    #[test]
    fn describe_lists_the_canonical_path() {
        let item = item_of(
            call(
                ToolName::DescribeMbean,
                json!({"target": "a", "mbean": "d/x:type=T,name=a/b"}),
            )
            .unwrap(),
        );
        assert_eq!(item["path"], "d!/x/name=a!/b,type=T");
    }

    #[test]
    fn write_and_exec_are_offered_only_when_some_role_may() {
        let names = |v: Vec<ToolName>| v.into_iter().map(ToolName::as_str).collect::<Vec<_>>();
        assert_eq!(offered(|_| true, false, false).len(), 8);
        assert_eq!(offered(|_| true, true, false).len(), 10);
        assert_eq!(
            names(offered(|_| true, false, true)).last().copied(),
            Some("access_request_status")
        );
        assert_eq!(
            names(offered(|c| c == "exec", false, false)),
            [
                "list_targets",
                "search_mbeans",
                "describe_mbean",
                "read_attributes",
                "fleet_summary",
                "explain",
                "execute_operation"
            ]
        );
        assert!(offered(|_| false, false, false)
            .iter()
            .all(|t| t.changes().is_none()
                && t.tool().annotations.unwrap().read_only_hint == Some(true)));
        let exec = ToolName::ExecuteOperation.tool();
        assert_eq!(exec.annotations.unwrap().destructive_hint, Some(true));
    }

    #[test]
    fn explain_judges_the_plain_request_and_refuses_what_its_type_does_not_take() {
        let explained = |given: Value| match call(ToolName::Explain, given) {
            Ok(Call::Explain { item, .. }) => Ok(wire(&item)),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e.0),
        };
        assert_eq!(
            explained(
                json!({"target": "env=prod", "type": "read", "mbean": "a:b=c", "attribute": "X"})
            ),
            Ok(
                json!({"type": "read", "mbean": "a:b=c", "attribute": "X", "target": {"url": "env=prod"}})
            )
        );
        assert_eq!(
            explained(
                json!({"target": "a", "type": "exec", "mbean": "a:b=c", "operation": "add(int,int)"})
            ),
            Ok(
                // No arguments: agents get none (an empty list is left out).
                json!({"type": "exec", "mbean": "a:b=c", "operation": "add(int,int)",
                      "target": {"url": "a"}})
            )
        );
        assert_eq!(
            explained(json!({"target": "a", "type": "search"})).unwrap()["mbean"],
            "*:*"
        );
        let e = explained(json!({"target": "a", "type": "write", "mbean": "a:b=c"})).unwrap_err();
        assert_eq!(e, "explain: type write needs `attribute`");
        let e =
            explained(json!({"target": "a", "type": "read", "mbean": "a:b=c", "operation": "x"}))
                .unwrap_err();
        assert_eq!(e, "explain: `operation` is not for type read");
        let e = explained(json!({"target": "a", "type": "delete", "mbean": "a:b=c"})).unwrap_err();
        assert!(e.contains("`type`: unknown variant"), "{e}");
    }

    #[test]
    fn fleet_summary_is_one_reduced_read_of_a_group() {
        let item = item_of(
            call(
                ToolName::FleetSummary,
                json!({"target": "env=prod", "mbean": "java.lang:type=Memory",
                       "attribute": "HeapMemoryUsage", "path": "used", "op": "top", "n": 3}),
            )
            .unwrap(),
        );
        assert_eq!(item["reduce"], json!({"op": "top", "n": 3}));
        assert_eq!(item["path"], "used");
        assert_eq!(item["target"], json!({"url": "env=prod"}));
        let default_n = item_of(
            call(
                ToolName::FleetSummary,
                json!({"target": "*", "mbean": "a:b=c", "attribute": "X", "op": "bottom"}),
            )
            .unwrap(),
        );
        assert_eq!(default_n["reduce"], json!({"op": "bottom", "n": 5}));
        let e = call(
            ToolName::FleetSummary,
            json!({"target": "kafka-1", "mbean": "a:b=c", "attribute": "X", "op": "sum"}),
        )
        .unwrap_err();
        assert!(e.0.contains("one target's name; give a selector"), "{e:?}");
        let e = call(
            ToolName::FleetSummary,
            json!({"target": "k-*", "mbean": "a:b=c", "attribute": "X", "op": "median"}),
        )
        .unwrap_err();
        assert!(e.0.contains("`op`: unknown variant"), "{e:?}");
        let e = call(
            ToolName::FleetSummary,
            json!({"target": "k-*", "mbean": "a:b=c", "attribute": "X", "op": "top", "n": 0}),
        )
        .unwrap_err();
        assert!(e.0.contains("`n` must be from 1"), "{e:?}");
    }
}
