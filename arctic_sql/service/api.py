"""The management service's HTTP application: the REST API under ``/api/v1``, ``/health``,
``/metrics`` and the dashboard (dashboard.py), as one FastAPI app.

Security: every POST needs ``Authorization: Bearer <token>`` (the ``--token-file``'s content); with
``protect_reads`` every read needs it too, from the header or the dashboard's ``arctic_token``
cookie (a cookie never authorizes a POST, so another site cannot make a browser optimize). Without
a token file the service refuses every POST. Errors are ``{"error": "<one line>"}`` with a status
code, never a stack trace.

>>> app = create_app(ServiceContext(catalog, token="s3cret"))  # doctest: +SKIP
>>> uvicorn.run(app, host="127.0.0.1", port=8080)  # doctest: +SKIP
"""

from __future__ import annotations

import hmac
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field, StrictInt
from starlette.exceptions import HTTPException as StarletteHTTPException

from arctic_sql.errors import (
    ArcticError,
    CommitConflictError,
    InvalidArgumentError,
    NoSuchDatabaseError,
    NoSuchTableError,
    VersionNotFoundError,
)
from arctic_sql.service import views
from arctic_sql.service.facts import STATUSES, FactsCache
from arctic_sql.service.jobs import ConflictError, Jobs, expire_snapshots
from arctic_sql.table.catalog import ArcticCatalog
from arctic_sql.table.model.identifiers import TableIdentifier
from arctic_sql.table.model.table import ArcticTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
API = "/api/v1"
TOKEN_COOKIE = "arctic_token"


@dataclass
class ServiceContext:
    """What the app serves from and how it is protected."""

    catalog: ArcticCatalog
    token: str | None = None
    protect_reads: bool = False
    spark: Callable[[], SparkSession] | None = None  # started on the first optimize
    optimizer_groups: dict[str, dict[str, Any]] = field(default_factory=dict)  # groups served in this process
    default_cores: int = os.cpu_count() or 1
    spark_started: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.cache = FactsCache(self.catalog)
        self.jobs = Jobs(self._spark, self.cache.forget)

    def _spark(self) -> SparkSession:
        if self.spark is None:
            raise InvalidArgumentError("This service has no Spark to optimize with")
        spark = self.spark()
        self.spark_started.set()
        return spark


class OptimizeRequest(BaseModel):
    mode: str = Field("auto", description="auto (what the triggers say), minor, major or full")


class ExpireRequest(BaseModel):
    older_than_ms: StrictInt | None = Field(None, description="expire versions older than this (epoch ms)")
    retain_last: StrictInt | None = Field(None, ge=1, description="versions always kept")


class HttpError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.headers = status, headers


_STATUS = (
    (NoSuchTableError, 404),
    (NoSuchDatabaseError, 404),
    (LookupError, 404),
    (VersionNotFoundError, 404),
    (InvalidArgumentError, 400),
    (ConflictError, 409),
    (CommitConflictError, 409),
)


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": " ".join(str(message).split())}, status_code=status, headers=headers)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(HttpError)
    async def http_error(request: Request, e: HttpError) -> JSONResponse:
        return _error(e.status, str(e), e.headers)

    @app.exception_handler(StarletteHTTPException)
    async def starlette_error(request: Request, e: StarletteHTTPException) -> JSONResponse:
        return _error(e.status_code, e.detail if isinstance(e.detail, str) else "HTTP error")

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, e: RequestValidationError) -> JSONResponse:
        first = e.errors()[0] if e.errors() else {}
        # loc is like ("body", "older_than_ms"); a body that is not JSON at all is ("body", 0)
        where = ".".join(
            str(p)
            for p in first.get("loc", ())
            if p not in ("query", "body", "path") and not isinstance(p, int)
        )
        if first.get("type") == "json_invalid":
            where = "request body (not JSON)"
        return _error(400, f"Invalid {where or 'request'}: {first.get('msg', 'bad value')}")

    # Expected errors get their own handlers: a handler for Exception runs in Starlette's outermost
    # middleware, which re-raises after answering and so drops the kept-alive connection.
    async def known_error(request: Request, e: Exception) -> JSONResponse:
        status = next((code for kind, code in _STATUS if isinstance(e, kind)), 500)
        return _error(status, str(e).strip("'\""))

    app.add_exception_handler(ArcticError, known_error)
    app.add_exception_handler(LookupError, known_error)

    @app.exception_handler(Exception)
    async def any_error(request: Request, e: Exception) -> JSONResponse:
        log.error("%s %s failed: %s: %s", request.method, request.url.path, type(e).__name__, e)
        return _error(500, f"Internal error: {type(e).__name__}")


