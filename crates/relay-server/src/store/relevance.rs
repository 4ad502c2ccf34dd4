//! Backend-neutral parts of note relevance: which words of a question count, and the budget.
//!
//! Each backend ranks with its own full-text engine (SQLite FTS5 bm25, PostgreSQL ts_rank); both
//! take the same terms and apply the same floor and budget, so they inject alike.

use super::{InjectBudget, Note, StoreResult};

/// At most this many terms of a question are searched for.
const MAX_TERMS: usize = 32;

/// A note must score at least this share of the best note's score to be injected.
pub const RELATIVE_FLOOR: f64 = 0.2;

/// Words that say nothing about which note is relevant.
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at",
    "be", "been", "before", "being", "but", "by", "can", "could", "did", "do", "does", "doing",
    "done", "for", "from", "get", "got", "had", "has", "have", "having", "he", "her", "here",
    "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "let", "me", "might",
    "more", "most", "must", "my", "no", "not", "now", "of", "on", "once", "only", "or", "other",
    "our", "out", "over", "please", "same", "she", "should", "so", "some", "such", "than", "that",
    "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "too",
    "under", "until", "up", "us", "very", "was", "we", "were", "what", "when", "where", "which",
    "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours",
];

/// Whether `word` (lower-case) says nothing about which note is relevant.
pub fn is_stopword(word: &str) -> bool {
    STOPWORDS.contains(&word)
}

/// The searchable words of `text`: lower-case runs of letters and digits, two characters or more,
/// without stopwords, each once, in order of appearance.
pub fn query_terms(text: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        let w = word.to_lowercase();
        if w.chars().count() < 2 || STOPWORDS.contains(&w.as_str()) || terms.contains(&w) {
            continue;
        }
        terms.push(w);
        if terms.len() == MAX_TERMS {
            break;
        }
    }
    terms
}

/// Relevance is ranked among at most this many of the project's newest notes that share a word
/// with the question. Ranking costs time per matching note, and a leg waits for it: with 10,000
/// notes that all share a common word ("tests", "run"), ranking every match took 4 to 9 ms per leg
/// against about 2 ms for this window (measured on the `relay-bench inject` data). Older notes are
/// still found whenever fewer than this many newer notes match.
pub const CANDIDATE_WINDOW: i64 = 1_000;

/// How long a leg that finds its project's in-memory index out of date (both backends) waits for
/// the read that brings it up to date before ranking in the database instead. Adding a few notes
/// to a held index takes well under this; reading 10,000 notes whole about this long (release
/// build), 100,000 ten times more, which legs meanwhile do not wait for. Well within the default
/// `inject_deadline_ms` (250), which also bounds the database search after it.
pub const BUILD_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

/// How many of the best-ranked notes a search reads: twice the note budget (at least 16), so notes
/// skipped for their length still leave enough to fill it. Every row read costs a message between
/// the database thread and the leg; 64 rows a search measured more CPU per leg than 16.
pub fn ranked_rows(budget: InjectBudget) -> i64 {
    i64::try_from(budget.max_notes.saturating_mul(2))
        .unwrap_or(i64::MAX)
        .max(16)
}

/// How many of a project's oldest notes to read to decide whether it fits the budget whole: one
/// more than the budget allows, so a bigger project is told apart without counting all its notes
/// (a `count(*)` over 10,000 notes cost 8 ms a leg).
pub fn fit_probe(budget: InjectBudget) -> i64 {
    i64::try_from(budget.max_notes).unwrap_or(i64::MAX - 1) + 1
}

/// The injection rule of both backends, written once: a project whose `notes` (of `chars`
/// characters in all) fit the budget is injected whole, oldest first, without a search; a bigger
/// one gets the notes ranked most relevant to the question (`select`). The SQL paths apply it
/// through `whole_or_ranked`, SQLite's in-memory index through `ProjectIndex::whole`.
pub fn fits(notes: usize, chars: usize, budget: InjectBudget) -> bool {
    notes <= budget.max_notes && chars <= budget.max_chars
}

/// `first` is the project's oldest notes, at most `fit_probe(budget)` of them: all of them when
/// they are the whole project and fit the budget, so it is injected whole without a search.
pub fn whole_project(first: Vec<Note>, budget: InjectBudget) -> Option<Vec<Note>> {
    let chars: usize = first.iter().map(|n| n.note.chars().count()).sum();
    fits(first.len(), chars, budget).then_some(first)
}

