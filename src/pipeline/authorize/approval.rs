//! Four-eyes, the pure part: whether an allowed write or operation must
//! wait for a second person's yes (`approval_required` of the roles that
//! allow it), and the exact item an approval is for. The store lookups
//! that settle it are the access-requests door's (`access_requests/`).

use std::sync::Arc;

use serde_json::json;

use crate::access::Role;
use crate::elevation::Guarded;
use crate::protocol::{Command, ProtocolError, Request};

/// The error type of an item that waits for approval.
pub const APPROVAL_REQUIRED: &str = "jmxgate.ApprovalRequired";

/// The role whose approval an allowed item waits for, or `None` when it
/// runs at once: when it is no write or exec, or when some role that
/// allows it (`passing`: the roles reaching its target whose request
/// checks passed) has no rule covering it. A caller holding a role that
/// may run it freely is not slowed down by another that may not.
pub fn waits_for(passing: &[&Arc<Role>], request: &Request) -> Option<Arc<Role>> {
    let (kind, mbean, member) = match &request.command {
        Command::Exec(e) => (Guarded::Exec, &e.mbean, e.operation.as_str()),
        Command::Write(w) => (Guarded::Write, &w.mbean, w.attribute.as_str()),
        _ => return None,
    };
    let mut waiting = None;
    for role in passing {
        // A pattern's MBeans are checked on the agent: every role counts.
        let allows = mbean.is_pattern()
            || match kind {
                Guarded::Exec => role.policy.exec_allowed(mbean, member).allowed,
                Guarded::Write => role.policy.write_allowed(mbean, member).allowed,
            };
        if !allows {
            continue;
        }
        // Some role allows it with no rule covering it: it runs at once.
        role.approval.covering(kind, mbean, member)?;
        waiting.get_or_insert_with(|| Arc::clone(role));
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

/// The exact item an approval is for, as canonical JSON text: the target,
/// the type, the MBean and the operation with its arguments or the
/// attribute (and path) with its value. Anything that differs is another
/// item. `None` for other types.
pub fn item_key(target: &str, request: &Request) -> Option<String> {
    let value = |text: &str| {
        serde_json::from_str::<serde_json::Value>(text).unwrap_or(serde_json::Value::Null)
    };
    let key = match &request.command {
        Command::Exec(e) => json!({
            "target": target,
            "type": "exec",
            "mbean": e.mbean.as_str(),
            "operation": e.operation,
            "arguments": e.arguments.iter().map(|a| value(a.as_str())).collect::<Vec<_>>(),
        }),
        Command::Write(w) => json!({
            "target": target,
            "type": "write",
            "mbean": w.mbean.as_str(),
            "attribute": w.attribute,
            "path": w.path,
            "value": value(w.value.as_str()),
        }),
        _ => return None,
    };
    Some(key.to_string())
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
        approval_required = ["exec java.lang:type=Memory gc", "write java.util.logging:type=Logging *"]
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
        // A pattern might match the guarded MBean: it waits.
        let pattern = exec("java.lang:*", "gc", "[]");
        assert!(waits_for(&held(&access, &["ops"]), &pattern).is_some());
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
    }
}
