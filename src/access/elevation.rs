//! Just-in-time access, the rules: who may ask for a role, who may review,
//! how long a grant may last, and which items need a second person's yes
//! before they run. Pure: the requests themselves live in the shared
//! store (`store/`), the HTTP door and the pipeline ask this module.

use std::time::Duration;

use super::config::RoleConfig;
pub use super::config::{ReasonRule, DEFAULT_APPROVED_USE_WITHIN, DEFAULT_MAX_DURATION};
use crate::protocol::object_name::ObjectName;

/// The longest `max_duration` allowed: standing access by another name
/// is what just-in-time access is meant to end.
pub const MOST_MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// What an `approval_required` entry covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guarded {
    Exec,
    Write,
}

/// One `approval_required` entry: `exec <MBean or pattern> <operation|*>`
/// or `write <MBean or pattern> <attribute|*>`.
#[derive(Debug, Clone)]
pub struct ApprovalRule {
    /// The entry as configured, for messages.
    pub text: String,
    pub kind: Guarded,
    pub mbean: ObjectName,
    /// `None`: every operation or attribute (`*`).
    pub member: Option<String>,
}

impl ApprovalRule {
    pub fn parse(entry: &str) -> Result<ApprovalRule, String> {
        let mut words = entry.split_whitespace();
        let kind = match words.next() {
            Some("exec") => Guarded::Exec,
            Some("write") => Guarded::Write,
            other => {
                return Err(format!(
                    "\"{entry}\": starts with {}, not exec or write",
                    other.map_or("nothing".to_string(), |w| format!("\"{w}\""))
                ))
            }
        };
        let (Some(mbean), Some(member), None) = (words.next(), words.next(), words.next()) else {
            return Err(format!(
                "\"{entry}\": not \"{} <MBean or pattern> <{}|*>\"",
                if kind == Guarded::Exec {
                    "exec"
                } else {
                    "write"
                },
                if kind == Guarded::Exec {
                    "operation"
                } else {
                    "attribute"
                }
            ));
        };
        let mbean = ObjectName::parse(mbean).map_err(|e| format!("\"{entry}\": {e}"))?;
        Ok(ApprovalRule {
            text: entry.split_whitespace().collect::<Vec<_>>().join(" "),
            kind,
            mbean,
            member: (member != "*").then(|| member.to_string()),
        })
    }

    /// Whether an item (`kind` on `mbean`, its operation or attribute
    /// `member`; an operation named with its signature, `op(int)`,
    /// counts as `op`) needs approval under this rule.
    pub fn covers(&self, kind: Guarded, mbean: &ObjectName, member: &str) -> bool {
        let bare = member.split('(').next().unwrap_or(member);
        kind == self.kind
            && self.mbean.matches(mbean)
            && self.member.as_deref().is_none_or(|m| m == bare)
    }
}

/// A role's four-eyes rules, compiled: its `approval_required` entries
/// with the approvals they need and how long an approved item may wait.
#[derive(Debug, Clone, Default)]
pub struct ItemApproval {
    pub rules: Vec<ApprovalRule>,
    pub approvals: u32,
    pub use_within: Duration,
}

impl ItemApproval {
    /// The role's rules; an entry that doesn't parse is left out (the
    /// configuration check refuses such a file before it is used).
    pub fn of(config: &RoleConfig) -> ItemApproval {
        ItemApproval {
            rules: config
                .approval_required
                .iter()
                .filter_map(|e| ApprovalRule::parse(e).ok())
                .collect(),
            approvals: config.approvals.max(1),
            use_within: config.approved_use_within,
        }
    }

    /// The rule that makes an item (`kind` on `mbean`, its `member`)
    /// wait for approval under this role. For an MBean pattern, any rule
    /// of that kind and member: which MBeans it matches is known only on
    /// the agent, so it waits if it might touch a guarded one.
    pub fn covering(
        &self,
        kind: Guarded,
        mbean: &ObjectName,
        member: &str,
    ) -> Option<&ApprovalRule> {
        let bare = member.split('(').next().unwrap_or(member);
        self.rules.iter().find(|r| {
            if mbean.is_pattern() {
                r.kind == kind && r.member.as_deref().is_none_or(|m| m == bare)
            } else {
                r.covers(kind, mbean, member)
            }
        })
    }
}

