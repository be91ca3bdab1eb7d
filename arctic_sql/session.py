"""The arctic-sql session: SQL text in, Spark DataFrames out.

``Session.sql`` parses the text with the arctic dialect, claims the statements that touch arctic
tables (or are arctic's own), and passes everything else to ``spark.sql`` unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from arctic_sql import ddl, dml, query, show, truncate
from arctic_sql.catalog import ArcticCatalog, ArcticTable
from arctic_sql.errors import ArcticError, InvalidArgumentError, SqlParseError
from arctic_sql.options import load_catalog
from arctic_sql.parser import ParsedStatement, parse, statements, to_spark_sql
from arctic_sql.spark import configure, local_session, translate

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
    return Session(spark, ArcticCatalog(iceberg), database=database)


class Session:
    """Runs extended SQL against arctic tables and Spark."""

    def __init__(self, spark: SparkSession, catalog: ArcticCatalog, database: str = "default") -> None:
        self.spark = spark
        self.catalog = catalog
        self.current_database = database.lower()
        if not catalog.database_exists(self.current_database):
            if self.current_database != "default":
                from arctic_sql.errors import NoSuchDatabaseError

                raise NoSuchDatabaseError(f"Database '{database}' does not exist")
            catalog.create_database(self.current_database, if_not_exists=True)

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
                result = self.execute(statement.expression, statement.sql)
                continue
            # Spark's grammar is wider than sqlglot's (SET k=/path, INSERT OVERWRITE DIRECTORY ...):
            # a statement that touches no arctic table goes to Spark as written. If Spark cannot
            # parse it either, the dialect's error (with its line and column) is the one to show.
            try:
                result = self.execute(statement.expression, statement.sql)
            except SqlParseError as e:
                raise statement.error from e
        assert result is not None
        return result

    def claims_unparsed(self, statement: ParsedStatement) -> bool:
        """Whether a statement the dialect could not parse is arctic's: a CALL, or one naming an
        arctic table. Its parse error is then final; Spark never sees it."""
        from arctic_sql.catalog import TableIdentifier

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

    def arctic_table(self, node: exp.Table) -> ArcticTable | None:
        """The arctic table a table name in a statement stands for, or None if it is not arctic's."""
        from arctic_sql.catalog import TableIdentifier

        identifier = TableIdentifier.parse(".".join(p.name for p in node.parts), self.current_database)
        return self.catalog.load_table(identifier) if self.catalog.table_exists(identifier) else None

    def table(self, name: str) -> ArcticTable:
        from arctic_sql.catalog import TableIdentifier

        return self.catalog.load_table(TableIdentifier.parse(name, self.current_database))

    def read_table(self, table: ArcticTable, version: int | None = None, columns: list[str] | None = None,
                   in_memory: bool = True, **filters: Any) -> DataFrame:
        """The merge-on-read DataFrame of ``table`` at ``version`` (default: latest).

        ``base_filter``/``change_filter`` (pyiceberg expressions) prune files; see pruning.py.
        ``columns``: the columns the caller uses (default all); others may be left out.
        ``in_memory``: whether node groups may merge in memory (see reader.py).
        """
        from arctic_sql.reader import merged_dataframe
        from arctic_sql.scan import plan_read

        return merged_dataframe(self.spark, table, plan_read(table, version, **filters), columns, in_memory)

    def stop(self) -> None:
        self.spark.stop()

    # dispatch ---------------------------------------------------------------------------------
    def execute(self, expression: exp.Expression, text: str) -> DataFrame:
        try:
            return self._dispatch(expression, text)
        except ArcticError:
            raise
        except Exception as e:  # Spark errors cross into arctic-sql here, once.
            from py4j.protocol import Py4JError
            from pyspark.errors import PySparkException

            if isinstance(e, (PySparkException, Py4JError)):
                raise translate(e) from e
            raise

    def _dispatch(self, expression: exp.Expression, text: str) -> DataFrame:
        handler = _HANDLERS.get(type(expression))
        if handler is not None:
            result = handler(self, expression, text)
            if result is not None:
                return result
        return self.run_spark(expression, text)

    def run_spark(self, expression: exp.Expression, text: str) -> DataFrame:
        """Run a statement on Spark, after pointing its arctic table references at merged views."""
        if not isinstance(expression, exp.Command):
            from arctic_sql.history import replace_functions

            replaced = replace_functions(self, expression)  # get_latest_version() and friends
            if replaced is not expression:
                expression, text = replaced, to_spark_sql(replaced)
        if isinstance(expression, exp.Command) or not any(True for _ in expression.find_all(exp.Table)):
            return self.spark.sql(text)
        resolved = query.resolve(self, expression)
        if not resolved.views:
            return self.spark.sql(text)
        keep_views = isinstance(expression, exp.Create) and expression.kind == "VIEW"
        try:
            return self.spark.sql(to_spark_sql(resolved.expression))
        finally:
            if not keep_views:  # the DataFrame holds the analyzed plan; the views are no longer needed
                for view in resolved.views:
                    self.spark.catalog.dropTempView(view)

    def result(self, rows: list[tuple[Any, ...]], schema: str) -> DataFrame:
        return self.spark.createDataFrame(rows, schema)

    def ok(self) -> DataFrame:
        """The empty result of a statement that returns no rows."""
        from pyspark.sql.types import StructType

        return self.spark.createDataFrame([], StructType([]))


