"""The action API's results and recording (pyiceberg on SQLite, no Spark).

Every CALL procedure's output columns are its action's result fields, and the Python API returns the
same types; an action records its run once and a refused call records nothing.
"""

from __future__ import annotations

import dataclasses
import datetime
import inspect

import pytest
from iceberg_tables import catalog_at, create

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.optimizer import process
from arctic_sql.procedures import registry
from arctic_sql.table.maintenance import actions, hive_sync
from arctic_sql.table.model.results import output_row, output_schema
from arctic_sql.table.records import maintenance_runs
from arctic_sql.table.writing import commit
from arctic_sql.table_handle import Maintenance, TableHandle

# Each procedure and the action it calls; the Python API's method of the same action.
ACTIONS = {
    "expire_snapshots": (actions.expire_snapshots, Maintenance.expire_snapshots),
    "purge": (actions.purge, Maintenance.purge),
    "expire_change_data": (actions.expire_change_data, Maintenance.expire_change_data),
    "remove_orphan_files": (actions.remove_orphan_files, Maintenance.remove_orphan_files),
    "rollback_to_version": (actions.rollback, TableHandle.rollback),
    "rollback_to_timestamp": (actions.rollback, TableHandle.rollback),
    "optimize": (process.optimize, TableHandle.optimize),
    "fast_forward": (actions.fast_forward, TableHandle.fast_forward),
    "hive_sync": (hive_sync.sync, TableHandle.hive_sync),
}


def _result_name(function) -> str:  # noqa: ANN001
    """The result type a function is annotated to return, without a ``list[...]`` around it."""
    annotation = str(inspect.signature(function).return_annotation)
    return annotation.removeprefix("list[").removesuffix("]").rsplit(".", 1)[-1]


def test_every_procedure_is_an_action_whose_result_fields_are_its_output_columns():
    procedures = registry()
    assert set(procedures) == set(ACTIONS)
    for name, proc in procedures.items():
        columns = [column.split()[0] for column in proc.output.split(", ")]
        assert columns == [f.name for f in dataclasses.fields(proc.result)], name
        action, api = ACTIONS[name]
        assert _result_name(action) == _result_name(api) == proc.result.__name__, name


def test_python_api_arguments_are_keyword_only():
    for action, api in ACTIONS.values():
        for function in (action, api):
            parameters = list(inspect.signature(function).parameters.values())
            optional = [p for p in parameters if p.default is not inspect.Parameter.empty]
            if function is not process.optimize:  # the optimizer's own entry point keeps its positions
                assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in optional), function.__qualname__


def test_output_schema_types_and_rows():
    assert output_schema(process.PartitionResult) == (
        "partition string, mode string, input_files_count long, input_bytes long, output_files_count long, "
        "output_bytes long, duration_ms long, committed boolean"
    )
    assert output_row(actions.OrphanFile("file:/x")) == ("file:/x",)

    @dataclasses.dataclass
    class Odd:
        ratio: float

    with pytest.raises(TypeError, match="Odd.ratio"):
        output_schema(Odd)


def test_moments_are_aware_datetimes_or_durations_back_from_now():
    aware = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    assert actions.epoch_ms(aware, "older_than") == int(aware.timestamp() * 1000)
    exact = actions.EPOCH + datetime.timedelta(milliseconds=1_700_000_000_123)  # the same instant in any zone
    assert (
        actions.epoch_ms(exact.astimezone(datetime.timezone(datetime.timedelta(hours=2))), "t")
        == 1_700_000_000_123
    )
    before = actions.expiration.now_ms()
    day_ago = actions.epoch_ms(datetime.timedelta(days=1), "older_than")
    assert before - 86_400_000 <= day_ago <= actions.expiration.now_ms() - 86_400_000
    with pytest.raises(InvalidArgumentError, match="older_than must be a timezone-aware datetime"):
        actions.epoch_ms(datetime.datetime(2026, 1, 2), "older_than")
    with pytest.raises(InvalidArgumentError, match="duration of zero or more"):
        actions.epoch_ms(datetime.timedelta(hours=-1), "older_than")
    with pytest.raises(InvalidArgumentError, match="datetime or a timedelta"):
        actions.epoch_ms(1_700_000_000_000, "older_than")  # milliseconds are what this API replaced


@pytest.fixture
def table(tmp_path):
    created = create(catalog_at(tmp_path))
    for _ in range(3):
        commit.commit_change(created, [], "insert")
    return created


def test_an_expiration_records_one_run_with_its_result_fields(table):
    result = actions.expire_snapshots(table, older_than=datetime.datetime.now(datetime.UTC), retain_last=1)
    assert result.expired_snapshots_count == 2 and result.oldest_version == 3
    runs = maintenance_runs.runs(table)
    assert [(r.kind, r.trigger, r.status) for r in runs] == [("expire-snapshots", "manual", "SUCCESS")]
    assert runs[0].result == dataclasses.asdict(result)


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"retain_last": -1}, "retain_last must be 1 or more"),
        ({"retain_last": 1.5}, "retain_last must be a whole number"),
        ({"older_than": datetime.datetime(2100, 1, 1)}, "timezone-aware"),
    ],
)
def test_a_refused_expiration_changes_and_records_nothing(table, arguments, message):
    snapshots = len(table.change.snapshots())
    with pytest.raises(InvalidArgumentError, match=message):
        actions.expire_snapshots(table, **arguments)
    table.change.refresh()
    assert len(table.change.snapshots()) == snapshots and maintenance_runs.runs(table) == []


def test_an_orphan_dry_run_is_not_a_run_and_a_real_one_is(table):
    assert actions.remove_orphan_files(table, dry_run=True) == []
    assert maintenance_runs.runs(table) == []
    assert (
        actions.remove_orphan_files(table, older_than=datetime.timedelta(days=3), trigger="optimizer") == []
    )
    assert [(r.kind, r.trigger) for r in maintenance_runs.runs(table)] == [
        ("remove-orphan-files", "optimizer")
    ]
