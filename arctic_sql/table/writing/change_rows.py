"""The change-store writer of SQL INSERT, UPDATE, DELETE and MERGE on a keyed table: one Spark job.

The statement's change rows (the table's columns and ``arctic_op``) go through ``mapInArrow``: each
task writes its share with pyarrow exactly as the DataFrame writer's tasks do (arrow_tasks.py:
one change per key within the task, sorted files per partition, node and kind of change) and
returns the files, with their footers and key hashes, to the driver. The driver's commit
(arrow_commit.py) then looks for a key two tasks wrote, where their key hashes meet, and refuses
the statement if it finds one. So the key check costs no Spark job of its own and no shuffle.

Rows Spark estimates under ``spark.sql.autoBroadcastJoinThreshold`` (what it would ship to every
executor for a join), from a plan with no Python step, skip the Python workers: they are collected
as Arrow (a job in the JVM alone) and the driver writes them the same way. A small MERGE is one
such job and one pyiceberg commit. Rows the driver already holds (``INSERT ... VALUES``, a MERGE
from a VALUES source: a local relation in Spark's plan) need no job at all: one commit.

A statement may hand rows that ask it to take another way (``arctic_refuse``: a blind MERGE row
whose outcome depends on the target, merge_plan.py): a task that gets one writes nothing, and
:func:`write` raises :class:`Refused` after deleting the other tasks' files.

A task that finds a problem in its rows (a key given twice, a null key, a value that cannot be
written) returns it as one line instead of raising: Spark would retry the task for nothing. Files of
a task attempt that failed or lost to a speculative copy are never returned: nothing references
them and orphan removal takes them.
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from arctic_sql import errors
from arctic_sql.errors import ArcticError
from arctic_sql.table.files import storage
from arctic_sql.table.format import layout, versions
from arctic_sql.table.format.layout import Store
from arctic_sql.table.model.merge_engine import Engine
from arctic_sql.table.model.schemas import spark_schema
from arctic_sql.table.records import leases
from arctic_sql.table.writing import base_rows, commit
from arctic_sql.table.writing.arrow_commit import commit_write
from arctic_sql.table.writing.arrow_files import WriteTarget, WrittenFile
from arctic_sql.table.writing.arrow_tasks import CHANGES, WritePlan, discard, write_task

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyiceberg.table import Table
    from pyspark.sql import DataFrame

    from arctic_sql.table.model.table import ArcticTable

RESULT_SCHEMA = "files binary, problem string, refused boolean"
REFUSE_COLUMN = "arctic_refuse"
# How Spark's plans name steps that run Python (mapInArrow, Python UDFs, Python data sources).
_PYTHON_STEPS = ("MapIn", "InPandas", "InArrow", "EvalPython", "Python")


class Refused(Exception):
    """A row of the write had ``arctic_refuse`` set: nothing was written."""


def _changes_frame(
    table: ArcticTable, upserts: DataFrame | None, deletes: DataFrame | None, changes: DataFrame | None
) -> DataFrame:
    """The statement's change rows in the table's column types, with ``arctic_op`` (and the columns
    a statement adds, ``arctic_*``): one projection per input, cast by Spark where a type differs."""
    fields = spark_schema(table.schema, all_nullable=True).fields
    frames = []
    if changes is not None:
        frames.append(_in_table_types(changes, fields))
    if upserts is not None:
        frames.append(_in_table_types(upserts, fields, op=layout.UPSERT))
    if deletes is not None:
        frames.append(_in_table_types(deletes, fields, op=layout.DELETE, only=set(table.primary_key)))
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def _in_table_types(
    df: DataFrame, fields: list, *, op: str | None = None, only: set[str] | None = None
) -> DataFrame:
    """``df``'s columns named like the table's, cast where their type differs (NULL for columns not in
    ``only``), its ``arctic_*`` columns, and ``op`` as ``arctic_op`` when given. The arrow writers
    attach the field ids; the casts are Spark's, as for any INSERT."""
    have = {f.name.lower(): f for f in df.schema.fields}
    projection = []
    for field in fields:
        name = _quoted(field.name)
        found = have.get(field.name.lower())
        if only is not None and field.name not in only:
            projection.append(f"CAST(NULL AS {_sql_type(df, field.dataType)}) AS {name}")
        elif found is not None and found.dataType == field.dataType:
            projection.append(f"{_quoted(found.name)} AS {name}")
        else:  # a missing column fails here as Spark's analysis error naming it
            projection.append(
                f"CAST({_quoted(found.name if found else field.name)} AS "
                f"{_sql_type(df, field.dataType)}) AS {name}"
            )
    projection.extend(
        _quoted(c) for c in df.columns if c.startswith("arctic_") and (op is None or c != layout.OP_COLUMN)
    )
    if op is not None:
        projection.append(f"'{op}' AS {layout.OP_COLUMN}")
    return df.selectExpr(*projection)


