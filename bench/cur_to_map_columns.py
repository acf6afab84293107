"""Rewrites a generated CUR 2.0 Parquet export the way AWS writes it: `resource_tags`,
`product` (and every other key/value column) as Parquet MAP<string,string> columns instead of
the generator's list<struct<key,value>>. Manifests are copied as they are.

With --head N it keeps the first N rows of each file (a small fixture) and writes
`expected.json` beside the target: sums read back from the MAP file with pyarrow alone (not
with gpuledger's reader), for a test to meet: the unblended total of the non-split lines, and
split + unused per namespace (from the pod ARN) and per `user_client` tag.

usage: python bench/cur_to_map_columns.py SOURCE_EXPORT_ROOT TARGET_EXPORT_ROOT [--head N]
"""
import json
import os
import shutil
import sys

import pyarrow as pa
import pyarrow.parquet as pq

source, target = sys.argv[1], sys.argv[2]
head = int(sys.argv[sys.argv.index("--head") + 1]) if "--head" in sys.argv else None


def plain(t):
    """The type with string_view (as polars writes text) replaced by string."""
    if t == pa.string_view():
        return pa.string()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(plain(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, plain(f.type)) for f in t])
    return t


def as_map(column):
    """list<struct<key, value>> -> map<string, string>, entry for entry."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    entries = column.flatten()
    keys, values = entries.field(0), entries.field(1)
    return pa.MapArray.from_arrays(column.offsets, keys, values, mask=column.is_null())


for folder, _, files in os.walk(source):
    relative = os.path.relpath(folder, source)
    os.makedirs(os.path.join(target, relative), exist_ok=True)
    for name in files:
        src, dst = os.path.join(folder, name), os.path.join(target, relative, name)
        if not name.endswith(".parquet"):
            shutil.copyfile(src, dst)
            continue
        # Read text as plain strings (polars writes string_view, which pyarrow cannot slice).
        stored = pq.read_schema(src)
        table = pq.read_table(src, schema=pa.schema([pa.field(f.name, plain(f.type)) for f in stored]))
        if head is not None:
            table = table.slice(0, head)
        columns = []
        for field, column in zip(table.schema, table.columns):
            listed = pa.types.is_list(field.type) or pa.types.is_large_list(field.type)
            is_pairs = listed and pa.types.is_struct(field.type.value_type)
            column = column.combine_chunks().cast(plain(field.type))
            columns.append(as_map(column) if is_pairs else column)
        names = [f.name for f in table.schema]
        pq.write_table(pa.Table.from_arrays(columns, names=names), dst, compression="snappy")


def expected(paths):
    """Sums of the rewritten files, read back as MAP columns."""
    unblended, namespaces, clients, rows = 0.0, {}, {}, 0
    for path in paths:
        table = pq.read_table(path)
        assert pa.types.is_map(table.schema.field("resource_tags").type), "resource_tags is a MAP"
        for row in table.to_pylist():
            rows += 1
            if row["line_item_operation"] != "EKSPod-EC2":
                unblended += row["line_item_unblended_cost"] or 0.0
                continue
            cost = (row["split_line_item_split_cost"] or 0.0) + (row["split_line_item_unused_cost"] or 0.0)
            namespace = row["line_item_resource_id"].split("/")[2]
            namespaces[namespace] = namespaces.get(namespace, 0.0) + cost
            client = dict(row["resource_tags"] or []).get("user_client", "(none)")
            clients[client] = clients.get(client, 0.0) + cost
    return {"rows": rows, "unblended_total": unblended, "namespaces": namespaces, "clients": clients}


written = [os.path.join(f, n) for f, _, names in os.walk(target) for n in names if n.endswith(".parquet")]
if head is not None:
    with open(os.path.join(target, "expected.json"), "w") as out:
        json.dump(expected(written), out, indent=1, sort_keys=True)
print(json.dumps({"target": target, "files": len(written)}))
