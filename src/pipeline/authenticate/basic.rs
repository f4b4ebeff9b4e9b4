//! HTTP Basic: a users file with argon2id (or bcrypt) password hashes.
//! Verified credentials are cached briefly (as a digest, never the
//! password) so a hash is not recomputed on every request; repeated
//! failures for one user name from one client address are throttled.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use base64::Engine;
use moka::sync::Cache;
use serde::Deserialize;
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BasicConfig {
    /// TOML file with `[[users]]` entries: name, password_hash, roles.
    pub users_file: PathBuf,
    #[serde(default = "default_realm")]
    pub realm: String,
    /// How long a verified user/password pair is remembered.
    #[serde(default = "default_cache_ttl", with = "humantime_serde")]
    pub cache_ttl: Duration,
    /// Failed attempts per user name and client address before that user
    /// is refused from that address (HTTP 429) for `failure_window`.
    #[serde(default = "default_max_failures")]
    pub max_failures: u32,
    /// How long failures are counted, and how long throttling lasts.
    #[serde(default = "default_failure_window", with = "humantime_serde")]
    pub failure_window: Duration,
    /// Password checks (credentials not in the verified cache) waiting
    /// for a hashing thread or being hashed, at once. One more is refused
    /// at once with HTTP 429 and `Retry-After: 1` instead of waiting:
    /// a spray of made-up names cannot queue without bound, and callers
    /// whose credentials are cached never wait behind it.
    #[serde(default = "default_max_queued_checks")]
    pub max_queued_checks: usize,
}

fn default_realm() -> String {
    "jmxgate".into()
}
fn default_cache_ttl() -> Duration {
    Duration::from_secs(60)
}
fn default_max_failures() -> u32 {
    5
}
fn default_failure_window() -> Duration {
    Duration::from_secs(60)
}
/// `auth.basic.max_queued_checks`' default.
pub const DEFAULT_MAX_QUEUED_CHECKS: usize = 16;
fn default_max_queued_checks() -> usize {
    DEFAULT_MAX_QUEUED_CHECKS
}

