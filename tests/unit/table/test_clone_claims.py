"""Shallow clones on a SQLite catalog, without Spark: a clone names its source's files and claims
them, a purge of either deletes only what is its own and unclaimed (docs/design.md, "Who owns which
files")."""

from __future__ import annotations

import os

from iceberg_tables import catalog_at, create, write

from arctic_sql.table.format import layout
from arctic_sql.table.model.identifiers import TableIdentifier
from arctic_sql.table.reading.scan import live_files
from arctic_sql.table.records import clones
from arctic_sql.table.writing import commit


def _exists(path: str) -> bool:
    return os.path.exists(path.removeprefix("file://"))


def test_a_clone_keeps_what_it_reads_through_its_sources_purge_and_deletes_nothing_of_it(tmp_path):
    catalog = catalog_at(tmp_path)
    table = create(catalog)
    kept = write(table, [(1, None, "a")])
    commit.commit_change(table, [kept], "insert")
    clone = catalog.shallow_clone(table, TableIdentifier("db", "c"), None)
    later = write(table, [(2, None, "b")])
    commit.commit_change(table, [later], "insert")
    assert [f.path for f in live_files(clone.change, clone.change.current_snapshot(), "change")] == [kept]
    claims = os.path.join(layout.table_root(table.base.location()).removeprefix("file://"), clones.FOLDER)
    assert len(os.listdir(claims)) == 1
    catalog.drop_table(TableIdentifier("db", "t"), purge=True)
    assert _exists(kept) and not _exists(later)  # the claimed file stays, the unclaimed one goes
    own = write(clone, [(3, None, "c")])
    commit.commit_change(clone, [own], "insert")
    catalog.drop_table(TableIdentifier("db", "c"), purge=True)
    assert not _exists(own) and _exists(kept)  # a clone never deletes under its source's folder
    assert os.listdir(claims) == []  # its purge released the claim
