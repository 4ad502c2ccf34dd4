//! The lexical ranking fused with embeddings (issue 44): each note's lexical score and its
//! vector's cosine with the question are z-scored over the project's notes and added with fixed
//! weights, a note's cosine first raised by a share of its closest neighbour's (as the lexical
//! ranker lends a note its neighbours' words). Scores, not ranks: reciprocal-rank fusion throws away how far ahead a note is, and
//! measured worse on LoCoMo. A note without a vector yet (just written, or its embedding failed)
//! keeps its lexical part and an average dense part.

use super::{LexIndex, Params};
use crate::store::vectors::{QueryVector, VectorSet};
use crate::store::{InjectBudget, Note, relevance};

/// The lexical share of the fused score by default (`Params::lexical_weight`); the rest is the
/// cosine's.
pub const LEXICAL_WEIGHT: f64 = 0.4;

/// The share of its closest neighbour's cosine a note's cosine gains by default
/// (`Params::dense_neighbour_share`): a conversation's turns answer a question together, as they
/// do for the lexical ranker's neighbour words. Chosen on the LoCoMo dev set (BENCHMARKS.md):
/// recall@8 0.754 without, 0.758-0.761 from 0.15 to 0.35, 0.752 at 0.5.
pub const DENSE_NEIGHBOUR_SHARE: f64 = 0.3;

/// Mean and standard deviation of `n` values whose sum and sum of squares are given.
fn spread(sum: f64, squares: f64, n: f64) -> (f64, f64) {
    if n == 0.0 {
        return (0.0, 0.0);
    }
    let mean = sum / n;
    (mean, (squares / n - mean * mean).max(0.0).sqrt())
}

impl LexIndex {
    /// As `inject`, ranked by the fused score when the project does not fit whole.
    pub fn inject_near(
        &self,
        query: &str,
        near: &QueryVector,
        vectors: &VectorSet,
        budget: InjectBudget,
    ) -> Vec<Note> {
        if let Some(all) = self.whole(budget) {
            return all;
        }
        let rows = usize::try_from(relevance::ranked_rows(budget)).unwrap_or(usize::MAX);
        let ranked = self
            .fused(query, &near.values, vectors, &Params::default(), rows)
            .into_iter()
            .filter_map(|(at, _)| Some(self.entries.get(at as usize)?.note.clone()))
            .collect();
        relevance::fill(ranked, budget)
    }

