-- A notification is delivered some time after the change commits: a request that reaches another
-- instance in that gap would be answered from a cache the notification has not evicted yet (seen:
-- `relay users set` then the very next request on the other instance still had the old role). So
-- every change that notifies also moves one version row in the same transaction and names the new
-- version in its payload (`<version> s:<token hash>`, `<version> u:<user id>`). A request reads the
-- version (one batched primary-key read) and trusts the cache only when its listener has applied
-- that version; versions are handed out under the row's lock, so they arrive in commit order.
CREATE TABLE auth_version (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    version BIGINT NOT NULL
);
INSERT INTO auth_version (id, version) VALUES (1, 0);

CREATE OR REPLACE FUNCTION relay_auth_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v BIGINT;
BEGIN
    UPDATE auth_version SET version = version + 1 WHERE id = 1 RETURNING version INTO v;
    IF TG_TABLE_NAME = 'sessions' THEN
        PERFORM pg_notify('relay_auth', v || ' s:' || OLD.token_hash);
    ELSE
        PERFORM pg_notify('relay_auth', v || ' u:' || OLD.id);
    END IF;
    RETURN NULL;
END;
$$;
