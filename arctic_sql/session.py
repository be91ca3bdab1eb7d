"""The arctic-sql session: SQL text in, Spark DataFrames out.

``Session.sql`` parses the text with the arctic dialect, claims the statements that touch arctic
tables (or are arctic's own), and passes everything else to ``spark.sql`` unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from arctic_sql.datasource.source import install as install_format
from arctic_sql.errors import ArcticError, InvalidArgumentError, NoSuchDatabaseError, SqlParseError
from arctic_sql.options import load_catalog
from arctic_sql.parser import ParsedStatement, parse
from arctic_sql.spark import configure, local_session
from arctic_sql.statements import dispatch, runner
from arctic_sql.statements.context import StatementContext
from arctic_sql.table.catalog import ArcticCatalog
from arctic_sql.table.model.identifiers import TableIdentifier
from arctic_sql.table.model.table import ArcticTable
from arctic_sql.table_handle import TableHandle

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

DEFAULT_CATALOG_NAME = "arctic"


def connect(
    warehouse: str | None = "./warehouse",
    *,
    spark: SparkSession | None = None,
    catalog: Catalog | None = None,
    catalog_name: str = DEFAULT_CATALOG_NAME,
    catalog_properties: Mapping[str, str] | None = None,
    config_file: str | None = None,
    spark_conf: Mapping[str, str] | None = None,
    database: str = "default",
    master: str | None = None,
) -> Session:
    """Open a session.

    With no arguments: local Spark and a pyiceberg SQL catalog on SQLite in ``./warehouse``.
    ``spark`` reuses an existing SparkSession; ``catalog`` an existing pyiceberg catalog;
    ``catalog_properties`` (or a YAML ``config_file`` in pyiceberg's ``catalog: {name: {...}}``
    layout) configures any pyiceberg catalog: REST, Hive, Glue, SQL on PostgreSQL, ...
    ``master`` is the Spark master of the session started here (default ``$ARCTIC_SPARK_MASTER``,
    else ``local[*]``), e.g. ``spark://head:7077`` for a standalone cluster.

    >>> s = connect(warehouse="/tmp/wh")
    >>> s.sql("CREATE TABLE t (id BIGINT, v STRING, PRIMARY KEY (id))")
    """
    if spark is not None and master is not None:
        raise InvalidArgumentError("connect(master=...) starts a Spark session; it cannot apply to spark=")
    iceberg = catalog or load_catalog(warehouse, catalog_name, catalog_properties, config_file)
    if spark is None:
        spark = local_session(warehouse or ".", dict(spark_conf or {}), master)
    else:
        for key, value in (spark_conf or {}).items():
            spark.conf.set(key, value)
    configure(spark)
    install_format(spark, iceberg)
    return Session(spark, ArcticCatalog(iceberg), database=database)


def register(
    spark: SparkSession,
    warehouse: str | None = "./warehouse",
    *,
    catalog: Catalog | None = None,
    catalog_name: str = DEFAULT_CATALOG_NAME,
    catalog_properties: Mapping[str, str] | None = None,
    config_file: str | None = None,
) -> None:
    """Make ``format("arctic")`` work on a SparkSession made elsewhere; the catalog is given as for
    :func:`connect` (``connect`` does this itself).

    >>> register(spark, warehouse="/tmp/wh")
    >>> spark.read.format("arctic").load("db.t")
    """
    configure(spark)
    install_format(spark, catalog or load_catalog(warehouse, catalog_name, catalog_properties, config_file))


def view_refresher(spark: SparkSession, catalog: ArcticCatalog) -> Callable[[TableIdentifier], None]:
    """What the optimizer service runs to refresh a materialized view (``refresh.interval``): the
    statement, which sits above the service, handed down as a callable."""
    session = Session(spark, catalog)

    def refresh(identifier: TableIdentifier) -> None:
        session.sql(f"REFRESH MATERIALIZED VIEW `{identifier.database}`.`{identifier.name}`")

    return refresh


class Session:
    """Runs extended SQL against arctic tables and Spark.

    The front door: it parses, decides which statements are arctic's, and hands each to
    ``statements.dispatch`` with its ``StatementContext`` (Spark, catalog, current database).
    """

    def __init__(self, spark: SparkSession, catalog: ArcticCatalog, database: str = "default") -> None:
        self.context = StatementContext(spark, catalog, database.lower())
        if not catalog.database_exists(self.current_database):
            if self.current_database != "default":
                raise NoSuchDatabaseError(f"Database '{database}' does not exist")
            catalog.create_database(self.current_database, if_not_exists=True)

    @property
    def spark(self) -> SparkSession:
        return self.context.spark

    @property
    def catalog(self) -> ArcticCatalog:
        return self.context.catalog

    @property
    def current_database(self) -> str:
        return self.context.current_database

    # public API -------------------------------------------------------------------------------
    def sql(self, text: str) -> DataFrame:
        """Run one or more ``;``-separated statements; return the last one's result as a DataFrame."""
        statements_ = parse(text, keep_unparsed=True)
        if not statements_:
            raise InvalidArgumentError("No SQL statement to run")
        for statement in statements_:  # before anything runs
            if statement.error is not None and self.claims_unparsed(statement):
                raise statement.error
        result = None
        for statement in statements_:
            if statement.error is None:
                result = dispatch.execute(self.context, statement.expression, statement.sql)
                continue
            # Spark's grammar is wider than sqlglot's (SET k=/path, INSERT OVERWRITE DIRECTORY ...):
            # a statement that touches no arctic table goes to Spark as written. If Spark cannot
            # parse it either, the dialect's error (with its line and column) is the one to show.
            try:
                result = dispatch.execute(self.context, statement.expression, statement.sql)
            except SqlParseError as e:
                raise statement.error from e
        assert result is not None
        return result

    def claims_unparsed(self, statement: ParsedStatement) -> bool:
        """Whether a statement the dialect could not parse is arctic's: a CALL, or one naming an
        arctic table. Its parse error is then final; Spark never sees it."""
        if statement.sql.split(None, 1)[0].upper() == "CALL":
            return True
        for name in statement.table_names:
            try:
                identifier = TableIdentifier.parse(name, self.current_database)
            except ArcticError:
                continue  # not a table name (a Spark config key, a function, ...)
            if self.catalog.table_exists(identifier):
                return True
        return False

    def table(self, name: str) -> TableHandle:
        """The arctic table ``name`` (``db.t``, or ``t`` in the current database) with its actions:
        ``s.table("db.t").maintenance.expire_snapshots(retain_last=5)`` (see :mod:`arctic_sql.table_handle`)."""
        return TableHandle(self.context.table(name), self.context)

    def read_table(
        self,
        table: ArcticTable,
        version: int | None = None,
        columns: list[str] | None = None,
        in_memory: bool = True,
        **filters: Any,
    ) -> DataFrame:
        """The merge-on-read DataFrame of ``table`` at ``version`` (see ``StatementContext.read_table``)."""
        return runner.read_table(self.context, table, version, columns, in_memory, **filters)

    def stop(self) -> None:
        self.spark.stop()
