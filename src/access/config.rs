//! `[access]` and `[[roles]]` as written in the configuration file. A
//! leaf: the rules that read these keys (`access`, `elevation`) import it.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// `reason` of a requestable role.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasonRule {
    /// A request may say why.
    #[default]
    Optional,
    /// A request must say why.
    Required,
}

/// Default `max_duration`.
pub const DEFAULT_MAX_DURATION: Duration = Duration::from_secs(3600);
/// Default `approved_use_within`.
pub const DEFAULT_APPROVED_USE_WITHIN: Duration = Duration::from_secs(15 * 60);

/// `[access]`: who callers without credentials are, and whose
/// `X-Forwarded-For` counts.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessConfig {
    /// Role of callers that present no credentials. Unset: with roles
    /// configured, anonymous callers are refused.
    #[serde(default)]
    pub anonymous_role: Option<String>,
    /// Proxies (addresses or CIDR subnets) whose `X-Forwarded-For` header
    /// is believed; every hop it lists must then pass a policy's `<remote>`.
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    /// `[access.store]`: where access requests and grants are kept,
    /// shared by every replica.
    #[serde(default)]
    pub store: crate::store::StoreConfig,
    /// How long a request may wait for its reviews before it expires.
    #[serde(default = "default_pending_timeout", with = "humantime_serde")]
    pub pending_timeout: Duration,
    /// Most requests one caller may have pending at once (a flood of
    /// requests is refused with 429 past it).
    #[serde(default = "default_max_pending")]
    pub max_pending_requests: u64,
    /// `[[access.people]]`: identities of different methods that are one
    /// person (their grants, requests and audit trail shared). Without
    /// one, Basic alice and a bearer token whose subject is alice are two.
    #[serde(default)]
    pub people: Vec<PersonConfig>,
}

/// One `[[access.people]]` entry.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PersonConfig {
    /// The person's name, as grants and trails then know them.
    pub name: String,
    /// Their identities, as `Principal::identity` writes them:
    /// `basic:alice`, `mtls:alice`, `kubernetes:<user>`,
    /// `bearer:<issuer> <subject>` (`bearer:- <subject>` for tokens
    /// without `iss`).
    pub identities: Vec<String>,
}

/// The methods an identity of `[[access.people]]` may name.
pub const IDENTITY_METHODS: [&str; 4] = ["basic", "bearer", "mtls", "kubernetes"];

impl Default for AccessConfig {
    fn default() -> AccessConfig {
        AccessConfig {
            anonymous_role: None,
            trusted_proxies: Vec::new(),
            store: Default::default(),
            pending_timeout: DEFAULT_PENDING_TIMEOUT,
            max_pending_requests: default_max_pending(),
            people: Vec::new(),
        }
    }
}

/// Default `pending_timeout`.
pub const DEFAULT_PENDING_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

fn default_pending_timeout() -> Duration {
    DEFAULT_PENDING_TIMEOUT
}

fn default_max_pending() -> u64 {
    10
}

/// `[[roles]]`: one role.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleConfig {
    pub name: String,
    /// Targets the role reaches: names, globs (`kafka-*`) or label
    /// selectors (`env=prod,app=orders`).
    pub targets: Vec<String>,
    /// A `jolokia-access.xml`-style policy. Without one the role may do
    /// everything on the targets it reaches.
    #[serde(default)]
    pub policy: Option<PathBuf>,
    /// Most targets one request item may reach through a selector
    /// (`"target":{"url":"kafka-*"}`); default `server.max_targets_per_item`.
    /// A caller holding several roles gets the largest of their limits, a
    /// role without its own counting as the server's.
    #[serde(default)]
    pub max_targets_per_item: Option<usize>,
    /// Just-in-time access (`elevation.rs`): roles whose holders may ask
    /// for this role for a while instead of holding it.
    #[serde(default)]
    pub requestable_by: Vec<String>,
    /// Roles whose holders may review requests for this role, and the
    /// items of `approval_required`.
    #[serde(default)]
    pub approvers: Vec<String>,
    /// Distinct approvers a request needs.
    #[serde(default = "one_approval")]
    pub approvals: u32,
    /// The longest a grant of this role may last.
    #[serde(default = "default_max_duration", with = "humantime_serde")]
    pub max_duration: std::time::Duration,
    /// Whether a request must say why (`required`) or may (`optional`).
    #[serde(default)]
    pub reason: ReasonRule,
    /// Items this role runs only once approved:
    /// `exec <MBean or pattern> <operation|*>`, `write <MBean or pattern> <attribute|*>`.
    #[serde(default)]
    pub approval_required: Vec<String>,
    /// How long an approved item may wait for its one run.
    #[serde(default = "default_approved_use_within", with = "humantime_serde")]
    pub approved_use_within: std::time::Duration,
    /// A webhook told of this role's access requests (asked, granted,
    /// denied, revoked, expired). A secret: such URLs often hold a token.
    #[serde(default)]
    pub notify_url: Option<crate::secret::Secret>,
    /// `json` (default) or `slack` (`{"text": …}`).
    #[serde(default)]
    pub notify_format: crate::notify::NotifyFormat,
}

fn one_approval() -> u32 {
    1
}

fn default_max_duration() -> std::time::Duration {
    DEFAULT_MAX_DURATION
}

fn default_approved_use_within() -> std::time::Duration {
    DEFAULT_APPROVED_USE_WITHIN
}