/// Every problem of the roles' just-in-time keys, each named by its key.
pub fn problems(roles: &[RoleConfig]) -> Vec<String> {
    let mut problems = Vec::new();
    let known = |name: &str| roles.iter().any(|r| r.name == name);
    for (i, r) in roles.iter().enumerate() {
        let key = format!("roles[{i}]");
        for (field, names) in [
            ("requestable_by", &r.requestable_by),
            ("approvers", &r.approvers),
        ] {
            for name in names.iter().filter(|n| !known(n)) {
                problems.push(format!("{key}.{field}: no role is named \"{name}\""));
            }
        }
        let reviewed = !r.requestable_by.is_empty() || !r.approval_required.is_empty();
        if reviewed && r.approvers.is_empty() {
            problems.push(format!(
                "{key}.approvers: \"{}\" has requestable_by or approval_required, so it needs roles whose holders may approve",
                r.name
            ));
        }
        if r.approvals == 0 {
            problems.push(format!(
                "{key}.approvals: 0 would approve without anyone; use 1 or more"
            ));
        }
        if r.max_duration.is_zero() || r.max_duration > MOST_MAX_DURATION {
            problems.push(format!(
                "{key}.max_duration: {} is not between 1s and {}",
                humantime::format_duration(r.max_duration),
                humantime::format_duration(MOST_MAX_DURATION)
            ));
        }
        if r.approved_use_within.is_zero() {
            problems.push(format!(
                "{key}.approved_use_within: 0s would let no approved item run; use 1s or more"
            ));
        }
        if let Some(url) = &r.notify_url {
            // Not echoed: such a URL often holds a token.
            let ok = url::Url::parse(url.expose())
                .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
            if !ok {
                problems.push(format!("{key}.notify_url: not an http:// or https:// URL"));
            }
        }
        for (j, entry) in r.approval_required.iter().enumerate() {
            if let Err(why) = ApprovalRule::parse(entry) {
                problems.push(format!("{key}.approval_required[{j}]: {why}"));
            }
        }
    }
    problems
}

/// Why a request or review is refused: said to the caller as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No such role, or the caller may not ask for it (the same answer,
    /// so a caller learns nothing of roles it can't request).
    NotRequestable(String),
    /// The duration is over the role's `max_duration`, or none at all.
    Duration(String),
    /// The role needs a reason and none was given.
    ReasonRequired,
    /// The reviewer is the requester.
    OwnRequest,
    /// The reviewer holds none of the role's approver roles now.
    NotApprover,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NotRequestable(role) => {
                write!(f, "role \"{role}\" is not one you may request")
            }
            Refusal::Duration(why) => f.write_str(why),
            Refusal::ReasonRequired => {
                f.write_str("this role needs a reason: say why in \"reason\"")
            }
            Refusal::OwnRequest => f.write_str("you cannot review your own request"),
            Refusal::NotApprover => f.write_str("you hold no role that may review this request"),
        }
    }
}

/// Checks a request for `role` by a caller holding `held` roles, for
/// `duration`, with `reason`; the role's configuration when it may.
pub fn check_request<'a>(
    roles: &'a [RoleConfig],
    role: &str,
    held: &[String],
    duration: Duration,
    reason: Option<&str>,
) -> Result<&'a RoleConfig, Refusal> {
    let config = roles
        .iter()
        .find(|r| r.name == role && r.requestable_by.iter().any(|by| held.contains(by)))
        .ok_or_else(|| Refusal::NotRequestable(role.to_string()))?;
    if duration.is_zero() || duration > config.max_duration {
        return Err(Refusal::Duration(format!(
            "duration {} is not between 1s and the role's max_duration {}",
            humantime::format_duration(duration),
            humantime::format_duration(config.max_duration)
        )));
    }
    if config.reason == ReasonRule::Required && reason.is_none_or(|r| r.trim().is_empty()) {
        return Err(Refusal::ReasonRequired);
    }
    Ok(config)
}

