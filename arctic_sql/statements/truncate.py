"""``TRUNCATE TABLE t [PARTITION (k = v)]`` on arctic tables: a new version with no rows.

The table (or the named partitions) is overwritten with nothing, as ``INSERT OVERWRITE`` with no
rows would: one base-store commit removes the base files, and on a primary-key table it raises the
watermark of every emptied partition to a newly reserved transaction so that the change rows below
it are no longer read. History stays: earlier versions remain readable until snapshots expire.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.statements.show import matches, partition_filter
from arctic_sql.table.format import versions
from arctic_sql.table.records import leases
from arctic_sql.table.writing import base_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arctic_sql.statements.context import StatementContext
    from arctic_sql.table.model.table import ArcticTable

OPERATION = versions.Operation.TRUNCATE


def truncate(ctx: StatementContext, expression: exp.TruncateTable, text: str) -> DataFrame | None:
    targets = expression.expressions
    tables = [ctx.arctic_table(node, writes=True) for node in targets]
    if all(t is None for t in tables):
        return None  # Spark truncates its own tables
    if len(targets) != 1:
        raise InvalidArgumentError("TRUNCATE TABLE takes one table at a time")
    table = tables[0]
    assert table is not None
    partition = expression.args.get("partition")
    if partition is not None and not table.spec.fields:
        raise InvalidArgumentError(
            f"TRUNCATE TABLE ... PARTITION is not allowed on {table.identifier}: it is not partitioned"
        )
    truncate_table(table, partition_filter(table, partition))
    return ctx.ok()


def truncate_table(table: ArcticTable, wanted: dict[str, str]) -> None:
    """Commit a version of ``table`` without rows in the partitions matching ``wanted`` (all if empty):
    an overwrite with no files that replaces those partitions (base_rows.commit_overwrite)."""
    with leases.writing(table, OPERATION):
        base_rows.commit_overwrite(table, [], OPERATION, lambda partition: matches(partition, wanted))
