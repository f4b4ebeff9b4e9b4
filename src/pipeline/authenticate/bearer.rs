//! Bearer JWT: `Authorization: Bearer <JWS compact token>` verified against
//! locally configured keys (an HS256 secret, RS256 / ES256 public keys in
//! PEM, and/or a JWKS file) and/or the key set of an OpenID provider
//! (`jwks_url`, or discovery from `issuer`). This file fetches nothing: the
//! provider's keys arrive in a [`RemoteKeySlot`], filled by
//! `jwks_remote.rs`.
//!
//! Only the algorithms a key is configured for are accepted: HS256 only
//! with an HS256 secret, RS256 only with RSA keys, ES256 only with P-256
//! keys. `alg: none` and every other algorithm are always refused, before
//! the token is handed to the JWT library. `exp` is required; `exp` and
//! `nbf` are checked against an explicit clock with a configurable leeway;
//! `iss` and `aud` are checked when configured.
//!
//! Every refusal is an RFC 6750 `invalid_token`; the [`BearerError`]
//! description is for logs only and never contains the token (values taken
//! from the token, such as an unknown `kid`, are escaped and truncated).
//!
//! This file is self-contained (external crates and std only).

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{Map, Value};

static NO_KEYS: KeySet = KeySet {
    rsa: Vec::new(),
    ec: Vec::new(),
};

/// Longest token accepted, in bytes.
pub const MAX_TOKEN_LEN: usize = 16 * 1024;
/// Largest accepted `leeway`.
pub const MAX_LEEWAY: Duration = Duration::from_secs(600);
/// Shortest accepted HS256 secret, in bytes (RFC 7518 §3.2).
pub const MIN_HS256_SECRET_LEN: usize = 32;
const MIN_RSA_BITS: usize = 2048;
/// The RustCrypto `rsa` crate refuses larger moduli when verifying.
const MAX_RSA_BITS: usize = 4096;

/// `[auth.bearer]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BearerConfig {
    /// File holding the raw HS256 secret (a trailing newline is ignored).
    #[serde(default)]
    pub hs256_secret_file: Option<PathBuf>,
    /// RSA public key (PEM, `PUBLIC KEY` or `RSA PUBLIC KEY`) for RS256.
    #[serde(default)]
    pub rs256_public_key_file: Option<PathBuf>,
    /// P-256 public key (PEM, `PUBLIC KEY`) for ES256.
    #[serde(default)]
    pub es256_public_key_file: Option<PathBuf>,
    /// JWKS document with RSA and/or EC P-256 public keys, selected by `kid`.
    #[serde(default)]
    pub jwks_file: Option<PathBuf>,
    /// The provider's JWKS URL (HTTPS), fetched, cached and refreshed.
    #[serde(default)]
    pub jwks_url: Option<String>,
    /// Find the JWKS URL by OpenID discovery:
    /// `<issuer>/.well-known/openid-configuration`.
    #[serde(default)]
    pub discovery: bool,
    /// PEM CA bundle for the provider's HTTPS; the system roots otherwise.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// How often the provider's keys are fetched again.
    #[serde(default = "default_keys_refresh", with = "humantime_serde")]
    pub keys_refresh: Duration,
    /// Development only: allow `http://` provider URLs on a loopback
    /// address.
    #[serde(default)]
    pub insecure_http_loopback: bool,
    /// Required value of `iss`.
    #[serde(default)]
    pub issuer: Option<String>,
    /// Value `aud` must contain.
    #[serde(default)]
    pub audience: Option<String>,
    /// Clients whose tokens are accepted: when set, `azp` (the client the
    /// token was issued to; else `client_id`) must be one of them.
    #[serde(default)]
    pub authorized_parties: Vec<String>,
    /// Clock skew allowed on `exp` and `nbf` (at most 10 minutes).
    #[serde(default = "default_leeway", with = "humantime_serde")]
    pub leeway: Duration,
    /// Claim naming the principal; a dot-path (`a.b`) reaches into objects.
    #[serde(default = "default_principal_claim")]
    pub principal_claim: String,
    /// Claim with the roles: an array of strings or a space-separated
    /// string; a dot-path (`realm_access.roles`) reaches into objects.
    #[serde(default = "default_roles_claim")]
    pub roles_claim: String,
    /// Gateway roles for claim values (`"jmx-admin" = ["ops"]`), so a
    /// provider's role names need not be the gateway's. When set, only
    /// mapped values give roles; when empty, the values are the roles.
    #[serde(default)]
    pub role_map: std::collections::BTreeMap<String, Vec<String>>,
}

fn default_keys_refresh() -> Duration {
    Duration::from_secs(600)
}
fn default_leeway() -> Duration {
    Duration::from_secs(30)
}
fn default_principal_claim() -> String {
    "sub".into()
}
fn default_roles_claim() -> String {
    "roles".into()
}

