//! Members as rows of `jmxgate_cluster_members` in PostgreSQL, one per
//! replica id. Every statement is one short autocommit statement without
//! a named prepared statement, so the engine works behind a
//! transaction-mode pooler (PgBouncer); no session advisory locks. A
//! row's age is the database's own `now()` minus its renewal, never a
//! replica's clock. Each claim of a row raises its `epoch`, the fencing
//! token: a renewal names the epoch it holds, so an instance whose row
//! was taken over finds out on its next renewal.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Row};

use super::view::Seen;
use super::Claim;

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS jmxgate_cluster_members (\
     replica_id text PRIMARY KEY, \
     instance text NOT NULL, \
     epoch bigint NOT NULL, \
     renewed timestamptz NOT NULL, \
     joined timestamptz NOT NULL, \
     admin_url text)";
/// For a table made before members said where their admin listener is.
const SCHEMA_ADMIN_URL: &str =
    "ALTER TABLE jmxgate_cluster_members ADD COLUMN IF NOT EXISTS admin_url text";

pub struct Rows {
    pool: PgPool,
    me: String,
    instance: String,
    admin_url: Option<String>,
    lease: Duration,
    epoch: Option<i64>,
}

fn db_error(e: sqlx::Error) -> String {
    match e {
        sqlx::Error::Database(d) => format!("PostgreSQL said: {}", d.message()),
        sqlx::Error::PoolTimedOut => "PostgreSQL did not answer in time".into(),
        other => other.to_string(),
    }
}

impl Rows {
    pub async fn connect(
        config: &super::ClusterConfig,
        me: &str,
        instance: &str,
    ) -> Result<Rows, String> {
        let url = config.url.as_ref().ok_or("cluster.url is not set")?;
        let options: PgConnectOptions = url
            .expose()
            .parse()
            // Not the URL's text: it may hold a password.
            .map_err(|_| "cluster.url: not a PostgreSQL connection URL".to_string())?;
        // No statement cache: a pooler in transaction mode may hand the
        // next statement another server connection.
        let options = options.statement_cache_capacity(0);
        let pool = PgPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(config.renew_interval.max(Duration::from_secs(2)))
            .connect_with(options)
            .await
            .map_err(db_error)?;
        let rows = Rows {
            pool,
            me: me.to_string(),
            instance: instance.to_string(),
            admin_url: config.advertise_url.clone(),
            lease: config.lease_duration,
            epoch: None,
        };
        rows.create_table().await?;
        Ok(rows)
    }

    async fn create_table(&self) -> Result<(), String> {
        // Two replicas creating it at once: one of them gets a unique
        // violation on the catalog; the table is there either way.
        for attempt in 0..3 {
            let made = async {
                for statement in [SCHEMA, SCHEMA_ADMIN_URL] {
                    sqlx::query(statement)
                        .persistent(false)
                        .execute(&self.pool)
                        .await?;
                }
                Ok::<(), sqlx::Error>(())
            };
            match made.await {
                Ok(_) => return Ok(()),
                Err(e) if attempt < 2 => {
                    tracing::debug!("creating jmxgate_cluster_members: {e}; again");
                }
                Err(e) => return Err(db_error(e)),
            }
        }
        Ok(())
    }

    fn lease_seconds(&self) -> f64 {
        self.lease.as_secs_f64()
    }

    /// Claims this replica's row: inserted, or taken over (epoch raised)
    /// when the database says its last renewal is older than the lease;
    /// otherwise `Held` by a live instance, its token its renewal time.
    pub async fn claim(&mut self) -> Result<Claim, String> {
        // Rows of replicas that never came back, a day on.
        let _ = sqlx::query(
            "DELETE FROM jmxgate_cluster_members WHERE renewed < now() - interval '1 day'",
        )
        .persistent(false)
        .execute(&self.pool)
        .await;
        let claimed = sqlx::query(
            "INSERT INTO jmxgate_cluster_members (replica_id, instance, epoch, renewed, joined, admin_url) \
             VALUES ($1, $2, 1, now(), now(), $4) \
             ON CONFLICT (replica_id) DO UPDATE SET instance = EXCLUDED.instance, \
                 epoch = jmxgate_cluster_members.epoch + 1, renewed = now(), joined = now(), \
                 admin_url = EXCLUDED.admin_url \
             WHERE jmxgate_cluster_members.renewed <= now() - make_interval(secs => $3) \
             RETURNING epoch",
        )
        .persistent(false)
        .bind(&self.me)
        .bind(&self.instance)
        .bind(self.lease_seconds())
        .bind(&self.admin_url)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?;
        if let Some(row) = claimed {
            self.epoch = Some(row.try_get("epoch").map_err(db_error)?);
            return Ok(Claim::Joined);
        }
        let held = sqlx::query(
            "SELECT renewed::text AS token FROM jmxgate_cluster_members WHERE replica_id = $1",
        )
        .persistent(false)
        .bind(&self.me)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(Claim::Held {
            token: held
                .map(|r| r.try_get::<String, _>("token"))
                .transpose()
                .map_err(db_error)?
                .unwrap_or_default(),
        })
    }

    pub fn epoch(&self) -> Option<i64> {
        self.epoch
    }

    /// Renews this replica's row, on the epoch it holds. `Ok(Some(why))`:
    /// the row is another instance's now (this one is fenced).
    pub async fn renew(&mut self) -> Result<Option<String>, String> {
        let Some(epoch) = self.epoch else {
            return Ok(Some("never joined".into()));
        };
        let renewed = sqlx::query(
            "UPDATE jmxgate_cluster_members SET renewed = now() \
             WHERE replica_id = $1 AND instance = $2 AND epoch = $3",
        )
        .persistent(false)
        .bind(&self.me)
        .bind(&self.instance)
        .bind(epoch)
        .execute(&self.pool)
        .await
        .map_err(db_error)?;
        if renewed.rows_affected() == 1 {
            return Ok(None);
        }
        Ok(Some(format!(
            "its row is held by another instance since epoch {epoch} lapsed"
        )))
    }

    /// The rows renewed within the lease, by the database's clock.
    pub async fn read(&self) -> Result<Vec<Seen>, String> {
        let rows = sqlx::query(
            "SELECT replica_id, renewed::text AS token, admin_url, \
                 (EXTRACT(EPOCH FROM (now() - renewed)) * 1000)::bigint AS age_ms \
             FROM jmxgate_cluster_members \
             WHERE renewed > now() - make_interval(secs => $1) ORDER BY replica_id",
        )
        .persistent(false)
        .bind(self.lease_seconds())
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        rows.iter()
            .map(|r| {
                let age: i64 = r.try_get("age_ms")?;
                Ok(Seen {
                    id: r.try_get("replica_id")?,
                    token: r.try_get("token")?,
                    age: Some(Duration::from_millis(age.max(0) as u64)),
                    admin_url: r.try_get("admin_url")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(db_error)
    }

    /// Marks this replica's row lapsed (kept, so the next claim raises the
    /// epoch), so its share moves at once rather than after a lease.
    pub async fn leave(&mut self) -> Result<(), String> {
        let Some(epoch) = self.epoch.take() else {
            return Ok(());
        };
        sqlx::query(
            "UPDATE jmxgate_cluster_members SET renewed = now() - make_interval(secs => $4) \
             WHERE replica_id = $1 AND instance = $2 AND epoch = $3",
        )
        .persistent(false)
        .bind(&self.me)
        .bind(&self.instance)
        .bind(epoch)
        .bind(self.lease_seconds() + 1.0)
        .execute(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(())
    }
}
