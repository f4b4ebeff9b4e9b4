//! Hawtio, served by the gateway already connected to one target: with
//! `[console] hawtio` (the directory of Hawtio's static build),
//! `<console>/hawtio/<target>/` is Hawtio's page with its `<base href>`
//! there, so the Jolokia URL Hawtio finds first, `jolokia` next to the
//! page, is that target's virtual URL (`addressing` routes it to the
//! Jolokia door like `/jolokia/targets/<target>`). Each tab has its target
//! in its address; nothing is chosen by a cookie.
//!
//! The gateway also plays the few backend endpoints Hawtio asks of its
//! server: `user` (the caller), `proxy/enabled` (`false`: Hawtio's proxy,
//! which would connect where a page says, does not exist here),
//! `preset-connections` (none) and `hawtconfig.json` (the directory's,
//! else a plain one).
//!
//! With a Hawtio elsewhere (`[console] hawtio` a URL), "Open in Hawtio"
//! opens `<url>/?con=<target>`, the connection of that name, and
//! `<console>/hawtio-connections.json` is the viewer's targets as Hawtio
//! connections to their virtual URLs, for Hawtio's *Import connections*.

use crate::doors::DoorSections;
use crate::pipeline::RequestContext;
use std::path::{Path, PathBuf};

use axum::body::Body;
use http::Response;

use crate::pipeline::Gateway;

use super::{config, page};

/// What Hawtio's page may load and do: its own scripts and styles
/// (PatternFly sets inline styles), data: images and fonts, workers
/// (Monaco), requests to this origin only; never framed.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; \
     connect-src 'self'; worker-src 'self' blob:; object-src 'none'; frame-ancestors 'none'; \
     base-uri 'self'; form-action 'self'";

/// `hawtconfig.json` when the directory has none.
const HAWTCONFIG: &str = r#"{"branding":{"appName":"Hawtio through jmxgate","showAppName":true},"about":{"title":"Hawtio through jmxgate","productInfo":[]}}"#;

/// What a request below `<console>/hawtio/<target>/` is.
#[derive(Debug, PartialEq, Eq)]
pub enum Asked {
    /// `<console>/hawtio/<target>` without its slash.
    Slash,
    User,
    ProxyEnabled,
    PresetConnections,
    HawtConfig,
    /// A file of the build, by its relative path.
    File(PathBuf),
    /// A path of Hawtio's own (a client-side route): the page.
    Page,
    /// An endpoint of Hawtio's Java backend that isn't here.
    Missing,
}

/// Reads `rest`, the path after `<target>`.
pub fn asked(rest: &str) -> Asked {
    let Some(rest) = rest.strip_prefix('/') else {
        return if rest.is_empty() {
            Asked::Slash
        } else {
            Asked::Missing
        };
    };
    match rest {
        "user" => return Asked::User,
        "proxy/enabled" => return Asked::ProxyEnabled,
        "preset-connections" => return Asked::PresetConnections,
        "hawtconfig.json" => return Asked::HawtConfig,
        "" => return Asked::Page,
        _ => {}
    }
    let segments: Vec<&str> = rest.split('/').collect();
    let safe = segments.iter().all(|s| {
        !s.is_empty() && *s != "." && *s != ".." && !s.contains(['\\', '\0']) && !s.starts_with('.')
    });
    let asset = Path::new(rest).extension().is_some();
    if rest.starts_with("auth/") || rest.starts_with("proxy/") || rest == "refresh" {
        Asked::Missing
    } else if safe && asset {
        Asked::File(segments.iter().collect())
    } else if asset {
        Asked::Missing
    } else {
        Asked::Page
    }
}

/// The build's `index.html` with its `<base href>` at `base` (the page's
/// directory, ending in `/`), as Hawtio's own server rewrites it.
pub fn page_with_base(index: &str, base: &str) -> String {
    let escaped = base.replace('&', "&amp;").replace('"', "&quot;");
    if let Some(at) = index.find("<base href=\"") {
        let value = at + "<base href=\"".len();
        if let Some(len) = index[value..].find('"') {
            return format!("{}{escaped}{}", &index[..value], &index[value + len..]);
        }
    }
    match index.find("<head>") {
        Some(at) => format!(
            "{}<head><base href=\"{escaped}\" />{}",
            &index[..at],
            &index[at + "<head>".len()..]
        ),
        None => index.to_string(),
    }
}

/// The Content-Type of a file by its extension.
pub fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "ico" => "image/x-icon",
        "woff" => "font/woff",
        "woff2" => "font/woff2",
        "ttf" => "font/ttf",
        "eot" => "application/vnd.ms-fontobject",
        "wasm" => "application/wasm",
        _ => "application/octet-stream",
    }
}

