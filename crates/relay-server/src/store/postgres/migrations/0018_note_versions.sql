-- A write version per (user, project), so each instance may keep the notes it injected in memory:
-- a leg reads the version (one indexed row) and reuses what it ranked for the same question at the
-- same version. Every statement that inserts, edits or deletes notes moves the version of each
-- project it touched, in its own transaction, whichever process ran it (remember, another
-- instance, an operator's psql). Versions come from one sequence, so a counter row that is removed
-- and created again never repeats a version an instance may still hold.
CREATE SEQUENCE note_versions;

ALTER TABLE note_counters ADD COLUMN version BIGINT NOT NULL DEFAULT nextval('note_versions');

CREATE FUNCTION relay_notes_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE note_counters c SET version = nextval('note_versions')
    FROM (SELECT DISTINCT user_id, project_id FROM changed) AS p
    WHERE c.user_id = p.user_id AND c.project_id = p.project_id;
    RETURN NULL;
END;
$$;

-- Statement-level, with the rows the statement changed: deleting a user's 10,000 notes moves each
-- of their projects' versions once, not once per note.
CREATE TRIGGER relay_notes_inserted AFTER INSERT ON notes
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION relay_notes_changed();
CREATE TRIGGER relay_notes_deleted AFTER DELETE ON notes
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION relay_notes_changed();
-- An update moves the projects its rows left and the ones they went to (Relay never moves a note,
-- an operator might).
CREATE TRIGGER relay_notes_updated_from AFTER UPDATE ON notes
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION relay_notes_changed();
CREATE TRIGGER relay_notes_updated_to AFTER UPDATE ON notes
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION relay_notes_changed();
