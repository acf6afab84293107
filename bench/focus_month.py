"""A large FOCUS 1.0 month for `scripts/bench-focus`: Google Cloud's FOCUS export of a GKE
fleet with cost allocation on, as Parquet files of 1,000,000 rows each in one folder (the
layout of the table exported from BigQuery). Each row is one SKU (cores, memory, GPUs) of one
node for one hour, given to one namespace (or `kube:unallocated`) with its pods' client label:
the shape that makes Google's export the largest of the four providers'.

Costs are whole micro-dollars written as doubles, so their exact sums are known: the script
prints the month's rows and Σ BilledCost / EffectiveCost / ListCost as decimal strings (JSON on
stdout) for the benchmark to check both tools against. Deterministic for a given row count.

usage: python bench/focus_month.py OUT_FOLDER [ROWS]   (default 10,000,000)
"""
import json
import os
import sys
from datetime import datetime, timezone

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

out = sys.argv[1]
rows = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000_000
per_file = 1_000_000
account = "01A7C3-5B9D2E-4F6081"
folder = os.path.join(out, f"gcp_billing_export_focus_{account.replace('-', '_')}")
os.makedirs(folder, exist_ok=True)

start = int(datetime(2026, 10, 1, tzinfo=timezone.utc).timestamp())
end = int(datetime(2026, 11, 1, tzinfo=timezone.utc).timestamp())
hours = (end - start) // 3600
projects = [("agency-gpu-us", "agency-gpu-us"), ("agency-gpu-eu", "agency-gpu-eu"), ("agency-batch", "agency-batch")]
regions = ["us-central1", "europe-west4", "us-east4"]
clusters = ["gke-central", "gke-west", "gke-batch"]
# (SKU description, unit, µ$ per hour for one node's share, GPU model or "")
skus = [
    ("A2 Instance Core running in Americas", "Hours", 31_611, ""),
    ("A2 Instance Ram running in Americas", "Gibibyte Hours", 4_237, ""),
    ("Nvidia Tesla A100 GPU running in Americas", "Hours", 2_933_908, "A100"),
    ("G2 Instance Core running in Americas", "Hours", 24_997, ""),
    ("G2 Instance Ram running in Americas", "Gibibyte Hours", 2_929, ""),
    ("Nvidia L4 GPU running in Americas", "Hours", 560_040, "L4"),
    ("E2 Instance Core running in Americas", "Hours", 21_811, ""),
    ("E2 Instance Ram running in Americas", "Gibibyte Hours", 2_923, ""),
]
namespaces = [f"{client}-{app}" for client in ("acme", "globex", "initech", "umbrella", "hooli", "stark")
              for app in ("llm", "train", "rag", "vision", "batch")] + ["kube-system", "monitoring", "kube:unallocated"]
pricing = ["Standard", "Dynamic", "Committed"]
nodes = 400

