"""Clones (Delta's ``CREATE TABLE t2 SHALLOW|DEEP CLONE t [VERSION AS OF v]``): a shallow clone reads
its source's files and writes nothing but metadata; writes to either never change the other; no
maintenance of either, nor a PURGE, deletes a file the other still reads (docs/design.md, "Who owns
which files"); a deep clone owns copies and outlives its source."""

from __future__ import annotations

import os

import pyarrow.parquet as pq
import pytest

from arctic_sql.errors import NoSuchTableError, TableAlreadyExistsError, VersionNotFoundError
from arctic_sql.table.format import layout
from arctic_sql.table.maintenance import expiration
from arctic_sql.table.model.identifiers import TableIdentifier
from arctic_sql.table.records import clones, leases

pytestmark = pytest.mark.spark

FUTURE = "timestamp_millis(unix_millis(current_timestamp()) + 1000)"
V2 = [(1, "a", 10), (2, "B", 20), (3, "c", 30)]  # after the second commit
V4 = [(2, "B", 20), (3, "C", 30), (4, "d", 40)]  # the newest version


def _rows(arctic, sql: str) -> list[tuple]:
    return sorted(tuple(r) for r in arctic.sql(sql).collect())


def _root(arctic, name: str) -> str:
    return layout.table_root(arctic.table(name).base.location()).removeprefix("file://")


def _files(root: str) -> set[str]:
    """Every file under a table's folder but its records (leases, claims)."""
    found = set()
    for folder, _, names in os.walk(root):
        found.update(os.path.join(folder, n) for n in names)
    return {f for f in found if f"/{leases.FOLDER}/" not in f and f"/{clones.FOLDER}/" not in f}


def _parquet(root: str) -> set[str]:
    return {f for f in _files(root) if f.endswith(".parquet")}


def _history(arctic, keyed: bool = True) -> None:
    """db.t at versions 1-4 with base files (a full optimize after version 2) and change files."""
    key = ", PRIMARY KEY (id)" if keyed else ""
    arctic.sql(f"CREATE TABLE db.t (id BIGINT, v STRING, n INT{key})")
    arctic.sql("INSERT INTO db.t VALUES (1, 'a', 10), (2, 'b', 20)")
    if keyed:
        arctic.sql("INSERT INTO db.t VALUES (2, 'B', 20), (3, 'c', 30)")  # 2
        arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
        arctic.sql("DELETE FROM db.t WHERE id = 1")  # 3
        arctic.sql("INSERT INTO db.t VALUES (3, 'C', 30), (4, 'd', 40)")  # 4
    else:
        arctic.sql("UPDATE db.t SET v = 'B' WHERE id = 2")
        arctic.sql("INSERT INTO db.t VALUES (3, 'c', 30)")  # V2
        arctic.sql("DELETE FROM db.t WHERE id = 1")
        arctic.sql("UPDATE db.t SET v = 'C' WHERE id = 3")
        arctic.sql("INSERT INTO db.t VALUES (4, 'd', 40)")  # V4


def _version_of(arctic, rows: list[tuple], name: str = "db.t") -> int:
    """The newest version of ``name`` that reads ``rows``."""
    for version in reversed([r[0] for r in arctic.sql(f"SELECT version FROM {name}.history").collect()]):
        if _rows(arctic, f"SELECT * FROM {name} VERSION AS OF {version}") == rows:
            return version
    raise AssertionError(f"no version of {name} reads {rows}")


def _maintain_hard(arctic, name: str) -> None:
    """Everything that deletes files, as hard as it goes: keep one version, drop every merged change
    file, remove every unreferenced file whatever its age."""
    arctic.sql(f"CALL system.expire_change_data('{name}', {FUTURE})")
    arctic.sql(f"CALL system.expire_snapshots(table => '{name}', older_than => {FUTURE}, retain_last => 1)")
    arctic.sql(f"CALL system.remove_orphan_files(table => '{name}', older_than => {FUTURE}, force => true)")


