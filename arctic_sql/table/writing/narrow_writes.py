"""A DataFrame or stream write whose rows lack some columns of a deduplicate table.

Such a write changes only the columns it carries: a key the table holds keeps its stored values of
the others, a new key gets NULL there, as SQL's ``MERGE ... WITH SCHEMA EVOLUTION`` does for a
narrower source (Delta's rule; statements/merge_plan.py). The tasks write NULL there; the driver,
before committing, reads the stored rows of the written keys at the newest version (a driver lookup,
table/reading/lookup.py) and writes the upsert files again with those values. The commit then checks
that no data commit landed since that version, else the fill is done again from the tasks' files
(a deleted key goes back to NULL). Partial-update, first-row and aggregation tables need none of
this: a NULL there already leaves the stored value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from arctic_sql.table.files import storage
from arctic_sql.table.format import layout
from arctic_sql.table.reading import lookup, scan
from arctic_sql.table.writing.arrow_files import WrittenFile
from arctic_sql.table.writing.arrow_tasks import read_written, write_beside

if TYPE_CHECKING:
    from arctic_sql.table.model.table import ArcticTable

_POSITION = "__arctic_position"
_FOUND = "__arctic_stored_row"


def stored_rows(table: ArcticTable, version: int, values: Sequence[tuple]) -> pa.Table:
    """The merged rows at ``version`` of the keys ``values``: a driver lookup when it is one, else
    the same node-group read over the files a key filter keeps."""
    plan = lookup.plan_lookup(table, version, values)
    if plan is None:
        condition = lookup.key_filter(list(table.primary_key), values)
        plan = scan.plan_read(table, version, base_filter=condition, change_filter=condition)
    return lookup.read_keys(table, plan, values)


def fill(
    table: ArcticTable, files: list[WrittenFile], missing: Sequence[str], version: int
) -> list[WrittenFile]:
    """A copy of each of ``files`` beside it, an upsert file's rows whose keys the table holds at
    ``version`` with ``missing`` taken from the stored rows. Copies, not the files: a refused commit
    deletes what it was given, and the fill may have to run again from the originals (the caller
    deletes them once the commit is over)."""
    keys = list(table.primary_key)
    result = [_copy(f) for f in files]
    upserts = [
        (i, read_written(f.path)) for i, f in enumerate(files) if not layout.parse_file_path(f.path)[1]
    ]
    if not upserts or version <= 0:
        return result
    written = pa.concat_tables([t.select(keys) for _, t in upserts]).group_by(keys).aggregate([])
    values = list(zip(*(written.column(k).to_pylist() for k in keys), strict=True))
    stored = stored_rows(table, version, values)
    if stored.num_rows == 0:
        return result
    found = stored.select(keys).append_column(_FOUND, pa.array(range(stored.num_rows), pa.int64()))
    for i, rows in upserts:
        # Join only the keys (a join refuses list and struct payloads), then take the stored values.
        positioned = rows.select(keys).append_column(_POSITION, pa.array(range(rows.num_rows), pa.int64()))
        joined = positioned.join(found, keys, join_type="left outer").sort_by(_POSITION)
        index = joined.column(_FOUND).combine_chunks()
        if index.null_count == rows.num_rows:
            continue
        for name in missing:
            field = rows.schema.field(name)
            column = stored.column(name).combine_chunks().take(index).cast(field.type)
            rows = rows.set_column(rows.schema.get_field_index(name), field, column)
        storage.delete_files([result[i].path])
        result[i] = write_beside(files[i], rows, mark="f")
    return result


def _copy(f: WrittenFile) -> WrittenFile:
    folder, name = f.path.rsplit("/", 1)
    copy = dataclasses.replace(f, path=f"{folder}/{name.replace('part-', 'part-c', 1)}")
    fs, inner = storage.filesystem(f.path)
    fs.copy_file(inner, storage.filesystem(copy.path)[1])
    return copy
