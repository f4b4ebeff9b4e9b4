//! Step 4, route: decides where each item goes. Targets come from the
//! configured fleet only; a client-supplied URL is a *key* into the fleet,
//! never an address to connect to (the Jolokia proxy CVEs were SSRF and
//! JNDI injection through exactly that URL).

use std::sync::Arc;

use url::Url;

use crate::access::TargetSelector;
use crate::fleet::{EndpointKey, Fleet, Target};
use crate::protocol::{Command, ProtocolError};
use crate::secret::Secret;

use super::parse::ParsedItem;

/// Where one item is answered.
#[derive(Debug, Clone)]
pub enum Destination {
    /// The gateway answers itself (`version` without a target).
    Gateway,
    Agent(Arc<Target>),
}

/// How the client addressed the item.
#[derive(Debug, Clone, Copy)]
pub enum Addressing<'a> {
    /// `/jolokia/targets/<name>/…`: every item goes to that target.
    Virtual(&'a Arc<Target>),
    /// `/jolokia`: items name their target with `target.url`, or get the
    /// default.
    Proxy {
        default_target: Option<&'a Arc<Target>>,
    },
}

/// Where one item goes, for one caller.
#[derive(Debug)]
pub enum Route {
    /// The gateway answers itself (`version` without a target).
    Gateway,
    /// One agent, with the client's own `target.user`/`target.password`
    /// where the target allows pass-through (never otherwise).
    Agent {
        target: Arc<Target>,
        credentials: Option<(String, Secret)>,
    },
    /// Every target a selector (`kafka-*`, `env=prod`) reaches for the
    /// caller, in proxy mode; `selector` is the client's text.
    Group {
        selector: String,
        targets: Vec<Arc<Target>>,
    },
}

/// Why an item has no route.
#[derive(Debug)]
pub enum NoRoute {
    /// Malformed, unknown or forbidden: the client's error.
    Invalid(ProtocolError),
    /// A selector that reaches no target or too many; audited under the
    /// selector's text.
    Selector { text: String, error: ProtocolError },
    /// A target the caller's roles don't reach: answered as a name that
    /// doesn't exist, audited under the target's own name.
    Hidden {
        target: Arc<Target>,
        error: ProtocolError,
    },
}

/// What one caller reaches.
pub struct Reach<'a> {
    pub reaches: &'a dyn Fn(&Target) -> bool,
    /// Most targets one selector may reach ([`targets_per_item_limit`]).
    pub max_targets: usize,
}

/// Routes one item for a caller: against the configured fleet only, and
/// only to targets the caller reaches. `target.url` is read once here.
pub fn route_item(
    fleet: &Fleet,
    addressing: Addressing<'_>,
    item: &ParsedItem,
    reach: &Reach<'_>,
) -> Result<Route, NoRoute> {
    let client_target = item.target.as_ref();
    let (target, named_as) = match (addressing, client_target) {
        (Addressing::Virtual(_), Some(_)) => {
            return Err(NoRoute::Invalid(ProtocolError::bad_request(
                "A request sent to a virtual agent URL (/jolokia/targets/<name>) must not carry its own \"target\"; send proxy requests to /jolokia",
            )))
        }
        (Addressing::Virtual(target), None) => (target.clone(), None),
        (Addressing::Proxy { .. }, Some(t)) => {
            if let Some(selector) = selector_of(&t.url) {
                return group(fleet, &t.url, selector, reach);
            }
            let target = resolve_target_url(fleet, &t.url).map_err(NoRoute::Invalid)?;
            (target, Some(t.url.as_str()))
        }
        (Addressing::Proxy { .. }, None)
            if matches!(item.request.command, Command::Version(_) | Command::Config(_)) =>
        {
            return Ok(Route::Gateway)
        }
        (Addressing::Proxy { default_target }, None) => {
            let target = default_target.cloned().ok_or_else(|| {
                NoRoute::Invalid(ProtocolError::new(
                    400,
                    "jmxgate.NoTarget",
                    format!(
                        "No target given and no default_target configured: add \"target\":{{\"url\":\"<target name>\"}} to the {} request, or use /jolokia/targets/<name>/",
                        item.request.command.type_name()
                    ),
                ))
            })?;
            (target, None)
        }
    };
    if !(reach.reaches)(&target) {
        let error = unknown_target(named_as.unwrap_or(&target.name));
        return Err(NoRoute::Hidden { target, error });
    }
    let credentials = client_target
        .filter(|_| target.allow_credentials_passthrough)
        .and_then(|t| {
            Some((
                t.user.clone()?,
                t.password.clone().unwrap_or_else(|| Secret::new("")),
            ))
        });
    Ok(Route::Agent {
        target,
        credentials,
    })
}

