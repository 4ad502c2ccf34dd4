//! The lexical ranker both backends inject with: one project's notes in memory, searched with BM25
//! over stemmed words, where a note's entry also carries its neighbours' words at reduced weight,
//! notes holding the question's names are boosted, the best notes' own words are searched for too
//! (pseudo-relevance feedback), and a note takes a share of its neighbours' scores.
//!
//! A note's neighbours are the notes of the same user and project written just before and after
//! it, when within `NEIGHBOUR_SECS` of it: a conversation's turns or an agent's notes of one task,
//! which answer a question together more often than apart ("when did she go?" is answered by the
//! turn before "I went yesterday"). Measured on LoCoMo (BENCHMARKS.md, `relay-bench memory`).
//! Notes written "in the same leg" need no rule of their own: no note is written inside a leg
//! (notes come from `POST /v1/memory/remember` and MCP `remember`, which carry no leg), so the
//! notes of one agent turn are the ones written within the window of each other.
//!
//! Notes are kept in write order (SQLite's rowid, PostgreSQL's per-project `seq`), so both
//! backends hold the same entries for the same notes and rank alike.

pub mod fusion;
pub mod text;

use std::collections::HashMap;

use crate::store::{InjectBudget, Note, relevance};

/// Notes written this close together (seconds) are neighbours.
pub const NEIGHBOUR_SECS: f64 = 300.0;

/// The ranker's weights. `Default` is what Relay injects with; the bench varies them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// BM25's term-frequency saturation and length normalisation.
    pub k1: f64,
    pub b: f64,
    /// The weight of a neighbour's words in a note's entry.
    pub neighbour_words: f64,
    /// A note's score grows by this share of its neighbours' scores.
    pub neighbour_share: f64,
    /// Multiplies a note's score by `1 + entity * (question names it holds / names asked)`.
    pub entity: f64,
    /// Pseudo-relevance feedback: the best `prf_docs` notes' `prf_terms` most telling words are
    /// searched for at `prf_weight` (0 turns it off).
    pub prf_docs: usize,
    pub prf_terms: usize,
    pub prf_weight: f64,
    /// With embeddings: the lexical share of the fused score, the rest the cosine's
    /// (`fusion`).
    pub lexical_weight: f64,
    /// With embeddings: a note's cosine grows by this share of its closest neighbour's.
    pub dense_neighbour_share: f64,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            k1: 0.9,
            b: 0.5,
            neighbour_words: 0.6,
            neighbour_share: 0.1,
            entity: 0.6,
            prf_docs: 3,
            prf_terms: 8,
            prf_weight: 0.2,
            lexical_weight: fusion::LEXICAL_WEIGHT,
            dense_neighbour_share: fusion::DENSE_NEIGHBOUR_SHARE,
        }
    }
}

impl Params {
    /// Plain BM25 over stemmed words: no neighbours, names or feedback.
    pub fn plain() -> Self {
        Self {
            k1: 1.2,
            b: 0.75,
            neighbour_words: 0.0,
            neighbour_share: 0.0,
            entity: 0.0,
            prf_docs: 0,
            prf_terms: 0,
            prf_weight: 0.0,
            lexical_weight: fusion::LEXICAL_WEIGHT,
            dense_neighbour_share: fusion::DENSE_NEIGHBOUR_SHARE,
        }
    }
}

/// One note and its words.
#[derive(Debug, Clone)]
struct Entry {
    note: Note,
    /// Write order: SQLite's rowid, PostgreSQL's seq.
    order: i64,
    seq: i64,
    /// Indexed words (stopwords dropped).
    len: u32,
    /// (term id, occurrences), sorted by term id.
    terms: Box<[(u32, u32)]>,
}

/// A note to index: its write order and per-project sequence number.
#[derive(Debug, Clone)]
pub struct Row {
    pub order: i64,
    pub seq: i64,
    pub note: Note,
}

/// One project's notes, in write order, with postings per stem.
#[derive(Debug, Clone, Default)]
pub struct LexIndex {
    entries: Vec<Entry>,
    term_ids: HashMap<String, u32>,
    /// Per term id, (entry, occurrences), ascending by entry.
    postings: Vec<Vec<(u32, u32)>>,
    chars: usize,
    /// Indexed words over all notes, and over both notes of every neighbouring pair.
    own_words: u64,
    pair_words: u64,
    /// Per entry, its indexed words, and whether the next entry is its neighbour: what a search
    /// reads for every note it touches, kept apart from the entries (each with its note's text)
    /// so that a search over thousands of notes stays in the cache.
    lens: Vec<u32>,
    linked_next: Vec<bool>,
    /// Working arrays of finished searches, reused: allocating and zeroing them per search cost
    /// more than the search at 100,000 notes.
    spare: Spare,
}

