//! The usage ledger's store on both backends: a batch counts each account's month and the daily
//! roll-up exactly, settles the reservations of its records, drops the records of an erased
//! account's legs in flight, and batches written while legs reserve keep the budget exact.

use std::sync::Arc;

use relay_server::store::usage::{
    Budgets, GroupBy, LegFilter, LegRecord, Reservation, UsageQuery, UsageStore, month_of,
};

use crate::Fixture;

/// One account's records, unfiltered.
fn account(user_id: &str) -> LegFilter {
    LegFilter {
        user_id: Some(user_id.to_owned()),
        ..LegFilter::default()
    }
}

conformance!(
    a_batch_counts_the_month_and_the_roll_up,
    a_record_settles_its_reservation,
    spend_is_counted_and_reserved_beside_tokens,
    an_erasure_drops_the_records_of_legs_in_flight,
    batches_beside_reservations_keep_the_budget_exact,
);

/// Noon UTC of a day well inside one month, so that `at` and `at + 3600` share day and month.
const NOON: i64 = 20_400 * 86_400 + 43_200;

fn record(user: &str, request: &str, at: i64, model: &str, tokens: (i64, i64)) -> LegRecord {
    LegRecord {
        user_id: user.into(),
        request_id: request.into(),
        at,
        route: relay_server::domain::Door::Agent,
        model: model.into(),
        provider: "mock".into(),
        project_id: Some("p".into()),
        status: "ok",
        input_tokens: tokens.0,
        cached_input_tokens: 0,
        cache_write_tokens: 0,
        output_tokens: tokens.1,
        reasoning_tokens: 0,
        ttfb_ms: 5,
        duration_ms: 100,
        cost_usd: Some(0.25),
        reservation: None,
        estimated: false,
        server_tool_uses: 0,
    }
}

fn by(group_by: GroupBy, user: &str) -> UsageQuery {
    UsageQuery {
        user_id: Some(user.into()),
        from: NOON - 3 * 86_400,
        to: NOON + 3 * 86_400,
        group_by,
    }
}

async fn used(usage: &dyn UsageStore, user: &str) -> i64 {
    usage
        .month_state(user, month_of(NOON), NOON)
        .await
        .unwrap()
        .used
}

async fn a_batch_counts_the_month_and_the_roll_up(f: &Fixture) {
    let usage = &f.store.usage;
    let mut priced_none = record("ada", "4", NOON + 86_400, "m2", (1, 1));
    priced_none.cost_usd = None;
    usage
        .insert_legs(&[
            record("ada", "1", NOON, "m1", (100, 10)),
            record("bob", "2", NOON, "m1", (7, 3)),
            record("ada", "3", NOON + 3600, "m1", (50, 5)),
            priced_none,
        ])
        .await
        .unwrap();
    // A second batch adds to the rows the first wrote.
    usage
        .insert_legs(&[record("ada", "5", NOON, "m1", (1_000, 0))])
        .await
        .unwrap();

    assert_eq!(used(usage.as_ref(), "ada").await, 110 + 55 + 2 + 1_000);
    assert_eq!(used(usage.as_ref(), "bob").await, 10);
    let (_, month) = usage.budget_and_month("ada", month_of(NOON)).await.unwrap();
    assert_eq!(month, 1_167);

    let mut days = usage.aggregate(&by(GroupBy::Day, "ada")).await.unwrap();
    days.sort_by(|a, b| a.key.cmp(&b.key));
    let days: Vec<_> = days
        .iter()
        .map(|d| (d.legs, d.input_tokens, d.output_tokens, d.cost_usd))
        .collect();
    assert_eq!(
        days,
        [(3, 1_150, 15, Some(0.75)), (1, 1, 1, None)],
        "per day: legs, input, output, cost (none when no record was priced)"
    );
    let models = usage.aggregate(&by(GroupBy::Model, "ada")).await.unwrap();
    assert_eq!(models.len(), 2);
    let legs = usage.legs(&account("ada"), None, 10).await.unwrap();
    let ids: Vec<_> = legs.iter().map(|l| l.record.request_id.as_str()).collect();
    assert_eq!(ids, ["5", "4", "3", "1"], "newest first");
    assert_eq!(legs[3].record.input_tokens, 100);
    assert_eq!(legs[3].record.project_id.as_deref(), Some("p"));
}

