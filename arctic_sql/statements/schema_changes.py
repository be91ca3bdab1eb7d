"""ALTER TABLE: properties and schema evolution (add, rename, drop, widen), applied to both stores alike.

Both stores start with the same field ids and take the same schema updates in the same order, so
a column keeps one id in both; files written before a rename or drop still resolve by id. A schema
change commits to the base store (the commit point: its schema is the table's), then the change
store follows (store_sync); a crash in between is finished by the next load of the table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyiceberg.types import IcebergType, NestedField, StructType
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
            _rename_column(table, _path(action.this), action.args["to"].name)
        elif isinstance(action, exp.AlterColumn) and _only_type(action):
            _widen_column(ctx, table, action)
        elif isinstance(action, exp.Drop) and (action.kind or "").upper() in ("COLUMN", "COLUMNS"):
            named = [
                n
                for t in action.args.get("tables") or []
                for n in (t.expressions if isinstance(t, exp.Schema) else [t])
            ]
            _drop_columns(table, [_path(n) for n in named], bool(action.args.get("exists")))
        else:
            raise UnsupportedOperationError(
                f"ALTER TABLE action not supported on arctic tables: {action.sql()}"
            )


def _refuse_nested(table: ArcticTable, action: exp.Expression) -> None:
    """A nested field's type cannot be changed yet (fields of structs can be added, renamed and
    dropped): refused before any change, rather than read as the top-level column of its last name."""
    if isinstance(action, exp.AlterColumn) and len(_path(action.this)) > 1:
        raise UnsupportedOperationError(
            f"Cannot change the type of nested field {action.this.sql()} of {table.identifier}: "
            "only top-level columns change type"
        )


def _path(node: exp.Expression) -> tuple[str, ...]:
    """The names of a column reference: ``st.a`` (a Column or a Dot in sqlglot's trees) is (st, a)."""
    if isinstance(node, exp.Dot):
        return (*_path(node.this), *_path(node.expression))
    if isinstance(node, exp.Column):
        return tuple(p.name for p in node.parts)
    return (node.name,)


def _struct_at(table: ArcticTable, path: tuple[str, ...]) -> tuple[tuple[str, ...], NestedField]:
    """The field ``path`` names, spelled as the schema does, through structs only; one-line errors
    for a missing field or a list or map on the way."""
    spelled: tuple[str, ...]
    fields, found, spelled = table.schema.fields, None, ()
    for depth, name in enumerate(path):
        found = next((f for f in fields if f.name.lower() == name.lower()), None)
        if found is None:
            raise NoSuchColumnError(f"Column '{'.'.join(path)}' does not exist in {table.identifier}")
        spelled = (*spelled, found.name)
        if depth < len(path) - 1:
            if not isinstance(found.field_type, StructType):
                raise UnsupportedOperationError(
                    f"Cannot change {'.'.join(path)} of {table.identifier}: {'.'.join(spelled)} is a "
                    f"{found.field_type}, and only fields of structs can be added, renamed or dropped"
                )
            fields = found.field_type.fields
    assert found is not None
    return spelled, found


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
    """Add columns, or fields of structs (``st.z``), at the end of their struct, optional."""
    paths = [_path(c.this) for c in columns]
    leaves = [
        exp.ColumnDef(this=exp.to_identifier(p[-1]), kind=c.args["kind"].copy())
        for p, c in zip(paths, columns)
    ]
    struct = spark_struct(ctx, leaves)
    added: list[tuple[tuple[str, ...], IcebergType]] = []
    for path, field in zip(paths, struct.fields):
        parent: tuple[str, ...] = ()
        siblings = table.schema.fields
        if len(path) > 1:
            parent, found = _struct_at(table, path[:-1])
            if not isinstance(found.field_type, StructType):
                raise UnsupportedOperationError(
                    f"Cannot add {'.'.join(path)} to {table.identifier}: {'.'.join(parent)} is not a struct"
                )
            siblings = found.field_type.fields
        name = ".".join((*parent, field.name))
        if field.name.lower() in {f.name.lower() for f in siblings} or any(
            p == (*parent, field.name.lower()) for p, _ in added
        ):
            raise InvalidArgumentError(f"Column '{name}' already exists in {table.identifier}")
        if field.name.lower().startswith(RESERVED_COLUMN_PREFIX):
            raise InvalidArgumentError(f"Column names starting with '{RESERVED_COLUMN_PREFIX}' are reserved")
        added.append(((*parent, field.name), to_iceberg_type(field.dataType, _Ids(), field.name)))

    def add(update: UpdateSchema) -> None:
        for path, iceberg_type in added:
            update.add_column(path if len(path) > 1 else path[0], iceberg_type)

    schema_evolution.evolve(table, add)


def _rename_column(table: ArcticTable, old: tuple[str, ...], new: str) -> None:
    """Rename a column, or a field of a struct (``st.a TO b``: ``b`` stays inside ``st``)."""
    path, field = _struct_at(table, old)
    siblings = table.schema.fields
    if len(path) > 1:
        parent_type = _struct_at(table, path[:-1])[1].field_type
        assert isinstance(parent_type, StructType)  # _struct_at went through it
        siblings = parent_type.fields
    if new.lower() in {f.name.lower() for f in siblings if f.field_id != field.field_id}:
        raise InvalidArgumentError(
            f"Column '{'.'.join((*path[:-1], new))}' already exists in {table.identifier}"
        )
    if new.lower().startswith(RESERVED_COLUMN_PREFIX):
        raise InvalidArgumentError(f"Column names starting with '{RESERVED_COLUMN_PREFIX}' are reserved")

    def rename(update: UpdateSchema) -> None:
        update.rename_column(path if len(path) > 1 else field.name, new)

    if len(path) > 1:
        schema_evolution.evolve(table, rename)
        return
    order = clustering.renamed(table.base.properties, field.name, new)  # the order follows the column
    schema_evolution.evolve(table, rename, order or None)


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


def _drop_columns(table: ArcticTable, paths: list[tuple[str, ...]], if_exists: bool) -> None:
    fields: list[tuple[tuple[str, ...], NestedField]] = []
    nested: list[tuple[tuple[str, ...], NestedField]] = []
    for path in paths:
        try:
            spelled, found = _struct_at(table, path)
        except NoSuchColumnError:
            if not if_exists:
                raise
            continue
        (fields if len(spelled) == 1 else nested).append((spelled, found))
    for spelled, _ in nested:
        parent = _struct_at(table, spelled[:-1])[1]
        assert isinstance(parent.field_type, StructType)  # _struct_at went through it
        if all(f.field_id in {n.field_id for _, n in nested} for f in parent.field_type.fields):
            raise InvalidArgumentError(
                f"Cannot drop every field of struct {'.'.join(spelled[:-1])} of {table.identifier}: "
                "drop the struct column instead"
            )
    dropped = [f for _, f in fields]
    for field in dropped:
        schema_evolution.protected(table, field.field_id, "drop", field.name)
        if clustering.ordered_by(table.base.properties, field.name):
            raise InvalidArgumentError(
                f"Cannot drop column '{field.name}' of {table.identifier}: optimizing orders its files by "
                f"it (ALTER TABLE {table.identifier} WRITE UNORDERED, or ORDERED BY other columns, first)"
            )
    if dropped and len(dropped) >= len(table.schema.fields):
        raise InvalidArgumentError(f"Cannot drop every column of {table.identifier}")

    def drop(update: UpdateSchema) -> None:
        for field in dropped:
            update.delete_column(field.name)
        for spelled, _ in nested:
            update.delete_column(spelled)

    schema_evolution.evolve(table, drop)
