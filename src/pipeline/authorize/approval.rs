//! Four-eyes, the pure part: whether an allowed write or operation must
//! wait for a second person's yes (`approval_required` of the roles that
//! allow it), and the exact item an approval is for. The store lookups
//! that settle it are the access door's (`doors/access/`, handed in by `app/` as a `Settle`).

use std::sync::Arc;

use serde_json::value::RawValue;

use crate::access::elevation::{Guarded, ItemApproval};
use crate::access::Role;
use crate::pipeline::state::State;
use crate::pipeline::{Gateway, Judged};
use crate::policy::Policy;
use crate::principal::Principal;
use crate::protocol::{Command, ObjectName, ProtocolError, Request};

/// Four-eyes before dispatch: each item of `judged` that waits for
/// approval either runs on its approval (used once, now) or is answered
/// with the request that asks for it. The store lookups are the access
/// door's; the composition root hands the gateway its function.
pub(crate) type Settle = for<'a, 'b> fn(
    &'a Gateway,
    &'a State,
    &'a Principal,
    &'a mut [Judged<'b>],
) -> futures::future::BoxFuture<'a, ()>;

/// The error type of an item that waits for approval.
pub const APPROVAL_REQUIRED: &str = "jmxgate.ApprovalRequired";

/// The role whose approval an allowed item waits for, or `None` when it
/// runs at once: when it is no write or exec, or when some role that
/// allows it (`passing`: the roles reaching its target whose request
/// checks passed) has no rule covering it. A caller holding a role that
/// may run it freely is not slowed down by another that may not.
///
/// An MBean pattern is `None` here: which MBeans it touches is known only
/// on the agent, so it is settled per matching MBean when it runs
/// ([`Plan::CheckPattern`](super::Plan::CheckPattern), `Grant::waits_for`),
/// and refused there if any of them waits.
pub fn waits_for(passing: &[&Arc<Role>], request: &Request) -> Option<Arc<Role>> {
    let (kind, mbean, member) = guarded(request)?;
    if mbean.is_pattern() {
        return None;
    }
    let roles = passing.iter().map(|r| (&r.policy, &r.approval));
    waiting_among(roles, kind, mbean, member).map(|i| Arc::clone(passing[i]))
}

/// What four-eyes may guard in `request`: its kind, MBean and operation or
/// attribute.
fn guarded(request: &Request) -> Option<(Guarded, &ObjectName, &str)> {
    match &request.command {
        Command::Exec(e) => Some((Guarded::Exec, &e.mbean, e.operation.as_str())),
        Command::Write(w) => Some((Guarded::Write, &w.mbean, w.attribute.as_str())),
        _ => None,
    }
}

/// Among roles (each its policy and four-eyes rules), the index of the
/// one whose approval `kind` of `member` on the concrete MBean `mbean`
/// waits for; `None` when it runs at once. A role counts only if its own
/// policy allows that operation or attribute there (holding a read-only
/// role beside a guarded one opens nothing); one such role with no rule
/// covering it lets it run at once.
pub fn waiting_among<'r>(
    roles: impl Iterator<Item = (&'r Arc<Policy>, &'r Arc<ItemApproval>)>,
    kind: Guarded,
    mbean: &ObjectName,
    member: &str,
) -> Option<usize> {
    let mut waiting = None;
    for (i, (policy, approval)) in roles.enumerate() {
        let allows = match kind {
            Guarded::Exec => policy.exec_allowed(mbean, member).allowed,
            Guarded::Write => policy.write_allowed(mbean, member).allowed,
        };
        if !allows {
            continue;
        }
        approval.covering(kind, mbean, member)?;
        waiting.get_or_insert(i);
    }
    waiting
}

/// The rule of `role` that makes `request` wait, for messages.
pub fn rule_text(role: &Role, request: &Request) -> String {
    let found = match &request.command {
        Command::Exec(e) => role
            .approval
            .covering(Guarded::Exec, &e.mbean, &e.operation),
        Command::Write(w) => role
            .approval
            .covering(Guarded::Write, &w.mbean, &w.attribute),
        _ => None,
    };
    format!(
        "role {}: approval_required \"{}\"",
        role.name,
        found.map_or("?", |r| r.text.as_str())
    )
}

