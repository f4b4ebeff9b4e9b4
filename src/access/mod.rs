//! Roles and tenants: which targets a principal's roles reach, and which
//! policy applies there. Built from the config as one immutable value, so
//! a reload swaps it atomically and a request sees one consistent set.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use http::HeaderMap;
use ipnet::IpNet;

use crate::fleet::Target;
use crate::policy::Policy;
use crate::principal::{AuthMethod, Principal};
use crate::protocol::object_name::wildmatch;

pub mod config;
pub mod elevation;
pub use config::{AccessConfig, ReasonRule, RoleConfig};

/// Every problem of `[[roles]]` and `[access]`, each named by its key.
pub fn problems(roles: &[RoleConfig], access: &AccessConfig) -> Vec<String> {
    let mut problems = Vec::new();
    let mut role_names = std::collections::BTreeMap::new();
    for (i, r) in roles.iter().enumerate() {
        let key = format!("roles[{i}]");
        if let Err(why) = crate::agent_settings::check_name(&r.name) {
            problems.push(format!("{key}.name: {why}"));
        }
        if let Some(first) = role_names.insert(r.name.as_str(), i) {
            problems.push(format!(
                "{key}.name: \"{}\" is already used by roles[{first}]",
                r.name
            ));
        }
        for (j, sel) in r.targets.iter().enumerate() {
            if let Err(why) = TargetSelector::parse(sel) {
                problems.push(format!("{key}.targets[{j}]: {why}"));
            }
        }
    }
    if let Some(anon) = &access.anonymous_role {
        if !role_names.contains_key(anon.as_str()) {
            problems.push(format!(
                "access.anonymous_role: no role is named \"{anon}\""
            ));
        }
    }
    for (i, p) in access.trusted_proxies.iter().enumerate() {
        if let Err(why) = parse_net(p) {
            problems.push(format!("access.trusted_proxies[{i}]: {why}"));
        }
    }
    problems.extend(people_problems(&access.people));
    problems.extend(access.store.problems());
    if access.pending_timeout.is_zero() {
        problems.push("access.pending_timeout: 0s would expire every request at once".into());
    }
    if access.max_pending_requests == 0 {
        problems.push(
            "access.max_pending_requests: 0 would refuse every request; use 1 or more".into(),
        );
    }
    problems.extend(elevation::problems(roles));
    problems
}

/// Which targets a role reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetSelector {
    Name(String),
    /// `*` any run of characters, `?` one character.
    Glob(String),
    /// `env=prod,app=orders`: every label must match. A value may be a
    /// glob (`namespace=shop-*`), as a name may.
    Labels(Vec<(String, String)>),
}

impl std::fmt::Display for TargetSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetSelector::Name(n) | TargetSelector::Glob(n) => f.write_str(n),
            TargetSelector::Labels(l) => {
                let parts: Vec<String> = l.iter().map(|(k, v)| format!("{k}={v}")).collect();
                f.write_str(&parts.join(","))
            }
        }
    }
}

impl TargetSelector {
    pub fn parse(s: &str) -> Result<TargetSelector, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err("an empty target selector".into());
        }
        if s.contains('=') {
            let mut labels = Vec::new();
            for part in s.split(',') {
                let (k, v) = part
                    .split_once('=')
                    .map(|(k, v)| (k.trim(), v.trim()))
                    .filter(|(k, v)| !k.is_empty() && !v.is_empty())
                    .ok_or_else(|| {
                        format!("\"{s}\": a label selector is key=value[,key=value…]")
                    })?;
                labels.push((k.to_string(), v.to_string()));
            }
            return Ok(TargetSelector::Labels(labels));
        }
        if s.contains(['*', '?']) {
            Ok(TargetSelector::Glob(s.to_string()))
        } else {
            Ok(TargetSelector::Name(s.to_string()))
        }
    }

    pub fn matches(&self, target: &Target) -> bool {
        self.matches_named(&target.name, &target.labels)
    }

    /// [`matches`](Self::matches) for a target known by its name and
    /// labels only (one gone from the fleet, say).
    pub fn matches_named(&self, name: &str, labels: &crate::labels::Labels) -> bool {
        match self {
            TargetSelector::Name(n) => n == name,
            TargetSelector::Glob(g) => wildmatch(name, g),
            TargetSelector::Labels(l) => l.iter().all(|(k, v)| {
                labels
                    .get(k)
                    .is_some_and(|have| label_value_matches(have, v))
            }),
        }
    }
}

