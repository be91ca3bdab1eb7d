"""The Python API for a table's actions (``s.table("db.t")``) does what the CALL procedures do, with
the same result fields, records a maintenance run once, and refuses bad arguments in one line
having changed nothing."""

from __future__ import annotations

import dataclasses
import datetime

import pytest
from fastapi.testclient import TestClient

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.service.api import ServiceContext, create_app
from arctic_sql.table.model.table import ArcticTable
from arctic_sql.table.records import maintenance_runs
from arctic_sql.table.records import optimizing_processes as state

pytestmark = pytest.mark.spark

FUTURE = datetime.datetime(2100, 1, 1, tzinfo=datetime.UTC)


def _twins(arctic, *names: str) -> None:
    """Tables with the same history: one for the CALL, one for the Python API."""
    for name in names:
        arctic.sql(f"CREATE TABLE {name} (id BIGINT, v STRING, PRIMARY KEY (id))")
        for i in range(4):
            arctic.sql(f"INSERT INTO {name} VALUES ({i}, 'v{i}'), ({i + 10}, 'w{i}')")


def _rows(arctic, sql: str) -> list[tuple]:
    return sorted(tuple(r) for r in arctic.sql(sql).collect())


def _listed_runs(arctic, name: str) -> list[dict]:
    """The table's maintenance runs as the management service lists them."""
    db, table = name.split(".")
    with TestClient(create_app(ServiceContext(arctic.catalog))) as client:
        return client.get(f"/api/v1/tables/{db}/{table}/maintenance").json()["items"]


def test_the_handle_is_still_the_table(arctic):
    _twins(arctic, "db.t")
    t = arctic.table("db.t")
    assert isinstance(t, ArcticTable) and t.is_keyed and t.primary_key == ["id"]
    assert _rows(arctic, "SELECT * FROM db.t.history") == sorted(tuple(r) for r in t.history().collect())
    assert _rows(arctic, "SELECT * FROM db.t.snapshots") == sorted(tuple(r) for r in t.snapshots().collect())


def test_expire_snapshots_equals_the_call_and_is_one_run(arctic):
    _twins(arctic, "db.a", "db.b")
    called = arctic.sql(
        "CALL system.expire_snapshots(table => 'db.a', older_than => TIMESTAMP '2100-01-01 00:00:00',"
        " retain_last => 2)"
    ).collect()
    result = arctic.table("db.b").maintenance.expire_snapshots(older_than=FUTURE, retain_last=2)
    assert [r.asDict() for r in called] == [dataclasses.asdict(result)]
    assert result.expired_snapshots_count > 0 and result.oldest_version == 3
    listed = _listed_runs(arctic, "db.b")
    assert [(r["kind"], r["trigger"], r["status"]) for r in listed] == [
        ("expire-snapshots", "manual", "SUCCESS")
    ]
    assert listed[0]["result"] == dataclasses.asdict(result)


def test_optimize_equals_the_call_and_is_one_process(arctic):
    _twins(arctic, "db.a", "db.b")
    called = arctic.sql("CALL system.optimize(table => 'db.a', mode => 'full')").collect()
    results = arctic.table("db.b").optimize(mode="full")

    def timeless(row: dict) -> dict:
        return {k: v for k, v in row.items() if k != "duration_ms"}

    assert [timeless(r.asDict()) for r in called] == [timeless(dataclasses.asdict(r)) for r in results]
    assert results and all(r.committed for r in results)
    assert [p.effective_status for p in state.processes(arctic.table("db.b"))] == [state.SUCCESS]
    assert _rows(arctic, "SELECT * FROM db.a") == _rows(arctic, "SELECT * FROM db.b")


def test_rollback_equals_the_call(arctic):
    _twins(arctic, "db.a", "db.b")
    called = arctic.sql("CALL system.rollback_to_version('db.a', 2)").collect()
    result = arctic.table("db.b").rollback(to_version=2)
    assert [r.asDict() for r in called] == [dataclasses.asdict(result)]
    assert (result.previous_version, result.restored_version) == (4, 2)
    assert _rows(arctic, "SELECT * FROM db.b") == _rows(arctic, "SELECT * FROM db.b VERSION AS OF 2")


def test_orphan_dry_run_equals_the_call_and_is_no_run(arctic):
    _twins(arctic, "db.a")
    called = arctic.sql("CALL system.remove_orphan_files(table => 'db.a', dry_run => true)").collect()
    found = arctic.table("db.a").maintenance.remove_orphan_files(
        older_than=datetime.timedelta(days=2), dry_run=True
    )
    assert [r.asDict() for r in called] == [dataclasses.asdict(f) for f in found] == []
    assert _listed_runs(arctic, "db.a") == []


@pytest.mark.parametrize(
    "act, message",
    [
        (
            lambda t: t.maintenance.expire_snapshots(older_than=FUTURE, retain_last=-1),
            "retain_last must be 1 or more",
        ),
        (
            lambda t: t.maintenance.expire_snapshots(older_than=datetime.datetime(2100, 1, 1)),
            "older_than must be a timezone-aware datetime",
        ),
        (
            lambda t: t.maintenance.remove_orphan_files(older_than=datetime.timedelta(minutes=-5)),
            "older_than must be a duration of zero or more",
        ),
        (lambda t: t.optimize(mode="huge"), "Unknown optimizing mode 'huge'"),
        (
            lambda t: t.rollback(to_version=2, to_timestamp=FUTURE),
            "exactly one of to_version and to_timestamp",
        ),
    ],
)
def test_bad_arguments_are_refused_in_one_line_and_change_nothing(arctic, act, message):
    _twins(arctic, "db.t")
    t = arctic.table("db.t")
    before = (_rows(arctic, "SELECT * FROM db.t.snapshots"), _rows(arctic, "SELECT * FROM db.t"))
    with pytest.raises(InvalidArgumentError, match=message) as refused:
        act(t)
    assert "\n" not in str(refused.value)
    assert (_rows(arctic, "SELECT * FROM db.t.snapshots"), _rows(arctic, "SELECT * FROM db.t")) == before
    assert maintenance_runs.runs(t) == [] and state.processes(t) == []


def test_positional_arguments_are_refused(arctic):
    _twins(arctic, "db.t")
    with pytest.raises(TypeError):
        arctic.table("db.t").maintenance.expire_snapshots(FUTURE, 2)  # type: ignore[misc]
