//! Step 5, authorize: may this principal run this item on this target?
//! An item is allowed when one of the principal's roles reaches its target
//! and that role's policy admits it. A denied item gets status 403 with
//! Jolokia's wording and never reaches an agent.
//!
//! Requests whose effect can't be judged from the request alone (an
//! ObjectName pattern, a read of all attributes) are allowed with a
//! [`Plan`] that dispatch carries out: it asks the agent which MBeans and
//! attributes are concerned and runs only the allowed part. list and search
//! answers are filtered after the fact (see [`filter`]).

pub mod approval;
pub mod expand;
pub mod filter;
pub mod rbac;

use std::sync::Arc;

use crate::access::elevation::{Guarded, ItemApproval};
use crate::access::{AccessControl, Role};
use crate::policy::{Decision, Policy};
use crate::protocol::{Attributes, Command, ObjectName, ProtocolError, Request};

use super::authenticate::Principal;
use super::route::Destination;
use crate::fleet::Target;

/// What Jolokia calls the request facts the restrictor sees.
#[derive(Debug, Clone, Copy)]
pub struct RequestFacts<'a> {
    /// `GET` or `POST`.
    pub method: &'a str,
    /// The client chain for `<remote>` (see `AccessControl::client_chain`).
    pub chain: &'a [String],
    /// `Origin`, or `Referer` when there is none.
    pub origin: Option<&'a str>,
    /// The listener's scheme, `http` or `https`.
    pub scheme: &'a str,
    /// A read of named attributes with `ignoreErrors` answers each denied
    /// one in its place even when none or one is allowed (the MCP door: a
    /// tool's answer has one shape however many were denied). The Jolokia
    /// door keeps an agent's restrictor behaviour: the item is refused.
    pub denied_reads_in_place: bool,
}

/// The policies an allowed item runs under: those of every role that
/// reaches its target and admits the request. A check passes if any of
/// them allows it.
///
/// Shared, not copied: a fan-out's targets reached by the same roles all
/// hold the one grant (at 100,000 targets, copies were most of a
/// fan-out's memory).
#[derive(Debug, Clone, Default)]
pub struct Grant(Arc<Granted>);

#[derive(Debug, Default)]
struct Granted {
    policies: Vec<Arc<Policy>>,
    roles: Vec<String>,
    /// Each role's four-eyes rules, beside its policy: a pattern's write
    /// or exec is settled per matching MBean when it runs, and that needs
    /// them as much as the policies.
    approvals: Vec<Arc<ItemApproval>>,
    /// No roles configured: no policy at all.
    open: bool,
}

impl Grant {
    pub fn open() -> Grant {
        Grant(Arc::new(Granted {
            open: true,
            ..Granted::default()
        }))
    }

    /// The policies of `roles` (by name, in the same order), with no
    /// four-eyes rules.
    pub fn of(policies: Vec<Arc<Policy>>, roles: Vec<String>) -> Grant {
        Grant(Arc::new(Granted {
            policies,
            roles,
            approvals: Vec::new(),
            open: false,
        }))
    }

    /// The policies and four-eyes rules of `roles`, in their order.
    pub fn of_roles(roles: &[&Arc<Role>]) -> Grant {
        Grant(Arc::new(Granted {
            policies: roles.iter().map(|r| r.policy.clone()).collect(),
            roles: roles.iter().map(|r| r.name.clone()).collect(),
            approvals: roles.iter().map(|r| r.approval.clone()).collect(),
            open: false,
        }))
    }

    /// Whether `kind` of `member` on the concrete MBean `name` waits for
    /// a second person's yes under this grant: the text of the rule and
    /// its role that make it wait (see [`approval::waiting_among`]).
    pub fn waits_for(&self, kind: Guarded, name: &ObjectName, member: &str) -> Option<String> {
        if self.0.open || self.0.approvals.is_empty() {
            return None;
        }
        let roles = self.0.policies.iter().zip(&self.0.approvals);
        let i = approval::waiting_among(roles, kind, name, member)?;
        let rule = self.0.approvals[i].covering(kind, name, member)?;
        Some(format!(
            "role {}: approval_required \"{}\"",
            self.0.roles[i], rule.text
        ))
    }

    pub fn is_open(&self) -> bool {
        self.0.open
    }

    /// The roles whose policies it holds.
    pub fn roles(&self) -> &[String] {
        &self.0.roles
    }

