//! Accounts below the HTTP layer: password hashing, session tokens, new user ids and the caller's
//! identity. The signup, signin, signout and `GET /v1/me` handlers are in `http/accounts.rs`.

mod caller;
pub mod device;
pub mod password;
pub mod token;

pub use caller::{Caller, LOCAL_USER};
pub use password::Passwords;
pub use token::{bearer_token, new_token, token_hash};

/// A new opaque user id: `u_` + 16 hex.
pub fn new_user_id() -> String {
    let bytes: [u8; 8] = rand::random();
    format!("u_{}", hex::encode(bytes))
}