rng = np.random.default_rng(20261001)
carried = np.zeros(0, dtype=np.int64)
totals = {"billed": 0, "effective": 0, "list": 0}
written = 0
part = 0
while written < rows:
    n = min(per_file, rows - written)
    index = np.arange(written, written + n)
    hour = index * hours // rows
    node = rng.integers(0, nodes, n)
    sku = rng.integers(0, len(skus), n)
    ns = rng.integers(0, len(namespaces), n)
    price = rng.choice(3, n, p=[0.6, 0.3, 0.1])
    project = node % len(projects)
    share = rng.integers(1, 1_000, n)
    # No two rows alike in every value (gpuledger refuses a row twice in a delivery): a row
    # equal to an earlier one of its hour, in this file or the last hour of the one before,
    # takes the next share until none is.
    while True:
        key = ((((hour * nodes + node) * len(skus) + sku) * len(namespaces) + ns) * 3 + price) * 1_000 + share
        repeated = np.ones(n, dtype=bool)
        repeated[np.unique(key, return_index=True)[1]] = False
        repeated |= np.isin(key, carried)
        if not repeated.any():
            break
        share = np.where(repeated, share % 999 + 1, share)
    carried = key[hour == hour[-1]]
    base = np.array([s[2] for s in skus], dtype=np.int64)[sku]
    list_micros = base * share // 1_000 + 1
    factor = np.array([1_000, 350, 630])[price]
    effective_micros = list_micros * factor // 1_000
    billed_micros = np.where(price == 2, 0, effective_micros)
    totals["billed"] += int(billed_micros.sum())
    totals["effective"] += int(effective_micros.sum())
    totals["list"] += int(list_micros.sum())
    quantity = share / 1_000.0

    def dictionary(indices, values, mask=None):
        return pa.DictionaryArray.from_arrays(
            pa.array(indices, pa.int32(), mask=mask), pa.array(values)).cast(pa.string())

    uncommitted = price != 2

    def constant(value):
        return dictionary(np.zeros(n, dtype=np.int32), [value])

    charge_start = (start + hour * 3600) * 1000
    tag_values = [json.dumps({"goog-k8s-cluster-name": clusters[p], "k8s-namespace": name,
                              **({"k8s-label/client": name.split("-")[0]} if "-" in name and ":" not in name else {})},
                             sort_keys=True)
                  for p in range(len(projects)) for name in namespaces]
    table = pa.table({
        "BilledCost": pa.array(billed_micros / 1e6),
        "EffectiveCost": pa.array(effective_micros / 1e6),
        "ListCost": pa.array(list_micros / 1e6),
        "ContractedCost": pa.array(effective_micros / 1e6),
        "BillingCurrency": constant("USD"),
        "BillingAccountId": constant(account),
        "BillingAccountName": constant("Agency billing"),
        "BillingPeriodStart": pa.array(np.full(n, start * 1000), pa.timestamp("ms", tz="UTC")),
        "BillingPeriodEnd": pa.array(np.full(n, end * 1000), pa.timestamp("ms", tz="UTC")),
        "ChargePeriodStart": pa.array(charge_start, pa.timestamp("ms", tz="UTC")),
        "ChargePeriodEnd": pa.array(charge_start + 3_600_000, pa.timestamp("ms", tz="UTC")),
        "ChargeCategory": constant("Usage"),
        "ChargeClass": pa.nulls(n, pa.string()),
        "ChargeFrequency": constant("Usage-Based"),
        "ChargeDescription": dictionary(sku, [s[0] for s in skus]),
        "PricingCategory": dictionary(price, pricing),
        "CommitmentDiscountId": dictionary(np.zeros(n, dtype=np.int32), [f"projects/{account}/commitments/cud-g2"], uncommitted),
        "CommitmentDiscountType": dictionary(np.zeros(n, dtype=np.int32), ["Resource-based CUD"], uncommitted),
        "CommitmentDiscountStatus": dictionary(np.zeros(n, dtype=np.int32), ["Used"], uncommitted),
        "ConsumedQuantity": pa.array(quantity),
        "ConsumedUnit": dictionary(sku, [s[1] for s in skus]),
        "PricingQuantity": pa.array(quantity),
        "PricingUnit": dictionary(sku, [s[1] for s in skus]),
        "ProviderName": constant("Google Cloud"),
        "PublisherName": constant("Google Cloud"),
        "InvoiceIssuerName": constant("Google Cloud"),
        "RegionId": dictionary(project, regions),
        # Compute Engine's form: gpuledger keeps each VM's cost per hour (what it splits).
        "ResourceId": pa.array([
            f"//compute.googleapis.com/projects/{projects[i % len(projects)][0]}/zones/{regions[i % len(projects)]}-a/instances/gke-node-{i:04d}"
            for i in range(nodes)
        ]).take(pa.array(node)),
        "ResourceType": constant("Compute Instance"),
        "ServiceName": constant("Compute Engine"),
        "ServiceCategory": constant("Compute"),
        "SubAccountId": dictionary(project, [p[0] for p in projects]),
        "SubAccountName": dictionary(project, [p[1] for p in projects]),
        "Tags": dictionary(project * len(namespaces) + ns, tag_values),
    })
    pq.write_table(table, os.path.join(folder, f"2026-10-{part:012d}.parquet"), store_schema=False)
    written += n
    part += 1
    print(f"focus_month: {written:,} of {rows:,} rows", file=sys.stderr)

micros = lambda v: f"{v // 1_000_000}.{v % 1_000_000:06d}"
print(json.dumps({"folder": folder, "rows": rows, "billed_total": micros(totals["billed"]),
                  "effective_total": micros(totals["effective"]), "list_total": micros(totals["list"])}))
