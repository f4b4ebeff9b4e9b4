//! `[auth.kubernetes]`: bearer tokens checked by the cluster's API server
//! with a TokenReview (`authentication.k8s.io/v1`): ServiceAccount tokens,
//! or whatever else the API server accepts. Roles come from the config, by
//! the user name and groups the review returns, and from the cluster's
//! RBAC: for each `[[auth.kubernetes.access]]` entry and each namespace of
//! the fleet's targets (their `namespace` label), a SubjectAccessReview
//! (`authorization.k8s.io/v1`) says whether the caller may do that verb on
//! that resource there; if so it holds the entry's role on that
//! namespace's targets (as hawtio-online does).
//!
//! Reviews are cached for `cache_ttl` by the token's SHA-256 (never the
//! token), access reviews for `access_cache_ttl` by (token digest,
//! namespace, entry); concurrent reviews of one question are one request. When the
//! API server can't answer, the caller gets a 503 ([`Review::Unavailable`]),
//! never a 401 and never a wider grant; nothing about that is cached.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// `[auth.kubernetes]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubernetesAuthConfig {
    /// A kubeconfig file for the gateway's own access to the API server;
    /// absent: the in-cluster service-account token and CA.
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    /// Audiences sent in the review: a token must be meant for one of
    /// them. Empty: the API server's own audiences.
    #[serde(default)]
    pub audiences: Vec<String>,
    /// Roles per user name as the review returns it
    /// (`"system:serviceaccount:shop:monitor" = ["viewer"]`).
    #[serde(default)]
    pub roles: BTreeMap<String, Vec<String>>,
    /// Roles per group the review returns
    /// (`"system:serviceaccounts:shop" = ["viewer"]`).
    #[serde(default)]
    pub group_roles: BTreeMap<String, Vec<String>>,
    /// Roles of every caller the API server authenticates.
    #[serde(default)]
    pub default_roles: Vec<String>,
    /// How long a review's answer (accepted or refused) is reused.
    #[serde(default = "default_cache_ttl", with = "humantime_serde")]
    pub cache_ttl: Duration,
    /// Roles from the cluster's RBAC, per namespace.
    #[serde(default)]
    pub access: Vec<AccessRule>,
    /// How long an access review's answer is reused.
    #[serde(default = "default_cache_ttl", with = "humantime_serde")]
    pub access_cache_ttl: Duration,
    /// How long a review may take before the caller gets a 503.
    #[serde(default = "default_timeout", with = "humantime_serde")]
    pub timeout: Duration,
}

/// `[[auth.kubernetes.access]]`: a caller the cluster allows `verb` on
/// `resource` (of API group `group`, `""` the core group) in a namespace
/// holds `role` on that namespace's targets.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessRule {
    pub role: String,
    pub verb: String,
    pub resource: String,
    #[serde(default)]
    pub group: String,
}

fn default_cache_ttl() -> Duration {
    Duration::from_secs(10)
}

fn default_timeout() -> Duration {
    Duration::from_secs(5)
}

/// The most a review's answer is reused: a revoked token stops working
/// within this.
const MAX_CACHE_TTL: Duration = Duration::from_secs(300);

/// What the API server said about a token.
#[derive(Debug, Clone, PartialEq)]
pub enum Review {
    /// Authenticated: the user name, the roles the config gives it, and
    /// the user as the API server told it (for access reviews).
    Accepted {
        name: String,
        roles: Vec<String>,
        user: Box<UserInfo>,
    },
    /// Not authenticated (forged, expired, another audience…).
    Refused,
    /// No answer from the API server (unreachable, timed out, the
    /// gateway not allowed to create tokenreviews).
    Unavailable,
}

type Slot = Arc<tokio::sync::OnceCell<Review>>;

pub struct Kubernetes {
    config: KubernetesAuthConfig,
    client: tokio::sync::OnceCell<kube::Client>,
    /// Reviews by SHA-256 of the token; a slot is shared by concurrent
    /// callers presenting one token.
    cache: moka::sync::Cache<[u8; 32], Slot>,
    /// Access reviews by (token digest, namespace, entry): `None` is no
    /// answer, never kept.
    access: moka::sync::Cache<([u8; 32], String, usize), AccessSlot>,
}

type AccessSlot = Arc<tokio::sync::OnceCell<Option<bool>>>;

impl std::fmt::Debug for Kubernetes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kubernetes")
            .field("kubeconfig", &self.config.kubeconfig)
            .field("audiences", &self.config.audiences)
            .finish_non_exhaustive()
    }
}