impl BasicConfig {
    /// What is wrong with `[auth.basic]`, for the configuration's check:
    /// a zero here was once taken as 1 without a word.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.max_failures == 0 {
            problems.push("auth.basic.max_failures: must be greater than zero".into());
        }
        if self.max_queued_checks == 0 {
            problems.push(
                "auth.basic.max_queued_checks: must be greater than zero (no password could be checked)"
                    .into(),
            );
        }
        problems
    }

    pub fn resolve_relative_paths(&mut self, base: &Path) {
        if self.users_file.is_relative() {
            self.users_file = base.join(&self.users_file);
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UsersFile {
    #[serde(default)]
    users: Vec<User>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct User {
    name: String,
    password_hash: String,
    #[serde(default)]
    roles: Vec<String>,
}

/// A user proven by name and password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BasicIdentity {
    pub name: String,
    pub roles: Vec<String>,
    /// Answered from the cache of verified credentials.
    pub from_cache: bool,
}

/// Why Basic credentials were not accepted. Clients see the same 401 for
/// every one of these; the distinction is for logs and throttling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BasicFailure {
    /// Not `Basic <base64 of user:password>`.
    Malformed,
    /// Unknown user or wrong password (never told apart).
    Rejected,
    /// Too many recent failures; retry after this long.
    Throttled(Duration),
    /// Only from [`Basic::verify_cheap`]'s inner check: not decidable
    /// without hashing the password.
    NeedsHashing,
}

pub struct Basic {
    realm: String,
    users: Vec<User>,
    /// A hash to verify against for unknown users, so they take as long.
    decoy: String,
    verified: Cache<[u8; 32], Arc<BasicIdentity>>,
    /// Attempts that were not a success, per (user name, client address).
    failures: Cache<ThrottleKey, u32>,
    max_failures: u32,
    window: Duration,
    /// Per-process key for cache digests.
    pepper: [u8; 16],
    /// Password checks queued or hashing now, and how many may be.
    queued: Arc<std::sync::atomic::AtomicUsize>,
    max_queued: usize,
}

/// A place in the queue of password checks, given back when dropped.
#[derive(Debug)]
pub struct QueuedCheck(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for QueuedCheck {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

impl std::fmt::Debug for Basic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Basic")
            .field("realm", &self.realm)
            .field("users", &self.users.len())
            .finish_non_exhaustive()
    }
}

impl Basic {
    pub fn from_config(config: &BasicConfig) -> Result<Basic, String> {
        Basic::from_config_after(config, None)
    }

    /// Builds the store for a reload: the failures counted so far (for an
    /// unchanged `failure_window`) and the places taken in the check queue
    /// carry over from `previous`, so a reload, whatever file changed,
    /// never lifts a throttle. Verified credentials do not: the users file
    /// may have changed.
    pub fn from_config_after(
        config: &BasicConfig,
        previous: Option<&Basic>,
    ) -> Result<Basic, String> {
        let file = config.users_file.display();
        let text = std::fs::read_to_string(&config.users_file)
            .map_err(|e| format!("users_file {file}: {e}"))?;
        let parsed: UsersFile =
            toml::from_str(&text).map_err(|e| format!("users_file {file}: {e}"))?;
        for (i, u) in parsed.users.iter().enumerate() {
            if u.name.is_empty() || u.name.contains(':') {
                return Err(format!(
                    "users_file {file}: users[{i}].name must be non-empty and without ':'"
                ));
            }
            check_hash(&u.password_hash)
                .map_err(|e| format!("users_file {file}: users[{i}] ({}): {e}", u.name))?;
        }
        let mut seen = std::collections::HashSet::new();
        if let Some(dup) = parsed.users.iter().find(|u| !seen.insert(u.name.as_str())) {
            return Err(format!(
                "users_file {file}: user \"{}\" appears twice",
                dup.name
            ));
        }
        let mut pepper = [0u8; 16];
        getrandom(&mut pepper);
        Ok(Basic {
            realm: config.realm.clone(),
            decoy: hash_password("decoy password, never matches")?,
            users: parsed.users,
            verified: Cache::builder()
                .max_capacity(10_000)
                .time_to_live(config.cache_ttl)
                .build(),
            failures: match previous {
                Some(p) if p.window == config.failure_window => p.failures.clone(),
                _ => Cache::builder()
                    .max_capacity(100_000)
                    .time_to_live(config.failure_window)
                    .build(),
            },
            max_failures: config.max_failures.max(1),
            window: config.failure_window,
            pepper,
            queued: previous.map(|p| p.queued.clone()).unwrap_or_default(),
            max_queued: config.max_queued_checks.max(1),
        })
    }

    pub fn realm(&self) -> &str {
        &self.realm
    }

    /// A place in the queue of password checks (`max_queued_checks`), or
    /// `None` when it is full: then the caller is answered at once.
    pub fn enter_queue(&self) -> Option<QueuedCheck> {
        use std::sync::atomic::Ordering;
        self.queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_queued).then_some(n + 1)
            })
            .ok()
            .map(|_| QueuedCheck(self.queued.clone()))
    }

    /// Checks an `Authorization: Basic …` value (the part after `Basic `).
    /// CPU-heavy on a cache miss: call from a blocking-safe context.
    /// Decides without hashing when it can (malformed, throttled, or
    /// cached credentials); `None` when the password must be hashed.
    pub fn verify_cheap(
        &self,
        credentials: &str,
        client: Option<IpAddr>,
    ) -> Option<Result<BasicIdentity, BasicFailure>> {
        match self.check(credentials, client, false) {
            Err(BasicFailure::NeedsHashing) => None,
            decided => Some(decided),
        }
    }

    pub fn verify(
        &self,
        credentials: &str,
        client: Option<IpAddr>,
    ) -> Result<BasicIdentity, BasicFailure> {
        self.check(credentials, client, true)
    }

    fn check(
        &self,
        credentials: &str,
        client: Option<IpAddr>,
        may_hash: bool,
    ) -> Result<BasicIdentity, BasicFailure> {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(credentials.trim())
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or(BasicFailure::Malformed)?;
        let (user, password) = decoded.split_once(':').ok_or(BasicFailure::Malformed)?;
        let key = throttle_key(user, client);
        if self.failures.get(&key).unwrap_or(0) >= self.max_failures {
            return Err(BasicFailure::Throttled(self.window));
        }
        let digest = self.digest(user, password);
        if let Some(hit) = self.verified.get(&digest) {
            return Ok(BasicIdentity {
                from_cache: true,
                ..(*hit).clone()
            });
        }
        if !may_hash {
            return Err(BasicFailure::NeedsHashing);
        }
        // Concurrent callers with the same credentials (a fleet of pollers
        // after a restart) wait for one hash instead of each paying for it.
        let (mut hashed, mut outcome) = (false, None);
        let verified = self.verified.optionally_get_with(digest, || {
            hashed = true;
            // The attempt counts before it is checked, so a burst of
            // concurrent guesses gets no more than `max_failures` checks.
            if !self.count_attempt(&key) {
                outcome = Some(BasicFailure::Throttled(self.window));
                return None;
            }
            let found = self.users.iter().find(|u| u.name == user);
            let hash = found.map_or(self.decoy.as_str(), |u| u.password_hash.as_str());
            let ok = verify_password(password, hash) && found.is_some();
            if !ok {
                outcome = Some(BasicFailure::Rejected);
                return None;
            }
            // A success forgives the failures before it.
            self.failures.invalidate(&key);
            found.map(|u| {
                Arc::new(BasicIdentity {
                    name: u.name.clone(),
                    roles: u.roles.clone(),
                    from_cache: false,
                })
            })
        });
        match (verified, outcome) {
            (Some(identity), _) => Ok(BasicIdentity {
                from_cache: !hashed,
                ..(*identity).clone()
            }),
            (None, Some(failure)) => Err(failure),
            // Another caller's check of the same credentials failed.
            (None, None) => Err(BasicFailure::Rejected),
        }
    }

    /// Counts one attempt for `key`; false when it is one too many (then
    /// it is not checked).
    fn count_attempt(&self, key: &ThrottleKey) -> bool {
        let counted = self
            .failures
            .entry(key.clone())
            .and_upsert_with(|now| now.map_or(1, |e| e.into_value().saturating_add(1)));
        counted.into_value() <= self.max_failures
    }

    fn digest(&self, user: &str, password: &str) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(self.pepper);
        h.update(user.as_bytes());
        h.update([0]);
        h.update(password.as_bytes());
        h.finalize().into()
    }
}

