"""The base-store writer of INSERT OVERWRITE and CREATE TABLE AS SELECT: one Spark job, the key check
inside it.

The source is read once. Spark computes each row's directories (partition values and tree node, with
the same column expressions spark_files.py uses, so the hash is Spark's own ``xxhash64``) and shuffles the
rows by them; every task then gets whole directories. Because a key's partition and node follow from
the key, two rows with one key always meet in one task, so a task that finds each of its keys once
has checked the whole load. Inside the task (``mapInArrow``) pyarrow sorts the rows once by directory
and key, checks the keys, and writes each directory's rows as sorted files, exactly as arrow_files.py
lays them out (the names, folders and row cap spark_files.py's Spark writes would give).

Tasks return their files (or the one-line reason they refused the load) to the driver, which commits
them through writes.commit_overwrite. Optimizing's spilling merge writes the same way on an object
store (``write_streamed``), a file at a time, from rows Spark has already merged and sorted. Files of a task attempt that failed or lost to a speculative
copy are never returned: nothing references them and orphan removal takes them.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arctic_sql import errors
from arctic_sql.errors import InvalidArgumentError, PrimaryKeyViolationError
from arctic_sql.table.files import storage
from arctic_sql.table.format.layout import Store
from arctic_sql.table.writing import spark_files
from arctic_sql.table.writing.arrow_files import (
    WriteTarget,
    WrittenFile,
    conform,
    directory_text,
    write_folder,
)
from arctic_sql.table.writing.change_kinds import check_not_null

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import DataFrame

    from arctic_sql.table.model.table import ArcticTable

RESULT_SCHEMA = "path string, rows long, problem string"
WRITE_THREADS = 4  # folders a task writes at once


@dataclass(frozen=True)
class BulkPlan:
    """One load, as every task receives it (pickled)."""

    target: WriteTarget
    location: str
    directories: tuple[str, ...]  # the helper columns that become folders, in folder order
    what: str  # "INSERT OVERWRITE into db.t": how errors name the statement


def write_base(rows: DataFrame, table: ArcticTable, what: str) -> list[str]:
    """Check and write ``rows`` (the table's columns, by name) as base files; return their locations.

    Raises PrimaryKeyViolationError (and writes nothing that a commit could reference) on a null key
    or a key given twice.
    """
    target = WriteTarget.of(table, Store.BASE)
    out, directories = spark_files.laid_out(spark_files.align(rows, table.schema), table, Store.BASE)
    plan = BulkPlan(target, target.new_location(), tuple(directories), what)
    if directories and not spark_files.one_partition(out):
        out = out.repartition(*directories)
    results = out.mapInArrow(
        storage.shipped(lambda batches: write_task(plan, batches)), RESULT_SCHEMA
    ).collect()
    problems = sorted(r["problem"] for r in results if r["problem"])
    paths = [r["path"] for r in results if r["path"]]
    if problems:
        storage.delete_files(paths)  # no commit was sent: nothing can reference them
        raise errors.from_report(problems[0])
    return paths


def write_base_files(rows: DataFrame, table: ArcticTable, what: str) -> list[str]:
    """Base files of ``rows`` (aligned to the table): on the local disk Spark's Parquet writer
    (``spark_files.write_files``); on an object store or HDFS :func:`write_base`, since Spark's writer
    reaches those only through its Hadoop file system and a JVM connector."""
    if storage.is_remote(table.base.location()):
        return write_base(rows, table, what)
    return spark_files.write_files(rows, table, store=Store.BASE)


def write_laid_out_files(
    rows: DataFrame,
    table: ArcticTable,
    directories: list[str],
    location: str,
    *,
    clustered: bool = False,
    order: spark_files.WriteOrder | None = None,
) -> list[str]:
    """Base files of ``rows`` laid out by ``spark_files.laid_out`` (optimizing's merged rows), under
    ``location``: on the local disk Spark's Parquet writer; elsewhere :func:`write_streamed`."""
    if not storage.is_remote(location):
        return spark_files.write_laid_out(
            rows, table, directories, store=Store.BASE, location=location, clustered=clustered, order=order
        )
    from pyspark.sql import functions as F

    if not clustered and directories and not spark_files.one_partition(rows):
        rows = rows.repartition(*[F.col(d) for d in directories])
    return write_streamed(rows, WriteTarget.of(table, Store.BASE), tuple(directories), location, order)


def write_streamed(
    rows: DataFrame,
    target: WriteTarget,
    directories: tuple[str, ...],
    location: str,
    order: spark_files.WriteOrder | None = None,
) -> list[str]:
    """Write ``rows`` (each directory's rows in one Spark partition) as sorted files under
    ``location`` with pyarrow in Spark tasks; return their locations.

    Spark sorts each partition (spilling as it needs) and a task writes a file as soon as it has a
    full file's rows or its directory ends: a task holds at most one file's rows, whatever it writes.
    Files of a failed task attempt are never returned (orphan removal takes them)."""
    rows = spark_files.sorted_within(rows, directories, target.keys, order)
    results = rows.mapInArrow(
        storage.shipped(lambda batches: _streamed_task(target, directories, location, batches)), RESULT_SCHEMA
    ).collect()
    return [r["path"] for r in results]


def _streamed_task(
    target: WriteTarget, directories: tuple[str, ...], location: str, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    from pyspark import TaskContext

    context = TaskContext.get()
    task = context.partitionId() if context is not None else 0
    pending: list[pa.Table] = []
    folder = ""

    def flush(upto: int | None = None) -> Iterator[pa.RecordBatch]:
        """Write the pending rows (the first ``upto``, whole files), keep the rest pending."""
        rows = pa.concat_tables(pending)
        upto = rows.num_rows if upto is None else upto
        pending[:] = [rows.slice(upto)] if upto < rows.num_rows else []
        written = write_folder(
            conform(rows.slice(0, upto), target),
            target,
            f"{location}/{folder}".rstrip("/"),
            uuid.uuid4(),
            task,
            key_hashes=False,
        )
        yield _results([f.path for f in written], [f.rows for f in written], [None] * len(written))

    for batch in batches:
        if not batch.num_rows:
            continue
        rows = pa.Table.from_batches([batch])
        for run_folder, start, stop in directory_runs(rows, directories):
            if run_folder != folder and pending:
                yield from flush()
            folder = run_folder
            pending.append(rows.slice(start, stop - start))
            held = sum(t.num_rows for t in pending)
            if held >= target.max_rows:
                yield from flush(held - held % target.max_rows)
    if pending:
        yield from flush()


def write_task(plan: BulkPlan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """One task of the load: its rows sorted, checked and written, one result row per file."""
    from pyspark import TaskContext

    collected = [b for b in batches if b.num_rows]
    if not collected:
        return
    rows = pa.Table.from_batches(collected)
    del collected
    target = plan.target
    order = [*plan.directories, *target.keys]
    if order:
        rows = rows.take(pc.sort_indices(rows, [(c, "ascending") for c in order]))
    problem = key_problem(rows, target.keys, plan.what)
    if problem is not None:
        problem = errors.report(PrimaryKeyViolationError(problem))
    else:
        problem = _null_problem(conform(rows, target), target, plan.what)
    if problem is not None:
        yield _results([], [], [problem])
        return
    context = TaskContext.get()
    task = context.partitionId() if context is not None else 0
    job = uuid.uuid4()
    data = conform(rows, target)

    def write(run: tuple[str, int, int]) -> list[WrittenFile]:
        folder, start, stop = run
        return write_folder(
            data.slice(start, stop - start),
            target,
            f"{plan.location}/{folder}".rstrip("/"),
            job,
            task,
            key_hashes=False,
        )

    runs = list(directory_runs(rows, plan.directories))
    # pyarrow encodes and compresses without the GIL: a task with several folders writes them at once
    with ThreadPoolExecutor(max_workers=min(WRITE_THREADS, len(runs))) as pool:
        written = [f for files in pool.map(write, runs) for f in files]
    yield _results([f.path for f in written], [f.rows for f in written], [None] * len(written))


def _null_problem(rows: pa.Table, target: WriteTarget, what: str) -> str | None:
    """Why ``rows`` (conformed) cannot be loaded into the table's NOT NULL columns (``Kind: message``), or None."""
    try:
        check_not_null(rows, target, what)
    except InvalidArgumentError as e:
        return errors.report(e)
    return None


def _results(paths: list[str | None], counts: list[int], problems: list[str | None]) -> pa.RecordBatch:
    if not paths:
        paths, counts = [None] * len(problems), [0] * len(problems)
    return pa.RecordBatch.from_pydict(
        {
            "path": pa.array(paths, pa.string()),
            "rows": pa.array(counts, pa.int64()),
            "problem": pa.array(problems, pa.string()),
        }
    )


def key_problem(rows: pa.Table, keys: tuple[str, ...], what: str) -> str | None:
    """Why ``rows`` (sorted by key within each directory) cannot be loaded: a null key or a key given
    twice, as one line; None when every key is there once."""
    if not keys:
        return None
    for key in keys:
        column = rows.column(key)
        if column.null_count:
            row = int(np.nonzero(~np.asarray(column.is_valid()))[0][0])
            return f"{what} writes a null primary key ({_shown(rows, keys, row)})"
    count = rows.num_rows
    if count < 2:
        return None
    same = np.ones(count - 1, dtype=bool)
    for key in keys:
        values = rows.column(key)
        same &= np.asarray(pc.equal(values.slice(1), values.slice(0, count - 1)).fill_null(False))
    if not same.any():
        return None
    first = int(np.nonzero(same)[0][0])
    times = 2
    while first + times - 1 < len(same) and same[first + times - 1]:
        times += 1
    return f"{what} writes primary key ({_shown(rows, keys, first)}) {times} times in one statement"


def _shown(rows: pa.Table, keys: tuple[str, ...], row: int) -> str:
    values = [rows.column(k)[row].as_py() for k in keys]
    return ", ".join(f"{k}={'NULL' if v is None else repr(v)}" for k, v in zip(keys, values, strict=True))


def directory_runs(rows: pa.Table, directories: tuple[str, ...]) -> Iterator[tuple[str, int, int]]:
    """The folder of each run of rows (sorted by ``directories``) with one set of directory values:
    ``(folder, start, stop)``; one run in the write's own folder when there are no directories."""
    count = rows.num_rows
    if not directories:
        yield "", 0, count
        return
    changed = np.zeros(max(count - 1, 0), dtype=bool)
    columns = [rows.column(d).combine_chunks() for d in directories]
    for column in columns:
        after, before = column.slice(1), column.slice(0, count - 1)
        differs = pc.fill_null(pc.not_equal(after, before), False)
        nulls_differ = pc.xor(pc.is_null(after), pc.is_null(before))
        changed |= np.asarray(pc.or_(differs, nulls_differ))
    starts = [0, *(np.nonzero(changed)[0] + 1).tolist()]
    for start, stop in zip(starts, [*starts[1:], count], strict=True):
        folder = "/".join(
            f"{d}={directory_text(column[start].as_py())}"
            for d, column in zip(directories, columns, strict=True)
        )
        yield folder, start, stop
