"""Which files a read of a version plans, on a real pyiceberg SQLite catalog, without Spark."""

from __future__ import annotations

import pytest
from iceberg_tables import catalog_at, create, write
from pyiceberg.expressions import EqualTo

from arctic_sql.errors import VersionNotFoundError
from arctic_sql.table.format import layout, versions
from arctic_sql.table.reading.scan import latest_version, live_files, plan_read
from arctic_sql.table.writing import commit


def _names(files) -> set[str]:  # noqa: ANN001 - planned FileEntry objects or written paths
    return {(f if isinstance(f, str) else f.path).rsplit("/", 1)[1] for f in files}


def _merge(table, watermarks: dict[str, int], paths: list[str]) -> None:  # noqa: ANN001
    """A base commit that merged the change transactions up to ``watermarks`` (as optimizing does)."""
    files = commit.data_files(table.base, paths)
    commit.commit_base(
        table,
        lambda store: commit.BaseChange(
            add=files, watermarks=watermarks, summary={versions.OPERATION: versions.OPTIMIZE}
        ),
        paths,
    )


def test_each_version_reads_the_change_files_up_to_it_above_the_watermark(tmp_path):
    table = create(catalog_at(tmp_path))
    one = write(table, [(1, None, "a")])
    commit.commit_change(table, [one], "insert")
    two = write(table, [(1, None, None)], op=layout.DELETE)
    commit.commit_change(table, [two], "delete")
    base = write(table, [], store=layout.Store.BASE)
    _merge(table, {"": 2}, [base])  # versions 1 and 2 merged: the base holds them
    three = write(table, [(5, None, "e")])
    commit.commit_change(table, [three], "insert")
    assert latest_version(table) == 3
    assert _names(plan_read(table, 1).change_files) == _names([one]) and not plan_read(table, 1).base_files
    merged = plan_read(table, 2)  # the base commit holds version 2: no change file is read again
    assert _names(merged.base_files) == _names([base]) and not merged.change_files
    latest = plan_read(table)
    assert latest.version == 3 and latest.watermarks == {"": 2}
    assert _names(latest.base_files) == _names([base]) and _names(latest.change_files) == _names([three])


def test_a_version_that_does_not_exist_is_a_one_line_error(tmp_path):
    table = create(catalog_at(tmp_path))
    commit.commit_change(table, [write(table, [(1, None, "a")])], "insert")
    with pytest.raises(
        VersionNotFoundError, match=r"Version 7 of db.t does not exist .*available: 1 to 1"
    ) as e:
        plan_read(table, 7)
    assert "\n" not in str(e.value)


def test_partition_filters_prune_files_and_keep_their_partition(tmp_path):
    table = create(catalog_at(tmp_path), partitioned=True)
    # Writers name partition folders after helper columns (arctic_p_<position>); plans show Iceberg's path.
    a = write(table, [(1, "a", "x")], partition="arctic_p_0=a")
    b = write(table, [(2, "b", "y")], partition="arctic_p_0=b")
    commit.commit_change(table, [a, b], "insert")
    plan = plan_read(table, change_filter=EqualTo("p", "b"))
    assert _names(plan.change_files) == _names([b]) and [f.partition for f in plan.change_files] == ["p=b"]
    assert _names(plan_read(table).change_files) == _names([a, b])


def test_live_files_know_their_node_kind_and_transaction(tmp_path):
    table = create(catalog_at(tmp_path))
    upsert = write(table, [(1, None, "a")], node=5)
    delete = write(table, [(2, None, None)], op=layout.DELETE, node=6)
    commit.commit_change(table, [upsert, delete], "merge")
    table.change.refresh()
    entries = {
        f.path: f for f in live_files(table.change, table.change.current_snapshot(), layout.Store.CHANGE)
    }
    assert (entries[upsert].node_id, entries[upsert].is_delete, entries[upsert].sequence_number) == (
        5,
        False,
        1,
    )
    assert (entries[delete].node_id, entries[delete].is_delete, entries[delete].record_count) == (6, True, 1)


def test_a_table_without_a_key_reads_base_snapshots_by_version(tmp_path):
    table = create(catalog_at(tmp_path), keyed=False)
    first = write(table, [(1, None, "a")], store=layout.Store.BASE)
    commit.commit_base(
        table,
        lambda store: commit.BaseChange(
            add=commit.data_files(store, [first]), summary={versions.OPERATION: "insert"}
        ),
        [first],
    )
    second = write(table, [(2, None, "b")], store=layout.Store.BASE)
    commit.commit_base(
        table,
        lambda store: commit.BaseChange(
            add=commit.data_files(store, [second]), summary={versions.OPERATION: "insert"}
        ),
        [second],
    )
    assert _names(plan_read(table, 1).base_files) == _names([first])
    assert _names(plan_read(table).base_files) == _names([first, second]) and plan_read(table).version == 2
