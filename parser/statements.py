"""Syntax-tree nodes for the statements arctic-sql adds to Spark SQL.

Each node only declares its arguments; :mod:`arctic_sql.parser.grammar` builds them and
:mod:`arctic_sql.parser.generator` prints them back. Everything Spark itself understands keeps
sqlglot's own node types (``exp.Create``, ``exp.Merge``, ``exp.Select``, ...), and time travel stays
sqlglot's ``exp.Version`` on the ``exp.Table`` it follows.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp


class ShowTables(exp.Expression):
    """``SHOW TABLES [IN|FROM [catalog.]db] [[LIKE] 'pattern']``, or ``SHOW TABLE EXTENDED ...``.

    ``this``: the database as an ``exp.Identifier``, or None for the current one.
    ``catalog``: the catalog as an ``exp.Identifier`` when the name had two parts, else None.
    ``like``: the pattern as a string ``exp.Literal``, or None.
    ``extended``: True for ``SHOW TABLE EXTENDED`` (one more column, ``information``).
    """

    arg_types: t.ClassVar[dict[str, bool]] = {
        "this": False,
        "catalog": False,
        "like": False,
        "extended": False,
    }


class ShowDatabases(exp.Expression):
    """``SHOW DATABASES|SCHEMAS|NAMESPACES [IN|FROM catalog] [[LIKE] 'pattern']``.

    ``this``: the catalog as an ``exp.Identifier``, or None for the current one.
    ``like``: the pattern as a string ``exp.Literal``, or None.
    """

    arg_types: t.ClassVar[dict[str, bool]] = {"this": False, "like": False}


class UnsetTableProperties(exp.Expression):
    """``ALTER TABLE t UNSET TBLPROPERTIES [IF EXISTS] ('k1', 'k2')``.

    ``this``: the ``exp.Table``. ``expressions``: the keys as string ``exp.Literal`` nodes (an
    unquoted dotted key such as ``write.format`` becomes the literal ``'write.format'``).
    ``exists``: True when ``IF EXISTS`` was given.
    """

    arg_types: t.ClassVar[dict[str, bool]] = {"this": True, "expressions": True, "exists": False}


class Explain(exp.Expression):
    """``EXPLAIN [LOGICAL|EXTENDED|FORMATTED|CODEGEN|COST] <statement>``.

    ``this``: the parsed inner statement. ``kind``: the mode as a lower-case ``str`` (the value
    ``DataFrame.explain(mode=...)`` takes), or None for the plain form.
    """

    arg_types: t.ClassVar[dict[str, bool]] = {"this": True, "kind": False}


class Call(exp.Expression):
    """``CALL [catalog.]system.proc(arg => value, ...)`` or ``CALL system.proc(value, ...)``.

    ``this``: the dotted procedure name as written, as a ``str`` (e.g. ``'system.optimize'``).
    ``expressions``: the arguments in order. A named argument is an ``exp.Kwarg`` whose ``this`` is
    the name as an ``exp.Identifier`` and whose ``expression`` is the value; a positional argument
    is the value expression itself. Positional arguments may only come before named ones.
    """

    arg_types: t.ClassVar[dict[str, bool]] = {"this": True, "expressions": False}


class DescribeHistory(exp.Expression):
    """``DESCRIBE HISTORY t`` (or ``DESC HISTORY t``): the commits of a table.

    ``this``: the ``exp.Table``.
    """

    arg_types: t.ClassVar[dict[str, bool]] = {"this": True}


class CompactTable(exp.Expression):
    """``ALTER TABLE t COMPACT MINOR|MAJOR|FULL``: run one optimizing pass now.

    ``this``: the ``exp.Table``. ``kind``: ``'minor'``, ``'major'`` or ``'full'`` (a ``str``).
    """

    arg_types: t.ClassVar[dict[str, bool]] = {"this": True, "kind": True}


class TableOrder(exp.Expression):
    """``ALTER TABLE t WRITE [LOCALLY] ORDERED BY (c, ...)`` (Iceberg), ``ALTER TABLE t CLUSTER BY
    (c, ...)`` (Delta's Z-order) or ``ALTER TABLE t WRITE UNORDERED``: the order optimizing writes rows in.

    ``this``: the ``exp.Table``. ``mode``: ``'sort'``, ``'z-order'`` or ``'none'`` (a ``str``).
    ``expressions``: the columns as ``exp.Identifier``s (none for ``'none'``). ``locally``: True when
    written ``LOCALLY`` (the same order here: every order is within a tree node's files).
    """

    arg_types: t.ClassVar[dict[str, bool]] = {
        "this": True,
        "mode": True,
        "expressions": False,
        "locally": False,
    }


class ShowTableProperties(exp.Expression):
    """``SHOW TBLPROPERTIES t [('key')]``.

    ``this``: the ``exp.Table``. ``key``: the key as a string ``exp.Literal``, or None for all.
    """

    arg_types: t.ClassVar[dict[str, bool]] = {"this": True, "key": False}


class ShowCreateTable(exp.Expression):
    """``SHOW CREATE TABLE t``. ``this``: the ``exp.Table``."""

    arg_types: t.ClassVar[dict[str, bool]] = {"this": True}


class ShowColumns(exp.Expression):
    """``SHOW COLUMNS IN|FROM t [IN|FROM db]``.

    ``this``: the ``exp.Table``. ``database``: the database after the table as an
    ``exp.Identifier``, or None.
    """

    arg_types: t.ClassVar[dict[str, bool]] = {"this": True, "database": False}


class ShowPartitions(exp.Expression):
    """``SHOW PARTITIONS t [PARTITION (k = v, ...)]``.

    ``this``: the ``exp.Table``. ``partition``: sqlglot's ``exp.Partition`` of ``k = v`` pairs, or None.
    """

    arg_types: t.ClassVar[dict[str, bool]] = {"this": True, "partition": False}


class TagStatement(exp.Expression):
    """``ALTER TABLE t CREATE [OR REPLACE] TAG [IF NOT EXISTS] name [AS OF VERSION v] [RETAIN n DAYS|HOURS|MINUTES]``,
    ``ALTER TABLE t REPLACE TAG name ...`` and ``ALTER TABLE t DROP TAG [IF EXISTS] name`` (Iceberg's).

    ``this``: the ``exp.Table``. ``action``: ``'create'``, ``'replace'``, ``'create_or_replace'`` or
    ``'drop'`` (a ``str``). ``name``: the tag as an ``exp.Identifier``. ``exists``: True for ``IF NOT
    EXISTS`` / ``IF EXISTS``. ``version``: the version expression, or None for the newest.
    ``retain``: the amount as an ``exp.Literal``, or None to keep the tag until it is dropped;
    ``unit``: ``'days'``, ``'hours'`` or ``'minutes'``. ``branch``: True for ``CREATE BRANCH [IF NOT
    EXISTS] name [AS OF VERSION v]`` and ``DROP BRANCH [IF EXISTS] name`` (no RETAIN, no REPLACE).
    """

    arg_types: t.ClassVar[dict[str, bool]] = {
        "this": True,
        "action": True,
        "name": True,
        "exists": False,
        "version": False,
        "retain": False,
        "branch": False,
        "unit": False,
    }


class CloneTable(exp.Expression):
    """``CREATE TABLE [IF NOT EXISTS] t2 [SHALLOW|DEEP] CLONE t [VERSION|TIMESTAMP AS OF v]`` (Delta's).

    ``this``: the new table as an ``exp.Table``. ``source``: the source ``exp.Table``. ``shallow``:
    True for ``SHALLOW`` (metadata only), False for ``DEEP`` or no word (the files are copied, as
    Delta does by default). ``exists``: True for ``IF NOT EXISTS``. ``version``: sqlglot's
    ``exp.Version`` (``AS OF``), or None for the source's newest version.
    """

    arg_types: t.ClassVar[dict[str, bool]] = {
        "this": True,
        "source": True,
        "shallow": False,
        "exists": False,
        "version": False,
    }


class ShowMaterializedViews(exp.Expression):
    """``SHOW MATERIALIZED VIEWS [IN|FROM db]``. ``this``: the database as an ``exp.Identifier``, or None."""

    arg_types: t.ClassVar[dict[str, bool]] = {"this": False}


class DescribeMaterializedView(exp.Expression):
    """``DESCRIBE MATERIALIZED VIEW v`` (or ``EXPLAIN MATERIALIZED VIEW v``): how the view refreshes.

    ``this``: the ``exp.Table``.
    """

    arg_types: t.ClassVar[dict[str, bool]] = {"this": True}


class SchemaEvolvingMerge(exp.Merge):
    """``MERGE WITH SCHEMA EVOLUTION INTO ...`` (Spark 4's syntax): a MERGE whose ``UPDATE SET *`` and
    ``INSERT *`` clauses add the source's new columns to the target and widen its types. The
    arguments are ``exp.Merge``'s; Spark runs it unchanged on its own tables."""


class SchemaEvolvingInsert(exp.Insert):
    """``INSERT WITH SCHEMA EVOLUTION INTO|OVERWRITE ...`` (Spark 4's syntax): an INSERT whose query's
    new columns (past the table's by position, or unknown names with ``BY NAME`` or a column list)
    are added to the table and whose wider types widen it. The arguments are ``exp.Insert``'s."""


ARCTIC_STATEMENTS: tuple[type[exp.Expression], ...] = (
    ShowTables,
    ShowDatabases,
    UnsetTableProperties,
    Explain,
    Call,
    DescribeHistory,
    CompactTable,
    TableOrder,
    ShowTableProperties,
    ShowCreateTable,
    ShowColumns,
    ShowPartitions,
    TagStatement,
    CloneTable,
    ShowMaterializedViews,
    DescribeMaterializedView,
)
"""Every node class this module defines, for callers that dispatch on statement type."""
