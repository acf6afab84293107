-- Secrets every dashboard replica of one database shares, made once when the table is made.
-- proxy_csrf: the key of the CSRF tokens of users signed in through a trusted proxy (they have
-- no session row to hold one), so a form one replica rendered is accepted by another.
-- gen_random_uuid() draws from the server's strong random source (core since Postgres 13):
-- two of them give 244 random bits.
CREATE TABLE web_secrets (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO web_secrets (name, value)
VALUES ('proxy_csrf', replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''));