/// Reusable `Scratch`es; a clone of the index starts with none.
#[derive(Default)]
struct Spare(std::sync::Mutex<Vec<Scratch>>);

impl Clone for Spare {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl std::fmt::Debug for Spare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Spare")
    }
}

impl Spare {
    fn take(&self, entries: usize) -> Scratch {
        let got = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop();
        match got {
            Some(mut s) if s.scores.len() >= entries => {
                s.clear();
                s
            }
            _ => Scratch::new(entries),
        }
    }

    fn give(&self, mut s: Scratch) {
        s.clear();
        let mut spare = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // As many as searches run at once, at most a few.
        if spare.len() < 4 {
            spare.push(s);
        }
    }
}

impl LexIndex {
    /// An index of `rows` (any order).
    pub fn build(rows: Vec<Row>) -> Option<Self> {
        Self::default().extended(rows)
    }

    /// This index with `rows` added: notes written after every note it holds.
    pub fn extended(mut self, mut rows: Vec<Row>) -> Option<Self> {
        rows.sort_by_key(|r| r.order);
        if rows.first().is_some_and(|r| r.order <= self.last_order()) && !self.entries.is_empty() {
            return None;
        }
        let stemmer = text::stemmer();
        self.entries.reserve(rows.len());
        for row in rows {
            let words = text::index_terms(&stemmer, &row.note.note);
            let at = u32::try_from(self.entries.len()).ok()?;
            let mut counts: HashMap<u32, u32> = HashMap::new();
            for w in words.iter() {
                let next = u32::try_from(self.term_ids.len()).ok()?;
                let id = *self.term_ids.entry(w.clone()).or_insert(next);
                if id == next {
                    self.postings.push(Vec::new());
                }
                *counts.entry(id).or_default() += 1;
            }
            let mut terms: Vec<(u32, u32)> = counts.into_iter().collect();
            terms.sort_unstable();
            for (id, n) in &terms {
                self.postings.get_mut(*id as usize)?.push((at, *n));
            }
            let len = u32::try_from(words.len()).ok()?;
            self.chars += row.note.note.chars().count();
            self.own_words += u64::from(len);
            let entry = Entry {
                note: row.note,
                order: row.order,
                seq: row.seq,
                len,
                terms: terms.into_boxed_slice(),
            };
            if let Some(prev) = self.entries.last()
                && linked(prev, &entry)
            {
                self.pair_words += u64::from(prev.len) + u64::from(len);
                if let Some(last) = self.linked_next.last_mut() {
                    *last = true;
                }
            }
            self.entries.push(entry);
            self.lens.push(len);
            self.linked_next.push(false);
        }
        Some(self)
    }

