"""The committer on a real pyiceberg SQLite catalog, without Spark: what lands, what a commit's
files become when it does not, and the metadata-only changes."""

from __future__ import annotations

import os

import pytest
from iceberg_tables import catalog_at, create, write
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Transaction
from pyiceberg.types import LongType

from arctic_sql.errors import CommitConflictError, CommitStateUnknownError
from arctic_sql.table.format import layout, versions
from arctic_sql.table.reading.scan import live_files
from arctic_sql.table.writing import commit


@pytest.fixture
def table(tmp_path):
    return create(catalog_at(tmp_path))


def _exists(path: str) -> bool:
    return os.path.exists(path.removeprefix("file://"))


def test_a_change_commit_is_one_version_with_its_files_rows_and_summary(table):
    upserts = write(table, [(1, None, "a"), (2, None, "b")])
    deletes = write(table, [(3, None, None)], op=layout.DELETE)
    assert commit.commit_change(table, [upserts, deletes], versions.Operation.MERGE) == 1
    assert commit.commit_change(table, [write(table, [(4, None, "d")])], versions.Operation.INSERT) == 2
    table.change.refresh()
    summary = versions.summary_of(
        table.change.snapshot_by_id(versions.data_commits(table.base, table.change)[0].snapshot_id)
    )
    assert summary[versions.OPERATION] == "merge"
    assert (summary[versions.UPSERTED_ROWS], summary[versions.DELETED_ROWS]) == ("2", "1")
    assert [c.version for c in versions.data_commits(table.base, table.change)] == [1, 2]
    files = commit.data_files(table.change, [upserts])
    assert files[0].record_count == 2 and files[0].file_path == upserts


