"""The SQL generator of the arctic dialect: Spark's generator plus our statements and clauses.

It prints every tree the arctic parser builds back to text that parses to the same tree, so that
``parse -> to_spark_sql -> parse`` round-trips. Plain Spark statements print as Spark SQL.
"""

from __future__ import annotations

import re
import typing as t

from sqlglot import exp
from sqlglot.generators.spark import SparkGenerator

from .statements import (
    Call,
    CloneTable,
    CompactTable,
    DescribeHistory,
    DescribeMaterializedView,
    Explain,
    SchemaEvolvingInsert,
    SchemaEvolvingMerge,
    ShowColumns,
    ShowCreateTable,
    ShowDatabases,
    ShowMaterializedViews,
    ShowPartitions,
    ShowTableProperties,
    ShowTables,
    TableOrder,
    TagStatement,
    UnsetTableProperties,
)


def _show_tables_sql(self: ArcticGenerator, expression: ShowTables) -> str:
    namespace = ".".join(self.sql(expression, key) for key in ("catalog", "this") if expression.args.get(key))
    keyword = "TABLE EXTENDED" if expression.args.get("extended") else "TABLES"
    return f"SHOW {keyword}{f' IN {namespace}' if namespace else ''}{_like_sql(self, expression)}"


def _show_databases_sql(self: ArcticGenerator, expression: ShowDatabases) -> str:
    catalog = self.sql(expression, "this")
    return f"SHOW DATABASES{f' IN {catalog}' if catalog else ''}{_like_sql(self, expression)}"


def _like_sql(self: ArcticGenerator, expression: exp.Expr) -> str:
    like = self.sql(expression, "like")
    return f" LIKE {like}" if like else ""


def _show_table_properties_sql(self: ArcticGenerator, expression: ShowTableProperties) -> str:
    key = self.sql(expression, "key")
    return f"SHOW TBLPROPERTIES {self.sql(expression, 'this')}{f' ({key})' if key else ''}"


def _show_create_table_sql(self: ArcticGenerator, expression: ShowCreateTable) -> str:
    return f"SHOW CREATE TABLE {self.sql(expression, 'this')}"


def _show_columns_sql(self: ArcticGenerator, expression: ShowColumns) -> str:
    database = self.sql(expression, "database")
    return f"SHOW COLUMNS IN {self.sql(expression, 'this')}{f' IN {database}' if database else ''}"


def _show_partitions_sql(self: ArcticGenerator, expression: ShowPartitions) -> str:
    partition = self.sql(expression, "partition")
    return f"SHOW PARTITIONS {self.sql(expression, 'this')}{f' {partition}' if partition else ''}"


def _unset_table_properties_sql(self: ArcticGenerator, expression: UnsetTableProperties) -> str:
    exists = " IF EXISTS" if expression.args.get("exists") else ""
    keys = self.expressions(expression, flat=True)
    return f"ALTER TABLE {self.sql(expression, 'this')} UNSET TBLPROPERTIES{exists} ({keys})"


def _compact_table_sql(self: ArcticGenerator, expression: CompactTable) -> str:
    return f"ALTER TABLE {self.sql(expression, 'this')} COMPACT {expression.text('kind').upper()}"


def _table_order_sql(self: ArcticGenerator, expression: TableOrder) -> str:
    table = self.sql(expression, "this")
    mode = expression.text("mode")
    if mode == "none":
        return f"ALTER TABLE {table} WRITE UNORDERED"
    columns = self.expressions(expression, flat=True)
    if mode == "z-order":
        return f"ALTER TABLE {table} CLUSTER BY ({columns})"
    locally = " LOCALLY" if expression.args.get("locally") else ""
    return f"ALTER TABLE {table} WRITE{locally} ORDERED BY ({columns})"


def _tag_statement_sql(self: ArcticGenerator, expression: TagStatement) -> str:
    action = expression.text("action")
    words = {
        "create": "CREATE TAG",
        "replace": "REPLACE TAG",
        "create_or_replace": "CREATE OR REPLACE TAG",
        "drop": "DROP TAG",
    }[action]
    if expression.args.get("branch"):
        words = words.replace("TAG", "BRANCH")
    if expression.args.get("exists"):
        words += " IF EXISTS" if action == "drop" else " IF NOT EXISTS"
    text = f"ALTER TABLE {self.sql(expression, 'this')} {words} {self.sql(expression, 'name')}"
    if expression.args.get("version") is not None:
        text += f" AS OF VERSION {self.sql(expression, 'version')}"
    if expression.args.get("retain") is not None:
        text += f" RETAIN {self.sql(expression, 'retain')} {expression.text('unit').upper()}"
    return text


