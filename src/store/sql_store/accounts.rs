//! Users, sessions and the audit log.

use sqlx::{Database, Encode, Executor, IntoArguments, Type};

use super::{Backend, SqlStore};
use crate::domain::users::Role;
use crate::store::sql::ReadRow;
use crate::store::table::from_row;
use crate::store::*;

const USER_COLUMNS: &str = "id, name, role, clients, password_hash, disabled, created_at, updated_at";

const INSERT_USER: &str = "INSERT INTO users (name, role, clients, password_hash, disabled, created_at, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id";

const UPDATE_USER: &str = "UPDATE users SET role = $1, clients = $2, password_hash = $3, disabled = $4, \
     updated_at = $5 WHERE id = $6";

const DELETE_USER_SESSIONS: &str = "DELETE FROM sessions WHERE user_id = $1";

const INSERT_SESSION: &str = "INSERT INTO sessions (token_hash, user_id, csrf, created_at, last_seen, address) \
     VALUES ($1, $2, $3, $4, $5, $6)";

const SELECT_SESSION: &str = "SELECT token_hash, user_id, csrf, created_at, last_seen, address \
     FROM sessions WHERE token_hash = $1";

pub(super) const INSERT_AUDIT: &str =
    "INSERT INTO audit_log (at, username, address, action, detail) VALUES ($1, $2, $3, $4, $5)";

from_row!(Session { token_hash, user_id, csrf, created_at, last_seen, address });

from_row!(AuditEntry { id, at, username, address, action, detail, count });
from_row!(LoginFailures { window_start, username, address, failures, last_at });

fn user(row: &impl ReadRow) -> Result<User, sqlx::Error> {
    let invalid = |what: String| sqlx::Error::Decode(what.into());
    let clients = row.text("clients")?;
    Ok(User {
        id: row.int("id")?,
        name: row.text("name")?,
        role: row.text("role")?.parse::<Role>().map_err(invalid)?,
        clients: serde_json::from_str(&clients)
            .map_err(|e| invalid(format!("a user's clients {clients:?}: {e}")))?,
        password_hash: row.text("password_hash")?,
        disabled: row.int("disabled")? != 0,
        created_at: row.int("created_at")?,
        updated_at: row.int("updated_at")?,
    })
}

fn clients_json(user: &User) -> String {
    serde_json::Value::from(user.clients.clone()).to_string()
}

