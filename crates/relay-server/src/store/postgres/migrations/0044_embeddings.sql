-- Issue 44: each note's embedding for `[memory] embeddings`, one row per note, of the model it was
-- embedded with (a changed model re-embeds in the background and replaces the row). Stored as int8
-- with one scale per vector (element = scale * byte), so 384 dimensions take 384 bytes. `vid` grows
-- with every row written, so an instance reads only the vectors written since it last looked.
CREATE TABLE note_vectors (
    vid        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- Deleting a note (one, a project, the GDPR cascade) deletes its vector.
    note_id    TEXT COLLATE "C" NOT NULL UNIQUE REFERENCES notes(id) ON DELETE CASCADE,
    user_id    TEXT NOT NULL,
    project_id TEXT NOT NULL,
    model      TEXT NOT NULL,
    scale      REAL NOT NULL,
    vec        BYTEA NOT NULL
);
CREATE INDEX note_vectors_by_project ON note_vectors(user_id, project_id, model, vid);

-- An edited note's vector is of the old text: it goes, and the note is embedded again.
CREATE FUNCTION relay_note_vector_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM note_vectors WHERE note_id = OLD.id;
    RETURN NULL;
END;
$$;
CREATE TRIGGER relay_note_vectors_edit AFTER UPDATE OF note ON notes
    FOR EACH ROW EXECUTE FUNCTION relay_note_vector_stale();
