//! The OpenID sign-in's own workings, apart from any request's state (so
//! the gateway's state can hold a [`SignIn`] without importing the
//! door): the provider's endpoints found by discovery, the authorization
//! request with PKCE (RFC 7636), the code traded for a token, the cookies
//! that carry a sign-in under way and the session, and which requests the
//! session counts for. `login` answers the requests with them.

use base64::Engine as _;
use http::{header, HeaderMap, HeaderValue};
use sha2::Digest as _;

use super::config::{ConsoleConfig, OidcLogin};
use super::forms::cookie_value;
use crate::pipeline::authenticate::bearer::BearerConfig;
use crate::secret::Secret;

/// The cookie holding the access token.
pub const SESSION_COOKIE: &str = "jmxgate_console_session";
/// The cookie holding a sign-in under way: `state.verifier.return-to`.
pub(crate) const SIGN_IN_COOKIE: &str = "jmxgate_console_signin";
/// How long a sign-in may take at the provider.
const SIGN_IN_SECONDS: u32 = 600;
/// The largest provider answer read (discovery, token).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// A console's sign-in at its provider: the settings, an HTTPS client
/// for the provider, and its endpoints once discovered.
pub struct SignIn {
    pub(crate) config: OidcLogin,
    pub(crate) issuer: String,
    pub(crate) base: String,
    client_secret: Option<Secret>,
    http: reqwest::Client,
    endpoints: tokio::sync::Mutex<Option<Endpoints>>,
}

#[derive(Clone)]
pub(crate) struct Endpoints {
    authorization: url::Url,
    token: url::Url,
}

impl SignIn {
    /// `None` without `[console.oidc]`; the problems were named by
    /// check-config, so an `Err` here is a file that went away.
    pub fn new(
        console: &ConsoleConfig,
        bearer: Option<&BearerConfig>,
    ) -> Result<Option<SignIn>, String> {
        let (Some(config), Some(bearer)) = (console.oidc.as_ref(), bearer) else {
            return Ok(None);
        };
        if !console.enabled {
            return Ok(None);
        }
        let issuer = config
            .issuer
            .clone()
            .or_else(|| bearer.issuer.clone())
            .ok_or("console.oidc.issuer: not set, here or as auth.bearer.issuer")?;
        let client_secret = config
            .client_secret_file
            .as_deref()
            .map(Secret::first_line_of)
            .transpose()
            .map_err(|e| format!("console.oidc.client_secret_file: {e}"))?;
        let http =
            crate::pipeline::authenticate::jwks_remote::provider_client(bearer.ca_file.as_deref())
                .map_err(|e| format!("console.oidc: {e}"))?;
        Ok(Some(SignIn {
            config: config.clone(),
            issuer,
            base: console.path.clone(),
            client_secret,
            http,
            endpoints: tokio::sync::Mutex::new(None),
        }))
    }

    /// The provider's endpoints, by discovery; kept once found.
    pub(crate) async fn endpoints(&self) -> Result<Endpoints, String> {
        let mut known = self.endpoints.lock().await;
        if let Some(e) = &*known {
            return Ok(e.clone());
        }
        let url = format!(
            "{}/.well-known/openid-configuration",
            self.issuer.trim_end_matches('/')
        );
        let document: serde_json::Value = self.get_json(self.http.get(&url)).await?;
        let endpoint = |name: &str| -> Result<url::Url, String> {
            let text = document[name]
                .as_str()
                .ok_or(format!("the provider's discovery document has no {name}"))?;
            url::Url::parse(text).map_err(|e| format!("{name}: {e}"))
        };
        let found = Endpoints {
            authorization: endpoint("authorization_endpoint")?,
            token: endpoint("token_endpoint")?,
        };
        *known = Some(found.clone());
        Ok(found)
    }

