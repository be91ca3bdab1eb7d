"""A failed optimize shows (status ``failed``, its one-line reason, a health penalty) until a later
one commits; the warehouse's data size over time comes from snapshot summaries. On a real pyiceberg
SQLite catalog, without Spark."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "table"))  # the table layer's test helpers
from iceberg_tables import catalog_at, create, write

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.service import views
from arctic_sql.service.facts import FactsCache, current_health, last_failure, optimizing_status
from arctic_sql.service.health import FAILED_OPTIMIZE_PENALTY
from arctic_sql.table.format import layout
from arctic_sql.table.model.identifiers import TableIdentifier
from arctic_sql.table.records import optimizing_processes as state
from arctic_sql.table.writing import commit


@pytest.fixture
def catalog(tmp_path):
    catalog = catalog_at(tmp_path)
    create(catalog, "a")
    create(catalog, "b")
    return catalog


def _insert(catalog, name: str, rows) -> None:
    table = catalog.load_table(TableIdentifier("db", name))
    commit.commit_change(table, [write(table, rows, op=layout.UPSERT)], "insert")


def _process(catalog, name: str, *path: str, failure: str | None = None, detail: str | None = None):
    """A process record walked through ``path`` (the state machine checks every move)."""
    table = catalog.load_table(TableIdentifier("db", name))
    record = state.new_record(table, "full", "manual", None, None)
    state.save(table, record)
    for status in path:
        last = status == path[-1]
        state.transition(
            table, record, status, failure=failure if last else None, detail=detail if last else None
        )
    return record


def _row(cache, name: str) -> dict:
    return next(t for t in views.list_tables(cache)["tables"] if t["name"] == name)


def test_a_failed_optimize_shows_until_a_later_one_succeeds(catalog):
    _insert(catalog, "a", [(1, None, "x")])
    cache = FactsCache(catalog)
    healthy = _row(cache, "db.a")
    assert healthy["optimizing_status"] == "idle" and healthy["last_failure"] is None
    failed = _process(
        catalog,
        "a",
        state.EXECUTING,
        state.FAILED,
        failure="Optimizing db.a failed: OSError: disk full",
        detail="ExecutionError: Optimizing db.a failed\n\nCaused by: OSError: disk full\n  at ...",
    )
    row = _row(cache, "db.a")
    assert row["optimizing_status"] == "failed"
    assert row["last_failure"]["process_id"] == failed.process_id
    assert row["last_failure"]["reason"] == "Optimizing db.a failed: OSError: disk full"
    assert row["health_score"] == healthy["health_score"] - FAILED_OPTIMIZE_PENALTY
    assert [t["name"] for t in views.list_tables(cache, status="failed")["tables"]] == ["db.a"]
    assert [t["name"] for t in views.list_tables(cache, max_health=row["health_score"])["tables"]] == ["db.a"]
    table, facts = cache.get(TableIdentifier("db", "a"))
    details = views.table_details(cache, table, facts)
    assert details["health"]["penalties"][0]["name"] == "optimize_failed"
    assert "disk full" in details["health"]["penalties"][0]["explanation"]
    assert details["health"]["score"] == row["health_score"]
    process = views.process_detail(table, failed.process_id)
    assert process["failure_reason"] == row["last_failure"]["reason"]
    assert "Caused by: OSError: disk full" in process["failure_detail"]  # the full message, for its page
    # Neither a dropped nor a cancelled process clears the failure; a committed one does.
    _process(catalog, "a", state.EXECUTING, state.COMMITTING, state.DROPPED, failure="(table): inputs moved")
    _process(catalog, "a", state.CANCELLED, failure="cancelled on request before committing")
    assert _row(cache, "db.a")["optimizing_status"] == "failed"
    _process(catalog, "a", state.EXECUTING, state.COMMITTING, state.SUCCESS)
    after = _row(cache, "db.a")
    assert (after["optimizing_status"], after["last_failure"], after["health_score"]) == (
        "idle",
        None,
        healthy["health_score"],
    )
    assert _row(cache, "db.b")["optimizing_status"] == "idle"


def test_a_process_that_died_counts_as_failed(catalog):
    record = _process(catalog, "b", state.EXECUTING)
    record.heartbeat_ms -= state.HEARTBEAT_TIMEOUT_MS + 1
    assert last_failure([record]) is record
    cache = FactsCache(catalog)
    facts = next(f for f in cache.all() if f.name == "db.b")
    assert optimizing_status(facts, [record]) == "failed"
    assert "stopped heart-beating" in current_health(facts, [record]).penalties[0].explanation


def test_the_data_size_over_time_sums_every_table_from_snapshot_summaries(catalog):
    cache = FactsCache(catalog)
    assert views.data_size(cache)["points"] == []
    _insert(catalog, "a", [(1, None, "x")])
    _insert(catalog, "b", [(2, None, "y"), (3, None, "z")])
    _insert(catalog, "a", [(4, None, "w")])
    answer = views.data_size(cache)
    points = answer["points"]
    assert answer["commits"] == len(points) == 3 and answer["tables"] == 2
    assert [p["tables"] for p in points] == [1, 2, 2]
    assert [p["files"] for p in points] == [1, 2, 3]
    sizes = {f.name: f.bytes for f in cache.all()}
    assert points[-1]["bytes"] == sum(sizes.values())  # the summaries agree with the live files
    assert points[0]["bytes"] < points[1]["bytes"] < points[2]["bytes"]
    assert [p["at_ms"] for p in points] == sorted(p["at_ms"] for p in points)
    sampled = views.data_size(cache, points=2)["points"]
    assert [p["bytes"] for p in sampled] == [points[0]["bytes"], points[-1]["bytes"]]
    with pytest.raises(InvalidArgumentError, match="points must be between 2 and 1000"):
        views.data_size(cache, points=1)
