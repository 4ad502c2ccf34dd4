-- Every instance keeps a cache of token hash -> account and listens on `relay_auth`: the statement
-- that removes a session, changes an account's role or limit, or removes an account notifies in its
-- own transaction, so the notification goes out exactly when the change commits, whichever process
-- (`relay users set|delete`, another instance, an operator's psql) made it. `s:<token hash>` names
-- one session; `u:<user id>` an account, whose sessions are all dropped. Admission's
-- `used = used + 1` does not notify: `used` is never served from the cache.
CREATE FUNCTION relay_auth_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'sessions' THEN
        PERFORM pg_notify('relay_auth', 's:' || OLD.token_hash);
    ELSE
        PERFORM pg_notify('relay_auth', 'u:' || OLD.id);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER relay_auth_session_deleted AFTER DELETE ON sessions
    FOR EACH ROW EXECUTE FUNCTION relay_auth_changed();

CREATE TRIGGER relay_auth_user_changed AFTER UPDATE OF role, quota_limit ON users
    FOR EACH ROW
    WHEN (OLD.role IS DISTINCT FROM NEW.role OR OLD.quota_limit IS DISTINCT FROM NEW.quota_limit)
    EXECUTE FUNCTION relay_auth_changed();

CREATE TRIGGER relay_auth_user_deleted AFTER DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION relay_auth_changed();