impl Default for BearerConfig {
    fn default() -> Self {
        BearerConfig {
            hs256_secret_file: None,
            rs256_public_key_file: None,
            es256_public_key_file: None,
            jwks_file: None,
            jwks_url: None,
            discovery: false,
            ca_file: None,
            keys_refresh: default_keys_refresh(),
            insecure_http_loopback: false,
            issuer: None,
            audience: None,
            authorized_parties: Vec::new(),
            leeway: default_leeway(),
            principal_claim: default_principal_claim(),
            roles_claim: default_roles_claim(),
            role_map: Default::default(),
        }
    }
}

impl BearerConfig {
    pub fn resolve_relative_paths(&mut self, base: &Path) {
        for path in [
            &mut self.hs256_secret_file,
            &mut self.rs256_public_key_file,
            &mut self.es256_public_key_file,
            &mut self.jwks_file,
        ]
        .into_iter()
        .flatten()
        {
            if path.is_relative() {
                *path = base.join(&*path);
            }
        }
    }
}

/// Who a verified token says the caller is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BearerIdentity {
    pub principal: String,
    /// The token's `iss`, part of who it is: a subject is a name only
    /// within its issuer.
    pub issuer: Option<String>,
    pub roles: Vec<String>,
    /// `exp`, in seconds since the Unix epoch.
    pub expires_at: Option<u64>,
}

/// The most of a token's `iss` kept as part of its identity.
const MAX_ISSUER_CHARS: usize = 512;

/// What was wrong with a token (for logs, metrics and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BearerErrorKind {
    /// Not a well-formed compact JWS (shape, encoding, JSON, `crit`).
    Malformed,
    /// `alg` is not one a key is configured for (includes `none`).
    Algorithm,
    /// No configured key matches the token's `kid`.
    UnknownKey,
    /// The signature does not verify with any candidate key.
    Signature,
    /// `exp` is past (beyond the leeway).
    Expired,
    /// `nbf` is in the future (beyond the leeway).
    NotYetValid,
    /// `iss` missing or not the configured issuer.
    Issuer,
    /// `aud` missing or does not contain the configured audience.
    Audience,
    /// A required claim is missing or has the wrong type (`exp`, principal,
    /// roles).
    Claims,
}

/// A refused token. Every refusal is `invalid_token` to the client; the
/// description is for logs and never contains the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BearerError {
    kind: BearerErrorKind,
    description: String,
}

impl BearerError {
    fn new(kind: BearerErrorKind, description: impl Into<String>) -> Self {
        BearerError {
            kind,
            description: description.into(),
        }
    }

    pub fn kind(&self) -> BearerErrorKind {
        self.kind
    }

    /// The RFC 6750 error code for the `WWW-Authenticate` challenge.
    pub fn code(&self) -> &'static str {
        "invalid_token"
    }

    /// Why the token was refused. For logs only, never for clients.
    pub fn description(&self) -> &str {
        &self.description
    }
}

impl fmt::Display for BearerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.description)
    }
}

impl std::error::Error for BearerError {}

/// A public key and where it came from.
#[derive(Clone)]
struct NamedKey {
    key: DecodingKey,
    /// `kid` of a JWKS key; PEM file keys have none.
    kid: Option<String>,
    /// PEM file keys are unnamed: they are candidates for any `kid`.
    from_jwks: bool,
}

/// The RS256 and ES256 keys of a JWKS document.
#[derive(Clone, Default)]
pub struct KeySet {
    rsa: Vec<NamedKey>,
    ec: Vec<NamedKey>,
}

impl KeySet {
    /// The usable keys of a JWKS document (see [`load_jwks`]'s rules).
    pub fn from_jwks_json(bytes: &[u8]) -> Result<KeySet, String> {
        let (rsa, ec) = parse_jwks(bytes)?;
        Ok(KeySet { rsa, ec })
    }

    /// The `kid`s, for logs.
    pub fn kids(&self) -> Vec<String> {
        self.rsa
            .iter()
            .chain(&self.ec)
            .map(|k| k.kid.clone().unwrap_or_else(|| "-".into()))
            .collect()
    }
}

/// Where the provider's current keys are kept: empty until the first
/// fetch succeeds, then the last good set.
pub type RemoteKeySlot = std::sync::Arc<arc_swap::ArcSwapOption<KeySet>>;

/// The verifier built from a [`BearerConfig`].
#[derive(Clone)]
pub struct Bearer {
    hs256: Option<DecodingKey>,
    rsa: Vec<NamedKey>,
    ec: Vec<NamedKey>,
    /// The provider's keys, when `jwks_url` or `discovery` is set.
    remote: Option<RemoteKeySlot>,
    issuer: Option<String>,
    audience: Option<String>,
    authorized_parties: Vec<String>,
    leeway: u64,
    principal_claim: String,
    roles_claim: String,
    role_map: std::collections::BTreeMap<String, Vec<String>>,
}

