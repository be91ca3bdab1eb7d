"""Every system of W1/R1 in one process, commit by commit: the machine's load hits them alike.

Run separately (``--w1-mode separate``), the systems follow one another minutes apart and a shared
machine's load moves between them (one run: arctic-sql's commits 2.1-6.3 s, delta-rs's 1.2-4.3 s).
Here each batch is committed by every system back to back, the order rotating from one batch to the
next so no system always goes first; R1's timed runs alternate the same way. Each system's figures
go to its own result file (``<out>-<system>.json``, the shape a separate run writes), so the
orchestrator reads them as it reads separate runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import pyarrow.parquet as pq

from benchmarks import datagen
from benchmarks.systems import arctic, delta, iceberg
from benchmarks.systems.common import R1_RUNS, R1_SQL, Result, arrow_checksum, arrow_r1, stopwatch


class System:
    """One system's table: load it, commit a batch, run R1, checksum it."""

    name = ""
    label = ""

    def __init__(self, result: Result, work: str) -> None:
        self.result, self.work = result, work

    def load(self, data: str) -> None: ...
    def prepare(self, batch_file: str, batch) -> None:  # noqa: ANN001 - untimed, as in a separate run
        self.batch = batch

    def commit(self) -> None: ...
    def r1(self) -> list[tuple]: ...
    def checksum(self) -> dict: ...
    def finish(self) -> None: ...


class Arctic(System):
    name, label = "arctic", "arctic-sql"

    def load(self, data: str) -> None:
        self.session = arctic.start(self.result, self.work, data)
        arctic.load(self.session, self.result, arctic.TABLE, data)

    def prepare(self, batch_file: str, batch) -> None:  # noqa: ANN001
        # The batch view is setup, as arctic.merge leaves it out of the timing in a separate run.
        self.session.spark.read.parquet(batch_file).select(*datagen.COLUMNS, "op").createOrReplaceTempView(
            "batch"
        )

    def commit(self) -> None:
        self.session.sql(arctic.MERGE)

    def r1(self) -> list[tuple]:
        return [tuple(r) for r in self.session.sql(R1_SQL.format(table=arctic.TABLE)).collect()]

    def checksum(self) -> dict:
        return arctic.checksum(self.session, arctic.TABLE)

    def finish(self) -> None:
        arctic.plain_baseline(self.session, self.result, self.work)


class Delta(System):
    name, label = "delta", "delta-rs"

    def load(self, data: str) -> None:
        import deltalake

        self.result["versions"] = {"deltalake": deltalake.__version__}
        self.path = os.path.join(self.work, "orders")
        rows = pq.read_table(datagen.load_path(data))
        with stopwatch() as t:
            deltalake.write_deltalake(self.path, rows, mode="overwrite")
        self.result["load_s"] = t()

    def commit(self) -> None:
        delta.merge(self.path, self.batch)

    def r1(self) -> list[tuple]:
        from deltalake import DeltaTable

        return arrow_r1(DeltaTable(self.path).to_pyarrow_table(columns=["status", "amount"]))

    def checksum(self) -> dict:
        from deltalake import DeltaTable

        return arrow_checksum(DeltaTable(self.path).to_pyarrow_table())


class Iceberg(System):
    name, label = "iceberg", "pyiceberg"

    def load(self, data: str) -> None:
        import pyiceberg
        from pyiceberg.catalog.sql import SqlCatalog

        self.result["versions"] = {"pyiceberg": pyiceberg.__version__}
        warehouse = os.path.join(self.work, "warehouse")
        os.makedirs(warehouse, exist_ok=True)
        self.catalog = SqlCatalog(
            "bench", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}"
        )
        self.catalog.create_namespace("bench")
        rows = pq.read_table(datagen.load_path(data))
        self.table = self.catalog.create_table("bench.orders", schema=rows.schema)
        with stopwatch() as t:
            self.table.append(rows)
        self.result["load_s"] = t()

    def commit(self) -> None:
        iceberg.commit(self.table, self.batch)

    def r1(self) -> list[tuple]:
        return arrow_r1(
            self.catalog.load_table("bench.orders").scan(selected_fields=("status", "amount")).to_arrow()
        )

    def checksum(self) -> dict:
        return arrow_checksum(self.catalog.load_table("bench.orders").scan().to_arrow())