async fn a_record_settles_its_reservation(f: &Fixture) {
    let usage = &f.store.usage;
    let month = month_of(NOON);
    let hold = Reservation {
        id: "r1".into(),
        user_id: "ada".into(),
        month,
        tokens: 500,
        cost_usd: 0.0,
        expires_at: NOON + 3600,
    };
    assert!(
        usage
            .reserve(&hold, Budgets::tokens(1_000), NOON)
            .await
            .unwrap()
    );
    let state = usage.month_state("ada", month, NOON).await.unwrap();
    assert_eq!((state.used, state.reserved), (0, 500));
    // The budget counts the live reservation: 600 more does not fit.
    let more = Reservation {
        id: "r2".into(),
        tokens: 600,
        ..hold.clone()
    };
    assert!(
        !usage
            .reserve(&more, Budgets::tokens(1_000), NOON)
            .await
            .unwrap()
    );

    let mut settled = record("ada", "1", NOON, "m1", (120, 30));
    settled.reservation = Some("r1".into());
    usage.insert_legs(&[settled]).await.unwrap();
    let state = usage.month_state("ada", month, NOON).await.unwrap();
    assert_eq!(
        (state.used, state.reserved),
        (150, 0),
        "the reservation is gone in the write that counts the tokens"
    );
    assert!(
        usage
            .reserve(&more, Budgets::tokens(1_000), NOON)
            .await
            .unwrap()
    );
}

/// Issue 40: the month's spend is counted with its tokens when records are written, a spend
/// reservation holds USD until its record settles it, and a reservation must fit both budgets.
async fn spend_is_counted_and_reserved_beside_tokens(f: &Fixture) {
    let usage = &f.store.usage;
    let month = month_of(NOON);
    // Two priced records (0.25 each) and one unpriced.
    let mut unpriced = record("dee", "3", NOON, "m1", (10, 10));
    unpriced.cost_usd = None;
    usage
        .insert_legs(&[
            record("dee", "1", NOON, "m1", (100, 10)),
            record("dee", "2", NOON, "m1", (100, 10)),
            unpriced,
        ])
        .await
        .unwrap();
    let state = usage.month_state("dee", month, NOON).await.unwrap();
    assert!((state.spent - 0.5).abs() < 1e-9, "spent {}", state.spent);
    assert_eq!(state.own_spend_budget, None, "no budget of its own yet");
    usage.set_spend_budget("dee", 1.0).await.unwrap();
    let state = usage.month_state("dee", month, NOON).await.unwrap();
    assert_eq!(state.own_spend_budget, Some(1.0));

    let budgets = Budgets {
        tokens: -1,
        spend_usd: 1.0,
    };
    let hold = Reservation {
        id: "s1".into(),
        user_id: "dee".into(),
        month,
        tokens: 1_000_000,
        cost_usd: 0.3,
        expires_at: NOON + 3600,
    };
    assert!(
        usage.reserve(&hold, budgets, NOON).await.unwrap(),
        "0.5 spent + 0.3 fits 1.0; an unlimited token budget ignores the tokens"
    );
    let state = usage.month_state("dee", month, NOON).await.unwrap();
    assert!((state.reserved_usd - 0.3).abs() < 1e-9);
    let more = Reservation {
        id: "s2".into(),
        cost_usd: 0.3,
        ..hold.clone()
    };
    assert!(
        !usage.reserve(&more, budgets, NOON).await.unwrap(),
        "0.5 + 0.3 held + 0.3 passes 1.0"
    );
    // A limited token budget is checked as well as the spend.
    let tokens_too = Budgets {
        tokens: 100,
        spend_usd: 10.0,
    };
    assert!(!usage.reserve(&more, tokens_too, NOON).await.unwrap());
    let mut settled = record("dee", "4", NOON, "m1", (1, 1));
    settled.reservation = Some("s1".into());
    usage.insert_legs(&[settled]).await.unwrap();
    let state = usage.month_state("dee", month, NOON).await.unwrap();
    assert_eq!(
        state.reserved_usd, 0.0,
        "the record settled the spend it held"
    );
    assert!((state.spent - 0.75).abs() < 1e-9);
    assert!(
        !usage.reserve(&more, budgets, NOON).await.unwrap(),
        "0.75 + 0.3 passes 1.0"
    );
    let last = Reservation {
        id: "s3".into(),
        cost_usd: 0.25,
        ..hold.clone()
    };
    assert!(
        usage.reserve(&last, budgets, NOON).await.unwrap(),
        "0.75 + 0.25 is exactly the budget"
    );
}

