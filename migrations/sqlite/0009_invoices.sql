-- Invoices: each client's billing details, the seller and the one gapless number series,
-- and the issued documents (invoices, credit and debit notes), which never change.
CREATE TABLE client_billing (
    client TEXT NOT NULL PRIMARY KEY,
    details TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- One row: the seller's details (JSON) and the last number the series gave. Issuing takes
-- the next number in the transaction that stores the document, so a failed issue gives its
-- number back and the series has no gaps.
CREATE TABLE invoice_series (
    id BIGINT NOT NULL PRIMARY KEY,
    seller TEXT NOT NULL DEFAULT '{}',
    last_seq BIGINT NOT NULL DEFAULT 0
);
INSERT INTO invoice_series (id) VALUES (1);

-- Append-only: the status of a document (issued, credited, superseded) follows from the
-- notes that refer to it, so no row is ever updated or deleted (triggers refuse it).
CREATE TABLE invoices (
    seq BIGINT NOT NULL PRIMARY KEY,
    number TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    refers_to TEXT NOT NULL DEFAULT '',
    client TEXT NOT NULL,
    period TEXT NOT NULL,
    issued_at BIGINT NOT NULL,
    actor TEXT NOT NULL,
    total_cents BIGINT NOT NULL,
    document TEXT NOT NULL,
    pdf BLOB NOT NULL,
    pdf_sha256 TEXT NOT NULL
);
CREATE INDEX invoices_client_period_idx ON invoices (client, period);

CREATE TRIGGER invoices_never_change BEFORE UPDATE ON invoices
BEGIN
    SELECT RAISE(ABORT, 'issued invoices never change: issue a credit or debit note');
END;

CREATE TRIGGER invoices_never_go BEFORE DELETE ON invoices
BEGIN
    SELECT RAISE(ABORT, 'issued invoices are never deleted: void them with a credit note');
END;