def _sql_type(df: DataFrame, data_type) -> str:  # noqa: ANN001
    """``data_type`` as SQL. Nested types ask Spark, which quotes their field names."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(data_type, (ArrayType, MapType, StructType)):
        jvm: Any = df.sparkSession._jvm
        return jvm.org.apache.spark.sql.types.DataType.fromJson(data_type.json()).sql()
    return data_type.simpleString()


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def write_changes(
    table: ArcticTable,
    *,
    upserts: DataFrame | None = None,
    deletes: DataFrame | None = None,
    changes: DataFrame | None = None,
    operation: str,
    read_version: int | None = None,
    small: bool = False,
    summary: dict[str, str] | None = None,
) -> int | None:
    """Check, write and commit one change-store transaction; return its number (None if empty).

    ``upserts`` hold whole rows, ``deletes`` the keys to delete, ``changes`` rows of both kinds
    told apart by an ``arctic_op`` column. A ``read_version`` (the statement read the table
    there) makes the commit fail with base_rows.StaleRead if another data commit landed since.
    ``small``: the caller knows the rows are few (see :func:`write`). ``summary``: entries the
    commit's snapshot summary records with the rows (a materialized view's source versions).
    """
    with leases.writing(table, operation):
        plan = plan_changes(table, operation)
        files = write(_changes_frame(table, upserts, deletes, changes), plan, small=small)
        validate = None
        if read_version is not None:

            def validate(change_store: Table) -> None:
                table.base.refresh()
                commits = versions.data_commits(table.base, change_store)
                if commits and commits[-1].version > read_version:
                    raise base_rows.StaleRead()
                if commit.reservation_pending(table.base, change_store, read_version):
                    raise base_rows.StaleRead()  # an overwrite is landing: run again after it

        # The stores were loaded when the statement started: a commit made since makes the catalog
        # refuse the first attempt, and the retry reloads (commit.commit_loop).
        return commit_write(table, plan, files, validate=validate, fresh=True, summary=summary)


def plan_changes(table: ArcticTable, operation: str) -> WritePlan:
    """The write of one statement's change rows into ``table``'s change store."""
    target = WriteTarget.of(table, Store.CHANGE)
    return WritePlan(
        str(table.identifier),
        layout.table_root(table.base.location()),
        target,
        target.new_location(),
        CHANGES,
        None,
        operation,
        "in one statement",
        change_column=layout.OP_COLUMN,
        duplicate_hint=None,
        fold=table.merge_engine if table.merge_engine.engine is not Engine.DEDUPLICATE else None,
    )


def write(changes: DataFrame, plan: WritePlan, *, small: bool = False) -> list[WrittenFile]:
    """Write ``changes`` as ``plan`` says in one Spark job; return the files (none for no rows).
    ``small``: the caller knows the rows are few (a MERGE of a small source joined with a local
    relation, which Spark sizes as the product of both sides): collect and write them here.

    Raises the first problem a task found, after deleting every file the tasks returned.
    """
    if small or is_small(changes):
        return _write_here(changes, plan)
    spark = changes.sparkSession
    parallelism = spark.sparkContext.defaultParallelism
    # Each task writes a file per folder it has rows for: a join's many small shuffle partitions
    # would make many small files. Fewer, larger tasks cost no shuffle (coalesce only merges them,
    # and leaves fewer partitions as they are). Not counted first: under adaptive execution that
    # runs the plan's shuffles and broadcasts, and the write would run them again.
    changes = changes.coalesce(2 * parallelism)
    results = changes.mapInArrow(
        storage.shipped(lambda batches: _task(plan, batches)), RESULT_SCHEMA
    ).collect()
    files = [f for r in results if r["files"] for f in pickle.loads(r["files"])]
    problems = sorted(r["problem"] for r in results if r["problem"])
    refused = any(r["refused"] for r in results)
    if problems or refused:
        discard(files)  # no commit was sent: nothing can reference them
        if refused:
            raise Refused()
        raise errors.from_report(problems[0])
    return files


def is_small(changes: DataFrame, threshold: int | None = None) -> bool:
    """Whether Spark estimates the rows under ``threshold`` bytes, by default its broadcast threshold
    (what it would ship to every executor for a join, it may hand the driver), from a plan whose
    estimate means something.

    Python steps are ruled out: Spark sizes them from their input, not from what they yield (a merged
    read of an arctic table is ``mapInArrow``, sized at its files' bytes up to just above the
    threshold, whatever its WHERE keeps).
    """
    if threshold is None:
        threshold = changes.sparkSession._jsparkSession.sessionState().conf().autoBroadcastJoinThreshold()
    if threshold <= 0:
        return False
    plan = changes._jdf.queryExecution().optimizedPlan()
    if any(word in plan.toString() for word in _PYTHON_STEPS):
        return False
    return int(plan.stats().sizeInBytes()) <= threshold  # py4j hands a Scala BigInt over as an int


def _write_here(changes: DataFrame, plan: WritePlan) -> list[WrittenFile]:
    """Small rows: collected as Arrow (a Spark job in the JVM, no Python worker) and written here;
    rows the driver already holds (``INSERT ... VALUES``) without any Spark job (:func:`local_rows`)."""
    local = local_rows(changes)
    rows = local.to_batches() if local is not None else changes.toArrow().to_batches()
    if _refuses(rows):
        raise Refused()
    return write_task(plan, rows, 0)


def local_rows(frame: DataFrame) -> pa.Table | None:
    """``frame``'s rows as Arrow when Spark plans them as a local relation (a VALUES list, and what
    projections and filters of one fold into), else None. Spark's ``collect`` of a local relation
    reads the rows out of the plan, with no job; its Arrow collection always runs one (about 0.1 s
    and a task here). Timestamps cross as Python's local datetimes, whose ``fold`` keeps them exact."""
    from pyspark.sql.conversion import LocalDataToArrowConversion

    if frame._jdf.queryExecution().executedPlan().getClass().getSimpleName() != "LocalTableScanExec":
        return None
    rows = frame.collect()
    if not rows:
        return pa.table({})
    return LocalDataToArrowConversion.convert(rows, frame.schema, use_large_var_types=False)


def _refuses(batches: list[pa.RecordBatch]) -> bool:
    """Whether a row of ``batches`` has ``arctic_refuse`` set."""
    return any(REFUSE_COLUMN in b.schema.names and pc.any(b.column(REFUSE_COLUMN)).as_py() for b in batches)


def _task(plan: WritePlan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    from pyspark import TaskContext

    context = TaskContext.get()
    task = context.partitionId() if context is not None else 0
    collected = [b for b in batches if b.num_rows]
    if _refuses(collected):
        yield _result([], None, refused=True)
        return
    try:
        files, problem = write_task(plan, collected, task), None
    except ArcticError as e:
        files, problem = [], errors.report(e)
    if files or problem:
        yield _result(files, problem)


def _result(files: list[WrittenFile], problem: str | None, *, refused: bool = False) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "files": pa.array([pickle.dumps(files)], pa.binary()),
            "problem": pa.array([problem], pa.string()),
            "refused": pa.array([refused], pa.bool_()),
        }
    )
