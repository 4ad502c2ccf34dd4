//! Remembering, recalling, listing and deleting notes, and open-mode usage, on both backends.

use std::collections::BTreeSet;

use crate::{Fixture, note, warm_up};

conformance!(
    remember_numbers_per_project_and_dedupes_folded_text,
    ids_are_never_reused_after_deletes,
    concurrent_remembers_get_distinct_gap_free_ids,
    concurrent_equal_remembers_store_one_note,
    recall_gives_the_newest_oldest_first,
    list_pages_with_totals,
    deletes_touch_only_the_callers_notes,
    the_cascade_leaves_no_row_or_index_entry_and_keeps_the_counters,
    open_mode_legs_are_counted,
);

async fn remember_numbers_per_project_and_dedupes_folded_text(f: &Fixture) {
    let mem = &f.store.memory;
    let r1 = mem
        .remember(note("u1", "p", "first  note", 1.0))
        .await
        .unwrap();
    let r2 = mem.remember(note("u1", "p", "second", 2.0)).await.unwrap();
    assert_eq!((r1.id.as_str(), r1.created), ("mem#u1#p#1", true));
    assert_eq!((r2.id.as_str(), r2.created), ("mem#u1#p#2", true));
    let dup = mem
        .remember(note("u1", "p", "first\n\tnote", 3.0))
        .await
        .unwrap();
    assert_eq!(
        (dup.id.as_str(), dup.created),
        ("mem#u1#p#1", false),
        "whitespace folded"
    );
    let r3 = mem
        .remember(note("u1", "p", "First note", 4.0))
        .await
        .unwrap();
    assert_eq!(
        r3.id, "mem#u1#p#3",
        "case matters; the duplicate took no id"
    );
    assert_eq!(
        mem.remember(note("u1", "q", "first note", 5.0))
            .await
            .unwrap()
            .id,
        "mem#u1#q#1",
        "each project counts from 1 and dedupes on its own"
    );
    assert_eq!(
        mem.remember(note("u2", "p", "first note", 6.0))
            .await
            .unwrap()
            .id,
        "mem#u2#p#1"
    );
    let stored = mem
        .get_note("u1", &crate::note_id("mem#u1#p#1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            stored.note.as_str(),
            stored.project_id.as_str(),
            stored.author.as_str(),
            stored.mem_type.as_str(),
            stored.created_at
        ),
        ("first  note", "p", "user", "note", 1.0),
        "stored as given"
    );
    let mut typed = note("u1", "p", "a decision", 7.5);
    typed.author = relay_server::domain::Author::parse(Some("agent")).unwrap();
    typed.mem_type = relay_server::domain::MemType::parse(Some("decision")).unwrap();
    let id = mem.remember(typed).await.unwrap().id;
    let got = mem.get_note("u1", &id).await.unwrap().unwrap();
    assert_eq!(
        (got.author.as_str(), got.mem_type.as_str(), got.created_at),
        ("agent", "decision", 7.5)
    );
    assert!(
        mem.get_note("u2", &id).await.unwrap().is_none(),
        "never another user's"
    );
}

async fn ids_are_never_reused_after_deletes(f: &Fixture) {
    let mem = &f.store.memory;
    for i in 1..=3 {
        mem.remember(note("u1", "p", &format!("n{i}"), f64::from(i)))
            .await
            .unwrap();
    }
    assert_eq!(
        mem.delete_note("u1", &crate::note_id("mem#u1#p#3"))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        mem.remember(note("u1", "p", "n4", 4.0)).await.unwrap().id,
        "mem#u1#p#4"
    );
    assert_eq!(mem.delete_project("u1", "p").await.unwrap(), 3);
    assert_eq!(
        mem.remember(note("u1", "p", "n5", 5.0)).await.unwrap().id,
        "mem#u1#p#5"
    );
    assert_eq!(
        mem.remember(note("u1", "p", "n1", 6.0)).await.unwrap().id,
        "mem#u1#p#6",
        "a deleted note's text is new again, under a new id"
    );
    // The GDPR cascade removes every note but keeps the counters: an id is never reused.
    mem.delete_all_notes("u1").await.unwrap();
    assert_eq!(
        mem.remember(note("u1", "p", "again", 7.0))
            .await
            .unwrap()
            .id,
        "mem#u1#p#7"
    );
    // Only deleting the account (whose id is never issued again) drops them.
    mem.delete_all_notes("u1").await.unwrap();
    mem.forget_counters("u1").await.unwrap();
    assert_eq!(
        mem.remember(note("u1", "p", "fresh", 8.0))
            .await
            .unwrap()
            .id,
        "mem#u1#p#1"
    );
}

