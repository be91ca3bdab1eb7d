"""Tombstone files (table/files/tombstones.py) on a real pyiceberg SQLite catalog, without Spark:
a base data file every row of which its own position-delete file deletes, so that no Iceberg reader
sees a tombstone, while the folds read them back and maintenance keeps them as any table file."""

from __future__ import annotations

import os

import pyarrow as pa
from iceberg_tables import catalog_at, create, write
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.types import DateType, LongType, NestedField, StringType

from arctic_sql.table.files import tombstones
from arctic_sql.table.format import layout, versions
from arctic_sql.table.maintenance import expiration, orphan_removal
from arctic_sql.table.reading.scan import live_files
from arctic_sql.table.writing import commit


def _commit(table, add: list[str], delete=()) -> None:  # noqa: ANN001
    files = commit.data_files(table.base, add)
    commit.commit_base(
        table,
        lambda store: commit.BaseChange(
            add=files, delete=list(delete), summary={versions.OPERATION: versions.OPTIMIZE}
        ),
        add,
    )


def _local(path: str) -> str:
    return path.removeprefix("file://")


def test_no_iceberg_reader_sees_a_tombstone_and_maintenance_keeps_it_while_referenced(tmp_path):
    table = create(catalog_at(tmp_path))
    base = write(table, [(1, "a", "x"), (2, "b", "y")], store=layout.Store.BASE)
    _commit(table, [base])
    marks = pa.table({"id": pa.array([3, 4], pa.int64()), "v": ["7", "9"]})
    written = tombstones.write(base.rsplit("/", 1)[0], table.schema, marks)
    assert [tombstones.is_tombstone_file(p) for p in written] == [True, False]
    _commit(table, written)
    # pyiceberg's scan (a plain Iceberg reader) and the project's planning apply the deletes.
    assert sorted(table.base.scan().to_arrow().column("id").to_pylist()) == [1, 2]
    entries = live_files(table.base, table.base.current_snapshot(), layout.Store.BASE)
    held = [e for e in entries if tombstones.is_tombstone_file(e.path)]
    assert len(held) == 1 and held[0].deleted_rows == held[0].record_count == 2
    # The folds read them whole.
    found = tombstones.read(table.base.io, [held[0].path], ["id", "v"])
    assert found is not None and found.to_pylist() == marks.to_pylist()
    # Referenced: orphan removal and expiration keep both files.
    later = expiration.now_ms() + 60_000
    assert not set(map(_local, written)) & set(map(_local, orphan_removal.orphan_files(table, later)))
    expiration.expire_snapshots(table, older_than_ms=later, retain_last=1)
    assert all(os.path.exists(_local(p)) for p in written)
    # Replaced by a later commit and expired, they go as any data and delete file does.
    _commit(
        table,
        [write(table, [(1, "a", "x")], store=layout.Store.BASE)],
        delete=[held[0].data_file, *held[0].deletes],
    )
    expiration.expire_snapshots(table, older_than_ms=expiration.now_ms() + 60_000, retain_last=1)
    assert not any(os.path.exists(_local(p)) for p in written)


def test_required_columns_get_a_filler_no_reader_sees():
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "s", LongType()),
        NestedField(3, "name", StringType(), required=True),
        NestedField(4, "day", DateType(), required=True),
        identifier_field_ids=[1],
    )
    arrow = schema_to_pyarrow(schema)
    for field in arrow:
        if not field.nullable and field.name != "id":
            assert tombstones._filler(field.type, 2).null_count == 0
