"""The service's facts cache on a real pyiceberg SQLite catalog, without Spark: a table's facts are
computed once per commit of either store, the listing pages and filters on the server, and the
optimizer's triggers say whether a table is pending."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "table"))  # the table layer's test helpers
from iceberg_tables import catalog_at, create, write

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.service import views
from arctic_sql.service.facts import FactsCache, optimizing_status
from arctic_sql.table.format import layout
from arctic_sql.table.writing import commit


@pytest.fixture
def catalog(tmp_path):
    catalog = catalog_at(tmp_path)
    create(catalog, "a")
    create(
        catalog,
        "b",
        properties={"self-optimizing.minor.trigger.file-count": "1", "base.file-index.hash-bucket": "1"},
    )
    create(catalog, "logs", keyed=False)
    return catalog


def _insert(catalog, name: str, rows, op: str = layout.UPSERT) -> None:
    from arctic_sql.table.model.identifiers import TableIdentifier

    table = catalog.load_table(TableIdentifier("db", name))
    commit.commit_change(table, [write(table, rows, op=op)], "insert")


def test_facts_are_computed_once_per_commit(catalog):
    cache = FactsCache(catalog)
    assert [f.name for f in cache.all()] == ["db.a", "db.b", "db.logs"] and cache.computed == 3
    cache.all()
    assert cache.computed == 3  # nothing committed: every answer from the cache
    _insert(catalog, "a", [(1, None, "x"), (2, None, "y")])
    facts = {f.name: f for f in cache.all()}
    assert cache.computed == 4  # only db.a again
    a = facts["db.a"]
    assert (a.records, a.change_files, a.unmerged_change_files, a.latest_version) == (2, 1, 1, 1)
    # One change file (no excess over 4 base nodes): 40 + 0 (change rows with no base) + 20 (no deletes).
    assert a.health.score == 60


def test_pending_follows_the_optimizers_triggers(catalog):
    _insert(catalog, "b", [(1, None, "x")])
    _insert(catalog, "b", [(2, None, "y")])
    _insert(catalog, "a", [(1, None, "x")])
    cache = FactsCache(catalog)
    facts = {f.name: f for f in cache.all()}
    assert facts["db.b"].pending_modes == ("minor",) and "small files" in facts["db.b"].pending_reasons[0]
    assert optimizing_status(facts["db.b"], []) == "pending"
    assert optimizing_status(facts["db.a"], []) == "idle"


def test_listing_filters_sorts_and_pages_on_the_server(catalog):
    _insert(catalog, "a", [(1, None, "x"), (2, None, "y")])
    _insert(catalog, "a", [(2, None, None)], op=layout.DELETE)
    cache = FactsCache(catalog)
    worst = views.list_tables(cache, sort="health_score", page_size=1)
    assert worst["total"] == 3 and [t["name"] for t in worst["tables"]] == ["db.a"]
    assert [t["name"] for t in views.list_tables(cache, kind="append-only")["tables"]] == ["db.logs"]
    assert [
        t["name"] for t in views.list_tables(cache, sort="bytes", order="desc", page=1, page_size=1)["tables"]
    ] == ["db.a"]
    assert views.list_tables(cache, page=2, page_size=2)["tables"][0]["name"] == "db.logs"
    with pytest.raises(InvalidArgumentError, match="Unknown sort key 'size'"):
        views.list_tables(cache, sort="size")
    with pytest.raises(InvalidArgumentError, match="Unknown optimizing status 'busy'"):
        views.list_tables(cache, status="busy")


def test_the_hive_views_version_and_lag_are_listed(catalog):
    from arctic_sql.table.model.identifiers import TableIdentifier
    from arctic_sql.table.records import hive_syncs

    create(catalog, "h", properties={"hive.compatible": "true"})
    for key in (1, 2, 3):
        _insert(catalog, "h", [(key, None, "x")])
    table = catalog.load_table(TableIdentifier("db", "h"))
    cache = FactsCache(catalog)
    assert views.table_summary(cache.get(TableIdentifier("db", "h"))[1], [])["hive_view_version"] is None
    hive_syncs.save(table, hive_syncs.HiveSync(1, 0, "db.h"))  # what a sync of version 1 records
    _insert(catalog, "h", [(4, None, "x")])  # a commit, so the cache computes the facts again
    row = views.table_summary(cache.get(TableIdentifier("db", "h"))[1], [])
    assert (row["latest_version"], row["hive_view_version"], row["hive_view_lag"]) == (4, 1, 3)
    assert views.table_summary(cache.get(TableIdentifier("db", "a"))[1], [])["hive_view_lag"] is None