impl fmt::Debug for Bearer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kids = |keys: &[NamedKey]| -> Vec<String> {
            keys.iter()
                .map(|k| k.kid.clone().unwrap_or_else(|| "-".into()))
                .collect()
        };
        f.debug_struct("Bearer")
            .field("hs256", &self.hs256.is_some())
            .field("rsa_keys", &kids(&self.rsa))
            .field("ec_keys", &kids(&self.ec))
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("leeway", &self.leeway)
            .field("principal_claim", &self.principal_claim)
            .field("roles_claim", &self.roles_claim)
            .field("role_map", &self.role_map)
            .finish()
    }
}

impl Bearer {
    /// Loads the configured keys. Errors name the setting, the file and
    /// the cause.
    pub fn from_config(config: &BearerConfig) -> Result<Bearer, String> {
        let remote = config.jwks_url.is_some() || config.discovery;
        if config.hs256_secret_file.is_none()
            && config.rs256_public_key_file.is_none()
            && config.es256_public_key_file.is_none()
            && config.jwks_file.is_none()
            && !remote
        {
            return Err("no key configured: set at least one of hs256_secret_file, \
                 rs256_public_key_file, es256_public_key_file, jwks_file, jwks_url, \
                 or discovery with issuer"
                .into());
        }
        if config.discovery && config.issuer.is_none() {
            return Err("discovery needs issuer (the provider's URL)".into());
        }
        if config.discovery && config.jwks_url.is_some() {
            return Err("give jwks_url or discovery, not both".into());
        }
        if remote && config.keys_refresh < Duration::from_secs(10) {
            return Err("keys_refresh must be at least 10s".into());
        }
        if config.leeway > MAX_LEEWAY {
            return Err(format!(
                "leeway {:?} is more than the maximum of 10 minutes",
                config.leeway
            ));
        }
        for (name, value) in [
            ("principal_claim", &config.principal_claim),
            ("roles_claim", &config.roles_claim),
        ] {
            if value.is_empty() {
                return Err(format!("{name} must not be empty"));
            }
        }
        for (name, value) in [("issuer", &config.issuer), ("audience", &config.audience)] {
            if value.as_deref() == Some("") {
                return Err(format!("{name} must not be empty when set"));
            }
        }

        let mut bearer = Bearer {
            hs256: None,
            rsa: Vec::new(),
            ec: Vec::new(),
            remote: remote.then(|| std::sync::Arc::new(arc_swap::ArcSwapOption::empty())),
            issuer: config.issuer.clone(),
            audience: config.audience.clone(),
            authorized_parties: config.authorized_parties.clone(),
            leeway: config.leeway.as_secs(),
            principal_claim: config.principal_claim.clone(),
            roles_claim: config.roles_claim.clone(),
            role_map: config.role_map.clone(),
        };

        if let Some(path) = &config.hs256_secret_file {
            let what = file_label("hs256_secret_file", path);
            bearer.hs256 = Some(load_hs256_secret(path).map_err(|e| format!("{what}: {e}"))?);
        }
        if let Some(path) = &config.rs256_public_key_file {
            let what = file_label("rs256_public_key_file", path);
            let key = load_rsa_pem(path).map_err(|e| format!("{what}: {e}"))?;
            bearer.rsa.push(NamedKey {
                key,
                kid: None,
                from_jwks: false,
            });
        }
        if let Some(path) = &config.es256_public_key_file {
            let what = file_label("es256_public_key_file", path);
            let key = load_ec_pem(path).map_err(|e| format!("{what}: {e}"))?;
            bearer.ec.push(NamedKey {
                key,
                kid: None,
                from_jwks: false,
            });
        }
        if let Some(path) = &config.jwks_file {
            let what = file_label("jwks_file", path);
            let (rsa, ec) = load_jwks(path).map_err(|e| format!("{what}: {e}"))?;
            bearer.rsa.extend(rsa);
            bearer.ec.extend(ec);
        }
        Ok(bearer)
    }

    /// The slot the provider's keys are fetched into, if configured.
    pub fn remote_keys(&self) -> Option<&RemoteKeySlot> {
        self.remote.as_ref()
    }

    /// Verifies `token` (the part after `Bearer `) at time `now`.
    pub fn verify(&self, token: &str, now: SystemTime) -> Result<BearerIdentity, BearerError> {
        use BearerErrorKind as K;
        let fetched = self.remote.as_ref().and_then(|slot| slot.load_full());
        let remote: &KeySet = fetched.as_deref().unwrap_or(&NO_KEYS);
        let rsa: Vec<&NamedKey> = self.rsa.iter().chain(&remote.rsa).collect();
        let ec: Vec<&NamedKey> = self.ec.iter().chain(&remote.ec).collect();

        let now = now
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);

