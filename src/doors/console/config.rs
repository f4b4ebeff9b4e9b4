//! `[console]`: where the fleet console is served (a leaf: `config`
//! composes it without importing the door).

use serde::Deserialize;

/// Where below the console's path Hawtio is served.
pub const HAWTIO: &str = "/hawtio/";
/// Where below the console's path the viewer's targets are offered as
/// connections for a Hawtio elsewhere.
pub const HAWTIO_CONNECTIONS: &str = "/hawtio-connections.json";

/// `[console]`: HTML pages for people, on the Jolokia listeners.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsoleConfig {
    pub enabled: bool,
    /// Where, on the gateway's listeners; the pages are below it.
    pub path: String,
    /// Roles whose holders read everyone's audit records on the audit
    /// page and verify the chain; everyone else reads their own.
    pub auditors: Vec<String>,
    /// The directory of a Hawtio console's static build (its
    /// `index.html`), served below `<path>/hawtio/<target>/` already
    /// connected to that target; or the URL of a Hawtio elsewhere, which
    /// "Open in Hawtio" opens at the target's connection.
    pub hawtio: Option<String>,
    /// `[console.oidc]`: sign in at an OpenID provider instead of the
    /// browser's Basic dialog.
    pub oidc: Option<OidcLogin>,
    /// The gateway's URL as browsers reach it (`https://gw.example.com`),
    /// when a proxy stands in front; else the request's own scheme and
    /// `Host`. The sign-in's redirect and Hawtio connections use it.
    pub public_url: Option<String>,
}

/// `[console.oidc]`: the authorization-code flow with PKCE. The access
/// token it gets is verified by `[auth.bearer]` exactly as a bearer
/// header is, and kept in the browser as the session cookie.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OidcLogin {
    /// The console's client at the provider.
    pub client_id: String,
    /// For a confidential client: a file whose first line is its secret
    /// (a public client has none; PKCE protects the code either way).
    #[serde(default)]
    pub client_secret_file: Option<std::path::PathBuf>,
    /// Default: `[auth.bearer] issuer`.
    #[serde(default)]
    pub issuer: Option<String>,
    /// Where the provider sends the browser back; below the console's
    /// path. Default `<path>/oidc/callback`.
    #[serde(default)]
    pub redirect_path: Option<String>,
    /// Scopes asked for; default `["openid"]`.
    #[serde(default = "default_scopes")]
    pub scopes: Vec<String>,
    /// A resource indicator (RFC 8707) asked for, so the access token is
    /// for the gateway (its audience), e.g. `urn:jmxgate`.
    #[serde(default)]
    pub resource: Option<String>,
}

fn default_scopes() -> Vec<String> {
    vec!["openid".into()]
}

impl OidcLogin {
    /// Its own problems (the issuer and `[auth.bearer]` are checked where
    /// the whole configuration is seen).
    fn problems(&self, base: &str) -> Vec<String> {
        let mut problems = Vec::new();
        if self.client_id.trim().is_empty() {
            problems.push("console.oidc.client_id: empty".to_string());
        }
        let redirect = self.redirect_path(base);
        if !redirect.starts_with(&format!("{base}/")) || redirect.contains(['?', '#']) {
            problems.push(format!(
                "console.oidc.redirect_path: \"{redirect}\" must be below the console's path {base}/ (the sign-in cookie is scoped to it)"
            ));
        }
        if !self.scopes.iter().any(|s| s == "openid") {
            problems.push("console.oidc.scopes: must include \"openid\"".to_string());
        }
        if let Some(file) = &self.client_secret_file {
            if let Err(e) = std::fs::metadata(file) {
                problems.push(format!(
                    "console.oidc.client_secret_file: {}: {e}",
                    file.display()
                ));
            }
        }
        problems
    }

    /// Where the provider sends the browser back, below `base`.
    pub fn redirect_path(&self, base: &str) -> String {
        self.redirect_path
            .clone()
            .unwrap_or_else(|| format!("{base}/oidc/callback"))
    }
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        ConsoleConfig {
            enabled: true,
            path: "/console".into(),
            auditors: Vec::new(),
            hawtio: None,
            oidc: None,
            public_url: None,
        }
    }
}

