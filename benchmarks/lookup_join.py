"""A fact stream joined with a changing dimension: per-batch latency of three ways and a floor, side by side.

    python -m benchmarks.lookup_join [--rows 1000000,5000000] [--batches 5] [--facts 10000] [--changes 0.01]

For each dimension size, an arctic table of ``rows`` customers; per step, ``changes`` of the first
size's rows are updated (one commit; the same count at every size, so the sizes differ only in
the dimension's size) and a file of ``facts`` facts lands (a tenth of them on keys just updated).
Four long-running queries, each with its own checkpoint and its own copy of the facts folder;
within each step the fact file lands in one folder after the other, and each query is timed until
it has processed it (interleaved, so machine load falls on all four alike):

- ``lookup_join``: arctic_sql.streaming.lookup_join (incremental, version-pinned);
- ``reread``: ``foreachBatch`` reading the whole dimension again and broadcasting it;
- ``static``: Spark's stream-static join with the dimension read once (it goes stale: its file
  list is fixed when the query starts);
- ``no_join``: the facts alone, counted the same way: the floor a micro-batch of this query costs
  here (file listing, planning, a Spark job, the checkpoint), which no join can go under;
- ``python_floor``: the facts through a ``mapInArrow`` that returns them as they are, then counted:
  the floor of any join done in a Python task (the hand-off to a Python worker and back).

Then, side by side, for the flatness target: one ``lookup_join`` query per size (new caches and
checkpoints, on the same tables) and a no-join floor, nothing else running; per step every size's
dimension takes the same changes and its query the same facts, the sizes' turns alternating, so
whatever load the machine has falls on every size alike. Prints the median per size and the
median of the per-step ratios of the last size to the first.

Latency is the wall time from the fact file landing to ``processAllAvailable`` returning (for
lookup_join this includes applying the step's dimension change), median over the steps after a
first one that warms every query up and is reported apart (lookup_join's first batch loads the
whole dimension into its caches); "fresh" is the share of facts on updated keys that met the
updated row. Prints the ratio reread / lookup_join (target at least 3 at 1M rows) and how
lookup_join's latency moves from the first size to the last (target: flat).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time

import pyarrow as pa
import pyarrow.parquet as pq


def _step_names(step: int) -> str:
    return f"s{step}_"


def _as_they_are(batches):  # noqa: ANN001, ANN202
    yield from batches


def load(spark, session, rows: int) -> str:  # noqa: ANN001
    """The dimension ``db.dim<rows>``: customers 0..rows-1, in one commit."""
    name = f"db.dim{rows}"
    session.sql(f"CREATE TABLE {name} (id BIGINT, name STRING, tier INT, PRIMARY KEY (id)) USING arctic")
    started = time.perf_counter()
    (
        spark.range(rows)
        .selectExpr("id", "concat('init_', id) AS name", "CAST(id % 5 AS INT) AS tier")
        .write.format("arctic")
        .mode("append")
        .save(name)
    )
    print(f"  loaded {rows:,} rows in {time.perf_counter() - started:.1f} s", flush=True)
    return name


def run_size(spark, session, root: str, rows: int, batches: int, facts: int, changed: int) -> dict:  # noqa: ANN001
    from pyspark.errors import StreamingQueryException
    from pyspark.sql import functions as F

    from arctic_sql.streaming import lookup_join

    name = load(spark, session, rows)
    systems = ("lookup_join", "reread", "static", "no_join", "python_floor")
    folders = {system: os.path.join(root, f"facts-{system}-{rows}") for system in systems}

    def stream(system: str):  # noqa: ANN202
        os.makedirs(folders[system])
        return (
            spark.readStream.schema("fid BIGINT, id BIGINT")
            .option("maxFilesPerTrigger", 1)
            .parquet(folders[system])
        )

    seen: dict[str, list] = {system: [] for system in systems}

    def fresh_share(df, step_marker: str) -> tuple[int, int]:  # noqa: ANN001
        """(facts on updated keys that met the updated row, facts on updated keys), in one Spark job:
        a second action would run the micro-batch's plan (and its dimension read) a second time."""
        aimed = F.col("fid") % 10 == 0  # the facts aimed at updated keys
        met = aimed & F.col("name").startswith(step_marker)
        row = df.agg(F.sum(met.cast("int")), F.sum(aimed.cast("int"))).first()
        return int(row[0] or 0), int(row[1] or 0)

    def collector(system: str):  # noqa: ANN202
        def sink(df, batch_id: int) -> None:  # noqa: ANN001
            seen[system].append(fresh_share(df, current["marker"]))

        return sink

    def reread(df, batch_id: int) -> None:  # noqa: ANN001
        dimension = spark.read.format("arctic").load(name)
        joined = df.join(F.broadcast(dimension), "id", "left")
        seen["reread"].append(fresh_share(joined, current["marker"]))

    def no_join(df, batch_id: int) -> None:  # noqa: ANN001
        df.agg(F.count(F.lit(1))).first()

    current = {"marker": "none"}
    static_dim = spark.read.format("arctic").load(name)
    queries = {
        "lookup_join": lookup_join(
            stream("lookup_join"), name, on="id", how="left", options={"lookup.buckets": "8"}
        ).writeStream.foreachBatch(collector("lookup_join")),
        "reread": stream("reread").writeStream.foreachBatch(reread),
        "static": stream("static")
        .join(F.broadcast(static_dim), "id", "left")
        .writeStream.foreachBatch(collector("static")),
        "no_join": stream("no_join").writeStream.foreachBatch(no_join),
        "python_floor": stream("python_floor")
        .mapInArrow(_as_they_are, "fid BIGINT, id BIGINT")
        .writeStream.foreachBatch(no_join),
    }
    running = {}
    for system, writer in queries.items():
        started = time.perf_counter()
        running[system] = writer.option(
            "checkpointLocation", os.path.join(root, f"ck-{system}-{rows}")
        ).start()
        running[system].processAllAvailable()
        print(f"  {system}: started in {time.perf_counter() - started:.1f} s", flush=True)
    rng = random.Random(rows)
    latency: dict[str, list[float]] = {s: [] for s in queries}
    failed: dict[str, str] = {}  # a query that failed (a broadcast of a large dimension can) drops out
    for step in range(batches + 1):  # step 0 warms up: lookup_join's first batch loads its caches
        marker = _step_names(step)
        updated = rng.sample(range(rows), changed)
        (
            spark.createDataFrame(
                [(k, f"{marker}{k}", step) for k in updated], "id BIGINT, name STRING, tier INT"
            )
            .write.format("arctic")
            .mode("append")
            .save(name)
        )
        keys = [updated[i % len(updated)] if i % 10 == 0 else rng.randrange(rows) for i in range(facts)]
        table = pa.table(
            {
                "fid": pa.array(range(step * facts, (step + 1) * facts), pa.int64()),
                "id": pa.array(keys, pa.int64()),
            }
        )
        current["marker"] = marker
        order = list(queries) if step % 2 == 0 else list(reversed(queries))  # who goes first alternates
        for system in [
            s for s in order if s not in failed
        ]:  # each query's facts land on its turn: each runs alone
            path = os.path.join(folders[system], f"f{step:05d}.parquet")
            pq.write_table(table, path + ".tmp")
            started = time.perf_counter()
            os.rename(path + ".tmp", path)
            try:
                running[system].processAllAvailable()
            except StreamingQueryException as error:
                failed[system] = f"failed at step {step}: {str(error).splitlines()[0][:160]}"
                print(f"  {system} {failed[system]}", flush=True)
                continue
            latency[system].append(time.perf_counter() - started)
        if step == 0:
            for shares in seen.values():
                shares.clear()
    for query in running.values():
        query.stop()
    result = {}
    for system in queries:
        if system in failed or len(latency[system]) < 2:
            result[system] = (float("nan"), float("nan"), float("nan"))
            print(f"  {system:12s} {failed.get(system, 'no steps')}", flush=True)
            continue
        fresh = sum(a for a, _ in seen[system])
        total = sum(b for _, b in seen[system])
        first, steps = latency[system][0], latency[system][1:]
        result[system] = (statistics.median(steps), fresh / total if total else float("nan"), first)
        print(
            f"  {system:12s} median {result[system][0]:.2f} s per step "
            f"({', '.join(f'{x:.2f}' for x in steps)}); fresh {result[system][1]:.0%}; first step (warm-up) "
            f"{first:.2f} s",
            flush=True,
        )
    return result