/// Throttling counts per user name and client address: failures for one
/// name (a made-up one included) lock out neither the other users of that
/// address nor that user elsewhere. The address is the client's as the
/// trusted-proxy chain tells it (see `AccessControl::client_address`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ThrottleKey {
    user: String,
    client: Option<IpAddr>,
}

fn throttle_key(user: &str, client: Option<IpAddr>) -> ThrottleKey {
    ThrottleKey {
        user: user.to_string(),
        client: client.map(|c| c.to_canonical()),
    }
}

/// Fills `buf` from the OS random source.
fn getrandom(buf: &mut [u8]) {
    use argon2::password_hash::rand_core::{OsRng, RngCore};
    OsRng.fill_bytes(buf);
}

/// An argon2id hash (PHC string) of a password, as `jmxgate
/// hash-password` prints it.
pub fn hash_password(password: &str) -> Result<String, String> {
    let salt = SaltString::generate(&mut argon2::password_hash::rand_core::OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| format!("cannot hash the password: {e}"))
}

/// A bcrypt hash, for users files shared with tools that expect bcrypt.
pub fn hash_password_bcrypt(password: &str) -> Result<String, String> {
    bcrypt::hash(password, bcrypt::DEFAULT_COST)
        .map_err(|e| format!("cannot hash the password: {e}"))
}

fn check_hash(hash: &str) -> Result<(), String> {
    if is_bcrypt(hash) {
        return hash
            .parse::<bcrypt::HashParts>()
            .map(|_| ())
            .map_err(|e| format!("password_hash is not a valid bcrypt hash: {e}"));
    }
    PasswordHash::new(hash)
        .map(|_| ())
        .map_err(|e| format!("password_hash is not an argon2 or bcrypt hash ({e}); make one with `jmxgate hash-password`"))
}

fn is_bcrypt(hash: &str) -> bool {
    ["$2a$", "$2b$", "$2y$", "$2x$"]
        .iter()
        .any(|p| hash.starts_with(p))
}