async fn an_erasure_drops_the_records_of_legs_in_flight(f: &Fixture) {
    let usage = &f.store.usage;
    #[allow(clippy::cast_possible_truncation, reason = "Unix seconds fit i64")]
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let month = month_of(now);
    usage
        .insert_legs(&[
            record("ada", "before", now - 10, "m1", (10, 0)),
            record("bob", "before", now - 10, "m1", (10, 0)),
        ])
        .await
        .unwrap();
    // Ada's memory is erased (her month count stays); Bob's account is deleted (it goes).
    assert_eq!(usage.delete_user_legs("ada", false).await.unwrap(), 1);
    assert_eq!(usage.delete_user_legs("bob", true).await.unwrap(), 1);
    // Legs that started before the erasures and end now, one of them of a third account.
    usage
        .insert_legs(&[
            record("ada", "in-flight", now, "m1", (20, 0)),
            record("bob", "in-flight", now, "m1", (20, 0)),
            record("cy", "in-flight", now, "m1", (20, 0)),
        ])
        .await
        .unwrap();
    assert!(
        usage
            .legs(&account("ada"), None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        usage
            .legs(&account("bob"), None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(usage.legs(&account("cy"), None, 10).await.unwrap().len(), 1);
    let state = |user: &'static str| {
        let usage = usage.clone();
        async move { usage.month_state(user, month, now).await.unwrap().used }
    };
    assert_eq!(
        state("ada").await,
        30,
        "a memory erasure keeps the budget's count"
    );
    assert_eq!(state("bob").await, 0, "an account's deletion drops it");
    assert_eq!(state("cy").await, 20);
}

async fn batches_beside_reservations_keep_the_budget_exact(f: &Fixture) {
    let usage: Arc<dyn UsageStore> = f.store.usage.clone();
    let month = month_of(NOON);
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let usage = usage.clone();
            tokio::spawn(async move {
                for b in 0..5 {
                    let batch: Vec<_> = (0..20)
                        .map(|i| {
                            let user = if i % 2 == 0 { "ada" } else { "bob" };
                            record(user, &format!("{w}-{b}-{i}"), NOON, "m1", (3, 2))
                        })
                        .collect();
                    usage.insert_legs(&batch).await.unwrap();
                }
            })
        })
        .collect();
    // Reservations of 1,000 tokens against a budget of 10,000 while the batches count: the
    // month's tokens are read in the same statement that decides each one.
    let reservers: Vec<_> = (0..20)
        .map(|i| {
            let usage = usage.clone();
            tokio::spawn(async move {
                let hold = Reservation {
                    id: format!("r{i}"),
                    user_id: "cy".into(),
                    month,
                    tokens: 1_000,
                    cost_usd: 0.0,
                    expires_at: NOON + 3600,
                };
                usage
                    .reserve(&hold, Budgets::tokens(10_000), NOON)
                    .await
                    .unwrap()
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let mut granted = 0;
    for r in reservers {
        granted += usize::from(r.await.unwrap());
    }
    assert_eq!(granted, 10, "exactly the budget's worth of reservations");
    // 8 writers × 5 batches × 10 records of 5 tokens each per account.
    assert_eq!(used(usage.as_ref(), "ada").await, 2_000);
    assert_eq!(used(usage.as_ref(), "bob").await, 2_000);
    assert_eq!(
        usage.legs(&account("ada"), None, 500).await.unwrap().len(),
        400
    );
}