def test_a_commit_rebuilds_the_table_metadata_a_fixed_number_of_times(table, monkeypatch):
    """pyiceberg rebuilds and deep-copies the whole metadata on every read of a transaction's
    ``table_metadata``; a commit must not pay that per read, or its cost grows with the snapshots."""
    import pyiceberg.table as pyiceberg_table

    rebuilt = []
    real = pyiceberg_table.update_table_metadata

    def counting(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        rebuilt.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(pyiceberg_table, "update_table_metadata", counting)
    for key in range(1, 4):
        rebuilt.clear()
        assert commit.commit_change(table, [write(table, [(key, None, "a")])], "insert") == key
        assert len(rebuilt) == 1  # once the producer staged its updates (pyiceberg alone: about 15)
    table.change.refresh()
    assert [c.version for c in versions.data_commits(table.base, table.change)] == [1, 2, 3]


def test_a_refused_commit_deletes_its_files_and_lands_nothing(table):
    path = write(table, [(1, None, "a")])

    def refuse(store):  # noqa: ANN001
        raise CommitConflictError("stale")

    with pytest.raises(CommitConflictError):
        commit.commit_change(table, [path], "insert", validate=refuse)
    table.change.refresh()
    assert not _exists(path) and table.change.current_snapshot() is None


def test_a_commit_the_catalog_keeps_rejecting_deletes_its_files(table, monkeypatch):
    path = write(table, [(1, None, "a")])
    monkeypatch.setattr(commit, "MAX_ATTEMPTS", 3)
    monkeypatch.setattr(commit.time, "sleep", lambda seconds: None)
    rejected = []

    def reject(self):  # noqa: ANN001
        rejected.append(1)
        raise CommitFailedException("another writer won")

    monkeypatch.setattr(Transaction, "commit_transaction", reject)
    with pytest.raises(CommitConflictError, match="kept conflicting"):
        commit.commit_change(table, [path], "insert")
    assert len(rejected) == 3 and not _exists(path)


def test_a_commit_that_landed_but_reported_an_error_succeeds(table, monkeypatch):
    path = write(table, [(1, None, "a")])
    original = Transaction.commit_transaction

    def land_then_fail(self):  # noqa: ANN001
        original(self)
        raise OSError("connection reset after the catalog answered")

    monkeypatch.setattr(Transaction, "commit_transaction", land_then_fail)
    assert commit.commit_change(table, [path], "insert") == 1
    assert _exists(path)


def test_a_commit_of_unknown_outcome_keeps_its_files_and_says_so_in_one_line(table, monkeypatch):
    path = write(table, [(1, None, "a")])

    def lost(self):  # noqa: ANN001
        raise OSError("connection reset")

    monkeypatch.setattr(Transaction, "commit_transaction", lost)
    with pytest.raises(CommitStateUnknownError) as raised:
        commit.commit_change(table, [path], "insert")
    assert _exists(path)  # orphan removal decides later, once no lease or commit can need it
    assert "\n" not in str(raised.value) and "may or may not have landed" in str(raised.value)


def test_an_overwrite_replaces_files_and_keeps_the_watermark_map(table):
    commit.commit_change(table, [write(table, [(1, None, "a")])], "insert")
    first = write(table, [(1, None, "a")], store=layout.Store.BASE)
    files = commit.data_files(table.base, [first])
    commit.commit_base(
        table,
        lambda store: commit.BaseChange(
            add=files, watermarks={"": 1}, summary={versions.OPERATION: "optimize"}
        ),
        [first],
    )
    second = write(table, [(1, None, "b")], store=layout.Store.BASE)
    replacement = commit.data_files(table.base, [second])

    def replace(store):  # noqa: ANN001 - rebuilt from the store's state on every attempt
        live = [f.data_file for f in live_files(store, store.current_snapshot(), layout.Store.BASE)]
        return commit.BaseChange(delete=live, add=replacement, summary={versions.OPERATION: "optimize"})

    commit.commit_base(table, replace, [second])
    table.base.refresh()
    snapshot = table.base.current_snapshot()
    assert versions.watermarks_of(snapshot) == {"": 1}  # None keeps the current map
    live = [task.file.file_path for task in table.base.scan().plan_files()]
    assert live == [second]


def test_metadata_changes_go_through_the_committer(table):
    commit.set_properties(table.base, {"a": "1", "b": "2"})
    commit.set_properties(table.base, {"c": "3"}, removals=["a", "not-set"])
    table.base.refresh()
    assert (table.base.properties.get("a"), table.base.properties["b"], table.base.properties["c"]) == (
        None,
        "2",
        "3",
    )
    before = len(table.base.metadata.metadata_log)
    commit.set_properties(table.base, removals=["not-set"])  # nothing to change: no commit
    table.base.refresh()
    assert len(table.base.metadata.metadata_log) == before
    commit.evolve_schema(table.base, lambda update: update.add_column("w", LongType()))
    table.base.refresh()
    assert table.base.schema().find_field("w").field_type == LongType()


def test_expiring_snapshot_ids_removes_only_those(table):
    for _ in range(3):
        commit.commit_change(table, [], "insert")
    table.change.refresh()
    ids = [s.snapshot_id for s in table.change.snapshots()]
    commit.expire_snapshots(table.change, ids[:1])
    table.change.refresh()
    assert [s.snapshot_id for s in table.change.snapshots()] == ids[1:]


def test_a_first_attempt_on_metadata_another_writer_moved_past_retries_and_keeps_both_commits(tmp_path):
    """``fresh`` skips the reload before the first attempt; the catalog must then refuse the stale
    commit, and the retry (which reloads) must land after the other writer's commit, not over it."""
    catalog = catalog_at(tmp_path)
    stale = create(catalog)
    other = catalog.load_table(stale.identifier)
    assert commit.commit_change(other, [write(other, [(1, None, "a")])], "insert") == 1
    attempts = []
    real = commit._Transaction.commit_transaction

    def counted(tx):  # noqa: ANN001, ANN202
        staged = tx.table_metadata
        attempts.append(staged.snapshot_by_id(staged.current_snapshot_id).parent_snapshot_id)
        return real(tx)

    import unittest.mock

    with unittest.mock.patch.object(commit._Transaction, "commit_transaction", counted):
        assert commit.commit_change(stale, [write(stale, [(2, None, "b")])], "insert", fresh=True) == 2
    # the first attempt was made on the stale metadata (no parent), the retry after the other commit
    assert len(attempts) == 2 and attempts[0] is None and attempts[1] is not None
    stale.change.refresh()
    assert [c.version for c in versions.data_commits(stale.base, stale.change)] == [1, 2]
    assert len(stale.change.scan().plan_files()) == 2


def test_footers_kept_by_the_writer_give_the_data_files_a_read_back_gives(table):
    import pyarrow as pa

    from arctic_sql.table.writing.arrow_files import WriteTarget, write_table

    target = WriteTarget.of(table, layout.Store.CHANGE)
    rows = pa.table(
        {"id": [5, 1, 3], "p": ["x", None, "y"], "v": ["a", "b", None]}, schema=target.arrow_schema()
    )
    written = write_table(rows, target, target.new_location(), ops=pa.array(["upsert", "delete", "upsert"]))
    assert written and all(f.footer is not None and f.size is not None for f in written)
    paths = [f.path for f in written]
    kept = commit.data_files(table.change, paths, {f.path: (f.size, f.footer) for f in written})
    read = commit.data_files(table.change, paths)
    fields = (
        "file_path",
        "file_size_in_bytes",
        "record_count",
        "column_sizes",
        "value_counts",
        "null_value_counts",
        "lower_bounds",
        "upper_bounds",
        "split_offsets",
        "partition",
    )
    assert [[getattr(f, n) for n in fields] for f in kept] == [[getattr(f, n) for n in fields] for f in read]
    assert sorted(f.file_size_in_bytes for f in read) == sorted(
        os.path.getsize(p.removeprefix("file://")) for p in paths
    )


def test_registering_a_file_warns_only_of_statistics_left_out_unexpectedly(tmp_path, caplog):
    """Writers leave FLOAT and DOUBLE columns without Parquet statistics (NaN-safe bounds):
    pyiceberg's warning about them would be one log line per file per commit. Only that one goes."""
    import logging

    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.schema import Schema
    from pyiceberg.types import DoubleType, NestedField, StringType

    from arctic_sql.table.format.statistics import statistics_columns
    from arctic_sql.table.model.identifiers import TableIdentifier

    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "d", DoubleType()),
        NestedField(3, "s", StringType()),
        identifier_field_ids=[1],
    )
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC

    table = catalog_at(tmp_path).create_table(
        TableIdentifier("db", "f"), schema, UNPARTITIONED_PARTITION_SPEC, {}
    )
    data = pa.table({"id": pa.array([1, 2], pa.int64()), "d": [1.5, float("nan")], "s": ["a", "b"]})
    folder = (
        layout.new_write_location(table.change.location())
        + f"/{layout.NODE_COLUMN}=1/{layout.OP_COLUMN}=upsert"
    )
    os.makedirs(folder.removeprefix("file://"))

    def registered(name: str, columns) -> list[str]:  # noqa: ANN001
        path = f"{folder}/{name}.parquet"
        pq.write_table(data, path.removeprefix("file://"), write_statistics=columns)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="pyiceberg"):
            assert commit.data_files(table.change, [path])[0].record_count == 2
        return [r.getMessage() for r in caplog.records if "statistics missing" in r.getMessage()]

    assert statistics_columns(data.schema) == ["id", "s"]
    assert registered("writers", statistics_columns(data.schema)) == []  # the double column, as expected
    assert registered("no-string-bounds", ["id", "d"]) == [  # anything else still warns
        "PyArrow statistics missing for column 2 when writing file"
    ]
