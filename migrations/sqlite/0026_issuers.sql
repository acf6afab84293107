-- Who may issue, adjust and void invoices: `finance` (finance and administrators, the
-- default) or `managers` (also agency managers, for the clients their account sees).
ALTER TABLE invoice_series ADD COLUMN issuers TEXT NOT NULL DEFAULT 'finance';