#[async_trait::async_trait]
impl<B: Backend> AccountStore for SqlStore<B>
where
    <B::Db as Database>::Row: ReadRow,
    for<'c> &'c mut <B::Db as Database>::Connection: Executor<'c, Database = B::Db>,
    for<'q> <B::Db as Database>::Arguments<'q>: IntoArguments<'q, B::Db> + Default,
    for<'q> i64: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> Option<i64>: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> f64: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> String: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> &'q str: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> &'q [u8]: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> Option<&'q str>: Encode<'q, B::Db> + Type<B::Db>,
{
    async fn create_user(&self, user: &User) -> StoreResult<i64> {
        const CONTEXT: &str = "adding a user";
        crate::domain::users::check_new_user_name(&user.name, &self.users().await?)
            .map_err(StoreError::Invalid)?;
        let row = sqlx::query(INSERT_USER)
            .bind(user.name.as_str())
            .bind(user.role.as_str())
            .bind(clients_json(user))
            .bind(user.password_hash.as_str())
            .bind(i64::from(user.disabled))
            .bind(user.created_at)
            .bind(user.updated_at)
            .fetch_one(&self.pool)
            .await
            .context(CONTEXT)?;
        row.int("id").context(CONTEXT)
    }

    async fn users(&self) -> StoreResult<Vec<User>> {
        const CONTEXT: &str = "listing users";
        let query = format!("SELECT {USER_COLUMNS} FROM users ORDER BY name");
        let rows = sqlx::query(&query).fetch_all(&self.pool).await.context(CONTEXT)?;
        rows.iter().map(user).collect::<Result<_, _>>().context(CONTEXT)
    }

    async fn user(&self, name: &str) -> StoreResult<Option<User>> {
        const CONTEXT: &str = "reading a user";
        let query = format!("SELECT {USER_COLUMNS} FROM users WHERE name = $1");
        let row = sqlx::query(&query).bind(name).fetch_optional(&self.pool).await.context(CONTEXT)?;
        row.as_ref().map(user).transpose().context(CONTEXT)
    }

    async fn update_user(&self, user: &User, end_sessions: bool) -> StoreResult<()> {
        const CONTEXT: &str = "changing a user";
        let mut tx = self.pool.begin_with(B::WRITE_BEGIN).await.context(CONTEXT)?;
        sqlx::query(UPDATE_USER)
            .bind(user.role.as_str())
            .bind(clients_json(user))
            .bind(user.password_hash.as_str())
            .bind(i64::from(user.disabled))
            .bind(user.updated_at)
            .bind(user.id)
            .execute(&mut *tx)
            .await
            .context(CONTEXT)?;
        if end_sessions {
            sqlx::query(DELETE_USER_SESSIONS).bind(user.id).execute(&mut *tx).await.context(CONTEXT)?;
        }
        tx.commit().await.context(CONTEXT)
    }

    async fn create_session(&self, session: &Session) -> StoreResult<()> {
        sqlx::query(INSERT_SESSION)
            .bind(session.token_hash.as_str())
            .bind(session.user_id)
            .bind(session.csrf.as_str())
            .bind(session.created_at)
            .bind(session.last_seen)
            .bind(session.address.as_str())
            .execute(&self.pool)
            .await
            .context("starting a session")
            .map(|_| ())
    }

    async fn session(&self, token_hash: &str) -> StoreResult<Option<(Session, User)>> {
        const CONTEXT: &str = "reading a session";
        let mut conn = self.pool.acquire().await.context(CONTEXT)?;
        let Some(row) =
            sqlx::query(SELECT_SESSION).bind(token_hash).fetch_optional(&mut *conn).await.context(CONTEXT)?
        else {
            return Ok(None);
        };
        let session = <Session as crate::store::table::FromRow>::from_row(&row).context(CONTEXT)?;
        let query = format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1");
        let found =
            sqlx::query(&query).bind(session.user_id).fetch_optional(&mut *conn).await.context(CONTEXT)?;
        let found = found.as_ref().map(user).transpose().context(CONTEXT)?;
        Ok(found.map(|user| (session, user)))
    }

    async fn touch_session(&self, token_hash: &str, now: i64) -> StoreResult<()> {
        sqlx::query("UPDATE sessions SET last_seen = $1 WHERE token_hash = $2")
            .bind(now)
            .bind(token_hash)
            .execute(&self.pool)
            .await
            .context("marking a session used")
            .map(|_| ())
    }

    async fn delete_session(&self, token_hash: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM sessions WHERE token_hash = $1")
            .bind(token_hash)
            .execute(&self.pool)
            .await
            .context("ending a session")
            .map(|_| ())
    }

    async fn delete_expired_sessions(&self, idle_before: i64, created_before: i64) -> StoreResult<u64> {
        let result = sqlx::query("DELETE FROM sessions WHERE last_seen < $1 OR created_at < $2")
            .bind(idle_before)
            .bind(created_before)
            .execute(&self.pool)
            .await
            .context("deleting expired sessions")?;
        Ok(B::rows_affected(&result))
    }

    async fn audit(&self, entry: &AuditEntry) -> StoreResult<()> {
        sqlx::query(INSERT_AUDIT)
            .bind(entry.at)
            .bind(entry.username.as_str())
            .bind(entry.address.as_str())
            .bind(entry.action.as_str())
            .bind(entry.detail.as_str())
            .execute(&self.pool)
            .await
            .context("writing the audit log")
            .map(|_| ())
    }

    async fn add_sign_in_code(&self, username: &str, code_hash: &str, expires_at: i64) -> StoreResult<()> {
        sqlx::query("INSERT INTO sign_in_codes (code_hash, username, expires_at) VALUES ($1, $2, $3)")
            .bind(code_hash)
            .bind(username)
            .bind(expires_at)
            .execute(&self.pool)
            .await
            .context("storing a sign-in code")
            .map(|_| ())
    }

    async fn take_sign_in_code(&self, username: &str, code_hash: &str, now: i64) -> StoreResult<bool> {
        let taken = sqlx::query(
            "DELETE FROM sign_in_codes WHERE code_hash = $1 AND username = $2 AND expires_at > $3",
        )
        .bind(code_hash)
        .bind(username)
        .bind(now)
        .execute(&self.pool)
        .await
        .context("using a sign-in code")?;
        Ok(B::rows_affected(&taken) == 1)
    }

    async fn audit_download(&self, username: &str, page: &str, at: i64) -> StoreResult<()> {
        const CONTEXT: &str = "counting a download in the audit log";
        let hour = at - at.rem_euclid(3600);
        let counted = sqlx::query(
            "UPDATE audit_log SET count = count + 1 WHERE id = (SELECT id FROM audit_log \
             WHERE username = $1 AND action = 'download' AND at >= $2 AND detail = $3 ORDER BY id DESC LIMIT 1)",
        )
        .bind(username)
        .bind(hour)
        .bind(page)
        .execute(&self.pool)
        .await
        .context(CONTEXT)?;
        if B::rows_affected(&counted) == 0 {
            self.audit(&AuditEntry { at, ..AuditEntry::new(username, "", "download", page) }).await?;
        }
        Ok(())
    }

    async fn audit_log(&self, query: &AuditQuery) -> StoreResult<Vec<AuditEntry>> {
        let sql = sqlx::query(
            "SELECT id, at, username, address, action, detail, count FROM audit_log \
             WHERE ($1 = '' OR username = $1) AND ($2 = '' OR action = $2) ORDER BY id DESC LIMIT $3 OFFSET $4",
        )
        .bind(query.username.as_str())
        .bind(query.action.as_str())
        .bind(query.limit)
        .bind(query.offset);
        self.rows(sql, "reading the audit log").await
    }

    async fn count_audit(
        &self,
        action: &str,
        since: i64,
        username: Option<&str>,
        address: Option<&str>,
    ) -> StoreResult<i64> {
        let row = sqlx::query(
            "SELECT CAST(COALESCE(SUM(count), 0) AS BIGINT) AS n FROM audit_log WHERE action = $1 AND at >= $2 \
             AND ($3 = '' OR username = $3) AND ($4 = '' OR address = $4)",
        )
        .bind(action)
        .bind(since)
        .bind(username.unwrap_or(""))
        .bind(address.unwrap_or(""))
        .fetch_one(&self.pool)
        .await
        .context("counting audit entries")?;
        row.int("n").context("counting audit entries")
    }

    async fn web_secret(&self, name: &str) -> StoreResult<Option<String>> {
        const CONTEXT: &str = "reading a dashboard secret";
        let row = sqlx::query("SELECT value FROM web_secrets WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.pool)
            .await
            .context(CONTEXT)?;
        row.map(|row| row.text("value")).transpose().context(CONTEXT)
    }

    async fn take_login_attempt(
        &self,
        scope: &str,
        subject: &str,
        now: i64,
        window: i64,
    ) -> StoreResult<(i64, i64)> {
        const CONTEXT: &str = "counting a sign-in attempt";
        // Both backends evaluate every SET expression on the row as it was.
        let row = sqlx::query(
            "INSERT INTO login_attempts (scope, subject, window_start, attempts) VALUES ($1, $2, $3, 1) \
             ON CONFLICT (scope, subject) DO UPDATE SET \
               attempts = CASE WHEN login_attempts.window_start > $4 THEN login_attempts.attempts + 1 ELSE 1 END, \
               window_start = CASE WHEN login_attempts.window_start > $4 THEN login_attempts.window_start ELSE $3 END \
             RETURNING attempts, window_start",
        )
        .bind(scope)
        .bind(subject)
        .bind(now)
        .bind(now - window)
        .fetch_one(&self.pool)
        .await
        .context(CONTEXT)?;
        // Windows that ended are of no use: one row a subject, and only while it counts.
        sqlx::query("DELETE FROM login_attempts WHERE window_start <= $1")
            .bind(now - window)
            .execute(&self.pool)
            .await
            .context(CONTEXT)?;
        Ok((row.int("attempts").context(CONTEXT)?, row.int("window_start").context(CONTEXT)?))
    }

    async fn return_login_attempt(&self, scope: &str, subject: &str, window_start: i64) -> StoreResult<()> {
        sqlx::query(
            "UPDATE login_attempts SET attempts = attempts - 1 \
             WHERE scope = $1 AND subject = $2 AND window_start = $3 AND attempts > 0",
        )
        .bind(scope)
        .bind(subject)
        .bind(window_start)
        .execute(&self.pool)
        .await
        .context("giving back a sign-in attempt")
        .map(|_| ())
    }

    async fn record_login_failure(
        &self,
        username: &str,
        address: &str,
        window_start: i64,
        at: i64,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO login_failures (window_start, username, address, failures, last_at) \
             VALUES ($1, $2, $3, 1, $4) \
             ON CONFLICT (window_start, username, address) DO UPDATE SET \
               failures = login_failures.failures + 1, last_at = excluded.last_at",
        )
        .bind(window_start)
        .bind(username)
        .bind(address)
        .bind(at)
        .execute(&self.pool)
        .await
        .context("counting a refused sign-in")
        .map(|_| ())
    }

    async fn login_failures(&self, since: i64, limit: i64) -> StoreResult<Vec<LoginFailures>> {
        let query = sqlx::query(
            "SELECT window_start, username, address, failures, last_at FROM login_failures \
             WHERE window_start >= $1 ORDER BY window_start DESC, last_at DESC LIMIT $2",
        )
        .bind(since)
        .bind(limit);
        self.rows(query, "reading refused sign-ins").await
    }
}
