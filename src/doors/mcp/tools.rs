//! The MCP tools as data: their names, descriptions, input schemas and
//! annotations (`call.rs` turns a call's arguments into a Jolokia request
//! item). Pure: no I/O, no gateway state.

use std::sync::Arc;

use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{json, Value};

/// The tools, in the order `tools/list` shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolName {
    ListTargets,
    SearchMbeans,
    DescribeMbean,
    ReadAttributes,
    FleetSummary,
    Explain,
    WriteAttribute,
    ExecuteOperation,
    RequestAccess,
    AccessRequestStatus,
}

impl ToolName {
    pub const ALL: [ToolName; 10] = [
        ToolName::ListTargets,
        ToolName::SearchMbeans,
        ToolName::DescribeMbean,
        ToolName::ReadAttributes,
        ToolName::FleetSummary,
        ToolName::Explain,
        ToolName::WriteAttribute,
        ToolName::ExecuteOperation,
        ToolName::RequestAccess,
        ToolName::AccessRequestStatus,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ToolName::ListTargets => "list_targets",
            ToolName::SearchMbeans => "search_mbeans",
            ToolName::DescribeMbean => "describe_mbean",
            ToolName::ReadAttributes => "read_attributes",
            ToolName::FleetSummary => "fleet_summary",
            ToolName::Explain => "explain",
            ToolName::WriteAttribute => "write_attribute",
            ToolName::ExecuteOperation => "execute_operation",
            ToolName::RequestAccess => "request_access",
            ToolName::AccessRequestStatus => "access_request_status",
        }
    }

    /// Just-in-time access: `request_access` is offered to callers who may
    /// request a role, `access_request_status` also to those whose items
    /// may wait for approval.
    fn offered_for(self, may_request: bool, may_wait: bool) -> bool {
        match self {
            ToolName::RequestAccess => may_request,
            ToolName::AccessRequestStatus => may_request || may_wait,
            _ => true,
        }
    }

    pub fn parse(name: &str) -> Option<ToolName> {
        ToolName::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// Write and exec change MBeans: offered only to callers whose roles
    /// could allow them somewhere.
    pub fn changes(self) -> Option<&'static str> {
        match self {
            ToolName::WriteAttribute => Some("write"),
            ToolName::ExecuteOperation => Some("exec"),
            _ => None,
        }
    }

    fn description(self) -> &'static str {
        match self {
            ToolName::ListTargets => {
                "List the JVMs (Jolokia agents) you may reach through this gateway: name, labels, \
                 health and agent version. Use a name from here as `target` in the other tools."
            }
            ToolName::SearchMbeans => {
                "Find MBean names matching an ObjectName pattern (`java.lang:type=*`, `*:*`) on one \
                 target, or on every target a selector matches."
            }
            ToolName::DescribeMbean => {
                "Describe one MBean on one target: its attributes (type, writable) and operations \
                 (signatures), from the agent's list."
            }
            ToolName::ReadAttributes => {
                "Read attribute values of an MBean (all readable ones, or those named) on one \
                 target or on every target a selector matches."
            }
            ToolName::FleetSummary => {
                "Answer a question about a group of JVMs with one result instead of a value per \
                 JVM: which have the highest or lowest value (`top` or `bottom` with `n`; `max` \
                 or `min` for one), the total (`sum`), the mean (`avg`), how many answered \
                 (`count`), or which distinct values occur and where (`group`, e.g. versions or \
                 states). Example: \"which JVM uses the most heap?\" is mbean \
                 `java.lang:type=Memory`, attribute `HeapMemoryUsage`, path `used`, op `top`, n 1. \
                 JVMs that gave no usable value are summarised under `errors`, by reason; when \
                 none gave one, the call is an error saying why."
            }
            ToolName::Explain => {
                "Explain what you may do, and why: for a request (read an attribute, write it, \
                 run an operation, list or search MBeans) on one target or on every target a \
                 selector matches, whether your roles allow it on each target and which of your \
                 roles and policy rules decides. Nothing is sent to any JVM. Use it when a call \
                 was refused, or before a write or an operation."
            }
            ToolName::WriteAttribute => {
                "Set one attribute of an MBean on one target; returns the previous value. Changes \
                 the running JVM."
            }
            ToolName::ExecuteOperation => {
                "Run an MBean operation on one target with the given arguments; returns its \
                 result. Changes the running JVM; operations can be disruptive (gc, reset, stop)."
            }
            ToolName::RequestAccess => {
                "Ask for a role you don't hold, for a while (just-in-time access), e.g. to run an \
                 operation a refusal said needs it. A person with an approver role must approve \
                 the request before it takes effect: tell the user its id, and check it with \
                 access_request_status. You can't approve requests."
            }
            ToolName::AccessRequestStatus => {
                "The state of one access request (pending, approved, denied, expired, revoked), \
                 or, without an id, your recent requests. An item refused with \
                 jmxgate.ApprovalRequired names its request here too; once approved, send \
                 exactly that item again, once."
            }
        }
    }

    fn schema(self) -> Value {
        let target_one = json!({
            "type": "string",
            "description": "One target's name, as list_targets shows it."
        });
        let target_many = json!({
            "type": "string",
            "description": "A target's name, or a selector for several: a glob over names \
                            (`kafka-*`) or labels (`env=prod,app=orders`)."
        });
        let mbean = json!({
            "type": "string",
            "description": "The MBean's ObjectName, e.g. `java.lang:type=Memory`."
        });
        let (properties, required): (Value, &[&str]) = match self {
            ToolName::RequestAccess | ToolName::AccessRequestStatus => access_properties(self),
            ToolName::ListTargets => (
                json!({ "selector": {
                    "type": "string",
                    "description": "Only targets matching this glob or label selector."
                }}),
                &[],
            ),
            ToolName::SearchMbeans => (
                json!({
                    "target": target_many,
                    "pattern": {
                        "type": "string",
                        "description": "ObjectName pattern; default `*:*` (every MBean)."
                    },
                    "cursor": {
                        "type": "string",
                        "description": "A previous answer's `next_cursor`: the names that answer \
                                        left out (names come sorted, per target)."
                    }
                }),
                &["target"],
            ),
            ToolName::DescribeMbean => (
                json!({ "target": target_one, "mbean": mbean }),
                &["target", "mbean"],
            ),
            ToolName::ReadAttributes => (
                json!({
                    "target": target_many,
                    "mbean": {
                        "type": "string",
                        "description": "The MBean's ObjectName, or a pattern (values are then keyed by MBean)."
                    },
                    "attributes": {
                        "type": "array",
                        "items": { "type": "string" },
                        "description": "Attribute names; omit for every readable attribute."
                    }
                }),
                &["target", "mbean"],
            ),
            ToolName::FleetSummary => (
                json!({
                    "target": {
                        "type": "string",
                        "description": "A selector for the group: a glob over target names \
                                        (`kafka-*`, `*` for all) or labels (`env=prod,app=orders`)."
                    },
                    "mbean": {
                        "type": "string",
                        "description": "The MBean's ObjectName, e.g. `java.lang:type=Memory`; a \
                                        pattern reduces each attribute over every matching MBean."
                    },
                    "attribute": { "type": "string", "description": "The attribute to read, e.g. `HeapMemoryUsage`." },
                    "path": {
                        "type": "string",
                        "description": "Inner path into the value, e.g. `used` in HeapMemoryUsage."
                    },
                    "op": {
                        "type": "string",
                        "enum": ["top", "bottom", "max", "min", "sum", "avg", "count", "group"],
                        "description": "What to compute over the group."
                    },
                    "n": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": crate::protocol::reduce::MAX_RANKED,
                        "description": "For top and bottom: how many JVMs (default 5)."
                    }
                }),
                &["target", "mbean", "attribute", "op"],
            ),
            ToolName::Explain => (
                json!({
                    "target": target_many,
                    "type": {
                        "type": "string",
                        "enum": ["read", "write", "exec", "list", "search"],
                        "description": "What you would do: read or write an attribute, exec an \
                                        operation, list (describe) or search MBeans."
                    },
                    "mbean": {
                        "type": "string",
                        "description": "The MBean's ObjectName (for read, write and exec; for \
                                        list one MBean, for search a pattern, default `*:*`)."
                    },
                    "attribute": {
                        "type": "string",
                        "description": "For read (omit for every attribute) and write: the attribute."
                    },
                    "operation": {
                        "type": "string",
                        "description": "For exec: the operation, with its signature for an \
                                        overload: `add(int,int)`."
                    }
                }),
                &["target", "type"],
            ),
            ToolName::WriteAttribute => (
                json!({
                    "target": target_one,
                    "mbean": mbean,
                    "attribute": { "type": "string", "description": "The attribute's name, as describe_mbean lists it." },
                    "value": any_json("The new value: text, a number, true or false, or for arrays, \
                                       maps and composite data a JSON array or object. The agent \
                                       converts text to the attribute's type (\"42\" for an int).")
                }),
                &["target", "mbean", "attribute", "value"],
            ),
            ToolName::ExecuteOperation => (
                json!({
                    "target": target_one,
                    "mbean": mbean,
                    "operation": {
                        "type": "string",
                        "description": "Operation name; for overloaded operations with its signature: `add(int,int)`."
                    },
                    "arguments": {
                        "type": "array",
                        "items": any_json("One argument, converted by the agent to the parameter's type."),
                        "description": "Arguments in order, as describe_mbean's signature lists them; omit for none."
                    }
                }),
                &["target", "mbean", "operation"],
            ),
        };
        json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        })
    }

    /// The shape of a successful call's structured content (a tool error
    /// carries text only). Clients validate answers against it.
    fn output_schema(self) -> Value {
        let text = json!({"type": "string"});
        let error_entry = json!({
            "type": "object",
            "description": "A target that could not answer.",
            "properties": {
                "target": text, "status": {"type": "integer"},
                "error": text, "error_type": text,
                "denied_by": {"type": "string", "description": "For a policy's refusal: the role \
                                                              and rule of yours that decided."}
            },
            "required": ["target", "error"]
        });
        let per_target = |key: &str, value: Value| {
            json!({
                "type": "object",
                "properties": {
                    "results": {
                        "type": "array",
                        "description": "One entry per target, in target order.",
                        "items": {"anyOf": [
                            {
                                "type": "object",
                                "properties": {"target": text, key: value},
                                "required": ["target", key]
                            },
                            error_entry
                        ]}
                    },
                    "truncated": {"type": "string", "description": "What was left out, when the answer was cut."},
                    "next_cursor": {"type": "string", "description": "Give it as `cursor` for what was left out."}
                },
                "required": ["results"]
            })
        };
        match self {
            ToolName::RequestAccess | ToolName::AccessRequestStatus => object_schema(
                json!({
                    "id": text,
                    "state": text,
                    "role": text,
                    "requests": {"type": "array", "items": {"type": "object"}}
                }),
                &[],
            ),
            ToolName::ListTargets => object_schema(
                json!({
                    "count": {"type": "integer"},
                    "targets": {"type": "array", "items": object_schema(
                        json!({"name": text, "labels": {"type": "object"}, "health": text}),
                        &["name"],
                    )}
                }),
                &["count", "targets"],
            ),
            ToolName::SearchMbeans => per_target(
                "mbeans",
                json!({"type": "array", "items": text, "description": "MBean names."}),
            ),
            ToolName::ReadAttributes => per_target(
                "values",
                json!({
                    "description": "The values by attribute (by MBean, then attribute, for a \
                                    pattern); an attribute that could not be read holds \
                                    {\"error\", \"error_type\"} instead of its value, with \
                                    \"denied_by\" (the role and rule of yours that decided) \
                                    where a policy of yours denied it."
                }),
            ),
            ToolName::DescribeMbean => describe_mbean_schema(),
            ToolName::FleetSummary => fleet_summary_schema(),
            ToolName::Explain => explain_schema(),
            ToolName::WriteAttribute => object_schema(
                json!({"target": text, "mbean": text, "attribute": text,
                       "previous": {"description": "The value before the write."}}),
                &["target", "mbean", "attribute"],
            ),
            ToolName::ExecuteOperation => object_schema(
                json!({"target": text, "mbean": text, "operation": text,
                       "result": {"description": "What the operation returned."}}),
                &["target", "mbean", "operation"],
            ),
        }
    }

    fn annotations(self) -> ToolAnnotations {
        let title = match self {
            ToolName::ListTargets => "List targets",
            ToolName::SearchMbeans => "Search MBeans",
            ToolName::DescribeMbean => "Describe an MBean",
            ToolName::ReadAttributes => "Read attributes",
            ToolName::FleetSummary => "Summarise a group of JVMs",
            ToolName::Explain => "Explain what you may do",
            ToolName::WriteAttribute => "Write an attribute",
            ToolName::ExecuteOperation => "Execute an operation",
            ToolName::RequestAccess => "Request access",
            ToolName::AccessRequestStatus => "Access request status",
        };
        let a = ToolAnnotations::with_title(title).open_world(false);
        match self {
            ToolName::WriteAttribute => a.read_only(false).destructive(true).idempotent(true),
            ToolName::ExecuteOperation => a.read_only(false).destructive(true).idempotent(false),
            ToolName::RequestAccess => a.read_only(false).destructive(false).idempotent(false),
            _ => a.read_only(true),
        }
    }

    pub fn tool(self) -> Tool {
        let Value::Object(schema) = self.schema() else {
            unreachable!("schemas are objects")
        };
        let Value::Object(output) = self.output_schema() else {
            unreachable!("schemas are objects")
        };
        Tool::new(self.as_str(), self.description(), Arc::new(schema))
            .annotate(self.annotations())
            .with_raw_output_schema(Arc::new(output))
    }
}

