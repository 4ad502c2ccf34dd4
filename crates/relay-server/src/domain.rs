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

/// The door a call came in by: Relay's native agent route or one of the compatible APIs. One
/// value says it all: the usage record's route, the API family a same-family provider speaks
/// (and the pass-through policy reads), and the error shape a refusal takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Door {
    /// `POST /v1/agent/stream`, Relay's own NDJSON.
    #[default]
    Agent,
    /// OpenAI Chat Completions (`POST /v1/chat/completions`).
    ChatCompletions,
    /// Anthropic Messages (`POST /v1/messages`).
    Messages,
    /// OpenAI Responses (`POST /v1/responses`).
    Responses,
}

impl Door {
    pub const ALL: [Self; 4] = [
        Self::Agent,
        Self::ChatCompletions,
        Self::Messages,
        Self::Responses,
    ];

    /// The name the usage ledger stores and reports.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::ChatCompletions => "chat_completions",
            Self::Messages => "messages",
            Self::Responses => "responses",
        }
    }

    /// The door a stored name stands for.
    pub fn parse(stored: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.as_str() == stored)
    }

    /// The provider kind (`Provider::kind`) that speaks this door's API natively; the native
    /// route has none (every provider gets a translation of it).
    pub const fn provider_kind(self) -> Option<&'static str> {
        match self {
            Self::Agent => None,
            Self::ChatCompletions => Some("openai"),
            Self::Messages => Some("anthropic"),
            Self::Responses => Some("openai_responses"),
        }
    }

    /// Whether a provider of `kind` speaks this door's API (the same family).
    pub fn spoken_by(self, kind: &str) -> bool {
        self.provider_kind() == Some(kind)
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

/// A project id: 1 to 128 characters of `[A-Za-z0-9._-]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProjectId(String);

impl ProjectId {
    pub fn parse(raw: &str) -> Result<Self, String> {
        if raw.is_empty() || raw.len() > 128 {
            return Err("project_id must be 1 to 128 characters".into());
        }
        if !raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            return Err("project_id may contain only letters, digits, '.', '_' and '-'".into());
        }
        Ok(Self(raw.to_owned()))
    }

    /// `project_id` or its alias `project`; both given and different is an error.
    pub fn from_pair(
        project_id: Option<&str>,
        project: Option<&str>,
    ) -> Result<Option<Self>, String> {
        match (project_id, project) {
            (Some(a), Some(b)) if a != b => {
                Err("project_id and its alias project are both given and differ".into())
            }
            (Some(p), _) | (None, Some(p)) => Self::parse(p).map(Some),
            (None, None) => Ok(None),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Note text: trimmed, not empty, at most 16 KiB of UTF-8.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteText(String);

/// The longest note, in UTF-8 bytes.
pub const MAX_NOTE_BYTES: usize = 16 * 1024;

impl NoteText {
    pub fn parse(raw: &str, field: &str) -> Result<Self, String> {
        let text = raw.trim();
        if text.is_empty() {
            return Err(format!("{field} is empty"));
        }
        // PostgreSQL cannot store NUL and the others garble a terminal: both stores refuse them.
        if text
            .chars()
            .any(|c| c.is_ascii_control() && !matches!(c, '\t' | '\n' | '\x7f'))
        {
            return Err(format!(
                "{field} may not contain control characters other than tab and newline"
            ));
        }
        if text.len() > MAX_NOTE_BYTES {
            return Err(format!(
                "{field} is longer than 16 KiB ({} bytes)",
                text.len()
            ));
        }
        Ok(Self(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The text with runs of whitespace folded to one space: two notes with the same folded text
    /// are duplicates.
    pub fn folded(&self) -> String {
        self.0.split_whitespace().collect::<Vec<_>>().join(" ")
    }
}

/// A note's id: `mem#<user>#<project>#<n>`, numbered per (user, project) by the store.
///
/// Parsed from a request path or body, any text without control characters is an id that can be
/// looked up (it names no note unless the store issued it); no stored id holds a control character
/// (PostgreSQL cannot even compare against a NUL), so `parse` turns such text away.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NoteId(String);

impl NoteId {
    /// `None` when `raw` cannot name a stored note.
    pub fn parse(raw: &str) -> Option<Self> {
        (!raw.chars().any(char::is_control)).then(|| Self(raw.to_owned()))
    }

    /// The id of the `seq`-th note of (user, project).
    pub fn issue(user_id: &str, project_id: &str, seq: i64) -> Self {
        Self(format!("mem#{user_id}#{project_id}#{seq}"))
    }

    /// An id read back from the store, which only holds ids it issued.
    pub fn from_stored(id: String) -> Self {
        Self(id)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for NoteId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An id compares with the text it was parsed from.
impl PartialEq<&str> for NoteId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// A note's author: at most 64 characters, no control characters; `user` when absent or blank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Author(String);

impl Author {
    pub fn parse(raw: Option<&str>) -> Result<Self, String> {
        let author = raw
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .unwrap_or("user");
        if author.chars().count() > 64 {
            return Err("author is longer than 64 characters".into());
        }
        if author.chars().any(char::is_control) {
            return Err("author may not contain control characters".into());
        }
        Ok(Self(author.to_owned()))
    }

    /// An author read back from the store, which only holds parsed ones.
    pub fn from_stored(author: String) -> Self {
        Self(author)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

/// What a note gets when the request names no author.
impl Default for Author {
    fn default() -> Self {
        Self("user".to_owned())
    }
}

/// A note's kind: one of `relay_wire::memory::MEM_TYPES`; `note` when absent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemType(String);

impl MemType {
    pub fn parse(raw: Option<&str>) -> Result<Self, String> {
        let t = raw.unwrap_or("note");
        if relay_wire::memory::MEM_TYPES.contains(&t) {
            Ok(Self(t.to_owned()))
        } else {
            Err(format!(
                "mem_type `{t}` is not one of {}",
                relay_wire::memory::MEM_TYPES.join(", ")
            ))
        }
    }

    /// A kind read back from the store, which only holds parsed ones.
    pub fn from_stored(mem_type: String) -> Self {
        Self(mem_type)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

/// What a note gets when the request names no kind.
impl Default for MemType {
    fn default() -> Self {
        Self("note".to_owned())
    }
}

#[cfg(test)]
mod note_tests {
    use super::*;

    #[test]
    fn project_ids() {
        assert!(ProjectId::parse("a1b2c3d4e5f6").is_ok());
        assert!(ProjectId::parse("my.project_v2-x").is_ok());
        for bad in ["", "has space", "a#b", "ü", &"p".repeat(129)] {
            assert!(ProjectId::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            ProjectId::from_pair(None, Some("p"))
                .unwrap()
                .unwrap()
                .as_str(),
            "p"
        );
        assert!(ProjectId::from_pair(Some("p"), Some("q")).is_err());
        assert!(ProjectId::from_pair(Some("p"), Some("p")).is_ok());
        assert!(ProjectId::from_pair(None, None).unwrap().is_none());
    }

    #[test]
    fn note_text_rules() {
        assert_eq!(NoteText::parse("  hi \n", "note").unwrap().as_str(), "hi");
        assert!(NoteText::parse(" \n\t ", "note").is_err());
        assert!(NoteText::parse(&"x".repeat(MAX_NOTE_BYTES + 1), "note").is_err());
        assert!(NoteText::parse(&"x".repeat(MAX_NOTE_BYTES), "note").is_ok());
        assert_eq!(
            NoteText::parse("a  b\n\tc", "note").unwrap().folded(),
            "a b c"
        );
    }

    #[test]
    fn defaults_are_what_an_absent_field_parses_to() {
        assert_eq!(Author::default(), Author::parse(None).unwrap());
        assert_eq!(MemType::default(), MemType::parse(None).unwrap());
    }

    #[test]
    fn note_ids() {
        let issued = NoteId::issue("u_1", "p1", 3);
        assert_eq!(issued.as_str(), "mem#u_1#p1#3");
        assert_eq!(NoteId::parse("mem#u_1#p1#3"), Some(issued));
        // Any other text is an id that may name no note; control characters never do.
        assert!(NoteId::parse("not-an-id").is_some());
        for bad in ["mem#u#p#1\0", "a\nb", "\u{7f}"] {
            assert!(NoteId::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn authors() {
        assert_eq!(Author::parse(None).unwrap().as_str(), "user");
        assert_eq!(Author::parse(Some("  ")).unwrap().as_str(), "user");
        assert_eq!(Author::parse(Some(" claude ")).unwrap().as_str(), "claude");
        assert!(Author::parse(Some(&"é".repeat(64))).is_ok());
        assert_eq!(
            Author::parse(Some(&"a".repeat(65))).unwrap_err(),
            "author is longer than 64 characters"
        );
        assert_eq!(
            Author::parse(Some("a\u{1b}b")).unwrap_err(),
            "author may not contain control characters"
        );
    }

    #[test]
    fn mem_types() {
        assert_eq!(MemType::parse(None).unwrap().as_str(), "note");
        for t in relay_wire::memory::MEM_TYPES {
            assert_eq!(MemType::parse(Some(t)).unwrap().as_str(), t);
        }
        let e = MemType::parse(Some("Note")).unwrap_err();
        assert!(e.starts_with("mem_type `Note` is not one of note"), "{e}");
        assert!(MemType::parse(Some("")).is_err());
    }
}
