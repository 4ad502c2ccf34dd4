//! A provider's request body built over the client's parsed one (`passthrough`): what Relay
//! does not change is serialised from the client's own values, never copied.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// A provider's request body: the client's own fields borrowed as they are, and owned copies
/// of only the ones Relay sets or changes, so a large conversation is serialised straight from
/// the client's parsed body instead of being copied first.
#[derive(Debug, Default, serde::Serialize)]
#[serde(transparent)]
pub struct Outgoing<'a>(BTreeMap<Cow<'a, str>, Cow<'a, Value>>);

impl<'a> Outgoing<'a> {
    /// The client's body, borrowed.
    pub fn borrowed(body: &'a Map<String, Value>) -> Self {
        Self(
            body.iter()
                .map(|(k, v)| (Cow::Borrowed(k.as_str()), Cow::Borrowed(v)))
                .collect(),
        )
    }

    /// A body Relay built (a translation).
    pub fn owned(body: Map<String, Value>) -> Self {
        Self(
            body.into_iter()
                .map(|(k, v)| (Cow::Owned(k), Cow::Owned(v)))
                .collect(),
        )
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key).map(|v| &**v)
    }

    /// The field to change: copied first when it is still the client's.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.0.get_mut(key).map(Cow::to_mut)
    }

    pub fn set(&mut self, key: &'static str, value: Value) {
        self.0.insert(Cow::Borrowed(key), Cow::Owned(value));
    }

    pub fn remove(&mut self, key: &str) -> Option<Value> {
        self.0.remove(key).map(Cow::into_owned)
    }

    pub fn contains(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// The body as a JSON value (tests, and callers that need one).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// How many fields are Relay's own copies rather than the client's.
    pub fn copied(&self) -> usize {
        self.0
            .values()
            .filter(|v| matches!(v, Cow::Owned(_)))
            .count()
    }

    /// `policy::clamp_output` on the few fields it reads, leaving the rest borrowed.
    pub fn clamp_output(&mut self, cap: u32, absent_field: &str) {
        const FIELDS: [&str; 4] = [
            "max_tokens",
            "max_completion_tokens",
            "max_output_tokens",
            "thinking",
        ];
        let mut small = Map::new();
        for field in FIELDS {
            if let Some(v) = self.get(field) {
                small.insert(field.to_owned(), v.clone());
            }
        }
        crate::policy::clamp_output(&mut small, cap, absent_field);
        for field in FIELDS {
            match small.remove(field) {
                Some(v) => self.set(field, v),
                None => {
                    self.0.remove(field);
                }
            }
        }
    }
}
