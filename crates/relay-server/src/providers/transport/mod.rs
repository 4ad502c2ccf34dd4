//! Sending to a provider: where it is and its key (`endpoint`), the HTTP/2 clients its legs share
//! (`lanes`), Relay's own HTTP/1.1 connections to a plain-`http://` provider (`plain`), and turning
//! a refusal into a `ProviderError` (`refusal`). Parsing what comes back is `providers::sse`'s.

pub mod endpoint;
pub mod lanes;
pub mod plain;
pub mod refusal;
