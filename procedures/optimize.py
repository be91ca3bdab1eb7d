"""``CALL system.optimize(table, mode, where, dry_run)``: optimize a table now, in the foreground.

One output row per partition planned. ``mode`` is ``minor``, ``major``, ``full`` or ``auto`` (what
the triggers say, as the background service would decide); ``where`` selects partitions by a
predicate on partition columns (each selected partition is optimized whole); ``dry_run`` returns the
plan without writing anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from sqlglot import exp

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.optimizer.process import PartitionResult
from arctic_sql.optimizer.process import optimize as run_optimize
from arctic_sql.parser import parse_one
from arctic_sql.procedures import Parameter, procedure
from arctic_sql.statements.pruning import row_filter

if TYPE_CHECKING:
    from arctic_sql.statements.context import StatementContext
    from arctic_sql.table.model.table import ArcticTable


@procedure(
    "optimize",
    (
        Parameter("table"),
        Parameter("mode", "string", "auto"),
        Parameter("where", "string", None),
        Parameter("dry_run", "boolean", False),
    ),
    PartitionResult,
)
def optimize(
    ctx: StatementContext, table: str, mode: str, where: str | None, dry_run: bool
) -> list[PartitionResult]:
    """Merge change data and small files of ``table`` (or of one branch, ``db.t.branch_b``) into
    target-size base files."""
    arctic_table = ctx.table(table, branch_ok=True)  # a branch is optimized on its own line
    partitions = partition_filter(arctic_table, where)
    return run_optimize(ctx.spark, arctic_table, mode or "auto", partitions, bool(dry_run))


def partition_filter(table: ArcticTable, where: str | None) -> BooleanExpression | None:
    """The pyiceberg filter of a ``where`` that may only name partition columns (None: all)."""
    if where is None or not where.strip():
        return None
    spec, schema = table.spec, table.schema
    if not spec.fields:
        raise InvalidArgumentError(
            f"Table {table.identifier} is not partitioned; optimize it without 'where'"
        )
    predicate = parse_one(f"SELECT 1 WHERE {where}").args["where"].this
    allowed = {schema.find_column_name(f.source_id).lower() for f in spec.fields}  # type: ignore[union-attr]
    named = {c.name.lower() for c in predicate.find_all(exp.Column)}
    if not named or named - allowed:
        raise InvalidArgumentError(
            f"Optimize 'where' may only use partition columns of {table.identifier} ({', '.join(sorted(allowed))}),"
            f" got: {where}"
        )
    result = row_filter(predicate, schema, {""})
    if isinstance(result, AlwaysTrue):
        raise InvalidArgumentError(f"Optimize 'where' cannot be evaluated on partitions: {where}")
    return result
