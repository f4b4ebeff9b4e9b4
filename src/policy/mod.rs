//! Restrictor policies in Jolokia's `jolokia-access.xml` format, with
//! Jolokia's semantics (`PolicyRestrictor` and its checkers, HEAD of
//! `jolokia/jolokia`), except where the gateway is deliberately stricter:
//! see [`STRICTER`].
//!
//! Summary of the format:
//! * A section that is absent allows everything; a present but empty
//!   section allows nothing (`<remote/>`, `<http/>`, `<commands/>`, …).
//! * `<commands>` decides which of `<allow>` and `<deny>` a read, write or
//!   exec consults: a listed command is allowed unless a `<deny>` rule
//!   matches; an unlisted one is denied unless an `<allow>` rule matches.
//! * `<mbean><name>` may be an ObjectName pattern; the entry whose name
//!   equals the MBean wins, else the matching patterns decide.
//! * `<attribute mode="read">` grants or denies reading only; without
//!   `mode` both reading and writing.
//! * `<remote>`: every address of the client chain must be allowed by a
//!   `<host>` (a host name compared literally, an IPv4/IPv6 address, or a
//!   subnet given as CIDR or dotted netmask).
//! * `<cors>`, `<filter>`: see [`Policy::origin_allowed`], [`Policy::hidden`].
//!
//! Everything is compiled at load time; a check is a few hash lookups and
//! glob matches.

mod cors;
mod filter;
pub mod ip;
mod mbean;
mod xml;

use std::path::Path;

use crate::protocol::ObjectName;

use mbean::{Access, Hit, RawEntry, Section};
use xml::{java_trim, Element};

/// Where jmxgate deliberately departs from Jolokia, always towards denying
/// (never allowing what Jolokia would deny). The first three change
/// answers on the conformance rows; the others settle what Jolokia leaves
/// undefined or only fails on at request time.
pub const STRICTER: &[&str] = &[
    "exec with a signature (`gc()`, `op(int,long)`): the operation is checked as sent (as Jolokia does) \
     AND, where <deny> applies (`exec` listed in <commands>), by its bare name before `(`, so a <deny> of \
     `gc` also stops `gc()`. <allow> is checked as sent only (as Jolokia does): an <allow> of \
     `echo(java.lang.String)` admits that overload, an <allow> of `echo` admits `echo` sent without a \
     signature and no overload",
    "`*` in <attribute>/<operation> values is an anchored glob: `*` is any run of characters and every \
     other character, `.` included, is literal (Jolokia builds a regex in which `.` matches anything). \
     In <deny>, a value also denies what Jolokia's reading of `.` matches, so a deny is never narrower; \
     a `*` value with other regex metacharacters (\\^$|?+()[]{}) denies every value in <deny> and \
     turns off wildcards for that <mbean> in <allow> (Jolokia evaluates it as a regex, or fails)",
    "read, write and exec on an ObjectName pattern (`java.lang:*`) are denied: patterns are decided per \
     concrete MBean, which the gateway expands itself (Jolokia allows e.g. `read java.lang:* X` when the \
     policy names that very pattern)",
    "when several <name> patterns match an MBean (and no entry names it exactly), Jolokia consults an \
     arbitrary one; jmxgate requires all of them to allow (<allow>) and denies if any denies (<deny>)",
    "<remote>: host names are never resolved (Jolokia resolves the client's name and may match it as \
     an IPv6 address); an address only matches a subnet of its own family; an address Jolokia would \
     fail on (`10.1` against a subnet, an interface-scoped `fe80::1%eth0`) is denied",
    "load time: <host> subnets and IPv4-looking <host> entries are validated (Jolokia fails at request \
     time or never matches them); a DOCTYPE is refused",
];

/// The outcome of one check, with the rule that decided it, in words an
/// admin recognises (`<deny> <mbean> java.lang:type=Memory <operation> gc`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub rule: String,
}

impl Decision {
    pub fn allow(rule: impl Into<String>) -> Decision {
        Decision {
            allowed: true,
            rule: rule.into(),
        }
    }
    pub fn deny(rule: impl Into<String>) -> Decision {
        Decision {
            allowed: false,
            rule: rule.into(),
        }
    }
}

/// A policy that failed to load: names the file (when there is one) and
/// the cause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", source_name.as_ref().map(|s| format!("{s}: ")).unwrap_or_default())]
pub struct PolicyError {
    pub source_name: Option<String>,
    pub message: String,
}

impl PolicyError {
    fn new(message: impl Into<String>) -> PolicyError {
        PolicyError {
            source_name: None,
            message: message.into(),
        }
    }
}

/// Jolokia's request types (`RequestType`), as bits.
const TYPES: [&str; 8] = [
    "read",
    "list",
    "write",
    "exec",
    "version",
    "config",
    "search",
    "notification",
];