    /// Whether `other` is this very grant (shared, not an equal copy).
    pub fn same_as(&self, other: &Grant) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The first policy's allowance, else the first denial; its rule
    /// names the role whose policy decided (when the grant has roles), so
    /// an explanation or a refusal says which role and which rule.
    fn any(&self, check: impl Fn(&Policy) -> Decision) -> Decision {
        if self.0.open {
            return Decision::allow("no roles configured: the gateway is open");
        }
        let of_role = |i: usize, mut d: Decision| {
            if let Some(role) = self.0.roles.get(i) {
                d.rule = format!("role {role}: {}", d.rule);
            }
            d
        };
        let mut first_denial = None;
        for (i, p) in self.0.policies.iter().enumerate() {
            let d = check(p);
            if d.allowed {
                return of_role(i, d);
            }
            if first_denial.is_none() {
                first_denial = Some(of_role(i, d));
            }
        }
        first_denial.unwrap_or_else(|| Decision::deny("no role grants access"))
    }

    pub fn read(&self, name: &ObjectName, attribute: &str) -> Decision {
        self.any(|p| p.read_allowed(name, attribute))
    }

    pub fn write(&self, name: &ObjectName, attribute: &str) -> Decision {
        self.any(|p| p.write_allowed(name, attribute))
    }

    pub fn exec(&self, name: &ObjectName, operation: &str) -> Decision {
        self.any(|p| p.exec_allowed(name, operation))
    }

    /// Shown in list and search answers: not hidden by `<filter>` and
    /// touchable in some way, under some role.
    pub fn visible(&self, name: &ObjectName) -> bool {
        self.0.open
            || self
                .0
                .policies
                .iter()
                .any(|p| !p.hidden(name) && p.mbean_visible(name))
    }
}

/// A role a caller held through an access request (`role.granted_by`)
/// that has expired or been revoked.
#[derive(Debug, Clone)]
pub(crate) struct EndedGrant {
    pub(crate) role: Arc<Role>,
    pub(crate) revoked: bool,
}

/// How dispatch must run an allowed item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Send as it is.
    Forward,
    /// Send, then drop invisible MBeans from the search answer (and show
    /// the gateway's ACL MBean to an ACL search, see [`rbac`]).
    FilterSearch,
    /// Hawtio's `canInvoke` on the gateway's ACL MBean: answered by the
    /// gateway from the grant, never sent.
    Rbac,
    /// Send, then drop invisible MBeans from the list answer.
    FilterList,
    /// A read of a pattern, of all attributes, or of a list with denied
    /// members under `ignoreErrors`: resolve MBeans and attributes first,
    /// then read only allowed (MBean, attribute) pairs.
    ExpandRead,
    /// A write or exec on a pattern: every MBean it matches must be allowed.
    CheckPattern,
}

