//! Who is calling: the identity every service below the HTTP layer is handed. Its extractor (the
//! token lookup) lives in `http/extract.rs`.

/// The caller in open mode.
pub const LOCAL_USER: &str = "local";

/// Who is calling: the account behind the Bearer token, or `local` in open mode.
#[derive(Debug, Clone)]
pub enum Caller {
    Local,
    User(crate::store::User),
}

impl Caller {
    /// The id notes and quota are stored under.
    pub fn user_id(&self) -> &str {
        match self {
            Self::Local => LOCAL_USER,
            Self::User(u) => &u.id,
        }
    }
}
