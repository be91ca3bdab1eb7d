"""The arctic catalog on a real pyiceberg SQLite catalog, without Spark: which stores a table has,
what DROP and PURGE remove, staged CTAS, and the leftovers an interrupted DDL leaves."""

from __future__ import annotations

import os

import pytest
from iceberg_tables import SCHEMA, catalog_at, create, write
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC

from arctic_sql.errors import InvalidArgumentError, NoSuchTableError, TableAlreadyExistsError
from arctic_sql.table.model.identifiers import CHANGE_SUFFIX, TableIdentifier
from arctic_sql.table.writing import commit


def _exists(path: str) -> bool:
    return os.path.exists(path.removeprefix("file://"))


@pytest.fixture
def catalog(tmp_path):
    return catalog_at(tmp_path)


def test_a_keyed_table_has_two_stores_and_lists_once(catalog):
    keyed = create(catalog, "k")
    plain = create(catalog, "p", keyed=False)
    assert keyed.is_keyed and keyed.change is not None and keyed.primary_key == ["id"]
    assert not plain.is_keyed and plain.change is None
    assert catalog.list_tables("db") == ["k", "p"]  # change stores are not tables
    assert catalog.table_exists(TableIdentifier.parse("db.k", "default"))
    assert not catalog.table_exists(TableIdentifier("db", f"k{CHANGE_SUFFIX}"))
    with pytest.raises(TableAlreadyExistsError, match="Table db.k already exists"):
        create(catalog, "k")
    with pytest.raises(InvalidArgumentError, match="reserved"):
        create(catalog, f"x{CHANGE_SUFFIX}")


def test_drop_keeps_files_and_purge_deletes_only_what_the_metadata_names(catalog):
    table = create(catalog)
    path = write(table, [(1, None, "a")])
    commit.commit_change(table, [path], "insert")
    root = table.base.location().rsplit("/", 1)[0].removeprefix("file://")
    stranger = os.path.join(root, "change", "data", "not-ours.txt")
    os.makedirs(os.path.dirname(stranger), exist_ok=True)
    with open(stranger, "w") as f:
        f.write("a file the table never wrote")
    catalog.drop_table(TableIdentifier("db", "t"), purge=True)
    assert not catalog.table_exists(TableIdentifier("db", "t")) and not _exists(path)
    assert os.path.exists(stranger)  # PURGE deletes files, never a folder with what is in it
    with pytest.raises(NoSuchTableError, match="db.t"):
        catalog.drop_table(TableIdentifier("db", "t"))


def test_a_default_folder_with_old_files_gives_the_new_table_its_own(catalog):
    table = create(catalog)
    path = write(table, [(1, None, "a")])
    commit.commit_change(table, [path], "insert")
    catalog.drop_table(TableIdentifier("db", "t"))  # without PURGE: the files stay
    again = create(catalog)
    assert _exists(path)
    assert again.base.location() != table.base.location()


def test_a_staged_table_is_invisible_until_published_and_discarding_purges_it(catalog):
    identifier = TableIdentifier("db", "s")
    staged = catalog.create_table(identifier, SCHEMA, UNPARTITIONED_PARTITION_SPEC, {}, staged=True)
    assert not catalog.table_exists(identifier)
    published = catalog.publish(staged)
    assert catalog.table_exists(identifier) and published.change is not None
    other = catalog.create_table(
        TableIdentifier("db", "u"), SCHEMA, UNPARTITIONED_PARTITION_SPEC, {}, staged=True
    )
    path = write(other, [(1, None, "a")])
    commit.commit_change(other, [path], "insert")
    catalog.discard_staged(other)
    assert not catalog.table_exists(TableIdentifier("db", "u")) and not _exists(path)


def test_a_change_store_left_alone_is_removed_by_the_next_create(catalog):
    table = create(catalog)
    catalog.iceberg.drop_table(table.identifier.base_id)  # as a crash between the two stores leaves it
    assert not catalog.table_exists(table.identifier)
    assert catalog.remove_leftovers(table.identifier)
    assert not catalog.remove_leftovers(table.identifier)  # nothing left the second time
    assert create(catalog).change is not None
