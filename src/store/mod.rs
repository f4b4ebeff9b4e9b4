//! State that every replica must share: access requests, their reviews
//! and the grants they make. Nothing else in the gateway talks SQL; the
//! replicas' common truth, and the clock that decides when a grant ends,
//! live here. An embedded SQLite file by default (one replica, nothing to
//! install), PostgreSQL when `[access.store] url` names one.
//!
//! Every change is one statement or one transaction whose conditions
//! (`state = 'pending'`, a review not given yet, an item not used yet)
//! are checked by the database itself, so two replicas acting at once
//! can't both win. Times are the store's: milliseconds since the Unix
//! epoch from the database's clock, never a replica's.

mod requests;

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::Deserialize;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{PgPool, SqlitePool};

use crate::secret::Secret;

pub use requests::{NewRequest, RequestKind, RequestState, Review, StoredRequest, Verdict};

/// `[access.store]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// `postgres://user:password@host/db`: the database every replica
    /// shares. A secret: it may hold a password.
    #[serde(default)]
    pub url: Option<Secret>,
    /// The embedded SQLite file used without `url` (created when
    /// missing). Relative to the configuration file's folder.
    #[serde(default)]
    pub sqlite_file: Option<PathBuf>,
}

/// Where the SQLite file goes when neither key is set: the working
/// directory, as for a one-replica gateway started by hand.
pub const DEFAULT_SQLITE_FILE: &str = "jmxgate-access.db";

impl StoreConfig {
    /// What is wrong with `[access.store]`, each named by its key.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(url) = &self.url {
            let url = url.expose();
            if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
                // The URL is not echoed: it may hold a password.
                problems.push(
                    "access.store.url: not a postgres:// or postgresql:// URL (the embedded SQLite store needs no url; set sqlite_file to move it)"
                        .to_string(),
                );
            }
            if self.sqlite_file.is_some() {
                problems.push(
                    "access.store.sqlite_file: set together with url; the store is either PostgreSQL (url) or SQLite (sqlite_file)"
                        .to_string(),
                );
            }
        }
        problems
    }

    /// Which kind of store this is, for logs and errors (never the URL).
    pub fn describe(&self) -> String {
        match &self.url {
            Some(_) => "PostgreSQL".to_string(),
            None => format!("SQLite ({})", self.sqlite_path().display()),
        }
    }

    fn sqlite_path(&self) -> PathBuf {
        self.sqlite_file
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_SQLITE_FILE))
    }
}

/// Why the store could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// The database can't be reached or failed: elevation fails closed
    /// (503), everything that needs none goes on.
    Unavailable(String),
    /// No request with that id.
    NotFound,
    /// The request is no longer in a state that allows it (its state).
    NotPending(RequestState),
    /// This reviewer has already reviewed the request.
    AlreadyReviewed,
    /// The requester has as many pending requests as allowed.
    TooManyPending(u64),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Unavailable(why) => write!(f, "the access store is unavailable: {why}"),
            StoreError::NotFound => f.write_str("no such access request"),
            StoreError::NotPending(state) => {
                write!(f, "the access request is {} already", state.as_str())
            }
            StoreError::AlreadyReviewed => f.write_str("you have already reviewed this request"),
            StoreError::TooManyPending(n) => {
                write!(
                    f,
                    "you already have {n} pending access requests, the most allowed"
                )
            }
        }
    }
}

impl std::error::Error for StoreError {}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> StoreError {
        // sqlx's errors name the operation, never the connection URL.
        StoreError::Unavailable(e.to_string())
    }
}

/// Creates the SQLite file readable and writable by its owner only
/// (`0600`), and makes it, its `-wal` and `-shm` so if they exist from
/// before: they hold every four-eyes item's arguments in clear. SQLite
/// creates the `-wal` and `-shm` files with the database file's mode.
fn owner_only(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    for suffix in ["", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        match std::fs::set_permissions(&name, std::fs::Permissions::from_mode(0o600)) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            other => other?,
        }
    }
    Ok(())
}

/// The pool of one backend. Each query is written once, in SQL both
/// accept (`$1` placeholders, `RETURNING`, `ON CONFLICT`), and run
/// through [`on_db!`] against whichever this is.
#[derive(Debug, Clone)]
enum Db {
    Sqlite(SqlitePool),
    Pg(PgPool),
}

/// Runs `$body` with `$pool` bound to the backend's pool.
macro_rules! on_db {
    ($db:expr, $pool:ident => $body:expr) => {
        match $db {
            Db::Sqlite($pool) => $body,
            Db::Pg($pool) => $body,
        }
    };
}
pub(crate) use on_db;