/// Reads a file of the build, only from inside `dir` (no link leads out).
pub async fn read_file(dir: &Path, relative: &Path) -> Option<Vec<u8>> {
    let root = tokio::fs::canonicalize(dir).await.ok()?;
    let file = tokio::fs::canonicalize(root.join(relative)).await.ok()?;
    if !file.starts_with(&root) {
        return None;
    }
    let meta = tokio::fs::metadata(&file).await.ok()?;
    if !meta.is_file() {
        return None;
    }
    tokio::fs::read(&file).await.ok()
}

pub fn hawtconfig() -> &'static str {
    HAWTCONFIG
}

/// An answer of Hawtio's pages and files under its own policy; files of
/// the build may be kept a while, the rest not at all.
pub fn respond(status: u16, content_type: &str, body: Vec<u8>, cacheable: bool) -> Response<Body> {
    let cache = if cacheable {
        "private, max-age=300"
    } else {
        "no-store"
    };
    super::page::respond_with(
        status,
        content_type,
        body.into(),
        CONTENT_SECURITY_POLICY,
        cache,
    )
}

/// Most connections one export holds; past it, a selector narrows.
const MAX_CONNECTIONS: usize = 10_000;

/// "Open in Hawtio" for a Hawtio elsewhere: its connection named after
/// the target.
pub fn elsewhere_link(url: &str, target: &str) -> String {
    let q: String = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("con", target)
        .finish();
    format!("{}/?{q}", url.trim_end_matches('/'))
}

/// One target as a Hawtio connection to its virtual URL on `gateway`
/// (`scheme`, host, port) (Hawtio's connection: name, scheme, host,
/// port, path).
fn connection(gateway: &url::Url, target: &str) -> serde_json::Value {
    const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    let name = percent_encoding::utf8_percent_encode(target, SEGMENT);
    let path = format!("/jolokia/targets/{name}");
    serde_json::json!({
        "name": target,
        "scheme": gateway.scheme(),
        "host": gateway.host_str().unwrap_or("localhost"),
        "port": gateway.port_or_known_default().unwrap_or(80),
        "path": path,
    })
}

/// `GET <console>/hawtio-connections.json[?selector=…&q=…]`: the
/// targets the viewer reaches (filtered as on the fleet page) as Hawtio
/// connections, as a download.
pub(crate) async fn hawtio_connections(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    parts: &http::request::Parts,
    headers: &http::HeaderMap,
    viewer: &RequestContext,
) -> Response<Body> {
    let base = state.console().path.as_str();
    let who = &page::Viewer::of(viewer, state);
    // The fleet page's filters (`selector`, `q`), read and bounded as
    // there.
    let filters = match super::overview::Query::parse(parts.uri.query()) {
        Ok(q) => q,
        Err(why) => return page::error(400, &why, base, who),
    };
    let public_url = super::login::public_url(state, headers, viewer.tls);
    let mut connections = Vec::new();
    for t in state.fleet.iter() {
        if !state.access.reaches(&viewer.held, t) || !filters.keeps(t) {
            continue;
        }
        if connections.len() == MAX_CONNECTIONS {
            return page::error(
                400,
                &format!(
                    "You reach more than {MAX_CONNECTIONS} targets: ask for fewer with ?selector=…"
                ),
                base,
                who,
            );
        }
        connections.push(connection(&public_url, &t.name));
    }
    if let Err(e) = super::audit_listing(
        gateway,
        viewer,
        "hawtio_connections",
        200,
        connections.len(),
    )
    .await
    {
        return page::error(e.status, &e.message, base, who);
    }
    let body = serde_json::Value::from(connections).to_string();
    let mut r = page::respond(200, "application/json", body);
    r.headers_mut().insert(
        http::header::CONTENT_DISPOSITION,
        http::HeaderValue::from_static("attachment; filename=\"jmxgate-connections.json\""),
    );
    r
}