# security ------------------------------------------------------------------------------------------
def _presented(request: Request, cookie_ok: bool) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.cookies.get(TOKEN_COOKIE) if cookie_ok else None


def _check(ctx: ServiceContext, request: Request, *, cookie_ok: bool) -> None:
    if ctx.token is None:
        raise HttpError(403, "This service was started without --token-file: changes are disabled")
    presented = _presented(request, cookie_ok)
    if presented is None:
        raise HttpError(
            401, "A bearer token is required (Authorization: Bearer <token>)", {"WWW-Authenticate": "Bearer"}
        )
    if not hmac.compare_digest(presented.encode(), ctx.token.encode()):
        raise HttpError(401, "Invalid token", {"WWW-Authenticate": "Bearer"})


def read_guard(ctx: ServiceContext) -> Callable[[Request], None]:
    def guard(request: Request) -> None:
        if ctx.protect_reads:
            _check(ctx, request, cookie_ok=True)

    return guard


def write_guard(ctx: ServiceContext) -> Callable[[Request], None]:
    def guard(request: Request) -> None:
        _check(ctx, request, cookie_ok=False)

    return guard


# the app -------------------------------------------------------------------------------------------
def create_app(ctx: ServiceContext) -> FastAPI:
    """The whole service as one ASGI app."""
    from arctic_sql import __version__
    from arctic_sql.service import dashboard, metrics

    app = FastAPI(
        title="arctic-sql management service",
        version=__version__,
        description="Tables, health, optimizing and maintenance of an arctic-sql warehouse. "
        "POST endpoints need `Authorization: Bearer <token>`.",
        docs_url="/docs",
        redoc_url=None,
    )
    _install_error_handlers(app)
    reads, writes = Depends(read_guard(ctx)), Depends(write_guard(ctx))
    _add_table_routes(app, ctx, reads, writes)
    _add_service_routes(app, ctx, reads)
    metrics.add_routes(app, ctx, reads)
    dashboard.add_routes(app, ctx, reads)
    return app


def _table(ctx: ServiceContext, db: str, table: str) -> tuple[ArcticTable, Any]:
    return ctx.cache.get(TableIdentifier(db.lower(), table.lower()))


