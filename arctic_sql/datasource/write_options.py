"""What ``df.write.format("arctic")`` and ``writeStream.format("arctic")`` accept, checked on the driver
before any task writes: the options, and the incoming columns against the table's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.table.format import layout
from arctic_sql.table.format.layout import Store
from arctic_sql.table.format.versions import Operation
from arctic_sql.table.model.merge_engine import Engine
from arctic_sql.table.model.schemas import spark_schema, store_assignable
from arctic_sql.table.writing.arrow_files import WriteTarget
from arctic_sql.table.writing.arrow_tasks import APPEND, CHANGES, OVERWRITE, WritePlan
from arctic_sql.table.writing.change_kinds import CHANGE_TYPE, FEED_COLUMNS, SEQUENCE_HINT, find_column

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from arctic_sql.table.model.table import ArcticTable

SEQUENCE_COLUMN = "sequenceColumn"
MERGE_SCHEMA = "mergeSchema"  # Delta's name; the table property write.schema.auto-merge is its default
# Options Spark itself passes to a sink, besides the ones users give.
_SPARK_OPTIONS = frozenset({"path", "checkpointlocation", "queryname"})
BRANCH = "branch"  # the branch read or written (Iceberg's option); main when absent
BATCH_OPTIONS = frozenset({"path", "table", BRANCH, SEQUENCE_COLUMN.lower(), MERGE_SCHEMA.lower()})
STREAM_OPTIONS = BATCH_OPTIONS | _SPARK_OPTIONS


def check_options(options: Mapping[str, str], allowed: frozenset[str]) -> None:
    for key in options:
        if key.lower() not in allowed:
            known = ", ".join(sorted(o for o in allowed if o not in _SPARK_OPTIONS | {"path", "table"}))
            raise InvalidArgumentError(f"Unknown option '{key}' for the arctic format (options: {known})")


def sequence_column(options: Mapping[str, str]) -> str | None:
    for key, value in options.items():
        if key.lower() == SEQUENCE_COLUMN.lower():
            return value
    return None


def table_sequence(table: ArcticTable, schema: StructType) -> str | None:
    """The table's ``sequence.field`` as the write's sequence column, when it is one column and the
    rows carry it: a key's changes within one write then keep the newest by it, as across commits."""
    fields = table.merge_engine.sequence if table.is_keyed else ()
    if len(fields) != 1:
        return None
    return find_column([f.name for f in schema.fields], fields[0])


def merge_schema(table: ArcticTable, options: Mapping[str, str]) -> bool:
    """Whether the write may add columns and widen types: ``mergeSchema``, else the table's
    ``write.schema.auto-merge``."""
    for key, value in options.items():
        if key.lower() == MERGE_SCHEMA.lower():
            if value.strip().lower() not in ("true", "false"):
                raise InvalidArgumentError(f"Option {MERGE_SCHEMA} must be true or false, got '{value}'")
            return value.strip().lower() == "true"
    return table.settings.write_schema_auto_merge


def evolve_for(
    table: ArcticTable, schema: StructType, options: Mapping[str, str], *, overwrite: bool, streaming: bool
) -> bool:
    """With :func:`merge_schema`, make ``table`` take the incoming columns: add the new ones (nullable,
    at the end) and widen those the rows carry wider, before any task writes; the write is checked
    first, so a refused one changes nothing. Whether the table changed."""
    check_options(options, STREAM_OPTIONS if streaming else BATCH_OPTIONS)
    if not merge_schema(table, options):
        return False
    from pyspark.sql.types import StructType as Struct

    from arctic_sql.table.writing import schema_evolution

    sequence = sequence_column(options)
    extra = {CHANGE_TYPE.lower(), *FEED_COLUMNS} | ({sequence.lower()} if sequence else set())
    added, widened = schema_evolution.incoming(table, schema, extra)
    new = {a[0].lower() for a in added}
    check_columns(
        table,
        Struct([f for f in schema.fields if f.name.lower() not in new]),
        overwrite=overwrite,
        sequence=sequence,
    )
    schema_evolution.add_and_widen(table, added, widened)
    return bool(added or widened)