        if token.is_empty() {
            return Err(BearerError::new(K::Malformed, "empty token"));
        }
        if token.len() > MAX_TOKEN_LEN {
            return Err(BearerError::new(
                K::Malformed,
                format!(
                    "token is {} bytes, more than the maximum of {MAX_TOKEN_LEN}",
                    token.len()
                ),
            ));
        }
        if !token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        {
            return Err(BearerError::new(
                K::Malformed,
                "not a compact JWS: characters other than base64url and '.'",
            ));
        }
        let parts: Vec<&str> = token.split('.').collect();
        if parts.len() != 3 {
            return Err(BearerError::new(
                K::Malformed,
                format!(
                    "not a compact JWS: {} dot-separated parts instead of 3",
                    parts.len()
                ),
            ));
        }

        // Look at the header ourselves first, so that only the algorithms
        // we have keys for ever reach the JWT library.
        let header = decode_json_object(parts[0])
            .map_err(|e| BearerError::new(K::Malformed, format!("header is not valid: {e}")))?;
        let alg_name = match header.get("alg") {
            Some(Value::String(s)) => s.as_str(),
            Some(_) => return Err(BearerError::new(K::Malformed, "header alg is not a string")),
            None => return Err(BearerError::new(K::Malformed, "header has no alg")),
        };
        let alg = match alg_name {
            "HS256" if self.hs256.is_some() => Algorithm::HS256,
            "RS256" if !rsa.is_empty() => Algorithm::RS256,
            "ES256" if !ec.is_empty() => Algorithm::ES256,
            "RS256" | "ES256" if self.remote.is_some() && fetched.is_none() => {
                return Err(BearerError::new(
                    K::UnknownKey,
                    "the provider's keys have not been fetched yet",
                ))
            }
            other => {
                return Err(BearerError::new(
                    K::Algorithm,
                    format!(
                        "algorithm {} is not accepted (accepted: {})",
                        shown(other),
                        self.accepted_algorithms().join(", ")
                    ),
                ))
            }
        };
        if header.contains_key("crit") {
            return Err(BearerError::new(
                K::Malformed,
                "header has crit extensions, none of which are supported",
            ));
        }
        let kid = match header.get("kid") {
            None => None,
            Some(Value::String(s)) => Some(s.as_str()),
            Some(_) => return Err(BearerError::new(K::Malformed, "header kid is not a string")),
        };

        let candidates: Vec<&DecodingKey> = match alg {
            Algorithm::HS256 => self.hs256.iter().collect(),
            Algorithm::RS256 => select_keys(&rsa, kid),
            _ => select_keys(&ec, kid),
        };
        if candidates.is_empty() {
            let description = match kid {
                Some(kid) => format!("no {alg_name} key with kid {}", shown(kid)),
                None => format!("token has no kid and every {alg_name} key has one"),
            };
            return Err(BearerError::new(K::UnknownKey, description));
        }

        // Signature only: the claims are checked below with our own clock.
        let mut validation = Validation::new(alg);
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;

