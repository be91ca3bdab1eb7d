"""The full change feed's read cost against the latest-change feed, on the same table in one run.

A keyed table of N rows (default 200,000), optimized, then C commits (default 10) of 1% of N rows
each, upserts: 80% updates of random existing keys, 20% new keys. Both modes read the change
feed of those C versions (``readChangeFeed`` from the first of them to the last) and count rows
per ``_change_type``; timed runs alternate between the modes, after one untimed run of each, so a
shared machine's load hits both alike. Printed: the median seconds of each mode, and full/latest.
A third mode, ``table_changes`` (SQL's full feed: computed in the driver, pre-images looked up by key,
when the range holds at most ``preimages.MAX_CHANGE_ROWS`` change rows, 20,000 since session 26, as
the default 10 commits at 200k rows do), runs in the same rotation.

    .venv/bin/python -m benchmarks.change_feed_full                  # 200k rows, 10 commits, 5 runs
    .venv/bin/python -m benchmarks.change_feed_full --rows 20000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time

RESULTS = os.path.join(os.path.dirname(__file__), "results")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.change_feed_full", description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000, help="rows loaded (default 200,000)")
    parser.add_argument("--commits", type=int, default=10, help="commits of 1%% of the rows (default 10)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per mode (default 5)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", default=os.path.join(RESULTS, "change_feed_full.json"))
    return parser.parse_args(argv)


def build(session, rows: int, commits: int, seed: int) -> tuple[int, int]:
    """The table and its commits; the first and last version of the commits."""
    rng = random.Random(seed)
    session.sql("CREATE DATABASE IF NOT EXISTS db")
    session.sql("CREATE TABLE db.t (id BIGINT, amount BIGINT, status STRING, PRIMARY KEY (id))")
    session.sql(f"INSERT INTO db.t SELECT id, id % 1000, CONCAT('s', id % 7) FROM range({rows})")
    session.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    next_key, batch = rows, max(1, rows // 100)
    for _ in range(commits):
        updates = rng.sample(range(next_key), batch * 4 // 5)
        new = list(range(next_key, next_key + batch - len(updates)))
        next_key += len(new)
        values = ", ".join(f"({k}, {rng.randrange(1000)}, 'u')" for k in [*updates, *new])
        session.sql(f"INSERT INTO db.t VALUES {values}")
    history = [r[0] for r in session.sql("SELECT version FROM db.t.history ORDER BY version").collect()]
    return history[-commits], history[-1]


def read(session, mode: str, start: int, end: int) -> tuple[float, dict[str, int]]:
    began = time.perf_counter()
    spark = session.spark
    df = (
        session.sql(f"SELECT * FROM table_changes('db.t', {start}, {end})")
        if mode == "table_changes"
        else spark.read.format("arctic")
        .option("readChangeFeed", "true")
        .option("changeFeedMode", mode)
        .option("startingVersion", start)
        .option("endingVersion", end)
        .load("db.t")
    )
    counts = {r[0]: r[1] for r in df.groupBy("_change_type").count().collect()}
    return time.perf_counter() - began, counts


def main(argv: list[str] | None = None) -> None:
    import arctic_sql

    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        session = arctic_sql.connect(warehouse=os.path.join(work, "warehouse"))
        spark = session.spark
        start, end = build(session, args.rows, args.commits, args.seed)
        modes = ["latest", "full", "table_changes"]
        times: dict[str, list[float]] = {mode: [] for mode in modes}
        counts = {}
        for run in range(args.runs + 1):
            for mode in modes[run % 3 :] + modes[: run % 3]:  # each goes first in turn
                seconds, counts[mode] = read(session, mode, start, end)
                if run:  # the first run of each mode warms up
                    times[mode].append(seconds)
        latest, full = statistics.median(times["latest"]), statistics.median(times["full"])
        sql = statistics.median(times["table_changes"])
        assert counts["table_changes"] == counts["full"], counts
        load = os.getloadavg()
        result = {
            "rows": args.rows,
            "commits": args.commits,
            "versions": [start, end],
            "runs": args.runs,
            "seconds": times,
            "median_s": {"latest": latest, "full": full, "table_changes": sql},
            "full_over_latest": full / latest,
            "table_changes_over_latest": sql / latest,
            "load_average": load,
            "rows_out": counts,
        }
        print(f"change feed of versions {start}..{end} on {args.rows} rows ({args.commits} commits of 1%)")
        print(f"  latest: {latest:.2f} s  rows {counts['latest']}")
        print(f"  full:   {full:.2f} s  rows {counts['full']}")
        print(f"  table_changes: {sql:.2f} s")
        print(f"  full / latest: {full / latest:.2f}x, table_changes / latest: {sql / latest:.2f}x")
        print(
            f"  (median of {args.runs} interleaved runs; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f})"
        )
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
        spark.stop()


if __name__ == "__main__":
    main()
