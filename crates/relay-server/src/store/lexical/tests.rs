//! The ranker's signals, each shown by a note found only through it.

use super::*;
use crate::domain::{Author, MemType, NoteId};

fn index(notes: &[(&str, f64)]) -> LexIndex {
    let rows = notes
        .iter()
        .enumerate()
        .map(|(i, (text, at))| Row {
            order: i as i64 + 1,
            seq: i as i64 + 1,
            note: Note {
                id: NoteId::from_stored(format!("n{i}")),
                project_id: "p".into(),
                note: (*text).into(),
                author: Author::default(),
                mem_type: MemType::default(),
                created_at: *at,
            },
        })
        .collect();
    LexIndex::build(rows).unwrap()
}

fn top(ix: &LexIndex, q: &str, p: &Params) -> Vec<String> {
    ix.ranked(q, p, 3)
        .into_iter()
        .map(|(at, _)| ix.entries[at as usize].note.note.clone())
        .collect()
}

/// Filler far apart in time, so no note neighbours another.
fn filler(n: usize) -> Vec<(String, f64)> {
    (0..n)
        .map(|i| {
            (
                format!("unrelated filler {i} about lunch and weather"),
                10_000.0 * (i as f64 + 10.0),
            )
        })
        .collect()
}

#[test]
fn a_stemmed_word_finds_its_other_forms() {
    let mut notes = filler(20);
    notes.push(("We migrated the billing tables on Monday".into(), 1.0));
    let refs: Vec<(&str, f64)> = notes.iter().map(|(t, a)| (t.as_str(), *a)).collect();
    let ix = index(&refs);
    let found = top(&ix, "how are migrations run?", &Params::default());
    assert_eq!(
        found.first().map(String::as_str),
        Some("We migrated the billing tables on Monday")
    );
}

#[test]
fn a_neighbours_words_find_a_note_at_reduced_weight() {
    let mut notes = filler(20);
    // The answer ("yesterday") is in the turn after the one that names the topic.
    notes.push(("Did you go to the pottery class?".into(), 1.0));
    notes.push(("Yes, I went yesterday and loved it".into(), 30.0));
    let refs: Vec<(&str, f64)> = notes.iter().map(|(t, a)| (t.as_str(), *a)).collect();
    let ix = index(&refs);
    let found = top(&ix, "pottery class", &Params::default());
    assert!(
        found.contains(&"Yes, I went yesterday and loved it".to_owned()),
        "{found:?}"
    );
    // Without neighbour words (and shares), only the note naming it matches.
    let alone = Params {
        neighbour_words: 0.0,
        neighbour_share: 0.0,
        prf_weight: 0.0,
        ..Params::default()
    };
    assert_eq!(top(&ix, "pottery class", &alone).len(), 1);
}

#[test]
fn a_name_in_the_question_boosts_notes_holding_it() {
    let ix = index(&[
        ("Melanie painted a sunrise over the lake", 1.0),
        ("Caroline painted a sunrise over the lake", 10_000.0),
        ("Someone painted a sunset", 20_000.0),
    ]);
    let found = top(
        &ix,
        "When did Caroline paint a sunrise?",
        &Params::default(),
    );
    assert_eq!(found[0], "Caroline painted a sunrise over the lake");
    let found = top(&ix, "When did Melanie paint a sunrise?", &Params::default());
    assert_eq!(found[0], "Melanie painted a sunrise over the lake");
}

#[test]
fn equal_questions_rank_bit_equal_and_extension_matches_a_build() {
    let notes: Vec<(String, f64)> = (0..300)
        .map(|i| {
            (
                format!("note {i} on tests {} and deploys {}", i % 7, i % 13),
                i as f64 * 40.0,
            )
        })
        .collect();
    let refs: Vec<(&str, f64)> = notes.iter().map(|(t, a)| (t.as_str(), *a)).collect();
    let whole = index(&refs);
    let first = index(&refs[..150]);
    let rest: Vec<Row> = refs[150..]
        .iter()
        .enumerate()
        .map(|(i, _)| Row {
            order: 151 + i as i64,
            seq: 151 + i as i64,
            note: whole.entries[150 + i].note.clone(),
        })
        .inspect(|r| assert_eq!(r.note.note, refs[r.order as usize - 1].0))
        .collect();
    let grown = first.extended(rest).unwrap();
    let q = "tests 3 deploys 5";
    assert_eq!(
        whole.ranked(q, &Params::default(), 16),
        grown.ranked(q, &Params::default(), 16)
    );
    assert_eq!(
        whole.ranked(q, &Params::default(), 16),
        whole.ranked(q, &Params::default(), 16)
    );
}