        let mut claims = None;
        for key in candidates {
            match jsonwebtoken::decode::<Value>(token, key, &validation) {
                Ok(data) => {
                    claims = Some(data.claims);
                    break;
                }
                Err(e) if matches!(e.kind(), ErrorKind::InvalidSignature) => continue,
                Err(e) => return Err(library_error(e.kind())),
            }
        }
        let Some(claims) = claims else {
            return Err(BearerError::new(
                K::Signature,
                format!("{alg_name} signature does not verify with any candidate key"),
            ));
        };
        self.check_claims(&claims, now)
    }

    /// The algorithms a key is configured for.
    pub fn accepted_algorithms(&self) -> Vec<&'static str> {
        let mut algs = Vec::new();
        if self.hs256.is_some() {
            algs.push("HS256");
        }
        if !self.rsa.is_empty() {
            algs.push("RS256");
        }
        if !self.ec.is_empty() {
            algs.push("ES256");
        }
        algs
    }

    /// Checks the claims of a verified token: times, issuer, audience,
    /// then the principal and roles they carry.
    fn check_claims(&self, claims: &Value, now: u64) -> Result<BearerIdentity, BearerError> {
        let Some(claims) = claims.as_object() else {
            return Err(BearerError::new(
                BearerErrorKind::Malformed,
                "claims are not a JSON object",
            ));
        };
        let exp = self.check_times(claims, now)?;
        self.check_issuer_and_audience(claims)?;
        Ok(BearerIdentity {
            principal: self.principal_of(claims)?.clone(),
            issuer: claims
                .get("iss")
                .and_then(Value::as_str)
                .map(|iss| iss.chars().take(MAX_ISSUER_CHARS).collect()),
            roles: self.roles_of(claims)?,
            expires_at: Some(exp),
        })
    }

    /// `exp` (required) and `nbf` against `now`, with the leeway; the
    /// expiry.
    fn check_times(&self, claims: &Map<String, Value>, now: u64) -> Result<u64, BearerError> {
        use BearerErrorKind as K;
        let exp = match claims.get("exp") {
            None | Some(Value::Null) => {
                return Err(BearerError::new(K::Claims, "exp claim is missing"))
            }
            Some(v) => numeric_date(v, false)
                .ok_or_else(|| BearerError::new(K::Claims, "exp claim is not a NumericDate"))?,
        };
        if now >= exp.saturating_add(self.leeway) {
            return Err(BearerError::new(
                K::Expired,
                format!(
                    "token expired at {exp} (now {now}, leeway {}s)",
                    self.leeway
                ),
            ));
        }
        match claims.get("nbf") {
            None | Some(Value::Null) => {}
            Some(v) => {
                let nbf = numeric_date(v, true)
                    .ok_or_else(|| BearerError::new(K::Claims, "nbf claim is not a NumericDate"))?;
                if nbf > now.saturating_add(self.leeway) {
                    return Err(BearerError::new(
                        K::NotYetValid,
                        format!(
                            "token not valid before {nbf} (now {now}, leeway {}s)",
                            self.leeway
                        ),
                    ));
                }
            }
        }
        Ok(exp)
    }

    /// `iss` and `aud`, where configured.
    fn check_issuer_and_audience(&self, claims: &Map<String, Value>) -> Result<(), BearerError> {
        use BearerErrorKind as K;
        if let Some(issuer) = &self.issuer {
            match claims.get("iss") {
                Some(Value::String(iss)) if iss == issuer => {}
                Some(_) => {
                    return Err(BearerError::new(
                        K::Issuer,
                        "iss claim is not the configured issuer",
                    ))
                }
                None => return Err(BearerError::new(K::Issuer, "iss claim is missing")),
            }
        }
        if let Some(audience) = &self.audience {
            let ok = match claims.get("aud") {
                Some(Value::String(aud)) => aud == audience,
                Some(Value::Array(auds)) => auds.iter().any(|a| a.as_str() == Some(audience)),
                None => {
                    return Err(BearerError::new(K::Audience, "aud claim is missing"));
                }
                Some(_) => false,
            };
            if !ok {
                return Err(BearerError::new(
                    K::Audience,
                    "aud claim does not contain the configured audience",
                ));
            }
        }
        if !self.authorized_parties.is_empty() {
            let party = claims
                .get("azp")
                .or_else(|| claims.get("client_id"))
                .and_then(Value::as_str);
            match party {
                Some(p) if self.authorized_parties.iter().any(|a| a == p) => {}
                Some(_) => {
                    return Err(BearerError::new(
                        K::Audience,
                        "azp (client_id) is not one of the authorized_parties",
                    ))
                }
                None => {
                    return Err(BearerError::new(
                        K::Audience,
                        "azp and client_id claims are missing (authorized_parties is set)",
                    ))
                }
            }
        }
        Ok(())
    }

    /// The principal claim: a non-empty string without control characters.
    fn principal_of<'c>(&self, claims: &'c Map<String, Value>) -> Result<&'c String, BearerError> {
        use BearerErrorKind as K;
        let principal = match claim(claims, &self.principal_claim) {
            Some(Value::String(p)) if !p.is_empty() => p,
            Some(Value::String(_)) => {
                return Err(BearerError::new(
                    K::Claims,
                    format!("principal claim {} is empty", shown(&self.principal_claim)),
                ))
            }
            None | Some(Value::Null) => {
                return Err(BearerError::new(
                    K::Claims,
                    format!(
                        "principal claim {} is missing",
                        shown(&self.principal_claim)
                    ),
                ))
            }
            Some(_) => {
                return Err(BearerError::new(
                    K::Claims,
                    format!(
                        "principal claim {} is not a string",
                        shown(&self.principal_claim)
                    ),
                ))
            }
        };
        if principal.chars().any(char::is_control) {
            return Err(BearerError::new(
                K::Claims,
                format!(
                    "principal claim {} contains control characters",
                    shown(&self.principal_claim)
                ),
            ));
        }
        Ok(principal)
    }

    /// The roles claim: an array of strings or a space-separated string;
    /// duplicates and empty names dropped.
    fn roles_of(&self, claims: &Map<String, Value>) -> Result<Vec<String>, BearerError> {
        use BearerErrorKind as K;
        let mut roles: Vec<String> = Vec::new();
        let mut add = |role: &str| {
            if !role.is_empty() && !roles.iter().any(|r| r == role) {
                roles.push(role.to_owned());
            }
        };
        match claim(claims, &self.roles_claim) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => s.split_whitespace().for_each(&mut add),
            Some(Value::Array(items)) => {
                for item in items {
                    match item.as_str() {
                        Some(role) => add(role),
                        None => {
                            return Err(BearerError::new(
                                K::Claims,
                                format!(
                                    "roles claim {} has an element that is not a string",
                                    shown(&self.roles_claim)
                                ),
                            ))
                        }
                    }
                }
            }
            Some(_) => {
                return Err(BearerError::new(
                    K::Claims,
                    format!(
                        "roles claim {} is neither an array of strings nor a string",
                        shown(&self.roles_claim)
                    ),
                ))
            }
        }
        if roles.iter().any(|r| r.chars().any(char::is_control)) {
            return Err(BearerError::new(
                K::Claims,
                format!(
                    "roles claim {} contains control characters",
                    shown(&self.roles_claim)
                ),
            ));
        }
        if self.role_map.is_empty() {
            return Ok(roles);
        }
        let mut mapped: Vec<String> = Vec::new();
        for role in self
            .role_map
            .iter()
            .filter(|(v, _)| roles.contains(v))
            .flat_map(|(_, r)| r)
        {
            if !mapped.contains(role) {
                mapped.push(role.clone());
            }
        }
        Ok(mapped)
    }
}

