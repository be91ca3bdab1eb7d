"""The merge rule in pyarrow, in one process: the physical limit the Spark plans are measured against.

``merge`` applies arctic-sql's rule (DESIGN "Transactions and order": per key, the change with the
highest transaction wins over older changes and over the base; a winning delete removes the key)
to base and change files read with pyarrow. ``benchmarks/merge_on_read.py`` aggregates its output;
figure L1 of ``benchmarks/optimizing.py`` runs it as its own process over the files a full optimize
reads and writes the merged rows back as Parquet, one file per tree node like the optimizer:

    python -m benchmarks.arrow_merge --plan PLAN.json --out DIR --result RESULT.json

``PLAN.json`` (written by ``benchmarks/systems/arctic.py --optimize``) lists, per tree node, the
base files and the change files (path, transaction, is delete) of the table's current version.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ChangeFile = tuple[str, int, bool]  # path, transaction (sequence number), is a delete file


def local(path: str) -> str:
    return path.removeprefix("file://").removeprefix("file:")


def merge(
    base_files: Sequence[str],
    change_files: Sequence[ChangeFile],
    key: str,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """The merged rows of ``base_files`` and ``change_files`` (``columns``: all when None)."""
    columns = list(columns) if columns is not None else None
    base = (
        pa.concat_tables([pq.read_table(local(p), columns=columns) for p in base_files])
        if base_files
        else None
    )
    if not change_files:
        if base is None:
            raise ValueError("nothing to merge: no base and no change files")
        return base
    parts = []
    for path, txn, is_delete in change_files:
        t = pq.read_table(local(path), columns=columns)
        parts.append(
            t.append_column("_txn", pa.array(np.full(len(t), txn, np.int64))).append_column(
                "_del", pa.array(np.full(len(t), is_delete, np.bool_))
            )
        )
    change = pa.concat_tables(parts, promote_options="permissive").sort_by(
        [(key, "ascending"), ("_txn", "descending")]
    )
    keys = change.column(key).to_numpy()
    first = np.ones(len(keys), dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    newest = change.filter(pa.array(first))
    upserts = newest.filter(pc.invert(newest.column("_del"))).drop_columns(["_txn", "_del"])
    if base is None:
        return upserts
    kept = base.filter(pc.invert(pc.is_in(base.column(key), value_set=newest.column(key))))
    return pa.concat_tables([kept, upserts.select(kept.column_names).cast(kept.schema)])


def run_plan(plan: dict, out: str) -> dict:
    """Merge every node of ``plan`` and write its rows, sorted by key, as one Parquet file under ``out``."""
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    rows = written = 0
    nodes = {}
    for node, files in sorted(plan["nodes"].items(), key=lambda item: int(item[0])):
        t0 = time.perf_counter()
        merged = merge(files["base"], [tuple(c) for c in files["change"]], plan["key"])
        merged = merged.sort_by(plan["key"])
        path = os.path.join(out, f"arctic_node={node}", "part-00000.parquet")
        os.makedirs(os.path.dirname(path))
        pq.write_table(merged, path, compression=plan.get("compression", "snappy"))
        size = os.path.getsize(path)
        nodes[node] = {"rows": merged.num_rows, "bytes": size, "seconds": time.perf_counter() - t0}
        rows += merged.num_rows
        written += size
    return {
        "seconds": time.perf_counter() - started,
        "rows": rows,
        "bytes_written": written,
        "files": len(nodes),
        "nodes": nodes,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--plan", required=True, help="plan JSON: key, compression, nodes {id: {base, change}}"
    )
    parser.add_argument("--out", required=True, help="directory for the merged files (replaced)")
    parser.add_argument("--result", required=True, help="result JSON")
    parser.add_argument("--runs", type=int, default=1, help="timed runs (the figure is their median)")
    args = parser.parse_args(argv)
    with open(args.plan, encoding="utf-8") as f:
        plan = json.load(f)
    runs = [run_plan(plan, args.out) for _ in range(args.runs)]
    times = sorted(r["seconds"] for r in runs)
    with open(args.result, "w", encoding="utf-8") as f:
        json.dump(
            {
                "seconds": times,
                "median_s": times[len(times) // 2],
                **{k: v for k, v in runs[-1].items() if k != "seconds"},
            },
            f,
            indent=1,
        )


if __name__ == "__main__":
    main()
