-- One counter that every change a cached session depends on moves: a signout (or any removal of a
-- session), a change of an account's role or limit, an account's removal. Each process keeps a
-- cache of token hash -> account and reads this one row per request: when it moved, another process
-- (`relay users set|delete`, a second `relay serve` on the same file) changed something, and the
-- cache is dropped before it answers. Admission's `used = used + 1` does not move it: `used` is
-- never served from the cache.
CREATE TABLE auth_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
INSERT INTO auth_version (id, version) VALUES (1, 0);

CREATE TRIGGER auth_version_session_deleted AFTER DELETE ON sessions
BEGIN
    UPDATE auth_version SET version = version + 1 WHERE id = 1;
END;

CREATE TRIGGER auth_version_user_changed AFTER UPDATE OF role, quota_limit ON users
WHEN OLD.role IS NOT NEW.role OR OLD.quota_limit IS NOT NEW.quota_limit
BEGIN
    UPDATE auth_version SET version = version + 1 WHERE id = 1;
END;

CREATE TRIGGER auth_version_user_deleted AFTER DELETE ON users
BEGIN
    UPDATE auth_version SET version = version + 1 WHERE id = 1;
END;
