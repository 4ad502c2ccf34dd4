//! Note embeddings as both stores keep them (issue 44): int8 with one scale per vector, in the
//! database (`note_vectors`, migration 0044) and, for a project whose notes are held in memory for
//! injection, beside its index (`VectorSet`), so fusing costs no query beyond one for the vectors
//! written since the last leg.
//!
//! Vectors are L2-normalised before they are quantised, so a cosine is a dot product times the
//! note's scale; int8 keeps 384 dimensions in 384 bytes (float16 would take twice that) and loses
//! well under a hundredth of a cosine.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::domain::NoteId;

/// The ranking question's embedding, L2-normalised, and the model that made it.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryVector {
    pub model: String,
    pub values: Vec<f32>,
}

/// A note to embed: its id and the text the vector is of.
#[derive(Debug, Clone, PartialEq)]
pub struct ToEmbed {
    pub id: NoteId,
    pub text: String,
}

/// A note's embedding as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Quantised {
    pub scale: f32,
    pub bytes: Vec<u8>,
}

/// `v` normalised and quantised to int8; `None` for an empty, zero or non-finite vector.
pub fn quantise(v: &[f32]) -> Option<Quantised> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if v.is_empty() || !norm.is_finite() || norm == 0.0 {
        return None;
    }
    let max = v.iter().fold(0.0f32, |m, x| m.max((x / norm).abs()));
    let scale = max / 127.0;
    let bytes = v
        .iter()
        // In -127..=127 by construction; the cast keeps the two's-complement byte.
        .map(|x| ((x / norm) / scale).round().clamp(-127.0, 127.0) as i8 as u8)
        .collect();
    Some(Quantised { scale, bytes })
}

/// `v` scaled to length 1; `None` when it has no length.
pub fn normalised(mut v: Vec<f32>) -> Option<Vec<f32>> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if v.is_empty() || !norm.is_finite() || norm == 0.0 {
        return None;
    }
    for x in &mut v {
        *x /= norm;
    }
    Some(v)
}

/// A stored vector as read back: `vid` orders writes.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct VectorRow {
    pub vid: i64,
    pub note_id: String,
    pub scale: f32,
    pub vec: Vec<u8>,
}

/// Vectors as the rows a store would read back: quantised, `vid` counting from 1 in order; a
/// vector that cannot be quantised (empty, zero) is left out.
pub fn rows_of<'a>(vectors: impl IntoIterator<Item = (String, &'a [f32])>) -> Vec<VectorRow> {
    vectors
        .into_iter()
        .zip(1..)
        .filter_map(|((note_id, v), vid)| {
            let q = quantise(v)?;
            Some(VectorRow {
                vid,
                note_id,
                scale: q.scale,
                vec: q.bytes,
            })
        })
        .collect()
}

/// One project's vectors of one model, by note id, read up to `upto` (a `vid`).
#[derive(Debug, Default)]
pub struct VectorSet {
    model: String,
    upto: i64,
    by_id: HashMap<String, (f32, Box<[i8]>)>,
}

/// A project's vectors, shared by the successive indexes of that project.
pub type SharedVectors = Arc<Mutex<VectorSet>>;

pub fn lock(v: &SharedVectors) -> std::sync::MutexGuard<'_, VectorSet> {
    v.lock().unwrap_or_else(PoisonError::into_inner)
}

impl VectorSet {
    /// The `vid` to read after for `model`: everything (0) when the set held another model, or
    /// holds far more vectors than the project has notes (deleted notes' vectors, dropped here so
    /// memory stays bounded by the notes held).
    pub fn read_after(&mut self, model: &str, notes: usize) -> i64 {
        if self.model != model || self.by_id.len() > notes.saturating_mul(2) + 64 {
            self.model = model.to_owned();
            self.upto = 0;
            self.by_id.clear();
        }
        self.upto
    }

    /// Adds rows read after `read_after` (an edited note's new vector replaces the old one).
    pub fn add(&mut self, rows: Vec<VectorRow>) {
        for r in rows {
            self.upto = self.upto.max(r.vid);
            let bytes: Box<[i8]> = r.vec.iter().map(|b| *b as i8).collect();
            self.by_id.insert(r.note_id, (r.scale, bytes));
        }
    }

    /// The cosine of the note's vector with `q` (normalised); `None` without one of that length.
    pub fn cosine(&self, note_id: &str, q: &[f32]) -> Option<f64> {
        let (scale, v) = self.by_id.get(note_id)?;
        if v.len() != q.len() {
            return None;
        }
        let dot: f32 = v.iter().zip(q).map(|(a, b)| f32::from(*a) * b).sum();
        Some(f64::from(dot * scale))
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantised_cosines_stay_within_a_hundredth() {
        let a: Vec<f32> = (0..384)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        let b: Vec<f32> = (0..384)
            .map(|i| ((i * 53 % 89) as f32 - 44.0) / 3.0)
            .collect();
        let exact = {
            let (na, nb) = (
                normalised(a.clone()).unwrap(),
                normalised(b.clone()).unwrap(),
            );
            na.iter().zip(&nb).map(|(x, y)| x * y).sum::<f32>()
        };
        let q = quantise(&a).unwrap();
        let mut set = VectorSet::default();
        set.read_after("m", 1);
        set.add(vec![VectorRow {
            vid: 3,
            note_id: "n".into(),
            scale: q.scale,
            vec: q.bytes,
        }]);
        let got = set.cosine("n", &normalised(b).unwrap()).unwrap();
        assert!((got - f64::from(exact)).abs() < 0.01, "{got} vs {exact}");
        assert_eq!(set.read_after("m", 1), 3);
        assert_eq!(
            set.read_after("other", 1),
            0,
            "another model reads all again"
        );
        assert!(set.is_empty());
        assert!(quantise(&[0.0, 0.0]).is_none());
    }
}
