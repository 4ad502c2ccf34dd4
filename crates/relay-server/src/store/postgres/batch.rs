//! PostgreSQL's side of group commit (see `store::batch`): a batch of legs is one statement, one
//! round trip.
//!
//! A user may have several legs in one batch, and PostgreSQL updates a row once per statement, so
//! the statement counts each user's legs, locks the users' rows in id order (two instances'
//! batches cannot deadlock), reads how many units are left from the locked row — under READ
//! COMMITTED the newest committed one — and takes `min(legs, left)` in the same statement. The
//! lock is held until the update, so no other instance can take those units in between: the quota
//! stays exact across instances as with one conditional `UPDATE` per leg.

use sqlx::Row;
use sqlx::postgres::PgPool;

use crate::store::batch::{Batcher, LegWrites, admissions};
use crate::store::{Admission, StoreResult};

/// A lone leg: the plain conditional update, as before batching.
const ADMIT_ONE: &str = "UPDATE users SET used = used + 1
     WHERE id = $1 AND (role = 'admin' OR quota_limit < 0 OR used < quota_limit)";

/// Several legs: how many units each user got (users with none are left out).
const ADMIT_MANY: &str = "WITH wanted AS (
         SELECT id, count(*) AS legs FROM unnest($1::text[]) AS t(id) GROUP BY id
     ), granted AS MATERIALIZED (
         SELECT u.id,
                CASE WHEN u.role = 'admin' OR u.quota_limit < 0 THEN w.legs
                     ELSE LEAST(w.legs, GREATEST(u.quota_limit - u.used, 0)) END AS units
         FROM users u JOIN wanted w ON w.id = u.id
         ORDER BY u.id
         FOR UPDATE OF u
     )
     UPDATE users u SET used = u.used + g.units
     FROM granted g WHERE u.id = g.id AND g.units > 0
     RETURNING u.id, g.units";

/// Gives units back, never below zero; rows locked in id order as above.
const REFUND_MANY: &str = "WITH wanted AS (
         SELECT id, count(*) AS legs FROM unnest($1::text[]) AS t(id) GROUP BY id
     ), locked AS MATERIALIZED (
         SELECT u.id, w.legs FROM users u JOIN wanted w ON w.id = u.id
         ORDER BY u.id
         FOR UPDATE OF u
     )
     UPDATE users u SET used = GREATEST(u.used - l.legs, 0)
     FROM locked l WHERE u.id = l.id AND u.used > 0";

async fn admit(pool: &PgPool, ids: Vec<String>) -> StoreResult<Vec<Admission>> {
    if let [id] = ids.as_slice() {
        let done = sqlx::query(ADMIT_ONE).bind(id).execute(pool).await?;
        return Ok(vec![if done.rows_affected() == 1 {
            Admission::Admitted
        } else {
            Admission::QuotaExceeded
        }]);
    }
    let rows = sqlx::query(ADMIT_MANY).bind(&ids).fetch_all(pool).await?;
    let granted = rows
        .iter()
        .map(|r| Ok((r.try_get::<String, _>("id")?, r.try_get::<i64, _>("units")?)))
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(admissions(&ids, granted))
}

async fn refund(pool: &PgPool, ids: Vec<String>) -> StoreResult<Vec<()>> {
    sqlx::query(REFUND_MANY).bind(&ids).execute(pool).await?;
    Ok(vec![(); ids.len()])
}

/// Starts the batch tasks of one PostgreSQL pool.
pub(super) fn leg_writes(pool: &PgPool) -> LegWrites {
    let (p1, p2, p3) = (pool.clone(), pool.clone(), pool.clone());
    LegWrites {
        admit: Batcher::spawn_direct(move |ids| {
            let pool = p1.clone();
            async move { admit(&pool, ids).await }
        }),
        refund: Batcher::spawn_direct(move |ids| {
            let pool = p2.clone();
            async move { refund(&pool, ids).await }
        }),
        open_leg: Batcher::spawn(move |legs: Vec<()>| {
            let pool = p3.clone();
            async move {
                sqlx::query("UPDATE open_usage SET used = used + $1 WHERE id = 1")
                    .bind(i64::try_from(legs.len()).unwrap_or(i64::MAX))
                    .execute(&pool)
                    .await?;
                Ok(legs)
            }
        }),
    }
}