/// The input properties of the access-request tools, and which are required.
fn access_properties(tool: ToolName) -> (Value, &'static [&'static str]) {
    match tool {
        ToolName::RequestAccess => (
            json!({
                "role": {"type": "string", "description": "The role to ask for."},
                "duration": {"type": "string", "description": "How long, e.g. `30m` (at most the role's maximum)."},
                "targets": {"type": "string", "description": "Only some of the role's targets: a name, glob or label selector."},
                "reason": {"type": "string", "description": "Why, e.g. an incident or ticket; some roles require it."}
            }),
            &["role", "duration"],
        ),
        ToolName::AccessRequestStatus => (
            json!({ "id": {"type": "string", "description": "The request's id (`ar-…`); without it, your recent requests."} }),
            &[],
        ),
        _ => unreachable!("only the access-request tools"),
    }
}

/// Any JSON value, with each type named (clients skip properties without
/// a type).
fn any_json(description: &str) -> Value {
    json!({
        "anyOf": [
            {"type": "string"}, {"type": "number"}, {"type": "boolean"},
            {"type": "array", "items": {}}, {"type": "object"}, {"type": "null"}
        ],
        "description": description,
    })
}

/// The tools a caller is offered: all read-only ones, write or exec when
/// `may` says the caller's roles could allow that command somewhere, and
/// the access-request tools when it `may_request` a role (the status
/// also when some of its items `may_wait` for approval).
pub fn offered(may: impl Fn(&str) -> bool, may_request: bool, may_wait: bool) -> Vec<ToolName> {
    ToolName::ALL
        .into_iter()
        .filter(|t| t.changes().is_none_or(&may))
        .filter(|t| t.offered_for(may_request, may_wait))
        .collect()
}