def side_by_side(spark, root: str, sizes: list[int], batches: int, facts: int, changed: int) -> dict:  # noqa: ANN001
    """lookup_join at every size at once (the tables run_size made): {size: [step latencies]}, and the floor."""
    from pyspark.sql import functions as F

    from arctic_sql.streaming import lookup_join

    labels = [*sizes, "no_join"]
    folders = {label: os.path.join(root, f"side-facts-{label}") for label in labels}
    for folder in folders.values():
        os.makedirs(folder)
    running = {}
    for label in labels:
        stream = spark.readStream.schema("fid BIGINT, id BIGINT").option("maxFilesPerTrigger", 1)
        stream = stream.parquet(folders[label])
        if label != "no_join":
            stream = lookup_join(
                stream, f"db.dim{label}", on="id", how="left", options={"lookup.buckets": "8"}
            )
        writer = stream.writeStream.foreachBatch(lambda df, _: df.agg(F.count(F.lit(1))).first())
        running[label] = writer.option("checkpointLocation", os.path.join(root, f"side-ck-{label}")).start()
        running[label].processAllAvailable()
    rng = random.Random(0)
    latency: dict = {label: [] for label in labels}
    for step in range(batches + 1):  # step 0 warms up (loads the caches)
        tables = {}
        for rows in sizes:  # the same number of changes and facts at every size, keys from all its rows
            updated = rng.sample(range(rows), changed)
            (
                spark.createDataFrame(
                    [(k, f"side{step}_{k}", step) for k in updated], "id BIGINT, name STRING, tier INT"
                )
                .write.format("arctic")
                .mode("append")
                .save(f"db.dim{rows}")
            )
            tables[rows] = pa.table(
                {
                    "fid": pa.array(range(step * facts, (step + 1) * facts), pa.int64()),
                    "id": pa.array([rng.randrange(rows) for _ in range(facts)], pa.int64()),
                }
            )
        tables["no_join"] = tables[sizes[0]]
        order = labels if step % 2 == 0 else list(reversed(labels))
        for label in order:
            path = os.path.join(folders[label], f"f{step:05d}.parquet")
            pq.write_table(tables[label], path + ".tmp")
            started = time.perf_counter()
            os.rename(path + ".tmp", path)
            running[label].processAllAvailable()
            latency[label].append(time.perf_counter() - started)
    for query in running.values():
        query.stop()
    result = {label: latency[label][1:] for label in labels}
    for label in labels:
        name = "no_join" if label == "no_join" else f"lookup_join at {label:,}"
        print(
            f"  {name:26s} median {statistics.median(result[label]):.2f} s per step "
            f"({', '.join(f'{x:.2f}' for x in result[label])}); warm-up {latency[label][0]:.2f} s",
            flush=True,
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1000000,5000000")
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--changes", type=float, default=0.01)
    parser.add_argument(
        "--side-by-side-only",
        action="store_true",
        help="only lookup_join at every size side by side (the flatness target), no peers",
    )
    args = parser.parse_args()

    import arctic_sql
    from arctic_sql.spark import local_session

    root = tempfile.mkdtemp(prefix="arctic-lookup-bench-")
    try:
        spark = local_session(
            os.path.join(root, "warehouse"), {"spark.master": "local[2]", "spark.sql.shuffle.partitions": "4"}
        )
        session = arctic_sql.connect(warehouse=os.path.join(root, "warehouse"), spark=spark)
        session.sql("CREATE DATABASE db")
        results = {}
        sizes = [int(r) for r in args.rows.split(",")]
        changed = int(sizes[0] * args.changes)
        for rows in sizes:
            if args.side_by_side_only:
                load(spark, session, rows)
                continue
            print(
                f"dimension of {rows:,} rows, {changed:,} changed and {args.facts:,} facts per step:",
                flush=True,
            )
            results[rows] = run_size(spark, session, root, rows, args.batches, args.facts, changed)
        for rows, result in results.items():
            ours, reread = result["lookup_join"][0], result["reread"][0]
            if reread != reread or ours != ours:  # nan: a query failed (said above)
                print(
                    f"{rows:>10,} rows: no ratio, a query failed (lookup_join {ours:.2f} s, reread {reread:.2f} s)"
                )
                continue
            print(
                f"{rows:>10,} rows: reread / lookup_join = {reread / ours:.2f} ({reread:.2f} s vs {ours:.2f} s); "
                f"static join fresh {result['static'][1]:.0%} (stale), lookup_join fresh "
                f"{result['lookup_join'][1]:.0%}; the no-join floor {result['no_join'][0]:.2f} s, the "
                f"Python-task floor {result['python_floor'][0]:.2f} s"
            )
        if len(sizes) > 1:
            if results:
                first, last = results[sizes[0]]["lookup_join"][0], results[sizes[-1]]["lookup_join"][0]
                print(
                    f"lookup_join latency at {sizes[-1]:,} / at {sizes[0]:,} rows = {last / first:.2f} "
                    f"({last:.2f} s vs {first:.2f} s), each size in its own run above"
                )
            print(f"side by side, {args.batches} steps, the sizes' turns interleaved:", flush=True)
            steps = side_by_side(spark, root, sizes, args.batches, args.facts, changed)
            first, last = steps[sizes[0]], steps[sizes[-1]]
            ratios = [b / a for a, b in zip(first, last, strict=True)]
            print(
                f"lookup_join latency at {sizes[-1]:,} / at {sizes[0]:,} rows, side by side = "
                f"{statistics.median(last) / statistics.median(first):.2f} "
                f"({statistics.median(last):.2f} s vs {statistics.median(first):.2f} s; median of the "
                f"per-step ratios {statistics.median(ratios):.2f}); the no-join floor "
                f"{statistics.median(steps['no_join']):.2f} s"
            )
        spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
