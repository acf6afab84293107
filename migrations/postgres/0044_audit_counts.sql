-- Downloads are rolled up per user, page and hour (issue 69): one row counts them, so a
-- user downloading in a loop cannot flood the log past what an administrator can read.
-- Every other entry counts one.
ALTER TABLE audit_log ADD COLUMN count BIGINT NOT NULL DEFAULT 1;
CREATE INDEX audit_log_user_action_at_idx ON audit_log (username, action, at);
