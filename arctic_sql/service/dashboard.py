"""The dashboard: server-rendered HTML pages over the same views as the REST API.

Pages: Overview (``/``), Tables (``/tables``, sortable and filtered on the server, health as a
coloured bar), a table's page (``/tables/{db}/{table}?tab=details|files|history|optimizing|maintenance``)
and Optimizer groups (``/groups``). Charts are inline SVG (charts.py). The only script,
``static/dashboard.js`` (shipped in the package, no build step), sends the bearer token for the
buttons that optimize or expire, and keeps the token for reads in a cookie when reads are protected.
"""

from __future__ import annotations

from html import escape
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from fastapi import FastAPI, Query, Request
from fastapi.responses import HTMLResponse, Response

from arctic_sql.service import views
from arctic_sql.service.charts import bar_chart, human_bytes, line_chart
from arctic_sql.service.facts import STATUSES
from arctic_sql.table.model.identifiers import TableIdentifier

if TYPE_CHECKING:
    from arctic_sql.service.api import ServiceContext

TABS = ("details", "files", "history", "optimizing", "maintenance")
STATIC = {"style.css": "text/css", "dashboard.js": "text/javascript", "favicon.svg": "image/svg+xml"}
FAVICON_SVG = resources.files("arctic_sql.service").joinpath("static/favicon.svg").read_bytes()


def _static(name: str) -> bytes:
    return resources.files("arctic_sql.service").joinpath(f"static/{name}").read_bytes()


def _page(title: str, active: str, body: str, *, protect_reads: bool = False) -> HTMLResponse:
    nav = "".join(
        f'<a href="{href}" class="{"active" if key == active else ""}">{label}</a>'
        for key, href, label in (
            ("overview", "/", "Overview"),
            ("tables", "/tables", "Tables"),
            ("groups", "/groups", "Optimizer groups"),
        )
    )
    return HTMLResponse(
        f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)} · arctic-sql</title>
<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/static/style.css"></head>
<body data-protect-reads="{str(protect_reads).lower()}">
<header><span class="brand">arctic-sql</span><nav>{nav}</nav>
<form class="token" onsubmit="return false"><label>token <input type="password" id="token"
autocomplete="off" size="14"></label> <button type="button" id="save-token">use</button></form></header>
<main><h1>{escape(title)}</h1>{body}</main>
<p id="message" role="status"></p>
<script src="/static/dashboard.js"></script></body></html>"""
    )


def _health_bar(score: int) -> str:
    level = "good" if score >= 80 else "fair" if score >= 60 else "poor"
    return (
        f'<span class="health {level}" title="health {score}/100"><span style="width:{score}%"></span></span>'
        f'<span class="score">{score}</span>'
    )


def _day_time(ms: float) -> str:
    return (views.iso(int(ms)) or "")[:16].replace("T", " ")


def _status(row: dict[str, Any]) -> str:
    """A table's optimizing status; a failure says why on hover."""
    failure = row.get("last_failure")
    title = f' title="{escape(failure["reason"] or "")}"' if failure else ""
    return f'<span class="status {escape(row["optimizing_status"])}"{title}>{escape(row["optimizing_status"])}</span>'


def _table_link(name: str) -> str:
    db, table = name.split(".", 1)
    return f'<a href="/tables/{escape(db)}/{escape(table)}">{escape(name)}</a>'


def _grid(headers: list[str], rows: list[list[str]], empty: str = "Nothing yet.", cls: str = "") -> str:
    if not rows:
        return f'<p class="empty">{escape(empty)}</p>'
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="grid {cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _cards(items: list[tuple[str, str]]) -> str:
    return (
        '<div class="cards">'
        + "".join(
            f'<div class="card"><div class="value">{v}</div><div class="label">{escape(k)}</div></div>'
            for k, v in items
        )
        + "</div>"
    )


