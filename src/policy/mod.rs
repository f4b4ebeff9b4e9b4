//! Restrictor policies in Jolokia's `jolokia-access.xml` format, with
//! Jolokia's semantics, except where the gateway is deliberately stricter
//! (see `STRICTER` below and the README).
//!
//! SKELETON: the API the rest of the gateway codes against. Internals are
//! being written; every check currently allows.

use std::path::Path;

use crate::protocol::ObjectName;

/// The outcome of one check, with the rule that decided it, in words an
/// admin recognises (`<deny> <mbean> java.lang:type=Memory <operation>gc`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub rule: String,
}

impl Decision {
    pub fn allow(rule: impl Into<String>) -> Decision {
        Decision { allowed: true, rule: rule.into() }
    }
    pub fn deny(rule: impl Into<String>) -> Decision {
        Decision { allowed: false, rule: rule.into() }
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

/// A parsed policy.
#[derive(Debug, Clone, Default)]
pub struct Policy {}

impl Policy {
    /// The policy of an agent without `jolokia-access.xml`: everything allowed.
    pub fn allow_all() -> Policy {
        Policy {}
    }

    pub fn parse(_xml: &str) -> Result<Policy, PolicyError> {
        Ok(Policy {})
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
    /// exec, list, search, version, notification, config.
    pub fn type_allowed(&self, _ty: &str) -> Decision {
        Decision::allow("no <commands> section")
    }

    /// `<http>`: GET or POST (any case).
    pub fn http_method_allowed(&self, _method: &str) -> Decision {
        Decision::allow("no <http> section")
    }

    /// `<remote>`: every entry of the chain (host names and addresses)
    /// must be allowed.
    pub fn remote_allowed(&self, _chain: &[&str]) -> Decision {
        Decision::allow("no <remote> section")
    }

    /// `<cors>`: `only_if_strict` true is the access check (passes when
    /// there is no `<strict-checking/>`), false decides whether to send
    /// CORS headers for this origin.
    pub fn origin_allowed(&self, _origin: Option<&str>, _only_if_strict: bool) -> bool {
        true
    }

    /// `<cors><ignore-scheme/>`.
    pub fn ignore_scheme(&self) -> bool {
        false
    }

    pub fn read_allowed(&self, _name: &ObjectName, _attribute: &str) -> Decision {
        Decision::allow("no <allow>/<deny> section")
    }

    pub fn write_allowed(&self, _name: &ObjectName, _attribute: &str) -> Decision {
        Decision::allow("no <allow>/<deny> section")
    }

    /// `operation` as sent, possibly with a signature: `add(int,int)`.
    pub fn exec_allowed(&self, _name: &ObjectName, _operation: &str) -> Decision {
        Decision::allow("no <allow>/<deny> section")
    }

    /// `<filter>`: hidden from list and search answers.
    pub fn hidden(&self, _name: &ObjectName) -> bool {
        false
    }

    /// Whether the policy lets this MBean be touched in any way (some read,
    /// write or exec could be allowed); list and search answers show only
    /// such MBeans.
    pub fn mbean_visible(&self, _name: &ObjectName) -> bool {
        true
    }
}