impl Kubernetes {
    pub fn from_config(config: &KubernetesAuthConfig) -> Result<Kubernetes, String> {
        if config.cache_ttl > MAX_CACHE_TTL {
            return Err(format!("cache_ttl is at most {}s", MAX_CACHE_TTL.as_secs()));
        }
        if config.access_cache_ttl > MAX_CACHE_TTL {
            return Err(format!(
                "access_cache_ttl is at most {}s",
                MAX_CACHE_TTL.as_secs()
            ));
        }
        if config.timeout.is_zero() {
            return Err("timeout must be more than 0".into());
        }
        if let Some(path) = &config.kubeconfig {
            kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?;
        }
        Ok(Kubernetes {
            config: config.clone(),
            client: tokio::sync::OnceCell::new(),
            cache: moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(config.cache_ttl)
                .build(),
            access: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(config.access_cache_ttl)
                .build(),
        })
    }

    /// Whether roles come from the cluster's RBAC too.
    pub fn has_access_rules(&self) -> bool {
        !self.config.access.is_empty()
    }

    /// The (role, namespace) grants of an authenticated caller: every
    /// access entry the cluster allows it in each of `namespaces`. `None`
    /// when the API server did not answer one of the questions.
    pub async fn grants(
        &self,
        token: &str,
        user: &UserInfo,
        namespaces: &[String],
    ) -> Option<Vec<(String, String)>> {
        let digest = digest(token);
        let questions = namespaces.iter().flat_map(|ns| {
            self.config
                .access
                .iter()
                .enumerate()
                .map(move |(i, rule)| (ns, i, rule))
        });
        let answers = futures::future::join_all(questions.map(|(ns, i, rule)| async move {
            let key = (digest, ns.clone(), i);
            let slot = self
                .access
                .get_with(key.clone(), || Arc::new(tokio::sync::OnceCell::new()));
            let allowed = *slot.get_or_init(|| self.ask_access(user, ns, rule)).await;
            if allowed.is_none() {
                self.access.invalidate(&key);
            }
            allowed.map(|a| a.then(|| (rule.role.clone(), ns.clone())))
        }))
        .await;
        let mut grants: Vec<(String, String)> = Vec::new();
        for answer in answers {
            if let Some(g) = answer? {
                if !grants.contains(&g) {
                    grants.push(g);
                }
            }
        }
        Some(grants)
    }

    async fn ask_access(&self, user: &UserInfo, ns: &str, rule: &AccessRule) -> Option<bool> {
        let client = self.client().await?;
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username.clone(),
                groups: user.groups.clone(),
                uid: user.uid.clone(),
                extra: user.extra.clone(),
                resource_attributes: Some(ResourceAttributes {
                    namespace: Some(ns.to_string()),
                    verb: Some(rule.verb.clone()),
                    resource: Some(rule.resource.clone()),
                    group: Some(rule.group.clone()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        match tokio::time::timeout(self.config.timeout, create_bounded(&client, &review)).await {
            Ok(Ok(r)) => Some(r.status.is_some_and(|s| s.allowed)),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "kubernetes authentication: SubjectAccessReview failed");
                None
            }
            Err(_) => {
                tracing::warn!(
                    timeout = ?self.config.timeout,
                    "kubernetes authentication: SubjectAccessReview timed out"
                );
                None
            }
        }
    }

    async fn client(&self) -> Option<kube::Client> {
        match self
            .client
            .get_or_try_init(|| {
                crate::discovery::kubernetes::client_from(self.config.kubeconfig.as_deref())
            })
            .await
        {
            Ok(c) => Some(c.clone()),
            Err(e) => {
                tracing::warn!(error = %e, "kubernetes authentication: no client for the API server");
                None
            }
        }
    }

    /// Reviews `token` (or reuses a recent review of it).
    pub async fn review(&self, token: &str) -> (Review, bool) {
        let digest = digest(token);
        let mut fresh = false;
        let slot = self
            .cache
            .get_with(digest, || Arc::new(tokio::sync::OnceCell::new()));
        let review = slot
            .get_or_init(|| {
                fresh = true;
                self.ask(token)
            })
            .await
            .clone();
        if review == Review::Unavailable {
            // Asked again by the next caller.
            self.cache.invalidate(&digest);
        }
        (review, !fresh)
    }

    async fn ask(&self, token: &str) -> Review {
        let Some(client) = self.client().await else {
            return Review::Unavailable;
        };
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: (!self.config.audiences.is_empty())
                    .then(|| self.config.audiences.clone()),
            },
            ..TokenReview::default()
        };
        let answer =
            tokio::time::timeout(self.config.timeout, create_bounded(&client, &review)).await;
        let status = match answer {
            Ok(Ok(r)) => r.status.unwrap_or_default(),
            Ok(Err(e)) => {
                // kube's errors carry the request's URL and the server's
                // status, never the body sent (the token).
                tracing::warn!(error = %e, "kubernetes authentication: TokenReview failed");
                return Review::Unavailable;
            }
            Err(_) => {
                tracing::warn!(
                    timeout = ?self.config.timeout,
                    "kubernetes authentication: TokenReview timed out"
                );
                return Review::Unavailable;
            }
        };
        let user = status.user.unwrap_or_default();
        match (status.authenticated, user.username.clone()) {
            (Some(true), Some(name)) if !name.is_empty() => {
                let roles = self.roles(&name, user.groups.as_deref().unwrap_or_default());
                Review::Accepted {
                    name,
                    roles,
                    user: Box::new(user),
                }
            }
            _ => {
                tracing::info!(
                    reason = status.error.as_deref().unwrap_or("not authenticated"),
                    "kubernetes token refused"
                );
                Review::Refused
            }
        }
    }

    /// The roles the config gives a user of `groups`: its own, its groups',
    /// and the default ones, each once.
    fn roles(&self, name: &str, groups: &[String]) -> Vec<String> {
        let mut roles: Vec<String> = Vec::new();
        let c = &self.config;
        let from_groups = groups.iter().filter_map(|g| c.group_roles.get(g)).flatten();
        for r in c
            .roles
            .get(name)
            .into_iter()
            .flatten()
            .chain(from_groups)
            .chain(&c.default_roles)
        {
            if !roles.contains(r) {
                roles.push(r.clone());
            }
        }
        roles
    }
}