/// Hawtio for one target (`after`: the path after `/hawtio/`); a
/// target the viewer doesn't reach is no target, as on its page.
pub(crate) async fn hawtio_http(
    _gateway: &Gateway,
    state: &crate::pipeline::state::State,
    viewer: &RequestContext,
    after: &str,
) -> Response<Body> {
    let base = state.console().path.as_str();
    let who = &page::Viewer::of(viewer, state);
    let Some(dir) = state.console().hawtio_served().map(std::path::Path::new) else {
        return page::error(
            404,
            "Hawtio is not served here ([console] hawtio is not set).",
            base,
            who,
        );
    };
    let (raw, rest) = after.find('/').map_or((after, ""), |i| after.split_at(i));
    let name = percent_encoding::percent_decode_str(raw).decode_utf8_lossy();
    if let Some(hidden) = super::unseen_target(viewer, state, &name) {
        return hidden;
    }
    let page_base = format!("{base}{}{raw}/", config::HAWTIO);
    let not_found = || respond(404, "text/plain; charset=utf-8", Vec::new(), false);
    match asked(rest) {
        Asked::Slash => {
            let mut r = respond(308, "text/plain; charset=utf-8", Vec::new(), false);
            if let Ok(to) = http::HeaderValue::from_str(&page_base) {
                r.headers_mut().insert(http::header::LOCATION, to);
            }
            r
        }
        Asked::User => {
            let user = serde_json::Value::from(who.name).to_string();
            respond(200, "application/json", user.into_bytes(), false)
        }
        Asked::ProxyEnabled => respond(200, "text/plain; charset=utf-8", b"false".to_vec(), false),
        Asked::PresetConnections => respond(200, "application/json", b"[]".to_vec(), false),
        Asked::HawtConfig => {
            let own = read_file(dir, std::path::Path::new("hawtconfig.json")).await;
            let body = own.unwrap_or_else(|| hawtconfig().as_bytes().to_vec());
            respond(200, "application/json", body, false)
        }
        Asked::File(path) => match read_file(dir, &path).await {
            Some(bytes) => respond(200, content_type(&path), bytes, true),
            None => not_found(),
        },
        Asked::Page => match read_file(dir, std::path::Path::new("index.html")).await {
            Some(index) => {
                let index = String::from_utf8_lossy(&index);
                let page = page_with_base(&index, &page_base);
                respond(200, "text/html; charset=utf-8", page.into_bytes(), false)
            }
            None => page::error(
                500,
                "Hawtio's index.html is gone from [console] hawtio.",
                base,
                who,
            ),
        },
        Asked::Missing => not_found(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hawtio_elsewhere_opens_the_targets_connection() {
        assert_eq!(
            elsewhere_link("https://h.example/hawtio/", "orders 1&x"),
            "https://h.example/hawtio/?con=orders+1%26x"
        );
        let gw = url::Url::parse("https://gw.example").unwrap();
        assert_eq!(
            connection(&gw, "orders-1"),
            serde_json::json!({"name": "orders-1", "scheme": "https", "host": "gw.example",
                               "port": 443, "path": "/jolokia/targets/orders-1"})
        );
    }

    #[test]
    fn paths_are_hawtios_endpoints_files_or_its_page() {
        assert_eq!(asked(""), Asked::Slash);
        assert_eq!(asked("/"), Asked::Page);
        assert_eq!(asked("/user"), Asked::User);
        assert_eq!(asked("/proxy/enabled"), Asked::ProxyEnabled);
        assert_eq!(asked("/preset-connections"), Asked::PresetConnections);
        assert_eq!(asked("/hawtconfig.json"), Asked::HawtConfig);
        assert_eq!(
            asked("/assets/logo-1.svg"),
            Asked::File(PathBuf::from("assets/logo-1.svg"))
        );
        assert_eq!(asked("/jmx/attributes"), Asked::Page);
        for missing in [
            "/../../etc/passwd.txt",
            "/assets/../x.js",
            "/.hidden.js",
            "/auth/logout",
            "/proxy/http/evil/80/x",
            "/refresh",
            "x",
        ] {
            assert_eq!(asked(missing), Asked::Missing, "{missing}");
        }
    }

    #[test]
    fn the_page_gets_its_base() {
        let index = "<html><head><base href=\"/hawtio/\" /><title>t</title></head></html>";
        assert_eq!(
            page_with_base(index, "/console/hawtio/orders-1/"),
            "<html><head><base href=\"/console/hawtio/orders-1/\" /><title>t</title></head></html>"
        );
        assert_eq!(
            page_with_base("<html><head></head></html>", "/c/hawtio/a\"b/"),
            "<html><head><base href=\"/c/hawtio/a&quot;b/\" /></head></html>"
        );
    }

    #[tokio::test]
    async fn files_are_read_from_inside_the_directory_only() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "no").unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("console.js"), "ok").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(
            outside.path().join("secret.txt"),
            dir.path().join("link.txt"),
        )
        .unwrap();
        assert_eq!(
            read_file(dir.path(), Path::new("console.js")).await,
            Some(b"ok".to_vec())
        );
        assert_eq!(read_file(dir.path(), Path::new("link.txt")).await, None);
        assert_eq!(read_file(dir.path(), Path::new("none.js")).await, None);
    }
}
