-- Postgres partitions its period tables by period in this migration; SQLite has no
-- partitions and keeps one table each (a period is replaced by DELETE in one transaction).
SELECT 1;
