//! The duplicate rule every backend applies the same way: a hash of the folded text narrows the
//! search to a few rows, and equal folded text is what makes a duplicate.

/// The hash stored beside a note (`norm_hash`), of its whitespace-folded text.
pub(crate) fn norm_hash(folded: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(folded.as_bytes()))
}

/// Whether a stored note's text folds to `folded`: the hash only narrows the search, so two notes
/// whose hashes collide are told apart here.
pub(crate) fn folds_to(stored: &str, folded: &str) -> bool {
    stored.split_whitespace().collect::<Vec<_>>().join(" ") == folded
}
