//! `relay login`, `relay logout` and `relay whoami`.

use std::io::{BufRead, IsTerminal, Write};

use anyhow::Context;
use relay_client::Client;

use super::credentials::{Entry, Store};
use super::{connect, display, explain, server_url};

/// Asks on the terminal (without echo) when there is one, else reads stdin's first line.
fn read_secret(prompt: &str) -> anyhow::Result<String> {
    if std::io::stdin().is_terminal() {
        return rpassword::prompt_password(prompt).context("cannot read the password");
    }
    first_line()
}

fn first_line() -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(line.trim_end_matches(['\r', '\n']).to_owned())
}

pub async fn login(server: Option<String>, email: Option<String>) -> anyhow::Result<()> {
    let server = server_url(server);
    let email = match email {
        Some(e) => e,
        None => {
            eprint!("email: ");
            std::io::stderr().flush()?;
            first_line()?
        }
    };
    let password = read_secret("password: ")?;
    let client = Client::new(server.as_str())?;
    let session = client
        .signin(&email, &password)
        .await
        .map_err(|e| match e.status() {
            Some(401) => anyhow::anyhow!("wrong email or password"),
            _ => explain(&server, e),
        })?;
    let mut store = Store::open()?;
    store.set(
        &server,
        Entry {
            token: session.token,
            email: session.email.clone(),
        },
    );
    store.save()?;
    eprintln!(
        "signed in to {server} as {} (token in {})",
        display::line(&session.email),
        store.path().display()
    );
    Ok(())
}

pub async fn logout(server: Option<String>) -> anyhow::Result<()> {
    let server = server_url(server);
    let mut store = Store::open()?;
    let Some(entry) = store.remove(&server) else {
        eprintln!("not signed in to {server}");
        return Ok(());
    };
    let client = Client::new(server.as_str())?.with_token(Some(entry.token));
    // The token is forgotten even when the relay cannot be reached: signing out must not fail open.
    let signed_out = client.signout().await;
    store.save()?;
    match signed_out {
        Ok(()) => eprintln!("signed out of {server}"),
        Err(e) => eprintln!(
            "forgot the token for {server}; the relay did not confirm: {}",
            display::line(&e.to_string())
        ),
    }
    Ok(())
}

/// What an account may still use, one line per limit, each with its period and reset (issue 42):
/// units (legs) and tokens; a limit that is used up says so, since every leg is then refused.
fn standing(me: &relay_client::wire::account::Me) -> String {
    let reset = |at: &Option<String>| {
        at.as_deref()
            .map_or_else(String::new, |at| format!("; resets {}", display::line(at)))
    };
    // What `used` counts, said for an unlimited account too (it still counts).
    let period = if me.quota_period == "month" {
        "this month"
    } else {
        "in all (never resets by itself)"
    };
    let units = if me.limit < 0 {
        format!("{} used {period}, unlimited", me.used)
    } else {
        let out = if me.remaining == 0 {
            " (used up: legs are refused)"
        } else {
            ""
        };
        format!(
            "{} used of {} {period}, {} left{out}{}",
            me.used,
            me.limit,
            me.remaining,
            reset(&me.quota_resets_at)
        )
    };
    let tokens = if me.token_budget < 0 {
        format!("{} used this month, unlimited", me.tokens_used)
    } else {
        let out = if me.tokens_remaining == 0 {
            " (used up: legs are refused)"
        } else {
            ""
        };
        format!(
            "{} used of {} this month, {} left{out}{}",
            me.tokens_used,
            me.token_budget,
            me.tokens_remaining,
            reset(&me.tokens_resets_at)
        )
    };
    let spend = if me.spend_budget_usd < 0.0 {
        format!("${:.2} this month, unlimited", me.spend_used_usd)
    } else {
        let left = (me.spend_budget_usd - me.spend_used_usd).max(0.0);
        let out = if left <= 0.0 {
            " (used up: legs are refused)"
        } else {
            ""
        };
        format!(
            "${:.2} of ${:.2} this month, ${left:.2} left{out}{}",
            me.spend_used_usd,
            me.spend_budget_usd,
            reset(&me.tokens_resets_at)
        )
    };
    let models = match &me.allowed_models {
        Some(names) if names.is_empty() => "\n  models  none (ask an operator)".to_owned(),
        Some(names) => format!("\n  models  {}", display::line(&names.join(", "))),
        None => String::new(),
    };
    format!("  units   {units}\n  tokens  {tokens}\n  spend   {spend}{models}\n")
}

pub async fn whoami(server: Option<String>) -> anyhow::Result<()> {
    let server = server_url(server);
    let me = connect(&server)?
        .me()
        .await
        .map_err(|e| explain(&server, e))?;
    if me.auth {
        println!(
            "{} ({}) on {server}",
            display::line(&me.email),
            display::line(&me.role.to_string()),
        );
        print!("{}", standing(&me));
    } else {
        println!(
            "open mode on {server}: no accounts; {} legs served",
            me.used
        );
    }
    Ok(())
}