    /// The write order of the newest note held (`i64::MIN` when empty).
    pub fn last_order(&self) -> i64 {
        self.entries.last().map_or(i64::MIN, |e| e.order)
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

    /// The notes to inject for `query`: the whole project when it fits, else the ranking.
    pub fn inject(&self, query: &str, budget: InjectBudget) -> Vec<Note> {
        match self.whole(budget) {
            Some(all) => all,
            None => self.select(query, budget, &Params::default()),
        }
    }

    /// The best-ranked notes for `query` within `budget` (relevance floor included).
    pub fn select(&self, query: &str, budget: InjectBudget, params: &Params) -> Vec<Note> {
        let rows = usize::try_from(relevance::ranked_rows(budget)).unwrap_or(usize::MAX);
        let ranked = self
            .ranked(query, params, rows)
            .into_iter()
            .filter_map(|(at, s)| Some((self.entries.get(at as usize)?.note.clone(), s)))
            .collect();
        relevance::select(ranked, budget)
    }

    /// The `top` best entries for `query`, best first (ties to the newest), with their scores.
    pub fn ranked(&self, query: &str, p: &Params, top: usize) -> Vec<(u32, f64)> {
        let mut out = self.scored(query, p);
        let order = |a: &(u32, f64), b: &(u32, f64)| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0));
        if top == 0 {
            return Vec::new();
        }
        if out.len() > top {
            out.select_nth_unstable_by(top - 1, order);
            out.truncate(top);
        }
        out.sort_by(order);
        out
    }

    /// Every entry that scores above 0 for `query`, in no order, with its score.
    fn scored(&self, query: &str, p: &Params) -> Vec<(u32, f64)> {
        let stemmer = text::stemmer();
        let asked: Vec<(u32, f64)> = text::query_stems(&stemmer, query)
            .iter()
            .filter_map(|s| self.term_ids.get(s).map(|id| (*id, 1.0)))
            .collect();
        if asked.is_empty() || self.entries.is_empty() {
            return Vec::new();
        }
        let mut acc = self.spare.take(self.entries.len());
        self.accumulate(&asked, p, &mut acc);
        if p.prf_docs > 0 && p.prf_terms > 0 && p.prf_weight > 0.0 {
            let expansion = self.feedback(&acc, &asked, p);
            self.accumulate(&expansion, p, &mut acc);
        }
        let names: Vec<u32> = text::entity_stems(&stemmer, query)
            .iter()
            .filter_map(|s| self.term_ids.get(s).copied())
            .collect();
        if p.entity > 0.0 && !names.is_empty() {
            // Looked up in the names' postings (ascending by entry, contiguous), not in each
            // touched entry's own terms: one cache miss fewer per note.
            let lists: Vec<&Vec<(u32, u32)>> = names
                .iter()
                .filter_map(|id| self.postings.get(*id as usize))
                .collect();
            for at in &acc.touched {
                let Some(s) = acc.scores.get_mut(*at as usize) else {
                    continue;
                };
                let held = lists
                    .iter()
                    .filter(|list| list.binary_search_by_key(at, |(e, _)| *e).is_ok())
                    .count();
                *s *= 1.0 + p.entity * held as f64 / names.len() as f64;
            }
        }
        let score = |at: u32| acc.scores.get(at as usize).copied().unwrap_or(0.0);
        let out = acc
            .touched
            .iter()
            .map(|&at| {
                let mut share = 0.0;
                if p.neighbour_share > 0.0 {
                    for n in self.neighbours(at) {
                        share += score(n);
                    }
                }
                (at, score(at) + p.neighbour_share * share)
            })
            .filter(|(_, s)| *s > 0.0)
            .collect();
        self.spare.give(acc);
        out
    }

    /// Adds BM25 scores for `terms` (term id, weight) to `acc`, over entries whose words (or
    /// neighbours' words) hold them, among each term's newest `CANDIDATE_WINDOW` holders. Each
    /// entry's score is summed in term order, so equal questions give bit-equal scores (the block
    /// must not change between a conversation's legs).
    fn accumulate(&self, terms: &[(u32, f64)], p: &Params, acc: &mut Scratch) {
        let window = usize::try_from(relevance::CANDIDATE_WINDOW).unwrap_or(usize::MAX);
        let n = self.entries.len() as f64;
        let avgdl = (self.own_words as f64 + p.neighbour_words * self.pair_words as f64) / n;
        let avgdl = if avgdl > 0.0 { avgdl } else { 1.0 };
        for (id, weight) in terms {
            let Some(list) = self.postings.get(*id as usize) else {
                continue;
            };
            let df = list.len() as f64;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            acc.tf_touched.clear();
            for (at, count) in &list[list.len().saturating_sub(window)..] {
                let c = f64::from(*count);
                acc.add_tf(*at, c);
                if p.neighbour_words > 0.0 {
                    for nb in self.neighbours(*at) {
                        acc.add_tf(nb, p.neighbour_words * c);
                    }
                }
            }
            for i in 0..acc.tf_touched.len() {
                let at = acc.tf_touched[i];
                let Some(f) = acc.tf.get_mut(at as usize).map(std::mem::take) else {
                    continue;
                };
                let dl = self.effective_len(at, p.neighbour_words);
                let norm = p.k1 * (1.0 - p.b + p.b * dl / avgdl);
                acc.add_score(at, weight * idf * f * (p.k1 + 1.0) / (f + norm));
            }
        }
    }

    /// The best notes' most telling words not asked already, each weighted by its share of the
    /// best word's tf-idf, times `prf_weight`.
    fn feedback(&self, acc: &Scratch, asked: &[(u32, f64)], p: &Params) -> Vec<(u32, f64)> {
        let mut best: Vec<(u32, f64)> = acc
            .touched
            .iter()
            .map(|&a| (a, acc.scores.get(a as usize).copied().unwrap_or(0.0)))
            .collect();
        let order = |a: &(u32, f64), b: &(u32, f64)| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0));
        if best.len() > p.prf_docs && p.prf_docs > 0 {
            best.select_nth_unstable_by(p.prf_docs - 1, order);
        }
        best.truncate(p.prf_docs);
        best.sort_by(order);
        let n = self.entries.len() as f64;
        let mut weight: HashMap<u32, f64> = HashMap::new();
        for (at, _) in &best {
            let Some(e) = self.entries.get(*at as usize) else {
                continue;
            };
            for (id, count) in e.terms.iter() {
                if asked.iter().any(|(a, _)| a == id) {
                    continue;
                }
                let df = self.postings.get(*id as usize).map_or(0, Vec::len) as f64;
                // A word held by more than a tenth of the notes tells nothing about this one.
                if df < 2.0 || df > n / 10.0 {
                    continue;
                }
                let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                *weight.entry(*id).or_default() += f64::from(*count) * idf;
            }
        }
        let mut words: Vec<(u32, f64)> = weight.into_iter().collect();
        words.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        words.truncate(p.prf_terms);
        let top = words.first().map_or(1.0, |(_, w)| *w);
        words
            .into_iter()
            .map(|(id, w)| (id, p.prf_weight * w / top))
            .collect()
    }

    /// The entries next to `at` that are its neighbours (at most two).
    fn neighbours(&self, at: u32) -> impl Iterator<Item = u32> + '_ {
        let i = at as usize;
        let before = i
            .checked_sub(1)
            .filter(|j| self.linked_next.get(*j) == Some(&true))
            .map(|_| at - 1);
        let after = (self.linked_next.get(i) == Some(&true)).then(|| at + 1);
        before.into_iter().chain(after)
    }

    /// A note's length with its neighbours' words at `weight`.
    fn effective_len(&self, at: u32, weight: f64) -> f64 {
        let len = |i: u32| f64::from(self.lens.get(i as usize).copied().unwrap_or(0));
        let mut dl = len(at);
        if weight > 0.0 {
            for nb in self.neighbours(at) {
                dl += weight * len(nb);
            }
        }
        dl
    }
}

