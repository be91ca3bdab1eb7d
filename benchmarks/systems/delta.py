"""delta-rs (``deltalake``) on the upsert stream: one copy-on-write ``merge`` per commit.

R1 reads the table with ``DeltaTable.to_pyarrow_table`` and aggregates with pyarrow (no duckdb here).
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks import datagen
from benchmarks.systems.common import (
    Result,
    arrow_checksum,
    arrow_r1,
    parse_args,
    run_commits,
    stopwatch,
    time_r1,
)


def merge(path: str, batch: pa.Table) -> None:
    """One commit: the batch (the table's columns and ``op``) as one copy-on-write ``DeltaTable.merge``."""
    from deltalake import DeltaTable

    (
        DeltaTable(path)
        .merge(source=batch, predicate="t.order_id = s.order_id", source_alias="s", target_alias="t")
        .when_matched_delete(predicate="s.op = 'D'")
        .when_matched_update_all(except_cols=["op"])
        .when_not_matched_insert_all(predicate="s.op <> 'D'", except_cols=["op"])
        .execute()
    )


def main() -> None:
    args = parse_args(__doc__)
    result = Result(args.out, "delta-rs", args.data)
    step = "import"
    try:
        import deltalake
        from deltalake import DeltaTable, write_deltalake

        result["versions"] = {"deltalake": deltalake.__version__}
        path = os.path.join(args.work, "orders")

        step = "load"
        load = pq.read_table(datagen.load_path(args.data))
        with stopwatch() as t:
            write_deltalake(path, load, mode="overwrite")
        result["load_s"] = t()
        del load
        print(f"[delta-rs] load: {result['load_s']:.2f} s", flush=True)

        step = "commits"

        def commit(index: int, batch_file: str) -> float:
            batch = pq.read_table(batch_file)
            with stopwatch() as t:
                merge(path, batch)
            return t()

        result["commit_notes"] = "one DeltaTable.merge(...).execute() per commit (copy-on-write)."
        run_commits(result, args.deadline, commit)

        if not args.commits_only:
            step = "r1"
            time_r1(result, lambda: arrow_r1(DeltaTable(path).to_pyarrow_table(columns=["status", "amount"])))

        step = "checksum"
        result["checksum"] = arrow_checksum(DeltaTable(path).to_pyarrow_table())
        result["files"] = len(DeltaTable(path).file_uris())
    except Exception:  # noqa: BLE001 - recorded in the result file, judged by the orchestrator
        result.error(step)
    result.finish()


if __name__ == "__main__":
    main()
