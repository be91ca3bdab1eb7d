"""DDL and catalog statements: CREATE, DROP, ALTER, DESCRIBE, SHOW, EXPLAIN.

Each handler returns a DataFrame, or None to let the session pass the statement to Spark (when it
names no arctic table: ``CREATE TABLE ... USING parquet``, views, ...).
"""

from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from arctic_sql.errors import (
    IncompleteTableError,
    InvalidArgumentError,
    NoSuchColumnError,
    NoSuchDatabaseError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from arctic_sql.faults import fault_point
from arctic_sql.parser import statements, to_spark_sql
from arctic_sql.statements import mv_analysis, runner, time_travel, views
from arctic_sql.statements.clauses import literal_value, spark_struct
from arctic_sql.statements.schema_changes import apply_alter, checked_order, set_order
from arctic_sql.table.format import clustering
from arctic_sql.table.format.partitioning import PartitionTerm, build_spec
from arctic_sql.table.format.versions import Operation
from arctic_sql.table.maintenance import hive_sync
from arctic_sql.table.model import materialized
from arctic_sql.table.model import properties as props
from arctic_sql.table.model.identifiers import TableIdentifier, whole_table
from arctic_sql.table.model.schemas import iceberg_schema, type_string
from arctic_sql.table.reading.scan import latest_version
from arctic_sql.table.records import leases
from arctic_sql.table.writing import base_rows, branch_writes, commit, tag_writes

if TYPE_CHECKING:
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from arctic_sql.statements.context import StatementContext
    from arctic_sql.table.model.table import ArcticTable

ARCTIC_PROVIDERS = {"arctic", "mixed_iceberg", "iceberg"}


# CREATE ------------------------------------------------------------------------------------------
def create(ctx: StatementContext, expression: exp.Create, text: str) -> DataFrame | None:
    kind = (expression.kind or "").upper()
    if kind in ("DATABASE", "SCHEMA"):
        name = _namespace_name(expression.this)
        ctx.catalog.create_database(name, if_not_exists=bool(expression.args.get("exists")))
        ctx.spark.sql(f"CREATE DATABASE IF NOT EXISTS `{name}`")
        return ctx.ok()
    if kind == "VIEW" and _is_arctic_create(expression):  # not TEMPORARY: Spark keeps those
        return views.create(ctx, expression)
    if kind != "TABLE" or not _is_arctic_create(expression):
        return None
    return create_table(ctx, expression)


def _namespace_name(node: exp.Expression) -> str:
    # sqlglot reads the name in CREATE/DROP SCHEMA (not DATABASE) as a table's db part: Table(db=x).
    return node.name or node.text("db")


def _properties(expression: exp.Expression, kind: type[exp.Expression]) -> list[exp.Expression]:
    container = expression.args.get("properties")
    return [p for p in (container.expressions if container else []) if isinstance(p, kind)]


def _is_arctic_create(expression: exp.Create) -> bool:
    if expression.args.get("temporary") or any(True for _ in _properties(expression, exp.TemporaryProperty)):
        return False
    formats = [f.name for f in _properties(expression, exp.FileFormatProperty)]
    # In ``PRIMARY KEY (id) USING arctic`` sqlglot reads the USING as the key's index parameters.
    formats += [
        k.args["include"].args["using"].name
        for k in _properties(expression, exp.PrimaryKey)
        if k.args.get("include") is not None and k.args["include"].args.get("using") is not None
    ]
    return not formats or formats[0].lower() in ARCTIC_PROVIDERS


COMMENT = "comment"  # the table property holding CREATE TABLE's COMMENT, as Iceberg's Spark tables keep it


def _table_properties(expression: exp.Expression) -> dict[str, str]:
    # Exactly exp.Property: its subclasses (PARTITIONED BY, LOCATION, ...) are other clauses.
    return {
        literal_value(p.this): literal_value(p.args["value"])
        for p in _properties(expression, exp.Property)
        if type(p) is exp.Property
    }


def _with_cluster_by(expression: exp.Create, values: dict[str, str], identifier: object) -> dict[str, str]:
    """``CREATE TABLE ... CLUSTER BY (c1, c2)`` (Delta's spelling): the Z-order ``ALTER TABLE ...
    CLUSTER BY`` sets, as the same table properties (checked against the schema by the caller)."""
    found = _properties(expression, exp.ClusterProperty)
    if not found:
        return values
    if clustering.COLUMNS in values:
        raise InvalidArgumentError(
            f"CREATE TABLE {identifier} orders its files twice: CLUSTER BY and '{clustering.COLUMNS}'"
        )
    columns = found[0].expressions
    if not all(isinstance(c, exp.Column) and not c.table for c in columns):
        raise InvalidArgumentError(
            f"CREATE TABLE {identifier} CLUSTER BY takes column names: {found[0].sql(dialect='spark')}"
        )
    return {
        **values,
        clustering.COLUMNS: ",".join(c.name for c in columns),
        clustering.MODE: clustering.ZORDER,
    }


def validated_properties(expression: exp.Create) -> dict[str, str]:
    """The TBLPROPERTIES of a CREATE, checked against the registry, under canonical keys."""
    return props.validate(_table_properties(expression), creating=True)


def partition_spec(
    expression: exp.Create, schema: Schema, primary_key: list[str], identifier: TableIdentifier
) -> PartitionSpec:
    """The PARTITIONED BY of a CREATE over ``schema``; on a keyed table only key columns may partition."""
    spec = build_spec(_partition_terms(expression), schema)
    if primary_key:
        key_ids = {schema.find_field(k).field_id for k in primary_key}
        for field in spec.fields:
            if field.source_id not in key_ids:
                column = schema.find_column_name(field.source_id)
                raise InvalidArgumentError(
                    f"Partition column '{column}' of {identifier} must be part of the primary key, "
                    "so that a key never moves between partitions"
                )
    return spec


def _shown_key(table: ArcticTable) -> list[str]:
    return materialized.shown_key(table.base.properties, table.primary_key)


def _is_materialized_view(ctx: StatementContext, identifier: TableIdentifier) -> bool:
    try:
        return mv_analysis.is_definition(ctx.catalog.load_table(identifier).base.properties)
    except IncompleteTableError:
        return False  # a table whose change store is lost is no view; DROP TABLE removes what is left


def _partition_terms(expression: exp.Create) -> list[PartitionTerm]:
    found = _properties(expression, exp.PartitionedByProperty)
    if not found:
        return []
    schema = found[0].this
    items = schema.expressions if isinstance(schema, exp.Schema) else [schema]
    terms = []
    for item in items:
        if isinstance(item, (exp.Identifier, exp.Column)):
            terms.append(PartitionTerm("identity", item.name))
        elif isinstance(item, exp.PartitionedByBucket):
            terms.append(PartitionTerm("bucket", item.this.name, int(item.expression.name)))
        elif isinstance(item, exp.PartitionByTruncate):
            terms.append(PartitionTerm("truncate", item.this.name, int(item.expression.name)))
        elif isinstance(item, exp.Func):
            name = (item.name if isinstance(item, exp.Anonymous) else item.key).lower()
            args = [a for a in item.iter_expressions()]
            columns = [a for a in args if isinstance(a, exp.Column)]
            widths = [a for a in args if isinstance(a, exp.Literal) and not a.is_string]
            if len(columns) != 1:
                raise InvalidArgumentError(f"Invalid partition expression {item.sql()}")
            terms.append(PartitionTerm(name, columns[0].name, int(widths[0].name) if widths else None))
        else:
            raise InvalidArgumentError(f"Invalid partition expression {item.sql()}")
    return terms


def create_table(ctx: StatementContext, expression: exp.Create) -> DataFrame:
    target = expression.this
    table_node = target.this if isinstance(target, exp.Schema) else target
    identifier = ctx.identifier(table_node)
    column_defs = [
        c
        for c in (target.expressions if isinstance(target, exp.Schema) else [])
        if isinstance(c, exp.ColumnDef)
    ]
    keys_nodes = [
        c
        for c in (target.expressions if isinstance(target, exp.Schema) else [])
        if isinstance(c, exp.PrimaryKey)
    ]
    primary_key = [k.name for k in keys_nodes[0].expressions] if keys_nodes else []
    primary_key += [
        c.name
        for c in column_defs
        if any(isinstance(cc.kind, exp.PrimaryKeyColumnConstraint) for cc in c.constraints)
    ]
    # Amoro's form for CTAS, where there is no column list: CREATE TABLE t PRIMARY KEY (id) USING arctic AS ...
    primary_key += [k.name for p in _properties(expression, exp.PrimaryKey) for k in p.expressions]
    query_node = expression.expression
    user_props = validated_properties(expression)
    exists = bool(expression.args.get("exists"))
    replace = bool(expression.args.get("replace"))
    if ctx.catalog.table_exists(identifier) and not replace:
        if exists:
            return ctx.ok()
        raise TableAlreadyExistsError(f"Table {identifier} already exists")

    source = None
    if query_node is not None:
        if replace and any(_identifier_of(ctx, t) == identifier for t in query_node.find_all(exp.Table)):
            # The old table's files go before the new rows are written from the (lazy) query.
            raise InvalidArgumentError(
                f"CREATE OR REPLACE TABLE {identifier} cannot read {identifier} itself"
            )
        source = runner.run_spark(ctx, query_node, to_spark_sql(query_node))
        struct = source.schema if not column_defs else spark_struct(ctx, column_defs)
        if column_defs and len(column_defs) != len(source.columns):
            raise InvalidArgumentError(
                f"CREATE TABLE {identifier} declares {len(column_defs)} columns but its query returns "
                f"{len(source.columns)}"
            )
    else:
        if not column_defs:
            raise InvalidArgumentError(f"CREATE TABLE {identifier} needs columns or AS SELECT")
        struct = spark_struct(ctx, column_defs)
    names = [f.name for f in struct.fields]
    _check_names(names, identifier)
    by_lower = {n.lower(): n for n in names}
    for key in primary_key:
        if key.lower() not in by_lower:
            raise NoSuchColumnError(f"Primary key column '{key}' is not a column of {identifier}")
    primary_key = [by_lower[k.lower()] for k in primary_key]
    if len(set(primary_key)) != len(primary_key):
        raise InvalidArgumentError(f"Primary key of {identifier} names a column twice")
    _check_key_types(struct, primary_key)
    _check_transactional(user_props, primary_key, identifier)
    not_null = {
        c.name
        for c in column_defs
        if any(isinstance(cc.kind, exp.NotNullColumnConstraint) for cc in c.constraints)
    }
    comments = {
        by_lower[c.name.lower()]: cc.kind.this.name
        for c in column_defs
        for cc in c.constraints
        if isinstance(cc.kind, exp.CommentColumnConstraint)
    }
    schema = iceberg_schema(
        struct, required=set(primary_key) | not_null, identifier=primary_key, docs=comments
    )
    user_props = checked_order(
        _with_cluster_by(expression, user_props, identifier), schema, primary_key, identifier
    )
    for comment in _properties(expression, exp.SchemaCommentProperty):  # CREATE TABLE ... COMMENT 'x'
        user_props[COMMENT] = comment.this.name
    spec = partition_spec(expression, schema, primary_key, identifier)
    location = [p for p in _properties(expression, exp.LocationProperty)]
    if replace and ctx.catalog.table_exists(identifier):
        # CREATE OR REPLACE (what dbt-spark sends for iceberg models): the query is planned and
        # checked above, before the old table goes. Not atomic: a reader in between finds no table.
        ctx.catalog.drop_table(identifier, purge=True)
    # CTAS stages the table under a hidden name and publishes it once its rows are committed: a
    # crash or a failing query leaves no table behind, and the next CREATE clears what is left.
    table = ctx.catalog.create_table(
        identifier,
        schema,
        spec,
        user_props,
        location=location[0].name if location else None,
        staged=source is not None,
    )
    if source is not None:
        renamed = source.toDF(*names)
        fault_point("ctas-before-data")
        try:
            base_rows.overwrite_rows(table, renamed, operation=Operation.CREATE_AS_SELECT)
        except BaseException:
            ctx.catalog.discard_staged(table)
            raise
        ctx.catalog.publish(table)
    return ctx.ok()


def _check_key_types(struct: StructType, primary_key: list[str]) -> None:
    """Iceberg identifier fields must be primitive and not floating point (equality is not exact)."""
    from pyspark.sql.types import ArrayType, DecimalType, DoubleType, FloatType, MapType
    from pyspark.sql.types import StructType as SparkStruct

    for field in struct.fields:
        if field.name not in primary_key:
            continue
        shown = field.dataType.simpleString().upper()
        if isinstance(field.dataType, (DoubleType, FloatType)):
            raise InvalidArgumentError(
                f"Primary key column '{field.name}' has type {shown}; keys must be exact types "
                "(integers, DECIMAL, STRING, DATE, TIMESTAMP, ...), not FLOAT or DOUBLE"
            )
        if isinstance(field.dataType, (ArrayType, MapType, SparkStruct)):
            raise InvalidArgumentError(
                f"Primary key column '{field.name}' has type {shown}; keys must have a primitive type"
            )
        if isinstance(field.dataType, DecimalType) and field.dataType.precision > 18:
            # The writers hash a key as Spark does; a DECIMAL over 18 digits is Spark's bytes, not a long.
            raise InvalidArgumentError(
                f"Primary key column '{field.name}' has type {shown}; a DECIMAL key may have at most 18 digits"
            )


def _check_transactional(
    user_props: dict[str, str], primary_key: list[str], identifier: TableIdentifier
) -> None:
    """MaxCompute's ``'transactional'='true'`` asks for a table that takes upserts and deletes: that
    is a primary-key table here, so without a key it is refused rather than silently append-only."""
    if user_props.get("transactional", "").strip().lower() == "true" and not primary_key:
        raise InvalidArgumentError(
            f"Table {identifier} sets 'transactional'='true' but has no PRIMARY KEY; "
            "transactional tables need one (add PRIMARY KEY (...) or leave the property out)"
        )


def _identifier_of(ctx: StatementContext, node: exp.Table) -> TableIdentifier | None:
    try:
        return ctx.identifier(node)
    except InvalidArgumentError:
        return None


def _check_names(names: list[str], identifier: TableIdentifier) -> None:
    seen: set[str] = set()
    for name in names:
        if name.lower() in seen:
            raise InvalidArgumentError(f"Column '{name}' appears twice in {identifier}")
        seen.add(name.lower())


# DROP --------------------------------------------------------------------------------------------
def drop(ctx: StatementContext, expression: exp.Drop, text: str) -> DataFrame | None:
    kind = (expression.kind or "").upper()
    targets = expression.args.get("tables") or [expression.this]
    if len(targets) != 1:
        raise InvalidArgumentError("DROP takes one name at a time")
    if kind in ("DATABASE", "SCHEMA"):
        name = _namespace_name(targets[0])
        if not ctx.catalog.database_exists(name) and not ctx.spark.catalog.databaseExists(name):
            if expression.args.get("exists"):
                return ctx.ok()
            raise NoSuchDatabaseError(f"Database '{name}' does not exist")
        cascade = bool(expression.args.get("cascade"))
        ctx.catalog.drop_database(name, if_exists=True, cascade=cascade)
        ctx.spark.sql(text)
        if ctx.current_database == name.lower():
            ctx.current_database = "default"
        return ctx.ok()
    if kind not in ("TABLE", "VIEW"):
        return None
    identifier = ctx.identifier(targets[0])
    if kind == "VIEW":
        return (
            None
            if expression.args.get("temporary")
            else views.drop(ctx, identifier, bool(expression.args.get("exists")))
        )
    if ctx.catalog.load_view(identifier) is not None:
        raise InvalidArgumentError(f"{identifier} is a view, not a table: use DROP VIEW")
    if ctx.catalog.table_exists(identifier) and _is_materialized_view(ctx, identifier):
        raise InvalidArgumentError(
            f"{identifier} is a materialized view, not a table: use DROP MATERIALIZED VIEW"
        )
    if not ctx.catalog.table_exists(identifier):
        if ctx.catalog.remove_leftovers(identifier):  # what an interrupted CREATE or DROP left
            return ctx.ok()
        return None  # Spark reports a missing table, or drops its own
    purge = bool(expression.args.get("purge"))
    if purge:  # the Hive view goes with its table; its folders are among the files purged
        try:
            hive_sync.drop_view(ctx.spark, ctx.catalog.load_table(identifier))
        except IncompleteTableError:
            pass  # a table that lost its change store: what is left of it is dropped below
    ctx.catalog.drop_table(identifier, purge=purge)
    return ctx.ok()


# ALTER -------------------------------------------------------------------------------------------
def alter(ctx: StatementContext, expression: exp.Alter, text: str) -> DataFrame | None:
    if (expression.args.get("kind") or "").upper() == "VIEW":
        return views.alter(ctx, expression)
    table = ctx.arctic_table(expression.this)
    if table is None:
        return None
    whole_table(table.identifier, "ALTER TABLE")  # a schema and properties are the whole table's
    with leases.writing(table, "alter"):  # its metadata files are unreferenced until each commit
        apply_alter(ctx, table, expression)
    return ctx.ok()


def order(ctx: StatementContext, expression: statements.TableOrder, text: str) -> DataFrame | None:
    """``ALTER TABLE t WRITE [LOCALLY] ORDERED BY | CLUSTER BY | WRITE UNORDERED``."""
    table = ctx.arctic_table(expression.this)
    if table is None:
        raise NoSuchTableError(f"Table {expression.this.sql(dialect='spark')} does not exist")
    with leases.writing(table, "alter"):
        set_order(table, expression)
    return ctx.ok()


def unset_properties(
    ctx: StatementContext, expression: statements.UnsetTableProperties, text: str
) -> DataFrame | None:
    table = ctx.arctic_table(expression.this)
    if table is None:
        return None
    whole_table(table.identifier, "ALTER TABLE")
    keys = [props.canonical_key(k.name) for k in expression.expressions]
    for key in keys:
        props.check_unset(key)
        if key not in table.user_properties() and not expression.args.get("exists"):
            raise InvalidArgumentError(f"Table property '{key}' is not set on {table.identifier}")
    with leases.writing(table, "alter"):
        commit.set_properties(table.base, removals=keys)
    return ctx.ok()


def tag(ctx: StatementContext, expression: statements.TagStatement, text: str) -> DataFrame:
    """``ALTER TABLE t CREATE [OR REPLACE] TAG | REPLACE TAG | DROP TAG ...`` (Iceberg's syntax)."""
    table = ctx.arctic_table(expression.this)
    if table is None:
        raise NoSuchTableError(f"Table {expression.this.sql(dialect='spark')} does not exist")
    if table.identifier.branch is not None:
        raise InvalidArgumentError(
            f"Tags and branches belong to the whole table: name {table.identifier.on_branch(None)}, "
            f"not {table.identifier}"
        )
    action, name = expression.text("action"), expression.text("name")
    if expression.args.get("branch"):
        return _branch(ctx, table, expression, action, name)
    if action == "drop":
        tag_writes.drop(table, name, if_exists=bool(expression.args.get("exists")))
        return ctx.ok()
    version = expression.args.get("version")
    retain = expression.args.get("retain")
    tag_writes.create(
        table,
        name,
        time_travel.version_value(
            ctx, table, version, f"TAG {name} of {table.identifier}", runner.evaluator(ctx)
        )
        if version
        else None,
        int(retain.this) * tag_writes.UNIT_MS[expression.text("unit")] if retain is not None else None,
        create=action != "replace",
        replace=action != "create",
        if_not_exists=bool(expression.args.get("exists")),
    )
    return ctx.ok()


def _branch(
    ctx: StatementContext, table: ArcticTable, expression: statements.TagStatement, action: str, name: str
) -> DataFrame:
    """``ALTER TABLE t CREATE BRANCH [IF NOT EXISTS] b [AS OF VERSION v]`` and ``DROP BRANCH [IF EXISTS] b``."""
    exists = bool(expression.args.get("exists"))
    if action == "drop":
        branch_writes.drop(table, name, if_exists=exists)
        return ctx.ok()
    version = expression.args.get("version")
    at = (
        time_travel.version_value(
            ctx, table, version, f"BRANCH {name} of {table.identifier}", runner.evaluator(ctx)
        )
        if version
        else None
    )
    branch_writes.create(table, name, at, if_not_exists=exists)
    return ctx.ok()


# DESCRIBE / SHOW ---------------------------------------------------------------------------------
def describe(ctx: StatementContext, expression: exp.Describe, text: str) -> DataFrame | None:
    if not isinstance(expression.this, exp.Table):
        return None
    table = ctx.arctic_table(expression.this)
    if table is None:
        identifier = _identifier_of(ctx, expression.this)
        view = ctx.catalog.load_view(identifier) if identifier is not None else None
        if identifier is None or view is None:
            return None
        return ctx.result(
            views.schema_rows(ctx, identifier, view), "col_name string, data_type string, comment string"
        )
    rows: list[tuple[str, str, str | None]] = []
    schema = table.schema
    for field in schema.fields:
        if not materialized.is_hidden(table.base.properties, field.name):  # a view's refresh state
            rows.append((field.name, type_string(field.field_type), field.doc))
    if table.spec.fields:
        rows += [("", "", ""), ("# Partition Information", "", ""), ("# col_name", "data_type", "comment")]
        for part in table.spec.fields:
            rows.append((part.name, str(part.transform), schema.find_column_name(part.source_id)))
    extended = (expression.args.get("style") or "").upper() in ("EXTENDED", "FORMATTED")
    if extended:
        rows += [
            ("", "", ""),
            ("# Detailed Table Information", "", ""),
            ("Name", str(table.identifier), ""),
            ("Type", "MANAGED", ""),
            ("Provider", "arctic", ""),
            ("Primary Key", ", ".join(_shown_key(table)) or "(none: append-only)", ""),
            *([("Comment", table.base.properties[COMMENT], "")] if COMMENT in table.base.properties else []),
            ("Location", table.base.location().removesuffix("/base"), ""),
            ("Base Store", table.base.location(), ""),
        ]
        if table.change is not None:
            rows.append(("Change Store", table.change.location(), ""))
        if table.spec.fields:
            rows.append(
                (
                    "Partitioning",
                    ", ".join(
                        f"{f.transform}({schema.find_column_name(f.source_id)})" for f in table.spec.fields
                    ),
                    "",
                )
            )
        order = clustering.Clustering.of(table.properties, schema)
        if order is not None:
            rows.append(("Clustering", order.describe(), ""))
        rows += _hive_view_rows(table)
        shown = table.user_properties()
        rows.append(
            ("Table Properties", "[" + ", ".join(f"{k}={v}" for k, v in sorted(shown.items())) + "]", "")
        )
    return ctx.result(rows, "col_name string, data_type string, comment string")


def _hive_view_rows(table: ArcticTable) -> list[tuple[str, str, str]]:
    """The Hive view's name, the version it shows and how far behind the table it is."""
    if not table.settings.hive_compatible:
        return []
    synced, behind = hive_sync.lag(table, latest_version(table))
    db, name = hive_sync.hive_name(table)
    if synced is None:
        return [("Hive View", f"{db}.{name}", "not synced yet: CALL system.hive_sync")]
    return [("Hive View", f"{db}.{name}", f"version {synced}, {behind} version(s) behind")]


def show_tables(ctx: StatementContext, expression: statements.ShowTables, text: str) -> DataFrame:
    database = expression.this.name if expression.this is not None else ctx.current_database
    like = expression.args.get("like")
    if not ctx.catalog.database_exists(database) and not ctx.spark.catalog.databaseExists(database):
        raise NoSuchDatabaseError(f"Database '{database}' does not exist")
    names = set(ctx.catalog.list_tables(database)) if ctx.catalog.database_exists(database) else set()
    view_names = set(ctx.catalog.list_views(database)) - names
    names |= view_names
    rows = [(database, n, False) for n in names]
    if ctx.spark.catalog.databaseExists(database):
        for t in ctx.spark.catalog.listTables(database):
            if t.name.startswith("arctic_view_") or (t.name in names and not t.isTemporary):
                continue
            rows.append((database if not t.isTemporary else "", t.name, bool(t.isTemporary)))
    if like is not None:
        pattern = like.name.lower()  # Spark: * is any text, | separates alternatives
        rows = [r for r in rows if any(fnmatch.fnmatch(r[1].lower(), p.strip()) for p in pattern.split("|"))]
    rows.sort(key=lambda r: (r[2], r[1]))
    if expression.args.get("extended"):
        return _show_tables_extended(ctx, database, rows, names, view_names)
    return ctx.result(rows, "namespace string, tableName string, isTemporary boolean")


def _show_tables_extended(
    ctx: StatementContext, database: str, rows: list[tuple], arctic_names: set[str], view_names: set[str]
) -> DataFrame:
    """SHOW TABLE EXTENDED: Spark's ``information`` text for arctic tables, Spark's own for the rest.

    Tools parse this text (dbt-spark reads ``Type:`` and ``Provider:`` from it for its relation cache).
    """
    spark_info: dict[tuple[str, bool], str] = {}
    if any(r[1] not in arctic_names for r in rows):
        namespace = f" IN `{database}`" if ctx.spark.catalog.databaseExists(database) else ""
        for row in ctx.spark.sql(f"SHOW TABLE EXTENDED{namespace} LIKE '*'").collect():
            spark_info[(row[1], bool(row[2]))] = row[3]
    result = []
    for namespace, name, temporary in rows:
        if name in view_names and not temporary:
            identifier = TableIdentifier(database, name)
            view = ctx.catalog.load_view(identifier)
            assert view is not None  # listed as a view a moment ago
            information = views.information(ctx, identifier, view)
        elif name in arctic_names and not temporary:
            information = _arctic_information(ctx, TableIdentifier(database, name))
        else:
            information = spark_info.get((name, temporary), "")
        result.append((namespace, name, temporary, information))
    return ctx.result(result, "namespace string, tableName string, isTemporary boolean, information string")


def _arctic_information(ctx: StatementContext, identifier: TableIdentifier) -> str:
    table = ctx.catalog.load_table(identifier)
    schema = table.schema
    lines = [
        "Catalog: spark_catalog",
        f"Database: {identifier.database}",
        f"Table: {identifier.name}",
        "Type: MANAGED",
        "Provider: arctic",
        f"Location: {table.base.location().removesuffix('/base')}",
        f"Primary Key: {', '.join(_shown_key(table)) or '(none: append-only)'}",
    ]
    if table.spec.fields:
        lines.append(
            "Partition Columns: ["
            + ", ".join(f"`{schema.find_column_name(f.source_id)}`" for f in table.spec.fields)
            + "]"
        )
    shown = table.user_properties()
    lines.append("Table Properties: [" + ", ".join(f"{k}={v}" for k, v in sorted(shown.items())) + "]")
    lines.append("Schema: root")
    lines += [
        f" |-- {f.name}: {type_string(f.field_type)} (nullable = {str(not f.required).lower()})"
        for f in schema.fields
        if not materialized.is_hidden(table.base.properties, f.name)
    ]
    return "\n".join(lines) + "\n"


def show_databases(ctx: StatementContext, expression: statements.ShowDatabases, text: str) -> DataFrame:
    names = set(ctx.catalog.list_databases()) | {d.name for d in ctx.spark.catalog.listDatabases()}
    like = expression.args.get("like")
    if like is not None:
        names = {n for n in names if fnmatch.fnmatch(n.lower(), like.name.lower())}
    return ctx.result([(n,) for n in sorted(names)], "namespace string")


def explain(ctx: StatementContext, expression: statements.Explain, text: str) -> DataFrame:

    inner = expression.this
    resolved = runner.resolve(ctx, inner)
    try:
        df = ctx.spark.sql(to_spark_sql(resolved.expression))
        mode = expression.args.get("kind") or "simple"
        jvm: Any = ctx.spark._jvm
        plan = df._jdf.queryExecution().explainString(
            jvm.org.apache.spark.sql.execution.ExplainMode.fromString(mode)
        )
        if resolved.notes:  # lookups read in the driver: their rows are a local relation in the plan
            plan += "\n== Read by key in the driver ==\n" + "\n".join(resolved.notes) + "\n"
        if resolved.driver_reads:  # small pushed aggregates, merged and aggregated in the driver
            plan += "\n== Merged in the driver ==\n" + "\n".join(resolved.driver_reads) + "\n"
    finally:
        for view in resolved.views:
            ctx.spark.catalog.dropTempView(view)
    return ctx.result([(plan,)], "plan string")
