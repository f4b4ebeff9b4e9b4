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
    let Some(origin) = serialized(origin) else {
        return false;
    };
    if allowed_origins
        .iter()
        .any(|a| serialized(a).is_some_and(|a| a == origin))
    {
        return true;
    }
    if host.is_some_and(|h| own_loopback(&origin, h)) {
        return true;
    }
    listed_by_roles(&origin)
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
    use super::admitted;

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
