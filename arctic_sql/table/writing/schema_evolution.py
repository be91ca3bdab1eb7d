"""Schema changes of a table, in both stores: what ALTER TABLE and writes with ``mergeSchema`` share.

A change commits to the base store first (its schema is the table's: the commit point), then the
change store follows by field id (store_sync); a crash between the two is finished by the next load.

A column's type only widens as Iceberg allows (int to long, float to double, a decimal's precision
up at the same scale): files keep the type they were written with and readers promote them by field
id. Partition columns keep theirs: a partition value's type is part of each file's partition tuple.
A key column widens from int to bigint only: the key's type is part of the hash that placed each row
in its tree node, so the table records the column (``KEY_AS_INT_KEY``, in the schema's commit) and
it goes on hashing as an int wherever its value fits in one (format/keyhash.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyiceberg.exceptions import ResolveError
from pyiceberg.schema import promote
from pyiceberg.types import DecimalType, IcebergType, IntegerType, LongType, NestedField

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.faults import fault_point
from arctic_sql.table.model.identifiers import KEY_AS_INT_KEY
from arctic_sql.table.writing import commit, store_sync

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping, Sequence

    from pyiceberg.table.update.schema import UpdateSchema
    from pyspark.sql.types import StructType

    from arctic_sql.table.model.table import ArcticTable


def evolve(
    table: ArcticTable, change: Callable[[UpdateSchema], None], properties: Mapping[str, str] | None = None
) -> None:
    """Apply ``change`` to the base store's schema (with ``properties``, in one commit), then bring
    the change store into line."""
    commit.evolve_schema(table.base, change, properties=properties)
    fault_point("alter-between-stores")
    if table.change is not None:
        store_sync.align(str(table.identifier), table.base.schema(), table.change)


def protected(table: ArcticTable, field_id: int, verb: str, name: str) -> None:
    """Refuse ``verb`` on a primary-key or partition column."""
    if field_id in table.schema.identifier_field_ids:
        raise InvalidArgumentError(f"Cannot {verb} primary key column '{name}' of {table.identifier}")
    if any(f.source_id == field_id for f in table.spec.fields):
        raise InvalidArgumentError(f"Cannot {verb} partition column '{name}' of {table.identifier}")


def widens(current: IcebergType, wanted: IcebergType) -> bool:
    """Whether ``wanted`` is a legal widening of ``current`` (False when they are equal)."""
    if wanted == current:
        return False
    try:
        promote(current, wanted)
    except ResolveError:
        return False
    # pyiceberg's promote (0.12) compares the file's scale with itself: a new scale would pass it,
    # and its schema update, and old files would then read scaled wrong.
    return not (
        isinstance(wanted, DecimalType) and isinstance(current, DecimalType) and wanted.scale != current.scale
    )


def _widens_key(table: ArcticTable, field: NestedField, wanted: IcebergType) -> bool:
    """Whether ``field`` is a key column (and no partition source) widening from int to bigint, the one
    change of a key's type the tree's hash can follow; refused in one line for any other key change."""
    if field.field_id not in table.schema.identifier_field_ids:
        return False
    if any(f.source_id == field.field_id for f in table.spec.fields):
        return False  # protected() names the partition column
    if isinstance(field.field_type, IntegerType) and isinstance(wanted, LongType):
        return True
    raise InvalidArgumentError(
        f"Cannot change primary key column '{field.name}' of {table.identifier} from {field.field_type} to "
        f"{wanted}: a key column widens only from int to bigint"
    )


def key_as_int_property(
    table: ArcticTable, widened: Sequence[tuple[NestedField, IcebergType]]
) -> dict[str, str]:
    """The table property recording the key columns ``widened`` from int to bigint, with those before."""
    keys = [f for f, wanted in widened if _widens_key(table, f, wanted)]
    if not keys:
        return {}
    before = table.key_as_int
    ids = {fid for fid, narrow in zip(table.schema.identifier_field_ids, before, strict=True) if narrow}
    ids |= {f.field_id for f in keys}
    return {KEY_AS_INT_KEY: ",".join(str(i) for i in sorted(ids))}


def check_widening(table: ArcticTable, field: NestedField, wanted: IcebergType) -> None:
    """Refuse, in one line, a type change of ``field`` to ``wanted`` that is not a legal widening."""
    if not _widens_key(table, field, wanted):
        protected(table, field.field_id, "change the type of", field.name)
    if not widens(field.field_type, wanted):
        raise InvalidArgumentError(
            f"Cannot change column '{field.name}' of {table.identifier} from {field.field_type} to {wanted}: only "
            "int to bigint, float to double and a decimal to a larger precision with the same scale are allowed"
        )


def incoming(
    table: ArcticTable, schema: StructType, skip: Collection[str] = ()
) -> tuple[list[tuple[str, IcebergType]], list[tuple[NestedField, IcebergType]]]:
    """What taking the columns of ``schema`` (a write's rows, a MERGE's source) would change: the
    columns ``table`` lacks, to add, and those ``schema`` carries wider than a legal widening of the
    table's type, to widen; names in ``skip`` (lower case: change-feed columns) are not columns.
    A column the table has with another type that is not a widening is left to the write's own
    type check (a cast, or its one-line error)."""
    from arctic_sql.table.model.schemas import _Ids, to_iceberg_type

    fields = {f.name.lower(): f for f in table.schema.fields}
    added: list[tuple[str, IcebergType]] = []
    widened: list[tuple[NestedField, IcebergType]] = []
    for column in schema.fields:
        name = column.name.lower()
        if name in skip:
            continue
        if name in {a[0].lower() for a in added}:
            raise InvalidArgumentError(
                f"Column '{column.name}' appears twice in the rows written to "
                f"{table.identifier} (column names are case-insensitive)"
            )
        wanted = to_iceberg_type(column.dataType, _Ids(), column.name)
        field = fields.get(name)
        if field is None:
            added.append((column.name, wanted))
        elif wanted.is_primitive and widens(field.field_type, wanted):
            widened.append((field, wanted))
    return added, widened


def add_and_widen(
    table: ArcticTable,
    added: Sequence[tuple[str, IcebergType]],
    widened: Sequence[tuple[NestedField, IcebergType]],
) -> None:
    """Add nullable columns at the end and widen columns, in one commit of the base store's schema
    (then the change store's); each widening checked first, nothing changed when one is refused."""
    for field, wanted in widened:
        check_widening(table, field, wanted)
    if not added and not widened:
        return

    def change(update: UpdateSchema) -> None:
        for field, wanted in widened:
            update.update_column(field.name, field_type=wanted)
        for name, field_type in added:
            update.add_column(name, field_type)

    evolve(table, change, key_as_int_property(table, widened))
