-- Sign-in limits: attempts per account and per address in a window of 15 minutes from the
-- first attempt, taken in one statement before a password is checked, so simultaneous
-- attempts cannot all pass the count (a sign-in that succeeds gives its attempt back).
CREATE TABLE login_attempts (
    scope TEXT NOT NULL,
    subject TEXT NOT NULL,
    window_start BIGINT NOT NULL,
    attempts BIGINT NOT NULL,
    PRIMARY KEY (scope, subject)
);
-- Refused sign-ins, counted per account, address and 15-minute window: one row each, not
-- one per attempt (a flood of wrong passwords once pushed every real event off /admin).
CREATE TABLE login_failures (
    window_start BIGINT NOT NULL,
    username TEXT NOT NULL,
    address TEXT NOT NULL,
    failures BIGINT NOT NULL,
    last_at BIGINT NOT NULL,
    PRIMARY KEY (window_start, username, address)
);
