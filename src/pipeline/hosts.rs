//! The pre-phase's `Host` check (`server.allowed_hosts`): a browser page
//! whose name was made to resolve to the gateway (DNS rebinding) sends its
//! own name as `Host`, so a gateway answers only the names it is known by.
//! Pure: the allowed names, the `Host` header and the address the
//! listener is bound to in, a decision out.

use std::net::SocketAddr;

/// The names a listener on a loopback address answers to when
/// `server.allowed_hosts` is not set (with any port, or none).
pub const LOOPBACK_NAMES: &[&str] = &["localhost", "127.0.0.1", "[::1]"];

/// `server.allowed_hosts`, ready to match.
#[derive(Debug, Clone, Default)]
pub struct AllowedHosts {
    /// `None`: not set (loopback listeners accept their loopback names,
    /// others every name). Lower-cased entries; `*` admits every name.
    listed: Option<Vec<String>>,
}

impl AllowedHosts {
    pub fn new(listed: Option<&[String]>) -> AllowedHosts {
        AllowedHosts {
            listed: listed.map(|l| l.iter().map(|h| h.trim().to_ascii_lowercase()).collect()),
        }
    }

    /// Whether a request with this `Host` header, on a listener bound to
    /// `bound`, is answered. No `Host` (HTTP/1.0, no browser sends that)
    /// is; a listener whose address is unknown (an embedded router)
    /// checks only a configured list.
    pub fn admits(&self, host: Option<&str>, bound: Option<SocketAddr>) -> bool {
        let Some(host) = host else { return true };
        let host = host.trim().to_ascii_lowercase();
        match &self.listed {
            Some(listed) => listed
                .iter()
                .any(|entry| entry == "*" || matches(entry, &host)),
            None if bound.is_some_and(|b| b.ip().is_loopback()) => {
                LOOPBACK_NAMES.iter().any(|name| matches(name, &host))
            }
            None => true,
        }
    }
}

/// An entry with a port matches that `host:port` only; one without
/// matches the name with any port or none. Both lower-cased.
fn matches(entry: &str, host: &str) -> bool {
    if entry == host {
        return true;
    }
    if has_port(entry) {
        return false;
    }
    host.strip_prefix(entry)
        .and_then(|rest| rest.strip_prefix(':'))
        .is_some_and(|port| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether a `Host` value ends in `:port` (an IPv6 literal is bracketed).
fn has_port(host: &str) -> bool {
    let after_name = host.rfind(']').map_or(host, |end| &host[end..]);
    after_name.contains(':')
}

/// The text of a refusal: which `Host` was refused (cut short), and what to set.
pub fn refusal_message(host: &str) -> String {
    let shown: String = host.chars().take(100).collect();
    format!(
        "Host \"{shown}\" is not a name this gateway answers to; add it to server.allowed_hosts \
         (a listener on a loopback address accepts only localhost, 127.0.0.1 and [::1] while \
         server.allowed_hosts is not set)"
    )
}

/// Problems of a `server.allowed_hosts` list, for the config check.
pub fn problems(listed: &[String]) -> Vec<String> {
    listed
        .iter()
        .filter(|h| {
            let h = h.trim();
            h.is_empty() || h.contains(|c: char| c.is_whitespace() || "/@?#,".contains(c))
        })
        .map(|h| {
            format!(
                "server.allowed_hosts: \"{h}\" is not a Host header value (a name or address, \
                 optionally with :port, or \"*\" for any)"
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(addr: &str) -> Option<SocketAddr> {
        Some(addr.parse().unwrap())
    }

    #[test]
    fn a_loopback_listener_answers_only_its_loopback_names_by_default() {
        let unset = AllowedHosts::new(None);
        for host in [
            "localhost",
            "localhost:8080",
            "LocalHost:8080",
            "127.0.0.1",
            "127.0.0.1:8080",
            "[::1]",
            "[::1]:8080",
        ] {
            assert!(unset.admits(Some(host), at("127.0.0.1:8080")), "{host}");
            assert!(unset.admits(Some(host), at("[::1]:8080")), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "localhost:80x",
            "localhost:",
            "127.0.0.2:8080",
            "",
        ] {
            assert!(!unset.admits(Some(host), at("127.0.0.1:8080")), "{host}");
        }
        // No Host at all: not a browser.
        assert!(unset.admits(None, at("127.0.0.1:8080")));
    }

    #[test]
    fn other_listeners_answer_every_name_unless_a_list_is_set() {
        let unset = AllowedHosts::new(None);
        assert!(unset.admits(Some("jmx.example.com"), at("0.0.0.0:8080")));
        assert!(unset.admits(Some("jmx.example.com"), at("10.0.0.5:8080")));
        assert!(unset.admits(Some("jmx.example.com"), None));
        let listed = AllowedHosts::new(Some(&[
            "jmx.example.com".to_string(),
            "10.0.0.5:8443".to_string(),
            "[fd00::1]:8080".to_string(),
        ]));
        assert!(listed.admits(Some("JMX.example.com:8080"), at("0.0.0.0:8080")));
        assert!(listed.admits(Some("jmx.example.com"), None));
        assert!(listed.admits(Some("10.0.0.5:8443"), at("0.0.0.0:8443")));
        assert!(!listed.admits(Some("10.0.0.5:8080"), at("0.0.0.0:8080")));
        assert!(listed.admits(Some("[fd00::1]:8080"), at("[::]:8080")));
        assert!(!listed.admits(Some("[fd00::1]:9"), at("[::]:8080")));
        // A list replaces the loopback default, on loopback too.
        assert!(!listed.admits(Some("localhost:8080"), at("127.0.0.1:8080")));
        assert!(!listed.admits(Some("evil.example"), at("0.0.0.0:8080")));
        let any = AllowedHosts::new(Some(&["*".to_string()]));
        assert!(any.admits(Some("evil.example"), at("127.0.0.1:8080")));
    }

    #[test]
    fn bad_entries_and_the_refusal_are_named() {
        assert!(problems(&["jmx.example.com".into(), "[::1]:8080".into(), "*".into()]).is_empty());
        let p = problems(&["".into(), "http://x".into(), "a b".into()]);
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(refusal_message("evil.example").contains("server.allowed_hosts"));
        assert!(refusal_message(&"x".repeat(500)).len() < 400);
    }
}
