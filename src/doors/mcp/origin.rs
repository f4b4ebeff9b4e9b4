//! Which browser pages may use the MCP door. The MCP transport requires a
//! server to validate `Origin` (DNS rebinding: a page of `evil.example`
//! whose name then resolves to the gateway is same-origin to itself, and
//! a gateway without `<cors>` in its policies admits every origin for
//! Jolokia). A request without `Origin` is not from a browser page and is
//! not affected. Pure: the caller's roles come in as a function.

/// Whether a page at `origin` (an `Origin` or `Referer` value) may call
/// the door, for a request that named `host` (its `Host` or authority):
/// - it is listed in `mcp.allowed_origins`;
/// - it is the gateway's own loopback origin (`http://127.0.0.1:8080` on
///   `Host: 127.0.0.1:8080`), which a rebinding page cannot have; or
/// - an `<allow-origin>` of the caller's own roles names it.
pub fn admitted(
    origin: &str,
    host: Option<&str>,
    allowed_origins: &[String],
    listed_by_roles: impl Fn(&str) -> bool,
) -> bool {
    admit(origin, host, allowed_origins, listed_by_roles).is_some()
}

/// A browser page the door admitted, and how: what each call from it
/// may then reach is [`Page::admitted_by`]'s to say, role by role.
#[derive(Clone, Debug, PartialEq)]
pub struct Page {
    /// The page's origin, serialised (`scheme://host[:port]`).
    pub origin: String,
    /// Admitted by the gateway itself (`mcp.allowed_origins`, or its own
    /// loopback origin), not only by some role's `<allow-origin>`.
    pub by_gateway: bool,
}

/// [`admitted`], saying how: `None` when the page gets no door.
pub fn admit(
    origin: &str,
    host: Option<&str>,
    allowed_origins: &[String],
    listed_by_roles: impl Fn(&str) -> bool,
) -> Option<Page> {
    let origin = serialized(origin)?;
    let by_gateway = allowed_origins
        .iter()
        .any(|a| serialized(a).is_some_and(|a| a == origin))
        || host.is_some_and(|h| own_loopback(&origin, h));
    (by_gateway || listed_by_roles(&origin)).then_some(Page { origin, by_gateway })
}

impl Page {
    /// Whether one role (reaching a call's target) admits this page for
    /// the call: its own `<allow-origin>` names the page (`listed`), or
    /// the gateway admitted the page and the role's `<cors>` lets it in
    /// (`cors_allows`: Jolokia's rule, where a role without `<cors>` lets
    /// every origin in). A role without `<cors>` thus never admits a page
    /// that only another role's `<allow-origin>` brought to the door.
    pub fn admitted_by(
        &self,
        listed: impl Fn(&str) -> bool,
        cors_allows: impl Fn(&str) -> bool,
    ) -> bool {
        listed(&self.origin) || (self.by_gateway && cors_allows(&self.origin))
    }
}

/// `scheme://host[:port]` of a URL, lower-cased, default port left out;
/// `None` for `null` and what is not a URL.
fn serialized(url: &str) -> Option<String> {
    let url = url::Url::parse(url.trim()).ok()?;
    match url.origin() {
        origin @ url::Origin::Tuple(..) => Some(origin.ascii_serialization()),
        url::Origin::Opaque(_) => None,
    }
}

fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The origin is a loopback one and names exactly the host and port the
/// request was sent to.
fn own_loopback(origin: &str, host: &str) -> bool {
    let Ok(url) = url::Url::parse(origin) else {
        return false;
    };
    let Some(origin_host) = url.host_str() else {
        return false;
    };
    if !is_loopback(origin_host) {
        return false;
    }
    let Ok(requested) = url::Url::parse(&format!("{}://{host}", url.scheme())) else {
        return false;
    };
    requested
        .host_str()
        .is_some_and(|h| h.eq_ignore_ascii_case(origin_host))
        && requested.port_or_known_default() == url.port_or_known_default()
}

#[cfg(test)]
mod tests {
    use super::{admit, admitted};

    #[test]
    fn a_role_without_cors_admits_only_a_page_the_gateway_admitted() {
        let listed = |o: &str| o == "https://ok.example";
        let no_cors = (|_: &str| false, |_: &str| true);
        // Brought to the door by one role's <allow-origin> only.
        let page = admit("https://ok.example", Some("gw"), &[], listed).unwrap();
        assert!(!page.by_gateway);
        assert!(page.admitted_by(listed, |_| true));
        assert!(!page.admitted_by(no_cors.0, no_cors.1));
        // Admitted by the configuration: a role without <cors> lets it in,
        // a role whose <cors> names other pages does not.
        let configured = ["https://ok.example".to_string()];
        let page = admit("https://ok.example/app", Some("gw"), &configured, none).unwrap();
        assert_eq!(page.origin, "https://ok.example");
        assert!(page.by_gateway);
        assert!(page.admitted_by(no_cors.0, no_cors.1));
        assert!(!page.admitted_by(|_| false, |_| false));
        // The gateway's own loopback origin is the gateway's admission.
        let page = admit("http://127.0.0.1:8080", Some("127.0.0.1:8080"), &[], none).unwrap();
        assert!(page.by_gateway);
    }

    fn none(_: &str) -> bool {
        false
    }

    #[test]
    fn a_rebinding_page_is_refused_even_when_it_names_itself() {
        let host = Some("evil.example.com");
        assert!(!admitted("http://evil.example.com", host, &[], none));
        assert!(!admitted(
            "http://evil.example.com",
            Some("127.0.0.1:8080"),
            &[],
            none
        ));
        assert!(!admitted("null", Some("127.0.0.1:8080"), &[], none));
        assert!(!admitted("not a url", Some("127.0.0.1:8080"), &[], none));
    }

    #[test]
    fn the_gateways_own_loopback_origin_is_admitted_on_its_own_port_only() {
        for (origin, host) in [
            ("http://127.0.0.1:8080", "127.0.0.1:8080"),
            ("http://localhost:8080", "LOCALHOST:8080"),
            ("http://[::1]:8080", "[::1]:8080"),
            ("http://localhost", "localhost:80"),
            ("https://localhost", "localhost"),
        ] {
            assert!(
                admitted(origin, Some(host), &[], none),
                "{origin} on {host}"
            );
        }
        // Another local page (another port) is another origin.
        assert!(!admitted(
            "http://localhost:3000",
            Some("localhost:8080"),
            &[],
            none
        ));
        assert!(!admitted("http://127.0.0.1:8080", None, &[], none));
    }

    #[test]
    fn configured_origins_and_the_callers_cors_admit() {
        let allowed = ["https://Console.Example.com/".to_string()];
        assert!(admitted(
            "https://console.example.com",
            Some("gw"),
            &allowed,
            none
        ));
        // A Referer's path is not part of its origin.
        assert!(admitted(
            "https://console.example.com/app/page",
            Some("gw"),
            &allowed,
            none
        ));
        assert!(!admitted(
            "http://console.example.com",
            Some("gw"),
            &allowed,
            none
        ));
        let roles = |o: &str| o == "https://hawtio.example.com";
        assert!(admitted(
            "https://hawtio.example.com",
            Some("gw"),
            &[],
            roles
        ));
    }
}