def check_columns(table: ArcticTable, schema: StructType, *, overwrite: bool, sequence: str | None) -> None:
    """Incoming columns by name: each a table column of a type Spark would write into it,
    ``_change_type``, a change feed's version and timestamp (ignored) or the sequence column, and
    none twice (names are case-insensitive); every key column present, and every NOT NULL column
    unless the rows carry ``_change_type``."""
    incoming = [f.name for f in schema.fields]
    table_types = {f.name.lower(): f for f in spark_schema(table.schema).fields}
    extra = {CHANGE_TYPE.lower(), *FEED_COLUMNS} | ({sequence.lower()} if sequence else set())
    seen: set[str] = set()
    for field in schema.fields:
        name = field.name
        if name.lower() in seen:
            raise InvalidArgumentError(
                f"Column '{name}' appears twice in the rows written to {table.identifier} "
                "(column names are case-insensitive)"
            )
        seen.add(name.lower())
        column = table_types.get(name.lower())
        if column is None:
            if name.lower() not in extra:
                raise InvalidArgumentError(f"Column '{name}' is not a column of {table.identifier}")
        elif not store_assignable(field.dataType, column.dataType):
            raise InvalidArgumentError(
                f"Column '{name}' is {field.dataType.simpleString()}, which cannot be written into "
                f"{table.identifier}'s {column.dataType.simpleString()} column '{column.name}': cast it first"
            )
    for key in table.primary_key:
        if find_column(incoming, key) is None:
            raise InvalidArgumentError(
                f"The rows written to {table.identifier} lack its primary key column '{key}'"
            )
    if sequence is not None and find_column(incoming, sequence) is None:
        raise InvalidArgumentError(f"The sequence column '{sequence}' is not among the rows written")
    has_changes = find_column(incoming, CHANGE_TYPE) is not None
    if overwrite and (has_changes or sequence):
        what = CHANGE_TYPE if has_changes else SEQUENCE_COLUMN
        raise InvalidArgumentError(f'mode("overwrite") replaces rows: {what} is for appends')
    if sequence is not None and not table.is_keyed:
        raise InvalidArgumentError(f"{table.identifier} has no primary key: {SEQUENCE_COLUMN} needs one")
    # Rows that may be deletes need only the key; the writer refuses an upsert's NULL in a NOT NULL column.
    for stored in table.schema.fields:
        if stored.required and find_column(incoming, stored.name) is None and not has_changes:
            raise InvalidArgumentError(
                f"Column '{stored.name}' of {table.identifier} is NOT NULL and missing"
            )


def plan_write(
    table: ArcticTable, schema: StructType, options: Mapping[str, str], *, overwrite: bool, streaming: bool
) -> WritePlan:
    """Check a write against ``table`` and plan it (nothing is written here)."""
    check_options(options, STREAM_OPTIONS if streaming else BATCH_OPTIONS)
    sequence = sequence_column(options)
    engine = table.merge_engine.engine if table.is_keyed else None
    folds = engine is not None and engine is not Engine.DEDUPLICATE
    if engine is not None and folds and sequence is not None:
        # Keeping the newest change of a key in a write would lose what the others add to the fold.
        raise InvalidArgumentError(
            f"Option {SEQUENCE_COLUMN} does not apply to {table.identifier}: {engine.value} tables "
            "fold every change, so a write may hold one change per key"
        )
    if sequence is None and not overwrite and not folds:
        sequence = table_sequence(table, schema)
    check_columns(table, schema, overwrite=overwrite, sequence=sequence)
    if overwrite:
        mode, store, operation = OVERWRITE, Store.BASE, Operation.OVERWRITE
    elif table.is_keyed:
        mode, store, operation = CHANGES, Store.CHANGE, Operation.STREAM if streaming else Operation.WRITE
    else:
        mode, store, operation = APPEND, Store.BASE, Operation.STREAM if streaming else Operation.APPEND
    target = WriteTarget.of(table, store)
    scope = "in one micro-batch" if streaming else "in one write"
    return WritePlan(
        str(table.identifier),
        layout.table_root(table.base.location()),
        target,
        target.new_location(),
        mode,
        sequence,
        operation,
        scope,
        duplicate_hint=SEQUENCE_HINT,
        fold=table.merge_engine if folds and mode == CHANGES else None,
        keep_missing=_missing(table, schema) if mode == CHANGES and engine is Engine.DEDUPLICATE else (),
    )


def _missing(table: ArcticTable, schema: StructType) -> tuple[str, ...]:
    """The table's columns the rows lack: an update keeps their stored values (narrow_writes.py)."""
    incoming = {f.name.lower() for f in schema.fields}
    return tuple(f.name for f in table.schema.fields if f.name.lower() not in incoming)
