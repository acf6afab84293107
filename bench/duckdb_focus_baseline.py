"""DuckDB baseline for `gpuledger ingest focus`: load one month of FOCUS Parquet files into an
on-disk database grouped the way gpuledger stores a bill (each bill's totals by billing period,
provider and account; its charges summed per day, sub-account, service, charge and pricing
category, commitment status, region, resource type, unit and tags; and, as gpuledger keeps
them since issue #41, each virtual machine's compute usage per charge period and group less its
tags, with the cluster its tags name: on the benchmark month 1,657,064 periods, coarser than
gpuledger's 3,832,197, which also tell the instance type and GPU model it reads from each SKU),
with 2 threads. Prints
rows, seconds, rows/s and the bill's totals as JSON. Run under `/usr/bin/time` for peak RSS.

usage: python bench/duckdb_focus_baseline.py FOLDER DB_PATH
"""
import json
import os
import sys
import time

import duckdb

folder, db_path = sys.argv[1], sys.argv[2]
if os.path.exists(db_path):
    os.remove(db_path)
files = os.path.join(folder, "*.parquet")
started = time.time()
con = duckdb.connect(db_path)
con.execute("SET threads = 2")
con.execute(f"""
CREATE TABLE bills AS
SELECT BillingPeriodStart, ProviderName, BillingAccountId, any_value(BillingCurrency) AS currency,
       count(*) AS rows_read,
       sum(CAST(BilledCost AS DECIMAL(38, 9))) AS billed, sum(CAST(EffectiveCost AS DECIMAL(38, 9))) AS effective,
       sum(CAST(ListCost AS DECIMAL(38, 9))) AS list, sum(CAST(ContractedCost AS DECIMAL(38, 9))) AS contracted
FROM read_parquet('{files}')
GROUP BY ALL
""")
con.execute(f"""
CREATE TABLE bill_charges AS
SELECT BillingPeriodStart, ProviderName, BillingAccountId, date_trunc('day', ChargePeriodStart) AS day,
       SubAccountId, SubAccountName, ServiceName, ServiceCategory, ChargeCategory, ChargeClass,
       PricingCategory, CommitmentDiscountStatus, RegionId, ResourceType, ConsumedUnit, Tags,
       count(*) AS charges, sum(ConsumedQuantity) AS consumed_quantity,
       sum(CAST(BilledCost AS DECIMAL(38, 9))) AS billed, sum(CAST(EffectiveCost AS DECIMAL(38, 9))) AS effective,
       sum(CAST(ListCost AS DECIMAL(38, 9))) AS list, sum(CAST(ContractedCost AS DECIMAL(38, 9))) AS contracted
FROM read_parquet('{files}')
GROUP BY ALL
""")
con.execute(f"""
CREATE TABLE bill_vm_costs AS
SELECT BillingPeriodStart, ProviderName, BillingAccountId,
       regexp_extract(ResourceId, '/instances/([^/]+)$', 1) AS instance,
       json_extract_string(Tags, '$."goog-k8s-cluster-name"') AS cluster,
       ChargePeriodStart, ChargePeriodEnd,
       SubAccountId, SubAccountName, ServiceName, ServiceCategory, ChargeCategory, ChargeClass,
       PricingCategory, CommitmentDiscountStatus, RegionId, ResourceType, ConsumedUnit,
       count(*) AS charges, sum(ConsumedQuantity) AS consumed_quantity,
       sum(CAST(BilledCost AS DECIMAL(38, 9))) AS billed, sum(CAST(EffectiveCost AS DECIMAL(38, 9))) AS effective,
       sum(CAST(ListCost AS DECIMAL(38, 9))) AS list, sum(CAST(ContractedCost AS DECIMAL(38, 9))) AS contracted
FROM read_parquet('{files}')
WHERE ServiceCategory = 'Compute' AND ChargeCategory = 'Usage' AND ResourceId LIKE '%/instances/%'
GROUP BY ALL
""")
con.close()
seconds = time.time() - started
con = duckdb.connect(db_path, read_only=True)
rows, billed, effective, groups, vm_periods = con.execute(
    "SELECT sum(rows_read), sum(billed), sum(effective), (SELECT count(*) FROM bill_charges), "
    "(SELECT count(*) FROM bill_vm_costs) FROM bills").fetchone()
print(json.dumps({"rows": int(rows), "seconds": round(seconds, 3), "rows_per_second": round(rows / seconds),
                  "billed_total": f"{billed:.6f}", "effective_total": f"{effective:.6f}", "charge_groups": int(groups), "vm_charge_periods": int(vm_periods)}))
