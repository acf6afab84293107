"""DuckDB baseline for `gpuledger export focus`: the time DuckDB takes to write the same rows as
Parquet. The rows of gpuledger's export file are loaded into an in-memory table first (not
timed), then `COPY ... TO ... (FORMAT parquet)` is timed, with 2 threads. Prints the rows, the
write's seconds, the load's, and Σ EffectiveCost of the file DuckDB wrote (as a decimal string,
to check it is the same rows) as JSON.

usage: python bench/duckdb_export_baseline.py GPULEDGER_FILE OUT_FILE
"""
import json
import os
import sys
import time

import duckdb

source, out = sys.argv[1], sys.argv[2]
if os.path.exists(out):
    os.remove(out)
con = duckdb.connect()
con.execute("SET threads = 2")
started = time.time()
con.execute(f"CREATE TABLE export AS SELECT * FROM read_parquet('{source}')")
loaded = time.time() - started
started = time.time()
con.execute(f"COPY export TO '{out}' (FORMAT parquet)")
written = time.time() - started
rows = con.execute(f"SELECT count(*) FROM read_parquet('{out}')").fetchone()[0]
effective = con.execute(
    f"SELECT sum(CAST(EffectiveCost AS DECIMAL(38, 9))) FROM read_parquet('{out}')"
).fetchone()[0]
print(json.dumps({"rows": rows, "write_seconds": round(written, 3), "load_seconds": round(loaded, 3),
                  "effective_total": str(effective)}))
