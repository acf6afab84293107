-- One list of bills for every source (issue 70): the CUR's bill of each period is a row of
-- `bills` too (format `cur`), written in the same transaction as its period. Periods stored
-- before are given theirs here, with the rows and location of the ingest that wrote them.
INSERT INTO bills (period, provider, billing_account, format, currency, source, data_version,
                   rows_read, billed_nanos, effective_nanos, deviations, ingested_at)
SELECT c.period, 'aws', c.billing_account, 'cur', c.currency,
       COALESCE((SELECT r.source FROM ingest_runs r
                  WHERE r.kind = 'cur' AND r.period = c.period AND r.status = 'succeeded'
                    AND r.data_version = c.data_version
                  ORDER BY r.id DESC LIMIT 1), ''),
       c.data_version,
       COALESCE((SELECT r.rows_read FROM ingest_runs r
                  WHERE r.kind = 'cur' AND r.period = c.period AND r.status = 'succeeded'
                    AND r.data_version = c.data_version
                  ORDER BY r.id DESC LIMIT 1), 0),
       c.bill_unblended_micros * 1000, c.bill_amortized_micros * 1000, '{}', c.ingested_at
  FROM cost_periods c
 WHERE NOT EXISTS (SELECT 1 FROM bills b WHERE b.period = c.period AND b.format = 'cur');