/// Whether a target's label value matches a selector's: equal, or the
/// selector's value is a glob (`*`, `?`) the value matches whole. One
/// namespace per tenant then needs one role: `namespace=shop-*`.
fn label_value_matches(have: &str, wanted: &str) -> bool {
    if wanted.contains(['*', '?']) {
        wildmatch(have, wanted)
    } else {
        have == wanted
    }
}

/// An address or a subnet (`10.0.0.0/8`, `::1`).
pub fn parse_net(s: &str) -> Result<IpNet, String> {
    let s = s.trim();
    s.parse::<IpNet>()
        .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("\"{s}\" is not an IP address or CIDR subnet"))
}

#[derive(Debug, Clone)]
pub struct Role {
    pub name: String,
    selectors: Vec<TargetSelector>,
    /// Held on this namespace only: the role reaches only its targets
    /// labelled `namespace=<ns>` (a namespaced grant of the principal).
    pub namespace: Option<String>,
    /// Held through a just-in-time grant for these targets only (the
    /// request's selector, within the role's own reach).
    pub granted_on: Option<TargetSelector>,
    /// The access request whose grant this is (for the audit record).
    pub granted_by: Option<Arc<str>>,
    /// `approval_required`, its approvers and the window of an approved
    /// item: what this role runs only after a second person's yes.
    pub approval: Arc<elevation::ItemApproval>,
    pub policy: Arc<Policy>,
    pub policy_file: Option<PathBuf>,
    /// Most targets one item may reach through a selector, if set.
    pub max_targets_per_item: Option<usize>,
}

impl Role {
    pub fn reaches(&self, target: &Target) -> bool {
        self.reaches_named(&target.name, &target.labels)
    }

    /// [`reaches`](Self::reaches) by name and labels.
    pub fn reaches_named(&self, name: &str, labels: &crate::labels::Labels) -> bool {
        self.namespace
            .as_ref()
            .is_none_or(|ns| labels.get("namespace") == Some(ns.as_str()))
            && self
                .granted_on
                .as_ref()
                .is_none_or(|s| s.matches_named(name, labels))
            && self.selectors.iter().any(|s| s.matches_named(name, labels))
    }
}

/// Every problem of `[[access.people]]`, each named by its key: an
/// identity that is not `<method>:<name>` of a method callers have, one
/// given to two people, a person named twice.
fn people_problems(people: &[config::PersonConfig]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, person) in people.iter().enumerate() {
        let key = format!("access.people[{i}]");
        if person.name.trim().is_empty() {
            problems.push(format!("{key}.name: empty"));
        } else if let Some(first) = names.insert(person.name.as_str(), i) {
            problems.push(format!(
                "{key}.name: \"{}\" is already access.people[{first}]",
                person.name
            ));
        }
        if person.identities.is_empty() {
            problems.push(format!(
                "{key}.identities: empty; list the person's identities"
            ));
        }
        for (j, id) in person.identities.iter().enumerate() {
            let ok = match id.split_once(':') {
                Some(("bearer", rest)) => rest
                    .split_once(' ')
                    .is_some_and(|(iss, sub)| !iss.is_empty() && !sub.is_empty()),
                Some((method, name)) => {
                    config::IDENTITY_METHODS.contains(&method) && !name.is_empty()
                }
                None => false,
            };
            if !ok {
                problems.push(format!(
                    "{key}.identities[{j}]: \"{id}\" is not basic:<name>, mtls:<name>, \
                     kubernetes:<name> or bearer:<issuer> <subject>"
                ));
            } else if let Some(first) = seen.insert(id.as_str(), i) {
                if first != i {
                    problems.push(format!(
                        "{key}.identities[{j}]: \"{id}\" is already access.people[{first}]'s"
                    ));
                }
            }
        }
    }
    problems
}

/// Whether the roles of `held` named in `by` (as held: narrowed to a
/// namespace or a grant's targets) reach every one of `named`, the
/// targets a request names: who may ask for a role there, review it, or
/// read its records. With no target named, only such a role held whole
/// (on all of its own targets) counts: a role held in one namespace
/// reaches that namespace only, and nothing it can't see.
pub fn cover<'t>(
    held: &[Arc<Role>],
    by: &[String],
    named: impl IntoIterator<Item = &'t Target>,
) -> bool {
    let counted: Vec<&Arc<Role>> = held.iter().filter(|r| by.contains(&r.name)).collect();
    let mut any = false;
    for target in named {
        any = true;
        if !counted.iter().any(|r| r.reaches(target)) {
            return false;
        }
    }
    any || counted
        .iter()
        .any(|r| r.namespace.is_none() && r.granted_on.is_none())
}

