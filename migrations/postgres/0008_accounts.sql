-- Accounts: local users with a role and, for managers and client users, the clients they
-- may see (a JSON array of client names). Passwords are argon2id PHC strings.
CREATE TABLE users (
    id BIGSERIAL PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    role TEXT NOT NULL,
    clients TEXT NOT NULL DEFAULT '[]',
    password_hash TEXT NOT NULL DEFAULT '',
    disabled BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- Sessions, kept server-side. The cookie holds a random token; only its SHA-256 is stored,
-- so a copy of the database opens no session. Each session has its own CSRF token.
CREATE TABLE sessions (
    token_hash TEXT NOT NULL PRIMARY KEY,
    user_id BIGINT NOT NULL,
    csrf TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    last_seen BIGINT NOT NULL,
    address TEXT NOT NULL DEFAULT ''
);
CREATE INDEX sessions_user_idx ON sessions (user_id);

-- Append-only: who did what, when, from where. Login failures are counted from here for
-- rate limiting.
CREATE TABLE audit_log (
    id BIGSERIAL PRIMARY KEY,
    at BIGINT NOT NULL,
    username TEXT NOT NULL DEFAULT '',
    address TEXT NOT NULL DEFAULT '',
    action TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT ''
);
CREATE INDEX audit_log_action_at_idx ON audit_log (action, at);