/// `fits` for a search in the database: `first` is the project's oldest `fit_probe(budget)`
/// notes; the whole project when they are all of it and fit, else what `ranked` finds.
pub async fn whole_or_ranked<F>(
    first: Vec<Note>,
    budget: InjectBudget,
    ranked: impl FnOnce() -> F,
) -> StoreResult<Vec<Note>>
where
    F: std::future::Future<Output = StoreResult<Vec<Note>>>,
{
    match whole_project(first, budget) {
        Some(all) => Ok(all),
        None => ranked().await,
    }
}

/// Takes `ranked` (best first, each with a score where higher is better) while the budget lasts,
/// dropping notes below the relevance floor. A note too long for the characters left is skipped,
/// so a shorter relevant one can still go in.
pub fn select(ranked: Vec<(Note, f64)>, budget: InjectBudget) -> Vec<Note> {
    let Some(best) = ranked.first().map(|(_, s)| *s) else {
        return Vec::new();
    };
    let floor = best * RELATIVE_FLOOR;
    let mut chars_left = budget.max_chars;
    let mut chosen = Vec::new();
    for (note, score) in ranked {
        if chosen.len() == budget.max_notes || score <= 0.0 || score < floor {
            break;
        }
        let len = note.note.chars().count();
        if len <= chars_left {
            chars_left -= len;
            chosen.push(note);
        }
    }
    chosen
}

/// Takes `ranked` (best first, already past whatever floor the ranking has) while the budget
/// lasts, skipping a note too long for the characters left, as `select` does.
pub fn fill(ranked: Vec<Note>, budget: InjectBudget) -> Vec<Note> {
    let mut chars_left = budget.max_chars;
    let mut chosen = Vec::new();
    for note in ranked {
        if chosen.len() == budget.max_notes {
            break;
        }
        let len = note.note.chars().count();
        if len <= chars_left {
            chars_left -= len;
            chosen.push(note);
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Author, MemType, NoteId};

    fn note(id: &str, text: &str) -> Note {
        Note {
            id: NoteId::from_stored(id.into()),
            project_id: "p".into(),
            note: text.into(),
            author: Author::default(),
            mem_type: MemType::default(),
            created_at: 0.0,
        }
    }

    #[test]
    fn terms_drop_stopwords_and_repeats() {
        assert_eq!(
            query_terms("How do we run the DB migrations? Run them with sqlx!"),
            vec!["run", "db", "migrations", "sqlx"]
        );
        assert!(query_terms("how is it? a, I").is_empty());
    }

    #[test]
    fn whole_project_only_when_every_note_fits() {
        let budget = InjectBudget {
            max_notes: 2,
            max_chars: 10,
        };
        assert_eq!(fit_probe(budget), 3);
        let fits = whole_project(vec![note("1", "aaaa"), note("2", "bbbbbb")], budget);
        assert_eq!(fits.map(|v| v.len()), Some(2));
        let too_many = vec![note("1", "a"), note("2", "b"), note("3", "c")];
        assert!(whole_project(too_many, budget).is_none());
        let too_long = vec![note("1", "aaaa"), note("2", "bbbbbbb")];
        assert!(whole_project(too_long, budget).is_none());
        assert_eq!(whole_project(Vec::new(), budget).map(|v| v.len()), Some(0));
    }

    #[test]
    fn select_keeps_budget_and_floor() {
        let budget = InjectBudget {
            max_notes: 2,
            max_chars: 10,
        };
        let ranked = vec![
            (note("1", "aaaa"), 10.0),
            (note("2", "bbbbbbbbbbbb"), 9.0), // too long for what is left: skipped
            (note("3", "cccc"), 8.0),
            (note("4", "dd"), 7.0), // past max_notes
        ];
        let ids: Vec<_> = select(ranked, budget).into_iter().map(|n| n.id).collect();
        assert_eq!(ids, vec!["1", "3"]);
        let ranked = vec![(note("1", "a"), 10.0), (note("2", "b"), 1.0)];
        let ids: Vec<_> = select(
            ranked,
            InjectBudget {
                max_notes: 8,
                max_chars: 100,
            },
        )
        .into_iter()
        .map(|n| n.id)
        .collect();
        assert_eq!(ids, vec!["1"], "the weak match is under the floor");
    }
}