# pages ---------------------------------------------------------------------------------------------
def overview_page(ctx: ServiceContext) -> HTMLResponse:
    o = views.overview(ctx.cache)
    t = o["totals"]
    cards = _cards(
        [
            ("tables", str(t["tables"])),
            ("primary-key tables", str(t["primary_key_tables"])),
            ("data", human_bytes(t["bytes"])),
            ("files", str(t["files"])),
            ("records", str(t["records"])),
            ("unmerged change files", str(t["unmerged_change_files"])),
            ("average health", "–" if t["average_health"] is None else f"{t['average_health']:g}"),
            ("unhealthy (< 60)", str(t["unhealthy_tables"])),
        ]
    )
    top_size = bar_chart([(r["name"], r["bytes"]) for r in o["top_by_size"]], "Largest tables", human_bytes)
    top_files = bar_chart(
        [(r["name"], r["base_files"] + r["change_files"]) for r in o["top_by_files"]],
        "Most files",
        lambda v: f"{v:.0f} files",
    )
    hours = o["optimizing_last_24h"]["per_hour"]
    activity = bar_chart(
        [(f"-{24 - i}h", float(n)) for i, n in enumerate(hours)],
        "Optimizing processes started, last 24 hours",
        lambda v: f"{v:.0f}",
    )
    size = views.data_size(ctx.cache)["points"]
    data_size = line_chart(
        [(p["at_ms"], p["bytes"]) for p in size],
        "Data size of all tables over time",
        human_bytes,
        x_label="",
        x_fmt=_day_time,
    )
    worst = _grid(
        ["table", "health", "optimizing"],
        [[_table_link(r["name"]), _health_bar(r["health_score"]), _status(r)] for r in o["worst_health"]],
        "No tables yet.",
    )
    statuses = (
        ", ".join(f"{escape(k)}: {v}" for k, v in sorted(o["optimizing_status"].items())) or "no tables"
    )
    body = (
        f"{cards}<p>Optimizing status: {statuses}</p>"
        f'<div class="charts" id="data-size">{data_size}</div>'
        f'<div class="charts">{top_size}{top_files}{activity}</div><h2>Worst health</h2>{worst}'
    )
    return _page("Overview", "overview", body, protect_reads=ctx.protect_reads)


_COLUMNS = (
    ("name", "table"),
    ("health_score", "health"),
    ("records", "records"),
    ("bytes", "size"),
    ("files", "files"),
    ("avg_file_size", "avg file"),
    ("change_files", "change files"),
    ("last_commit_at", "last commit"),
    ("optimizing_status", "optimizing"),
)