def test_a_shallow_clone_reads_the_source_at_its_version_and_writes_only_metadata(arctic):
    _history(arctic)
    arctic.sql("ALTER TABLE db.t CREATE TAG audit AS OF VERSION 2")
    source_files = _files(_root(arctic, "db.t"))
    arctic.sql("CREATE TABLE db.now SHALLOW CLONE db.t")
    arctic.sql("CREATE TABLE db.old SHALLOW CLONE db.t VERSION AS OF 2")
    arctic.sql("CREATE TABLE db.tagged SHALLOW CLONE db.t VERSION AS OF 'audit'")
    arctic.sql("CREATE TABLE db.at_time SHALLOW CLONE db.t TIMESTAMP AS OF get_latest_timestamp('db.t', 3)")
    assert _rows(arctic, "SELECT * FROM db.now") == V4
    assert _rows(arctic, "SELECT * FROM db.old") == V2
    assert _rows(arctic, "SELECT * FROM db.tagged") == V2
    assert _rows(arctic, "SELECT * FROM db.at_time") == V2  # the third newest commit: version 2
    # The clone's history starts at the version it was made from; its key and layout are the source's.
    assert [r[0] for r in arctic.sql("SELECT version FROM db.old.history").collect()] == [2]
    assert arctic.table("db.old").primary_key == ["id"]
    for clone in ("db.now", "db.old", "db.tagged", "db.at_time"):
        written = _files(_root(arctic, clone))
        assert written and all(f.endswith(".metadata.json") for f in written), written
    assert _files(_root(arctic, "db.t")) == source_files  # nothing written beside the source's files
    # The source's tags are not the clone's.
    assert [r[0] for r in arctic.sql("SELECT name FROM db.now.refs").collect()] == ["main"]


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "unkeyed"])
def test_writes_to_a_shallow_clone_and_its_source_never_change_each_other(arctic, keyed):
    _history(arctic, keyed)
    version = _version_of(arctic, V2)
    arctic.sql(f"CREATE TABLE db.c SHALLOW CLONE db.t VERSION AS OF {version}")
    arctic.sql("INSERT INTO db.c VALUES (9, 'z', 90)")
    arctic.sql("UPDATE db.c SET v = 'A' WHERE id = 1")
    arctic.sql("DELETE FROM db.c WHERE id = 2")
    clone_rows = [(1, "A", 10), (3, "c", 30), (9, "z", 90)]
    assert _rows(arctic, "SELECT * FROM db.c") == clone_rows
    assert _rows(arctic, "SELECT * FROM db.t") == V4
    assert _rows(arctic, f"SELECT * FROM db.t VERSION AS OF {version}") == V2
    arctic.sql("INSERT INTO db.t VALUES (5, 'e', 50)")
    arctic.sql("DELETE FROM db.t WHERE id = 3")
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    assert _rows(arctic, "SELECT * FROM db.t") == [(2, "B", 20), (4, "d", 40), (5, "e", 50)]
    assert _rows(arctic, "SELECT * FROM db.c") == clone_rows
    arctic.sql("CALL system.optimize(table => 'db.c', mode => 'full')")
    assert _rows(arctic, "SELECT * FROM db.c") == clone_rows
    assert _rows(arctic, "SELECT * FROM db.t") == [(2, "B", 20), (4, "d", 40), (5, "e", 50)]
    # The clone's own versions follow the one it was made from.
    clone_versions = [r[0] for r in arctic.sql("SELECT version FROM db.c.history ORDER BY version").collect()]
    assert (
        clone_versions[0] == version
        and len(clone_versions) == 4
        and clone_versions == sorted(set(clone_versions))
    )


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "unkeyed"])
def test_the_sources_expiration_orphan_removal_and_purge_keep_what_a_clone_reads(arctic, keyed):
    _history(arctic, keyed)
    arctic.sql("CREATE TABLE db.c SHALLOW CLONE db.t")
    old = _version_of(arctic, V2)
    arctic.sql(f"CREATE TABLE db.c_old SHALLOW CLONE db.t VERSION AS OF {old}")
    arctic.sql("INSERT INTO db.t VALUES (1, 'x', 0), (2, 'y', 0)")
    arctic.sql("DELETE FROM db.t WHERE id = 4")
    if keyed:
        arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    clone_files = _files(_root(arctic, "db.c"))
    _maintain_hard(arctic, "db.t")
    assert len(arctic.sql("SELECT version FROM db.t.history").collect()) == 1  # one version kept
    assert _rows(arctic, "SELECT * FROM db.c") == V4
    assert _rows(arctic, "SELECT * FROM db.c_old") == V2
    assert _files(_root(arctic, "db.c")) == clone_files
    arctic.sql("DROP TABLE db.t PURGE")
    assert _rows(arctic, "SELECT * FROM db.c") == V4
    assert _rows(arctic, "SELECT * FROM db.c_old") == V2
    # Both clones still write and optimize on their own.
    arctic.sql("INSERT INTO db.c VALUES (7, 'g', 70)")
    arctic.sql("CALL system.optimize(table => 'db.c', mode => 'full')")
    assert _rows(arctic, "SELECT * FROM db.c") == sorted(V4 + [(7, "g", 70)])
    assert _rows(arctic, "SELECT * FROM db.c_old") == V2


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "unkeyed"])
def test_a_clones_own_maintenance_and_purge_never_delete_its_sources_files(arctic, keyed):
    _history(arctic, keyed)
    arctic.sql("CREATE TABLE db.c SHALLOW CLONE db.t")
    source_root = _root(arctic, "db.t")
    source_files = _parquet(source_root)
    arctic.sql("DELETE FROM db.c WHERE id = 2")
    arctic.sql("INSERT INTO db.c VALUES (8, 'h', 80)")
    arctic.sql("CALL system.optimize(table => 'db.c', mode => 'full')")
    arctic.sql("INSERT INTO db.c VALUES (9, 'i', 90)")
    _maintain_hard(arctic, "db.c")
    assert _rows(arctic, "SELECT * FROM db.c") == [(3, "C", 30), (4, "d", 40), (8, "h", 80), (9, "i", 90)]
    assert _parquet(source_root) == source_files
    assert os.listdir(os.path.join(source_root, clones.FOLDER))  # the clone's claim
    arctic.sql("DROP TABLE db.c PURGE")
    assert _parquet(source_root) == source_files
    assert os.listdir(os.path.join(source_root, clones.FOLDER)) == []  # the claim went with the clone
    assert _rows(arctic, "SELECT * FROM db.t") == V4
    assert _rows(arctic, f"SELECT * FROM db.t VERSION AS OF {_version_of(arctic, V2)}") == V2
    # Without a clone, the source's maintenance deletes what it no longer needs: here the files a
    # full optimize replaces.
    arctic.sql("INSERT INTO db.t VALUES (5, 'e', 50)")
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    _maintain_hard(arctic, "db.t")
    assert not _parquet(source_root) >= source_files
    assert _rows(arctic, "SELECT * FROM db.t") == sorted(V4 + [(5, "e", 50)])


