"""Branches on a real pyiceberg SQLite catalog, without Spark: how a name says a branch, and that a
commit through a branch's view of the stores moves the branch's refs and never main's."""

from __future__ import annotations

import pytest
from iceberg_tables import catalog_at, create, write

from arctic_sql.errors import InvalidArgumentError, VersionNotFoundError
from arctic_sql.table.format import versions
from arctic_sql.table.model.identifiers import TableIdentifier
from arctic_sql.table.reading import branches
from arctic_sql.table.writing import branch_writes, commit


def test_a_third_part_named_branch_x_names_a_branch():
    assert TableIdentifier.parse("db.t.branch_Audit", "default") == TableIdentifier("db", "t", "audit")
    assert TableIdentifier.parse("spark_catalog.db.t.branch_a", "x") == TableIdentifier("db", "t", "a")
    assert TableIdentifier.parse("db.branch_a", "x") == TableIdentifier("db", "branch_a")  # a table
    assert TableIdentifier.parse("spark_catalog.db.t", "x") == TableIdentifier("db", "t")
    assert str(TableIdentifier("db", "t", "a")) == "db.t.branch_a"
    with pytest.raises(InvalidArgumentError, match="expected db.table"):
        TableIdentifier.parse("db.t.branch_", "x")


def test_a_commit_on_a_branch_moves_only_the_branch_in_both_stores(tmp_path):
    catalog = catalog_at(tmp_path)
    table = create(catalog, "t")
    commit.commit_change(table, [write(table, [(1, None, "a")])], "insert")
    main = catalog.load_table(TableIdentifier("db", "t"))
    made = branch_writes.create(main, "audit")
    assert made is not None and [b.name for b in branches.branches(main)] == ["audit"]
    audit = catalog.load_table(TableIdentifier("db", "t", "audit"))
    version = commit.commit_change(audit, [write(audit, [(2, None, "b")])], "insert")
    main = catalog.load_table(TableIdentifier("db", "t"))
    assert [c.version for c in versions.data_commits(main.base, main.change)] == [1]
    audit = catalog.load_table(TableIdentifier("db", "t", "audit"))
    assert [c.version for c in versions.data_commits(audit.base, audit.change)] == [1, version]
    assert main.change.metadata.refs["audit"].snapshot_id == audit.change.current_snapshot().snapshot_id
    assert main.change.current_snapshot().snapshot_id != audit.change.current_snapshot().snapshot_id
    with pytest.raises(
        VersionNotFoundError, match=r"^Branch 'nope' of db.t does not exist \(branches: audit;"
    ):
        catalog.load_table(TableIdentifier("db", "t", "nope"))
    assert branch_writes.fast_forward(main, "main", "audit").updated_version == version
    main = catalog.load_table(TableIdentifier("db", "t"))
    assert [c.version for c in versions.data_commits(main.base, main.change)] == [1, version]


def test_expiration_keeps_a_branch_line_whole_and_takes_it_once_dropped(tmp_path):
    from arctic_sql.table.maintenance import expiration

    catalog = catalog_at(tmp_path)
    table = create(catalog, "t")
    for i in range(2):
        commit.commit_change(table, [write(table, [(i, None, "a")])], "insert")
    branch_writes.create(catalog.load_table(TableIdentifier("db", "t")), "audit")
    audit = catalog.load_table(TableIdentifier("db", "t", "audit"))
    on_branch = commit.commit_change(audit, [write(audit, [(5, None, "b")])], "insert")
    for i in range(2):
        commit.commit_change(table, [write(table, [(10 + i, None, "m")])], "insert")
    main = catalog.load_table(TableIdentifier("db", "t"))
    expiration.expire_snapshots(main, older_than_ms=expiration.now_ms() + 1000, retain_last=1)
    audit = catalog.load_table(TableIdentifier("db", "t", "audit"))
    assert [c.version for c in versions.data_commits(audit.base, audit.change)] == [1, 2, on_branch]
    main = catalog.load_table(TableIdentifier("db", "t"))
    assert [c.version for c in versions.data_commits(main.base, main.change)] == [5]
    branch_writes.drop(main, "audit")
    expiration.expire_snapshots(main, older_than_ms=expiration.now_ms() + 1000, retain_last=1)
    main = catalog.load_table(TableIdentifier("db", "t"))
    assert len(main.change.snapshots()) == 1 and not branches.branches(main)