def tables_page(ctx: ServiceContext, params: dict[str, Any]) -> HTMLResponse:
    listing = views.list_tables(ctx.cache, **params)
    sort, order = params["sort"], params["order"]
    keep = {k: v for k, v in params.items() if v is not None and k not in ("sort", "order", "page")}

    def header(key: str, label: str) -> str:
        next_order = "desc" if key == sort and order == "asc" else "asc"
        arrow = (" ▲" if order == "asc" else " ▼") if key == sort else ""
        return (
            f'<a class="sort" data-sort="{key}" href="/tables?{urlencode({**keep, "sort": key, "order": next_order})}">'
            f"{label}{arrow}</a>"
        )

    rows = [
        [
            _table_link(r["name"]),
            _health_bar(r["health_score"]),
            str(r["records"]),
            human_bytes(r["bytes"]),
            f"{r['base_files']} + {r['change_files']}",
            human_bytes(r["avg_file_size"]),
            str(r["change_files"]),
            escape(r["last_commit_at"] or "–"),
            _status(r),
        ]
        for r in listing["tables"]
    ]
    q = escape(params.get("q") or "")
    form = (
        f'<form class="filter" method="get" action="/tables"><input name="q" value="{q}" placeholder="name contains">'
        '<select name="status"><option value="">any status</option>'
        + "".join(f"<option{' selected' if params.get('status') == s else ''}>{s}</option>" for s in STATUSES)
        + f'</select><input type="hidden" name="sort" value="{escape(sort)}">'
        f'<input type="hidden" name="order" value="{escape(order)}"><button>filter</button></form>'
    )
    pages = -(-listing["total"] // listing["page_size"]) or 1
    nav = " ".join(
        f'<a href="/tables?{urlencode({**keep, "sort": sort, "order": order, "page": p})}"'
        f"{' class=current' if p == listing['page'] else ''}>{p}</a>"
        for p in range(1, min(pages, 50) + 1)
    )
    body = (
        f"{form}<p>{listing['total']} table(s)</p>"
        f"{_grid([header(k, v) for k, v in _COLUMNS], rows, 'No tables match.', 'tables')}"
        f'<p class="pages">{nav if pages > 1 else ""}</p>'
    )
    return _page("Tables", "tables", body, protect_reads=ctx.protect_reads)


def table_page(ctx: ServiceContext, db: str, name: str, tab: str, process: str | None = None) -> HTMLResponse:
    table, facts = ctx.cache.get(TableIdentifier(db.lower(), name.lower()))
    details = views.table_details(ctx.cache, table, facts)
    tabs = "".join(
        f'<a href="?tab={t}" class="tab{" active" if t == tab else ""}" data-tab="{t}">{t.title()}</a>'
        for t in TABS
    )
    if tab == "optimizing":
        content = _optimizing_tab(table, details, process)
    else:
        content = {
            "details": _details_tab,
            "files": _files_tab,
            "history": _history_tab,
            "maintenance": _maintenance_tab,
        }[tab](table, details)
    actions = (
        f'<div class="actions" data-table="{escape(db)}/{escape(name)}">'
        '<select id="optimize-mode"><option>auto</option><option>minor</option><option>major</option>'
        '<option selected>full</option></select><button type="button" id="optimize">Optimize</button>'
        '<button type="button" id="expire">Expire snapshots</button></div>'
    )
    head = _cards(
        [
            ("health", _health_bar(details["health_score"])),
            ("kind", escape(details["kind"])),
            ("records", str(details["records"])),
            ("size", human_bytes(details["bytes"])),
            ("files (base + change)", f"{details['base_files']} + {details['change_files']}"),
            ("optimizing", _status(details)),
        ]
    )
    failure = details["last_failure"]
    if failure:
        head += (
            f'<p class="failure" id="last-failure">The last optimize failed at {escape(failure["failed_at"] or "")}: '
            f"{escape(failure['reason'] or 'no reason recorded')} "
            f'(<a href="?tab=optimizing&amp;process={escape(failure["process_id"])}">full message</a>)</p>'
        )
    requested = "".join(
        f"<li>{escape(j.mode)} optimize requested through this service at {escape(views.iso(j.started_ms) or '')}"
        f"{': ' + escape(j.error) if j.error else ' (running)'}</li>"
        for j in ctx.jobs.recent(facts.name)
    )
    requested = f'<ul class="requested">{requested}</ul>' if requested else ""
    body = (
        f'{head}{actions}{requested}<nav class="tabs">{tabs}</nav><section id="tab-{tab}">{content}</section>'
    )
    return _page(str(facts.name), "tables", body, protect_reads=ctx.protect_reads)


def _details_tab(table: Any, d: dict[str, Any]) -> str:
    h = d["health"]
    breakdown = _grid(
        ["component", "points", "measured", "all points lost at", "why"],
        [
            [
                escape(c["name"]),
                f"{c['points']:g} / {c['max_points']}",
                f"{c['value']:g}",
                f"{c['threshold']:g}",
                escape(c["explanation"]),
            ]
            for c in h["components"]
        ]
        + [[escape(p["name"]), f"−{p['points']}", "", "", escape(p["explanation"])] for p in h["penalties"]],
    )
    series = views.version_series(table)
    charts = line_chart(
        [(r["version"], r["bytes"]) for r in series], "Data read per version", human_bytes
    ) + line_chart(
        [(r["version"], r["files"]) for r in series], "Files read per version", lambda v: f"{v:.0f} files"
    )
    schema = _grid(
        ["column", "type", "required", "key"],
        [
            [
                escape(c["name"]),
                escape(c["type"]),
                "yes" if c["required"] else "",
                "key" if c["primary_key"] else "",
            ]
            for c in d["schema"]
        ],
    )
    files = _grid(
        ["store", "kind", "files", "bytes", "rows"],
        [
            [escape(f["store"]), escape(f["kind"]), str(f["files"]), human_bytes(f["bytes"]), str(f["rows"])]
            for f in d["files"]
        ],
        "No files.",
    )
    marks = _grid(
        ["partition", "watermark"],
        [[escape(w["partition"] or "(table)"), str(w["watermark"])] for w in d["watermarks"]],
        "No watermark yet.",
    )
    opt = d["optimizing"]
    reasons = "".join(f"<li>{escape(r)}</li>" for r in opt["reasons"]) or "<li>nothing due</li>"
    properties = _grid(
        ["property", "value", "default"],
        [
            [
                escape(p["key"]),
                escape(str(p["value"])) + (" <b>(set)</b>" if p["set"] else ""),
                escape(str(p["default"])),
            ]
            for p in d["properties"]
        ],
    )
    return (
        f"<h2>Health {h['score']}/100</h2><p>{escape(h['summary'])}</p>{breakdown}"
        f'<div class="charts">{charts}</div><h2>Optimizing</h2><ul>{reasons}</ul>'
        f"<p>Last optimized: {escape(opt['last_optimized_at'] or 'never')}; failures: {opt['failures']}</p>"
        f"<h2>Schema</h2><p>Primary key: {escape(', '.join(d['primary_key']) or 'none')}</p>{schema}"
        f"<h2>Files</h2>{files}<h2>Watermarks</h2>{marks}<h2>Properties</h2>{properties}"
    )


def _files_tab(table: Any, d: dict[str, Any]) -> str:
    rows = views.collection(table, "files", 1, views.MAX_PAGE_SIZE)["items"]
    return _grid(
        ["store", "partition", "node", "kind", "seq", "size", "rows", "keys", "merged"],
        [
            [
                escape(r["store"]),
                escape(r["partition"] or ""),
                str(r["node"]),
                escape(r["kind"]),
                str(r["sequence_number"]),
                human_bytes(r["size_bytes"]),
                str(r["rows"]),
                escape(f"{r['key_min']} … {r['key_max']}" if r["key_min"] is not None else ""),
                "yes" if r["merged"] else "",
            ]
            for r in rows
        ],
        "No live files.",
    )


def _history_tab(table: Any, d: dict[str, Any]) -> str:
    rows = views.collection(table, "history", 1, views.MAX_PAGE_SIZE)["items"]
    return _grid(
        ["version", "committed at", "operation", "store", "rows +", "rows −", "files +", "files −"],
        [
            [
                str(r["version"]),
                escape(r["committed_at"]),
                escape(r["operation"]),
                escape(r["store"]),
                str(r["rows_added"]),
                str(r["rows_removed"]),
                str(r["files_added"]),
                str(r["files_removed"]),
            ]
            for r in rows
        ],
        "No versions yet.",
        "history",
    )


def _optimizing_tab(table: Any, d: dict[str, Any], process: str | None = None) -> str:
    rows = views.collection(table, "optimizing", 1, views.MAX_PAGE_SIZE)["items"]
    shown = ""
    if process:
        p = views.process_detail(table, process)
        shown = (
            f'<section id="process"><h2>Process {escape(p["process_id"])}: {escape(p["status"])}</h2>'
            f"<p>{escape(p['failure_reason'] or '')}</p>"
            f'<pre class="failure">{escape(p["failure_detail"] or p["failure_reason"] or "No failure.")}</pre>'
            "</section>"
        )

    def failure(r: dict[str, Any]) -> str:
        if r["status"] in ("PLANNED", "EXECUTING"):
            return f'<button type="button" class="cancel" data-process="{escape(r["process_id"])}">Cancel</button>'
        if not r["failure_reason"]:
            return ""
        return (
            f'{escape(r["failure_reason"])} <a href="?tab=optimizing&amp;process={escape(r["process_id"])}">'
            "full message</a>"
        )

    return shown + _grid(
        [
            "process",
            "mode",
            "status",
            "trigger",
            "started",
            "duration",
            "files before → after",
            "bytes before → after",
            "failure",
        ],
        [
            [
                escape(r["process_id"]),
                escape(r["mode"]),
                f'<span class="status {escape(r["status"])}">{escape(r["status"])}</span>',
                escape(r["trigger"]),
                escape(r["started_at"]),
                f"{r['duration_ms'] / 1000:.1f} s",
                f"{r['input_files']} → {r['output_files']}",
                f"{human_bytes(r['input_bytes'])} → {human_bytes(r['output_bytes'])}",
                failure(r),
            ]
            for r in rows
        ],
        "No optimizing process yet.",
        "optimizing",
    )


def _maintenance_tab(table: Any, d: dict[str, Any]) -> str:
    rows = views.collection(table, "maintenance", 1, views.MAX_PAGE_SIZE)["items"]
    return _grid(
        ["run", "kind", "status", "trigger", "started", "duration", "result", "failure"],
        [
            [
                escape(r["run_id"]),
                escape(r["kind"]),
                escape(r["status"]),
                escape(r["trigger"]),
                escape(r["started_at"]),
                f"{r['duration_ms'] / 1000:.1f} s",
                escape(
                    ", ".join(f"{k}={v}" for k, v in r["result"].items() if v and not isinstance(v, list))
                ),
                escape(r["failure_reason"] or ""),
            ]
            for r in rows
        ],
        "No expiration or orphan cleaning recorded yet.",
        "maintenance",
    )


def groups_page(ctx: ServiceContext) -> HTMLResponse:
    parts = []
    for g in views.groups(ctx.cache, ctx.optimizer_groups, ctx.default_cores):
        runner = "optimizer running in this service" if g["optimizer"] else "no optimizer in this service"
        rows = [
            [
                _table_link(t["name"]),
                f"{t['quota']:g}",
                str(t["quota_threads"]),
                f"{t['quota_occupation'] * 100:.1f} %",
                escape(t["optimizing_status"]),
            ]
            for t in g["tables"]
        ]
        chart = bar_chart(
            [(t["name"], t["quota_occupation"] * 100) for t in g["tables"]],
            "Quota occupation, last hour (%)",
            lambda v: f"{v:.1f} %",
        )
        parts.append(
            f"<h2>{escape(g['name'])}</h2><p>{g['cores']} core(s), {runner}; occupation "
            f"{g['occupation'] * 100:.1f} % over the last hour</p>"
            f"{_grid(['table', 'quota', 'threads', 'occupation', 'optimizing'], rows)}{chart}"
        )
    return _page(
        "Optimizer groups",
        "groups",
        "".join(parts) or '<p class="empty">No groups.</p>',
        protect_reads=ctx.protect_reads,
    )


def add_routes(app: FastAPI, ctx: ServiceContext, reads: Any) -> None:
    @app.get("/", response_class=HTMLResponse, dependencies=[reads], include_in_schema=False)
    def overview() -> HTMLResponse:
        return overview_page(ctx)

    @app.get("/tables", response_class=HTMLResponse, dependencies=[reads], include_in_schema=False)
    def tables(
        q: str | None = None,
        status: str | None = None,
        sort: str = "name",
        order: str = "asc",
        page: int = Query(1, ge=1),
    ) -> HTMLResponse:
        return tables_page(
            ctx,
            {
                "q": q or None,
                "status": status or None,
                "sort": sort,
                "order": order,
                "page": page,
                "page_size": 50,
            },
        )

    @app.get(
        "/tables/{db}/{table}", response_class=HTMLResponse, dependencies=[reads], include_in_schema=False
    )
    def table(
        db: str,
        table: str,
        tab: str = Query("details", pattern="^(" + "|".join(TABS) + ")$"),
        process: str | None = None,
    ) -> HTMLResponse:
        return table_page(ctx, db, table, tab, process or None)

    @app.get("/groups", response_class=HTMLResponse, dependencies=[reads], include_in_schema=False)
    def groups() -> HTMLResponse:
        return groups_page(ctx)

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str, request: Request) -> Response:
        if name not in STATIC:
            return Response(b'{"error": "Not Found"}', status_code=404, media_type="application/json")
        return Response(_static(name), media_type=STATIC[name], headers={"Cache-Control": "max-age=300"})