impl KubernetesAuthConfig {
    /// Every role name the config gives, for the check that they exist.
    pub fn role_names(&self) -> impl Iterator<Item = &String> {
        self.roles
            .values()
            .chain(self.group_roles.values())
            .flatten()
            .chain(&self.default_roles)
            .chain(self.access.iter().map(|a| &a.role))
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Most bytes of a review's answer read: a TokenReview or
/// SubjectAccessReview answer is a few hundred bytes, and an API server
/// (or what stands in its place) must not make the gateway hold more.
pub const MAX_REVIEW_ANSWER_BYTES: usize = 1024 * 1024;

/// Creates `review` (a cluster-scoped review) and reads its answer, at
/// most [`MAX_REVIEW_ANSWER_BYTES`] of it: kube's own `Api::create` reads
/// an answer whole, however large.
async fn create_bounded<K>(client: &kube::Client, review: &K) -> Result<K, String>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    use http_body_util::BodyExt as _;
    let body = serde_json::to_vec(review).map_err(|e| e.to_string())?;
    let request = kube::core::Request::new(K::url_path(&(), None))
        .create(&PostParams::default(), body)
        .map_err(|e| e.to_string())?
        .map(kube::client::Body::from);
    let answer = client.send(request).await.map_err(|e| e.to_string())?;
    let status = answer.status();
    let bytes = http_body_util::Limited::new(answer.into_body(), MAX_REVIEW_ANSWER_BYTES)
        .collect()
        .await
        .map_err(|e| {
            format!("the answer (HTTP {status}) is over {MAX_REVIEW_ANSWER_BYTES} bytes, or broke off: {e}")
        })?
        .to_bytes();
    if !status.is_success() {
        return Err(format!("the API server answered HTTP {status}"));
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("the answer is not a review: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_from_name_groups_and_default_each_once() {
        let config: KubernetesAuthConfig = toml::from_str(
            r#"
            kubeconfig = "/dev/null"
            default_roles = ["viewer"]
            [roles]
            "system:serviceaccount:shop:ops" = ["operator", "viewer"]
            [group_roles]
            "system:serviceaccounts:shop" = ["shop"]
            "#,
        )
        .unwrap();
        assert_eq!(config.cache_ttl, Duration::from_secs(10));
        let mut c = config.clone();
        c.kubeconfig = None;
        let k = Kubernetes::from_config(&c).unwrap();
        assert_eq!(
            k.roles(
                "system:serviceaccount:shop:ops",
                &["system:serviceaccounts:shop".into()]
            ),
            ["operator", "viewer", "shop"]
        );
        assert_eq!(k.roles("someone", &[]), ["viewer"]);
        c.cache_ttl = Duration::from_secs(3600);
        assert!(Kubernetes::from_config(&c).is_err());
    }

    /// A stand-in API server answering TokenReviews: `status` 200 with
    /// `user` for token `good`, not authenticated otherwise; counts them.
    async fn fake_api_server(
        status: u16,
    ) -> (tempfile::TempDir, Arc<std::sync::atomic::AtomicUsize>) {
        hostile_api_server(status, 0).await
    }

    /// [`fake_api_server`] whose answers carry `padding` bytes more (in
    /// the user's `extra`).
    async fn hostile_api_server(
        status: u16,
        padding: usize,
    ) -> (tempfile::TempDir, Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let asked = Arc::new(AtomicUsize::new(0));
        let counter = asked.clone();
        let app = axum::Router::new().route(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            axum::routing::post(move |body: axum::body::Bytes| {
                let counter = counter.clone();
                async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    // Slow enough that concurrent callers wait for it.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    let review: serde_json::Value = serde_json::from_slice(&body).unwrap();
                    let good = review["spec"]["token"] == "good";
                    let answer = serde_json::json!({
                        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                        "status": {"authenticated": good, "user": if good {
                            serde_json::json!({"username": "system:serviceaccount:a:b",
                                               "extra": {"pad": ["x".repeat(padding)]}})
                        } else { serde_json::json!({}) }}
                    });
                    (
                        http::StatusCode::from_u16(status).unwrap(),
                        [(http::header::CONTENT_TYPE, "application/json")],
                        answer.to_string(),
                    )
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("kubeconfig"),
            format!(
                "apiVersion: v1\nkind: Config\n\
                 clusters: [{{name: c, cluster: {{server: \"http://127.0.0.1:{port}\"}}}}]\n\
                 users: [{{name: u, user: {{token: gateway}}}}]\n\
                 contexts: [{{name: x, context: {{cluster: c, user: u}}}}]\n\
                 current-context: x\n"
            ),
        )
        .unwrap();
        (dir, asked)
    }

    fn against(dir: &tempfile::TempDir) -> Kubernetes {
        let config: KubernetesAuthConfig = toml::from_str(&format!(
            "kubeconfig = \"{}\"\ncache_ttl = \"5m\"\n",
            dir.path().join("kubeconfig").display()
        ))
        .unwrap();
        Kubernetes::from_config(&config).unwrap()
    }

    #[tokio::test]
    async fn concurrent_reviews_of_one_token_are_one_and_answers_are_kept() {
        use std::sync::atomic::Ordering;
        let (dir, asked) = fake_api_server(201).await;
        let k = against(&dir);
        let answers = futures::future::join_all((0..20).map(|_| k.review("good"))).await;
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        assert!(answers
            .iter()
            .all(|(r, _)| matches!(r, Review::Accepted { name, .. } if name == "system:serviceaccount:a:b")));
        assert_eq!(answers.iter().filter(|(_, cached)| !cached).count(), 1);
        // Refusals are kept too, under their own digest.
        assert_eq!(k.review("forged").await.0, Review::Refused);
        assert_eq!(k.review("forged").await, (Review::Refused, true));
        assert_eq!(asked.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn no_answer_is_unavailable_and_asked_again() {
        use std::sync::atomic::Ordering;
        let (dir, asked) = fake_api_server(500).await;
        let k = against(&dir);
        assert_eq!(k.review("good").await.0, Review::Unavailable);
        assert_eq!(k.review("good").await.0, Review::Unavailable);
        assert_eq!(asked.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn an_answer_past_its_bound_is_no_answer_and_never_held_whole() {
        let (dir, _) = hostile_api_server(201, 4 * MAX_REVIEW_ANSWER_BYTES).await;
        assert_eq!(against(&dir).review("good").await.0, Review::Unavailable);
        // Within the bound, the same answer is taken.
        let (dir, _) = hostile_api_server(201, MAX_REVIEW_ANSWER_BYTES / 2).await;
        assert!(matches!(
            against(&dir).review("good").await.0,
            Review::Accepted { .. }
        ));
    }

    #[test]
    fn every_role_named_must_be_configured() {
        let problems = crate::Config::parse(
            "[server]\nlisten = \"127.0.0.1:0\"\n\
             [[roles]]\nname = \"viewer\"\ntargets = [\"*\"]\n\
             [auth.kubernetes]\ndefault_roles = [\"viewer\"]\n\
             [[auth.kubernetes.access]]\nrole = \"operator\"\nverb = \"update\"\nresource = \"pods\"\n",
        )
        .unwrap()
        .validate()
        .unwrap_err();
        assert_eq!(
            problems,
            ["auth.kubernetes: role \"operator\" is not among [[roles]]"]
        );
    }
}