/// Candidate keys for a token: with a `kid`, the JWKS keys of that `kid`,
/// else the (unnamed) PEM file keys; without a `kid`, the PEM file keys
/// and the JWKS keys that have no `kid` either.
fn select_keys<'a>(keys: &[&'a NamedKey], kid: Option<&str>) -> Vec<&'a DecodingKey> {
    match kid {
        Some(kid) => {
            let named: Vec<&DecodingKey> = keys
                .iter()
                .filter(|k| k.kid.as_deref() == Some(kid))
                .map(|k| &k.key)
                .collect();
            if !named.is_empty() {
                return named;
            }
            keys.iter()
                .filter(|k| !k.from_jwks)
                .map(|k| &k.key)
                .collect()
        }
        None => keys
            .iter()
            .filter(|k| k.kid.is_none())
            .map(|k| &k.key)
            .collect(),
    }
}

/// A claim by name, or by dot-path into nested objects when no top-level
/// claim has the literal name (so `https://example.com/roles` still works).
fn claim<'a>(claims: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    if let Some(v) = claims.get(name) {
        return Some(v);
    }
    if !name.contains('.') {
        return None;
    }
    let mut segments = name.split('.');
    let mut current = claims.get(segments.next()?)?;
    for segment in segments {
        current = current.as_object()?.get(segment)?;
    }
    Some(current)
}

/// A NumericDate as whole seconds: fractions rounded towards the stricter
/// side (down for `exp`, up for `nbf`). Negative or non-numbers: `None`.
fn numeric_date(v: &Value, round_up: bool) -> Option<u64> {
    let n = v.as_number()?;
    if let Some(u) = n.as_u64() {
        return Some(u);
    }
    let f = n.as_f64()?;
    if !f.is_finite() || f < 0.0 {
        return None;
    }
    let f = if round_up { f.ceil() } else { f.floor() };
    if f >= u64::MAX as f64 {
        Some(u64::MAX)
    } else {
        Some(f as u64)
    }
}

fn decode_json_object(segment: &str) -> Result<Map<String, Value>, &'static str> {
    let bytes = URL_SAFE_NO_PAD
        .decode(segment)
        .map_err(|_| "not base64url")?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("not a JSON object"),
        Err(_) => Err("not JSON"),
    }
}

/// A library error after the algorithm and key were chosen; described
/// without echoing any part of the token.
fn library_error(kind: &ErrorKind) -> BearerError {
    use BearerErrorKind as K;
    let (k, description) = match kind {
        ErrorKind::Base64(_) => (K::Malformed, "a token part is not valid base64url"),
        ErrorKind::Json(_) => (K::Malformed, "header or claims are not valid JSON"),
        ErrorKind::Utf8(_) => (K::Malformed, "claims are not valid UTF-8"),
        ErrorKind::InvalidToken => (K::Malformed, "not a compact JWS"),
        ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => {
            (K::Algorithm, "algorithm does not match the key")
        }
        ErrorKind::InvalidSignature => (K::Signature, "signature does not verify"),
        ErrorKind::InvalidEcdsaKey
        | ErrorKind::InvalidRsaKey(_)
        | ErrorKind::InvalidKeyFormat
        | ErrorKind::UnsupportedAlgorithm => (
            K::Signature,
            "a configured key could not be used to verify the signature",
        ),
        _ => (K::Malformed, "token could not be decoded"),
    };
    BearerError::new(k, description)
}

/// A value from the token or config for a log line: escaped, truncated.
fn shown(s: &str) -> String {
    const MAX: usize = 64;
    let mut out: String = s.chars().take(MAX).collect();
    let truncated = out.len() < s.len();
    out = format!("{out:?}");
    if truncated {
        out.push('…');
    }
    out
}

fn file_label(setting: &str, path: &Path) -> String {
    format!("{setting} {}", path.display())
}

fn read_file(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read: {e}"))
}