/// A JSON Schema object with these properties, these required.
fn object_schema(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
    })
}

/// `describe_mbean`'s result.
fn describe_mbean_schema() -> Value {
    let text = json!({"type": "string"});
    object_schema(
        json!({
            "target": text,
            "mbean": text,
            "class": text,
            "description": {"type": ["string", "null"]},
            "attributes": {"type": "array", "items": object_schema(
                json!({
                    "name": text, "type": {"type": ["string", "null"]},
                    "description": {"type": ["string", "null"]},
                    "readable": {"type": "boolean"}, "writable": {"type": "boolean"},
                    "you_may_read": {"type": "boolean"}, "you_may_write": {"type": "boolean"}
                }),
                &["name"],
            )},
            "operations": {"type": "array", "items": object_schema(
                json!({
                    "name": text, "signature": text,
                    "description": {"type": ["string", "null"]},
                    "returns": {"type": ["string", "null"]},
                    "arguments": {"type": "array"},
                    "you_may_execute": {"type": "boolean"}
                }),
                &["name", "signature"],
            )}
        }),
        &["target", "mbean", "attributes", "operations"],
    )
}

/// `fleet_summary`'s result.
fn fleet_summary_schema() -> Value {
    let text = json!({"type": "string"});
    object_schema(
        json!({
            "target": text, "mbean": text, "attribute": text, "path": text, "op": text,
            "result": {"description": "A number (sum, avg, count), {target, value} (max, \
                                       min), a list of {target, value} (top, bottom), or a \
                                       list of {value, targets} (group)."},
            "count": {"description": "Targets that answered a usable value (per \
                                      attribute, for an MBean pattern)."},
            "failed": {"type": "integer", "description": "Targets that gave no usable \
                                                         value (per attribute: not for \
                                                         every attribute)."},
            "errors": {"type": "array", "description": "Why, by reason: the targets with \
                                                       the same error, how many, the \
                                                       first few names and the first \
                                                       one's message.",
                       "items": object_schema(
                           json!({"error_type": text, "status": {"type": "integer"},
                                  "error": text, "count": {"type": "integer"},
                                  "targets": {"type": "array", "items": text},
                                  "denied_by": text}),
                           &["error", "count", "targets"],
                       )}
        }),
        &["target", "op", "count", "errors"],
    )
}

/// `explain`'s result.
fn explain_schema() -> Value {
    let text = json!({"type": "string"});
    let decision = json!({"type": "string", "enum": ["allow", "deny"]});
    object_schema(
        json!({
            "target": text, "type": text, "mbean": text, "attribute": text,
            "operation": text,
            "decision": {"type": "string", "enum": ["allow", "deny"],
                         "description": "allow when it is allowed on some target."},
            "results": {"type": "array", "description": "One entry per target, in \
                                                        target order.",
                        "items": object_schema(
                json!({
                    "target": text,
                    "decision": decision,
                    "rule": {"type": "string", "description": "The rule of your \
                                                              roles that decides."},
                    "roles": {"type": "array", "items": text, "description": "Your \
                              roles whose policies allow it there."},
                    "plan": {"type": "string", "description": "How the gateway \
                                                              would run it."},
                    "status": {"type": "integer"},
                    "error": {"type": "string", "description": "The refusal a call \
                                                               would get."}
                }),
                &["target", "decision", "rule"],
            )}
        }),
        &["target", "type", "decision", "results"],
    )
}
