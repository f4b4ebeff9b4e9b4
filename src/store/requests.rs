//! Access requests and their reviews, as stored. What may be asked, who
//! may review and how many approvals a request needs are decided by the
//! caller of these functions; here each change happens at most once and
//! only from the state it starts from, whichever replica asks.

use sqlx::Row;

use super::{on_db, pg_now_ms, sqlite_now_ms, Db, Store, StoreError};

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// To hold a role (on some of its targets) for a while.
    Role,
    /// To run one item that needs approval, once.
    Item,
}

impl RequestKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestKind::Role => "role",
            RequestKind::Item => "item",
        }
    }

    fn parse(s: &str) -> RequestKind {
        match s {
            "item" => RequestKind::Item,
            _ => RequestKind::Role,
        }
    }
}

/// Where a request is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestState {
    Pending,
    Approved,
    Denied,
    Expired,
    Revoked,
}

impl RequestState {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestState::Pending => "pending",
            RequestState::Approved => "approved",
            RequestState::Denied => "denied",
            RequestState::Expired => "expired",
            RequestState::Revoked => "revoked",
        }
    }

    fn parse(s: &str) -> RequestState {
        match s {
            "approved" => RequestState::Approved,
            "denied" => RequestState::Denied,
            "expired" => RequestState::Expired,
            "revoked" => RequestState::Revoked,
            _ => RequestState::Pending,
        }
    }
}

/// A reviewer's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Approve,
    Deny,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Approve => "approve",
            Verdict::Deny => "deny",
        }
    }
}

/// A request to store, as decided valid by its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRequest {
    pub id: String,
    pub kind: RequestKind,
    /// Who asks, as an identity (`Principal::identity`: the method, the
    /// issuer and the name), which every lookup of "theirs" matches.
    pub requester: String,
    /// The requester's name, as shown (`None` for requests stored before
    /// identities: their `requester` is the bare name).
    pub requester_name: Option<String>,
    pub role: String,
    /// A selector within the role's reach; `None`: all of it.
    pub targets: Option<String>,
    pub reason: Option<String>,
    /// For an item request: exactly what may run once approved.
    pub item: Option<String>,
    /// How long the grant lasts once approved (an item request: how long
    /// its one use may wait).
    pub duration_ms: i64,
    pub approvals_needed: i64,
}

impl NewRequest {
    /// Who asked, as shown: the name, or the stored identity of a request
    /// kept from before names were.
    pub fn shown_requester(&self) -> &str {
        self.requester_name.as_deref().unwrap_or(&self.requester)
    }
}

/// One review of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    pub reviewer: String,
    pub verdict: Verdict,
    pub comment: Option<String>,
    pub at_ms: i64,
}

/// A request as the store has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRequest {
    pub request: NewRequest,
    pub state: RequestState,
    pub created_ms: i64,
    /// When it was approved or denied.
    pub decided_ms: Option<i64>,
    /// When an approved request's grant ends.
    pub expires_ms: Option<i64>,
    /// When an approved item was run.
    pub used_ms: Option<i64>,
    /// Who revoked it.
    pub ended_by: Option<String>,
    pub reviews: Vec<Review>,
}

const COLUMNS: &str = "id, kind, requester, role, targets, reason, item, duration_ms, \
     approvals_needed, state, created_ms, decided_ms, expires_ms, used_ms, ended_by, \
     requester_name";

/// The SQL text of a statement, with the backend's "now" put in for `NOW`.
fn with_now(db: &Db, sql: &str) -> String {
    sql.replace(
        "NOW_MS",
        match db {
            Db::Sqlite(_) => sqlite_now_ms!(),
            Db::Pg(_) => pg_now_ms!(),
        },
    )
}

fn request_of(row: &impl RowLike) -> Result<StoredRequest, sqlx::Error> {
    Ok(StoredRequest {
        request: NewRequest {
            id: row.text("id")?,
            kind: RequestKind::parse(&row.text("kind")?),
            requester: row.text("requester")?,
            requester_name: row.maybe_text("requester_name")?,
            role: row.text("role")?,
            targets: row.maybe_text("targets")?,
            reason: row.maybe_text("reason")?,
            item: row.maybe_text("item")?,
            duration_ms: row.int("duration_ms")?,
            approvals_needed: row.int("approvals_needed")?,
        },
        state: RequestState::parse(&row.text("state")?),
        created_ms: row.int("created_ms")?,
        decided_ms: row.maybe_int("decided_ms")?,
        expires_ms: row.maybe_int("expires_ms")?,
        used_ms: row.maybe_int("used_ms")?,
        ended_by: row.maybe_text("ended_by")?,
        reviews: Vec::new(),
    })
}