    async fn get_json(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<serde_json::Value, String> {
        let mut r = request
            .send()
            .await
            .map_err(|e| e.without_url().to_string())?;
        let status = r.status();
        let mut body = Vec::new();
        while let Some(chunk) = r.chunk().await.map_err(|e| e.without_url().to_string())? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_ANSWER_BYTES {
                return Err("the provider's answer is too large".into());
            }
        }
        let value: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|_| format!("the provider answered {status} with no JSON"))?;
        if !status.is_success() {
            let text = |k: &str| value[k].as_str().unwrap_or("").to_string();
            return Err(format!(
                "the provider answered {status}: {} {}",
                text("error"),
                text("error_description")
            )
            .trim()
            .to_string());
        }
        Ok(value)
    }

    /// Trades the callback's code for the access token.
    pub(crate) async fn exchange(
        &self,
        endpoints: &Endpoints,
        code: &str,
        verifier: &str,
        redirect_uri: &str,
    ) -> Result<String, String> {
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("client_id", self.config.client_id.as_str()),
            ("code_verifier", verifier),
        ];
        if let Some(resource) = &self.config.resource {
            form.push(("resource", resource));
        }
        if let Some(secret) = &self.client_secret {
            form.push(("client_secret", secret.expose()));
        }
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let answer = self
            .get_json(
                self.http
                    .post(endpoints.token.clone())
                    .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                    .header(header::ACCEPT, "application/json")
                    .body(body),
            )
            .await?;
        answer["access_token"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| "the provider's answer has no access_token".into())
    }

    /// Where the provider sends the browser back, on the gateway as
    /// browsers reach it.
    pub(crate) fn redirect_uri(&self, public: &url::Url) -> String {
        let path = self.config.redirect_path(&self.base);
        format!("{}{path}", public.as_str().trim_end_matches('/'))
    }

    /// The start of a sign-in: the provider's URL to send the browser to,
    /// and the cookie holding what the callback checks.
    pub(crate) fn start(
        &self,
        endpoints: &Endpoints,
        redirect_uri: &str,
        return_to: &str,
        https: bool,
    ) -> (String, String) {
        let state = random_text(16);
        let verifier = random_text(32);
        let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(sha2::Sha256::digest(verifier.as_bytes()));
        let mut url = endpoints.authorization.clone();
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("response_type", "code")
                .append_pair("client_id", &self.config.client_id)
                .append_pair("redirect_uri", redirect_uri)
                .append_pair("scope", &self.config.scopes.join(" "))
                .append_pair("state", &state)
                .append_pair("code_challenge", &challenge)
                .append_pair("code_challenge_method", "S256");
            if let Some(resource) = &self.config.resource {
                q.append_pair("resource", resource);
            }
        }
        let back = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(return_to);
        let cookie = cookie(
            SIGN_IN_COOKIE,
            &format!("{state}.{verifier}.{back}"),
            &self.base,
            https,
            Some(SIGN_IN_SECONDS),
        );
        (url.into(), cookie)
    }
}

fn random_text(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    getrandom::getrandom(&mut buf).expect("the system's random source");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(buf)
}

/// A `Set-Cookie` value: `HttpOnly`, `SameSite=Lax` (it must come back
/// on the provider's redirect, a cross-site navigation), scoped to the
/// console's path; `max_age` 0 deletes it.
pub(crate) fn cookie(
    name: &str,
    value: &str,
    base: &str,
    https: bool,
    max_age: Option<u32>,
) -> String {
    let secure = if https { "; Secure" } else { "" };
    let age = max_age
        .map(|s| format!("; Max-Age={s}"))
        .unwrap_or_default();
    format!("{name}={value}; Path={base}; HttpOnly; SameSite=Lax{secure}{age}")
}

/// The page a sign-in returns to: a console page's path and query, else
/// the console's front page (never another site, never another door).
pub(crate) fn safe_return(base: &str, wanted: &str) -> String {
    let ok = wanted
        .strip_prefix(base)
        .is_some_and(|rest| rest.is_empty() || (rest.starts_with('/') && !rest.starts_with("//")))
        && !wanted.contains(['\\', '\r', '\n']);
    if ok {
        wanted.to_string()
    } else {
        format!("{base}/")
    }
}

/// What a callback brought, checked against the sign-in cookie.
#[derive(Debug, PartialEq)]
pub(crate) struct Callback {
    pub code: String,
    pub verifier: String,
    pub return_to: String,
}