/// Both libraries compare in constant time.
fn verify_password(password: &str, hash: &str) -> bool {
    if is_bcrypt(hash) {
        return bcrypt::verify(password, hash).unwrap_or(false);
    }
    PasswordHash::new(hash)
        .map(|h| {
            Argon2::default()
                .verify_password(password.as_bytes(), &h)
                .is_ok()
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(users: &str, max_failures: u32) -> (tempfile::TempDir, Basic) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users.toml");
        std::fs::write(&path, users).unwrap();
        let config = BasicConfig {
            users_file: path,
            realm: "test".into(),
            cache_ttl: Duration::from_secs(60),
            max_failures,
            failure_window: Duration::from_secs(60),
            max_queued_checks: 2,
        };
        let b = Basic::from_config(&config).unwrap();
        (dir, b)
    }

    fn creds(user: &str, password: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    }

    #[test]
    fn argon2_and_bcrypt_users_verify() {
        let a = hash_password("pa:ss").unwrap();
        let b = hash_password_bcrypt("secret").unwrap();
        let (_d, basic) = basic(
            &format!(
                "[[users]]\nname = \"alice\"\npassword_hash = \"{a}\"\nroles = [\"ops\"]\n\
                 [[users]]\nname = \"bob\"\npassword_hash = \"{b}\"\n"
            ),
            5,
        );
        assert_eq!(
            basic.verify_cheap(&creds("alice", "pa:ss"), None),
            None,
            "needs hashing"
        );
        let alice = basic.verify(&creds("alice", "pa:ss"), None).unwrap();
        assert!(
            basic
                .verify_cheap(&creds("alice", "pa:ss"), None)
                .unwrap()
                .unwrap()
                .from_cache
        );
        assert_eq!(alice.roles, vec!["ops"]);
        assert!(!alice.from_cache);
        // Cached: the same answer again, without hashing.
        let again = basic.verify(&creds("alice", "pa:ss"), None).unwrap();
        assert!(again.from_cache);
        assert_eq!((again.name, again.roles), (alice.name, alice.roles));
        assert_eq!(
            basic.verify(&creds("bob", "secret"), None).unwrap().name,
            "bob"
        );
        assert_eq!(
            basic.verify(&creds("bob", "Secret"), None),
            Err(BasicFailure::Rejected)
        );
        assert_eq!(
            basic.verify(&creds("carol", "x"), None),
            Err(BasicFailure::Rejected)
        );
        assert_eq!(basic.verify("!!!", None), Err(BasicFailure::Malformed));
        assert_eq!(
            basic.verify(
                &base64::engine::general_purpose::STANDARD.encode("nocolon"),
                None
            ),
            Err(BasicFailure::Malformed)
        );
    }

    #[test]
    fn concurrent_logins_with_the_same_credentials_hash_once() {
        let h = hash_password("right").unwrap();
        let (_d, basic) = basic(
            &format!("[[users]]\nname = \"u\"\npassword_hash = \"{h}\"\n"),
            100,
        );
        let start = std::sync::Barrier::new(8);
        let hashed = std::thread::scope(|s| {
            let runs: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        basic.verify(&creds("u", "right"), None).unwrap().from_cache
                    })
                })
                .collect();
            runs.into_iter()
                .map(|r| r.join().unwrap())
                .filter(|from_cache| !from_cache)
                .count()
        });
        assert_eq!(hashed, 1, "one caller hashes, the others share its result");
        // A wrong password is never shared or cached.
        assert_eq!(
            basic.verify(&creds("u", "wrong"), None),
            Err(BasicFailure::Rejected)
        );
    }

    #[test]
    fn a_reload_keeps_the_throttle_and_forgets_verified_passwords() {
        let u = hash_password("right").unwrap();
        let (dir, before) = basic(
            &format!("[[users]]\nname = \"u\"\npassword_hash = \"{u}\"\n"),
            2,
        );
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        for _ in 0..2 {
            assert_eq!(
                before.verify(&creds("u", "wrong"), Some(ip)),
                Err(BasicFailure::Rejected)
            );
        }
        let mut config = BasicConfig {
            users_file: dir.path().join("users.toml"),
            realm: "test".into(),
            cache_ttl: Duration::from_secs(60),
            max_failures: 2,
            failure_window: Duration::from_secs(60),
            max_queued_checks: 2,
        };
        let after = Basic::from_config_after(&config, Some(&before)).unwrap();
        assert!(matches!(
            after.verify(&creds("u", "right"), Some(ip)),
            Err(BasicFailure::Throttled(_))
        ));
        // The queue's places are one count across the reload.
        let _held = before.enter_queue().unwrap();
        let _also = after.enter_queue().unwrap();
        assert!(after.enter_queue().is_none());
        // Another window is another count, starting empty.
        config.failure_window = Duration::from_secs(30);
        let other = Basic::from_config_after(&config, Some(&before)).unwrap();
        assert!(other.verify(&creds("u", "right"), Some(ip)).is_ok());
        // A verified password is checked again against the file read now.
        let (_d, fresh) = basic(
            &format!("[[users]]\nname = \"v\"\npassword_hash = \"{u}\"\n"),
            2,
        );
        assert!(fresh.verify(&creds("v", "right"), None).is_ok());
        std::fs::write(&config.users_file, "").unwrap();
        config.failure_window = Duration::from_secs(60);
        let emptied = Basic::from_config_after(&config, Some(&fresh)).unwrap();
        assert_eq!(
            emptied.verify(&creds("v", "right"), None),
            Err(BasicFailure::Rejected)
        );
    }

    #[test]
    fn failures_are_throttled_per_user_and_client_address() {
        let (u, v) = (
            hash_password("right").unwrap(),
            hash_password("v-pw").unwrap(),
        );
        let (_d, basic) = basic(
            &format!(
                "[[users]]\nname = \"u\"\npassword_hash = \"{u}\"\n\
                 [[users]]\nname = \"v\"\npassword_hash = \"{v}\"\n"
            ),
            3,
        );
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        for _ in 0..3 {
            assert_eq!(
                basic.verify(&creds("u", "wrong"), Some(ip)),
                Err(BasicFailure::Rejected)
            );
        }
        // Even the right password is refused while throttled, from there.
        assert!(matches!(
            basic.verify(&creds("u", "right"), Some(ip)),
            Err(BasicFailure::Throttled(_))
        ));
        // The same user from elsewhere, another user from there: not.
        let other: IpAddr = "192.0.2.2".parse().unwrap();
        assert!(basic.verify(&creds("u", "right"), Some(other)).is_ok());
        assert!(basic.verify(&creds("v", "v-pw"), Some(ip)).is_ok());
        // Made-up names lock out only themselves.
        for i in 0..10 {
            let _ = basic.verify(&creds(&format!("nobody-{i}"), "x"), Some(ip));
            let _ = basic.verify(&creds("nobody", &format!("x{i}")), Some(ip));
        }
        assert!(basic.verify(&creds("v", "v-pw"), Some(ip)).is_ok());
        // An IPv4 client seen as an IPv6-mapped address is the same client.
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().unwrap();
        assert!(matches!(
            basic.verify(&creds("u", "right"), Some(mapped)),
            Err(BasicFailure::Throttled(_))
        ));
    }

    #[test]
    fn a_success_forgives_the_failures_before_it() {
        let h = hash_password("right").unwrap();
        let (_d, basic) = basic(
            &format!("[[users]]\nname = \"u\"\npassword_hash = \"{h}\"\n"),
            3,
        );
        for _ in 0..2 {
            let _ = basic.verify(&creds("u", "wrong"), None);
        }
        assert!(basic.verify(&creds("u", "right"), None).is_ok());
        for _ in 0..2 {
            assert_eq!(
                basic.verify(&creds("u", "wrong"), None),
                Err(BasicFailure::Rejected)
            );
        }
    }

    #[test]
    fn a_burst_of_concurrent_guesses_gets_no_more_checks_than_max_failures() {
        let h = hash_password("right").unwrap();
        let (_d, basic) = basic(
            &format!("[[users]]\nname = \"u\"\npassword_hash = \"{h}\"\n"),
            5,
        );
        let basic = Arc::new(basic);
        let barrier = Arc::new(std::sync::Barrier::new(30));
        let outcomes: Vec<_> = (0..30)
            .map(|i| {
                let (basic, barrier) = (basic.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    basic.verify(&creds("u", &format!("guess-{i}")), None)
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        let checked = outcomes
            .iter()
            .filter(|o| **o == Err(BasicFailure::Rejected))
            .count();
        assert_eq!(checked, 5, "{outcomes:?}");
        assert!(outcomes
            .iter()
            .all(|o| matches!(o, Err(BasicFailure::Rejected | BasicFailure::Throttled(_)))));
    }

    #[test]
    fn the_queue_of_password_checks_is_bounded_and_given_back() {
        let (_d, basic) = basic("", 5);
        let first = basic.enter_queue().expect("room for one");
        let second = basic.enter_queue().expect("room for two");
        assert!(basic.enter_queue().is_none(), "max_queued_checks = 2");
        drop(first);
        let third = basic
            .enter_queue()
            .expect("a place given back is free again");
        assert!(basic.enter_queue().is_none());
        drop((second, third));
        assert!(basic.enter_queue().is_some());
    }

    #[test]
    fn bad_users_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users.toml");
        std::fs::write(
            &path,
            "[[users]]\nname = \"a\"\npassword_hash = \"plaintext\"\n",
        )
        .unwrap();
        let config = BasicConfig {
            users_file: path,
            realm: "r".into(),
            cache_ttl: Duration::from_secs(1),
            max_failures: 1,
            failure_window: Duration::from_secs(1),
            max_queued_checks: DEFAULT_MAX_QUEUED_CHECKS,
        };
        let e = Basic::from_config(&config).unwrap_err();
        assert!(
            e.contains("users.toml") && e.contains("hash-password"),
            "{e}"
        );
    }
}
