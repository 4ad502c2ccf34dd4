-- Issue 44: each note's embedding for `[memory] embeddings`, one row per note, of the model it was
-- embedded with (a changed model re-embeds in the background and replaces the row). Stored as int8
-- with one scale per vector (element = scale * byte), so 384 dimensions take 384 bytes. `vid` grows
-- with every row written, so an instance reads only the vectors written since it last looked.
CREATE TABLE note_vectors (
    vid        INTEGER PRIMARY KEY AUTOINCREMENT,
    note_id    TEXT NOT NULL UNIQUE,
    user_id    TEXT NOT NULL,
    project_id TEXT NOT NULL,
    model      TEXT NOT NULL,
    scale      REAL NOT NULL,
    vec        BLOB NOT NULL
);
CREATE INDEX note_vectors_by_project ON note_vectors(user_id, project_id, model, vid);

-- A vector goes with its note on every delete path (one note, a project, the GDPR cascade) and
-- with its text on an edit: triggers, so no write path can forget it.
CREATE TRIGGER note_vectors_delete AFTER DELETE ON notes BEGIN
    DELETE FROM note_vectors WHERE note_id = OLD.id;
END;

CREATE TRIGGER note_vectors_edit AFTER UPDATE OF note ON notes BEGIN
    DELETE FROM note_vectors WHERE note_id = OLD.id;
END;