/// Checks a callback's query against the sign-in cookie (pure).
pub(crate) fn check_callback(
    base: &str,
    query: &str,
    headers: &HeaderMap,
) -> Result<Callback, String> {
    let params: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    let param = |k: &str| params.iter().find(|(q, _)| q == k).map(|(_, v)| v.as_str());
    if let Some(error) = param("error") {
        let description = param("error_description").unwrap_or("");
        return Err(
            format!("the provider ended the sign-in: {error} {description}")
                .trim()
                .to_string(),
        );
    }
    let Some(saved) = cookie_value(headers, SIGN_IN_COOKIE) else {
        return Err(
            "no sign-in is under way in this browser (it took over 10 minutes, or cookies are off)"
                .into(),
        );
    };
    let mut parts = saved.splitn(3, '.');
    let (Some(state), Some(verifier), Some(back)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err("the sign-in cookie is damaged".into());
    };
    if param("state") != Some(state) {
        return Err("this answer is not for the sign-in this browser started (another tab may have started a newer one)".into());
    }
    let code = param("code")
        .filter(|c| !c.is_empty())
        .ok_or("the provider's answer has no code")?;
    let return_to = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(back)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_default();
    Ok(Callback {
        code: code.to_string(),
        verifier: verifier.to_string(),
        return_to: safe_return(base, &return_to),
    })
}