SYSTEMS: dict[str, type[System]] = {s.name: s for s in (Arctic, Delta, Iceberg)}


def rotated(items: list, start: int) -> list:
    """``items`` starting at position ``start`` (mod its length): who goes first rotates."""
    start %= len(items)
    return items[start:] + items[:start]


def _timed(system: System, step: str, run: Callable[[], object]) -> float | None:
    """Seconds ``run`` took, or None after recording its failure (that system stops; the others go on)."""
    try:
        with stopwatch() as t:
            run()
        return t()
    except Exception:  # noqa: BLE001 - recorded in the system's result file, judged by the orchestrator
        system.result.error(step)
        return None


def commits(systems: list[System], batches: list[str], deadline: float) -> None:
    for index, batch_file in enumerate(batches):
        if time.time() > deadline:
            for system in systems:
                system.result.doc["commit_notes"] += f" stopped at the deadline after {index} commits."
            return
        batch = pq.read_table(batch_file)
        for system in rotated(systems, index):
            if system.result["errors"]:
                continue
            if _timed(system, "commits", lambda s=system: s.prepare(batch_file, batch)) is None:
                continue
            seconds = _timed(system, "commits", system.commit)
            if seconds is not None:
                system.result.doc["commit_s"].append(seconds)
                system.result.save()
                print(f"[{system.label}] commit {index + 1}/{len(batches)}: {seconds:.3f} s", flush=True)


def r1(systems: list[System]) -> None:
    """One untimed warm-up each, then R1_RUNS timed rounds, each round in a rotated order."""
    alive = [s for s in systems if not s.result["errors"]]
    rows = {s.name: s.r1() for s in alive}
    times: dict[str, list[float]] = {s.name: [] for s in alive}
    for round_ in range(R1_RUNS):
        for system in rotated(alive, round_):
            with stopwatch() as t:
                rows[system.name] = system.r1()
            times[system.name].append(t())
    for system in alive:
        system.result.doc["r1_s"] = times[system.name]
        system.result.doc["r1_rows"] = sorted([list(r) for r in rows[system.name]], key=lambda r: str(r[0]))
        system.result.save()
        print(f"[{system.label}] r1_s: median {statistics.median(times[system.name]):.3f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--out", required=True, help="result JSON; each system's goes to <out>-<system>.json")
    parser.add_argument("--deadline", type=float, default=float("inf"))
    parser.add_argument("--systems", default="arctic,delta,iceberg")
    args = parser.parse_args()
    run = Result(args.out, "interleaved", args.data)
    systems = []
    for name in args.systems.split(","):
        kind = SYSTEMS[name]
        work = os.path.join(args.work, name)
        os.makedirs(work, exist_ok=True)
        result = Result(result_path(args.out, name), kind.label, args.data)
        result["commit_notes"] = (
            "interleaved commit by commit with "
            + ", ".join(SYSTEMS[n].label for n in args.systems.split(",") if n != name)
            + "."
        )
        systems.append(kind(result, work))
    for system in systems:  # loads one after another: a load is not what W1 compares
        _timed(system, "load", lambda s=system: s.load(args.data))
    commits(systems, run.batches, args.deadline)
    r1(systems)
    for system in systems:
        if system.result["errors"]:
            continue
        _timed(system, "checksum", lambda s=system: s.result.doc.__setitem__("checksum", s.checksum()))
        _timed(system, "finish", system.finish)
        system.result.finish()
    run.finish()


def result_path(out: str, name: str) -> str:
    return f"{os.path.splitext(out)[0]}-{name}.json"


if __name__ == "__main__":
    main()
