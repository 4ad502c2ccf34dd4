//! Validated values, parsed once at the boundary and trusted afterwards.

use std::fmt;

/// An email address, trimmed and lower-cased (CONTRACT.md, Accounts and sessions).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Email(String);

impl Email {
    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        let email = raw.trim().to_lowercase();
        if email.is_empty() {
            return Err("email is empty");
        }
        if email.chars().count() > 254 {
            return Err("email is longer than 254 characters");
        }
        let mut parts = email.split('@');
        let (Some(local), Some(domain), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err("email needs exactly one @");
        };
        if local.is_empty() || domain.is_empty() {
            return Err("email needs text on both sides of the @");
        }
        let dot_inside = domain
            .find('.')
            .is_some_and(|i| i > 0 && i + 1 < domain.len() && !domain.ends_with('.'));
        if !dot_inside {
            return Err("email domain needs a dot");
        }
        if email.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("email may not contain spaces or control characters");
        }
        Ok(Self(email))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A password that meets the length rule (8 to 256 characters). Never printed.
pub struct Password(String);

impl Password {
    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        let n = raw.chars().count();
        if n < 8 {
            return Err("password must be at least 8 characters");
        }
        if n > 256 {
            return Err("password must be at most 256 characters");
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(***)")
    }
}

/// An account's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    /// Unlimited quota.
    Admin,
}

impl Role {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "user" => Ok(Self::User),
            "admin" => Ok(Self::Admin),
            other => Err(format!("unknown role `{other}`; use user or admin")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn email_rules() {
        assert_eq!(
            Email::parse("  Ada@Example.COM ").unwrap().as_str(),
            "ada@example.com"
        );
        for bad in [
            "",
            "ada",
            "@x.com",
            "ada@",
            "ada@x",
            "a@b@c.com",
            "ada@x.",
            "ada@.com",
            "a da@x.com",
        ] {
            assert!(Email::parse(bad).is_err(), "{bad} accepted");
        }
        let long = format!("{}@x.com", "a".repeat(250));
        assert!(Email::parse(&long).is_err());
    }

    #[test]
    fn password_rules_and_no_leak_in_debug() {
        assert!(Password::parse("short").is_err());
        assert!(Password::parse(&"x".repeat(257)).is_err());
        let p = Password::parse("correct horse").unwrap();
        assert!(!format!("{p:?}").contains("horse"));
    }
}