/// One ranking's working arrays, one slot per entry: dense, as a search touches thousands of
/// entries (each term's holders and their neighbours) and hashing each touch cost more than the
/// arithmetic.
struct Scratch {
    scores: Vec<f64>,
    scored: Vec<bool>,
    /// Entries with a score, in the order first scored.
    touched: Vec<u32>,
    /// One term's frequency per entry, and the entries it touched.
    tf: Vec<f64>,
    tf_touched: Vec<u32>,
}

impl Scratch {
    fn new(entries: usize) -> Self {
        Self {
            scores: vec![0.0; entries],
            scored: vec![false; entries],
            touched: Vec::new(),
            tf: vec![0.0; entries],
            tf_touched: Vec::new(),
        }
    }

    /// Back to all zeroes, touching only what the last search touched.
    fn clear(&mut self) {
        for at in self.touched.drain(..) {
            if let (Some(s), Some(seen)) = (
                self.scores.get_mut(at as usize),
                self.scored.get_mut(at as usize),
            ) {
                *s = 0.0;
                *seen = false;
            }
        }
        for at in self.tf_touched.drain(..) {
            if let Some(f) = self.tf.get_mut(at as usize) {
                *f = 0.0;
            }
        }
    }

    fn add_tf(&mut self, at: u32, f: f64) {
        if let Some(slot) = self.tf.get_mut(at as usize) {
            if *slot == 0.0 {
                self.tf_touched.push(at);
            }
            *slot += f;
        }
    }

    fn add_score(&mut self, at: u32, s: f64) {
        let i = at as usize;
        if let (Some(score), Some(seen)) = (self.scores.get_mut(i), self.scored.get_mut(i)) {
            if !*seen {
                *seen = true;
                self.touched.push(at);
            }
            *score += s;
        }
    }
}

/// Whether two notes, `a` written just before `b`, are neighbours.
fn linked(a: &Entry, b: &Entry) -> bool {
    (b.note.created_at - a.note.created_at).abs() <= NEIGHBOUR_SECS
}

#[cfg(test)]
mod tests;
