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

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.update.schema import UpdateSchema

from arctic_sql.errors import CommitConflictError
from arctic_sql.table.writing import commit

_ATTEMPTS = 5


def _shape(schema: Schema) -> list[tuple[int, str, object]]:
    return sorted((f.field_id, f.name, f.field_type) for f in schema.fields)


def in_line(base: Schema, change: Schema) -> bool:
    """Whether ``change`` has the columns of ``base``: the same ids, names and types (reads resolve
    columns by id or name, so the order does not matter)."""
    return _shape(base) == _shape(change)


def align(name: str, base: Schema, change: Table) -> None:
    """Bring ``change``'s schema into line with ``base``: drop the columns the base no longer has,
    rename and retype by field id, add the base's new columns (optional). Each kind is its own
    commit, so none depends on another's names; a lost race with another aligner is retried."""
    for _ in range(_ATTEMPTS):
        current = change.schema()
        if in_line(base, current):
            return
        wanted = {f.field_id: f for f in base.fields}
        have = {f.field_id: f for f in current.fields}
        gone = [f.name for f in current.fields if f.field_id not in wanted]
        renamed = [
            (f.name, wanted[f.field_id].name)
            for f in current.fields
            if f.field_id in wanted and wanted[f.field_id].name != f.name
        ]
        retyped = [
            (wanted[f.field_id].name, wanted[f.field_id].field_type)
            for f in current.fields
            if f.field_id in wanted and wanted[f.field_id].field_type != f.field_type
        ]
        added = [f for f in base.fields if f.field_id not in have]
        try:
            _commit(change, gone, lambda u, n: u.delete_column(n))
            _commit(change, renamed, lambda u, pair: u.rename_column(*pair))
            _commit(change, retyped, lambda u, pair: u.update_column(pair[0], field_type=pair[1]))
            _commit(change, added, lambda u, f: u.add_column(f.name, f.field_type, doc=f.doc, required=False))
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


def _commit(store: Table, items: list, apply: Callable[[UpdateSchema, object], object]) -> None:
    if not items:
        return

    def change(update: UpdateSchema) -> None:
        for item in items:
            apply(update, item)

    commit.evolve_schema(store, change, allow_incompatible=True)
