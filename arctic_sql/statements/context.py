"""What a statement handler works with: Spark, the catalog and the current database.

Handlers receive a ``StatementContext``, never the Session: the Session is the front door (parse,
claim, dispatch). The context is data (and the names its tables go by); reading tables and running
Spark SQL over them is the query runner's (``statements/runner.py``), which handlers call with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from arctic_sql.errors import InvalidArgumentError, NoSuchTableError
from arctic_sql.statements import mv_analysis
from arctic_sql.table.catalog import ArcticCatalog
from arctic_sql.table.model.identifiers import TableIdentifier
from arctic_sql.table.model.table import ArcticTable
from arctic_sql.table.reading import branches

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# The value of one SQL expression (``current_date() - INTERVAL 1 DAY``, a scalar subquery over an
# arctic table), as the query runner computes it (runner.evaluator): what time travel and procedure
# arguments are given to evaluate theirs with, so they need not know the runner.
Evaluate = Callable[[str], Any]

# ``SET arctic.branch = audit``: the branch a statement's reads and writes go to when it names a table
# without one (Iceberg's ``spark.wap.branch``, for write-audit-publish). A Spark SQL conf, so each
# Thrift client (its own ``newSession()``) has its own, and ``RESET`` clears it.
BRANCH_CONF = "arctic.branch"


@dataclass
class StatementContext:
    """Spark, the arctic catalog and the database unqualified names resolve in (``USE`` changes it)."""

    spark: SparkSession
    catalog: ArcticCatalog
    current_database: str = "default"
    _ok: DataFrame | None = field(default=None, repr=False)

    def identifier(self, node: exp.Table) -> TableIdentifier:
        """The table a name in a statement means (``t`` in the current database); InvalidArgumentError
        for a name of more than ``catalog.db.t``."""
        return TableIdentifier.parse(".".join(p.name for p in node.parts), self.current_database)

    def arctic_table(self, node: exp.Table, *, writes: bool = False) -> ArcticTable | None:
        """The arctic table a table name in a statement stands for, or None if it is not arctic's.
        ``writes``: the statement writes its rows (DML), so it goes to the session's branch."""
        identifier = self.identifier(node)
        try:
            table = self.catalog.load_table(identifier)
        except NoSuchTableError:
            return None
        if not writes:
            return table
        if mv_analysis.is_definition(table.base.properties):
            # A view's rows are its query's: a write would be lost, or built on, by the next refresh.
            raise InvalidArgumentError(
                f"{table.identifier} is a materialized view: its rows change only by "
                f"REFRESH MATERIALIZED VIEW {table.identifier}"
            )
        return self.on_session_branch(table, writes=True)

    def session_branch(self) -> str | None:
        """The branch ``SET arctic.branch`` names, or None (``main``, unset or empty)."""
        value = (self.spark.conf.get(BRANCH_CONF, None) or "").strip().strip("'\"`").lower()
        return None if value in ("", "main") else value

    def on_session_branch(self, table: ArcticTable, *, writes: bool) -> ArcticTable:
        """``table`` at the session's branch, when the statement names no branch of its own.

        As Iceberg's ``spark.wap.branch``: a read of a table without that branch reads ``main``. A
        write to one is refused rather than made on ``main`` or on a branch made for it: the user
        asked that writes stay off ``main``, and making refs is DDL (``CREATE BRANCH``)."""
        name = self.session_branch()
        if name is None or table.identifier.branch is not None:
            return table
        if branches.find(table, name) is None:
            if not writes:
                return table
            raise InvalidArgumentError(
                f"{table.identifier} has no branch '{name}' to write to ({BRANCH_CONF} = {name}): "
                f"ALTER TABLE {table.identifier} CREATE BRANCH {name}, or RESET {BRANCH_CONF} to write to main"
            )
        return branches.on_branch(table, name)

    def table(self, name: str, *, branch_ok: bool = False) -> ArcticTable:
        """The arctic table ``name`` (``db.t`` or ``t`` in the current database), or NoSuchTableError.
        Procedures and table actions act on the whole table (its branches' files included): a
        branch's name (``db.t.branch_b``) is refused rather than acted on as if it were main, unless
        ``branch_ok`` (optimizing, which runs on one line of history)."""
        identifier = TableIdentifier.parse(name, self.current_database)
        if identifier.branch is not None and not branch_ok:
            raise InvalidArgumentError(
                f"{identifier} is a branch: procedures and table actions take the table, "
                f"{identifier.on_branch(None)} (maintenance keeps every branch's history)"
            )
        return self.catalog.load_table(identifier)

    def result(self, rows: list[tuple[Any, ...]], schema: str) -> DataFrame:
        return self.spark.createDataFrame(rows, schema)

    def ok(self) -> DataFrame:
        """The empty result of a statement that returns no rows (one DataFrame, made once: it cannot
        change, and making it costs a round of calls into the JVM per statement)."""
        from pyspark.sql.types import StructType

        if self._ok is None:
            self._ok = self.spark.createDataFrame([], StructType([]))
        return self._ok
