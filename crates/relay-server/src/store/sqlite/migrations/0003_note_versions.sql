-- A write version per (user, project): bumped in the same transaction as every insert, edit or
-- delete of one of its notes, by whichever process writes. An instance keeps a project's notes in
-- memory for injection and compares this number on every leg, so another instance's write is seen
-- at the next leg. Triggers, so no write path can forget it. `rewritten` is the version of the
-- last edit or delete: while it stays, notes were only added, and an index reads just those.
ALTER TABLE note_counters ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE note_counters ADD COLUMN rewritten INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER notes_version_insert AFTER INSERT ON notes BEGIN
    UPDATE note_counters SET version = version + 1
    WHERE user_id = NEW.user_id AND project_id = NEW.project_id;
END;

CREATE TRIGGER notes_version_update AFTER UPDATE ON notes BEGIN
    UPDATE note_counters SET version = version + 1, rewritten = version + 1
    WHERE user_id = OLD.user_id AND project_id = OLD.project_id;
END;

CREATE TRIGGER notes_version_delete AFTER DELETE ON notes BEGIN
    UPDATE note_counters SET version = version + 1, rewritten = version + 1
    WHERE user_id = OLD.user_id AND project_id = OLD.project_id;
END;