def _clone_table_sql(self: ArcticGenerator, expression: CloneTable) -> str:
    exists = " IF NOT EXISTS" if expression.args.get("exists") else ""
    kind = "SHALLOW" if expression.args.get("shallow") else "DEEP"
    version = f" {self.sql(expression, 'version')}" if expression.args.get("version") is not None else ""
    return f"CREATE TABLE{exists} {self.sql(expression, 'this')} {kind} CLONE {self.sql(expression, 'source')}{version}"


def _describe_history_sql(self: ArcticGenerator, expression: DescribeHistory) -> str:
    return f"DESCRIBE HISTORY {self.sql(expression, 'this')}"


def _show_materialized_views_sql(self: ArcticGenerator, expression: ShowMaterializedViews) -> str:
    database = self.sql(expression, "this")
    return f"SHOW MATERIALIZED VIEWS{f' IN {database}' if database else ''}"


def _describe_materialized_view_sql(self: ArcticGenerator, expression: DescribeMaterializedView) -> str:
    return f"DESCRIBE MATERIALIZED VIEW {self.sql(expression, 'this')}"


def _explain_sql(self: ArcticGenerator, expression: Explain) -> str:
    kind = expression.text("kind").upper()
    return f"EXPLAIN {f'{kind} ' if kind else ''}{self.sql(expression, 'this')}"


def _schema_evolving_merge_sql(self: ArcticGenerator, expression: SchemaEvolvingMerge) -> str:
    return self.merge_sql(expression).replace("MERGE INTO", "MERGE WITH SCHEMA EVOLUTION INTO", 1)


def _schema_evolving_insert_sql(self: ArcticGenerator, expression: SchemaEvolvingInsert) -> str:
    return re.sub(
        r"\bINSERT (INTO|OVERWRITE)\b",
        r"INSERT WITH SCHEMA EVOLUTION \1",
        self.insert_sql(expression),
        count=1,
    )


def _call_sql(self: ArcticGenerator, expression: Call) -> str:
    return f"CALL {expression.name}({self.expressions(expression, flat=True)})"


class ArcticGenerator(SparkGenerator):
    """Spark's generator with the arctic statements and Spark-style time-travel clauses."""

    TRANSFORMS: t.ClassVar = {
        **SparkGenerator.TRANSFORMS,
        ShowTables: _show_tables_sql,
        ShowDatabases: _show_databases_sql,
        UnsetTableProperties: _unset_table_properties_sql,
        ShowTableProperties: _show_table_properties_sql,
        ShowCreateTable: _show_create_table_sql,
        ShowColumns: _show_columns_sql,
        ShowPartitions: _show_partitions_sql,
        CompactTable: _compact_table_sql,
        TableOrder: _table_order_sql,
        TagStatement: _tag_statement_sql,
        CloneTable: _clone_table_sql,
        DescribeHistory: _describe_history_sql,
        Explain: _explain_sql,
        ShowMaterializedViews: _show_materialized_views_sql,
        DescribeMaterializedView: _describe_materialized_view_sql,
        Call: _call_sql,
        SchemaEvolvingMerge: _schema_evolving_merge_sql,
        SchemaEvolvingInsert: _schema_evolving_insert_sql,
    }

    def version_sql(self, expression: exp.Version) -> str:
        """``VERSION AS OF 3``, ``TIMESTAMP BETWEEN a AND b``: Spark's words, whatever was written."""
        kind = expression.text("kind")
        bounds = expression.expression
        if kind == "BETWEEN" and isinstance(bounds, exp.Tuple) and len(bounds.expressions) == 2:
            start, end = bounds.expressions
            return f"{expression.name} BETWEEN {self.sql(start)} AND {self.sql(end)}"
        return super().version_sql(expression)

    def neg_sql(self, expression: exp.Neg) -> str:
        # -128Y reads as -(CAST(128 AS TINYINT)), and 128 is no TINYINT: the minus goes inside.
        inner = expression.this
        if isinstance(inner, exp.Cast) and isinstance(inner.this, exp.Literal) and not inner.this.is_string:
            return self.sql(exp.cast(exp.Literal.number(f"-{inner.this.this}"), inner.to))
        return super().neg_sql(expression)

    def describe_sql(self, expression: exp.Describe) -> str:
        # sqlglot drops the kind; in Spark it matters (DESCRIBE FUNCTION f, DESCRIBE DATABASE db).
        sql = super().describe_sql(expression)
        kind = expression.text("kind").upper()
        return f"DESCRIBE {kind}{sql[len('DESCRIBE') :]}" if kind else sql

    def fileformatproperty_sql(self, expression: exp.FileFormatProperty) -> str:
        # Spark's generator upper-cases the provider (USING ARCTIC); keep it as written so the
        # tree survives a round trip. Spark matches provider names case-insensitively either way.
        if expression.args.get("hive_format"):
            return super().fileformatproperty_sql(expression)
        return f"USING {self.sql(expression, 'this')}"
