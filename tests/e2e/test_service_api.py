"""``arctic-sql service`` as a real process, called with a real HTTP client: the REST API over tables
in every state, the token where it is promised, JSON errors without stack traces, /metrics parsed by
prometheus_client's own parser, and no Spark started to answer reads."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from service_harness import TABLES, TOKEN, service_process, token_file, warehouse_with_every_state

pytestmark = pytest.mark.spark

AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def service(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("service-api")
    warehouse = warehouse_with_every_state(spark, str(tmp_path_factory.getbasetemp() / "service-warehouse"))
    with (
        service_process(warehouse, "--token-file", token_file(str(root))) as running,
        httpx.Client(base_url=running.url, timeout=60) as client,
    ):
        yield client


def _tables(client: httpx.Client, **params: object) -> dict[str, dict]:
    answer = client.get("/api/v1/tables", params={"page_size": 100, **params})
    assert answer.status_code == 200, answer.text
    return {t["name"]: t for t in answer.json()["tables"]}


def test_tables_in_every_state_listed_with_health(service):
    tables = _tables(service)
    assert set(tables) == set(TABLES)
    empty, raw, done, failed, logs = (
        tables[n] for n in ("db.empty", "db.raw", "db.done", "db.failed", "db.logs")
    )
    assert (empty["records"], empty["base_files"], empty["change_files"], empty["health_score"]) == (
        0,
        0,
        0,
        100,
    )
    assert raw["kind"] == "primary-key" and logs["kind"] == "append-only"
    assert raw["base_files"] == 0 and raw["unmerged_change_files"] == raw["change_files"] > 0
    assert done["base_files"] > 0 and done["unmerged_change_files"] == 0 and done["health_score"] == 100
    assert raw["health_score"] < 60  # change data only, not merged: the unmerged-changes points are gone
    assert failed["unmerged_change_files"] > 0
    # Its optimize failed (a change file vanished): it says so, in one line, until an optimize succeeds.
    assert failed["optimizing_status"] == "failed"
    assert (
        "\n" not in failed["last_failure"]["reason"]
        and "FileNotFoundError" in failed["last_failure"]["reason"]
    )
    assert raw["last_failure"] is None and raw["optimizing_status"] in ("idle", "pending")
    assert all(t["last_commit_at"] for n, t in tables.items() if n != "db.empty")
    assert raw["avg_file_size"] == raw["bytes"] // (raw["base_files"] + raw["change_files"])


def test_tables_are_filtered_sorted_and_paged_on_the_server(service):
    worst = service.get(
        "/api/v1/tables", params={"sort": "health_score", "order": "asc", "page_size": 2}
    ).json()
    assert worst["total"] == len(TABLES) and len(worst["tables"]) == 2
    scores = [t["health_score"] for t in worst["tables"]]
    assert scores == sorted(scores) and scores[0] == min(t["health_score"] for t in _tables(service).values())
    second = service.get("/api/v1/tables", params={"sort": "health_score", "page_size": 2, "page": 2}).json()
    assert not {t["name"] for t in second["tables"]} & {t["name"] for t in worst["tables"]}
    assert set(_tables(service, kind="append-only")) == {"db.logs"}
    assert set(_tables(service, q="ai")) == {"db.failed"}
    assert set(_tables(service, max_health=59)) >= {"db.raw"} and "db.done" not in _tables(
        service, max_health=59
    )


def test_details_explain_the_health_score(service):
    d = service.get("/api/v1/tables/db/raw").json()
    assert d["primary_key"] == ["id"] and [c["name"] for c in d["schema"]] == ["id", "v"]
    props = {p["key"]: p for p in d["properties"]}
    assert props["self-optimizing.execute.num-retries"] == {
        **props["self-optimizing.execute.num-retries"],
        "value": "0",
        "set": True,
    }
    assert props["self-optimizing.minor.trigger.file-count"]["value"] == "12"  # a default, shown
    assert props["self-optimizing.enabled"]["value"] == "true"
    components = {c["name"]: c for c in d["health"]["components"]}
    assert set(components) == {"small_files", "unmerged_changes", "delete_ratio"}
    assert (
        round(sum(c["points"] for c in components.values())) == d["health_score"]
        and d["health"]["penalties"] == []
    )
    assert (
        components["unmerged_changes"]["points"] == 0
        and "unmerged change row" in components["unmerged_changes"]["explanation"]
    )
    assert components["delete_ratio"]["value"] > 0  # one delete row
    kinds = {(f["store"], f["kind"]) for f in d["files"]}
    assert {("change", "upsert"), ("change", "delete")} <= kinds
    assert d["watermarks"] == [{"partition": "", "watermark": 0}]


def test_history_optimizing_and_failures(service):
    history = service.get("/api/v1/tables/db/raw/history", params={"page_size": 1}).json()
    assert history["total"] == 3 and history["items"][0]["operation"] == "delete"  # newest first
    done = service.get("/api/v1/tables/db/done/optimizing").json()["items"]
    assert [(r["mode"], r["status"]) for r in done] == [("full", "SUCCESS")]
    assert done[0]["input_files"] > 0 and done[0]["output_files"] > 0 and done[0]["duration_ms"] > 0
    failed = service.get("/api/v1/tables/db/failed/optimizing").json()["items"]
    assert [r["status"] for r in failed] == ["FAILED"] and failed[0]["failure_reason"]
    details = service.get("/api/v1/tables/db/failed").json()
    assert details["optimizing"]["failures"] == 1
    penalty = details["health"]["penalties"]
    assert [p["name"] for p in penalty] == ["optimize_failed"] and failed[0]["process_id"] in penalty[0][
        "explanation"
    ]
    components = round(sum(c["points"] for c in details["health"]["components"]))
    assert details["health_score"] == max(0, components - penalty[0]["points"]) < 60
    process = service.get(f"/api/v1/tables/db/failed/optimizing/{failed[0]['process_id']}").json()
    assert process["failure_reason"] == failed[0]["failure_reason"] == details["last_failure"]["reason"]
    # The whole message is kept for the process's own page: the Python worker's traceback and more.
    assert len(process["failure_detail"]) > len(process["failure_reason"])
    assert "Traceback" in process["failure_detail"] and "FileNotFoundError" in process["failure_detail"]
    assert service.get("/api/v1/tables/db/failed/optimizing/nope").status_code == 404
    files = service.get("/api/v1/tables/db/done/files").json()["items"]
    assert {f["merged"] for f in files if f["store"] == "change"} == {True}
    for name in ("snapshots", "partitions", "maintenance", "consumers", "versions"):
        answer = service.get(f"/api/v1/tables/db/done/{name}")
        assert answer.status_code == 200 and "items" in answer.json(), (name, answer.text)


def test_posts_need_the_token(service):
    assert service.post("/api/v1/tables/db/raw/optimize", json={"mode": "full"}).status_code == 401
    wrong = service.post(
        "/api/v1/tables/db/raw/expire-snapshots", json={}, headers={"Authorization": "Bearer x"}
    )
    assert wrong.status_code == 401 and wrong.json() == {"error": "Invalid token"}
    with httpx.Client(base_url=str(service.base_url), cookies={"arctic_token": TOKEN}) as browser_like:
        cookie_only = browser_like.post("/api/v1/tables/db/raw/optimize", json={})
    assert cookie_only.status_code == 401  # a cookie never authorizes a change
    bad_mode = service.post("/api/v1/tables/db/raw/optimize", json={"mode": "huge"}, headers=AUTH)
    assert bad_mode.status_code == 400 and "huge" in bad_mode.json()["error"]
    ended = service.get("/api/v1/tables/db/done/optimizing").json()["items"][0]["process_id"]
    cancel = service.post(f"/api/v1/tables/db/done/optimizing/{ended}/cancel", headers=AUTH)
    assert cancel.status_code == 409 and "already ended" in cancel.json()["error"]
    assert service.post("/api/v1/tables/db/done/optimizing/nope/cancel", headers=AUTH).status_code == 404


def test_expire_through_the_api_is_recorded_as_a_maintenance_run(service):
    before = service.get("/api/v1/tables/db/expired/history").json()["total"]
    answer = service.post(
        "/api/v1/tables/db/expired/expire-snapshots",
        json={"older_than_ms": 99_999_999_999_999, "retain_last": 1},
        headers=AUTH,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["expired_snapshots_count"] > 0
    assert service.get("/api/v1/tables/db/expired/history").json()["total"] == 1 < before
    runs = service.get("/api/v1/tables/db/expired/maintenance").json()["items"]
    assert [(r["kind"], r["status"], r["trigger"]) for r in runs] == [
        ("expire-snapshots", "SUCCESS", "service-api")
    ]
    assert runs[0]["result"] == {k: v for k, v in answer.json().items() if k != "table"}
    bad = service.post(
        "/api/v1/tables/db/expired/expire-snapshots", json={"retain_last": "all"}, headers=AUTH
    )
    assert bad.status_code == 400 and bad.json()["error"].startswith("Invalid retain_last: "), bad.text
    not_json = service.post(
        "/api/v1/tables/db/expired/expire-snapshots",
        content=b"retain_last=1",
        headers={**AUTH, "Content-Type": "application/json"},
    )
    assert not_json.status_code == 400 and not_json.json()["error"].startswith(
        "Invalid request body (not JSON): "
    )


def test_expire_and_orphan_cleaning_called_in_sql_are_maintenance_runs(spark, service, tmp_path_factory):
    """CALL system.expire_snapshots / remove_orphan_files show in the table's maintenance runs with what
    they removed; a dry run and a refused call are not runs (nothing changed)."""
    import os

    import arctic_sql

    warehouse = warehouse_with_every_state(spark, str(tmp_path_factory.getbasetemp() / "service-warehouse"))
    s = arctic_sql.connect(warehouse=warehouse, spark=spark)
    s.sql("INSERT INTO db.logs VALUES (3, 'z')")
    # A file of a writer that crashed before committing: in a write folder of its own, referenced by nothing.
    folder = (
        s.table("db.logs").base.location().removeprefix("file://").removeprefix("file:")
        + "/data/"
        + "ab" * 16
    )
    os.makedirs(folder)
    stray = os.path.join(folder, "part-00000-stray.parquet")
    with open(stray, "wb") as f:
        f.write(b"not referenced by any snapshot")
    two_days_ago = time.time() - 2 * 86_400
    os.utime(stray, (two_days_ago, two_days_ago))
    expired = s.sql(
        "CALL system.expire_snapshots(table => 'db.logs', older_than => TIMESTAMP '2100-01-01 00:00:00', "
        "retain_last => 1)"
    ).collect()
    s.sql("CALL system.remove_orphan_files(table => 'db.logs', dry_run => true)").collect()
    with pytest.raises(Exception, match="safety window"):  # refused: nothing ran
        s.sql(
            "CALL system.remove_orphan_files(table => 'db.logs', older_than => TIMESTAMP '2100-01-01 00:00:00')"
        )
    removed = [r[0] for r in s.sql("CALL system.remove_orphan_files(table => 'db.logs')").collect()]
    assert not os.path.exists(stray) and [os.path.basename(p) for p in removed] == [os.path.basename(stray)]
    runs = service.get("/api/v1/tables/db/logs/maintenance").json()["items"]  # newest first
    assert [(r["kind"], r["trigger"], r["status"]) for r in runs] == [
        ("remove-orphan-files", "manual", "SUCCESS"),
        ("expire-snapshots", "manual", "SUCCESS"),
    ]
    assert runs[1]["result"] == expired[0].asDict() and expired[0]["expired_snapshots_count"] == 1
    assert runs[0]["result"]["removed_files"] == 1 and runs[0]["result"]["removed_paths"] == removed


def test_errors_are_one_line_json(service):
    for path, status in (
        ("/api/v1/tables/db/nope", 404),
        ("/api/v1/tables/nodb/t", 404),
        ("/api/v1/tables?sort=size", 400),
        ("/api/v1/tables?page=0", 400),
        ("/api/v1/tables/db/raw/history?page_size=5000", 400),
        ("/api/v1/nothing", 404),
    ):
        answer = service.get(path)
        assert answer.status_code == status, (path, answer.text)
        body = answer.json()
        assert list(body) == ["error"] and "\n" not in body["error"] and "Traceback" not in body["error"], (
            path
        )


def test_overview_groups_openapi_and_health(service):
    overview = service.get("/api/v1/overview").json()
    assert overview["totals"]["tables"] == len(TABLES)
    assert overview["worst_health"][0]["health_score"] == min(
        t["health_score"] for t in _tables(service).values()
    )
    assert overview["top_by_size"][0]["bytes"] == max(t["bytes"] for t in _tables(service).values())
    groups = service.get("/api/v1/groups").json()["groups"]
    assert [g["name"] for g in groups] == ["default", "svc"]
    assert {t["name"] for t in groups[0]["tables"]} == set(TABLES) - {"db.auto"}
    assert [t["name"] for t in groups[1]["tables"]] == ["db.auto"] and groups[1]["optimizer"] is None
    assert groups[0]["task_time_ms_last_hour"] > 0  # db.done's optimize
    spec = service.get("/openapi.json").json()
    assert {
        "/api/v1/tables",
        "/api/v1/tables/{db}/{table}",
        "/api/v1/tables/{db}/{table}/optimize",
        "/api/v1/tables/{db}/{table}/optimizing/{process_id}",
        "/api/v1/tables/{db}/{table}/optimizing/{process_id}/cancel",
        "/api/v1/groups",
        "/api/v1/overview",
        "/api/v1/overview/data-size",
        "/metrics",
        "/health",
    } <= set(spec["paths"])
    size = service.get("/api/v1/overview/data-size").json()
    points = size["points"]
    assert (
        size["tables"] == len(TABLES) and points and points[-1]["tables"] == len(TABLES) - 1
    )  # db.empty: none
    assert [p["at_ms"] for p in points] == sorted(p["at_ms"] for p in points)
    # From snapshot summaries alone, and the newest point agrees with the live files' sizes.
    assert points[-1]["bytes"] == sum(t["bytes"] for t in _tables(service).values())
    assert service.get("/api/v1/overview/data-size", params={"points": 1}).status_code == 400
    assert service.get("/health").json()["spark_started"] is False  # every read above was metadata only


def test_metrics_parse_as_prometheus_text(service):
    text = service.get("/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert {
        "arctic_table_files",
        "arctic_table_size_bytes",
        "arctic_table_records",
        "arctic_table_health_score",
        "arctic_table_unmerged_change_files",
        "arctic_table_oldest_unmerged_change_age_seconds",
        "arctic_table_last_optimize_age_seconds",
        "arctic_table_optimizing_failures",
        "arctic_group_quota_occupation_ratio",
    } <= set(families)
    value = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families.values() for s in f.samples}
    tables = _tables(service)
    assert (
        value[("arctic_table_files", (("store", "change"), ("table", "db.raw")))]
        == tables["db.raw"]["change_files"]
    )
    assert value[("arctic_table_health_score", (("table", "db.raw"),))] == tables["db.raw"]["health_score"]
    assert value[("arctic_table_optimizing_failures_total", (("table", "db.failed"),))] == 1
    assert value[("arctic_table_oldest_unmerged_change_age_seconds", (("table", "db.raw"),))] > 0
    assert value[("arctic_table_last_optimize_age_seconds", (("table", "db.done"),))] >= 0


def test_reads_can_be_protected_and_loopback_is_the_default(spark, tmp_path, tmp_path_factory):
    warehouse = warehouse_with_every_state(spark, str(tmp_path_factory.getbasetemp() / "service-warehouse"))
    with service_process(warehouse, "--token-file", token_file(str(tmp_path)), "--protect-reads") as running:
        assert running.url.startswith("http://127.0.0.1:")
        with httpx.Client(base_url=running.url, timeout=60) as client:
            assert client.get("/api/v1/tables").status_code == 401
            assert client.get("/metrics").status_code == 401
            assert client.get("/").status_code == 401
            assert client.get("/health").status_code == 200  # liveness stays open
            assert client.get("/api/v1/tables", headers=AUTH).status_code == 200
        with httpx.Client(base_url=running.url, timeout=60, cookies={"arctic_token": TOKEN}) as browser_like:
            assert browser_like.get("/tables").status_code == 200
    unsafe = tmp_path / "open-token"
    unsafe.write_text(TOKEN)
    unsafe.chmod(0o644)
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "arctic_sql.frontends.cli",
            "service",
            "--warehouse",
            warehouse,
            "--port",
            "0",
            "--token-file",
            str(unsafe),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2 and "readable by others" in refused.stderr


def test_sql_metadata_tables_say_what_the_api_says(spark, service, tmp_path_factory):
    """db.t.history|files|partitions|optimizing and the API share table/reading/metadata_rows.py."""
    import arctic_sql

    warehouse = warehouse_with_every_state(spark, str(tmp_path_factory.getbasetemp() / "service-warehouse"))
    sql = arctic_sql.connect(warehouse=warehouse, spark=spark).sql
    history = sql("SELECT version, operation, store, rows_added, rows_removed FROM db.raw.history").collect()
    api = service.get("/api/v1/tables/db/raw/history").json()["items"][::-1]
    assert [tuple(r) for r in history] == [
        (r["version"], r["operation"], r["store"], r["rows_added"], r["rows_removed"]) for r in api
    ]
    files = sql("SELECT path, kind, size_bytes, merged FROM db.done.files ORDER BY path").collect()
    api_files = sorted(service.get("/api/v1/tables/db/done/files").json()["items"], key=lambda f: f["path"])
    assert [tuple(r) for r in files] == [
        (f["path"], f["kind"], f["size_bytes"], f["merged"]) for f in api_files
    ]
    optimizing = sql(
        "SELECT process_id, status, partitions, ended_at IS NOT NULL FROM db.failed.optimizing"
    ).collect()
    api_runs = service.get("/api/v1/tables/db/failed/optimizing").json()["items"]
    assert [tuple(r) for r in optimizing] == [
        (r["process_id"], r["status"], ",".join(r["partitions"]), True) for r in api_runs
    ]
    partitions = sql("SELECT partition, change_files, watermark FROM db.raw.partitions").collect()
    assert [tuple(r) for r in partitions] == [
        (p["partition"], p["change_files"], p["watermark"])
        for p in service.get("/api/v1/tables/db/raw/partitions").json()["items"]
    ]


def test_the_optimizer_runs_in_the_service_process(spark, tmp_path, tmp_path_factory):
    """``--optimizer --group svc``: the group's table gets optimized by the service process itself."""
    warehouse = warehouse_with_every_state(spark, str(tmp_path_factory.getbasetemp() / "service-warehouse"))
    with (
        service_process(
            warehouse, "--optimizer", "--group", "svc", "--interval", "1", "--master", "local[1]"
        ) as running,
        httpx.Client(base_url=running.url, timeout=60) as client,
    ):
        assert client.get("/health").json()["optimizer_groups"] == ["svc"]
        svc = next(g for g in client.get("/api/v1/groups").json()["groups"] if g["name"] == "svc")
        assert svc["optimizer"]["policy"] == "quota" and svc["cores"] == svc["optimizer"]["cores"]
        deadline = time.monotonic() + 240  # Spark starts in the service process on a busy 2-core machine
        runs: list[dict] = []
        while time.monotonic() < deadline and not any(r["status"] == "SUCCESS" for r in runs):
            time.sleep(1)
            runs = client.get("/api/v1/tables/db/auto/optimizing").json()["items"]
        assert [(r["mode"], r["status"], r["trigger"]) for r in runs] == [("minor", "SUCCESS", "service")], (
            runs
        )
        auto = client.get("/api/v1/tables/db/auto").json()
        assert auto["unmerged_change_files"] == 0 and auto["health_score"] == 100
        assert client.get("/api/v1/tables/db/raw/optimizing").json()["total"] == 0  # group default: not its
