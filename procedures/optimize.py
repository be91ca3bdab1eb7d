"""``CALL system.optimize(table, mode, where, dry_run)``: optimize a table now, in the foreground.

One output row per partition planned. ``mode`` is ``minor``, ``major``, ``full`` or ``auto`` (what
the triggers say, as the background service would decide); ``where`` selects partitions by a
predicate on partition columns (each selected partition is optimized whole); ``dry_run`` returns the
plan without writing anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from arctic_sql.procedures import Parameter, procedure

from arctic_sql.optimizer.process import OUTPUT_SCHEMA
from arctic_sql.optimizer.process import optimize as run_optimize

if TYPE_CHECKING:
    from arctic_sql.session import Session


@procedure(
    "optimize",
    (Parameter("table"), Parameter("mode", "string", "auto"), Parameter("where", "string", None),
     Parameter("dry_run", "boolean", False)),
    OUTPUT_SCHEMA,
)
def optimize(session: Session, table: str, mode: str, where: str | None, dry_run: bool) -> list[tuple]:
    """Merge change data and small files of ``table`` into target-size base files."""
    results = run_optimize(session.spark, session.table(table), mode or "auto", where, bool(dry_run))
    return [r.row() for r in results]
