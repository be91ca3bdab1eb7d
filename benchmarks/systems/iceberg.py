"""pyiceberg on the upsert stream: ``upsert`` then ``delete`` per commit (both copy-on-write).

pyiceberg has no single statement that upserts and deletes, so one benchmark commit is two Iceberg
commits: ``table.upsert(upsert rows)`` and ``table.delete(In("order_id", deleted keys))``, timed
together. The catalog is pyiceberg's SQL catalog on SQLite in this run's own directory.
"""

from __future__ import annotations

import os

import pyarrow.parquet as pq

from benchmarks import datagen
from benchmarks.systems.common import (
    Result,
    arrow_checksum,
    arrow_r1,
    parse_args,
    run_commits,
    split_batch,
    stopwatch,
    time_r1,
)


def commit(table, batch):  # noqa: ANN001, ANN201 - a pyiceberg Table and an Arrow batch
    """One benchmark commit: the batch's upserts, then its deletes (two Iceberg commits)."""
    from pyiceberg.expressions import In

    upserts, deletes = split_batch(batch)
    table.upsert(upserts, join_cols=["order_id"])
    table.delete(In("order_id", deletes.to_pylist()))


def main() -> None:
    args = parse_args(__doc__)
    result = Result(args.out, "pyiceberg", args.data)
    step = "import"
    try:
        import pyiceberg
        from pyiceberg.catalog.sql import SqlCatalog

        result["versions"] = {"pyiceberg": pyiceberg.__version__}
        warehouse = os.path.join(args.work, "warehouse")
        os.makedirs(warehouse, exist_ok=True)
        catalog = SqlCatalog(
            "bench", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}"
        )
        catalog.create_namespace("bench")

        step = "load"
        load = pq.read_table(datagen.load_path(args.data))
        table = catalog.create_table("bench.orders", schema=load.schema)
        with stopwatch() as t:
            table.append(load)
        result["load_s"] = t()
        del load
        print(f"[pyiceberg] load: {result['load_s']:.2f} s", flush=True)

        step = "commits"

        def timed_commit(index: int, batch_file: str) -> float:
            batch = pq.read_table(batch_file)
            with stopwatch() as t:
                commit(table, batch)
            return t()

        result["commit_notes"] = (
            "one benchmark commit = table.upsert(...) + table.delete(In(...)): two Iceberg "
            "commits, timed together (copy-on-write)."
        )
        run_commits(result, args.deadline, timed_commit)

        step = "r1"

        def r1() -> list[tuple]:
            return arrow_r1(
                catalog.load_table("bench.orders").scan(selected_fields=("status", "amount")).to_arrow()
            )

        if not args.commits_only:
            time_r1(result, r1)

        step = "checksum"
        final = catalog.load_table("bench.orders")
        result["checksum"] = arrow_checksum(final.scan().to_arrow())
        result["files"] = len(final.inspect.files())
    except Exception:  # noqa: BLE001 - recorded in the result file, judged by the orchestrator
        result.error(step)
    result.finish()


if __name__ == "__main__":
    main()