/// A row of either backend, read by column name.
trait RowLike {
    fn text(&self, column: &str) -> Result<String, sqlx::Error>;
    fn maybe_text(&self, column: &str) -> Result<Option<String>, sqlx::Error>;
    fn int(&self, column: &str) -> Result<i64, sqlx::Error>;
    fn maybe_int(&self, column: &str) -> Result<Option<i64>, sqlx::Error>;
}

macro_rules! row_like {
    ($row:ty) => {
        impl RowLike for $row {
            fn text(&self, column: &str) -> Result<String, sqlx::Error> {
                self.try_get(column)
            }
            fn maybe_text(&self, column: &str) -> Result<Option<String>, sqlx::Error> {
                self.try_get(column)
            }
            fn int(&self, column: &str) -> Result<i64, sqlx::Error> {
                self.try_get(column)
            }
            fn maybe_int(&self, column: &str) -> Result<Option<i64>, sqlx::Error> {
                self.try_get(column)
            }
        }
    };
}
row_like!(sqlx::sqlite::SqliteRow);
row_like!(sqlx::postgres::PgRow);

impl Store {
    /// Stores a new pending request, unless its requester already has
    /// `max_pending` pending ones (counted in the same transaction, so two
    /// replicas can't both let one more in).
    pub async fn create_request(
        &self,
        new: &NewRequest,
        max_pending: u64,
    ) -> Result<StoredRequest, StoreError> {
        let db = self.db();
        let count_sql =
            "SELECT COUNT(*) FROM access_requests WHERE requester = $1 AND state = 'pending'";
        let insert_sql = with_now(
            db,
            &format!(
                "INSERT INTO access_requests ({COLUMNS}) VALUES \
                 ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', NOW_MS, NULL, NULL, NULL, NULL, $10) \
                 RETURNING {COLUMNS}"
            ),
        );
        macro_rules! create {
            ($tx:expr, $row:ty) => {{
                let mut tx = $tx;
                let pending: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(count_sql))
                    .bind(&new.requester)
                    .fetch_one(&mut *tx)
                    .await?;
                if pending as u64 >= max_pending {
                    return Err(StoreError::TooManyPending(max_pending));
                }
                let row: $row = sqlx::query(sqlx::AssertSqlSafe(insert_sql.as_str()))
                    .bind(&new.id)
                    .bind(new.kind.as_str())
                    .bind(&new.requester)
                    .bind(&new.role)
                    .bind(&new.targets)
                    .bind(&new.reason)
                    .bind(&new.item)
                    .bind(new.duration_ms)
                    .bind(new.approvals_needed)
                    .bind(&new.requester_name)
                    .fetch_one(&mut *tx)
                    .await?;
                let stored = request_of(&row)?;
                tx.commit().await?;
                stored
            }};
        }
        Ok(match db {
            // IMMEDIATE: the write lock first, so the count holds until
            // the insert.
            Db::Sqlite(pool) => create!(
                pool.begin_with("BEGIN IMMEDIATE").await?,
                sqlx::sqlite::SqliteRow
            ),
            Db::Pg(pool) => {
                // Requests of one requester are counted one transaction
                // at a time: a lock on the requester's name.
                let mut tx = pool.begin().await?;
                sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
                    .bind(&new.requester)
                    .execute(&mut *tx)
                    .await?;
                create!(tx, sqlx::postgres::PgRow)
            }
        })
    }

    /// One request with its reviews.
    pub async fn request(&self, id: &str) -> Result<StoredRequest, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM access_requests WHERE id = $1");
        let db = self.db();
        let mut stored = on_db!(db, pool => {
            let row = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
                .bind(id)
                .fetch_optional(pool)
                .await?;
            match row {
                Some(row) => request_of(&row)?,
                None => return Err(StoreError::NotFound),
            }
        });
        stored.reviews = self.reviews_of(id).await?;
        Ok(stored)
    }

    async fn reviews_of(&self, id: &str) -> Result<Vec<Review>, StoreError> {
        let sql = "SELECT reviewer, verdict, comment, at_ms FROM access_reviews \
                   WHERE request_id = $1 ORDER BY at_ms, reviewer";
        let db = self.db();
        Ok(on_db!(db, pool => {
            let rows = sqlx::query(sql).bind(id).fetch_all(pool).await?;
            rows.iter()
                .map(|row| {
                    Ok(Review {
                        reviewer: row.try_get("reviewer")?,
                        verdict: if row.try_get::<String, _>("verdict")? == "deny" {
                            Verdict::Deny
                        } else {
                            Verdict::Approve
                        },
                        comment: row.try_get("comment")?,
                        at_ms: row.try_get("at_ms")?,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()?
        }))
    }

    /// Requests made by `requester`, or for one of `roles` (a reviewer's
    /// view), newest first, at most `limit`.
    pub async fn requests_for(
        &self,
        requester: &str,
        roles: &[String],
        limit: i64,
    ) -> Result<Vec<StoredRequest>, StoreError> {
        // The roles as one comma-separated parameter, matched exactly:
        // no SQL is built from caller text.
        let joined = roles.join(",");
        let db = self.db();
        let sql = match db {
            Db::Sqlite(_) => format!(
                "SELECT {COLUMNS} FROM access_requests WHERE requester = $1 \
                 OR instr(',' || $2 || ',', ',' || role || ',') > 0 \
                 ORDER BY created_ms DESC, id LIMIT $3"
            ),
            Db::Pg(_) => format!(
                "SELECT {COLUMNS} FROM access_requests WHERE requester = $1 \
                 OR role = ANY(string_to_array($2, ',')) \
                 ORDER BY created_ms DESC, id LIMIT $3"
            ),
        };
        let mut found = on_db!(db, pool => {
            sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
                .bind(requester)
                .bind(&joined)
                .bind(limit)
                .fetch_all(pool)
                .await?
                .iter()
                .map(request_of)
                .collect::<Result<Vec<_>, sqlx::Error>>()?
        });
        for stored in &mut found {
            stored.reviews = self.reviews_of(&stored.request.id).await?;
        }
        Ok(found)
    }

    /// Records `reviewer`'s verdict on a pending request. A denial denies
    /// it; an approval approves it once `approvals_needed` distinct
    /// reviewers have approved, its grant lasting `duration_ms` from then.
    /// Whether `reviewer` may review at all is the caller's decision.
    pub async fn review(
        &self,
        id: &str,
        reviewer: &str,
        verdict: Verdict,
        comment: Option<&str>,
    ) -> Result<StoredRequest, StoreError> {
        let db = self.db();
        // Takes the row (Pg: its lock; SQLite: the write lock of BEGIN
        // IMMEDIATE) while still pending, so concurrent reviews count in turn.
        let hold = "UPDATE access_requests SET state = state WHERE id = $1 AND state = 'pending' RETURNING state";
        let insert = with_now(
            db,
            "INSERT INTO access_reviews (request_id, reviewer, verdict, comment, at_ms) \
             VALUES ($1, $2, $3, $4, NOW_MS) ON CONFLICT (request_id, reviewer) DO NOTHING",
        );
        let decide = with_now(
            db,
            "UPDATE access_requests SET \
               state = CASE WHEN $2 = 'deny' THEN 'denied' ELSE 'approved' END, \
               decided_ms = NOW_MS, \
               expires_ms = CASE WHEN $2 = 'deny' THEN NULL ELSE NOW_MS + duration_ms END \
             WHERE id = $1 AND state = 'pending' AND ($2 = 'deny' OR \
               (SELECT COUNT(*) FROM access_reviews WHERE request_id = $1 AND verdict = 'approve') \
                 >= approvals_needed)",
        );
        macro_rules! review {
            ($tx:expr) => {{
                let mut tx = $tx;
                let held = sqlx::query(sqlx::AssertSqlSafe(hold))
                    .bind(id)
                    .fetch_optional(&mut *tx)
                    .await?;
                if held.is_none() {
                    drop(tx);
                    let current = self.request(id).await?;
                    return Err(StoreError::NotPending(current.state));
                }
                let added = sqlx::query(sqlx::AssertSqlSafe(insert.as_str()))
                    .bind(id)
                    .bind(reviewer)
                    .bind(verdict.as_str())
                    .bind(comment)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if added == 0 {
                    return Err(StoreError::AlreadyReviewed);
                }
                sqlx::query(sqlx::AssertSqlSafe(decide.as_str()))
                    .bind(id)
                    .bind(verdict.as_str())
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
            }};
        }
        match db {
            Db::Sqlite(pool) => review!(pool.begin_with("BEGIN IMMEDIATE").await?),
            Db::Pg(pool) => review!(pool.begin().await?),
        }
        self.request(id).await
    }

    /// Ends a pending or approved request now; `by` is who revoked it.
    pub async fn revoke(&self, id: &str, by: &str) -> Result<StoredRequest, StoreError> {
        let db = self.db();
        let sql = with_now(
            db,
            "UPDATE access_requests SET state = 'revoked', ended_by = $2, \
               expires_ms = CASE WHEN expires_ms IS NULL OR expires_ms > NOW_MS THEN NOW_MS ELSE expires_ms END \
             WHERE id = $1 AND (state = 'pending' OR (state = 'approved' AND \
               (expires_ms IS NULL OR expires_ms > NOW_MS)))",
        );
        let changed = on_db!(db, pool => sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
            .bind(id)
            .bind(by)
            .execute(pool)
            .await?
            .rows_affected());
        let current = self.request(id).await?;
        if changed == 0 {
            return Err(StoreError::NotPending(current.state));
        }
        Ok(current)
    }

    /// Marks approved requests whose grant has ended, and pending ones
    /// older than `pending_for_ms`, expired; returns them (each once,
    /// whichever replica asks first).
    pub async fn expire_due(&self, pending_for_ms: i64) -> Result<Vec<StoredRequest>, StoreError> {
        let db = self.db();
        let sql = with_now(
            db,
            &format!(
                "UPDATE access_requests SET state = 'expired' \
                 WHERE (state = 'approved' AND expires_ms <= NOW_MS) \
                    OR (state = 'pending' AND created_ms + $1 <= NOW_MS) \
                 RETURNING {COLUMNS}"
            ),
        );
        Ok(
            on_db!(db, pool => sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
            .bind(pending_for_ms)
            .fetch_all(pool)
            .await?
            .iter()
            .map(request_of)
            .collect::<Result<Vec<_>, sqlx::Error>>()?),
        )
    }

    /// The role requests of `requester` that were approved and have not
    /// ended, or ended (expired or revoked) within the last
    /// `ended_within_ms`, by the store's clock (whether or not
    /// `expire_due` has run), each with the milliseconds it has left by
    /// that clock: 0 or less for one that ended.
    pub async fn grants(
        &self,
        requester: &str,
        ended_within_ms: i64,
    ) -> Result<Vec<(StoredRequest, i64)>, StoreError> {
        let db = self.db();
        // decided_ms: approved once (a pending request that expired or
        // was revoked never granted anything).
        let sql = with_now(
            db,
            &format!(
                "SELECT {COLUMNS}, expires_ms - NOW_MS AS remaining_ms FROM access_requests \
                 WHERE requester = $1 AND kind = 'role' AND decided_ms IS NOT NULL \
                 AND state IN ('approved', 'expired', 'revoked') \
                 AND expires_ms > NOW_MS - $2 ORDER BY id"
            ),
        );
        Ok(
            on_db!(db, pool => sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
            .bind(requester)
            .bind(ended_within_ms)
            .fetch_all(pool)
            .await?
            .iter()
            .map(|row| Ok((request_of(row)?, row.int("remaining_ms")?)))
            .collect::<Result<Vec<_>, sqlx::Error>>()?),
        )
    }

    /// The newest item request of `requester` for exactly `item` that is
    /// still open: pending, or approved, unused and not yet ended.
    pub async fn open_item_request(
        &self,
        requester: &str,
        item: &str,
    ) -> Result<Option<StoredRequest>, StoreError> {
        let db = self.db();
        let sql = with_now(
            db,
            &format!(
                "SELECT {COLUMNS} FROM access_requests WHERE requester = $1 AND item = $2 \
                 AND kind = 'item' AND (state = 'pending' OR (state = 'approved' \
                   AND used_ms IS NULL AND expires_ms > NOW_MS)) \
                 ORDER BY created_ms DESC, id LIMIT 1"
            ),
        );
        Ok(
            on_db!(db, pool => sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
            .bind(requester)
            .bind(item)
            .fetch_optional(pool)
            .await?
            .map(|row| request_of(&row))
            .transpose()?),
        )
    }

    /// Uses an approved item request once: only by its requester, only
    /// for exactly `item`, only before it expires, only the first time.
    /// `Ok(None)`: no such use is allowed (nothing changed).
    pub async fn use_item(
        &self,
        id: &str,
        requester: &str,
        item: &str,
    ) -> Result<Option<StoredRequest>, StoreError> {
        let db = self.db();
        let sql = with_now(
            db,
            &format!(
                "UPDATE access_requests SET used_ms = NOW_MS \
                 WHERE id = $1 AND requester = $2 AND item = $3 AND kind = 'item' \
                   AND state = 'approved' AND used_ms IS NULL AND expires_ms > NOW_MS \
                 RETURNING {COLUMNS}"
            ),
        );
        Ok(
            on_db!(db, pool => sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
            .bind(id)
            .bind(requester)
            .bind(item)
            .fetch_optional(pool)
            .await?
            .map(|row| request_of(&row))
            .transpose()?),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role_request(id: &str, requester: &str, approvals: i64) -> NewRequest {
        NewRequest {
            id: id.into(),
            kind: RequestKind::Role,
            requester: requester.into(),
            requester_name: Some(requester.to_string()),
            role: "ops".into(),
            targets: Some("orders-*".into()),
            reason: Some("INC-1234'; DROP TABLE access_requests; --".into()),
            item: None,
            duration_ms: 30 * 60 * 1000,
            approvals_needed: approvals,
        }
    }

    #[tokio::test]
    async fn a_request_is_approved_by_enough_distinct_reviewers_and_then_granted() {
        let store = Store::in_memory().await.unwrap();
        let created = store
            .create_request(&role_request("r1", "dev", 2), 5)
            .await
            .unwrap();
        assert_eq!(created.state, RequestState::Pending);
        assert_eq!(
            created.request.reason.as_deref(),
            Some("INC-1234'; DROP TABLE access_requests; --"),
            "text is stored as given, never run"
        );
        let once = store
            .review("r1", "lead-a", Verdict::Approve, Some("ok"))
            .await
            .unwrap();
        assert_eq!(once.state, RequestState::Pending);
        assert_eq!(
            store.review("r1", "lead-a", Verdict::Approve, None).await,
            Err(StoreError::AlreadyReviewed)
        );
        let twice = store
            .review("r1", "lead-b", Verdict::Approve, None)
            .await
            .unwrap();
        assert_eq!(twice.state, RequestState::Approved);
        assert_eq!(twice.reviews.len(), 2);
        let now = store.now_ms().await.unwrap();
        let expires = twice.expires_ms.unwrap();
        assert!(
            expires > now && expires <= now + 30 * 60 * 1000,
            "{expires} vs {now}"
        );
        let grants = store.grants("dev", 0).await.unwrap();
        assert_eq!(grants.len(), 1);
        let left = grants[0].1;
        assert!(
            left > 29 * 60 * 1000 && left <= 30 * 60 * 1000,
            "the grant has its 30 minutes left by the store's clock: {left}"
        );
        assert!(store.grants("lead-a", 0).await.unwrap().is_empty());
        // Decided: no more reviews.
        assert_eq!(
            store.review("r1", "lead-c", Verdict::Deny, None).await,
            Err(StoreError::NotPending(RequestState::Approved))
        );
    }

    #[tokio::test]
    async fn a_denial_ends_a_request_and_a_revocation_ends_a_grant_at_once() {
        let store = Store::in_memory().await.unwrap();
        store
            .create_request(&role_request("d", "dev", 1), 5)
            .await
            .unwrap();
        let denied = store
            .review("d", "lead", Verdict::Deny, Some("no"))
            .await
            .unwrap();
        assert_eq!(denied.state, RequestState::Denied);
        assert!(store.grants("dev", 0).await.unwrap().is_empty());

        store
            .create_request(&role_request("g", "dev", 1), 5)
            .await
            .unwrap();
        store
            .review("g", "lead", Verdict::Approve, None)
            .await
            .unwrap();
        assert_eq!(store.grants("dev", 0).await.unwrap().len(), 1);
        let revoked = store.revoke("g", "lead").await.unwrap();
        assert_eq!(revoked.state, RequestState::Revoked);
        assert_eq!(revoked.ended_by.as_deref(), Some("lead"));
        assert!(store.grants("dev", 0).await.unwrap().is_empty());
        // Remembered as ended for a while (a refusal says so), and a
        // request revoked before anyone approved it granted nothing.
        store
            .create_request(&role_request("p", "dev", 1), 5)
            .await
            .unwrap();
        store.revoke("p", "dev").await.unwrap();
        let ended = store.grants("dev", 60_000).await.unwrap();
        assert_eq!(ended.len(), 1, "{ended:?}");
        assert_eq!(ended[0].0.request.id, "g");
        assert_eq!(ended[0].0.state, RequestState::Revoked);
        assert!(ended[0].1 <= 0, "{ended:?}");
        assert_eq!(
            store.revoke("g", "lead").await,
            Err(StoreError::NotPending(RequestState::Revoked))
        );
        assert_eq!(
            store.revoke("nope", "lead").await,
            Err(StoreError::NotFound)
        );
    }

    #[tokio::test]
    async fn pending_requests_per_requester_are_bounded() {
        let store = Store::in_memory().await.unwrap();
        for i in 0..3 {
            store
                .create_request(&role_request(&format!("p{i}"), "dev", 1), 3)
                .await
                .unwrap();
        }
        assert_eq!(
            store.create_request(&role_request("p3", "dev", 1), 3).await,
            Err(StoreError::TooManyPending(3))
        );
        // Others are not affected; a decided request frees a place.
        store
            .create_request(&role_request("q0", "other", 1), 3)
            .await
            .unwrap();
        store
            .review("p0", "lead", Verdict::Deny, None)
            .await
            .unwrap();
        store
            .create_request(&role_request("p3", "dev", 1), 3)
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn grants_end_by_the_stores_clock_and_expiry_is_reported_once() {
        let store = Store::in_memory().await.unwrap();
        let mut short = role_request("s", "dev", 1);
        short.duration_ms = 0;
        store.create_request(&short, 5).await.unwrap();
        store
            .review("s", "lead", Verdict::Approve, None)
            .await
            .unwrap();
        // Ended the moment it was granted: not active, whether or not
        // anyone marked it expired yet.
        assert!(store.grants("dev", 0).await.unwrap().is_empty());
        let expired = store.expire_due(i64::MAX / 2).await.unwrap();
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].state, RequestState::Expired);
        assert!(store.expire_due(i64::MAX / 2).await.unwrap().is_empty());
        // A pending request past its wait expires too.
        store
            .create_request(&role_request("w", "dev", 1), 5)
            .await
            .unwrap();
        let expired = store.expire_due(0).await.unwrap();
        assert_eq!(
            expired
                .iter()
                .map(|r| r.request.id.as_str())
                .collect::<Vec<_>>(),
            ["w"]
        );
    }

    #[tokio::test]
    async fn an_approved_item_runs_once_exactly_as_approved_by_its_requester() {
        let store = Store::in_memory().await.unwrap();
        let item = NewRequest {
            kind: RequestKind::Item,
            item: Some(
                r#"{"type":"exec","mbean":"java.lang:type=Memory","operation":"gc"}"#.into(),
            ),
            ..role_request("i", "dev", 1)
        };
        store.create_request(&item, 5).await.unwrap();
        let exact = item.item.as_deref().unwrap();
        // Not yet approved: no use.
        assert_eq!(store.use_item("i", "dev", exact).await, Ok(None));
        store
            .review("i", "lead", Verdict::Approve, None)
            .await
            .unwrap();
        assert_eq!(store.use_item("i", "other", exact).await, Ok(None));
        assert_eq!(store.use_item("i", "dev", "something else").await, Ok(None));
        let used = store.use_item("i", "dev", exact).await.unwrap().unwrap();
        assert!(used.used_ms.is_some());
        assert_eq!(
            store.use_item("i", "dev", exact).await,
            Ok(None),
            "only once"
        );
        // An item approval is no role grant.
        assert!(store.grants("dev", 0).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_reviewer_sees_the_requests_for_their_roles_and_a_requester_their_own() {
        let store = Store::in_memory().await.unwrap();
        store
            .create_request(&role_request("a", "dev", 1), 5)
            .await
            .unwrap();
        let mut other_role = role_request("b", "dev2", 1);
        other_role.role = "dba".into();
        store.create_request(&other_role, 5).await.unwrap();
        let ids = |v: Vec<StoredRequest>| v.into_iter().map(|r| r.request.id).collect::<Vec<_>>();
        assert_eq!(
            ids(store.requests_for("dev", &[], 100).await.unwrap()),
            ["a"]
        );
        assert_eq!(
            ids(store
                .requests_for("lead", &["ops".into()], 100)
                .await
                .unwrap()),
            ["a"]
        );
        assert_eq!(
            ids(store
                .requests_for("lead", &["dba".into(), "ops".into()], 100)
                .await
                .unwrap())
            .len(),
            2
        );
        // A role name isn't a pattern.
        assert!(store
            .requests_for("x", &["%".into()], 100)
            .await
            .unwrap()
            .is_empty());
        assert!(store
            .requests_for("x", &["op".into()], 100)
            .await
            .unwrap()
            .is_empty());
    }
}
