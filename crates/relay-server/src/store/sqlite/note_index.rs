//! An in-memory copy of one project's notes, for injection: FTS5's bm25 ranking computed from it.
//!
//! FTS5's `bm25()` reads, per search, the document frequency of every phrase over the whole table,
//! the project's scope phrase included: with 100,000 notes that alone cost about 10 ms a leg and
//! grows with the project. Here each note's stemmed words are kept in memory, so a search touches
//! only the newest `CANDIDATE_WINDOW` matches; the table-wide figures bm25 needs (row count, token
//! total, each term's document frequency) come from the store, cached until the index changes.
//!
//! The arithmetic is FTS5's own (`fts5Bm25Function`, k1 = 1.2, b = 0.75, weights 1.0 for `note`
//! and 0.0 for `scope`), in the same order, so scores are equal to the last bit and the ranking
//! is the same as the SQL path's. Only ASCII text is indexed: its tokens are plain runs of ASCII
//! letters and digits as unicode61 cuts them; a project or question with any other character
//! takes the SQL path.

use std::collections::HashMap;

use crate::store::{InjectBudget, Note, relevance};

/// bm25's constants as FTS5 fixes them.
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// One note and its words.
#[derive(Debug, Clone)]
struct Entry {
    pk: i64,
    seq: i64,
    note: Note,
    /// Tokens of the note column plus the one scope token: FTS5's row size over all columns.
    size: u32,
    /// (stem id, occurrences), sorted by stem id.
    stems: Box<[(u32, u32)]>,
}

/// A note row as read for the index.
#[derive(Debug, Clone)]
pub struct IndexedRow {
    pub pk: i64,
    pub seq: i64,
    pub note: Note,
}

/// Table-wide figures bm25 takes from FTS5: rows, tokens over all columns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TableStats {
    pub rows: i64,
    pub tokens: i64,
}

/// One project's notes, ascending by pk (= FTS5 rowid), with postings per stem.
#[derive(Debug, Clone)]
pub struct ProjectIndex {
    /// The project's write version the index was read at.
    pub version: i64,
    /// The version of the project's last edit or delete when it was read: while that stays, the
    /// index only needs the notes added since.
    pub rewritten: i64,
    entries: Vec<Entry>,
    stem_ids: HashMap<String, u32>,
    /// Per stem id, the entries holding it, ascending.
    postings: Vec<Vec<u32>>,
    /// Whole-project figures for the "fits whole" rule.
    chars: usize,
}

/// The words of ASCII `text` as unicode61 cuts them (runs of ASCII letters and digits), lower-case;
/// `None` when `text` has any non-ASCII character (unicode61 folds and splits those by tables this
/// index does not copy).
pub fn ascii_tokens(text: &str) -> Option<Vec<String>> {
    if !text.is_ascii() {
        return None;
    }
    Some(
        text.split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_ascii_lowercase)
            .collect(),
    )
}

/// Whether FTS5's porter step leaves `word` as it is, without asking it: shorter than 3 or longer
/// than 64 bytes (passed through), or digits only (no rule of the algorithm ends in a digit).
pub fn stem_is_identity(word: &str) -> bool {
    word.len() < 3 || word.len() > 64 || word.bytes().all(|b| b.is_ascii_digit())
}

impl ProjectIndex {
    /// Builds from the project's rows and each of their words' stem (`stem_of` must know every
    /// word `ascii_tokens` gives for them that `stem_is_identity` does not pass); `None` when a
    /// note is not ASCII.
    pub fn build(
        version: i64,
        rewritten: i64,
        rows: Vec<IndexedRow>,
        stem_of: &HashMap<String, String>,
    ) -> Option<Self> {
        let empty = Self {
            version,
            rewritten,
            entries: Vec::new(),
            stem_ids: HashMap::new(),
            postings: Vec::new(),
            chars: 0,
        };
        empty.extended(version, rows, stem_of)
    }

    /// This index with `rows` added: notes written after it was read, every pk above its own.
    pub fn extended(
        mut self,
        version: i64,
        mut rows: Vec<IndexedRow>,
        stem_of: &HashMap<String, String>,
    ) -> Option<Self> {
        rows.sort_by_key(|r| r.pk);
        let last = self.entries.last().map_or(i64::MIN, |e| e.pk);
        if rows.first().is_some_and(|r| r.pk <= last) {
            return None;
        }
        self.version = version;
        self.entries.reserve(rows.len());
        for row in rows {
            let words = ascii_tokens(&row.note.note)?;
            let at = u32::try_from(self.entries.len()).ok()?;
            let mut counts: HashMap<u32, u32> = HashMap::new();
            for w in &words {
                let stem = stem_of.get(w).map_or(w.as_str(), String::as_str);
                let next = u32::try_from(self.stem_ids.len()).ok()?;
                let id = *self.stem_ids.entry(stem.to_owned()).or_insert(next);
                if id == next {
                    self.postings.push(Vec::new());
                }
                *counts.entry(id).or_default() += 1;
            }
            let mut stems: Vec<(u32, u32)> = counts.into_iter().collect();
            stems.sort_unstable();
            for (id, _) in &stems {
                self.postings.get_mut(*id as usize)?.push(at);
            }
            self.chars += row.note.note.chars().count();
            self.entries.push(Entry {
                pk: row.pk,
                seq: row.seq,
                size: u32::try_from(words.len()).ok()?.saturating_add(1),
                stems: stems.into_boxed_slice(),
                note: row.note,
            });
        }
        Some(self)
    }

    /// The highest pk held: notes above it were written after the index was read.
    pub fn last_pk(&self) -> i64 {
        self.entries.last().map_or(0, |e| e.pk)
    }

