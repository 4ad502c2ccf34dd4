//! PostgreSQL's side of group commit (see `store::batch`): a batch of legs is one statement, one
//! round trip.
//!
//! A user may have several legs in one batch, and PostgreSQL updates a row once per statement, so
//! the statement counts each user's legs, locks the users' rows in id order (two instances'
//! batches cannot deadlock), reads how many units are left from the locked row — under READ
//! COMMITTED the newest committed one — and takes `min(legs, left)` in the same statement. The
//! lock is held until the update, so no other instance can take those units in between: the quota
//! stays exact across instances as with one conditional `UPDATE` per leg.

use std::sync::Arc;

use futures::FutureExt;
use sqlx::Row;

use super::held::Held;
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

async fn admit(held: &Held, ids: Vec<String>) -> StoreResult<Vec<Admission>> {
    if let [id] = ids.as_slice() {
        let done = held
            .run(|conn| {
                let id = id.clone();
                async move { sqlx::query(ADMIT_ONE).bind(id).execute(conn).await }.boxed()
            })
            .await?;
        return Ok(vec![if done.rows_affected() == 1 {
            Admission::Admitted
        } else {
            Admission::QuotaExceeded
        }]);
    }
    let rows = held
        .run(|conn| {
            let ids = ids.clone();
            async move { sqlx::query(ADMIT_MANY).bind(ids).fetch_all(conn).await }.boxed()
        })
        .await?;
    let granted = rows
        .iter()
        .map(|r| Ok((r.try_get::<String, _>("id")?, r.try_get::<i64, _>("units")?)))
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(admissions(&ids, granted))
}

async fn refund(held: &Held, ids: Vec<String>) -> StoreResult<Vec<()>> {
    held.run(|conn| {
        let ids = ids.clone();
        async move { sqlx::query(REFUND_MANY).bind(ids).execute(conn).await }.boxed()
    })
    .await?;
    Ok(vec![(); ids.len()])
}

/// Starts the batch tasks of one PostgreSQL store, on its held connections.
pub(super) fn leg_writes(held: &Arc<Held>) -> LegWrites {
    let (h1, h2, h3) = (held.clone(), held.clone(), held.clone());
    LegWrites {
        admit: Batcher::spawn_direct(move |ids| {
            let held = h1.clone();
            async move { admit(&held, ids).await }
        }),
        refund: Batcher::spawn_direct(move |ids| {
            let held = h2.clone();
            async move { refund(&held, ids).await }
        }),
        open_leg: Batcher::spawn(move |legs: Vec<()>| {
            let held = h3.clone();
            async move {
                let legs_now = i64::try_from(legs.len()).unwrap_or(i64::MAX);
                held.run(|conn| {
                    sqlx::query("UPDATE open_usage SET used = used + $1 WHERE id = 1")
                        .bind(legs_now)
                        .execute(conn)
                        .boxed()
                })
                .await?;
                Ok(legs)
            }
        }),
    }
}
