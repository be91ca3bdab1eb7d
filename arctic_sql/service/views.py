"""The JSON answers of the REST API, built from :mod:`arctic_sql.service.facts` and the table layer's
metadata rows. Shared by the API and the dashboard's pages, so both always say the same thing."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Sequence
from typing import Any

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.optimizer.service import occupation, quota_threads
from arctic_sql.service.facts import (
    STATUSES,
    FactsCache,
    TableFacts,
    current_health,
    last_failure,
    last_optimized_ms,
    optimizing_status,
)
from arctic_sql.table.model import properties as props
from arctic_sql.table.model.table import ArcticTable
from arctic_sql.table.reading import metadata_rows
from arctic_sql.table.reading.scan import plan_read
from arctic_sql.table.records import maintenance_runs
from arctic_sql.table.records import optimizing_processes as state

MAX_PAGE_SIZE = 1000
SORT_KEYS = (
    "name",
    "health_score",
    "records",
    "bytes",
    "files",
    "avg_file_size",
    "last_commit_at",
    "change_files",
    "optimizing_status",
)
CHART_VERSIONS = 60  # the newest versions a table's charts show


def iso(ms: int | None) -> str | None:
    """Epoch milliseconds as an ISO-8601 UTC time (what every ``*_at`` field of the API is)."""
    if ms is None:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).isoformat(timespec="milliseconds")


def _with_times(row: dict[str, Any]) -> dict[str, Any]:
    """A metadata row with its ``*_at_ms`` fields as ISO times (``*_at``), for people and JSON tools."""
    return {
        (k[:-3] if k.endswith("_at_ms") else k): (iso(v) if k.endswith("_at_ms") else v)
        for k, v in row.items()
    }


# tables -------------------------------------------------------------------------------------------
def _failure(records: list[state.ProcessRecord]) -> dict[str, Any] | None:
    failed = last_failure(records)
    if failed is None:
        return None
    return {
        "process_id": failed.process_id,
        "status": str(failed.effective_status),
        "failed_at": iso(failed.ended_at_ms or failed.heartbeat_ms),
        "reason": failed.failure_reason,
    }


def table_summary(facts: TableFacts, records: list[state.ProcessRecord]) -> dict[str, Any]:
    """One row of ``GET /tables``; ``last_failure`` is set while the last optimize failed."""
    return {
        "name": facts.name,
        "kind": facts.kind,
        "health_score": current_health(facts, records).score,
        "records": facts.records,
        "base_files": facts.base_files,
        "change_files": facts.change_files,
        "unmerged_change_files": facts.unmerged_change_files,
        "avg_file_size": facts.avg_file_size,
        "bytes": facts.bytes,
        "last_commit_at": iso(facts.last_commit_at_ms),
        "optimizing_status": optimizing_status(facts, records),
        "last_failure": _failure(records),
        "group": facts.group,
        "latest_version": facts.latest_version,
        # The Hive view (hive.compatible): the version it shows and how many versions it is behind.
        "hive_view_version": facts.hive_version,
        "hive_view_lag": None if facts.hive_version is None else facts.latest_version - facts.hive_version,
    }


def page_of(items: Sequence[Any], page: int, page_size: int) -> dict[str, Any]:
    if page < 1:
        raise InvalidArgumentError(f"page must be 1 or more, got {page}")
    if not 1 <= page_size <= MAX_PAGE_SIZE:
        raise InvalidArgumentError(f"page_size must be between 1 and {MAX_PAGE_SIZE}, got {page_size}")
    start = (page - 1) * page_size
    return {
        "total": len(items),
        "page": page,
        "page_size": page_size,
        "items": list(items[start : start + page_size]),
    }


def _sort_value(row: dict[str, Any], key: str) -> Any:
    if key == "files":
        return row["base_files"] + row["change_files"]
    if key == "optimizing_status":
        return STATUSES.index(row[key]) if row[key] in STATUSES else len(STATUSES)
    value = row[key]
    return (value is not None, value)


def list_tables(
    cache: FactsCache,
    *,
    q: str | None = None,
    database: str | None = None,
    kind: str | None = None,
    status: str | None = None,
    max_health: int | None = None,
    sort: str = "name",
    order: str = "asc",
    page: int = 1,
    page_size: int = 50,
) -> dict[str, Any]:
    """``GET /tables``: filtered, sorted and paged on the server (Amoro #3157)."""
    if sort not in SORT_KEYS:
        raise InvalidArgumentError(f"Unknown sort key '{sort}'; use one of {', '.join(SORT_KEYS)}")
    if order not in ("asc", "desc"):
        raise InvalidArgumentError(f"order must be asc or desc, got '{order}'")
    if status is not None and status not in STATUSES:
        raise InvalidArgumentError(f"Unknown optimizing status '{status}'; use one of {', '.join(STATUSES)}")
    rows = []
    for facts in cache.all():
        db = facts.name.split(".", 1)[0]
        if (
            (q and q.lower() not in facts.name)
            or (database and db != database.lower())
            or (kind and facts.kind != kind)
        ):
            continue
        row = table_summary(facts, cache.processes(facts))
        if (status is None or row["optimizing_status"] == status) and (
            max_health is None or row["health_score"] <= max_health
        ):
            rows.append(row)
    rows.sort(key=lambda r: (_sort_value(r, sort), r["name"]), reverse=order == "desc")
    result = page_of(rows, page, page_size)
    result["tables"] = result.pop("items")
    return result


def _schema(table: ArcticTable) -> list[dict[str, Any]]:
    keys = set(table.schema.identifier_field_ids)
    return [
        {
            "id": f.field_id,
            "name": f.name,
            "type": str(f.field_type),
            "required": f.required,
            "primary_key": f.field_id in keys,
            "doc": f.doc,
        }
        for f in table.schema.fields
    ]


def _partitioning(table: ArcticTable) -> list[dict[str, Any]]:
    return [
        {"name": f.name, "source": table.schema.find_column_name(f.source_id), "transform": str(f.transform)}
        for f in table.spec.fields
    ]


def _text(value: object) -> str:
    """A default as a user writes it in TBLPROPERTIES (``true``, not Python's ``True``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _properties(table: ArcticTable) -> list[dict[str, Any]]:
    """Every registered property with its value and default (set or not), then the user's own keys."""
    stored = table.user_properties()
    rows = [
        {
            "key": p.key,
            "value": stored.get(p.key, _text(p.default)),
            "default": _text(p.default),
            "set": p.key in stored,
            "doc": p.doc,
        }
        for p in sorted(props.PROPERTIES, key=lambda p: p.key)
    ]
    registered = {p.key for p in props.PROPERTIES}
    rows += [
        {"key": k, "value": v, "default": None, "set": True, "doc": None}
        for k, v in sorted(stored.items())
        if k not in registered
    ]
    return rows


def _file_counts(table: ArcticTable) -> list[dict[str, Any]]:
    counts: dict[str, dict[str, int]] = {}
    for row in metadata_rows.files(table):
        kind = "merged" if row["merged"] else row["kind"]
        c = counts.setdefault(f"{row['store']}.{kind}", {"files": 0, "bytes": 0, "rows": 0})
        c["files"] += 1
        c["bytes"] += row["size_bytes"]
        c["rows"] += row["rows"]
    return [{"store": k.split(".")[0], "kind": k.split(".")[1], **v} for k, v in sorted(counts.items())]


def table_details(cache: FactsCache, table: ArcticTable, facts: TableFacts) -> dict[str, Any]:
    """``GET /tables/{db}/{table}``: what a table is and how it is doing, health explained."""
    records = cache.processes(facts)
    partitions = metadata_rows.partitions(table)
    return {
        **table_summary(facts, records),
        "location": facts.root,
        "primary_key": table.primary_key,
        "schema": _schema(table),
        "partitioning": _partitioning(table),
        "properties": _properties(table),
        "files": _file_counts(table),
        "watermarks": [{"partition": p["partition"], "watermark": p["watermark"]} for p in partitions],
        "health": current_health(facts, records).as_dict(),
        "optimizing": {
            "status": optimizing_status(facts, records),
            "pending_modes": list(facts.pending_modes),
            "reasons": list(facts.pending_reasons),
            "evaluated_at": iso(facts.evaluated_ms),
            "last_optimized_at": iso(last_optimized_ms(records)),
            "failures": sum(r.effective_status in (state.FAILED, state.ABANDONED) for r in records),
        },
        "snapshots": {"base": facts.base_snapshot_id, "change": facts.change_snapshot_id},
        "base_bytes": facts.base_bytes,
        "change_bytes": facts.change_bytes,
        "oldest_unmerged_change_at": iso(facts.oldest_unmerged_change_ms),
    }


def _maintenance_rows(table: ArcticTable) -> list[dict[str, Any]]:
    return [
        {
            "run_id": r.run_id,
            "kind": r.kind,
            "status": r.status,
            "trigger": r.trigger,
            "started_at_ms": r.started_at_ms,
            "ended_at_ms": r.ended_at_ms,
            "duration_ms": r.duration_ms,
            "result": r.result,
            "failure_reason": r.failure_reason,
        }
        for r in maintenance_runs.runs(table)
    ]


def version_series(table: ArcticTable) -> list[dict[str, Any]]:
    """Per version (the newest :data:`CHART_VERSIONS`): the bytes and files a read of it uses."""
    rows = []
    for commit in metadata_rows.history(table)[-CHART_VERSIONS:]:
        plan = plan_read(table, commit["version"])
        files = list(plan.base_files) + list(plan.change_files)
        rows.append(
            {
                "version": commit["version"],
                "committed_at": iso(commit["committed_at_ms"]),
                "bytes": sum(f.file_size for f in files),
                "files": len(files),
                "base_files": len(plan.base_files),
                "change_files": len(plan.change_files),
            }
        )
    return rows


# Sub-collections: (rows, newest first?). Times become ISO strings.
COLLECTIONS: dict[str, tuple[Callable[[ArcticTable], list[dict[str, Any]]], bool]] = {
    "history": (metadata_rows.history, True),
    "snapshots": (metadata_rows.snapshots, True),
    "files": (metadata_rows.files, False),
    "partitions": (metadata_rows.partitions, False),
    "optimizing": (metadata_rows.optimizing, True),
    "maintenance": (_maintenance_rows, True),
    "consumers": (metadata_rows.consumers, False),
    "versions": (version_series, False),
}


def process_detail(table: ArcticTable, process_id: str) -> dict[str, Any]:
    """``GET .../optimizing/{id}``: one process as the list shows it, plus the failure's full message."""
    record = next((r for r in state.processes(table) if r.process_id == process_id), None)
    if record is None:
        raise LookupError(f"No optimizing process {process_id} of {table.identifier}")
    row = next(r for r in metadata_rows.optimizing(table) if r["process_id"] == process_id)
    return {
        **_with_times(row),
        "base_snapshot_id": record.base_snapshot_id,
        "change_snapshot_id": record.change_snapshot_id,
        "output_prefix": record.output_prefix,
        "failure_detail": record.failure_detail,
    }


def collection(table: ArcticTable, name: str, page: int, page_size: int) -> dict[str, Any]:
    rows_of, newest_first = COLLECTIONS[name]
    rows = [_with_times(r) for r in rows_of(table)]
    if newest_first:
        rows.reverse()
    return page_of(rows, page, page_size)


# groups and overview -----------------------------------------------------------------------------
def groups(cache: FactsCache, served: dict[str, dict[str, Any]], default_cores: int) -> list[dict[str, Any]]:
    """``GET /groups``: each optimizer group's tables, cores, quotas and quota occupation (last hour).

    ``served``: the groups an optimizer runs for in this process, with its cores and policy.
    """
    now = state.now_ms()
    found: dict[str, dict[str, Any]] = {}
    for facts in cache.all():
        info = served.get(facts.group, {})
        cores = info.get("cores") or default_cores
        g = found.setdefault(
            facts.group,
            {
                "name": facts.group,
                "cores": cores,
                "optimizer": info or None,
                "tables": [],
                "task_time_ms_last_hour": 0,
                "occupation": 0.0,
            },
        )
        records = cache.processes(facts)
        threads = quota_threads(facts.quota, cores)
        used = occupation(records, threads, now)
        g["tables"].append(
            {
                "name": facts.name,
                "quota": facts.quota,
                "quota_threads": threads,
                "quota_occupation": round(used, 4),
                "optimizing_status": optimizing_status(facts, records),
            }
        )
        g["task_time_ms_last_hour"] += int(used * threads * 3_600_000)
    for g in found.values():
        g["occupation"] = round(g["task_time_ms_last_hour"] / 3_600_000 / max(1, g["cores"]), 4)
    for name, info in served.items():
        found.setdefault(
            name,
            {
                "name": name,
                "cores": info.get("cores"),
                "optimizer": info,
                "tables": [],
                "task_time_ms_last_hour": 0,
                "occupation": 0.0,
            },
        )
    return sorted(found.values(), key=lambda g: g["name"])


def overview(cache: FactsCache, top: int = 5) -> dict[str, Any]:
    """``GET /overview``: totals, the top tables by size, file count and worst health, and optimizing activity."""
    all_facts = cache.all()
    rows = [table_summary(f, cache.processes(f)) for f in all_facts]
    now = state.now_ms()
    day = now - 86_400_000
    activity: dict[str, int] = {}
    hourly = [0] * 24
    for f in all_facts:
        for r in cache.processes(f):
            if r.started_at_ms >= day:
                activity[str(r.effective_status)] = activity.get(str(r.effective_status), 0) + 1
                hourly[min(23, (r.started_at_ms - day) // 3_600_000)] += 1
    by_status: dict[str, int] = {}
    for row in rows:
        by_status[row["optimizing_status"]] = by_status.get(row["optimizing_status"], 0) + 1
    scores = [r["health_score"] for r in rows]
    return {
        "totals": {
            "tables": len(rows),
            "primary_key_tables": sum(f.kind == "primary-key" for f in all_facts),
            "bytes": sum(r["bytes"] for r in rows),
            "files": sum(r["base_files"] + r["change_files"] for r in rows),
            "records": sum(r["records"] for r in rows),
            "unmerged_change_files": sum(r["unmerged_change_files"] for r in rows),
            "average_health": round(sum(scores) / len(scores), 1) if scores else None,
            "unhealthy_tables": sum(s < 60 for s in scores),
        },
        "optimizing_status": by_status,
        "optimizing_last_24h": {"by_status": activity, "per_hour": hourly},
        "top_by_size": _top(rows, "bytes", top),
        "top_by_files": _top(rows, "files", top),
        "worst_health": sorted(rows, key=lambda r: (r["health_score"], r["name"]))[:top],
        "generated_at": iso(int(time.time() * 1000)),
    }


DATA_SIZE_POINTS = 100


def data_size(cache: FactsCache, points: int = DATA_SIZE_POINTS) -> dict[str, Any]:
    """``GET /overview/data-size`` (Amoro's ``/overview/dataSize``): the warehouse's total bytes and files
    over time, summed over every table's stores from their snapshot summaries (no file is read).

    After each commit of any table the total is the sum of every store's latest totals; more commits
    than ``points`` are sampled at evenly spaced times (the state at each time). A table counts from
    its oldest retained snapshot: expired history and dropped tables are not shown.
    """
    if not 2 <= points <= 1000:
        raise InvalidArgumentError(f"points must be between 2 and 1000, got {points}")
    all_facts = cache.all()
    events = sorted(
        (ts, f.name, store, size, files) for f in all_facts for ts, store, size, files in f.size_points
    )
    latest: dict[tuple[str, int], tuple[int, int]] = {}
    total_bytes = total_files = 0
    series: list[tuple[int, int, int, int]] = []  # (at, bytes, files, tables)
    for ts, name, store, size, files in events:
        old_size, old_files = latest.get((name, store), (0, 0))
        total_bytes, total_files = total_bytes + size - old_size, total_files + files - old_files
        latest[(name, store)] = (size, files)
        point = (ts, total_bytes, total_files, len({n for n, _ in latest}))
        if series and series[-1][0] == ts:
            series[-1] = point
        else:
            series.append(point)
    sampled = series
    if len(series) > points:
        first, last = series[0][0], series[-1][0]
        times = [first + (last - first) * i // (points - 1) for i in range(points)]
        sampled, j = [], 0
        for t in times:
            while j + 1 < len(series) and series[j + 1][0] <= t:
                j += 1
            sampled.append((t, *series[j][1:]))
    return {
        "points": [{"at": iso(t), "at_ms": t, "bytes": b, "files": n, "tables": k} for t, b, n, k in sampled],
        "commits": len(series),
        "tables": len(all_facts),
        "generated_at": iso(int(time.time() * 1000)),
    }


def _top(rows: list[dict[str, Any]], key: str, n: int) -> list[dict[str, Any]]:
    def value(r: dict[str, Any]) -> int:
        return r["base_files"] + r["change_files"] if key == "files" else r[key]

    return sorted(rows, key=lambda r: (-value(r), r["name"]))[:n]
