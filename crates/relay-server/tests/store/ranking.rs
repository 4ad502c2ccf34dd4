//! The full-text index and the notes injected into an agent leg, on both backends.

use relay_server::domain::NoteText;
use relay_server::store::InjectBudget;

use crate::{Fixture, note};

conformance!(
    ranking_finds_a_note_by_stem_neighbour_and_name,
    edits_keep_the_index_in_step,
    injection_is_whole_ranked_or_nothing,
    injection_keeps_the_budget,
);

/// Each instance may keep what it injected in memory (both backends do); a write made through
/// another instance must show in the very next leg's notes.
mod two_instances {
    use crate::batching::Instances;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite() {
        super::injection_follows_writes_of_another_instance(&Instances::sqlite().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres() {
        super::injection_follows_writes_of_another_instance(&Instances::postgres().await).await;
    }
}

/// Hand-written notes of a coding project: enough of them that the project does not fit the budget,
/// each about one thing, so a question has a clear best answer.
const CODING_NOTES: &[&str] = &[
    "Run the database migrations with `cargo sqlx migrate run` before starting the server.",
    "We use tokio for async; never block the runtime with std::thread::sleep.",
    "The CI pipeline runs cargo fmt, clippy with -D warnings, then cargo test --workspace.",
    "Frontend lives in web/ and is built with Vite; run npm run dev for hot reload.",
    "Error responses are always {error, message} with a machine code.",
    "Deploy to production by tagging a release; the pipeline builds the Docker image.",
    "Prefer sqlx runtime queries over the query! macros so no DATABASE_URL is needed at build time.",
    "Logging uses tracing; never log tokens or passwords.",
    "The benchmark harness lives in crates/relay-bench and prints p50/p90/p99.",
    "Integration tests need a PostgreSQL server on 127.0.0.1:5432 with trust authentication.",
    "Use rustls, not OpenSSL, for TLS so the build needs no system libraries.",
    "Feature flags are read from the FLAGS environment variable at start-up.",
];

const BUDGET: InjectBudget = InjectBudget {
    max_notes: 8,
    max_chars: 6_000,
};

async fn seed(f: &Fixture, how_many: usize) {
    for (i, n) in CODING_NOTES.iter().enumerate().take(how_many) {
        f.store
            .memory
            .remember(note("u1", "proj", n, 1_000.0 + i as f64))
            .await
            .unwrap();
    }
}

async fn inject(
    f: &Fixture,
    user: &str,
    project: &str,
    q: &str,
    budget: InjectBudget,
) -> Vec<String> {
    f.store
        .memory
        .notes_for_injection(user, project, q, budget)
        .await
        .unwrap()
        .into_iter()
        .map(|n| n.note)
        .collect()
}

async fn edits_keep_the_index_in_step(f: &Fixture) {
    seed(f, CODING_NOTES.len()).await;
    let mem = &f.store.memory;
    let id = &crate::note_id("mem#u1#proj#1");
    let edited = mem
        .edit_note(
            "u1",
            id,
            &NoteText::parse("Kubernetes manifests live in deploy/k8s.", "n").unwrap(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (edited.id.as_str(), edited.created_at),
        (id.as_str(), 1_000.0)
    );
    assert!(
        mem.edit_note("u2", id, &NoteText::parse("x", "n").unwrap())
            .await
            .unwrap()
            .is_none(),
        "never another user's"
    );
    let notes = mem
        .notes_for_injection("u1", "proj", "database migrations", BUDGET)
        .await
        .unwrap();
    assert!(
        notes.iter().all(|n| n.id != *id),
        "the old text is no longer indexed"
    );
    let notes = mem
        .notes_for_injection("u1", "proj", "kubernetes manifests", BUDGET)
        .await
        .unwrap();
    assert_eq!(notes[0].id, *id);
    // The edited text is what dedupe compares against.
    let again = mem
        .remember(note(
            "u1",
            "proj",
            "Kubernetes   manifests live in deploy/k8s.",
            2_000.0,
        ))
        .await
        .unwrap();
    assert_eq!((again.id.as_str(), again.created), (id.as_str(), false));
    mem.delete_note("u1", id).await.unwrap();
    assert!(
        inject(f, "u1", "proj", "kubernetes manifests", BUDGET)
            .await
            .is_empty()
    );
}

async fn injection_is_whole_ranked_or_nothing(f: &Fixture) {
    // A project that fits the budget goes in whole, oldest first, whatever the question.
    seed(f, 5).await;
    assert_eq!(
        inject(f, "u1", "proj", "anything at all", BUDGET).await,
        CODING_NOTES[..5]
    );
    assert_eq!(inject(f, "u1", "proj", "", BUDGET).await, CODING_NOTES[..5]);

    // A larger project gets what is relevant, best first.
    f.store.memory.delete_project("u1", "proj").await.unwrap();
    seed(f, CODING_NOTES.len()).await;
    let got = inject(
        f,
        "u1",
        "proj",
        "How do I run the database migrations?",
        BUDGET,
    )
    .await;
    assert_eq!(
        got.first().map(String::as_str),
        Some(CODING_NOTES[0]),
        "{got:?}"
    );
    assert!(got.len() < CODING_NOTES.len(), "{got:?}");
    let got = inject(
        f,
        "u1",
        "proj",
        "which TLS library should the build use?",
        BUDGET,
    )
    .await;
    assert_eq!(
        got.first().map(String::as_str),
        Some(CODING_NOTES[10]),
        "{got:?}"
    );
    let got = inject(f, "u1", "proj", "what about logging passwords", BUDGET).await;
    // One note matches; the seed writes a note a second, so the notes written just before and
    // after it are its neighbours and carry its words at reduced weight. Nothing else clears
    // the floor.
    assert_eq!(got.first().map(String::as_str), Some(CODING_NOTES[7]));
    assert!(
        got[1..]
            .iter()
            .all(|n| n == CODING_NOTES[6] || n == CODING_NOTES[8]),
        "{got:?}"
    );
    // Stemming: "migrating" finds "migrations" (and its neighbour, the note written after it).
    let got = inject(f, "u1", "proj", "migrating", BUDGET).await;
    assert_eq!(got.first().map(String::as_str), Some(CODING_NOTES[0]));
    assert!(got[1..].iter().all(|n| n == CODING_NOTES[1]), "{got:?}");
    // Query syntax in a question is just punctuation: the words still count, the operators do not.
    let got = inject(f, "u1", "proj", "database:* & !migrations", BUDGET).await;
    assert_eq!(
        got.first().map(String::as_str),
        Some(CODING_NOTES[0]),
        "{got:?}"
    );

    // Nonsense, stopwords only, empty, and query syntax of either engine match nothing.
    for q in [
        "florp zindle quaxx",
        "",
        "how is it",
        "\"OR\" AND NOT (*)",
        "a & b | !c <-> 'd':*",
        "') OR 1=1 --",
        "zindle:* & !florp | (quaxx <-> blorb)",
    ] {
        assert!(
            inject(f, "u1", "proj", q, BUDGET).await.is_empty(),
            "{q:?} injected something"
        );
    }

    // Never across users or projects.
    assert!(
        inject(f, "u2", "proj", "database migrations", BUDGET)
            .await
            .is_empty()
    );
    assert!(
        inject(f, "u1", "other", "database migrations", BUDGET)
            .await
            .is_empty()
    );
}

async fn injection_keeps_the_budget(f: &Fixture) {
    seed(f, CODING_NOTES.len()).await;
    let q = "cargo sqlx tokio pipeline tracing rustls postgresql benchmark vite docker flags error";
    let few = InjectBudget {
        max_notes: 3,
        max_chars: 6_000,
    };
    assert_eq!(inject(f, "u1", "proj", q, few).await.len(), 3);
    let short = InjectBudget {
        max_notes: 8,
        max_chars: 150,
    };
    let got = inject(f, "u1", "proj", q, short).await;
    let chars: usize = got.iter().map(|n| n.chars().count()).sum();
    assert!(!got.is_empty() && chars <= 150, "{chars}: {got:?}");
    // Ties go to the newest: two equal notes but for their time.
    let mem = &f.store.memory;
    mem.remember(note("u1", "tie", "quokka habitat", 1.0))
        .await
        .unwrap();
    mem.remember(note("u1", "tie", "habitat quokka", 2.0))
        .await
        .unwrap();
    // Written hours later: no neighbours of the two.
    for i in 0..9 {
        mem.remember(note(
            "u1",
            "tie",
            &format!("filler {i}"),
            10_000.0 + f64::from(i),
        ))
        .await
        .unwrap();
    }
    let got = inject(f, "u1", "tie", "quokka", BUDGET).await;
    assert_eq!(got, ["habitat quokka", "quokka habitat"]);
}

async fn injection_follows_writes_of_another_instance(f: &crate::batching::Instances) {
    let (one, two) = (&f.one.memory, &f.two.memory);
    let injected = |q: &'static str| async move {
        one.notes_for_injection("u1", "proj", q, BUDGET)
            .await
            .unwrap()
            .into_iter()
            .map(|n| n.note)
            .collect::<Vec<_>>()
    };
    // A project that fits the budget goes in whole: a note added elsewhere joins it.
    for (i, n) in CODING_NOTES.iter().enumerate().take(2) {
        two.remember(note("u1", "proj", n, 1_000.0 + i as f64))
            .await
            .unwrap();
    }
    assert_eq!(injected("anything").await.len(), 2);
    assert_eq!(injected("anything").await.len(), 2, "asked again");
    for (i, n) in CODING_NOTES.iter().enumerate().skip(2) {
        two.remember(note("u1", "proj", n, 1_000.0 + i as f64))
            .await
            .unwrap();
    }
    // Now ranked: the same question twice, then after each kind of write on the other instance.
    let q = "database migrations";
    assert_eq!(injected(q).await[0], CODING_NOTES[0]);
    assert_eq!(injected(q).await[0], CODING_NOTES[0], "asked again");
    let first = crate::note_id("mem#u1#proj#1");
    let kube = "Kubernetes manifests live in deploy/k8s.";
    two.edit_note("u1", &first, &NoteText::parse(kube, "n").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(
        !injected(q).await.contains(&CODING_NOTES[0].to_owned()),
        "an edit elsewhere drops the old text"
    );
    let added = "Database migrations are squashed into one file at every release.";
    let r = two
        .remember(note("u1", "proj", added, 5_000.0))
        .await
        .unwrap();
    assert_eq!(injected(q).await[0], added, "a note remembered elsewhere");
    two.delete_note("u1", &r.id).await.unwrap();
    assert!(
        !injected(q).await.contains(&added.to_owned()),
        "a note deleted elsewhere"
    );
    two.delete_project("u1", "proj").await.unwrap();
    assert!(injected(q).await.is_empty(), "a project deleted elsewhere");
    assert!(injected("anything").await.is_empty());
}

/// The ranker's signals, each shown by a note only it finds, on both backends: a project bigger
/// than the budget, so injection ranks; filler written hours apart, so no filler note neighbours
/// another.
async fn ranking_finds_a_note_by_stem_neighbour_and_name(f: &Fixture) {
    let mem = &f.store.memory;
    for i in 0..20 {
        let text = format!("Filler note {i}: lunch was soup and the weather was grey.");
        mem.remember(note("u1", "talk", &text, 100_000.0 * f64::from(i + 1)))
            .await
            .unwrap();
    }
    let add = |text: &'static str, at: f64| async move {
        mem.remember(note("u1", "talk", text, at)).await.unwrap();
    };
    add("We migrated the billing tables on Monday.", 10.0).await;
    // Two turns a minute apart: neighbours. The answer is in the second, the topic in the first.
    add("Did you go to the pottery class?", 5_000_000.0).await;
    add("Yes, I went yesterday and loved it.", 5_000_060.0).await;
    add("Melanie painted a sunrise over the lake.", 7_000_000.0).await;
    add("Caroline painted a sunrise over the lake.", 8_000_000.0).await;

    // A stemmed word: "migrations" finds "migrated".
    let got = inject(f, "u1", "talk", "how were the migrations done?", BUDGET).await;
    assert_eq!(
        got.first().map(String::as_str),
        Some("We migrated the billing tables on Monday."),
        "{got:?}"
    );
    // A neighbour's words: the reply holds none of the question's words.
    let got = inject(f, "u1", "talk", "the pottery class", BUDGET).await;
    assert_eq!(
        got.first().map(String::as_str),
        Some("Did you go to the pottery class?")
    );
    assert!(
        got.iter()
            .any(|n| n == "Yes, I went yesterday and loved it."),
        "{got:?}"
    );
    // A name: the note holding the question's capitalised word ranks first.
    for who in ["Caroline", "Melanie"] {
        let got = inject(
            f,
            "u1",
            "talk",
            &format!("When did {who} paint a sunrise?"),
            BUDGET,
        )
        .await;
        assert_eq!(
            got.first().map(String::as_str),
            Some(format!("{who} painted a sunrise over the lake.").as_str()),
            "{got:?}"
        );
    }
}
