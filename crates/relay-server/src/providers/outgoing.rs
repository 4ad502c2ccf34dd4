//! A provider's request body built over the client's parsed one (`passthrough`): what Relay
//! does not change is written as the client's own bytes, never copied or serialised again.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Range;

use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The client's body as it arrived, and where the value of each top-level field Relay left as
/// it was lies in it: such a field reaches a same-family provider as these bytes. Serialising
/// the parsed value again cost more than parsing it (a 1 MB Claude Code call: 0.52 against
/// 0.39 ms), as its strings are escaped anew.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawBody {
    bytes: Bytes,
    spans: BTreeMap<String, Range<usize>>,
}

impl RawBody {
    /// The fields of `bytes` (a JSON object), each as its span. A body whose fields cannot be
    /// borrowed as they are (an escaped key) keeps no spans: it is serialised as before.
    pub fn of(bytes: Bytes) -> Self {
        let spans = serde_json::from_slice::<BTreeMap<&str, &RawValue>>(&bytes)
            .map(|fields| {
                let start = bytes.as_ptr() as usize;
                fields
                    .into_iter()
                    .map(|(key, value)| {
                        let at = value.get().as_ptr() as usize - start;
                        (key.to_owned(), at..at + value.get().len())
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self { bytes, spans }
    }

    /// Forgets `field`'s bytes: Relay changed its value (the pass-through policy).
    pub fn forget(&mut self, field: &str) {
        self.spans.remove(field);
    }

    /// The bytes of `field`'s value as the client sent them.
    pub fn field(&self, field: &str) -> Option<&[u8]> {
        self.spans
            .get(field)
            .and_then(|span| self.bytes.get(span.clone()))
    }
}

/// A provider's request body: the client's own fields borrowed as they are, and owned copies
/// of only the ones Relay sets or changes, so a large conversation is written straight from
/// the client's bytes (or its parsed body) instead of being copied first.
#[derive(Debug, Default)]
pub struct Outgoing<'a> {
    fields: BTreeMap<Cow<'a, str>, Cow<'a, Value>>,
    /// The client's bytes of the fields still borrowed.
    raw: Option<&'a RawBody>,
}

impl<'a> Outgoing<'a> {
    /// The client's body, borrowed.
    pub fn borrowed(body: &'a Map<String, Value>) -> Self {
        Self {
            fields: body
                .iter()
                .map(|(k, v)| (Cow::Borrowed(k.as_str()), Cow::Borrowed(v)))
                .collect(),
            raw: None,
        }
    }

    /// The client's bytes of `body`'s fields (the same body `borrowed` was given), written for
    /// every field that stays borrowed.
    pub fn with_raw(mut self, raw: &'a RawBody) -> Self {
        self.raw = Some(raw);
        self
    }

    /// A body Relay built (a translation).
    pub fn owned(body: Map<String, Value>) -> Self {
        Self {
            fields: body
                .into_iter()
                .map(|(k, v)| (Cow::Owned(k), Cow::Owned(v)))
                .collect(),
            raw: None,
        }
    }

    /// The body to send.
    pub fn json(&self) -> Result<Vec<u8>, super::ProviderError> {
        self.to_vec()
            .map_err(super::transport::endpoint::unsendable)
    }

    /// The body's JSON: a borrowed field as the client's own bytes where they are known, every
    /// other field serialised.
    pub fn to_vec(&self) -> Result<Vec<u8>, serde_json::Error> {
        let size = self.raw.map_or(256, |r| r.bytes.len() + 256);
        let mut out = Vec::with_capacity(size);
        out.push(b'{');
        for (i, (key, value)) in self.fields.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            serde_json::to_writer(&mut out, key.as_ref())?;
            out.push(b':');
            match (value, self.raw.and_then(|raw| raw.field(key))) {
                (Cow::Borrowed(_), Some(bytes)) => out.extend_from_slice(bytes),
                _ => serde_json::to_writer(&mut out, value.as_ref())?,
            }
        }
        out.push(b'}');
        Ok(out)
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.get(key).map(|v| &**v)
    }

    /// The field to change: copied first when it is still the client's.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.fields.get_mut(key).map(Cow::to_mut)
    }

    pub fn set(&mut self, key: &'static str, value: Value) {
        self.fields.insert(Cow::Borrowed(key), Cow::Owned(value));
    }

    pub fn remove(&mut self, key: &str) -> Option<Value> {
        self.fields.remove(key).map(Cow::into_owned)
    }

    pub fn contains(&self, key: &str) -> bool {
        self.fields.contains_key(key)
    }

    /// The body as a JSON value (tests, and callers that need one).
    pub fn to_value(&self) -> Value {
        self.to_vec()
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// How many fields are Relay's own copies rather than the client's.
    pub fn copied(&self) -> usize {
        self.fields
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
                    self.fields.remove(field);
                }
            }
        }
    }
}