/// The shared store.
#[derive(Debug, Clone)]
pub struct Store {
    db: Db,
}

/// How long a statement may wait for the database before the store is
/// taken as unavailable.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

impl Store {
    /// Opens (creating an SQLite file if missing) and migrates the store.
    pub async fn open(config: &StoreConfig) -> Result<Store, StoreError> {
        let db = match &config.url {
            Some(url) => {
                let pool = sqlx::postgres::PgPoolOptions::new()
                    .max_connections(8)
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .connect(url.expose())
                    .await?;
                migrator(POSTGRES_MIGRATIONS)
                    .run(&pool)
                    .await
                    .map_err(migrate_error)?;
                Db::Pg(pool)
            }
            None => {
                let path = config.sqlite_path();
                owner_only(&path).map_err(|e| {
                    StoreError::Unavailable(format!(
                        "{} could not be made readable by its owner only: {e}",
                        path.display()
                    ))
                })?;
                let options = sqlx::sqlite::SqliteConnectOptions::new()
                    .filename(&path)
                    .create_if_missing(true)
                    .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
                    .synchronous(sqlx::sqlite::SqliteSynchronous::Full)
                    .busy_timeout(ACQUIRE_TIMEOUT);
                let pool = sqlx::sqlite::SqlitePoolOptions::new()
                    .max_connections(4)
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .connect_with(options)
                    .await?;
                migrator(SQLITE_MIGRATIONS)
                    .run(&pool)
                    .await
                    .map_err(migrate_error)?;
                Db::Sqlite(pool)
            }
        };
        Ok(Store { db })
    }

    /// An in-memory SQLite store, for tests.
    pub async fn in_memory() -> Result<Store, StoreError> {
        let options = sqlx::sqlite::SqliteConnectOptions::from_str("sqlite::memory:")?;
        // One connection: each in-memory connection is a database of its own.
        let pool = sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await?;
        migrator(SQLITE_MIGRATIONS)
            .run(&pool)
            .await
            .map_err(migrate_error)?;
        Ok(Store {
            db: Db::Sqlite(pool),
        })
    }

    /// The store's time, in milliseconds since the Unix epoch.
    pub async fn now_ms(&self) -> Result<i64, StoreError> {
        let sql = match &self.db {
            Db::Sqlite(_) => concat!("SELECT ", sqlite_now_ms!()),
            Db::Pg(_) => concat!("SELECT ", pg_now_ms!()),
        };
        Ok(on_db!(&self.db, pool => sqlx::query_scalar::<_, i64>(sql).fetch_one(pool).await)?)
    }

    fn db(&self) -> &Db {
        &self.db
    }
}

/// Now in milliseconds, in SQLite (any version: `unixepoch('subsec')`
/// needs 3.42, Debian 12 has 3.40).
macro_rules! sqlite_now_ms {
    () => {
        "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)"
    };
}
use sqlite_now_ms;

/// Now in milliseconds, in PostgreSQL: the wall clock, not the
/// transaction's start.
macro_rules! pg_now_ms {
    () => {
        "(floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint"
    };
}
use pg_now_ms;

/// The migrations, embedded (version, description, SQL), one list per
/// backend: their SQL may differ.
type Migrations = &'static [(i64, &'static str, &'static str)];

const SQLITE_MIGRATIONS: Migrations = &[
    (
        1,
        "access requests",
        include_str!("migrations/sqlite/0001_access_requests.sql"),
    ),
    (
        2,
        "requester identity",
        include_str!("migrations/sqlite/0002_requester_identity.sql"),
    ),
];

const POSTGRES_MIGRATIONS: Migrations = &[
    (
        1,
        "access requests",
        include_str!("migrations/postgres/0001_access_requests.sql"),
    ),
    (
        2,
        "requester identity",
        include_str!("migrations/postgres/0002_requester_identity.sql"),
    ),
];

fn migrator(migrations: Migrations) -> Migrator {
    Migrator::with_migrations(
        migrations
            .iter()
            .map(|&(version, description, sql)| {
                Migration::new(
                    version,
                    description.into(),
                    MigrationType::Simple,
                    sqlx::SqlSafeStr::into_sql_str(sql),
                    false,
                )
            })
            .collect(),
    )
}

fn migrate_error(e: sqlx::migrate::MigrateError) -> StoreError {
    StoreError::Unavailable(format!("migrating the access store: {e}"))
}
