"""History reads on the upsert-stream workload: time travel and incremental reads against the current version.

Both systems load the standard workload (``benchmarks.datagen``) and apply its C commits the way
``benchmarks.upsert_stream`` does (arctic-sql: one MERGE INTO per commit; delta-rs: one
``DeltaTable.merge`` per commit, on a table created with ``delta.enableChangeDataFeed``). Then, per
system, median of 3 timed runs after one untimed one:

- **H0** current: the R1 aggregate (``status, count(*), sum(amount)``) over the current version;
- **H1** time travel: the same aggregate over the version 20 commits back
  (arctic-sql ``VERSION AS OF v``; delta-rs ``DeltaTable(path, version=v)``);
- **H2** incremental: ``_change_type, count(*), sum(amount)`` over the changes of the last 10 commits
  (arctic-sql ``VERSION BETWEEN v-10 AND v``: the last change per key; delta-rs ``load_cdf`` from
  v-9 to v: every change row of every commit, pre- and post-images included).

Figures: H1/H0 and H2/H0 per system, and arctic-sql/delta-rs for H1 and H2. arctic-sql's session is
warmed up first (``benchmarks.systems.arctic.start``). Results: ``benchmarks/results/history.json``.

    .venv/bin/python -m benchmarks.history --scale 0.1            # 200k rows, 30 commits of 2k rows
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import traceback

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks import datagen
from benchmarks.systems import arctic as arctic_system
from benchmarks.systems import delta as delta_system
from benchmarks.systems.common import R1_SQL, Result, arrow_r1, stopwatch, time_r1
from benchmarks.upsert_stream import RESULTS, machine, ratio, source_tree, versions

BACK = 20  # H1: the version this many commits back
SPAN = 10  # H2: the changes of this many commits
CHANGES_SQL = (
    "SELECT _change_type, count(*) AS n, sum(amount) AS amount FROM {table} "
    "VERSION BETWEEN {start} AND {end} GROUP BY _change_type"
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.history",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--scale", type=float, default=0.1, help="N0 = 2,000,000 x scale rows (default 0.1)")
    parser.add_argument(
        "--commits",
        type=int,
        default=30,
        help=f"number of commits C (default 30, at least {BACK}: the version {BACK} back then "
        "still has change data of its own)",
    )
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--work", default=os.path.join(RESULTS, "work"), help="data and table directory")
    parser.add_argument("--out", default=os.path.join(RESULTS, "history.json"))
    args = parser.parse_args(argv)
    if args.commits < BACK:
        parser.error(f"--commits must be at least {BACK}")
    return args


def run_arctic(data: str, run_dir: str) -> dict:
    result = Result(os.path.join(run_dir, "arctic.json"), "arctic-sql", data)
    s = arctic_system.start(result, run_dir, data)
    table = arctic_system.TABLE
    arctic_system.load(s, result, table, data)
    for index, path in enumerate(result.batches):
        result.doc["commit_s"].append(arctic_system.merge(s, table, path))
        print(
            f"[arctic-sql] commit {index + 1}/{len(result.batches)}: {result.doc['commit_s'][-1]:.2f} s",
            flush=True,
        )
    latest = s.sql(f"SELECT get_latest_version('{table}')").collect()[0][0]
    back = s.sql(f"SELECT get_latest_version('{table}', {BACK + 1})").collect()[0][0]
    span_start = s.sql(f"SELECT get_latest_version('{table}', {SPAN + 1})").collect()[0][0]
    result["versions_read"] = {"latest": latest, "time_travel": back, "incremental": [span_start, latest]}

    def query(sql: str):
        return lambda: [tuple(r) for r in s.sql(sql).collect()]

    time_r1(result, query(R1_SQL.format(table=table)), key="h0_s")
    time_r1(result, query(R1_SQL.format(table=f"{table} VERSION AS OF {back}")), key="h1_s")
    time_r1(result, query(CHANGES_SQL.format(table=table, start=span_start, end=latest)), key="h2_s")
    result.finish()
    s.stop()
    return result.doc


def _changes_aggregate(reader: pa.RecordBatchReader) -> list[tuple]:
    changes = pa.table(
        reader.read_all()
    )  # delta-rs hands out arro3 tables: convert through the Arrow C stream
    grouped = changes.group_by("_change_type").aggregate([([], "count_all"), ("amount", "sum")])
    return sorted(tuple(row.values()) for row in grouped.to_pylist())


def run_delta(data: str, run_dir: str) -> dict:
    import deltalake
    from deltalake import DeltaTable, write_deltalake

    result = Result(os.path.join(run_dir, "delta.json"), "delta-rs", data)
    result["versions"] = {"deltalake": deltalake.__version__}
    path = os.path.join(run_dir, "orders")
    write_deltalake(
        path,
        pq.read_table(datagen.load_path(data)),
        mode="overwrite",
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    for batch_file in result.batches:
        batch = pq.read_table(batch_file)
        with stopwatch() as t:
            delta_system.merge(path, batch)
        result.doc["commit_s"].append(t())
    latest = DeltaTable(path).version()
    back, first = latest - BACK, latest - SPAN + 1  # Delta's CDF range is inclusive at both ends
    result["versions_read"] = {"latest": latest, "time_travel": back, "incremental": [first, latest]}
    columns = ["status", "amount"]
    time_r1(result, lambda: arrow_r1(DeltaTable(path).to_pyarrow_table(columns=columns)), key="h0_s")
    time_r1(
        result, lambda: arrow_r1(DeltaTable(path, version=back).to_pyarrow_table(columns=columns)), key="h1_s"
    )
    time_r1(
        result,
        lambda: _changes_aggregate(
            DeltaTable(path).load_cdf(
                starting_version=first, ending_version=latest, columns=["amount", "_change_type"]
            )
        ),
        key="h2_s",
    )
    result.finish()
    return result.doc


def figures(doc: dict) -> dict:
    med = {
        name: {k: statistics.median(r[k]) for k in ("h0_s", "h1_s", "h2_s") if r.get(k)}
        for name, r in doc["systems"].items()
        if not r.get("errors")
    }
    out = {}
    for name, m in med.items():
        out[name] = {
            **m,
            "h1_over_h0": ratio(m.get("h1_s"), m.get("h0_s")),
            "h2_over_h0": ratio(m.get("h2_s"), m.get("h0_s")),
        }
    if "arctic-sql" in med and "delta-rs" in med:
        out["arctic_over_delta"] = {
            k: ratio(med["arctic-sql"].get(k), med["delta-rs"].get(k)) for k in ("h0_s", "h1_s", "h2_s")
        }
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workload = datagen.Workload(args.scale, args.commits, args.seed)
    data = datagen.generate(workload, args.work)
    doc = {
        "benchmark": "history",
        "machine": machine(),
        "versions": versions(),
        "source": source_tree(),
        "parameters": {
            "scale": args.scale,
            "commits": args.commits,
            "seed": args.seed,
            "rows": workload.initial_rows,
            "batch_rows": workload.batch_rows,
            "back": BACK,
            "span": SPAN,
        },
        "loadavg_before": os.getloadavg(),
        "systems": {},
    }
    for name, run in (("arctic-sql", run_arctic), ("delta-rs", run_delta)):
        run_dir = os.path.join(args.work, f"history-{name}")
        shutil.rmtree(run_dir, ignore_errors=True)
        os.makedirs(run_dir)
        print(f"--- {name}", flush=True)
        try:
            doc["systems"][name] = run(data, run_dir)
        except Exception:  # noqa: BLE001 - recorded; the other system still runs
            doc["systems"][name] = {"errors": [traceback.format_exc(limit=8)]}
            print(doc["systems"][name]["errors"][0], flush=True)
    doc["loadavg_after"] = os.getloadavg()
    doc["figures"] = figures(doc)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, default=str)
    print(json.dumps(doc["figures"], indent=1))
    errors = [e for r in doc["systems"].values() for e in r.get("errors", [])]
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
