"""DuckDB baseline for `gpuledger ingest cur`: load one month of a generated CUR 2.0 export
into an on-disk table grouped the way gpuledger stores it (split rows by hour, cluster,
namespace, workload, node, instance and resource kind; other cost by day and service), with
2 threads. Prints rows, seconds and rows/s as JSON. Run under `/usr/bin/time -v` for peak RSS.

Reads both layouts: the generator's list<struct<key,value>> tag columns and Parquet MAP
columns as AWS writes them (bench/cur_to_map_columns.py makes the latter from the former).

usage: python bench/duckdb_cur_baseline.py EXPORT_DATA_PERIOD_FOLDER DB_PATH
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
rows = con.execute(f"SELECT count(*) FROM read_parquet('{files}')").fetchone()[0]
tags_type = con.execute(f"SELECT typeof(resource_tags) FROM read_parquet('{files}') LIMIT 1").fetchone()[0]


def tag(key):
    """One tag's value, whichever layout the export uses."""
    if tags_type.startswith("MAP"):
        return f"resource_tags['{key}']"
    return f"map_extract(map_from_entries(resource_tags), '{key}')[1]"


con.execute(f"""
CREATE TABLE pod_costs AS
SELECT date_trunc('hour', line_item_usage_start_date) AS hour,
       split_part(line_item_resource_id, '/', 2) AS cluster,
       split_part(line_item_resource_id, '/', 3) AS namespace,
       coalesce(nullif({tag('aws_eks_workload_name')}, ''), '') AS workload,
       {tag('aws_eks_node')} AS node,
       split_line_item_parent_resource_id AS instance_id,
       CASE WHEN line_item_usage_type LIKE '%Accelerator-Hours' THEN 'gpu'
            WHEN line_item_usage_type LIKE '%vCPU-Hours' THEN 'vcpu' ELSE 'memory' END AS resource,
       sum(split_line_item_split_cost) AS split_cost,
       sum(split_line_item_unused_cost) AS unused_cost,
       sum(split_line_item_public_on_demand_split_cost) AS public_split_cost,
       sum(split_line_item_public_on_demand_unused_cost) AS public_unused_cost
FROM read_parquet('{files}')
WHERE line_item_operation = 'EKSPod-EC2'
GROUP BY ALL
""")
con.execute(f"""
CREATE TABLE other_costs AS
SELECT date_trunc('day', line_item_usage_start_date) AS day, line_item_product_code AS service,
       sum(line_item_unblended_cost) AS unblended_cost
FROM read_parquet('{files}')
WHERE line_item_operation <> 'EKSPod-EC2'
GROUP BY ALL
""")
con.close()
seconds = time.time() - started
print(json.dumps({"rows": rows, "tags": tags_type, "seconds": round(seconds, 2), "rows_per_second": round(rows / seconds)}))