/// Whether a request whose targets are `selector` (none: all of its
/// role's) stays where the roles of `held` named in `by` reach, for the
/// targets still to come as well as those there now ([`cover`] judges
/// those): always with such a role held whole; with one held only in
/// namespaces, only when the selector names one target, or keeps to one
/// of those namespaces (`namespace=dev`, with more labels or not). A glob
/// a namespaced reviewer approved must not reach a `shop` target that
/// appears tomorrow.
pub fn keeps_within(held: &[Arc<Role>], by: &[String], selector: Option<&str>) -> bool {
    let counted: Vec<&Arc<Role>> = held.iter().filter(|r| by.contains(&r.name)).collect();
    if counted
        .iter()
        .any(|r| r.namespace.is_none() && r.granted_on.is_none())
    {
        return true;
    }
    match selector.map(TargetSelector::parse) {
        Some(Ok(TargetSelector::Name(_))) => true,
        Some(Ok(TargetSelector::Labels(labels))) => labels.iter().any(|(k, v)| {
            k == "namespace" && counted.iter().any(|r| r.namespace.as_deref() == Some(v))
        }),
        _ => false,
    }
}

/// Every role and mapping, loaded together.
#[derive(Debug)]
pub struct AccessControl {
    /// No roles configured: every caller may do everything.
    open: bool,
    roles: Vec<Arc<Role>>,
    anonymous_role: Option<Arc<Role>>,
    trusted_proxies: Vec<IpNet>,
    /// The roles as configured: who may request, who may review.
    configs: Vec<RoleConfig>,
    /// `[[access.people]]`: identity to person, and each person's
    /// identities.
    people: std::collections::HashMap<String, String>,
    identities: std::collections::HashMap<String, Vec<String>>,
}