fn load_hs256_secret(path: &Path) -> Result<DecodingKey, String> {
    let mut secret = read_file(path)?;
    while matches!(secret.last(), Some(b'\n' | b'\r')) {
        secret.pop();
    }
    if secret.len() < MIN_HS256_SECRET_LEN {
        return Err(format!(
            "the secret is {} bytes; HS256 needs at least {MIN_HS256_SECRET_LEN} (256 bits)",
            secret.len()
        ));
    }
    Ok(DecodingKey::from_secret(&secret))
}

fn refuse_private_pem(pem: &[u8]) -> Result<(), String> {
    if pem
        .windows(b"PRIVATE KEY".len())
        .any(|w| w == b"PRIVATE KEY")
    {
        return Err("contains a private key; configure the public key instead \
             (openssl pkey -in key.pem -pubout)"
            .into());
    }
    Ok(())
}

fn load_rsa_pem(path: &Path) -> Result<DecodingKey, String> {
    let pem = read_file(path)?;
    refuse_private_pem(&pem)?;
    let key = DecodingKey::from_rsa_pem(&pem)
        .map_err(|e| format!("not an RSA public key in PEM form ({e})"))?;
    // Parses the key, and gives the modulus to check its size.
    let jwk = Jwk::from_decoding_key(&key, Some(Algorithm::RS256))
        .map_err(|e| format!("not a usable RSA public key ({e})"))?;
    match &jwk.algorithm {
        AlgorithmParameters::RSA(rsa) => check_rsa_components(&rsa.n, &rsa.e)?,
        _ => return Err("not an RSA public key".into()),
    }
    Ok(key)
}

fn load_ec_pem(path: &Path) -> Result<DecodingKey, String> {
    let pem = read_file(path)?;
    refuse_private_pem(&pem)?;
    let key = DecodingKey::from_ec_pem(&pem)
        .map_err(|e| format!("not an EC public key in PEM form ({e})"))?;
    check_p256(&key)?;
    Ok(key)
}

/// The ES256 verifier parses the point up front, so a verification
/// attempt with an empty signature fails (`Err`) only for an unusable key
/// (not P-256, not on the curve, compressed).
fn check_p256(key: &DecodingKey) -> Result<(), String> {
    jsonwebtoken::crypto::verify("", b"", key, Algorithm::ES256)
        .map(|_| ())
        .map_err(|_| "not a valid P-256 public key (ES256 needs curve P-256)".into())
}

fn check_rsa_components(n: &str, e: &str) -> Result<(), String> {
    let n = URL_SAFE_NO_PAD
        .decode(n)
        .map_err(|_| "RSA modulus n is not base64url".to_string())?;
    let e = URL_SAFE_NO_PAD
        .decode(e)
        .map_err(|_| "RSA exponent e is not base64url".to_string())?;
    let n: &[u8] = {
        let first = n.iter().position(|&b| b != 0).unwrap_or(n.len());
        &n[first..]
    };
    let bits = match n.first() {
        Some(&top) => (n.len() - 1) * 8 + (8 - top.leading_zeros() as usize),
        None => 0,
    };
    if !(MIN_RSA_BITS..=MAX_RSA_BITS).contains(&bits) {
        return Err(format!(
            "RSA key is {bits} bits; between {MIN_RSA_BITS} and {MAX_RSA_BITS} are supported"
        ));
    }
    let e_value = if e.len() <= 8 {
        e.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
    } else {
        u64::MAX
    };
    if e_value < 3 || e_value % 2 == 0 || e_value > (1 << 33) - 1 {
        return Err("RSA exponent e is not a valid public exponent".into());
    }
    Ok(())
}

/// Loads the RSA and EC P-256 keys of a JWKS file. Keys for encryption
/// (`use: enc`), for algorithms other than RS256/ES256, of other types or
/// curves are skipped; a file without any usable key is an error.
fn load_jwks(path: &Path) -> Result<(Vec<NamedKey>, Vec<NamedKey>), String> {
    parse_jwks(&read_file(path)?)
}

