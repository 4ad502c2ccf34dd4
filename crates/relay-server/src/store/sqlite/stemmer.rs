//! Porter stems of words exactly as the notes' FTS5 tokenizer makes them: asked of FTS5 itself,
//! through a private in-memory table with the same tokenizer, and remembered.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use sqlx::{Connection, Row, SqliteConnection};

use super::note_index::stem_is_identity;
use crate::store::{StoreError, StoreResult};

/// Stems remembered; past this the memo starts over (a stem is asked again, never wrong).
const MAX_STEMS: usize = 200_000;

/// Words stemmed by one statement.
const STEM_BATCH: usize = 2_000;

#[derive(Default)]
pub struct Stemmer {
    memo: Mutex<HashMap<String, String>>,
    /// A private in-memory database whose FTS5 table stems with `porter unicode61`.
    conn: tokio::sync::Mutex<Option<SqliteConnection>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Stemmer {
    /// The porter stem of each of `words` (single ASCII tokens), as the notes' FTS5 tokenizer
    /// makes it; words it leaves alone may be missing from the answer.
    pub async fn stems_of(&self, words: &[String]) -> StoreResult<HashMap<String, String>> {
        let mut out = HashMap::new();
        let mut ask = Vec::new();
        {
            let memo = lock(&self.memo);
            for w in words {
                match memo.get(w) {
                    Some(s) => {
                        out.insert(w.clone(), s.clone());
                    }
                    None if stem_is_identity(w) => {}
                    None => ask.push(w.clone()),
                }
            }
        }
        if ask.is_empty() {
            return Ok(out);
        }
        let mut guard = self.conn.lock().await;
        if guard.is_none() {
            let mut c = SqliteConnection::connect("sqlite::memory:").await?;
            sqlx::raw_sql(
                "CREATE VIRTUAL TABLE stem USING fts5(w, tokenize = 'porter unicode61');
                 CREATE VIRTUAL TABLE stem_words USING fts5vocab(stem, 'instance');",
            )
            .execute(&mut c)
            .await?;
            *guard = Some(c);
        }
        let Some(conn) = guard.as_mut() else {
            return Err(StoreError::Internal("stemmer not open".into()));
        };
        for batch in ask.chunks(STEM_BATCH) {
            sqlx::query("INSERT INTO stem (w) VALUES (?)")
                .bind(batch.join(" "))
                .execute(&mut *conn)
                .await?;
            let rows = sqlx::query("SELECT term, \"offset\" FROM stem_words")
                .fetch_all(&mut *conn)
                .await?;
            sqlx::query("DELETE FROM stem").execute(&mut *conn).await?;
            if rows.len() != batch.len() {
                return Err(StoreError::Internal(format!(
                    "stemming {} words gave {} tokens",
                    batch.len(),
                    rows.len()
                )));
            }
            for r in rows {
                let term: String = r.try_get("term")?;
                let at: i64 = r.try_get("offset")?;
                let word = usize::try_from(at)
                    .ok()
                    .and_then(|i| batch.get(i))
                    .ok_or_else(|| StoreError::Internal("stem offset out of range".into()))?;
                out.insert(word.clone(), term);
            }
        }
        drop(guard);
        let mut memo = lock(&self.memo);
        if memo.len() + ask.len() > MAX_STEMS {
            memo.clear();
        }
        for w in &ask {
            if let Some(s) = out.get(w) {
                memo.insert(w.clone(), s.clone());
            }
        }
        Ok(out)
    }
}