    pub fn note_count(&self) -> usize {
        self.entries.len()
    }

    /// The whole project, oldest first, when it fits the budget (the rule of `relevance::fits`).
    pub fn whole(&self, budget: InjectBudget) -> Option<Vec<Note>> {
        if !relevance::fits(self.entries.len(), self.chars, budget) {
            return None;
        }
        let mut all: Vec<&Entry> = self.entries.iter().collect();
        all.sort_by(|a, b| {
            a.note
                .created_at
                .total_cmp(&b.note.created_at)
                .then(a.seq.cmp(&b.seq))
        });
        Some(all.into_iter().map(|e| e.note.clone()).collect())
    }

    /// The entries (ascending) that hold `stem`.
    fn holding(&self, stem: &str) -> &[u32] {
        self.stem_ids
            .get(stem)
            .and_then(|id| self.postings.get(*id as usize))
            .map_or(&[], Vec::as_slice)
    }

    /// The notes the SQL path ranks and selects for `stems` (one per query term, in query order,
    /// each with its table-wide document frequency), computed from memory.
    pub fn rank(
        &self,
        stems: &[(String, i64)],
        stats: TableStats,
        budget: InjectBudget,
    ) -> Vec<Note> {
        if stats.rows <= 0 {
            return Vec::new();
        }
        let window = usize::try_from(relevance::CANDIDATE_WINDOW).unwrap_or(usize::MAX);
        // The newest `window` notes holding any term: each term's newest `window` holders cover them.
        let mut candidates: Vec<u32> = Vec::new();
        let lists: Vec<(&[u32], Option<u32>)> = stems
            .iter()
            .map(|(s, _)| (self.holding(s), self.stem_ids.get(s.as_str()).copied()))
            .collect();
        for (list, _) in &lists {
            candidates.extend_from_slice(&list[list.len().saturating_sub(window)..]);
        }
        candidates.sort_unstable_by(|a, b| b.cmp(a));
        candidates.dedup();
        candidates.truncate(window);
        // As fts5Bm25GetData: avgdl from the totals, IDF floored at 1e-6.
        let avgdl = stats.tokens as f64 / stats.rows as f64;
        let idf: Vec<f64> = stems
            .iter()
            .map(|(_, hits)| {
                let idf = ((stats.rows - hits) as f64 + 0.5) / (*hits as f64 + 0.5);
                let idf = idf.ln();
                if idf <= 0.0 { 1e-6 } else { idf }
            })
            .collect();
        let mut scored: Vec<(f64, &Entry)> = Vec::with_capacity(candidates.len());
        for at in candidates {
            let Some(e) = self.entries.get(at as usize) else {
                continue;
            };
            let d = f64::from(e.size);
            // The scope phrase comes first in FTS5's sum; its weight is 0, so it adds +0.0.
            let mut score = 0.0_f64;
            for ((_, id), idf) in lists.iter().zip(&idf) {
                let freq = id
                    .and_then(|id| e.stems.binary_search_by_key(&id, |(s, _)| *s).ok())
                    .and_then(|i| e.stems.get(i))
                    .map_or(0.0, |(_, n)| f64::from(*n));
                score += idf * ((freq * (K1 + 1.0)) / (freq + K1 * (1.0 - B + B * d / avgdl)));
            }
            scored.push((score, e));
        }
        // The SQL path: best `ranked_rows` by score then rowid, then ordered by score, created_at, seq.
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.pk.cmp(&a.1.pk)));
        scored.truncate(usize::try_from(relevance::ranked_rows(budget)).unwrap_or(usize::MAX));
        scored.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then(b.1.note.created_at.total_cmp(&a.1.note.created_at))
                .then(b.1.seq.cmp(&a.1.seq))
        });
        let ranked = scored
            .into_iter()
            .map(|(s, e)| (e.note.clone(), s))
            .collect();
        relevance::select(ranked, budget)
    }
}

/// Reads FTS5's averages record (`notes_fts_data` id 1): a varint row count, then one varint
/// token total per column. `None` when it does not parse.
pub fn decode_averages(block: &[u8]) -> Option<TableStats> {
    let mut at = 0usize;
    let mut values = Vec::new();
    while at < block.len() {
        let (v, used) = varint(block.get(at..)?)?;
        values.push(v);
        at += used;
    }
    let (rows, columns) = values.split_first()?;
    let tokens = columns
        .iter()
        .try_fold(0i64, |acc, v| acc.checked_add(i64::try_from(*v).ok()?))?;
    Some(TableStats {
        rows: i64::try_from(*rows).ok()?,
        tokens,
    })
}

/// SQLite's varint: big-endian 7-bit groups, the ninth byte whole.
fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    for (i, b) in bytes.iter().enumerate().take(9) {
        if i == 8 {
            return Some(((v << 8) | u64::from(*b), 9));
        }
        v = (v << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_ascii_alphanumeric_runs() {
        assert_eq!(
            ascii_tokens("Run `cargo test -p a_b`; 4xx!").unwrap(),
            vec!["run", "cargo", "test", "p", "a", "b", "4xx"]
        );
        assert!(ascii_tokens("café").is_none());
        assert!(stem_is_identity("12345") && stem_is_identity("ab"));
        assert!(!stem_is_identity("tests"));
    }

    #[test]
    fn averages_decode() {
        // 100000 rows, 2016555 and 100000 tokens (read from a real table).
        let block = [0x86, 0x8d, 0x20, 0xfb, 0x8a, 0x2b, 0x86, 0x8d, 0x20];
        assert_eq!(
            decode_averages(&block),
            Some(TableStats {
                rows: 100_000,
                tokens: 2_116_555
            })
        );
        assert_eq!(decode_averages(&[0x80]), None);
    }
}
