"""The change store's schema follows the base store's, by Iceberg field id.

ALTER TABLE changes the base store's schema first: that commit is the statement's commit point,
and the base store's schema is the table's. The change store follows in a second commit. A crash
between the two leaves the change store behind; the next load of the table (every statement loads
it) finishes the step here, so the next INSERT works and a retried ALTER sees the column as it is.

Both stores were created from one schema with the same field ids and take the same updates in the
same order, so the change store assigns an added column the id the base store gave it; that is
checked, never assumed. In the change store every column but the key is optional (delete rows
carry only the key).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.update.schema import UpdateSchema
from pyiceberg.types import NestedField, StructType

from arctic_sql.errors import CommitConflictError
from arctic_sql.table.writing import commit

_ATTEMPTS = 5


def _shape(schema: Schema) -> list[tuple[int, str, object]]:
    return sorted((f.field_id, f.name, f.field_type) for f in schema.fields)


def in_line(base: Schema, change: Schema) -> bool:
    """Whether ``change`` has the columns of ``base``: the same ids, names and types (reads resolve
    columns by id or name, so the order does not matter)."""
    return _shape(base) == _shape(change)


def _fields(schema: Schema) -> dict[int, tuple[tuple[str, ...], NestedField, int | None]]:
    """Every field by id, through structs (a list's or a map's are part of its type): its path of
    names, the field and its parent struct field's id (None at the top)."""
    found: dict[int, tuple[tuple[str, ...], NestedField, int | None]] = {}

    def walk(fields: tuple[NestedField, ...], prefix: tuple[str, ...], parent: int | None) -> None:
        for f in fields:
            found[f.field_id] = ((*prefix, f.name), f, parent)
            if isinstance(f.field_type, StructType):
                walk(f.field_type.fields, (*prefix, f.name), f.field_id)

    walk(tuple(schema.fields), (), None)
    return found


def align(name: str, base: Schema, change: Table) -> None:
    """Bring ``change``'s schema into line with ``base``, by field id at every depth of structs: drop
    the fields the base no longer has, rename and retype, add the base's new fields (optional). Each
    kind is its own commit, so none depends on another's names; a lost race with another aligner is
    retried."""
    for _ in range(_ATTEMPTS):
        current = change.schema()
        if in_line(base, current):
            return
        wanted, have = _fields(base), _fields(current)
        gone = [
            path
            for i, (path, _, parent) in have.items()
            if i not in wanted and (parent is None or parent in wanted)
        ]
        renamed = [
            (path, wanted[i][1].name)
            for i, (path, f, _) in have.items()
            if i in wanted and wanted[i][1].name != f.name
        ]
        retyped = [
            (wanted[i][0], wanted[i][1].field_type)
            for i, (_, f, _) in have.items()
            if i in wanted
            and not isinstance(f.field_type, StructType)
            and wanted[i][1].field_type != f.field_type
        ]
        added = [  # in the order the base store assigned their ids, so the change store assigns the same
            (path, f)
            for i, (path, f, parent) in sorted(wanted.items())
            if i not in have and (parent is None or parent in have)
        ]
        try:
            _commit(change, gone, lambda u, path: u.delete_column(path))
            _commit(change, renamed, lambda u, pair: u.rename_column(*pair))
            _commit(change, retyped, lambda u, pair: u.update_column(pair[0], field_type=pair[1]))
            _commit(
                change,
                added,
                lambda u, pair: u.add_column(pair[0], pair[1].field_type, doc=pair[1].doc, required=False),
            )
        except CommitFailedException:
            change.refresh()  # another statement aligned it first, or the table moved on
            continue
        if not in_line(base, change.schema()):
            raise CommitConflictError(
                f"The change store of {name} cannot follow the base store's schema: "
                f"{_shape(change.schema())} against {_shape(base)}"
            )
        return
    raise CommitConflictError(
        f"The change store of {name} kept changing while its schema was brought into line"
    )


def _commit(store: Table, items: list, apply: Callable[[UpdateSchema, Any], object]) -> None:
    if not items:
        return

    def change(update: UpdateSchema) -> None:
        for item in items:
            apply(update, item)

    commit.evolve_schema(store, change, allow_incompatible=True)