impl ConsoleConfig {
    /// Every problem, named by its key; `roles` are the configured
    /// role names.
    pub fn problems(&self, roles: &[String]) -> Vec<String> {
        let mut problems = Vec::new();
        let p = &self.path;
        if !p.starts_with('/') || p.len() < 2 || p.ends_with('/') || p.contains(['?', '#']) {
            problems.push(format!(
                "console.path: \"{p}\" is not a path like \"/console\" (a leading /, no trailing /)"
            ));
        }
        if let Some(url) = self.hawtio_elsewhere() {
            match url::Url::parse(url) {
                Ok(u) if matches!(u.scheme(), "http" | "https")
                    && u.host().is_some()
                    && u.query().is_none()
                    && u.fragment().is_none() => {}
                _ => problems.push(format!(
                    "console.hawtio: \"{url}\" is not the http(s) URL of a Hawtio console (like https://hawtio.example.com/hawtio), nor a directory"
                )),
            }
        } else if let Some(hawtio) = &self.hawtio {
            if !std::path::Path::new(hawtio).join("index.html").is_file() {
                problems.push(format!(
                    "console.hawtio: {hawtio} holds no index.html; give the directory of Hawtio's static build"
                ));
            }
        }
        for role in self.auditors.iter().filter(|r| !roles.contains(r)) {
            problems.push(format!("console.auditors: no role is named \"{role}\""));
        }
        if let Some(oidc) = &self.oidc {
            problems.extend(oidc.problems(&self.path));
        }
        if let Some(url) = &self.public_url {
            match url::Url::parse(url) {
                Ok(u) if matches!(u.scheme(), "http" | "https")
                    && u.host().is_some()
                    && u.path() == "/"
                    && u.query().is_none() => {}
                _ => problems.push(format!(
                    "console.public_url: \"{url}\" is not a URL like https://gw.example.com (scheme and host, no path)"
                )),
            }
        }
        problems
    }

    /// A Jolokia request of the Hawtio served for a target,
    /// `<path>/hawtio/<target>/jolokia[/…]`: the target and the Jolokia
    /// path after `jolokia`.
    pub fn hawtio_jolokia(&self, path: &str) -> Option<(String, String)> {
        if !self.enabled || self.hawtio_served().is_none() {
            return None;
        }
        let rest = path
            .strip_prefix(self.path.as_str())?
            .strip_prefix(HAWTIO)?;
        let (target, tail) = rest.split_once('/')?;
        let after = tail.strip_prefix("jolokia")?;
        if !(after.is_empty() || after.starts_with('/')) || target.is_empty() {
            return None;
        }
        let target = percent_encoding::percent_decode_str(target).decode_utf8_lossy();
        Some((target.into_owned(), after.to_string()))
    }

    /// The directory of the Hawtio build served here.
    pub fn hawtio_served(&self) -> Option<&str> {
        self.hawtio.as_deref().filter(|h| !h.contains("://"))
    }

    /// The URL of a Hawtio elsewhere.
    pub fn hawtio_elsewhere(&self) -> Option<&str> {
        self.hawtio.as_deref().filter(|h| h.contains("://"))
    }

    /// Whether a request path is the console's: its path, or below it.
    pub fn serves(&self, path: &str) -> bool {
        self.enabled
            && path
                .strip_prefix(self.path.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_and_what_is_below_it() {
        let c = ConsoleConfig::default();
        assert!(c.serves("/console") && c.serves("/console/") && c.serves("/console/x"));
        assert!(!c.serves("/consolex") && !c.serves("/jolokia"));
        assert!(c.problems(&[]).is_empty());
        for bad in ["console", "/", "/console/", "/c?x"] {
            let c = ConsoleConfig {
                path: bad.into(),
                ..ConsoleConfig::default()
            };
            assert!(c.problems(&[])[0].contains("console.path"), "{bad}");
        }
        let c = ConsoleConfig {
            auditors: vec!["security".into(), "nobody".into()],
            ..ConsoleConfig::default()
        };
        assert_eq!(
            c.problems(&["security".into()]),
            ["console.auditors: no role is named \"nobody\""]
        );
        let dir = tempfile::tempdir().unwrap();
        let with_hawtio = |h: &str| ConsoleConfig {
            hawtio: Some(h.into()),
            ..ConsoleConfig::default()
        };
        let d = dir.path().display().to_string();
        assert!(with_hawtio(&d).problems(&[])[0].contains("no index.html"));
        assert!(with_hawtio("https://hawtio.example/hawtio")
            .problems(&[])
            .is_empty());
        for bad in ["ftp://hawtio.example/", "https://h/?con=x", "http://"] {
            assert!(
                with_hawtio(bad).problems(&[])[0].contains("is not the http(s) URL"),
                "{bad}"
            );
        }
        assert!(with_hawtio("https://h/hawtio")
            .hawtio_jolokia("/console/hawtio/o/jolokia")
            .is_none());
        std::fs::write(dir.path().join("index.html"), "<html>").unwrap();
        let h = with_hawtio(&d);
        assert!(h.problems(&[]).is_empty());
        assert_eq!(
            h.hawtio_jolokia("/console/hawtio/orders%2D1/jolokia"),
            Some(("orders-1".into(), String::new()))
        );
        assert_eq!(
            h.hawtio_jolokia("/console/hawtio/o/jolokia/read/a:b=c/X"),
            Some(("o".into(), "/read/a:b=c/X".into()))
        );
        for not in [
            "/console/hawtio/o/console.js",
            "/console/hawtio/o/jolokiax",
            "/console/hawtio//jolokia",
            "/console/x",
        ] {
            assert_eq!(h.hawtio_jolokia(not), None, "{not}");
        }
        assert_eq!(
            ConsoleConfig::default().hawtio_jolokia("/console/hawtio/o/jolokia"),
            None
        );
        let off = ConsoleConfig {
            enabled: false,
            ..ConsoleConfig::default()
        };
        assert!(!off.serves("/console"));
    }
}
