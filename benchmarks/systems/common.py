"""What the system scripts share: arguments, a result file written after every step, checksums.

A system script is run as ``python -m benchmarks.systems.<name> --data D --work W --out F
--deadline T``. It loads ``D/load.parquet``, applies ``D/batch-*.parquet`` in order (one commit
each, timed), runs the R1 query and computes the checksum of its final table. It rewrites ``F``
(JSON) after every step, so whatever it finished survives a crash, a hang or the orchestrator's
kill. Past ``--deadline`` (epoch seconds) it stops committing and goes on to R1 and the checksum.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import traceback
from collections.abc import Callable
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.compute as pc

from benchmarks import datagen

R1_SQL = "SELECT status, count(*) AS n, sum(amount) AS amount FROM {table} GROUP BY status"
R1_RUNS = 5


def parse_args(
    description: str, *, pairs: bool = False, optimize: bool = False, stream: bool = False
) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data", required=True, help="workload directory written by benchmarks.datagen")
    parser.add_argument("--work", required=True, help="an empty directory this system may write its table in")
    parser.add_argument("--out", required=True, help="result JSON file")
    parser.add_argument(
        "--deadline",
        type=float,
        default=float("inf"),
        help="epoch seconds after which no further commit starts",
    )
    parser.add_argument(
        "--commits-only",
        action="store_true",
        help="skip the R1 timing and its baseline (W2 needs only the commits and the checksum)",
    )
    if pairs:
        parser.add_argument(
            "--data2", help="W2 interleaved: a second, larger workload run commit by commit beside --data"
        )
    if optimize:
        parser.add_argument(
            "--optimize",
            action="store_true",
            help="after R1: a full optimize (O1), the query again (R2) and the checksum",
        )
    if stream:
        parser.add_argument("--every", type=int, default=1, help="time the R1 query after every k-th commit")
        parser.add_argument(
            "--service-interval",
            type=float,
            default=None,
            help="run the self-optimizing service beside the stream, polling every S seconds",
        )
        parser.add_argument(
            "--table-properties",
            default="",
            help="k=v,... set on the table after the load, before the stream (and the service)",
        )
    return parser.parse_args()


class Result:
    """The result file of one system run; ``save()`` replaces it atomically."""

    def __init__(self, path: str, system: str, data: str) -> None:
        self.path = path
        manifest = datagen.read_manifest(data)
        self.batches = [datagen.batch_path(data, i) for i in range(manifest["workload"]["commits"])]
        self.doc: dict = {
            "system": system,
            "status": "running",
            "versions": {},
            "load_s": None,
            "commit_s": [],
            "commit_notes": "",
            "r1_s": [],
            "r1_rows": None,
            "checksum": None,
            "errors": [],
            "started_at": time.time(),
        }
        self.save()

    def __getitem__(self, key: str):
        return self.doc[key]

    def __setitem__(self, key: str, value) -> None:
        self.doc[key] = value
        self.save()

    def save(self) -> None:
        self.doc["updated_at"] = time.time()
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.doc, f, indent=1, default=str)
        os.replace(tmp, self.path)

    def error(self, step: str, statement: str | None = None) -> None:
        self.doc["errors"].append(
            {"step": step, "statement": statement, "error": traceback.format_exc(limit=8)}
        )
        self.save()

    def finish(self) -> None:
        self.doc["status"] = "done" if not self.doc["errors"] else "failed"
        self.save()


@contextmanager
def stopwatch():
    """``with stopwatch() as t: ...`` then ``t()`` is the elapsed seconds."""
    start = time.perf_counter()
    end: list[float] = []
    yield lambda: (end[0] if end else time.perf_counter()) - start
    end.append(time.perf_counter())


def run_commits(result: Result, deadline: float, commit: Callable[[int, str], float]) -> None:
    """Apply the batches in order; ``commit(i, path)`` returns the timed seconds of batch ``i``."""
    for index, path in enumerate(result.batches):
        if time.time() > deadline:
            result.doc["commit_notes"] += (
                f" stopped at the deadline after {index} of {len(result.batches)} commits."
            )
            result.save()
            return
        seconds = commit(index, path)
        result.doc["commit_s"].append(seconds)
        result.save()
        print(f"[{result['system']}] commit {index + 1}/{len(result.batches)}: {seconds:.3f} s", flush=True)


def time_r1(result: Result, run: Callable[[], list[tuple]], key: str = "r1_s", runs: int = R1_RUNS) -> None:
    """One untimed warm-up run, then ``runs`` timed ones; the rows of the last are kept."""
    rows = run()
    times = []
    for _ in range(runs):
        with stopwatch() as t:
            rows = run()
        times.append(t())
    result.doc[key] = times
    result.doc[key.removesuffix("_s") + "_rows"] = sorted([list(r) for r in rows], key=lambda r: str(r[0]))
    result.save()
    print(f"[{result['system']}] {key}: median {statistics.median(times):.3f} s", flush=True)


def arrow_checksum(table: pa.Table) -> dict:
    """The checksum fields of ``datagen.checksum_of`` computed from an Arrow table."""
    cents = pc.cast(pc.round(pc.multiply(table["amount"], 100.0)), pa.int64())
    by_status = table.select(["status"]).group_by("status").aggregate([([], "count_all")])
    return {
        "count": table.num_rows,
        "sum_order_id": int(pc.sum(table["order_id"]).as_py() or 0),
        "sum_amount_cents": int(pc.sum(cents).as_py() or 0),
        "count_by_status": {
            str(s): int(n)
            for s, n in zip(by_status["status"].to_pylist(), by_status["count_all"].to_pylist(), strict=True)
        },
    }


def arrow_r1(table: pa.Table) -> list[tuple]:
    """The R1 aggregate over an Arrow table with ``status`` and ``amount``."""
    out = table.group_by("status").aggregate([([], "count_all"), ("amount", "sum")])
    return list(
        zip(
            out["status"].to_pylist(),
            out["count_all"].to_pylist(),
            out["amount_sum"].to_pylist(),
            strict=True,
        )
    )


def split_batch(batch: pa.Table) -> tuple[pa.Table, pa.Array]:
    """A batch as (upsert rows with the table's columns, keys to delete)."""
    is_delete = pc.equal(batch["op"], "D")
    upserts = batch.filter(pc.invert(is_delete)).select(datagen.COLUMNS)
    deletes = batch.filter(is_delete)["order_id"].combine_chunks()
    return upserts, deletes