fn type_bit(name: &str) -> Option<(u8, &'static str)> {
    TYPES
        .iter()
        .position(|t| t.eq_ignore_ascii_case(name))
        .map(|i| (1u8 << i, TYPES[i]))
}

const GET: u8 = 1;
const POST: u8 = 2;

/// A parsed policy.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// `<commands>`: allowed request types (`None`: no section).
    commands: Option<u8>,
    /// `<http>`: allowed methods (`None`: no section).
    http: Option<u8>,
    remote: Option<ip::Remote>,
    cors: cors::Cors,
    /// `<allow>` and `<mbeans>` (`None`: neither present).
    allow: Option<Section>,
    deny: Option<Section>,
    filter: filter::Filter,
}

/// `AbstractChecker.assertNodeName`.
fn expect(e: &Element, names: &[&str]) -> Result<(), PolicyError> {
    if names.contains(&e.name.as_str()) {
        Ok(())
    } else {
        Err(PolicyError::new(format!(
            "Expected element {} but got {}",
            names.join(","),
            e.name
        )))
    }
}

impl Policy {
    /// The policy of an agent without `jolokia-access.xml`: everything allowed.
    pub fn allow_all() -> Policy {
        Policy::default()
    }

    /// Parses a policy document. Errors are those Jolokia fails to load
    /// with (not well-formed XML, unexpected elements, a missing or
    /// repeated `<name>`, bad ObjectNames, unknown commands or HTTP
    /// methods, bad `<host>` entries, bad `<filter>` patterns).
    pub fn parse(xml: &str) -> Result<Policy, PolicyError> {
        let root = xml::parse_document(xml).map_err(PolicyError::new)?;
        let mut policy = Policy::default();

        // The checkers in the order PolicyRestrictor builds them.
        let commands = root.elements_named("commands");
        if !commands.is_empty() {
            let mut bits = 0u8;
            for section in commands {
                for command in section.child_elements() {
                    expect(command, &["command"])?;
                    let text = command.text_content();
                    let name = java_trim(&text);
                    let (bit, _) = type_bit(&name.to_lowercase()).ok_or_else(|| {
                        PolicyError::new(format!("No type with name '{name}' exists"))
                    })?;
                    bits |= bit;
                }
            }
            policy.commands = Some(bits);
        }

        let http = root.elements_named("http");
        if !http.is_empty() {
            let mut bits = 0u8;
            for section in http {
                for method in section.child_elements() {
                    expect(method, &["method"])?;
                    let text = method.text_content();
                    let name = java_trim(&text).to_lowercase();
                    bits |= match name.as_str() {
                        "get" => GET,
                        "post" => POST,
                        _ => {
                            return Err(PolicyError::new(format!(
                                "HTTP method must be either GET or POST, but not {}",
                                name.to_uppercase()
                            )))
                        }
                    };
                }
            }
            policy.http = Some(bits);
        }

        let remote = root.elements_named("remote");
        if !remote.is_empty() {
            let mut checker = ip::Remote::default();
            for section in remote {
                for host in section.child_elements() {
                    expect(host, &["host"])?;
                    checker
                        .add_host(&host.text_content())
                        .map_err(PolicyError::new)?;
                }
            }
            policy.remote = Some(checker);
        }

        for tag in ["allow", "mbeans"] {
            let sections = root.elements_named(tag);
            if !sections.is_empty() {
                let allow = policy.allow.get_or_insert_with(Section::default);
                add_mbeans(allow, &sections)?;
            }
        }
        let deny = root.elements_named("deny");
        if !deny.is_empty() {
            let mut section = Section::default();
            add_mbeans(&mut section, &deny)?;
            policy.deny = Some(section);
        }

        for section in root.elements_named("cors") {
            policy.cors.section_present();
            for item in section.child_elements() {
                expect(item, &["allow-origin", "strict-checking", "ignore-scheme"])?;
                match item.name.as_str() {
                    "allow-origin" => policy.cors.add_allow_origin(&item.text_content()),
                    "strict-checking" => policy.cors.set_strict_checking(),
                    _ => policy.cors.set_ignore_scheme(),
                }
            }
        }

        for section in root.elements_named("filter") {
            for mbean in section.child_elements() {
                expect(mbean, &["mbean"])?;
                policy
                    .filter
                    .add(&mbean.text_content())
                    .map_err(PolicyError::new)?;
            }
        }
        Ok(policy)
    }

    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|e| PolicyError {
            source_name: Some(path.display().to_string()),
            message: e.to_string(),
        })?;
        Policy::parse(&text).map_err(|mut e| {
            e.source_name = Some(path.display().to_string());
            e
        })
    }

    /// `<commands>`: may this request type run at all? Types: read, write,
    /// exec, list, search, version, notification, config (any case; any
    /// other type is denied).
    ///
    /// As in Jolokia, read, write and exec are not gated by this alone:
    /// [`read_allowed`](Self::read_allowed) and friends fold `<commands>`
    /// in (an unlisted command can still be granted by `<allow>`).
    pub fn type_allowed(&self, ty: &str) -> Decision {
        let Some((bit, name)) = type_bit(ty) else {
            return Decision::deny(format!("unknown request type \"{ty}\""));
        };
        match self.commands {
            None => Decision::allow("no <commands> section"),
            Some(bits) if bits & bit != 0 => {
                Decision::allow(format!("<commands> lists \"{name}\""))
            }
            Some(_) => Decision::deny(format!("<commands> does not list \"{name}\"")),
        }
    }

    /// `<http>`: GET or POST (any case).
    pub fn http_method_allowed(&self, method: &str) -> Decision {
        let Some(bits) = self.http else {
            return Decision::allow("no <http> section");
        };
        let bit = if method.eq_ignore_ascii_case("get") {
            GET
        } else if method.eq_ignore_ascii_case("post") {
            POST
        } else {
            0
        };
        if bits & bit != 0 {
            Decision::allow(format!("<http> <method> {}", method.to_ascii_lowercase()))
        } else {
            Decision::deny(format!(
                "<http> does not list {}",
                method.to_ascii_uppercase()
            ))
        }
    }

    /// `<remote>`: every entry of the chain (host names and addresses)
    /// must be allowed; with a `<remote>` section an empty chain is denied.
    /// Host names are compared literally (policy entries lower-cased),
    /// never resolved.
    pub fn remote_allowed(&self, chain: &[&str]) -> Decision {
        match &self.remote {
            None => Decision::allow("no <remote> section"),
            Some(remote) => remote.check(chain),
        }
    }

    /// `<cors>`: `only_if_strict` true is the access check (passes when
    /// there is no `<strict-checking/>`), false decides whether to send
    /// CORS headers for this origin. Patterns are lower-cased, the origin
    /// is compared as sent; `*` matches any run of characters.
    pub fn origin_allowed(&self, origin: Option<&str>, only_if_strict: bool) -> bool {
        self.cors.check(origin, only_if_strict)
    }

    /// Whether an `<allow-origin>` of this policy names `origin` (never
    /// the every-origin default of a policy without `<cors>`).
    pub fn origin_listed(&self, origin: &str) -> bool {
        self.cors.lists(origin)
    }

    /// `<cors><ignore-scheme/>`.
    pub fn ignore_scheme(&self) -> bool {
        self.cors.ignore_scheme()
    }

    pub fn read_allowed(&self, name: &ObjectName, attribute: &str) -> Decision {
        self.check(Access::Read, name, attribute)
    }

    pub fn write_allowed(&self, name: &ObjectName, attribute: &str) -> Decision {
        self.check(Access::Write, name, attribute)
    }

    /// `operation` as sent, possibly with a signature: `add(int,int)`.
    /// With a signature, both the operation as sent and its bare name
    /// must be allowed (see [`STRICTER`]).
    pub fn exec_allowed(&self, name: &ObjectName, operation: &str) -> Decision {
        let raw = self.check(Access::Exec, name, operation);
        let Some(paren) = operation.find('(') else {
            return raw;
        };
        // The bare name is checked against <deny> only (where `exec` is
        // listed in <commands>): a <deny> of `gc` also stops `gc()`, while
        // an <allow> of `echo(java.lang.String)` admits exactly that, as
        // in Jolokia.
        if !raw.allowed || !self.command_listed(Access::Exec) {
            return raw;
        }
        let bare = &operation[..paren];
        let by_name = self.check(Access::Exec, name, bare);
        if by_name.allowed {
            raw
        } else {
            Decision::deny(format!(
                "{} (checked by operation name for \"{operation}\")",
                by_name.rule
            ))
        }
    }

    /// Whether `write` or `exec` could be allowed on some MBean: the
    /// command is listed in `<commands>` (or there is no such section), or
    /// `<allow>` lists some attribute or operation for it. What the MCP
    /// door offers a caller follows this; each request is still checked in
    /// full.
    pub fn could_ever(&self, command: &str) -> bool {
        let access = match command {
            "write" => Access::Write,
            "exec" => Access::Exec,
            "read" => Access::Read,
            _ => return self.type_allowed(command).allowed,
        };
        self.command_listed(access)
            || self
                .allow
                .as_ref()
                .is_some_and(|allow| allow.entries().any(|e| e.values(access).could_allow()))
    }

    /// `<filter>`: hidden from list and search answers (access itself is
    /// not restricted by `<filter>`).
    pub fn hidden(&self, name: &ObjectName) -> bool {
        self.filter.hidden(name)
    }

    /// Whether the policy lets this MBean be touched in any way (some read,
    /// write or exec could be allowed); list and search answers show only
    /// such MBeans. Does not consider `<filter>` (see [`hidden`](Self::hidden)).
    pub fn mbean_visible(&self, name: &ObjectName) -> bool {
        [Access::Read, Access::Write, Access::Exec]
            .into_iter()
            .any(|access| {
                if self.command_listed(access) {
                    match &self.deny {
                        None => true,
                        Some(deny) => !deny
                            .candidates(name)
                            .any(|e| e.values(access).denies_everything()),
                    }
                } else {
                    match &self.allow {
                        None => false,
                        Some(allow) => {
                            let mut found = false;
                            allow.candidates(name).all(|e| {
                                found = true;
                                e.values(access).could_allow()
                            }) && found
                        }
                    }
                }
            })
    }

    fn command_listed(&self, access: Access) -> bool {
        match self.commands {
            None => true,
            Some(bits) => type_bit(access.command()).is_some_and(|(bit, _)| bits & bit != 0),
        }
    }

    /// `PolicyRestrictor.check` + `MBeanAccessChecker.check`.
    fn check(&self, access: Access, name: &ObjectName, value: &str) -> Decision {
        if name.is_pattern() {
            return Decision::deny(format!(
                "{name} is an ObjectName pattern: {} is decided per concrete MBean",
                access.command()
            ));
        }
        let command = access.command();
        if self.command_listed(access) {
            let why = match self.commands {
                None => "no <commands> section".to_string(),
                Some(_) => format!("<commands> lists \"{command}\""),
            };
            let Some(deny) = &self.deny else {
                return Decision::allow(format!("{why} and there is no <deny> section"));
            };
            for entry in deny.candidates(name) {
                match entry.values(access).matches(value, true) {
                    None => {}
                    Some(Hit::Listed(v) | Hit::Wildcard(v)) => {
                        return Decision::deny(format!(
                            "<deny> <mbean> {} {} {v}",
                            entry.name,
                            access.tag()
                        ))
                    }
                    Some(Hit::Regex(v)) => {
                        return Decision::deny(format!(
                            "<deny> <mbean> {} {} {v} (a regex to Jolokia: denies every {})",
                            entry.name,
                            access.tag(),
                            access.tag()
                        ))
                    }
                }
            }
            Decision::allow(format!(
                "{why}; <deny> has no rule for {name} {}",
                access.describe(value)
            ))
        } else {
            let Some(allow) = &self.allow else {
                return Decision::deny(format!(
                    "<commands> does not list \"{command}\" and there is no <allow> section"
                ));
            };
            let no_rule = || format!("<allow> has no rule for {name} {}", access.describe(value));
            let mut granted: Option<Decision> = None;
            for entry in allow.candidates(name) {
                let values = entry.values(access);
                match values.matches(value, false) {
                    Some(Hit::Listed(v) | Hit::Wildcard(v) | Hit::Regex(v)) => {
                        granted.get_or_insert_with(|| {
                            Decision::allow(format!(
                                "<allow> <mbean> {} {} {v}",
                                entry.name,
                                access.tag()
                            ))
                        });
                    }
                    None => {
                        let mut rule = no_rule();
                        if granted.is_some() {
                            rule.push_str(&format!(
                                " in <mbean> {} (every matching <name> pattern must allow)",
                                entry.name
                            ));
                        }
                        if let Some(r) = values.regexes().first() {
                            rule.push_str(&format!(
                                " (<mbean> {} has the regex-like {} {r}: only listed names count)",
                                entry.name,
                                access.tag()
                            ));
                        }
                        return Decision::deny(rule);
                    }
                }
            }
            granted.unwrap_or_else(|| Decision::deny(no_rule()))
        }
    }
}

/// `MBeanAccessChecker.extractMbeanConfiguration` for all sections of a tag.
fn add_mbeans(section: &mut Section, elements: &[&Element]) -> Result<(), PolicyError> {
    for element in elements {
        for mbean in element.child_elements() {
            expect(mbean, &["mbean"])?;
            let mut raw = RawEntry::default();
            let mut name = None;
            for param in mbean.child_elements() {
                expect(param, &["name", "attribute", "operation"])?;
                let text = param.text_content();
                let value = java_trim(&text).to_string();
                match param.name.as_str() {
                    "name" => {
                        if name.is_some() {
                            return Err(PolicyError::new("<name> given twice as MBean name"));
                        }
                        name = Some(value);
                    }
                    "attribute" => {
                        let read_only = param
                            .attr("mode")
                            .is_some_and(|m| m.eq_ignore_ascii_case("read"));
                        if !read_only {
                            raw.write.push(value.clone());
                        }
                        raw.read.push(value);
                    }
                    _ => raw.exec.push(value),
                }
            }
            raw.name = name.ok_or_else(|| PolicyError::new("No <name> given for <mbean>"))?;
            section.add(raw).map_err(PolicyError::new)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
