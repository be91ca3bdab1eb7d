"""What a merge engine costs: merge-on-read and a full optimize of a partial-update table and of an
aggregation table against a deduplicate table holding the same rows.

    python -m benchmarks.merge_engines [--rows 400000] [--commits 5] [--batch 40000] [--rounds 3]

Three tables of ``--rows`` rows and 10 columns (a key and nine BIGINTs) get the same commits:
``--commits`` DataFrame writes of ``--batch`` random existing keys that set 2 of the columns (the
other 8 NULL: a partial update). The aggregation table sums those columns and keeps the last
non-NULL value of the rest. The runs interleave (each round reads every table, then optimizes a
copy of each), so the machine's drift hits all three alike. Figures: absolute seconds (median of the
rounds) and ratios against deduplicate, printed and written to ``benchmarks/results/merge_engines.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time

import numpy as np
import pyarrow as pa

RESULTS = os.path.join(os.path.dirname(__file__), "results")
COLUMNS = [f"c{i}" for i in range(9)]
ENGINES = {
    "deduplicate": "'merge-engine' = 'deduplicate'",
    "partial-update": "'merge-engine' = 'partial-update'",
    "aggregation": "'merge-engine' = 'aggregation', 'fields.c0.aggregate-function' = 'sum', "
    "'fields.c1.aggregate-function' = 'sum'",
}


def build(s, name: str, properties: str, rows: int, commits: int, batch: int) -> None:
    columns = ", ".join(f"{c} BIGINT" for c in COLUMNS)
    s.sql(f"DROP TABLE IF EXISTS bench.{name} PURGE")
    s.sql(
        f"CREATE TABLE bench.{name} (id BIGINT, {columns}, PRIMARY KEY (id)) TBLPROPERTIES ({properties}, "
        "'self-optimizing.enabled' = 'false')"
    )
    load = ", ".join(f"id % {7 + i} AS {c}" for i, c in enumerate(COLUMNS))
    s.sql(f"INSERT OVERWRITE bench.{name} SELECT id, {load} FROM range({rows})")
    rng = np.random.default_rng(11)  # the same commits for every table
    for _ in range(commits):
        ids = rng.choice(rows, size=batch, replace=False)
        frame = {"id": pa.array(ids, pa.int64())}
        for i, c in enumerate(COLUMNS):
            frame[c] = pa.array(rng.integers(0, 100, batch) if i < 2 else [None] * batch, pa.int64())
        s.spark.createDataFrame(pa.table(frame).to_pandas()).write.format("arctic").mode("append").save(
            f"bench.{name}"
        )


def timed(run) -> float:  # noqa: ANN001
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--commits", type=int, default=5)
    parser.add_argument("--batch", type=int, default=40_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", default=os.path.join(RESULTS, "work", "merge_engines"))
    args = parser.parse_args()
    import arctic_sql

    shutil.rmtree(args.work, ignore_errors=True)
    s = arctic_sql.connect(warehouse=args.work)
    s.sql("CREATE DATABASE IF NOT EXISTS bench")
    for name, properties in ENGINES.items():
        build(s, name.replace("-", "_"), properties, args.rows, args.commits, args.batch)
    read: dict[str, list[float]] = {n: [] for n in ENGINES}
    optimize: dict[str, list[float]] = {n: [] for n in ENGINES}
    for _ in range(args.rounds):
        for name in ENGINES:  # a full merge of every row, handed to Spark and dropped there
            table = name.replace("-", "_")
            read[name].append(
                timed(
                    lambda t=table: (
                        s.sql(f"SELECT * FROM bench.{t}").write.format("noop").mode("overwrite").save()
                    )
                )
            )
    for round_ in range(args.rounds):
        for name, properties in ENGINES.items():
            table = f"{name.replace('-', '_')}_o{round_}"  # a fresh copy: optimizing consumes the changes
            build(s, table, properties, args.rows, args.commits, args.batch)
            optimize[name].append(
                timed(
                    lambda t=table: s.sql(
                        f"CALL system.optimize(table => 'bench.{t}', mode => 'full')"
                    ).collect()
                )
            )
            s.sql(f"DROP TABLE bench.{table} PURGE")
    figures = {}
    for label, times in (("merge-on-read", read), ("full optimize", optimize)):
        base = statistics.median(times["deduplicate"])
        for name in ENGINES:
            median = statistics.median(times[name])
            figures[f"{label} {name}"] = {"seconds": round(median, 3), "ratio": round(median / base, 2)}
            print(f"{label:14s} {name:15s} {median:7.3f} s  {median / base:5.2f}x deduplicate")
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "merge_engines.json"), "w") as f:
        json.dump({"arguments": vars(args), "figures": figures}, f, indent=2)


if __name__ == "__main__":
    main()