/// Whether a reviewer holding `held` roles now may review a request for
/// `config`'s role; `own`: the request is the reviewer's own (by identity
/// or by the name shown).
pub fn check_review(config: &RoleConfig, own: bool, held: &[String]) -> Result<(), Refusal> {
    if own {
        return Err(Refusal::OwnRequest);
    }
    if !config.approvers.iter().any(|a| held.contains(a)) {
        return Err(Refusal::NotApprover);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    fn roles(text: &str) -> Vec<RoleConfig> {
        #[derive(Deserialize)]
        struct File {
            roles: Vec<RoleConfig>,
        }
        toml::from_str::<File>(text).unwrap().roles
    }

    const ROLES: &str = r#"
        [[roles]]
        name = "developers"
        targets = ["*"]
        [[roles]]
        name = "sre-leads"
        targets = ["*"]
        [[roles]]
        name = "ops"
        targets = ["orders-*"]
        requestable_by = ["developers"]
        approvers = ["sre-leads"]
        approvals = 2
        max_duration = "1h"
        reason = "required"
        approval_required = ["exec java.lang:type=Memory gc", "write java.util.logging:type=Logging *"]
    "#;

    #[test]
    fn a_well_formed_requestable_role_has_no_problems_and_defaults_are_sane() {
        let roles = roles(ROLES);
        assert!(problems(&roles).is_empty(), "{:?}", problems(&roles));
        let plain = &roles[0];
        assert!(plain.requestable_by.is_empty());
        assert_eq!(plain.approvals, 1);
        assert_eq!(plain.max_duration, DEFAULT_MAX_DURATION);
        assert_eq!(plain.approved_use_within, DEFAULT_APPROVED_USE_WITHIN);
        assert_eq!(plain.reason, ReasonRule::Optional);
    }

    #[test]
    fn each_bad_key_is_named() {
        let roles = roles(
            r#"
            [[roles]]
            name = "ops"
            targets = ["*"]
            requestable_by = ["nobody"]
            approvals = 0
            max_duration = "30d"
            approved_use_within = "0s"
            approval_required = ["read java.lang:type=Memory HeapMemoryUsage", "exec java.lang:type=Memory", "exec not-a-name gc"]
        "#,
        );
        let found = problems(&roles);
        for expected in [
            "roles[0].requestable_by: no role is named \"nobody\"",
            "roles[0].approvers: \"ops\" has requestable_by",
            "roles[0].approvals: 0",
            "roles[0].max_duration: 30days",
            "roles[0].approved_use_within: 0s",
            "roles[0].approval_required[0]: \"read java.lang:type=Memory HeapMemoryUsage\": starts with \"read\"",
            "roles[0].approval_required[1]: \"exec java.lang:type=Memory\": not \"exec <MBean or pattern> <operation|*>\"",
            "roles[0].approval_required[2]: \"exec not-a-name gc\": ",
        ] {
            assert!(
                found.iter().any(|p| p.starts_with(expected)),
                "{expected:?} not in {found:#?}"
            );
        }
        assert_eq!(found.len(), 8, "{found:#?}");
    }

    #[test]
    fn only_the_named_roles_may_ask_within_the_maximum_and_with_a_reason() {
        let roles = roles(ROLES);
        let dev = ["developers".to_string()];
        let half_hour = Duration::from_secs(1800);
        let ok = check_request(&roles, "ops", &dev, half_hour, Some("INC-1234")).unwrap();
        assert_eq!(ok.name, "ops");
        // Not requestable, not by these roles, or no such role: one answer.
        for (role, held) in [
            ("ops", &["sre-leads".to_string()][..]),
            ("developers", &dev[..]),
            ("nope", &dev[..]),
        ] {
            assert_eq!(
                check_request(&roles, role, held, half_hour, Some("x")).err(),
                Some(Refusal::NotRequestable(role.into()))
            );
        }
        assert!(matches!(
            check_request(&roles, "ops", &dev, Duration::from_secs(3601), Some("x")),
            Err(Refusal::Duration(_))
        ));
        assert!(matches!(
            check_request(&roles, "ops", &dev, Duration::ZERO, Some("x")),
            Err(Refusal::Duration(_))
        ));
        for reason in [None, Some(""), Some("  ")] {
            assert_eq!(
                check_request(&roles, "ops", &dev, half_hour, reason).err(),
                Some(Refusal::ReasonRequired)
            );
        }
    }

    #[test]
    fn a_reviewer_is_never_the_requester_and_holds_an_approver_role_now() {
        let roles = roles(ROLES);
        let ops = &roles[2];
        let lead = ["sre-leads".to_string()];
        assert_eq!(check_review(ops, false, &lead), Ok(()));
        assert_eq!(check_review(ops, true, &lead), Err(Refusal::OwnRequest));
        assert_eq!(
            check_review(ops, false, &["developers".to_string()]),
            Err(Refusal::NotApprover)
        );
    }

    #[test]
    fn approval_rules_cover_their_type_mbean_and_member() {
        let gc = ApprovalRule::parse("exec java.lang:type=Memory gc").unwrap();
        let logging = ApprovalRule::parse("write java.util.logging:type=* *").unwrap();
        let memory = ObjectName::parse("java.lang:type=Memory").unwrap();
        let log = ObjectName::parse("java.util.logging:type=Logging").unwrap();
        assert!(gc.covers(Guarded::Exec, &memory, "gc"));
        assert!(gc.covers(Guarded::Exec, &memory, "gc()"));
        assert!(!gc.covers(Guarded::Exec, &memory, "gcx"));
        assert!(!gc.covers(Guarded::Write, &memory, "gc"));
        assert!(!gc.covers(Guarded::Exec, &log, "gc"));
        assert!(logging.covers(Guarded::Write, &log, "LoggerLevel"));
        assert!(!logging.covers(Guarded::Exec, &log, "setLoggerLevel"));
    }
}