def test_a_clone_of_a_clone_keeps_the_first_sources_files_after_the_middle_one_is_purged(arctic):
    _history(arctic)
    arctic.sql("CREATE TABLE db.c1 SHALLOW CLONE db.t")
    arctic.sql("INSERT INTO db.c1 VALUES (5, 'e', 50)")
    arctic.sql("CREATE TABLE db.c2 SHALLOW CLONE db.c1")
    arctic.sql("DROP TABLE db.c1 PURGE")
    arctic.sql("INSERT INTO db.t VALUES (6, 'f', 60)")
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    _maintain_hard(arctic, "db.t")
    arctic.sql("DROP TABLE db.t PURGE")
    assert _rows(arctic, "SELECT * FROM db.c2") == sorted(V4 + [(5, "e", 50)])


def test_a_deep_clone_owns_copies_and_outlives_its_source(arctic):
    _history(arctic)
    arctic.sql("CREATE TABLE db.deep DEEP CLONE db.t VERSION AS OF 2")
    arctic.sql("CREATE TABLE db.deep_now CLONE db.t")  # Delta's default: deep
    deep_root = _root(arctic, "db.deep")
    assert _parquet(deep_root)
    assert arctic.table("db.deep").primary_key == ["id"]
    assert not os.path.exists(os.path.join(_root(arctic, "db.t"), clones.FOLDER))  # no claim: nothing shared
    arctic.sql("DROP TABLE db.t PURGE")
    assert _rows(arctic, "SELECT * FROM db.deep") == V2
    assert _rows(arctic, "SELECT * FROM db.deep_now") == V4
    arctic.sql("UPDATE db.deep SET n = 0 WHERE id = 1")
    assert _rows(arctic, "SELECT * FROM db.deep WHERE id = 1") == [(1, "a", 0)]


def test_bad_clones_fail_in_one_line_and_change_nothing(arctic):
    _history(arctic)
    arctic.sql("CREATE TABLE db.taken (id BIGINT)")
    source_files = _files(_root(arctic, "db.t"))
    tables = sorted(r[1] for r in arctic.sql("SHOW TABLES IN db").collect())
    refused = [
        (NoSuchTableError, r"^Cannot clone db\.nope: no such table$", "db.c SHALLOW CLONE db.nope"),
        (TableAlreadyExistsError, r"^Table db\.taken already exists$", "db.taken SHALLOW CLONE db.t"),
        (TableAlreadyExistsError, r"^Table db\.taken already exists$", "db.taken DEEP CLONE db.t"),
        (
            VersionNotFoundError,
            r"^Version 9 of db\.t does not exist",
            "db.c SHALLOW CLONE db.t VERSION AS OF 9",
        ),
        (VersionNotFoundError, r"^Version 9 of db\.t does not exist", "db.c DEEP CLONE db.t VERSION AS OF 9"),
        (
            VersionNotFoundError,
            r"^Tag 'nope' of db\.t does not exist",
            "db.c SHALLOW CLONE db.t VERSION AS OF 'nope'",
        ),
    ]
    for error, message, statement in refused:
        with pytest.raises(error, match=message):
            arctic.sql(f"CREATE TABLE {statement}")
    arctic.sql("CREATE TABLE IF NOT EXISTS db.taken SHALLOW CLONE db.t")  # nothing to do
    assert sorted(r[1] for r in arctic.sql("SHOW TABLES IN db").collect()) == tables
    assert _files(_root(arctic, "db.t")) == source_files
    assert not os.path.exists(os.path.join(_root(arctic, "db.t"), clones.FOLDER))
    assert [n for n in os.listdir(os.path.dirname(_root(arctic, "db.t"))) if n.startswith("c")] == []