/// The targets a selector reaches for the caller; none, or more than its
/// limit, is an error for the item.
fn group(
    fleet: &Fleet,
    text: &str,
    selector: Result<TargetSelector, ProtocolError>,
    reach: &Reach<'_>,
) -> Result<Route, NoRoute> {
    let failed = |error| NoRoute::Selector {
        text: text.to_string(),
        error,
    };
    let selector = selector.map_err(failed)?;
    let targets: Vec<Arc<Target>> = fleet
        .iter()
        .filter(|t| selector.matches(t) && (reach.reaches)(t))
        .cloned()
        .collect();
    if targets.is_empty() {
        return Err(failed(ProtocolError::new(
            404,
            "jmxgate.UnknownTarget",
            format!("Target selector \"{selector}\" matches no target you may reach"),
        )));
    }
    if targets.len() > reach.max_targets {
        return Err(failed(ProtocolError::new(
            400,
            "jmxgate.TooManyTargets",
            format!(
                "Target selector \"{selector}\" matches {} targets; one item may reach at most {} (max_targets_per_item); narrow the selector or split the request",
                targets.len(),
                reach.max_targets
            ),
        )));
    }
    Ok(Route::Group {
        selector: text.to_string(),
        targets,
    })
}

/// A proxy-mode `target.url` that names several targets: a glob over
/// target names (`kafka-*`) or a label selector (`env=prod,role=broker`).
/// URLs and plain names are single targets (`None`).
pub fn selector_of(url: &str) -> Option<Result<TargetSelector, ProtocolError>> {
    // Per item: no lower-cased copy of the URL.
    let connector = url
        .get(..8)
        .is_some_and(|p| p.eq_ignore_ascii_case("service:"));
    if connector || url.contains("://") || !url.contains(['*', '?', '=']) {
        return None;
    }
    Some(TargetSelector::parse(url).map_err(|e| {
        ProtocolError::new(400, "jmxgate.BadSelector", format!("Target selector {e}"))
    }))
}

/// Most targets one group item may reach for a caller: the largest limit
/// among the caller's roles, where a role without its own
/// `max_targets_per_item` counts as the server's (`server_default`). No
/// roles at all (an open gateway): the server's.
pub fn targets_per_item_limit(
    role_limits: impl IntoIterator<Item = Option<usize>>,
    server_default: usize,
) -> usize {
    role_limits
        .into_iter()
        .map(|limit| limit.unwrap_or(server_default))
        .max()
        .unwrap_or(server_default)
}

/// Resolves a proxy-mode `target.url` against the fleet. Accepted forms: a
/// target name, the agent URL as configured, `service:jmx:jolokia://…`
/// (HTTPS when the port ends in 443), `service:jmx:jolokia+http(s)://…`.
pub fn resolve_target_url(fleet: &Fleet, url: &str) -> Result<Arc<Target>, ProtocolError> {
    if let Some(t) = fleet.by_name(url) {
        return Ok(t.clone());
    }
    let agent_url = agent_url_of(url)?;
    let key = EndpointKey::of(&agent_url).ok_or_else(|| unknown_target(url))?;
    fleet
        .by_endpoint(&key)
        .cloned()
        .ok_or_else(|| unknown_target(url))
}

/// The target a virtual URL (`/jolokia/targets/<name>/`) names, if the
/// caller reaches it.
pub fn virtual_target(
    fleet: &Fleet,
    name: &str,
    reaches: &dyn Fn(&Target) -> bool,
) -> Result<Arc<Target>, ProtocolError> {
    fleet
        .by_name(name)
        .filter(|t| reaches(t))
        .cloned()
        .ok_or_else(|| unknown_target(name))
}

/// The one answer for a target that doesn't exist and for one the
/// caller's roles don't reach, so that names can't be probed.
pub fn unknown_target(text: &str) -> ProtocolError {
    ProtocolError::new(
        404,
        "jmxgate.UnknownTarget",
        format!(
            "No target {} that you may reach is configured; use a name or agent URL from the target list (GET …/targets)",
            quote_for_error(text)
        ),
    )
}

/// Turns a client's target URL into the agent URL it denotes, without
/// touching the network. Anything but a Jolokia HTTP(S) URL is refused.
pub fn agent_url_of(url: &str) -> Result<Url, ProtocolError> {
    let lower = url.to_ascii_lowercase();
    let http_form = if let Some(rest) = strip_prefix_ci(url, &lower, "service:jmx:jolokia+http://")
    {
        format!("http://{rest}")
    } else if let Some(rest) = strip_prefix_ci(url, &lower, "service:jmx:jolokia+https://") {
        format!("https://{rest}")
    } else if let Some(rest) = strip_prefix_ci(url, &lower, "service:jmx:jolokia://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let port = authority
            .rsplit_once(':')
            .map(|(_, p)| p)
            .unwrap_or_default();
        let scheme = if port.ends_with("443") {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{rest}")
    } else if lower.starts_with("service:jmx:") {
        return Err(ProtocolError::new(
            403,
            "jmxgate.ForbiddenTarget",
            format!(
                "Target {} uses a JMX connector the gateway never opens; only configured Jolokia agents (service:jmx:jolokia…, http(s) or a target name) can be reached",
                quote_for_error(url)
            ),
        ));
    } else if lower.starts_with("http://") || lower.starts_with("https://") {
        url.to_string()
    } else {
        return Err(unknown_target(url));
    };
    let parsed = Url::parse(&http_form).map_err(|_| unknown_target(url))?;
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(ProtocolError::bad_request(
            "A target URL must not carry credentials; use target.user and target.password",
        ));
    }
    Ok(parsed)
}