impl AccessControl {
    /// Builds the access control of `[[roles]]` and `[access]`, loading
    /// every policy file. Any unreadable or invalid policy fails the whole
    /// load.
    pub fn new(
        role_configs: &[RoleConfig],
        access: &AccessConfig,
    ) -> Result<AccessControl, String> {
        let mut roles = Vec::new();
        for r in role_configs {
            let policy = match &r.policy {
                Some(path) => {
                    Policy::load(path).map_err(|e| format!("role \"{}\": policy {e}", r.name))?
                }
                None => Policy::allow_all(),
            };
            let selectors = r
                .targets
                .iter()
                .map(|s| TargetSelector::parse(s))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("role \"{}\": {e}", r.name))?;
            roles.push(Arc::new(Role {
                name: r.name.clone(),
                selectors,
                namespace: None,
                granted_on: None,
                granted_by: None,
                approval: Arc::new(elevation::ItemApproval::of(r)),
                policy: Arc::new(policy),
                policy_file: r.policy.clone(),
                max_targets_per_item: r.max_targets_per_item,
            }));
        }
        let anonymous_role =
            match &access.anonymous_role {
                Some(name) => Some(roles.iter().find(|r| r.name == *name).cloned().ok_or_else(
                    || format!("access.anonymous_role: no role is named \"{name}\""),
                )?),
                None => None,
            };
        let trusted_proxies = access
            .trusted_proxies
            .iter()
            .map(|p| parse_net(p))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AccessControl {
            open: roles.is_empty(),
            roles,
            anonymous_role,
            trusted_proxies,
            configs: role_configs.to_vec(),
            people: access
                .people
                .iter()
                .flat_map(|p| p.identities.iter().map(|id| (id.clone(), p.name.clone())))
                .collect(),
            identities: access
                .people
                .iter()
                .map(|p| (p.name.clone(), p.identities.clone()))
                .collect(),
        })
    }

    /// Every identity that is `principal`'s person: its own alone, or all
    /// a `[[access.people]]` entry lists with it. None for anonymous.
    pub fn identities_of(&self, principal: &Principal) -> Vec<String> {
        let Some(own) = principal.identity() else {
            return Vec::new();
        };
        match self.people.get(&own).and_then(|p| self.identities.get(p)) {
            Some(all) => all.clone(),
            None => vec![own],
        }
    }

    /// Who `principal` is across methods, as grants, requests and audit
    /// trails key it: its identity (`Principal::identity`), or the person
    /// `[[access.people]]` says it is (`person:<name>`). `None` for an
    /// anonymous caller, whose trail and grants are no one's.
    pub fn identity_of(&self, principal: &Principal) -> Option<String> {
        let own = principal.identity()?;
        Some(match self.people.get(&own) {
            Some(person) => format!("person:{person}"),
            None => own,
        })
    }

    /// The roles as configured, for the rules of just-in-time access.
    pub fn role_configs(&self) -> &[RoleConfig] {
        &self.configs
    }

    /// Whether any role is requestable or needs approval for some items:
    /// then the gateway keeps an access store.
    pub fn uses_elevation(&self) -> bool {
        self.configs
            .iter()
            .any(|r| !r.requestable_by.is_empty() || !r.approval_required.is_empty())
    }

    /// Whether a caller holding `held` may ask for some role: only then
    /// can it hold grants, and only then are they looked up.
    pub fn may_request(&self, held: &[Arc<Role>]) -> bool {
        self.configs.iter().any(|r| {
            r.requestable_by
                .iter()
                .any(|by| held.iter().any(|h| h.name == *by))
        })
    }

    /// Everything allowed to everyone (no roles configured).
    pub fn open() -> AccessControl {
        AccessControl {
            open: true,
            roles: Vec::new(),
            anonymous_role: None,
            trusted_proxies: Vec::new(),
            configs: Vec::new(),
            people: Default::default(),
            identities: Default::default(),
        }
    }

    pub fn is_open(&self) -> bool {
        self.open
    }

    pub fn roles(&self) -> &[Arc<Role>] {
        &self.roles
    }

    /// The roles a principal holds: the anonymous role for anonymous
    /// callers, else the configured roles its credential names (names
    /// without a configured role grant nothing), and those it holds on one
    /// namespace only, narrowed to that namespace's targets.
    pub fn roles_of(&self, principal: &Principal) -> Vec<Arc<Role>> {
        match principal.method {
            AuthMethod::Anonymous => self.anonymous_role.iter().cloned().collect(),
            _ => {
                let mut held: Vec<Arc<Role>> = self
                    .roles
                    .iter()
                    .filter(|r| principal.roles.iter().any(|n| *n == r.name))
                    .cloned()
                    .collect();
                // A role held on one namespace: the same role, narrowed.
                for (name, ns) in &principal.namespaced_roles {
                    if principal.roles.contains(name) {
                        continue;
                    }
                    if let Some(r) = self.roles.iter().find(|r| r.name == *name) {
                        let mut narrowed = Role::clone(r);
                        narrowed.namespace = Some(ns.clone());
                        held.push(Arc::new(narrowed));
                    }
                }
                held
            }
        }
    }

    /// Role `name` as a just-in-time grant holds it: narrowed to the
    /// targets `selector` names (all of the role's with `None`). `None`
    /// for a role no longer configured or a selector that no longer
    /// parses: a grant never reaches more than its role does now.
    pub fn granted_role(
        &self,
        name: &str,
        selector: Option<&str>,
        request_id: &str,
    ) -> Option<Arc<Role>> {
        let role = self.roles.iter().find(|r| r.name == name)?;
        let mut granted = Role::clone(role);
        granted.granted_by = Some(request_id.into());
        granted.granted_on = match selector {
            Some(s) => Some(TargetSelector::parse(s).ok()?),
            None => None,
        };
        Some(Arc::new(granted))
    }

    /// Whether a caller holding `roles` may reach `target` at all (an open
    /// gateway reaches every target).
    pub fn reaches(&self, roles: &[Arc<Role>], target: &Target) -> bool {
        self.open || roles.iter().any(|r| r.reaches(target))
    }

    /// [`reaches`](Self::reaches) by name and labels.
    pub fn reaches_named(
        &self,
        roles: &[Arc<Role>],
        name: &str,
        labels: &crate::labels::Labels,
    ) -> bool {
        self.open || roles.iter().any(|r| r.reaches_named(name, labels))
    }

    /// The client chain `<remote>` checks: the peer alone, or, when the
    /// peer is a trusted proxy, every `X-Forwarded-For` hop and the peer.
    /// The address a request comes from: the TCP peer, or, when the peer
    /// is a trusted proxy, the nearest address in `X-Forwarded-For` that
    /// is not one (what the last trusted proxy saw). An entry that is not
    /// an address ends the walk at the proxy that wrote it. Login
    /// throttling counts by this address, so that one client behind a
    /// proxy can't lock out everyone behind it.
    pub fn client_address(&self, peer: Option<IpAddr>, headers: &HeaderMap) -> Option<IpAddr> {
        let mut address = peer?.to_canonical();
        let trusted = |a: &IpAddr| self.trusted_proxies.iter().any(|n| n.contains(a));
        if !trusted(&address) {
            return Some(address);
        }
        let forwarded: Vec<&str> = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .collect();
        for hop in forwarded.iter().rev() {
            match hop.parse::<IpAddr>() {
                Ok(a) => address = a.to_canonical(),
                Err(_) => break,
            }
            if !trusted(&address) {
                break;
            }
        }
        Some(address)
    }

    pub fn client_chain(&self, peer: Option<IpAddr>, headers: &HeaderMap) -> Vec<String> {
        let Some(peer) = peer else { return Vec::new() };
        let peer = peer.to_canonical();
        let mut chain = Vec::new();
        if self.trusted_proxies.iter().any(|n| n.contains(&peer)) {
            for value in headers.get_all("x-forwarded-for") {
                if let Ok(v) = value.to_str() {
                    chain.extend(
                        v.split(',')
                            .map(|h| h.trim().to_string())
                            .filter(|h| !h.is_empty()),
                    );
                }
            }
        }
        chain.push(peer.to_string());
        chain
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_held_in_one_namespace_covers_only_that_namespaces_targets() {
        let config = crate::config::Config::parse(
            "[server]\nlisten = \"127.0.0.1:0\"\n\
             [[targets]]\nname = \"dev.a\"\nurl = \"http://127.0.0.1:1/j\"\nlabels = { namespace = \"dev\" }\n\
             [[targets]]\nname = \"shop.b\"\nurl = \"http://127.0.0.1:1/j\"\nlabels = { namespace = \"shop\" }\n\
             [[roles]]\nname = \"leads\"\ntargets = [\"*\"]\n",
        )
        .unwrap();
        let fleet = crate::fleet::Fleet::new(&config.targets, &config.target_defaults).unwrap();
        let access = AccessControl::new(&config.roles, &config.access).unwrap();
        let (dev, shop) = (
            fleet.by_name("dev.a").unwrap(),
            fleet.by_name("shop.b").unwrap(),
        );
        let mut in_dev = Principal::anonymous();
        in_dev.method = AuthMethod::Kubernetes;
        in_dev.namespaced_roles = vec![("leads".into(), "dev".into())];
        let held = access.roles_of(&in_dev);
        let leads = ["leads".to_string()];
        assert!(cover(&held, &leads, [&**dev]));
        assert!(!cover(&held, &leads, [&**shop]));
        assert!(!cover(&held, &leads, [&**dev, &**shop]));
        // Nothing named: only a role held whole counts.
        assert!(!cover(&held, &leads, std::iter::empty()));
        assert!(!cover(&held, &["others".to_string()], [&**dev]));
        // What is still to come: a namespace label keeps a request there.
        assert!(keeps_within(
            &held,
            &leads,
            Some("namespace=dev,app=orders")
        ));
        assert!(keeps_within(&held, &leads, Some("dev.a")));
        assert!(!keeps_within(&held, &leads, Some("dev.*")));
        assert!(!keeps_within(&held, &leads, Some("namespace=shop")));
        assert!(!keeps_within(&held, &leads, Some("namespace=de*")));
        assert!(!keeps_within(&held, &leads, None));
        let mut whole = in_dev.clone();
        whole.namespaced_roles.clear();
        whole.roles = vec!["leads".into()];
        let held = access.roles_of(&whole);
        assert!(cover(&held, &leads, [&**dev, &**shop]));
        assert!(cover(&held, &leads, std::iter::empty()));
        assert!(keeps_within(&held, &leads, Some("dev.*")));
    }

    #[test]
    fn target_globs_are_anchored_and_literal() {
        assert!(wildmatch("kafka-1", "kafka-*"));
        assert!(wildmatch("", "*"));
        assert!(wildmatch("abc", "a?c"));
        assert!(!wildmatch("xkafka-1", "kafka-*"));
        assert!(!wildmatch("abc", "a.c"));
        assert!(wildmatch("orders-12", "*-1*"));
        assert!(!wildmatch("orders-1", "orders"));
    }

    #[test]
    fn label_values_may_be_globs() {
        let target = |labels: &[(&str, &str)]| {
            let labels: String = labels
                .iter()
                .map(|(k, v)| format!("{k} = \"{v}\", "))
                .collect();
            crate::config::Config::parse(&format!(
                "[server]\nlisten = \"127.0.0.1:0\"\n[[targets]]\nname = \"t\"\nurl = \"http://127.0.0.1:1/j\"\nlabels = {{ {} }}\n",
                labels.trim_end_matches(", ")
            ))
            .map_err(|e| format!("{e:?}"))
            .and_then(|c| crate::fleet::Fleet::new(&c.targets, &c.target_defaults))
            .unwrap()
            .by_name("t")
            .unwrap()
            .clone()
        };
        let shop = target(&[("namespace", "shop-eu"), ("app", "orders")]);
        let matches = |s: &str| TargetSelector::parse(s).unwrap().matches(&shop);
        assert!(matches("namespace=shop-*"));
        assert!(matches("namespace=shop-??,app=orders"));
        assert!(matches("namespace=*"));
        assert!(!matches("namespace=shop"));
        assert!(!matches("namespace=shop-*,app=billing"));
        assert!(!matches("namespace=*-us"));
        // A label the target lacks matches no glob, not even `*`.
        assert!(!matches("tier=*"));
        // Without glob characters, a value is compared as written.
        assert!(!matches("namespace=shop-e."));
    }

    #[test]
    fn a_just_in_time_grant_reaches_its_selector_within_the_role_only() {
        let config = crate::config::Config::parse(
            "[server]\nlisten = \"127.0.0.1:0\"\n\
             [[targets]]\nname = \"orders-1\"\nurl = \"http://127.0.0.1:1/j\"\n\
             [[targets]]\nname = \"orders-2\"\nurl = \"http://127.0.0.1:1/j\"\n\
             [[targets]]\nname = \"billing-1\"\nurl = \"http://127.0.0.1:1/j\"\n\
             [[roles]]\nname = \"ops\"\ntargets = [\"orders-*\"]\n",
        )
        .unwrap();
        let fleet = crate::fleet::Fleet::new(&config.targets, &config.target_defaults).unwrap();
        let access = AccessControl::new(&config.roles, &config.access).unwrap();
        let reached = |role: &Role| -> Vec<String> {
            fleet
                .iter()
                .filter(|t| role.reaches(t))
                .map(|t| t.name.clone())
                .collect()
        };
        let whole = access.granted_role("ops", None, "r-1").unwrap();
        assert_eq!(reached(&whole), ["orders-1", "orders-2"]);
        let one = access.granted_role("ops", Some("orders-2"), "r-1").unwrap();
        assert_eq!(reached(&one), ["orders-2"]);
        // A selector wider than the role reaches no more than the role.
        let wide = access.granted_role("ops", Some("*"), "r-1").unwrap();
        assert_eq!(reached(&wide), ["orders-1", "orders-2"]);
        // A role no longer configured, or a selector that doesn't parse:
        // no grant at all.
        assert!(access.granted_role("gone", None, "r-1").is_none());
        assert!(access.granted_role("ops", Some("env="), "r-1").is_none());
    }

    #[test]
    fn a_namespaced_grant_narrows_the_role_to_that_namespace() {
        let config = crate::config::Config::parse(
            "[server]\nlisten = \"127.0.0.1:0\"\n\
             [[targets]]\nname = \"shop-1\"\nurl = \"http://127.0.0.1:1/j\"\nlabels = { namespace = \"shop\" }\n\
             [[targets]]\nname = \"pay-1\"\nurl = \"http://127.0.0.1:1/j\"\nlabels = { namespace = \"pay\" }\n\
             [[targets]]\nname = \"bare\"\nurl = \"http://127.0.0.1:1/j\"\n\
             [[roles]]\nname = \"viewer\"\ntargets = [\"*\"]\n\
             [[roles]]\nname = \"operator\"\ntargets = [\"*-1\"]\n",
        )
        .unwrap();
        let fleet = crate::fleet::Fleet::new(&config.targets, &config.target_defaults).unwrap();
        let access = AccessControl::new(&config.roles, &config.access).unwrap();
        let mut p = Principal::anonymous();
        p.method = AuthMethod::Kubernetes;
        p.namespaced_roles = vec![
            ("viewer".into(), "shop".into()),
            ("operator".into(), "pay".into()),
            ("nonexistent".into(), "pay".into()),
        ];
        let held = access.roles_of(&p);
        let reached = |role: &str| -> Vec<&str> {
            fleet
                .iter()
                .filter(|t| held.iter().any(|r| r.name == role && r.reaches(t)))
                .map(|t| t.name.as_str())
                .collect()
        };
        assert_eq!(held.len(), 2);
        assert_eq!(reached("viewer"), ["shop-1"]);
        assert_eq!(reached("operator"), ["pay-1"]);
        // Held from the config too: not narrowed.
        p.roles = vec!["viewer".into()];
        let held = access.roles_of(&p);
        assert_eq!(held.len(), 2);
        assert!(fleet.iter().all(|t| access.reaches(&held, t)));
    }

    #[test]
    fn selectors_parse() {
        assert_eq!(
            TargetSelector::parse("orders-1").unwrap(),
            TargetSelector::Name("orders-1".into())
        );
        assert_eq!(
            TargetSelector::parse("k*").unwrap(),
            TargetSelector::Glob("k*".into())
        );
        assert_eq!(
            TargetSelector::parse("env=prod, app=orders").unwrap(),
            TargetSelector::Labels(vec![
                ("env".into(), "prod".into()),
                ("app".into(), "orders".into())
            ])
        );
        assert!(TargetSelector::parse("env=").is_err());
        assert!(TargetSelector::parse(" ").is_err());
    }

    #[test]
    fn forwarded_for_counts_only_from_trusted_proxies() {
        let access = AccessConfig {
            trusted_proxies: vec!["10.0.0.0/8".into()],
            ..AccessConfig::default()
        };
        let ac = AccessControl::new(&[], &access).unwrap();
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", "203.0.113.7, 10.1.1.1".parse().unwrap());
        let trusted = ac.client_chain(Some("10.2.2.2".parse().unwrap()), &h);
        assert_eq!(trusted, vec!["203.0.113.7", "10.1.1.1", "10.2.2.2"]);
        let untrusted = ac.client_chain(Some("192.0.2.1".parse().unwrap()), &h);
        assert_eq!(untrusted, vec!["192.0.2.1"]);
        let mapped = ac.client_chain(Some("::ffff:192.0.2.1".parse().unwrap()), &h);
        assert_eq!(mapped, vec!["192.0.2.1"]);
    }

    #[test]
    fn the_client_address_is_the_nearest_untrusted_hop() {
        let access = AccessConfig {
            trusted_proxies: vec!["10.0.0.0/8".into()],
            ..AccessConfig::default()
        };
        let ac = AccessControl::new(&[], &access).unwrap();
        let at = |peer: &str, xff: Option<&str>| {
            let mut h = HeaderMap::new();
            if let Some(xff) = xff {
                h.insert("x-forwarded-for", xff.parse().unwrap());
            }
            ac.client_address(Some(peer.parse().unwrap()), &h)
                .map(|a| a.to_string())
        };
        // Behind two trusted proxies: the client they saw, not what the
        // client itself claimed further left.
        assert_eq!(
            at("10.2.2.2", Some("1.1.1.1, 203.0.113.7, 10.1.1.1")).as_deref(),
            Some("203.0.113.7")
        );
        // An untrusted peer's header counts for nothing.
        assert_eq!(
            at("192.0.2.1", Some("203.0.113.7")).as_deref(),
            Some("192.0.2.1")
        );
        // No header, or garbage where the proxy's hop should be: the proxy.
        assert_eq!(at("10.2.2.2", None).as_deref(), Some("10.2.2.2"));
        assert_eq!(
            at("10.2.2.2", Some("203.0.113.7, unknown")).as_deref(),
            Some("10.2.2.2")
        );
        assert_eq!(
            at("::ffff:10.2.2.2", Some("::ffff:203.0.113.8")).as_deref(),
            Some("203.0.113.8")
        );
        assert_eq!(ac.client_address(None, &HeaderMap::new()), None);
    }
}
