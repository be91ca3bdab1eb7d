"""Optimizing process records as maintenance reads them, on a real SQLite catalog without Spark:
a record it cannot read stops maintenance instead of reading as no process."""

from __future__ import annotations

import os

import pytest
from iceberg_tables import catalog_at, create

from arctic_sql.errors import ExecutionError
from arctic_sql.table.maintenance import expiration
from arctic_sql.table.records import optimizing_processes as state


def test_an_unreadable_record_stops_maintenance_and_is_named(tmp_path):
    table = create(catalog_at(tmp_path))
    running = state.new_record(table, "minor", "manual", None, None)
    state.save(table, running)
    assert [r.process_id for r in state.running_processes(table)] == [running.process_id]
    folder = state.table_root(table).removeprefix("file://") + "/optimizing"
    with open(os.path.join(folder, "0000000000000-broken.json"), "w") as f:
        f.write('{"process_id": "0000000000000-bro')  # cut short: which process it kept is unknown
    with pytest.raises(
        ExecutionError,
        match=r"Cannot read the optimizing record .*0000000000000-broken\.json "
        r"\(JSONDecodeError: .*\); nothing was changed",
    ):
        state.running_processes(table)
    with pytest.raises(ExecutionError, match="0000000000000-broken.json"):
        expiration.plan_expiry(table, older_than_ms=expiration.now_ms(), retain_last=1)
    # What only orders or shows processes goes on with the ones it can read.
    assert [r.process_id for r in state.processes(table, strict=False)] == [running.process_id]
