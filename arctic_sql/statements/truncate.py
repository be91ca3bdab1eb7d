"""``TRUNCATE TABLE t [PARTITION (k = v)]`` on arctic tables: a new version with no rows.

The table (or the named partitions) is overwritten with nothing, as ``INSERT OVERWRITE`` with no
rows would: one base-store commit removes the base files, and on a primary-key table it raises the
watermark of every emptied partition to a newly reserved transaction so that the change rows below
it are no longer read. History stays: earlier versions remain readable until snapshots expire.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyiceberg.table import Table
from sqlglot import exp

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.statements.show import matches, partition_filter
from arctic_sql.table import commit, leases
from arctic_sql.table.format import versions
from arctic_sql.table.format.layout import Store
from arctic_sql.table.scan import live_entries, live_files

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arctic_sql.statements.context import StatementContext
    from arctic_sql.table.catalog import ArcticTable

OPERATION = versions.Operation.TRUNCATE


def truncate(ctx: StatementContext, expression: exp.TruncateTable, text: str) -> DataFrame | None:
    targets = expression.expressions
    tables = [ctx.arctic_table(node) for node in targets]
    if all(t is None for t in tables):
        return None  # Spark truncates its own tables
    if len(targets) != 1:
        raise InvalidArgumentError("TRUNCATE TABLE takes one table at a time")
    table = tables[0]
    assert table is not None
    partition = expression.args.get("partition")
    if partition is not None and not table.spec.fields:
        raise InvalidArgumentError(f"TRUNCATE TABLE ... PARTITION is not allowed on {table.identifier}: "
                                   "it is not partitioned")
    truncate_table(table, partition_filter(table, partition))
    return ctx.ok()


def truncate_table(table: ArcticTable, wanted: dict[str, str]) -> None:
    """Commit a version of ``table`` without rows in the partitions matching ``wanted`` (all if empty)."""
    with leases.writing(table, OPERATION):
        def build(store: Table, txn: int | None) -> commit.BaseChange:
            # Every change committed before the reserved transaction is in the change store now
            # (commit_reserved refreshed it); none committed after it (it would have taken another).
            change_partitions: set[str] = set()
            if table.change is not None:
                snapshot = table.change.current_snapshot()
                change_partitions = {f.partition for f in live_files(table.change, snapshot, Store.CHANGE)}
            current = store.current_snapshot()
            base = [f for f in live_entries(store, current, Store.BASE) if matches(f.partition, wanted)]
            marks = versions.watermarks_of(current)
            summary = {versions.OPERATION: OPERATION}
            if txn is not None:
                emptied = {f.partition for f in base} | {p for p in change_partitions | set(marks)
                                                         if matches(p, wanted)}
                if not table.spec.fields:
                    emptied.add("")
                marks.update({p: txn for p in emptied})
                summary[versions.TXN] = str(txn)
            return commit.BaseChange(delete=[f.data_file for f in base], watermarks=marks, summary=summary)

        if table.is_keyed:
            commit.commit_reserved(table, OPERATION, build, [])
        else:
            commit.commit_base(table, lambda store: build(store, None), [])
