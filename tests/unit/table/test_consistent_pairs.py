"""A table's two stores are always read as a pair the table had (reading/pairs.py), on a real pyiceberg
SQLite catalog without Spark: a whole fast-forward landing between the load of the base store and the
load of the change store, on main or on another branch, and a fast-forward left pending, never give
a reader (a load, the optimizer's planning, a branch's view) the moved base with the older change
line. Each fast-forward is run at that moment by the catalog's own load, deterministically."""

from __future__ import annotations

import pytest
from iceberg_tables import catalog_at, create, write
from pyiceberg.catalog import load_catalog

from arctic_sql.optimizer import process
from arctic_sql.table.catalog import ArcticCatalog
from arctic_sql.table.format import layout
from arctic_sql.table.model.identifiers import TableIdentifier
from arctic_sql.table.model.table import ArcticTable
from arctic_sql.table.reading import branches
from arctic_sql.table.records import fast_forwards
from arctic_sql.table.writing import base_rows, branch_writes, commit

MAIN = TableIdentifier("db", "t")


def _heads(table: ArcticTable, branch: str = "main") -> tuple[int | None, int | None]:
    """The pair ``table`` reads at ``branch``: its base store's head and its change store's."""
    assert table.change is not None
    return branches.head_of(table.base, branch), branches.head_of(table.change, branch)


def _diverged(catalog: ArcticCatalog, branch: str = "audit", source: str | None = None) -> None:
    """Branch ``branch`` from main's head (``source``: from that branch's head) and give it an INSERT
    OVERWRITE (a base-store commit) and a change after it: its pair differs in both stores."""
    branch_writes.create(catalog.load_table(MAIN), branch)
    if source is not None:  # both refs moved to the source's heads, the change store's first
        table = catalog.load_table(MAIN)
        base_id, change_id = _heads(table, source)
        assert table.change is not None and base_id is not None and change_id is not None
        commit.set_refs(table, table.change, lambda ms: ms.create_branch(change_id, branch))
        commit.set_refs(table, table.base, lambda ms: ms.create_branch(base_id, branch))
    view = catalog.load_table(TableIdentifier("db", "t", branch))
    base_rows.commit_overwrite(view, [write(view, [(7, None, "x")], store=layout.Store.BASE)], "overwrite")
    view = catalog.load_table(TableIdentifier("db", "t", branch))
    commit.commit_change(view, [write(view, [(8, None, "y")])], "insert")


@pytest.fixture
def catalog(tmp_path):
    catalog = catalog_at(tmp_path)
    table = create(catalog, "t")
    commit.commit_change(table, [write(table, [(1, None, "a"), (2, None, "b")])], "insert")
    _diverged(catalog)
    return catalog


def test_a_load_that_a_whole_fast_forward_lands_inside_reads_the_pair_after_it(catalog, fast_forward_on_load):
    before = _heads(catalog.load_table(MAIN))
    after = _heads(catalog.load_table(MAIN), "audit")
    assert before[0] != after[0] and before[1] != after[1]
    armed = fast_forward_on_load(catalog, "main", "audit")
    loaded = catalog.load_table(MAIN)
    assert not armed[0]  # the fast-forward ran between the two loads
    assert _heads(loaded) == after  # not (before's base, after's change)


def test_a_branch_read_that_a_fast_forward_of_that_branch_lands_inside_reads_a_pair_it_had(
    catalog, fast_forward_on_load
):
    """Every ref, not only main: ``audit`` fast-forwarded to ``audit2`` (made from it, then diverged)."""
    _diverged(catalog, "audit2", source="audit")
    table = catalog.load_table(MAIN)
    after = _heads(table, "audit2")
    assert _heads(table, "audit")[0] != after[0]
    armed = fast_forward_on_load(catalog, "audit", "audit2")
    loaded = catalog.load_table(TableIdentifier("db", "t", "audit"))
    assert not armed[0]
    assert _heads(loaded) == after  # a branch's view: its main is the branch


def test_the_optimizers_planning_of_a_held_table_reads_a_pair_it_had(catalog, fast_forward_on_load):
    """A table held and reloaded (the optimizer's gather) loads its stores as the catalog does."""
    held = catalog.load_table(MAIN)
    after = _heads(held, "audit")
    armed = fast_forward_on_load(catalog, "main", "audit")
    snap = process.gather(held)
    assert not armed[0]
    assert (snap.base_snapshot_id, snap.change_snapshot_id) == after


def test_a_pending_fast_forward_reads_as_before_on_every_ref_and_in_a_reload(catalog, monkeypatch):
    """A fast-forward of ``audit`` that died after moving the base store: a branch's view made from a
    load of the table, and the optimizer's reload of a held view, read ``audit`` as before it."""
    _diverged(catalog, "audit2", source="audit")
    before = _heads(catalog.load_table(MAIN), "audit")
    held = catalog.load_table(TableIdentifier("db", "t", "audit"))
    monkeypatch.setenv("ARCTIC_FAULT", "raise:fast-forward-between-stores")
    with pytest.raises(Exception, match="injected fault at fast-forward-between-stores"):
        branch_writes.fast_forward(catalog.load_table(MAIN), "audit", "audit2")
    monkeypatch.delenv("ARCTIC_FAULT")
    table = catalog.load_table(MAIN)
    intent = fast_forwards.pending(table.change, "audit")  # type: ignore[arg-type]
    assert intent is not None and intent.base_from == before[0]
    raw = ArcticCatalog(load_catalog(catalog.iceberg.name, **catalog.iceberg.properties)).iceberg.load_table(
        MAIN.base_id
    )
    assert branches.head_of(raw, "audit") == intent.base_to  # the catalog holds the moved base
    assert _heads(branches.on_branch(table, "audit")) == before
    assert _heads(catalog.load_table(TableIdentifier("db", "t", "audit"))) == before
    snap = process.gather(held)
    assert (snap.base_snapshot_id, snap.change_snapshot_id) == before


def test_a_load_that_an_insert_overwrite_and_a_change_after_it_land_inside_reads_them_both(
    catalog, before_change_load
):
    """Not only a fast-forward: an INSERT OVERWRITE commits a reservation to the change store, then its
    base files, and a change lands after it; all three between the two loads of a read."""

    def overwrite_then_insert(other: ArcticCatalog) -> None:
        table = other.load_table(MAIN)
        base_rows.commit_overwrite(
            table, [write(table, [(5, None, "o")], store=layout.Store.BASE)], "overwrite"
        )
        commit.commit_change(other.load_table(MAIN), [write(table, [(6, None, "p")])], "insert")

    before = _heads(catalog.load_table(MAIN))
    armed = before_change_load(catalog, overwrite_then_insert)
    loaded = catalog.load_table(MAIN)
    assert not armed[0]
    after = _heads(catalog.load_table(MAIN))
    assert before[0] != after[0] and _heads(loaded) == after
