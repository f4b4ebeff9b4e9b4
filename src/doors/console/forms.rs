//! The console's state-changing forms and what keeps another site from
//! posting them: a browser sends Basic credentials and client
//! certificates with any site's request, so a form post must prove it
//! came from a console page.
//!
//! - Fetch Metadata, or an `Origin` of this host: the gateway's own page
//!   (`pipeline::same_origin`, shared with the access-requests API).
//! - A token: a page with a form sets a random cookie (`SameSite=Strict`,
//!   `HttpOnly`, scoped to the console's path) and puts the same value in
//!   the form; a post must carry both, equal. Another site can neither
//!   read the cookie nor send it. Nothing is kept on the gateway, so any
//!   replica checks any form.
//!
//! Pure: headers and bodies in, a verdict out.

use http::{header, HeaderMap, HeaderValue};

/// The cookie holding the token, and the form field repeating it.
pub const COOKIE: &str = "jmxgate_console_csrf";
pub const FIELD: &str = "csrf";
/// Hex digits of a token (128 random bits).
const TOKEN_HEX: usize = 32;
/// Most fields a form may hold.
const MAX_FIELDS: usize = 32;

/// The token a page's forms carry: the browser's, or a new one to set.
pub struct Token {
    pub value: String,
    /// The `Set-Cookie` to send when the token is new.
    pub set_cookie: Option<HeaderValue>,
}

/// The caller's token from its cookie, or a new one with its cookie.
/// `base` is the console's path, `https` whether the listener is TLS.
pub fn token(headers: &HeaderMap, base: &str, https: bool) -> Token {
    if let Some(value) = cookie_token(headers) {
        return Token {
            value,
            set_cookie: None,
        };
    }
    let value = crate::random::hex(TOKEN_HEX / 2);
    let secure = if https { "; Secure" } else { "" };
    let cookie = format!("{COOKIE}={value}; Path={base}; HttpOnly; SameSite=Strict{secure}");
    Token {
        set_cookie: HeaderValue::from_str(&cookie).ok(),
        value,
    }
}

/// The well-formed token of the request's cookie, if any.
fn cookie_token(headers: &HeaderMap) -> Option<String> {
    cookie_value(headers, COOKIE)
        .filter(|v| v.len() == TOKEN_HEX && v.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_string)
}

/// A cookie's value in the request (non-empty).
pub fn cookie_value<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty())
}

/// Whether a form post comes from a console page: `Err` says why not,
/// in words for the person whose browser sent it (see
/// [`same_origin`](crate::pipeline::same_origin)).
pub fn check_origin(headers: &HeaderMap, tls: bool) -> Result<(), String> {
    crate::pipeline::same_origin::from_own_page(headers, tls)
}

/// A posted form's fields, with the token checked against the cookie.
pub fn read(headers: &HeaderMap, body: &[u8]) -> Result<Vec<(String, String)>, String> {
    let form_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|c| c.split(';').next())
        .is_some_and(|c| {
            c.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    if !form_type {
        return Err("send the console's form (application/x-www-form-urlencoded)".into());
    }
    let fields: Vec<(String, String)> = url::form_urlencoded::parse(body)
        .take(MAX_FIELDS + 1)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if fields.len() > MAX_FIELDS {
        return Err(format!("a form holds at most {MAX_FIELDS} fields"));
    }
    let sent = fields
        .iter()
        .find(|(k, _)| k == FIELD)
        .map(|(_, v)| v.as_str());
    match (cookie_token(headers), sent) {
        (Some(cookie), Some(sent)) if constant_time_eq(cookie.as_bytes(), sent.as_bytes()) => {
            Ok(fields)
        }
        _ => Err(
            "this form's token does not match your browser's: reload the page and send it again"
                .into(),
        ),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A form field's value, `""` when absent.
pub fn field<'a>(fields: &'a [(String, String)], name: &str) -> &'a str {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn a_page_reuses_the_browsers_token_or_sets_a_new_one() {
        let new = token(&HeaderMap::new(), "/console", true);
        assert_eq!(new.value.len(), TOKEN_HEX);
        let cookie = new.set_cookie.unwrap();
        let cookie = cookie.to_str().unwrap();
        for part in ["Path=/console", "HttpOnly", "SameSite=Strict", "Secure"] {
            assert!(cookie.contains(part), "{cookie}");
        }
        let again = token(
            &headers(&[("cookie", &format!("a=b; {COOKIE}={TOKEN}"))]),
            "/console",
            false,
        );
        assert_eq!((again.value.as_str(), again.set_cookie), (TOKEN, None));
        // A cookie that isn't one of ours is replaced.
        let odd = token(
            &headers(&[("cookie", &format!("{COOKIE}=<script>"))]),
            "/console",
            false,
        );
        assert!(odd.set_cookie.is_some());
    }

    #[test]
    fn a_form_needs_its_token_to_match_the_cookie() {
        let form = |cookie: Option<&str>, body: &str| {
            let mut h = headers(&[("content-type", "application/x-www-form-urlencoded")]);
            if let Some(c) = cookie {
                h.append("cookie", HeaderValue::from_str(c).unwrap());
            }
            read(&h, body.as_bytes())
        };
        let cookie = format!("{COOKIE}={TOKEN}");
        let ok = form(Some(&cookie), &format!("role=ops&csrf={TOKEN}")).unwrap();
        assert_eq!(field(&ok, "role"), "ops");
        assert_eq!(field(&ok, "absent"), "");
        for (c, body) in [
            (None, format!("csrf={TOKEN}")),
            (Some(cookie.as_str()), "role=ops".to_string()),
            (
                Some(cookie.as_str()),
                "csrf=ffffffffffffffffffffffffffffffff".into(),
            ),
        ] {
            assert!(form(c, &body).unwrap_err().contains("token"), "{body}");
        }
        let too_many: String = (0..=MAX_FIELDS).map(|i| format!("f{i}=x&")).collect();
        assert!(form(Some(&cookie), &too_many)
            .unwrap_err()
            .contains("at most"));
        let json = read(
            &headers(&[("content-type", "application/json")]),
            b"{\"role\":\"ops\"}",
        );
        assert!(json.unwrap_err().contains("x-www-form-urlencoded"));
    }
}
