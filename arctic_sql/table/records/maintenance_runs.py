"""Maintenance runs kept as processes, as optimizing runs are (Amoro #3777: operators want to see
expiration and orphan cleaning the way they see optimizing).

A run is one JSON file at ``{table}/maintenance/{run id}.json``, beside the optimizing records and
outside both stores' ``data/`` and ``metadata/`` folders, so orphan cleaning never considers it.
Only the newest :data:`KEEP_RUNS` runs are kept: the log must not grow without bound on a table the
optimizer expires every hour.

The maintenance actions (table/maintenance/actions.py) record themselves through it, once per run:

>>> recorded(table, Kind.EXPIRE_SNAPSHOTS, "manual", lambda: expiration.expire_snapshots(table))  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import TYPE_CHECKING, TypeVar

import pyarrow.fs as pafs

from arctic_sql.errors import InvalidArgumentError, failure_summary
from arctic_sql.table.files import storage
from arctic_sql.table.format import layout
from arctic_sql.table.records.optimizing_processes import now_ms

if TYPE_CHECKING:
    from arctic_sql.table.model.table import ArcticTable

T = TypeVar("T")
KEEP_RUNS = 100


class Kind(StrEnum):
    EXPIRE_SNAPSHOTS = "expire-snapshots"
    REMOVE_ORPHAN_FILES = "remove-orphan-files"


class RunStatus(StrEnum):
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"


@dataclass
class MaintenanceRun:
    """One expiration or orphan-cleaning run of one table."""

    run_id: str
    table: str
    kind: str
    trigger: str  # manual (CALL), service-api (the service's API) or optimizer (its schedule)
    status: str
    started_at_ms: int
    ended_at_ms: int
    result: dict[str, object] = field(default_factory=dict)
    failure_reason: str | None = None

    @property
    def duration_ms(self) -> int:
        return self.ended_at_ms - self.started_at_ms


def folder(table: ArcticTable) -> str:
    return f"{layout.table_root(table.base.location())}/maintenance"


SAMPLE_PATHS = 20


def _result_dict(result: object) -> dict[str, object]:
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        return asdict(result)
    if isinstance(result, list):  # the files an orphan cleaning removed: how many, and the first few
        return {"removed_files": len(result), "removed_paths": [str(p) for p in result[:SAMPLE_PATHS]]}
    return {"result": str(result)}


def recorded(table: ArcticTable, kind: str, trigger: str, run: Callable[[], T]) -> T:
    """Run a maintenance job and record it, failed or not; the job's own error is re-raised.

    The record keeps what the job removed: a result dataclass's fields, or for a list of removed
    files their number and the first :data:`SAMPLE_PATHS`. A request refused as invalid
    (:class:`InvalidArgumentError`: nothing ran) is not recorded.
    """
    started = now_ms()
    record = MaintenanceRun(
        f"{started:013d}-{uuid.uuid4().hex[:8]}",
        str(table.identifier),
        str(kind),
        trigger,
        RunStatus.SUCCESS,
        started,
        started,
    )
    try:
        result = run()
    except InvalidArgumentError:
        raise
    except Exception as e:
        record.status, record.failure_reason = RunStatus.FAILED, failure_summary(e)
        record.ended_at_ms = now_ms()
        save(table, record)
        raise
    record.result = _result_dict(result)
    record.ended_at_ms = now_ms()
    save(table, record)
    return result


def save(table: ArcticTable, record: MaintenanceRun) -> None:
    storage.replace_file(
        f"{folder(table)}/{record.run_id}.json", json.dumps(asdict(record), sort_keys=True).encode()
    )
    _trim(table)


def _infos(table: ArcticTable) -> tuple[pafs.FileSystem, list[pafs.FileInfo]]:
    fs, path = storage.filesystem(folder(table))
    infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    runs = [i for i in infos if i.type == pafs.FileType.File and i.base_name.endswith(".json")]
    return fs, sorted(runs, key=lambda i: i.base_name)


def record_paths(table: ArcticTable) -> list[str]:
    """Where the run records are (what DROP TABLE ... PURGE deletes)."""
    location = folder(table)
    _, path = storage.filesystem(location)
    scheme = storage.prefix(location, path)
    return [scheme + info.path for info in _infos(table)[1]]


def _trim(table: ArcticTable) -> None:
    fs, infos = _infos(table)
    for info in infos[:-KEEP_RUNS]:
        try:
            fs.delete_file(info.path)
        except OSError:
            pass  # another trim got there first


def runs(table: ArcticTable) -> list[MaintenanceRun]:
    """The recorded maintenance runs of ``table``, oldest first."""
    fs, infos = _infos(table)
    known = {f.name for f in fields(MaintenanceRun)}
    found = []
    for info in infos:
        try:
            with fs.open_input_stream(info.path) as stream:
                raw = json.loads(stream.read())
            found.append(MaintenanceRun(**{k: v for k, v in raw.items() if k in known}))
        except (OSError, ValueError, TypeError):
            continue  # trimmed while we listed, or not a run record
    return found