/// The session cookie as a bearer credential, for a request the cookie
/// is honoured on: a console page, or (only from the console's own
/// origin) a Jolokia request of the Hawtio it serves. `None` where the
/// request brings its own credentials or no session.
pub fn session_credentials(
    console: &ConsoleConfig,
    path: &str,
    headers: &HeaderMap,
    tls: bool,
) -> Option<HeaderValue> {
    if console.oidc.is_none()
        || !console.serves(path)
        || headers.contains_key(header::AUTHORIZATION)
    {
        return None;
    }
    // A link from another site must not run an operation with the
    // viewer's session.
    if console.hawtio_jolokia(path).is_some() && super::forms::check_origin(headers, tls).is_err() {
        return None;
    }
    let token = cookie_value(headers, SESSION_COOKIE)?;
    let mut value = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(cookies: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, HeaderValue::from_str(cookies).unwrap());
        h
    }

    #[test]
    fn a_callback_must_match_the_sign_in_this_browser_started() {
        let back = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("/console/targets/a");
        let h = headers(&format!("x=1; {SIGN_IN_COOKIE}=st.ver.{back}"));
        assert_eq!(
            check_callback("/console", "code=c1&state=st", &h).unwrap(),
            Callback {
                code: "c1".into(),
                verifier: "ver".into(),
                return_to: "/console/targets/a".into()
            }
        );
        for (query, cookies, why) in [
            ("code=c1&state=other", h.clone(), "not for the sign-in"),
            (
                "code=c1&state=st",
                HeaderMap::new(),
                "no sign-in is under way",
            ),
            ("state=st", h.clone(), "no code"),
            (
                "error=access_denied&error_description=no",
                h.clone(),
                "access_denied no",
            ),
            (
                "code=c&state=st",
                headers(&format!("{SIGN_IN_COOKIE}=st")),
                "damaged",
            ),
        ] {
            let e = check_callback("/console", query, &cookies).unwrap_err();
            assert!(e.contains(why), "{query}: {e}");
        }
    }

    #[test]
    fn a_sign_in_returns_only_to_a_console_page() {
        assert_eq!(safe_return("/console", "/console/x?a=1"), "/console/x?a=1");
        assert_eq!(safe_return("/console", "/console"), "/console");
        for bad in [
            "//evil.example/",
            "/jolokia/read",
            "https://evil/",
            "/console//evil",
            "/consolex",
            "/console/\\evil",
        ] {
            assert_eq!(safe_return("/console", bad), "/console/", "{bad}");
        }
    }

    #[test]
    fn the_session_is_a_credential_on_console_pages_only() {
        let mut console = ConsoleConfig {
            oidc: Some(OidcLogin {
                client_id: "c".into(),
                client_secret_file: None,
                issuer: None,
                redirect_path: None,
                scopes: vec!["openid".into()],
                resource: None,
            }),
            hawtio: Some("/h".into()),
            ..ConsoleConfig::default()
        };
        let h = headers(&format!("{SESSION_COOKIE}=tok"));
        assert_eq!(
            session_credentials(&console, "/console/", &h, false).unwrap(),
            "Bearer tok"
        );
        assert!(session_credentials(&console, "/jolokia/read/x", &h, false).is_none());
        assert!(session_credentials(&console, "/jmxgate/events", &h, false).is_none());
        // Hawtio's Jolokia requests: from the console's own origin only.
        let jolokia = "/console/hawtio/t/jolokia/exec/a:b=c/op";
        let mut cross = h.clone();
        cross.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(session_credentials(&console, jolokia, &cross, false).is_none());
        let mut same = h.clone();
        same.insert("sec-fetch-site", HeaderValue::from_static("same-origin"));
        assert!(session_credentials(&console, jolokia, &same, false).is_some());
        // Credentials of its own win; no OIDC, no session.
        let mut basic = h.clone();
        basic.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Basic eDp5"),
        );
        assert!(session_credentials(&console, "/console/", &basic, false).is_none());
        console.oidc = None;
        assert!(session_credentials(&console, "/console/", &h, false).is_none());
    }

    #[test]
    fn a_sign_in_asks_with_pkce_and_the_callback_checks_what_it_kept() {
        let console: ConsoleConfig = toml::from_str(
            r#"oidc = { client_id = "console", resource = "urn:jmxgate", scopes = ["openid", "jolokia"] }"#,
        )
        .unwrap();
        let bearer: BearerConfig = toml::from_str(r#"issuer = "https://idp.example""#).unwrap();
        let sign_in = SignIn::new(&console, Some(&bearer)).unwrap().unwrap();
        let endpoints = Endpoints {
            authorization: "https://idp.example/auth?tenant=1".parse().unwrap(),
            token: "https://idp.example/token".parse().unwrap(),
        };
        let (url, set_cookie) = sign_in.start(
            &endpoints,
            "https://gw/console/oidc/callback",
            "/console/targets/a",
            true,
        );
        let url = url::Url::parse(&url).unwrap();
        let q: std::collections::BTreeMap<String, String> =
            url.query_pairs().into_owned().collect();
        assert_eq!(q["tenant"], "1");
        assert_eq!(q["response_type"], "code");
        assert_eq!(q["client_id"], "console");
        assert_eq!(q["redirect_uri"], "https://gw/console/oidc/callback");
        assert_eq!(q["scope"], "openid jolokia");
        assert_eq!(q["resource"], "urn:jmxgate");
        assert_eq!(q["code_challenge_method"], "S256");
        let value = set_cookie
            .strip_prefix(&format!("{SIGN_IN_COOKIE}="))
            .unwrap()
            .split(';')
            .next()
            .unwrap();
        assert!(set_cookie.contains("Max-Age=600") && set_cookie.contains("Secure"));
        let mut kept = value.split('.');
        let (state, verifier) = (kept.next().unwrap(), kept.next().unwrap());
        assert_eq!(state, q["state"]);
        assert!(verifier.len() >= 43, "RFC 7636: 43 characters or more");
        assert_eq!(
            q["code_challenge"],
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(sha2::Sha256::digest(verifier.as_bytes()))
        );
        let back = check_callback(
            "/console",
            &format!("code=abc&state={state}"),
            &headers(&format!("{SIGN_IN_COOKIE}={value}")),
        )
        .unwrap();
        assert_eq!(back.verifier, verifier);
        assert_eq!(back.return_to, "/console/targets/a");
        // Another sign-in's state is someone else's.
        let (_, other) = sign_in.start(&endpoints, "https://gw/cb", "/console/", true);
        assert_ne!(other, set_cookie);
    }

    #[test]
    fn cookies_are_http_only_lax_and_scoped() {
        assert_eq!(
            cookie(SESSION_COOKIE, "t", "/console", true, None),
            "jmxgate_console_session=t; Path=/console; HttpOnly; SameSite=Lax; Secure"
        );
        assert!(
            cookie(SIGN_IN_COOKIE, "", "/c", false, Some(0)).ends_with("SameSite=Lax; Max-Age=0")
        );
    }
}