def test_an_expiration_that_finds_a_clone_in_the_making_keeps_every_version(arctic, monkeypatch):
    _history(arctic)
    table = arctic.table("db.t")
    root = layout.table_root(table.base.location())
    cloning = leases.take(root, clones.CLONING)  # a clone between its lease and its claim
    monkeypatch.setattr(expiration, "TAG_WAIT_S", 0.0)
    try:
        result = expiration.expire_snapshots(
            table, older_than_ms=expiration.now_ms() + 1000, retain_last=1, change_ttl=False
        )
    finally:
        leases.release(root, cloning.lease_id)
    assert result.expired_snapshots == 0
    assert _rows(arctic, "SELECT * FROM db.t VERSION AS OF 2") == V2
    # With the clone's lease gone the same expiration goes ahead.
    assert (
        expiration.expire_snapshots(
            arctic.table("db.t"), older_than_ms=expiration.now_ms() + 1000, retain_last=1, change_ttl=False
        ).expired_snapshots
        > 0
    )


def test_a_clone_whose_source_is_purged_while_it_is_made_is_refused(arctic, monkeypatch):
    """A purge reads the claims after it drops the base store; a clone checks after writing its
    claim that its source is still there: here the purge read the claims before the clone's was
    written, so the clone gives up."""
    _history(arctic)
    root = _root(arctic, "db.t")
    save = clones.save

    def save_after_a_purge(table_root: str, claim: clones.Claim) -> None:
        arctic.sql("DROP TABLE db.t PURGE")
        save(table_root, claim)

    monkeypatch.setattr(clones, "save", save_after_a_purge)
    with pytest.raises(
        NoSuchTableError, match=r"^Cannot clone db\.t: it was dropped while the clone was made$"
    ):
        arctic.sql("CREATE TABLE db.c SHALLOW CLONE db.t")
    assert not arctic.catalog.table_exists(TableIdentifier("db", "c"))
    assert not _files(root) and not os.listdir(os.path.join(root, clones.FOLDER))  # the claim released


def test_a_clones_position_deletes_on_its_sources_files_outlive_the_sources_maintenance_and_purge(arctic):
    # With a small target size a minor optimize keeps each base file and writes a position-delete
    # file for the rows changes supersede: in a clone, deletes of the source's files, in its folder.
    arctic.sql(
        "CREATE TABLE db.t (id BIGINT, v STRING, n INT, PRIMARY KEY (id)) "
        "TBLPROPERTIES ('self-optimizing.target-size' = '4096')"
    )
    arctic.sql("INSERT INTO db.t VALUES " + ", ".join(f"({i}, 'v{i}', {i})" for i in range(40)))
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    arctic.sql("CREATE TABLE db.c SHALLOW CLONE db.t")
    arctic.sql("UPDATE db.c SET v = 'c' WHERE id < 5")
    arctic.sql("DELETE FROM db.c WHERE id >= 35")
    arctic.sql("CALL system.optimize(table => 'db.c', mode => 'minor')")
    files = arctic.sql("SELECT kind, path FROM db.c.files WHERE store = 'base'").collect()
    clone_root, source_root = _root(arctic, "db.c"), _root(arctic, "db.t")
    assert any(r.path.removeprefix("file://").startswith(source_root) for r in files if r.kind == "base"), (
        files
    )
    deletes = [r.path for r in files if r.kind == "position-delete"]
    assert deletes and all(p.removeprefix("file://").startswith(clone_root) for p in deletes), files
    deleted_in = {
        f.removeprefix("file://")
        for p in deletes
        for f in pq.read_table(p.removeprefix("file://"), columns=["file_path"]).column(0).to_pylist()
    }
    assert any(f.startswith(source_root) for f in deleted_in), deleted_in  # rows of the source's files
    expected = sorted([(i, "c", i) for i in range(5)] + [(i, f"v{i}", i) for i in range(5, 35)])
    assert _rows(arctic, "SELECT * FROM db.c") == expected
    arctic.sql("UPDATE db.t SET v = 't'")
    arctic.sql("CALL system.optimize(table => 'db.t', mode => 'full')")
    _maintain_hard(arctic, "db.t")
    assert _rows(arctic, "SELECT * FROM db.c") == expected
    arctic.sql("DROP TABLE db.t PURGE")
    _maintain_hard(arctic, "db.c")
    assert _rows(arctic, "SELECT * FROM db.c") == expected