def _add_table_routes(app: FastAPI, ctx: ServiceContext, reads: Any, writes: Any) -> None:
    page_q = Query(1, ge=1, description="page number, from 1")
    size_q = Query(50, ge=1, le=views.MAX_PAGE_SIZE, description="items per page")

    @app.get(f"{API}/tables", dependencies=[reads], tags=["tables"])
    def list_tables(
        q: str | None = Query(None, description="part of the name (db.table)"),
        database: str | None = None,
        kind: str | None = Query(None, pattern="^(primary-key|append-only)$"),
        status: str | None = Query(None, description=f"optimizing status: {', '.join(STATUSES)}"),
        max_health: int | None = Query(None, ge=0, le=100, description="health score at most"),
        sort: str = Query("name", description=f"one of {', '.join(views.SORT_KEYS)}"),
        order: str = Query("asc", pattern="^(asc|desc)$"),
        page: int = page_q,
        page_size: int = size_q,
    ) -> dict[str, Any]:
        """Every arctic table with its size, files, health and optimizing status; filtered and paged."""
        return views.list_tables(
            ctx.cache,
            q=q,
            database=database,
            kind=kind,
            status=status,
            max_health=max_health,
            sort=sort,
            order=order,
            page=page,
            page_size=page_size,
        )

    @app.get(f"{API}/tables/{{db}}/{{table}}", dependencies=[reads], tags=["tables"])
    def table_details(db: str, table: str) -> dict[str, Any]:
        """Schema, key, partitioning, properties (defaults shown), file counts, watermarks, health breakdown."""
        t, facts = _table(ctx, db, table)
        return views.table_details(ctx.cache, t, facts)

    for name in views.COLLECTIONS:
        _add_collection(app, ctx, reads, name, page_q, size_q)

    @app.post(
        f"{API}/tables/{{db}}/{{table}}/optimize", dependencies=[writes], tags=["actions"], status_code=202
    )
    def optimize(db: str, table: str, body: OptimizeRequest | None = None) -> dict[str, Any]:
        """Start optimizing (mode auto, minor, major or full); it shows in the table's optimizing list."""
        t, _ = _table(ctx, db, table)
        job = ctx.jobs.optimize(t, (body or OptimizeRequest()).mode)
        return {"job_id": job.job_id, "table": job.table, "mode": job.mode, "accepted": True}

    @app.get(
        f"{API}/tables/{{db}}/{{table}}/optimizing/{{process_id}}", dependencies=[reads], tags=["tables"]
    )
    def optimizing_process(db: str, table: str, process_id: str) -> dict[str, Any]:
        """One optimizing process: what the list shows, plus the full message of its failure."""
        t, _ = _table(ctx, db, table)
        return views.process_detail(t, process_id)

    @app.post(
        f"{API}/tables/{{db}}/{{table}}/optimizing/{{process_id}}/cancel",
        dependencies=[writes],
        tags=["actions"],
        status_code=202,
    )
    def cancel(db: str, table: str, process_id: str) -> dict[str, Any]:
        """Cancel a running optimizing process of this service (API or ``--optimizer``): its Spark jobs stop,
        nothing is committed, and it ends CANCELLED (poll the process). 409 once it is committing."""
        t, _ = _table(ctx, db, table)
        return ctx.jobs.cancel(t, process_id)

    @app.post(f"{API}/tables/{{db}}/{{table}}/expire-snapshots", dependencies=[writes], tags=["actions"])
    def expire(db: str, table: str, body: ExpireRequest | None = None) -> dict[str, Any]:
        """Expire old snapshots now (defaults: the table's snapshot.keep.* properties); recorded as a run."""
        t, _ = _table(ctx, db, table)
        request = body or ExpireRequest()
        try:
            return expire_snapshots(t, request.older_than_ms, request.retain_last)
        finally:
            ctx.cache.forget(str(t.identifier))


def _add_collection(
    app: FastAPI, ctx: ServiceContext, reads: Any, name: str, page_q: Any, size_q: Any
) -> None:
    def rows(db: str, table: str, page: int = page_q, page_size: int = size_q) -> dict[str, Any]:
        t, _ = _table(ctx, db, table)
        return views.collection(t, name, page, page_size)

    rows.__doc__ = (
        f"The table's {name}, paged ({'newest first' if views.COLLECTIONS[name][1] else 'in order'})."
    )
    app.get(
        f"{API}/tables/{{db}}/{{table}}/{name}", dependencies=[reads], tags=["tables"], name=f"table_{name}"
    )(rows)


def _add_service_routes(app: FastAPI, ctx: ServiceContext, reads: Any) -> None:
    @app.get(f"{API}/groups", dependencies=[reads], tags=["optimizer"])
    def groups() -> dict[str, Any]:
        """Optimizer groups: their tables, cores, quotas and quota occupation over the last hour."""
        return {"groups": views.groups(ctx.cache, ctx.optimizer_groups, ctx.default_cores)}

    @app.get(f"{API}/overview", dependencies=[reads], tags=["overview"])
    def overview() -> dict[str, Any]:
        """Totals, the top tables by size, file count and worst health, optimizing activity."""
        return views.overview(ctx.cache)

    @app.get(f"{API}/overview/data-size", dependencies=[reads], tags=["overview"])
    def data_size(
        points: int = Query(views.DATA_SIZE_POINTS, ge=2, le=1000, description="at most this many points"),
    ) -> dict[str, Any]:
        """Total bytes and files of every table over time, from snapshot summaries (Amoro's /overview/dataSize)."""
        return views.data_size(ctx.cache, points)

    @app.get("/health", tags=["service"])
    def health() -> dict[str, Any]:
        """Liveness: answers without touching the catalog (never protected)."""
        return {
            "status": "ok",
            "spark_started": ctx.spark_started.is_set(),
            "optimizer_groups": sorted(ctx.optimizer_groups),
        }

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        from arctic_sql.service.dashboard import FAVICON_SVG

        return Response(FAVICON_SVG, media_type="image/svg+xml")