/// The exact item an approval is for, as JSON text: the target, the type,
/// the MBean and the operation with its arguments or the attribute (and
/// path) with its value, each argument and value as the exact text sent
/// to the agent (so `1.00000000000000000001` and `…02` are two items:
/// agents take the digits as sent). Anything that differs is another
/// item. `None` for other types.
pub fn item_key(target: &str, request: &Request) -> Option<String> {
    #[derive(serde::Serialize)]
    struct ExecKey<'a> {
        target: &'a str,
        #[serde(rename = "type")]
        kind: &'static str,
        mbean: &'a str,
        operation: &'a str,
        arguments: Vec<&'a RawValue>,
    }
    #[derive(serde::Serialize)]
    struct WriteKey<'a> {
        target: &'a str,
        #[serde(rename = "type")]
        kind: &'static str,
        mbean: &'a str,
        attribute: &'a str,
        path: &'a Option<String>,
        value: &'a RawValue,
    }
    let key = match &request.command {
        Command::Exec(e) => serde_json::to_string(&ExecKey {
            target,
            kind: "exec",
            mbean: e.mbean.as_str(),
            operation: &e.operation,
            arguments: e.arguments.iter().map(|a| a.as_raw()).collect(),
        }),
        Command::Write(w) => serde_json::to_string(&WriteKey {
            target,
            kind: "write",
            mbean: w.mbean.as_str(),
            attribute: &w.attribute,
            path: &w.path,
            value: w.value.as_raw(),
        }),
        _ => return None,
    };
    Some(key.expect("an item key serialises"))
}

/// The answer of an item that waits for approval request `id`.
pub fn waiting(id: &str, why: &str, pending: bool) -> ProtocolError {
    let state = if pending {
        "waits for approval"
    } else {
        "needs approval"
    };
    ProtocolError::new(
        403,
        APPROVAL_REQUIRED,
        format!(
            "This item {state} ({why}): access request {id} asks for it; \
             once approved, send exactly this item again (GET /jmxgate/access/requests/{id})"
        ),
    )
}

/// The answer of a write or exec on an MBean pattern that matches an MBean
/// where it waits for approval (`why`): approval is given for one
/// MBean's item, so no request is made for a pattern.
pub fn pattern_refused(why: &str, matched: &ObjectName) -> ProtocolError {
    ProtocolError::new(
        403,
        APPROVAL_REQUIRED,
        format!(
            "This item needs approval on {matched}, which its MBean pattern matches ({why}); \
             approval is given per MBean: send it to that MBean to ask for it"
        ),
    )
}

