"""``CALL system.hive_sync(table, version)``: bring a table's Hive view up to date now.

>>> session.sql("CALL system.hive_sync(table => 'db.t')")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from arctic_sql.procedures import Parameter, procedure
from arctic_sql.table.maintenance import hive_sync as hive
from arctic_sql.table.maintenance.hive_sync import HiveSyncResult

if TYPE_CHECKING:
    from arctic_sql.statements.context import StatementContext


@procedure("hive_sync", (Parameter("table"), Parameter("version", "long", None)), HiveSyncResult)
def hive_sync(ctx: StatementContext, table: str, version: int | None) -> list[HiveSyncResult]:
    """Write the merged rows of ``version`` (default: the latest) of the partitions whose files
    changed since the last sync as plain Parquet in new folders, and point the Hive metastore's
    partitions at them (the table needs ``hive.compatible``)."""
    return [hive.sync(ctx.spark, ctx.table(table), version=version)]