    /// The `top` entries by fused score above the project's average, best first (ties to the
    /// newest). Every note is scored, as a note may match the question's meaning and none of its
    /// words.
    pub fn fused(
        &self,
        query: &str,
        q: &[f32],
        vectors: &VectorSet,
        p: &Params,
        top: usize,
    ) -> Vec<(u32, f64)> {
        let n = self.entries.len();
        if n == 0 || top == 0 {
            return Vec::new();
        }
        let mut lexical = vec![0.0; n];
        let (mut sum, mut squares) = (0.0, 0.0);
        for (at, s) in self.scored(query, p) {
            if let Some(slot) = lexical.get_mut(at as usize) {
                *slot = s;
                sum += s;
                squares += s * s;
            }
        }
        let (lex_mean, lex_sd) = spread(sum, squares, n as f64);
        let own: Vec<Option<f64>> = self
            .entries
            .iter()
            .map(|e| vectors.cosine(e.note.id.as_str(), q))
            .collect();
        let dense: Vec<Option<f64>> = if p.dense_neighbour_share > 0.0 {
            let linked = |i: usize| self.linked_next.get(i).copied().unwrap_or(false);
            (0..n)
                .map(|i| {
                    let c = own[i]?;
                    let before = (i > 0 && linked(i - 1)).then(|| own[i - 1]).flatten();
                    let after = linked(i)
                        .then(|| own.get(i + 1).copied().flatten())
                        .flatten();
                    let near = before.into_iter().chain(after).reduce(f64::max);
                    Some(near.map_or(c, |m| c + p.dense_neighbour_share * m))
                })
                .collect()
        } else {
            own
        };
        let (mut sum, mut squares, mut held) = (0.0, 0.0, 0.0);
        for c in dense.iter().flatten() {
            sum += c;
            squares += c * c;
            held += 1.0;
        }
        let (dense_mean, dense_sd) = spread(sum, squares, held);
        let z = |v: f64, mean: f64, sd: f64| if sd > 0.0 { (v - mean) / sd } else { 0.0 };
        let mut out: Vec<(u32, f64)> = lexical
            .iter()
            .zip(&dense)
            .enumerate()
            .filter_map(|(at, (l, c))| {
                let d = c.map_or(0.0, |c| z(c, dense_mean, dense_sd));
                let s = p.lexical_weight * z(*l, lex_mean, lex_sd) + (1.0 - p.lexical_weight) * d;
                Some((u32::try_from(at).ok()?, s))
            })
            .filter(|(_, s)| *s > 0.0)
            .collect();
        let order = |a: &(u32, f64), b: &(u32, f64)| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0));
        if out.len() > top {
            out.select_nth_unstable_by(top - 1, order);
            out.truncate(top);
        }
        out.sort_by(order);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Author, MemType, NoteId};
    use crate::store::lexical::Row;
    use crate::store::vectors::rows_of;

    fn row(i: i64, text: &str) -> Row {
        Row {
            order: i,
            seq: i,
            note: Note {
                id: NoteId::from_stored(format!("n{i}")),
                project_id: "p".into(),
                note: text.into(),
                author: Author::default(),
                mem_type: MemType::default(),
                // Hours apart: no neighbours.
                created_at: i as f64 * 10_000.0,
            },
        }
    }

    #[test]
    fn a_note_near_in_meaning_outranks_a_word_match() {
        let lex = LexIndex::build(vec![
            row(1, "the deploy script lives in ops"),
            row(2, "we ship releases from the tools folder"),
            row(3, "lunch is at noon"),
            row(4, "the office has a piano"),
        ])
        .unwrap();
        let mut set = VectorSet::default();
        set.read_after("m", 4);
        let axes = [
            [1.0, 0.0, 0.0],
            [0.9, 0.1, 0.0],
            [0.0, 1.0, 0.0],
            [0.0, 0.0, 1.0],
        ];
        set.add(rows_of(
            axes.iter()
                .enumerate()
                .map(|(i, v)| (format!("n{}", i + 1), v.as_slice())),
        ));
        let p = Params::default();
        assert_eq!(lex.ranked("deploy", &p, 8)[0].0, 0);
        // "deploy" is in note 1 alone; the question's vector is closest to note 2's.
        let fused = lex.fused("deploy", &[0.8, 0.2, 0.0], &set, &p, 8);
        assert_eq!(fused.first().map(|f| f.0), Some(0), "the word match leads");
        let near = lex.fused(
            "where is the packaging step",
            &[0.85, 0.15, 0.0],
            &set,
            &p,
            8,
        );
        let ids: Vec<u32> = near.iter().map(|f| f.0).collect();
        assert_eq!(&ids[..2], &[1, 0], "no word matches: meaning decides");
    }

    #[test]
    fn a_note_whose_neighbour_is_near_in_meaning_gains_from_it() {
        // Notes 1 and 2 are neighbours (a minute apart); 3 and 4 are hours from everything.
        let mut rows = vec![
            row(1, "she packed the car"),
            row(2, "the trip was long"),
            row(3, "a lamp on the desk"),
            row(4, "the trip was short"),
        ];
        rows[1].note.created_at = rows[0].note.created_at + 60.0;
        let lex = LexIndex::build(rows).unwrap();
        let mut set = VectorSet::default();
        set.read_after("m", 4);
        let axes = [
            [0.6, 0.8, 0.0],
            [0.5, 0.0, 0.866],
            [0.0, 1.0, 0.0],
            [0.5, 0.0, 0.866],
        ];
        set.add(rows_of(
            axes.iter()
                .enumerate()
                .map(|(i, v)| (format!("n{}", i + 1), v.as_slice())),
        ));
        // No word of the question is in any note: the cosine alone decides. Note 1 is nearest;
        // notes 2 and 4 are equally near, and only 2 has a neighbour (note 1), a near one.
        let q = [1.0, 0.0, 0.0];
        let alone = Params {
            dense_neighbour_share: 0.0,
            ..Params::default()
        };
        let with = Params::default();
        assert!(with.dense_neighbour_share > 0.0);
        let top = |p: &Params| lex.fused("where did they drive", &q, &set, p, 2);
        let without: Vec<u32> = top(&alone).iter().map(|f| f.0).collect();
        assert_eq!(without, [0, 3], "a tie goes to the newest");
        let gained: Vec<u32> = top(&with).iter().map(|f| f.0).collect();
        assert_eq!(gained, [0, 1], "note 2 gains from its neighbour");
    }
}
