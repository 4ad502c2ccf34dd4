//! Tests for the safety check, one file per topic.

mod categories;
mod commands;
mod completions;
mod limits;
mod redaction;
mod secrets;
