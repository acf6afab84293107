-- Accounts of every provider (issue 40): an Azure subscription, a Google project or an
-- Oracle compartment of a FOCUS bill beside the CUR's usage accounts.
ALTER TABLE rollup_accounts ADD COLUMN provider TEXT NOT NULL DEFAULT 'aws';
