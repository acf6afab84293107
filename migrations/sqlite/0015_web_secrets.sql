-- Secrets every dashboard replica of one database shares, made once when the table is made.
-- proxy_csrf: the key of the CSRF tokens of users signed in through a trusted proxy (they have
-- no session row to hold one), so a form one replica rendered is accepted by another.
CREATE TABLE web_secrets (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO web_secrets (name, value) VALUES ('proxy_csrf', lower(hex(randomblob(32))));