/// The answer of such an item sent to a group of targets: approval is
/// given for one target's item, so no request is made for a fan-out.
pub fn fan_out_refused(why: &str) -> ProtocolError {
    ProtocolError::new(
        403,
        APPROVAL_REQUIRED,
        format!(
            "This item needs approval ({why}), which is given per target: \
             send it to one target to ask for it"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::{AccessConfig, AccessControl, RoleConfig};

    fn roles(text: &str) -> AccessControl {
        #[derive(serde::Deserialize)]
        struct File {
            roles: Vec<RoleConfig>,
        }
        let file: File = toml::from_str(text).unwrap();
        AccessControl::new(&file.roles, &AccessConfig::default()).unwrap()
    }

    fn exec(mbean: &str, op: &str, args: &str) -> Request {
        let body =
            format!(r#"{{"type":"exec","mbean":"{mbean}","operation":"{op}","arguments":{args}}}"#);
        crate::pipeline::parse::parse_post(body.as_bytes(), None, 1)
            .unwrap()
            .items
            .remove(0)
            .parsed
            .unwrap()
            .request
    }

    const ROLES: &str = r#"
        [[roles]]
        name = "leads"
        targets = ["*"]
        [[roles]]
        name = "ops"
        targets = ["*"]
        approvers = ["leads"]
        approval_required = ["exec java.lang:type=Memory gc", "write java.util.logging:type=Logging *",
                             "exec java.util.logging:type=Logging setLoggerLevel"]
        [[roles]]
        name = "free"
        targets = ["*"]
    "#;

    fn held<'a>(access: &'a AccessControl, names: &[&str]) -> Vec<&'a Arc<Role>> {
        access
            .roles()
            .iter()
            .filter(|r| names.contains(&r.name.as_str()))
            .collect()
    }

    #[test]
    fn a_guarded_item_waits_unless_another_role_allows_it_freely() {
        let access = roles(ROLES);
        let gc = exec("java.lang:type=Memory", "gc", "[]");
        assert_eq!(
            waits_for(&held(&access, &["ops"]), &gc).map(|r| r.name.clone()),
            Some("ops".to_string())
        );
        assert!(waits_for(&held(&access, &["ops", "free"]), &gc).is_none());
        let other = exec("java.lang:type=Threading", "resetPeakThreadCount", "[]");
        assert!(waits_for(&held(&access, &["ops"]), &other).is_none());
        // A pattern is settled per matching MBean when it runs.
        let pattern = exec("java.lang:*", "gc", "[]");
        assert!(waits_for(&held(&access, &["ops"]), &pattern).is_none());
    }

    #[test]
    fn a_read_only_role_beside_a_guarded_one_lets_no_pattern_through() {
        let dir = tempfile::tempdir().unwrap();
        let read_only = dir.path().join("read-only.xml");
        std::fs::write(
            &read_only,
            "<restrict><commands><command>read</command></commands></restrict>",
        )
        .unwrap();
        let text = format!(
            "{ROLES}\n[[roles]]\nname = \"viewer\"\ntargets = [\"*\"]\npolicy = \"{}\"\n",
            read_only.display()
        );
        let access = roles(&text);
        let level = |mbean: &str| exec(mbean, "setLoggerLevel", r#"["global","FINE"]"#);
        // Named: the read-only role allows no exec, so it waits for ops'
        // approval as if ops were held alone.
        let named = level("java.util.logging:type=Logging");
        let waits = waits_for(&held(&access, &["ops", "viewer"]), &named);
        assert_eq!(waits.map(|r| r.name.clone()), Some("ops".to_string()));
        // A pattern: settled on the MBeans it matches when it runs.
        let pattern = level("java.util.logging:type=Loggin*");
        assert!(waits_for(&held(&access, &["ops", "viewer"]), &pattern).is_none());
        let logging = ObjectName::parse("java.util.logging:type=Logging").unwrap();
        let other = ObjectName::parse("java.lang:type=Memory").unwrap();
        let grant = super::super::Grant::of_roles(&held(&access, &["ops", "viewer"]));
        let refused = super::super::expand::check_pattern_matches(
            &grant,
            &pattern.command,
            &[other.clone(), logging.clone()],
        )
        .unwrap_err();
        assert_eq!(refused.error.error_type, APPROVAL_REQUIRED);
        assert!(
            refused
                .error
                .message
                .contains("java.util.logging:type=Logging"),
            "{}",
            refused.error.message
        );
        // Matching no guarded MBean, it runs; a role that may run it
        // freely lets it run everywhere.
        super::super::expand::check_pattern_matches(&grant, &pattern.command, &[other]).unwrap();
        let free = super::super::Grant::of_roles(&held(&access, &["ops", "free"]));
        super::super::expand::check_pattern_matches(&free, &pattern.command, &[logging]).unwrap();
    }

    #[test]
    fn the_item_key_holds_everything_that_makes_it_this_item() {
        let a = exec("java.lang:type=Memory", "gc", "[]");
        let b = exec("java.lang:type=Memory", "gc", "[ ]");
        assert_eq!(item_key("t1", &a), item_key("t1", &b));
        assert_ne!(item_key("t1", &a), item_key("t2", &a));
        let x = exec(
            "java.util.logging:type=Logging",
            "setLoggerLevel",
            r#"["a","FINE"]"#,
        );
        let y = exec(
            "java.util.logging:type=Logging",
            "setLoggerLevel",
            r#"["a","ALL"]"#,
        );
        assert_ne!(item_key("t1", &x), item_key("t1", &y));
        // Numbers digit for digit, as the agent receives them.
        let one = exec("d:type=T", "set", "[1.00000000000000000001]");
        let other = exec("d:type=T", "set", "[1.00000000000000000002]");
        assert_ne!(item_key("t1", &one), item_key("t1", &other));
        assert!(item_key("t1", &one)
            .unwrap()
            .contains("[1.00000000000000000001]"));
        let sent = crate::protocol::serialize_bulk(&[one]);
        assert!(String::from_utf8(sent)
            .unwrap()
            .contains("[1.00000000000000000001]"));
    }
}
