"""ALTER TABLE: properties and schema evolution (add, rename, drop, widen), applied to both stores alike.

Both stores start with the same field ids and take the same schema updates in the same order, so
a column keeps one id in both; files written before a rename or drop still resolve by id. A schema
change commits to the base store (the commit point: its schema is the table's), then the change
store follows (store_sync); a crash in between is finished by the next load of the table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from arctic_sql.errors import InvalidArgumentError, NoSuchColumnError, UnsupportedOperationError
from arctic_sql.statements.clauses import literal_value, spark_struct
from arctic_sql.table.format import clustering
from arctic_sql.table.model import properties as props
from arctic_sql.table.model.identifiers import RESERVED_COLUMN_PREFIX
from arctic_sql.table.model.schemas import _Ids, to_iceberg_type
from arctic_sql.table.model.table import ArcticTable
from arctic_sql.table.writing import commit, schema_evolution

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyiceberg.schema import Schema
    from pyiceberg.table.update.schema import UpdateSchema

    from arctic_sql.parser import TableOrder
    from arctic_sql.statements.context import StatementContext


def apply_alter(ctx: StatementContext, table: ArcticTable, expression: exp.Alter) -> None:
    for action in expression.args.get("actions") or []:
        _refuse_nested(table, action)
    for action in expression.args.get("actions") or []:
        if isinstance(action, exp.AlterSet):
            _set_properties(table, action)
        elif isinstance(action, (exp.Schema, exp.ColumnDef)):
            columns = action.expressions if isinstance(action, exp.Schema) else [action]
            _add_columns(ctx, table, [c for c in columns if isinstance(c, exp.ColumnDef)])
        elif isinstance(action, exp.RenameColumn):
            _rename_column(table, action.this.name, action.args["to"].name)
        elif isinstance(action, exp.AlterColumn) and _only_type(action):
            _widen_column(ctx, table, action)
        elif isinstance(action, exp.Drop) and (action.kind or "").upper() == "COLUMN":
            _drop_columns(
                table, [c.name for c in action.args.get("tables") or []], bool(action.args.get("exists"))
            )
        else:
            raise UnsupportedOperationError(
                f"ALTER TABLE action not supported on arctic tables: {action.sql()}"
            )


def _refuse_nested(table: ArcticTable, action: exp.Expression) -> None:
    """A field inside a struct (``st.z``) cannot be added, renamed or dropped yet: refused before any
    change, rather than read as the top-level column of its last name."""
    if isinstance(action, (exp.Schema, exp.ColumnDef)):
        names = [c.this for c in (action.expressions if isinstance(action, exp.Schema) else [action])]
    elif isinstance(action, exp.RenameColumn):
        names = [action.this, action.args["to"]]
    elif isinstance(action, exp.AlterColumn):
        names = [action.this]
    elif isinstance(action, exp.Drop):
        names = list(action.args.get("tables") or [])
    else:
        return
    for name in names:
        if isinstance(name, exp.Dot) or (isinstance(name, exp.Column) and name.table):
            raise UnsupportedOperationError(
                f"Cannot change nested field {name.sql()} of {table.identifier}: "
                "only top-level columns can be added, renamed or dropped"
            )


def _set_properties(table: ArcticTable, action: exp.AlterSet) -> None:
    raw: dict[str, str] = {}
    for container in action.expressions:
        for prop in container.expressions if isinstance(container, exp.Properties) else [container]:
            raw[literal_value(prop.this)] = literal_value(prop.args["value"])
    values = checked_order(props.validate(raw, creating=False), table.schema, table.primary_key, table)
    commit.set_properties(table.base, values)


def checked_order(
    values: dict[str, str], schema: Schema, primary_key: Sequence[str], table: object
) -> dict[str, str]:
    """``values`` with ``write.cluster.columns`` checked against the schema and spelled as it
    spells the columns (a one-line error for an unknown, nested or key-only order)."""
    raw = values.get(clustering.COLUMNS)
    if raw is None or not clustering.parse_columns(raw):
        return values
    _check_keyed(primary_key, table)
    columns = clustering.check(clustering.parse_columns(raw), schema, primary_key, str(table))
    return {**values, clustering.COLUMNS: ",".join(columns)}


def _check_keyed(primary_key: Sequence[str], table: object) -> None:
    if not primary_key:
        raise UnsupportedOperationError(
            f"Cannot order {table}: ordering applies to the tree nodes of a table with a primary key"
        )


def set_order(table: ArcticTable, statement: TableOrder) -> None:
    """``WRITE [LOCALLY] ORDERED BY``, ``CLUSTER BY`` or ``WRITE UNORDERED``: the clustering
    properties, checked before anything is written."""
    mode = statement.text("mode")
    if mode == "none":
        commit.set_properties(table.base, removals=[clustering.COLUMNS, clustering.MODE])
        return
    _check_keyed(table.primary_key, table.identifier)
    names = [c.name for c in statement.expressions]
    columns = clustering.check(names, table.schema, table.primary_key, str(table.identifier))
    commit.set_properties(table.base, {clustering.COLUMNS: ",".join(columns), clustering.MODE: mode})


def _find(table: ArcticTable, name: str):
    try:
        return table.schema.find_field(name, case_sensitive=False)
    except ValueError:
        raise NoSuchColumnError(f"Column '{name}' does not exist in {table.identifier}") from None


def _add_columns(ctx: StatementContext, table: ArcticTable, columns: list[exp.ColumnDef]) -> None:
    struct = spark_struct(ctx, columns)
    existing = {f.name.lower() for f in table.schema.fields}
    for field in struct.fields:
        if field.name.lower() in existing:
            raise InvalidArgumentError(f"Column '{field.name}' already exists in {table.identifier}")
        if field.name.lower().startswith(RESERVED_COLUMN_PREFIX):
            raise InvalidArgumentError(f"Column names starting with '{RESERVED_COLUMN_PREFIX}' are reserved")

    def add(update: UpdateSchema) -> None:
        for field in struct.fields:
            update.add_column(field.name, to_iceberg_type(field.dataType, _Ids(), field.name))

    schema_evolution.evolve(table, add)


def _rename_column(table: ArcticTable, old: str, new: str) -> None:
    field = _find(table, old)
    if new.lower() in {f.name.lower() for f in table.schema.fields}:
        raise InvalidArgumentError(f"Column '{new}' already exists in {table.identifier}")
    if new.lower().startswith(RESERVED_COLUMN_PREFIX):
        raise InvalidArgumentError(f"Column names starting with '{RESERVED_COLUMN_PREFIX}' are reserved")
    order = clustering.renamed(table.base.properties, field.name, new)  # the order follows the column
    schema_evolution.evolve(table, lambda update: update.rename_column(field.name, new), order or None)


def _only_type(action: exp.AlterColumn) -> bool:
    """``ALTER COLUMN c TYPE t`` (or Hive's ``CHANGE COLUMN c c t``): a new type and nothing else."""
    renamed = action.args.get("rename_to")
    if renamed is not None and renamed.name.lower() != action.this.name.lower():
        raise UnsupportedOperationError(
            f"CHANGE COLUMN {action.this.name} {renamed.name} renames and retypes at once: "
            "use RENAME COLUMN, then ALTER COLUMN ... TYPE"
        )
    others = [k for k, v in action.args.items() if v and k not in ("this", "dtype", "rename_to")]
    return action.args.get("dtype") is not None and not others


def _widen_column(ctx: StatementContext, table: ArcticTable, action: exp.AlterColumn) -> None:
    """Widen a column's type as Iceberg allows (int to bigint, float to double, a decimal's precision
    up at the same scale). Files keep their old type: readers promote them by field id, as pyiceberg
    and Spark do. A key column widens from int to bigint only (schema_evolution.py says why)."""
    field = _find(table, action.this.name)
    spark_type = spark_struct(ctx, [exp.ColumnDef(this=action.this.copy(), kind=action.args["dtype"].copy())])
    wanted = to_iceberg_type(spark_type.fields[0].dataType, _Ids(), field.name)
    if wanted != field.field_type:
        schema_evolution.add_and_widen(table, [], [(field, wanted)])


def _drop_columns(table: ArcticTable, names: list[str], if_exists: bool) -> None:
    fields = []
    for name in names:
        try:
            fields.append(_find(table, name))
        except NoSuchColumnError:
            if not if_exists:
                raise
    for field in fields:
        schema_evolution.protected(table, field.field_id, "drop", field.name)
        if clustering.ordered_by(table.base.properties, field.name):
            raise InvalidArgumentError(
                f"Cannot drop column '{field.name}' of {table.identifier}: optimizing orders its files by "
                f"it (ALTER TABLE {table.identifier} WRITE UNORDERED, or ORDERED BY other columns, first)"
            )
    if len(fields) >= len(table.schema.fields):
        raise InvalidArgumentError(f"Cannot drop every column of {table.identifier}")

    def drop(update: UpdateSchema) -> None:
        for field in fields:
            update.delete_column(field.name)

    schema_evolution.evolve(table, drop)