/// [`load_jwks`] on a document's bytes (a file's, or a provider's answer).
fn parse_jwks(bytes: &[u8]) -> Result<(Vec<NamedKey>, Vec<NamedKey>), String> {
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| format!("not valid JSON ({e})"))?;
    let Some(Value::Array(raw_keys)) = doc.get("keys") else {
        return Err("not a JWKS document: no \"keys\" array".into());
    };

    let mut rsa = Vec::new();
    let mut ec = Vec::new();
    let mut skipped: Vec<String> = Vec::new();
    let mut kids: Vec<String> = Vec::new();

    for (index, raw) in raw_keys.iter().enumerate() {
        let label = match raw.get("kid").and_then(Value::as_str) {
            Some(kid) => format!("key {}", shown(kid)),
            None => format!("key #{index}"),
        };
        let Some(obj) = raw.as_object() else {
            return Err(format!("{label}: not a JSON object"));
        };
        if obj.contains_key("d") {
            return Err(format!(
                "{label}: contains private key material (\"d\"); publish only public keys"
            ));
        }
        let kty = obj.get("kty").and_then(Value::as_str).unwrap_or("");
        let jwk: Jwk = serde_json::from_value(raw.clone())
            .map_err(|e| format!("{label}: not a valid JWK ({e})"))?;

        if jwk.common.public_key_use == Some(PublicKeyUse::Encryption) {
            skipped.push(format!("{label}: use is enc"));
            continue;
        }
        let alg = jwk.common.key_algorithm;
        let (is_rsa, key) = match (&jwk.algorithm, kty) {
            (AlgorithmParameters::RSA(params), _) => {
                if alg.is_some_and(|a| a != KeyAlgorithm::RS256) {
                    skipped.push(format!("{label}: alg {} is not RS256", alg_name(alg)));
                    continue;
                }
                check_rsa_components(&params.n, &params.e).map_err(|e| format!("{label}: {e}"))?;
                let key = DecodingKey::from_rsa_components(&params.n, &params.e)
                    .map_err(|e| format!("{label}: invalid RSA components ({e})"))?;
                (true, key)
            }
            (AlgorithmParameters::EllipticCurve(params), _) => {
                if params.curve != EllipticCurve::P256 {
                    skipped.push(format!("{label}: curve is not P-256"));
                    continue;
                }
                if alg.is_some_and(|a| a != KeyAlgorithm::ES256) {
                    skipped.push(format!("{label}: alg {} is not ES256", alg_name(alg)));
                    continue;
                }
                let key = DecodingKey::from_ec_components(&params.x, &params.y)
                    .map_err(|_| format!("{label}: EC x/y are not base64url"))?;
                check_p256(&key).map_err(|e| format!("{label}: {e}"))?;
                (false, key)
            }
            (_, "RSA" | "EC") => {
                return Err(format!(
                    "{label}: kty {kty} but the key parameters are missing or malformed"
                ))
            }
            (_, other) => {
                skipped.push(format!("{label}: kty {} is not supported", shown(other)));
                continue;
            }
        };

        let kid = jwk.common.key_id.clone();
        if let Some(kid) = &kid {
            if kids.contains(kid) {
                return Err(format!("{label}: kid is used by more than one key"));
            }
            kids.push(kid.clone());
        }
        let named = NamedKey {
            key,
            kid,
            from_jwks: true,
        };
        if is_rsa {
            rsa.push(named);
        } else {
            ec.push(named);
        }
    }

    if rsa.is_empty() && ec.is_empty() {
        return Err(match skipped.first() {
            Some(first) => format!(
                "no usable RS256/ES256 key ({} skipped; first: {first})",
                skipped.len()
            ),
            None => "no keys".into(),
        });
    }
    Ok((rsa, ec))
}

fn alg_name(alg: Option<KeyAlgorithm>) -> String {
    alg.map(|a| a.to_string()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn claim_lookup_prefers_literal_names_then_dot_paths() {
        let claims = json!({
            "https://example.com/roles": ["a"],
            "realm_access": {"roles": ["b"]},
            "x.y": 1,
            "x": {"y": 2}
        });
        let claims = claims.as_object().unwrap();
        assert_eq!(
            claim(claims, "https://example.com/roles"),
            Some(&json!(["a"]))
        );
        assert_eq!(claim(claims, "realm_access.roles"), Some(&json!(["b"])));
        assert_eq!(claim(claims, "x.y"), Some(&json!(1)));
        assert_eq!(claim(claims, "realm_access.missing"), None);
        assert_eq!(claim(claims, "missing"), None);
    }

    #[test]
    fn numeric_dates() {
        assert_eq!(numeric_date(&json!(10), false), Some(10));
        assert_eq!(numeric_date(&json!(10.5), false), Some(10));
        assert_eq!(numeric_date(&json!(10.5), true), Some(11));
        assert_eq!(numeric_date(&json!(-1), false), None);
        assert_eq!(numeric_date(&json!("10"), false), None);
    }

    #[test]
    fn shown_escapes_and_truncates() {
        assert_eq!(shown("a\nb"), "\"a\\nb\"");
        assert!(shown(&"x".repeat(100)).ends_with('…'));
    }

    #[test]
    fn rsa_component_checks() {
        let n = URL_SAFE_NO_PAD.encode([0xffu8; 128]); // 1024 bits
        assert!(check_rsa_components(&n, "AQAB")
            .unwrap_err()
            .contains("1024 bits"));
        let n = URL_SAFE_NO_PAD.encode([0xffu8; 256]);
        assert!(check_rsa_components(&n, "AQAB").is_ok());
        assert!(check_rsa_components(&n, "Ag").is_err()); // e = 2
    }
}
