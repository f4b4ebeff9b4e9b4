//! Whether a state-changing request comes from one of the gateway's own
//! pages (or from no browser page at all). A browser sends Basic
//! credentials and client certificates with any site's request, so a
//! change made with them must show where it came from:
//!
//! - Fetch Metadata: a browser marks where a request comes from; anything
//!   but `Sec-Fetch-Site: same-origin` is refused (`same-site` too: a
//!   sibling subdomain or another port of the host is another page).
//! - Without it (an old browser, a script), an `Origin` must be the
//!   gateway's own: this `Host`, and not a plain-HTTP page for a TLS
//!   listener. A plain listener takes an `https` origin of its own host
//!   (TLS ended by a proxy in front).
//! - Neither header: no browser page sent it (curl, the CLI).
//!
//! Pure: headers in, a verdict in words for the person whose browser sent
//! it out.

use http::HeaderMap;

/// `Ok` when the request comes from the gateway's own page or from no
/// page; `tls` says whether the listener it came in on is HTTPS.
pub fn from_own_page(headers: &HeaderMap, tls: bool) -> Result<(), String> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = text("sec-fetch-site") {
        return if site.trim().eq_ignore_ascii_case("same-origin") {
            Ok(())
        } else {
            Err(format!(
                "this was sent from another site (Sec-Fetch-Site: {site}); use the gateway's own pages"
            ))
        };
    }
    let Some(origin) = text("origin") else {
        return Ok(());
    };
    let host = text("host").unwrap_or("").trim();
    let (scheme, authority) = origin.trim().split_once("://").unwrap_or(("", ""));
    let scheme_ok = match scheme.to_ascii_lowercase().as_str() {
        "https" => true,
        "http" => !tls,
        _ => false,
    };
    if scheme_ok && !host.is_empty() && authority.eq_ignore_ascii_case(host) {
        Ok(())
    } else {
        Err(format!(
            "this was sent from {origin}, not from the gateway's own pages; use them"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn only_the_gateways_own_pages_pass() {
        assert!(from_own_page(&headers(&[("sec-fetch-site", "same-origin")]), false).is_ok());
        for site in ["cross-site", "same-site", "none"] {
            let e = from_own_page(&headers(&[("sec-fetch-site", site)]), false).unwrap_err();
            assert!(e.contains("another site"), "{e}");
        }
        // Fetch Metadata decides, whatever the Origin says.
        let lying = [
            ("sec-fetch-site", "same-site"),
            ("host", "gw:8080"),
            ("origin", "http://gw:8080"),
        ];
        assert!(from_own_page(&headers(&lying), false).is_err());
        // Without Fetch Metadata, the Origin must be this host.
        let here = [("host", "gw:8080"), ("origin", "http://gw:8080")];
        assert!(from_own_page(&headers(&here), false).is_ok());
        for other in [
            "http://gw:9999",
            "http://sub.gw:8080",
            "https://evil.example",
            "null",
        ] {
            let there = [("host", "gw:8080"), ("origin", other)];
            let e = from_own_page(&headers(&there), false).unwrap_err();
            assert!(e.contains(other), "{e}");
        }
        // A TLS listener takes no plain-HTTP page; a plain one takes its
        // host's https page (TLS ended in front of it).
        let plain_page = [("host", "gw"), ("origin", "http://gw")];
        assert!(from_own_page(&headers(&plain_page), true).is_err());
        let tls_page = [("host", "gw"), ("origin", "https://gw")];
        assert!(from_own_page(&headers(&tls_page), true).is_ok());
        assert!(from_own_page(&headers(&tls_page), false).is_ok());
        // No page at all: a client that is no browser.
        assert!(from_own_page(&headers(&[("host", "gw")]), true).is_ok());
    }
}