async fn concurrent_remembers_get_distinct_gap_free_ids(f: &Fixture) {
    warm_up(f).await;
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let mem = f.store.memory.clone();
            tokio::spawn(async move {
                mem.remember(note("u1", "p", &format!("note number {i}"), 1.0))
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut seqs = BTreeSet::new();
    for t in tasks {
        let r = t.await.unwrap();
        assert!(r.created);
        let seq: i64 = r.id.as_str().rsplit('#').next().unwrap().parse().unwrap();
        assert!(seqs.insert(seq), "id {} given twice", r.id);
    }
    assert_eq!(seqs, (1..=40).collect::<BTreeSet<_>>());
}

async fn concurrent_equal_remembers_store_one_note(f: &Fixture) {
    warm_up(f).await;
    for round in 1..=5 {
        let tasks: Vec<_> = (0..12)
            .map(|i| {
                let mem = f.store.memory.clone();
                // The same folded text, spaced differently by each writer.
                let text = format!("same{}note {round}", " ".repeat(i % 3 + 1));
                tokio::spawn(
                    async move { mem.remember(note("u1", "p", &text, 1.0)).await.unwrap() },
                )
            })
            .collect();
        let mut created = 0;
        for t in tasks {
            let r = t.await.unwrap();
            assert_eq!(
                r.id.to_string(),
                format!("mem#u1#p#{round}"),
                "round {round}"
            );
            created += usize::from(r.created);
        }
        assert_eq!(created, 1, "round {round}");
    }
    assert_eq!(
        f.store
            .memory
            .list_notes("u1", None, 10, 0)
            .await
            .unwrap()
            .0,
        5
    );
    assert_eq!(
        f.store
            .memory
            .remember(note("u1", "p", "next", 2.0))
            .await
            .unwrap()
            .id,
        "mem#u1#p#6",
        "no id was spent on the duplicates"
    );
}

async fn recall_gives_the_newest_oldest_first(f: &Fixture) {
    let mem = &f.store.memory;
    // Written out of time order, with a tie at 3.0 broken by id order.
    for (t, text) in [
        (5.0, "e"),
        (1.0, "a"),
        (3.0, "c1"),
        (3.0, "c2"),
        (2.0, "b"),
        (4.0, "d"),
    ] {
        mem.remember(note("u1", "p", text, t)).await.unwrap();
    }
    mem.remember(note("u1", "other", "x", 9.0)).await.unwrap();
    mem.remember(note("u2", "p", "y", 9.0)).await.unwrap();
    assert_eq!(
        mem.recall("u1", "p", 200).await.unwrap(),
        ["a", "b", "c1", "c2", "d", "e"]
    );
    assert_eq!(mem.recall("u1", "p", 3).await.unwrap(), ["c2", "d", "e"]);
    assert!(mem.recall("u1", "empty", 10).await.unwrap().is_empty());
}

async fn list_pages_with_totals(f: &Fixture) {
    let mem = &f.store.memory;
    for i in 0..5 {
        mem.remember(note("u1", "p", &format!("p{i}"), 10.0 + f64::from(i)))
            .await
            .unwrap();
        mem.remember(note("u1", "q", &format!("q{i}"), 10.5 + f64::from(i)))
            .await
            .unwrap();
    }
    mem.remember(note("u2", "p", "not mine", 1.0))
        .await
        .unwrap();
    let texts = |notes: &[relay_server::store::Note]| -> Vec<String> {
        notes.iter().map(|n| n.note.clone()).collect()
    };
    let (total, page) = mem.list_notes("u1", Some("p"), 2, 1).await.unwrap();
    assert_eq!(
        (total, texts(&page)),
        (5, vec!["p1".to_owned(), "p2".to_owned()])
    );
    let (total, page) = mem.list_notes("u1", None, 3, 0).await.unwrap();
    assert_eq!(
        (total, texts(&page)),
        (10, vec!["p0".to_owned(), "q0".to_owned(), "p1".to_owned()])
    );
    let (total, page) = mem.list_notes("u1", None, 200, 8).await.unwrap();
    assert_eq!(
        (total, texts(&page)),
        (10, vec!["p4".to_owned(), "q4".to_owned()])
    );
    let (total, page) = mem.list_notes("u1", Some("q"), 10, 50).await.unwrap();
    assert_eq!(
        (total, page.len()),
        (5, 0),
        "a page past the end still counts"
    );
    let (total, page) = mem.list_notes("u3", None, 10, 0).await.unwrap();
    assert_eq!((total, page.len()), (0, 0));

    // Equal times order by id, byte-wise: "#10" sorts before "#9".
    for i in 0..11 {
        mem.remember(note("u4", "t", &format!("tie {i}"), 1.0))
            .await
            .unwrap();
    }
    let (_, page) = mem.list_notes("u4", Some("t"), 3, 0).await.unwrap();
    let ids: Vec<&str> = page.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, ["mem#u4#t#1", "mem#u4#t#10", "mem#u4#t#11"]);
}

async fn deletes_touch_only_the_callers_notes(f: &Fixture) {
    let mem = &f.store.memory;
    mem.remember(note("u1", "p", "a1", 1.0)).await.unwrap();
    mem.remember(note("u1", "p", "a2", 2.0)).await.unwrap();
    mem.remember(note("u1", "q", "a3", 3.0)).await.unwrap();
    mem.remember(note("u2", "p", "b1", 4.0)).await.unwrap();
    assert_eq!(
        mem.delete_note("u2", &crate::note_id("mem#u1#p#1"))
            .await
            .unwrap(),
        0,
        "not u2's"
    );
    assert_eq!(
        mem.delete_note("u1", &crate::note_id("mem#u1#p#9"))
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        mem.delete_note("u1", &crate::note_id("mem#u1#p#1"))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        mem.delete_note("u1", &crate::note_id("mem#u1#p#1"))
            .await
            .unwrap(),
        0,
        "already gone"
    );
    assert!(
        mem.get_note("u1", &crate::note_id("mem#u1#p#1"))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(mem.delete_project("u2", "q").await.unwrap(), 0);
    assert_eq!(mem.delete_project("u1", "p").await.unwrap(), 1);
    assert_eq!(mem.recall("u1", "q", 10).await.unwrap(), ["a3"]);
    assert_eq!(mem.recall("u2", "p", 10).await.unwrap(), ["b1"]);
    assert_eq!(mem.delete_all_notes("u1").await.unwrap(), 1);
    assert_eq!(mem.delete_all_notes("u1").await.unwrap(), 0);
    assert_eq!(mem.recall("u2", "p", 10).await.unwrap(), ["b1"]);
}

async fn the_cascade_leaves_no_row_or_index_entry_and_keeps_the_counters(f: &Fixture) {
    let mem = &f.store.memory;
    for (p, n) in [
        ("p1", "zebracorn migrations"),
        ("p2", "zebracorn deploys"),
        ("p2", "other words"),
    ] {
        mem.remember(note("u_a", p, n, 1.0)).await.unwrap();
    }
    mem.remember(note("u_b", "p1", "unrelated note of b", 2.0))
        .await
        .unwrap();
    assert_eq!(f.index_rows("zebracorn").await, (4, 0, 2));
    assert_eq!(mem.delete_all_notes("u_a").await.unwrap(), 3);
    assert_eq!(f.rows_of("notes", "u_a").await, 0);
    assert_eq!(
        f.rows_of("note_counters", "u_a").await,
        2,
        "the id counters stay, so no id is reused"
    );
    assert_eq!(f.rows_of("note_counters", "u_b").await, 1);
    assert_eq!(
        f.index_rows("zebracorn").await,
        (1, 0, 0),
        "only B's index entry remains"
    );
    assert_eq!(
        mem.recall("u_b", "p1", 10).await.unwrap(),
        ["unrelated note of b"]
    );
    assert!(
        mem.delete_note("u_a", &crate::note_id("mem#u_a#p1#1"))
            .await
            .unwrap()
            == 0
    );
    let next = mem.remember(note("u_a", "p2", "after", 3.0)).await.unwrap();
    assert_eq!(
        next.id, "mem#u_a#p2#3",
        "numbering goes on after the cascade"
    );
}

async fn open_mode_legs_are_counted(f: &Fixture) {
    let mem = &f.store.memory;
    assert_eq!(mem.open_legs().await.unwrap(), 0);
    for _ in 0..3 {
        mem.count_open_leg().await.unwrap();
    }
    assert_eq!(mem.open_legs().await.unwrap(), 3);
}
