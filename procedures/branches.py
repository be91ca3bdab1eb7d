"""Branch procedures: ``fast_forward`` publishes a branch (Iceberg's procedure and arguments).

>>> session.sql("CALL system.fast_forward(table => 'db.t', branch => 'main', to => 'audit')")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from arctic_sql.procedures import Parameter, procedure
from arctic_sql.table.maintenance import actions
from arctic_sql.table.writing.branch_writes import FastForwardResult

if TYPE_CHECKING:
    from arctic_sql.statements.context import StatementContext


@procedure("fast_forward", (Parameter("table"), Parameter("branch"), Parameter("to")), FastForwardResult)
def fast_forward(ctx: StatementContext, table: str, branch: str, to: str) -> list[FastForwardResult]:
    """Move ``branch`` (usually ``main``) to the head of branch ``to`` in both stores; refused when
    ``branch`` has commits ``to`` lacks (nothing is merged), nothing to do when ``to``'s commits are
    already in ``branch``. A call that died half-way is completed by the next one, or by the next
    write to ``branch``."""
    return [actions.fast_forward(ctx.table(table), to=to, branch=branch)]
