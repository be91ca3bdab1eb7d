"""Quota scheduling arithmetic of the background optimizer (Amoro's QuotaOccupySorter)."""

from __future__ import annotations

import pytest

from arctic_sql.optimizer.service import HOUR_MS, last_optimized_ms, occupation, quota_threads
from arctic_sql.table.records import optimizing_processes as state


@pytest.mark.parametrize(
    ("quota", "cores", "threads"),
    [(0.5, 4, 2), (0.5, 3, 2), (0.1, 2, 1), (1.0, 8, 8), (3.0, 8, 3), (2.5, 8, 2)],
)
def test_quota_threads(quota, cores, threads):
    assert quota_threads(quota, cores) == threads


def _record(
    started: int, ended: int | None, task_ms: int, status: str = state.SUCCESS
) -> state.ProcessRecord:
    return state.ProcessRecord(
        "p",
        "db.t",
        "minor",
        "service",
        status,
        started,
        ended or started,
        "x",
        ended_at_ms=ended,
        task_time_ms=task_ms,
    )


def test_occupation_counts_only_the_last_hour_share_of_task_time():
    now = 10 * HOUR_MS
    inside = _record(now - 600_000, now - 300_000, 600_000)  # 10 min of task time, all in the hour
    straddling = _record(now - HOUR_MS - 1_000_000, now - HOUR_MS + 1_000_000, 400_000)  # half inside
    old = _record(now - 3 * HOUR_MS, now - 2 * HOUR_MS, 3_600_000)
    assert occupation([inside], 1, now) == pytest.approx(600_000 / HOUR_MS)
    assert occupation([inside, straddling, old], 2, now) == pytest.approx((600_000 + 200_000) / HOUR_MS / 2)


def test_balanced_orders_by_the_last_successful_optimize():
    records = [_record(100, 200, 5), _record(300, 400, 5, state.FAILED), _record(500, 650, 5, state.PARTIAL)]
    assert last_optimized_ms(records) == 650
    assert last_optimized_ms([]) == 0
