//! Many new notes in one transaction: for filling large benchmark projects fast (one `remember`
//! transaction each would take most of a minute for 100,000 notes).

use super::SqliteStore;
use crate::domain::NoteId;
use crate::store::{NewNote, StoreResult};

impl SqliteStore {
    /// Stores `notes` (all of one user and project) in one transaction, numbered after the
    /// project's last id, with their full-text rows; unlike `remember` it does not look for equal
    /// notes already there. Returns the ids given.
    pub async fn insert_notes_bulk(&self, notes: &[NewNote]) -> StoreResult<Vec<NoteId>> {
        self.writer.insert_bulk(notes.to_vec()).await
    }
}