def _use(session: Session, expression: exp.Use, text: str) -> DataFrame:
    name = expression.this.name if expression.this is not None else ""
    if not session.catalog.database_exists(name):
        from arctic_sql.errors import NoSuchDatabaseError

        raise NoSuchDatabaseError(f"Database '{name}' does not exist")
    session.current_database = name.lower()
    if session.spark.catalog.databaseExists(name):
        session.spark.catalog.setCurrentDatabase(name)
    return session.ok()


def _describe_history(session: Session, expression: statements.DescribeHistory, text: str) -> DataFrame:
    """``DESCRIBE HISTORY db.t``: the same rows as ``SELECT * FROM db.t.history``."""
    from arctic_sql.errors import NoSuchTableError
    from arctic_sql.metadata_tables import metadata_table

    table = session.arctic_table(expression.this)
    if table is None:
        raise NoSuchTableError(f"Table or view not found: {expression.this.sql()}")
    return metadata_table(session, table, "history")


def _call(session: Session, expression: statements.Call, text: str) -> DataFrame:
    from arctic_sql import procedures

    return procedures.call(session, expression)


def _compact(session: Session, expression: statements.CompactTable, text: str) -> DataFrame:
    """``ALTER TABLE t COMPACT MINOR|MAJOR|FULL`` (MaxCompute): ``CALL system.optimize`` in that mode."""
    from arctic_sql.errors import NoSuchTableError
    from arctic_sql.optimizer.process import OUTPUT_SCHEMA, optimize

    table = session.arctic_table(expression.this)
    if table is None:
        raise NoSuchTableError(f"Table {expression.this.sql(dialect='spark')} does not exist")
    results = optimize(session.spark, table, str(expression.args["kind"]).lower())
    return session.result([r.row() for r in results], OUTPUT_SCHEMA)


_HANDLERS: dict[type, Any] = {
    exp.Use: _use,
    exp.Create: ddl.create,
    exp.Drop: ddl.drop,
    exp.Alter: ddl.alter,
    exp.Describe: ddl.describe,
    statements.ShowTables: ddl.show_tables,
    statements.ShowDatabases: ddl.show_databases,
    statements.UnsetTableProperties: ddl.unset_properties,
    statements.Explain: ddl.explain,
    exp.Insert: dml.insert,
    exp.Delete: dml.delete,
    exp.Update: dml.update,
    exp.Merge: dml.merge,
    statements.Call: _call,
    statements.DescribeHistory: _describe_history,
    statements.ShowTableProperties: show.show_table_properties,
    statements.ShowColumns: show.show_columns,
    statements.ShowPartitions: show.show_partitions,
    statements.ShowCreateTable: show.show_create_table,
    exp.TruncateTable: truncate.truncate,
    statements.CompactTable: _compact,
}

