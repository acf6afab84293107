-- One-time sign-in codes an operator makes on the command line (`users sign-in-code NAME`),
-- stored hashed: a code lets its user past the account's lockout, so an attacker who fails
-- sign-ins on purpose cannot lock the administrator out (issue 69). Used once; expires.
CREATE TABLE sign_in_codes (
    code_hash TEXT PRIMARY KEY,
    username TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