fn strip_prefix_ci<'a>(url: &'a str, lower: &str, prefix: &str) -> Option<&'a str> {
    lower.starts_with(prefix).then(|| &url[prefix.len()..])
}

/// Client text in an error: cut to a sane length, credentials removed.
fn quote_for_error(url: &str) -> String {
    let shown: String = url.chars().take(200).collect();
    format!("\"{}\"", crate::protocol::redact_userinfo(&shown))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::redact_userinfo;

    #[test]
    fn a_role_without_a_limit_counts_as_the_server_default() {
        // No roles: the server's limit.
        assert_eq!(targets_per_item_limit([], 100), 100);
        // Only roles without a limit: the server's.
        assert_eq!(targets_per_item_limit([None, None], 7), 7);
        // A role limited below the server default does not narrow a caller
        // who also holds a role without a limit.
        assert_eq!(targets_per_item_limit([None, Some(2)], 100), 100);
        assert_eq!(targets_per_item_limit([Some(2), None], 100), 100);
        // Explicit limits above the default win; the largest counts.
        assert_eq!(targets_per_item_limit([Some(2), Some(500)], 100), 500);
        assert_eq!(targets_per_item_limit([None, Some(500)], 100), 500);
        // A role limited below the default, alone, is limited.
        assert_eq!(targets_per_item_limit([Some(2)], 100), 2);
        assert_eq!(targets_per_item_limit([Some(1), Some(3)], 100), 3);
    }

    #[test]
    fn jolokia_connector_urls_map_to_agent_urls() {
        let cases = [
            (
                "service:jmx:jolokia://h:8778/jolokia",
                "http://h:8778/jolokia",
            ),
            (
                "service:jmx:jolokia://h:8443/jolokia",
                "https://h:8443/jolokia",
            ),
            ("service:jmx:jolokia://h:443/jolokia", "https://h/jolokia"),
            ("service:jmx:jolokia+http://h:8443/j", "http://h:8443/j"),
            ("service:jmx:jolokia+https://h:9000/j", "https://h:9000/j"),
            ("SERVICE:JMX:JOLOKIA://H:1/jolokia", "http://h:1/jolokia"),
            ("http://h:1/jolokia/", "http://h:1/jolokia/"),
        ];
        for (given, want) in cases {
            assert_eq!(agent_url_of(given).unwrap().as_str(), want, "{given}");
        }
    }

    #[test]
    fn other_jmx_connectors_are_forbidden() {
        for url in [
            "service:jmx:rmi:///jndi/rmi://evil:1099/jmxrmi",
            "service:jmx:jmxmp://h:1",
            "service:jmx:iiop:///jndi/ldap://evil/x",
        ] {
            let e = agent_url_of(url).unwrap_err();
            assert_eq!(e.status, 403, "{url}");
        }
    }

    #[test]
    fn other_strings_are_unknown_targets() {
        for url in ["ldap://evil/x", "file:///etc/passwd", "nope", "//h/x"] {
            assert_eq!(agent_url_of(url).unwrap_err().status, 404, "{url}");
        }
    }

    #[test]
    fn selectors_are_globs_and_labels_never_urls() {
        for url in [
            "service:jmx:jolokia://h:1/j?x=y",
            "SERVICE:jmx:rmi:///jndi/*",
            "http://h/*",
            "orders-1",
        ] {
            assert!(selector_of(url).is_none(), "{url}");
        }
        for url in ["kafka-*", "env=prod,app=x", "orders-?"] {
            assert!(matches!(selector_of(url), Some(Ok(_))), "{url}");
        }
        assert!(matches!(selector_of("=x"), Some(Err(_))));
    }

    #[test]
    fn userinfo_is_redacted() {
        assert_eq!(redact_userinfo("http://u:p@h:1/j"), "http://***@h:1/j");
        assert_eq!(
            redact_userinfo("service:jmx:jolokia://u:p@h/j"),
            "service:jmx:jolokia://***@h/j"
        );
        assert_eq!(redact_userinfo("http://h/j@x"), "http://h/j@x");
        assert_eq!(redact_userinfo("orders-1"), "orders-1");
    }

    #[test]
    fn credentials_are_not_echoed() {
        let e = unknown_target("http://admin:pw@h/jolokia");
        assert!(!e.message.contains("pw@"), "{}", e.message);
        let e = agent_url_of("service:jmx:jolokia://u:secret@h:1/j").unwrap_err();
        assert!(!e.message.contains("secret"), "{}", e.message);
    }
}
