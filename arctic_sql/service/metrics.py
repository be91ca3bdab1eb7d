"""``GET /metrics``: the tables and optimizer groups in Prometheus' text format.

Gauges are computed at scrape time from the cached facts (facts.py), so a scrape costs what a table
listing costs. Names follow Prometheus' conventions: an ``arctic_`` prefix, base units in the name
(``_bytes``, ``_seconds``), ``_total`` on counters, and the table and store as labels.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from arctic_sql.service import views
from arctic_sql.service.facts import STATUSES, current_health, last_optimized_ms, optimizing_status
from arctic_sql.table.records import optimizing_processes as state

if TYPE_CHECKING:
    from arctic_sql.service.api import ServiceContext


class TableCollector(Collector):
    """Per-table and per-group metrics, read from the service's facts cache at each scrape."""

    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx

    def collect(self) -> Iterator[Metric]:
        cache, now = self.ctx.cache, state.now_ms()
        t = ["table"]
        files = GaugeMetricFamily(
            "arctic_table_files", "Live data files per store", labels=["table", "store"]
        )
        size = GaugeMetricFamily(
            "arctic_table_size_bytes", "Bytes of live data files per store", labels=["table", "store"]
        )
        records = GaugeMetricFamily(
            "arctic_table_records", "Rows in live base files plus unmerged change rows", labels=t
        )
        health = GaugeMetricFamily(
            "arctic_table_health_score", "Health score, 0-100 (see docs/integrations.md)", labels=t
        )
        component = GaugeMetricFamily(
            "arctic_table_health_points",
            "Points left of each health score component (a penalty: negative points)",
            labels=["table", "component"],
        )
        unmerged = GaugeMetricFamily(
            "arctic_table_unmerged_change_files", "Change files not yet merged", labels=t
        )
        oldest = GaugeMetricFamily(
            "arctic_table_oldest_unmerged_change_age_seconds",
            "Age of the oldest unmerged change commit (0 when none)",
            labels=t,
        )
        since = GaugeMetricFamily(
            "arctic_table_last_optimize_age_seconds",
            "Seconds since the last successful optimize (NaN when never)",
            labels=t,
        )
        failures = CounterMetricFamily(
            "arctic_table_optimizing_failures", "Optimizing processes failed or abandoned", labels=t
        )
        status = GaugeMetricFamily(
            "arctic_table_optimizing_status",
            "1 for the table's current optimizing status",
            labels=["table", "status"],
        )
        for facts in cache.all():
            name, recs = facts.name, cache.processes(facts)
            files.add_metric([name, "base"], facts.base_files)
            files.add_metric([name, "change"], facts.change_files)
            size.add_metric([name, "base"], facts.base_bytes)
            size.add_metric([name, "change"], facts.change_bytes)
            records.add_metric([name], facts.records)
            score = current_health(facts, recs)
            health.add_metric([name], score.score)
            for c in score.components:
                component.add_metric([name, c.name], c.points)
            for p in score.penalties:
                component.add_metric([name, p.name], -p.points)
            unmerged.add_metric([name], facts.unmerged_change_files)
            age = facts.oldest_unmerged_change_ms
            oldest.add_metric([name], max(0.0, (now - age) / 1000) if age is not None else 0.0)
            last = last_optimized_ms(recs)
            since.add_metric([name], (now - last) / 1000 if last is not None else math.nan)
            failures.add_metric(
                [name], sum(r.effective_status in (state.FAILED, state.ABANDONED) for r in recs)
            )
            current = optimizing_status(facts, recs)
            for s in STATUSES:
                status.add_metric([name, s], 1.0 if s == current else 0.0)
        yield from (files, size, records, health, component, unmerged, oldest, since, failures, status)
        yield from self._groups()

    def _groups(self) -> Iterator[Metric]:
        g = ["group"]
        occupation = GaugeMetricFamily(
            "arctic_group_quota_occupation_ratio",
            "Task time over the last hour / (one hour x the group's cores)",
            labels=g,
        )
        tables = GaugeMetricFamily("arctic_group_tables", "Tables in the optimizer group", labels=g)
        cores = GaugeMetricFamily("arctic_group_cores", "Cores of the optimizer group", labels=g)
        for group in views.groups(self.ctx.cache, self.ctx.optimizer_groups, self.ctx.default_cores):
            occupation.add_metric([group["name"]], group["occupation"])
            tables.add_metric([group["name"]], len(group["tables"]))
            cores.add_metric([group["name"]], group["cores"] or 0)
        yield from (occupation, tables, cores)


def add_routes(app: FastAPI, ctx: ServiceContext, reads: Any) -> None:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TableCollector(ctx))

    @app.get("/metrics", dependencies=[reads], tags=["service"], response_class=Response)
    def metrics() -> Response:
        """Prometheus text format: per-table files, bytes, records, health, unmerged changes; per-group occupation."""
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