impl Plan {
    /// The plan's name in explain answers.
    pub fn name(self) -> &'static str {
        match self {
            Plan::Forward => "forward",
            Plan::FilterSearch => "forward, then filter the search answer",
            Plan::FilterList => "forward, then filter the list answer",
            Plan::Rbac => "answered by the gateway (Hawtio RBAC), never sent",
            Plan::ExpandRead => {
                "resolve MBeans and attributes on the agent, read only allowed pairs"
            }
            Plan::CheckPattern => {
                "resolve the pattern on the agent, run only if every match is allowed and none waits for approval"
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct Allowed {
    pub plan: Plan,
    pub grant: Grant,
    /// The role whose approval this item waits for (four-eyes), if any.
    pub approval: Option<Arc<Role>>,
    /// The rule that allowed it (for explain and audit); shared like the
    /// grant.
    pub rule: Arc<str>,
}

#[derive(Debug, Clone)]
pub struct Denied {
    pub error: ProtocolError,
    /// The rule that decided.
    pub rule: String,
}

fn forbidden(message: String, rule: impl Into<String>) -> Denied {
    Denied {
        error: ProtocolError::new(403, "java.lang.SecurityException", message),
        rule: rule.into(),
    }
}

/// The refusal for a caller that holds no role: the same whatever target
/// it names, so it tells nothing about which exist.
pub fn no_role(principal: &Principal) -> Denied {
    forbidden(
        format!("Principal {} has no role on this gateway", principal.name),
        "no role for this principal",
    )
}

/// Decides one item. `roles` are the principal's (`AccessControl::roles_of`,
/// looked up once per request).
pub fn authorize(
    access: &AccessControl,
    principal: &Principal,
    roles: &[Arc<Role>],
    facts: &RequestFacts<'_>,
    request: &Request,
    destination: &Destination,
) -> Result<Allowed, Denied> {
    if access.is_open() {
        return Ok(Allowed {
            plan: if rbac::query(request).is_some() {
                Plan::Rbac
            } else {
                Plan::Forward
            },
            grant: Grant::open(),
            approval: None,
            rule: "no roles configured: the gateway is open".into(),
        });
    }
    if roles.is_empty() {
        return Err(no_role(principal));
    }
    let reaching: Vec<_> = roles
        .iter()
        .filter(|r| match destination {
            Destination::Gateway => true,
            Destination::Agent(t) => r.reaches(t),
        })
        .collect();
    if let (true, Destination::Agent(t)) = (reaching.is_empty(), destination) {
        // As for a name that doesn't exist: nothing tells the caller it does.
        return Err(Denied {
            error: super::route::unknown_target(&t.name),
            rule: format!("no role of {} reaches target {}", principal.name, t.name),
        });
    }

    // Request-level checks, as Jolokia's agent makes them before anything.
    let mut passing = Vec::new();
    let mut first_denial = None;
    let mut refused_early = Vec::new();
    for role in reaching {
        match request_checks(&role.policy, facts, request) {
            Ok(()) => passing.push(role),
            Err(d) => {
                let d = Denied {
                    rule: format!("role {}: {}", role.name, d.rule),
                    ..d
                };
                first_denial.get_or_insert(d.clone());
                refused_early.push((role, d));
            }
        }
    }
    if passing.is_empty() {
        return Err(closest(&refused_early, request, facts)
            .or(first_denial)
            .expect("at least one role was checked"));
    }
    let grant = Grant::of_roles(&passing);
    let (plan, rule) = match decide_command(&grant, request, facts.denied_reads_in_place) {
        Ok(decided) => decided,
        // A role refused on the request (its method, its client) that
        // would allow the command came closer than those whose policy
        // refuses the command itself: its rule is the one to fix.
        Err(denied) => return Err(closest(&refused_early, request, facts).unwrap_or(denied)),
    };
    let rule = match under_grant(&passing, request, facts) {
        Some(ids) => format!("{rule} (under access request {ids})"),
        None => rule,
    };
    Ok(Allowed {
        plan,
        grant,
        approval: approval::waits_for(&passing, request),
        rule: rule.into(),
    })
}

/// What a refusal adds for a caller who may ask for access: that an
/// access request it held until lately would have allowed the item and
/// ended (expired or revoked), else that a role it may request allows
/// it; and how to ask. `None` when neither would allow it, so the hint
/// never names a role that would not help. `standing` are the names of
/// the caller's own roles (those that may request).
pub(crate) fn how_to_ask(
    access: &AccessControl,
    principal: &Principal,
    standing: &[String],
    ended: &[EndedGrant],
    facts: &RequestFacts<'_>,
    request: &Request,
    destination: &Destination,
) -> Option<String> {
    let allows = |role: &Arc<Role>| {
        let alone = std::slice::from_ref(role);
        authorize(access, principal, alone, facts, request, destination).is_ok()
    };
    let ask = |role: &str| format!("`jmxgate access request {role} --reason ...`");
    if let Some(g) = ended.iter().find(|g| allows(&g.role)) {
        let id = g.role.granted_by.as_deref().unwrap_or_default();
        let how = if g.revoked { "was revoked" } else { "expired" };
        return Some(format!(
            "your access request {id} for role {} allowed this and {how}: ask again with {}",
            g.role.name,
            ask(&g.role.name)
        ));
    }
    access
        .role_configs()
        .iter()
        .filter(|r| r.requestable_by.iter().any(|by| standing.contains(by)))
        .filter_map(|r| access.granted_role(&r.name, None, "-"))
        .find(|r| allows(r))
        .map(|r| {
            format!(
                "role {} allows this and you may request it: {}",
                r.name,
                ask(&r.name)
            )
        })
}

/// Of the roles refused on the request as a whole (`<http>`, `<remote>`,
/// `<cors>`), the first whose policy would allow the command itself: its
/// refusal is the one that came closest.
fn closest(
    refused_early: &[(&Arc<Role>, Denied)],
    request: &Request,
    facts: &RequestFacts<'_>,
) -> Option<Denied> {
    refused_early
        .iter()
        .find(|(role, _)| {
            decide_command(
                &Grant::of_roles(&[*role]),
                request,
                facts.denied_reads_in_place,
            )
            .is_ok()
        })
        .map(|(_, d)| d.clone())
}

/// The access requests (their ids) an allowed item runs under: when the
/// caller's roles without those granted for a time would not allow it.
/// Its rule then names them, so its audit record shows what a grant was
/// used for (`jmxgate audit query --access-request`).
fn under_grant(
    passing: &[&Arc<Role>],
    request: &Request,
    facts: &RequestFacts<'_>,
) -> Option<String> {
    let granted: Vec<&str> = passing
        .iter()
        .filter_map(|r| r.granted_by.as_deref())
        .collect();
    if granted.is_empty() {
        return None;
    }
    let own: Vec<&Arc<Role>> = passing
        .iter()
        .copied()
        .filter(|r| r.granted_by.is_none())
        .collect();
    let allowed_without = !own.is_empty()
        && decide_command(&Grant::of_roles(&own), request, facts.denied_reads_in_place).is_ok();
    (!allowed_without).then(|| granted.join(", "))
}

/// One target of a selector and its decision; a denial is shared like a
/// grant.
pub type TargetDecision = (Arc<Target>, Result<Allowed, Arc<Denied>>);

/// Decides one item for each target a selector reached. The decision
/// depends on the target only through which of the caller's roles reach
/// it, so it is made once per such set of roles and shared: a fan-out to
/// 100,000 targets holds one grant and one rule, not 100,000 copies.
pub fn authorize_each(
    access: &AccessControl,
    principal: &Principal,
    roles: &[Arc<Role>],
    facts: &RequestFacts<'_>,
    request: &Request,
    targets: Vec<Arc<Target>>,
) -> Vec<TargetDecision> {
    let decide = |t: &Arc<Target>| {
        authorize(
            access,
            principal,
            roles,
            facts,
            request,
            &Destination::Agent(t.clone()),
        )
        .and_then(|allowed| match &allowed.approval {
            // Approval is given per target's item: a fan-out asks none.
            Some(role) => {
                let why = approval::rule_text(role, request);
                Err(Denied {
                    error: approval::fan_out_refused(&why),
                    rule: why,
                })
            }
            None => Ok(allowed),
        })
        .map_err(Arc::new)
    };
    // Which roles reach a target, as a bit set (one bit per role).
    let reaching = |t: &Target| -> Option<u64> {
        if roles.len() > 64 {
            return None;
        }
        let mask = roles
            .iter()
            .enumerate()
            .filter(|(_, r)| r.reaches(t))
            .fold(0u64, |m, (i, _)| m | 1 << i);
        // None reaching: the decision names the target; not shared.
        (mask != 0 || access.is_open()).then_some(mask)
    };
    let mut decided: std::collections::HashMap<u64, Result<Allowed, Arc<Denied>>> =
        std::collections::HashMap::new();
    targets
        .into_iter()
        .map(|t| {
            let outcome = match reaching(&t) {
                Some(mask) => decided.entry(mask).or_insert_with(|| decide(&t)).clone(),
                None => decide(&t),
            };
            (t, outcome)
        })
        .collect()
}

/// Decides a request against one policy alone (`jmxgate policy check`).
pub fn check_policy(
    policy: Arc<Policy>,
    facts: &RequestFacts<'_>,
    request: &Request,
) -> Result<Allowed, Denied> {
    request_checks(&policy, facts, request)?;
    let grant = Grant::of(vec![policy], Vec::new());
    decide_command(&grant, request, facts.denied_reads_in_place).map(|(plan, rule)| Allowed {
        plan,
        grant,
        approval: None,
        rule: rule.into(),
    })
}

/// `<http>`, `<remote>`, `<cors>` strict checking, and `<commands>` for the
/// types that have no MBean-level rules.
fn request_checks(
    policy: &Policy,
    facts: &RequestFacts<'_>,
    request: &Request,
) -> Result<(), Denied> {
    let method = policy.http_method_allowed(facts.method);
    if !method.allowed {
        return Err(forbidden(
            format!(
                "HTTP method {} is not allowed according to the installed security policy",
                facts.method
            ),
            method.rule,
        ));
    }
    let chain: Vec<&str> = facts.chain.iter().map(String::as_str).collect();
    let remote = policy.remote_allowed(&chain);
    if !remote.allowed {
        return Err(forbidden(
            format!("No access from client [{}] allowed", chain.join(", ")),
            remote.rule,
        ));
    }
    if !policy.origin_allowed(facts.origin, true) {
        let origin = facts.origin.unwrap_or("null");
        return Err(forbidden(
            format!("Origin {origin} is not allowed to call this agent"),
            "<cors> <strict-checking/>: origin not listed",
        ));
    }
    if let Some(origin) = facts.origin {
        if origin.to_ascii_lowercase().starts_with("https://")
            && facts.scheme == "http"
            && !policy.ignore_scheme()
        {
            return Err(forbidden(
                format!("Secure origin {origin} should not be processed over HTTP"),
                "<cors>: an https origin over http needs <ignore-scheme/>",
            ));
        }
    }
    let kind = request.command.type_name();
    // read, write and exec are decided per attribute and operation, with
    // <commands> choosing between <allow> and <deny> (as in Jolokia).
    if matches!(
        request.command,
        Command::Version(_) | Command::Config(_) | Command::List(_) | Command::Search(_)
    ) {
        let d = policy.type_allowed(kind);
        if !d.allowed {
            return Err(forbidden(
                format!(
                    "Command type {} not allowed due to policy used",
                    kind.to_ascii_uppercase()
                ),
                d.rule,
            ));
        }
    }
    Ok(())
}

pub fn read_denied(attribute: &str, name: &ObjectName, d: Decision) -> Denied {
    forbidden(
        format!("Reading attribute {attribute} is forbidden for MBean {name}"),
        d.rule,
    )
}

/// MBean-level decision under a grant. `denied_in_place`: see
/// [`RequestFacts::denied_reads_in_place`].
pub fn decide_command(
    grant: &Grant,
    request: &Request,
    denied_in_place: bool,
) -> Result<(Plan, String), Denied> {
    let ignore_errors = request.params.flag("ignoreErrors").unwrap_or(false);
    match &request.command {
        Command::Version(_) => Ok((Plan::Forward, "version allowed".into())),
        Command::Config(_) => Ok((Plan::Forward, "config allowed".into())),
        Command::Search(_) => Ok((Plan::FilterSearch, "search allowed; answer filtered".into())),
        Command::Exec(_) if rbac::query(request).is_some() => Ok((
            Plan::Rbac,
            "Hawtio RBAC query: answered by the gateway from the caller's policies".into(),
        )),
        Command::List(_) => Ok((Plan::FilterList, "list allowed; answer filtered".into())),
        Command::Read(r) if r.mbean.is_pattern() || r.attribute == Attributes::All => Ok((
            Plan::ExpandRead,
            "allowed for the (MBean, attribute) pairs the policy admits; checked per MBean when the request runs".into(),
        )),
        Command::Read(r) => {
            let names = match &r.attribute {
                Attributes::One(a) => std::slice::from_ref(a),
                Attributes::Many(list) => list.as_slice(),
                Attributes::All => unreachable!("handled above"),
            };
            let decisions: Vec<Decision> = names.iter().map(|a| grant.read(&r.mbean, a)).collect();
            if let Some((i, d)) = decisions.iter().enumerate().find(|(_, d)| !d.allowed) {
                let any_allowed = decisions.iter().any(|d| d.allowed);
                let in_place = if denied_in_place {
                    matches!(r.attribute, Attributes::Many(_))
                } else {
                    any_allowed && names.len() > 1
                };
                if ignore_errors && in_place {
                    // The audit record's rule must not read "allowed" for
                    // a read that reads nothing.
                    let rule = if any_allowed {
                        format!("partly allowed: {}; denied attributes answered as errors", d.rule)
                    } else {
                        format!(
                            "no attribute allowed: {}; each answered as an error in its place, \
                             nothing sent to the agent",
                            d.rule
                        )
                    };
                    return Ok((Plan::ExpandRead, rule));
                }
                return Err(read_denied(&names[i], &r.mbean, d.clone()));
            }
            Ok((Plan::Forward, decisions.into_iter().map(|d| d.rule).next().unwrap_or_default()))
        }
        Command::Write(w) if w.mbean.is_pattern() => Ok((
            Plan::CheckPattern,
            "allowed only if every MBean the pattern matches is allowed; checked when the request runs".into(),
        )),
        Command::Write(w) => {
            let d = grant.write(&w.mbean, &w.attribute);
            if d.allowed {
                Ok((Plan::Forward, d.rule))
            } else {
                Err(forbidden(
                    format!("Setting attribute {} is forbidden for MBean {}", w.attribute, w.mbean),
                    d.rule,
                ))
            }
        }
        Command::Exec(e) if e.mbean.is_pattern() => Ok((
            Plan::CheckPattern,
            "allowed only if every MBean the pattern matches is allowed; checked when the request runs".into(),
        )),
        Command::Exec(e) => {
            let d = grant.exec(&e.mbean, &e.operation);
            if d.allowed {
                Ok((Plan::Forward, d.rule))
            } else {
                Err(exec_denied(&e.operation, &e.mbean, d))
            }
        }
    }
}

pub fn exec_denied(operation: &str, name: &ObjectName, d: Decision) -> Denied {
    forbidden(
        format!("Operation {operation} forbidden for MBean {name}"),
        d.rule,
    )
}

pub fn write_denied(attribute: &str, name: &ObjectName, d: Decision) -> Denied {
    forbidden(
        format!("Setting attribute {attribute} is forbidden for MBean {name}"),
        d.rule,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Params;
    use serde_json::json;

    fn grant(xml: &str) -> Grant {
        Grant::of(
            vec![Arc::new(Policy::parse(xml).unwrap())],
            vec!["viewer".into()],
        )
    }

    fn read(attribute: serde_json::Value) -> Request {
        let item = json!({"type": "read", "mbean": "d:type=T", "attribute": attribute,
                          "config": {"ignoreErrors": true}});
        Request::from_json(&item, &Params::default()).unwrap().0
    }

    const DENY_SECRET: &str =
        "<restrict><deny><mbean><name>d:type=T</name><attribute>Secret</attribute></mbean></deny></restrict>";

    /// The fleet and roles of `config` (its targets and roles, after a
    /// listener), and a caller signed in with Basic holding `roles`.
    fn holding(config: &str, roles: &[&str]) -> (crate::fleet::Fleet, AccessControl, Principal) {
        let config =
            crate::config::Config::parse(&format!("[server]\nlisten = \"127.0.0.1:0\"\n{config}"))
                .unwrap();
        let fleet = crate::fleet::Fleet::new(&config.targets, &config.target_defaults).unwrap();
        let access = AccessControl::new(&config.roles, &config.access).unwrap();
        let mut principal = Principal::anonymous();
        principal.method = crate::principal::AuthMethod::Basic;
        principal.roles = roles.iter().map(|r| r.to_string()).collect();
        (fleet, access, principal)
    }

    #[test]
    fn targets_reached_by_the_same_roles_share_one_decision() {
        let (fleet, access, principal) = holding(
            "[[targets]]\nname = \"a-1\"\nurl = \"http://127.0.0.1:1/j\"\n\
             [[targets]]\nname = \"b-1\"\nurl = \"http://127.0.0.1:1/j\"\n\
             [[targets]]\nname = \"a-2\"\nurl = \"http://127.0.0.1:1/j\"\n\
             [[roles]]\nname = \"viewer\"\ntargets = [\"*\"]\n\
             [[roles]]\nname = \"operator\"\ntargets = [\"a-*\"]\n",
            &["viewer", "operator"],
        );
        let roles = access.roles_of(&principal);
        let facts = RequestFacts {
            method: "POST",
            chain: &[],
            origin: None,
            scheme: "http",
            denied_reads_in_place: false,
        };
        let request = read(json!("Secret"));
        let decided = authorize_each(
            &access,
            &principal,
            &roles,
            &facts,
            &request,
            fleet.iter().cloned().collect(),
        );
        let allowed: Vec<(&str, &Allowed)> = decided
            .iter()
            .map(|(t, d)| (t.name.as_str(), d.as_ref().unwrap()))
            .collect();
        assert_eq!(allowed.len(), 3);
        let (a1, b1, a2) = (allowed[0].1, allowed[1].1, allowed[2].1);
        // Both `a-` targets hold the very same grant and rule ...
        assert!(a1.grant.same_as(&a2.grant));
        assert!(Arc::ptr_eq(&a1.rule, &a2.rule));
        assert_eq!(a1.grant.roles(), ["viewer", "operator"]);
        // ... and the target only `viewer` reaches has its own.
        assert!(!a1.grant.same_as(&b1.grant));
        assert_eq!(b1.grant.roles(), ["viewer"]);
        // Decided as one by one.
        for (t, d) in &decided {
            let one = authorize(
                &access,
                &principal,
                &roles,
                &facts,
                &request,
                &Destination::Agent(t.clone()),
            )
            .unwrap();
            let shared = d.as_ref().unwrap();
            assert_eq!((one.plan, &*one.rule), (shared.plan, &*shared.rule));
            assert_eq!(one.grant.roles(), shared.grant.roles());
        }
    }

    /// Two roles refuse a GET exec of gc: developers' policy never
    /// allows exec, ops' allows gc over POST only. The refusal quotes
    /// ops' `<http>`, which came closest, not developers' rule.
    #[test]
    fn a_refusal_quotes_the_role_that_came_closest() {
        let dir = tempfile::tempdir().unwrap();
        let developers = dir.path().join("developers.xml");
        std::fs::write(
            &developers,
            "<restrict><commands><command>read</command></commands></restrict>",
        )
        .unwrap();
        let ops = dir.path().join("ops.xml");
        std::fs::write(
            &ops,
            "<restrict><http><method>post</method></http></restrict>",
        )
        .unwrap();
        let (fleet, access, principal) = holding(
            &format!(
                "[[targets]]\nname = \"a-1\"\nurl = \"http://127.0.0.1:1/j\"\n\
                 [[roles]]\nname = \"developers\"\ntargets = [\"*\"]\npolicy = \"{}\"\n\
                 [[roles]]\nname = \"ops\"\ntargets = [\"*\"]\npolicy = \"{}\"\n",
                developers.display(),
                ops.display()
            ),
            &["developers", "ops"],
        );
        let roles = access.roles_of(&principal);
        let gc = Request::from_json(
            &json!({"type": "exec", "mbean": "java.lang:type=Memory", "operation": "gc"}),
            &Params::default(),
        )
        .unwrap()
        .0;
        let target = Destination::Agent(fleet.by_name("a-1").unwrap().clone());
        let decide = |method| {
            let facts = RequestFacts {
                method,
                chain: &[],
                origin: None,
                scheme: "http",
                denied_reads_in_place: false,
            };
            authorize(&access, &principal, &roles, &facts, &gc, &target)
        };
        let denied = decide("GET").unwrap_err();
        assert!(
            denied.rule.starts_with("role ops: <http>"),
            "{}",
            denied.rule
        );
        assert!(
            denied
                .error
                .message
                .contains("HTTP method GET is not allowed"),
            "{:?}",
            denied.error
        );
        assert!(decide("POST").is_ok());
    }

    #[test]
    fn a_denied_rule_names_the_role_whose_policy_decided() {
        let d = grant(DENY_SECRET).read(&ObjectName::parse("d:type=T").unwrap(), "Secret");
        assert!(!d.allowed);
        assert!(d.rule.starts_with("role viewer: <deny> "), "{}", d.rule);
    }

    #[test]
    fn denied_reads_in_place_answer_a_list_even_when_nothing_is_allowed() {
        let g = grant(DENY_SECRET);
        // The Jolokia door: refused, as an agent's restrictor refuses it.
        assert!(decide_command(&g, &read(json!(["Secret"])), false).is_err());
        let (plan, rule) = decide_command(&g, &read(json!(["Secret"])), true).unwrap();
        assert_eq!(plan, Plan::ExpandRead);
        assert!(
            rule.starts_with("no attribute allowed: role viewer: "),
            "{rule}"
        );
        let (plan, rule) = decide_command(&g, &read(json!(["Secret", "Open"])), true).unwrap();
        assert_eq!(plan, Plan::ExpandRead);
        assert!(rule.starts_with("partly allowed: "), "{rule}");
        // One attribute, not a list: its value is no map to hold an error.
        assert!(decide_command(&g, &read(json!("Secret")), true).is_err());
        let (plan, _) = decide_command(&g, &read(json!(["Open"])), true).unwrap();
        assert_eq!(plan, Plan::Forward);
    }
}
