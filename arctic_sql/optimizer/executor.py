"""Run optimizing tasks on Spark. Each task is one Spark job; it writes files and never commits.

A task merges its base and change files by the merge rule with the same plan merge-on-read uses
(``reader.merged_dataframe``: the base anti-joined with the changed keys, plus the newest upsert
per key), so optimized files hold exactly the rows a reader would have seen. Spark spills joins and
windows to disk, and nothing is collected to the driver, so a task whose change data exceeds memory
still completes. Tasks of one plan run concurrently (one thread each, as many as Spark has cores);
a failed task is retried up to ``self-optimizing.execute.num-retries`` times.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from arctic_sql import storage, writer
from arctic_sql.errors import ExecutionError
from arctic_sql.optimizer.planner import Task
from arctic_sql.scan import ReadPlan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from arctic_sql.catalog import ArcticTable

log = logging.getLogger(__name__)


@dataclass
class TaskResult:
    task: Task
    paths: list[str]
    duration_ms: int
    attempts: int


def task_rows(spark: SparkSession, table: ArcticTable, task: Task) -> DataFrame:
    """The merged rows a task writes: its inputs' rows by the merge rule, only its target node's."""
    from arctic_sql.reader import merged_dataframe

    plan = ReadPlan(0, table.schema, task.base_files, task.change_files, {}, None)  # type: ignore[arg-type]
    rows = merged_dataframe(spark, table, plan)
    if task.has_upper_files and task.target_node is not None:
        from pyspark.sql import functions as F

        from arctic_sql.format.tree import node_id_column

        buckets = int(table.prop("base.file-index.hash-bucket"))  # type: ignore[call-overload]
        rows = rows.where(node_id_column(table.primary_key, buckets) == F.lit(task.target_node))
    if not table.is_keyed:
        target = int(table.prop("self-optimizing.target-size"))  # type: ignore[call-overload]
        rows = rows.coalesce(max(1, math.ceil(task.input_bytes / target)))
    return rows


def run_task(spark: SparkSession, table: ArcticTable, task: Task, location: str, retries: int) -> TaskResult:
    """Run one task, retrying a failure after cleaning up what the failed attempt wrote."""
    started = time.monotonic()
    for attempt in range(retries + 1):
        try:
            spark.sparkContext.setJobGroup(f"arctic-optimize-{location.rsplit('/', 2)[-2]}",
                                           f"optimize {table.identifier} {task.partition or '(table)'} "
                                           f"node {task.target_node}", interruptOnCancel=True)
            paths = writer.write_files(task_rows(spark, table, task), table, store="base", location=location)
            return TaskResult(task, paths, int((time.monotonic() - started) * 1000), attempt + 1)
        except Exception as e:
            storage.delete_tree(location)
            if attempt == retries:
                raise ExecutionError(f"Optimizing task for {table.identifier} partition "
                                     f"{task.partition or '(table)'} node {task.target_node} failed after "
                                     f"{attempt + 1} attempt(s): {str(e).splitlines()[0]}") from e
            log.warning("optimizing task %s/%s failed (attempt %d), retrying: %s", task.partition,
                        task.target_node, attempt + 1, str(e).splitlines()[0])
    raise AssertionError("unreachable")


def run_tasks(spark: SparkSession, table: ArcticTable, tasks: list[Task], output_prefix: str, retries: int,
              on_done: Callable[[TaskResult], None] | None = None) -> list[TaskResult]:
    """Run every task (concurrently); each writes under ``{output_prefix}/{task number}``."""
    workers = max(1, min(len(tasks), spark.sparkContext.defaultParallelism))

    def one(numbered: tuple[int, Task]) -> TaskResult:
        number, task = numbered
        result = run_task(spark, table, task, f"{output_prefix}/{number:05d}", retries)
        if on_done is not None:
            on_done(result)
        return result

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="arctic-optimize") as pool:
        return list(pool.map(one, enumerate(tasks)))
