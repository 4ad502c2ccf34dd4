//! The words the lexical ranker indexes and searches for: Unicode letter-and-digit runs,
//! lower-cased, stopwords dropped, stemmed with Snowball's English (Porter 2) stemmer, so
//! "migrating" finds "migrations" on both backends alike.

use rust_stemmers::{Algorithm, Stemmer};

use crate::store::relevance;

/// Words longer than this are kept whole: the stemmer's cost grows with the word, and nobody asks
/// for a 60-letter word by another form of it.
const MAX_STEMMED: usize = 40;

/// A stemmer for one pass over some text (creating one costs nothing: it names the algorithm).
pub fn stemmer() -> Stemmer {
    Stemmer::create(Algorithm::English)
}

/// The stem of one lower-case word.
pub fn stem(stemmer: &Stemmer, word: &str) -> String {
    if word.len() > MAX_STEMMED || word.chars().all(|c| c.is_ascii_digit()) {
        return word.to_owned();
    }
    stemmer.stem(word).into_owned()
}

/// The indexed words of `text`, stemmed, in order, repeats kept (they count as term frequency).
pub fn index_terms(stemmer: &Stemmer, text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 2)
        .map(str::to_lowercase)
        .filter(|w| !relevance::is_stopword(w))
        .map(|w| stem(stemmer, &w))
        .collect()
}

/// The stems of the question's searchable words (`relevance::query_terms`), each once, in order.
pub fn query_stems(stemmer: &Stemmer, query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in relevance::query_terms(query) {
        let s = stem(stemmer, &t);
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// The question's entities, stemmed: words written with a capital letter (names, places,
/// acronyms) that are not stopwords. A word that opens the question counts too: questions open
/// with "When", "What" (stopwords) more often than with a name, and a name there is still a name.
pub fn entity_stems(stemmer: &Stemmer, query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in query.split(|c: char| !c.is_alphanumeric()) {
        if !word.chars().next().is_some_and(char::is_uppercase) || word.chars().count() < 2 {
            continue;
        }
        let lower = word.to_lowercase();
        if relevance::is_stopword(&lower) {
            continue;
        }
        let s = stem(stemmer, &lower);
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_join_forms_of_a_word() {
        let s = stemmer();
        assert_eq!(
            index_terms(&s, "Running the migrations; it migrated!"),
            vec!["run", "migrat", "migrat"]
        );
        assert_eq!(
            query_stems(&s, "How do I run migrating tests?"),
            vec!["run", "migrat", "test"]
        );
        assert_eq!(
            index_terms(&s, "café Zürich 4xx"),
            vec!["café", "zürich", "4xx"]
        );
    }

    #[test]
    fn entities_are_capitalised_non_stopwords() {
        let s = stemmer();
        assert_eq!(
            entity_stems(&s, "When did Caroline go to the LGBTQ support group?"),
            vec!["carolin", "lgbtq"]
        );
        assert!(entity_stems(&s, "what is it").is_empty());
    }
}
