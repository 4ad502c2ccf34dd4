//! Store URLs with their credentials hidden, for the start-up summary and logs.

/// A store URL with any password replaced, fit for logs.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            let tail = redact_query(tail);
            if userinfo.contains(':') {
                format!("{scheme}://{user}:***@{host}{tail}")
            } else {
                format!("{scheme}://{user}@{host}{tail}")
            }
        }
        None => format!("{scheme}://{authority}{}", redact_query(tail)),
    }
}

/// `?password=…` in a query string is a credential too.
fn redact_query(tail: &str) -> String {
    let Some((path, query)) = tail.split_once('?') else {
        return tail.to_owned();
    };
    let parts: Vec<String> = query
        .split('&')
        .map(|kv| match kv.split_once('=') {
            Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
            _ => kv.to_owned(),
        })
        .collect();
    format!("{path}?{}", parts.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_hides_passwords_only() {
        assert_eq!(
            redact_url("postgres://bob:hunter2@db:5432/relay"),
            "postgres://bob:***@db:5432/relay"
        );
        assert_eq!(
            redact_url("postgres://bob@db/relay"),
            "postgres://bob@db/relay"
        );
        assert_eq!(
            redact_url("sqlite://relay-data/relay.db"),
            "sqlite://relay-data/relay.db"
        );
        assert_eq!(
            redact_url("postgres://db/relay?user=a&password=b"),
            "postgres://db/relay?user=a&password=***"
        );
    }
}
