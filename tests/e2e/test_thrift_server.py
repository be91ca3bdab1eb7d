"""The Thrift (HiveServer2) server with real clients: PyHive DB-API and its Thrift client, SQLAlchemy's
``hive://`` dialect, and beeline over JDBC. One server subprocess serves the module (thrift_harness)."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from thrift_harness import ServerProcess, rows, run_beeline, shared_server

pytestmark = pytest.mark.spark

POLL_S = 120  # bound on waiting for a state change; the machine is slow, not the protocol


@pytest.fixture(scope="module")
def server() -> ServerProcess:
    return shared_server()


@pytest.fixture(scope="module")
def shop(server):
    """A database with a primary-key table that has three versions."""
    conn = server.connect()
    cur = conn.cursor()
    cur.execute("CREATE DATABASE IF NOT EXISTS shop")
    cur.execute(
        "CREATE TABLE shop.orders (id BIGINT, status STRING, amount DECIMAL(10,2), "
        "ts TIMESTAMP, PRIMARY KEY (id))"
    )
    cur.execute(
        "INSERT INTO shop.orders VALUES (1, 'new', 9.50, TIMESTAMP'2024-01-31 10:00:00'), "
        "(2, 'new', 20.00, NULL)"
    )  # version 1
    cur.execute("UPDATE shop.orders SET status = 'paid' WHERE id = 1")  # version 2
    cur.execute("DELETE FROM shop.orders WHERE id = 2")  # version 3
    conn.close()
    return "shop"


def _poll_state(cursor, wanted: set[int]) -> int:
    from TCLIService.ttypes import TOperationState

    deadline = time.monotonic() + POLL_S
    while time.monotonic() < deadline:
        state = cursor.poll().operationState
        if state in wanted:
            return state
        if state in (TOperationState.ERROR_STATE, TOperationState.CLOSED_STATE):
            return state
    raise AssertionError(f"operation stayed in state {state}")


# statements ----------------------------------------------------------------------------------------
def test_pyhive_runs_extended_sql(server, shop):
    import datetime as dt
    from decimal import Decimal

    with server.connect(database="shop") as conn:
        cur = conn.cursor()
        cur.execute("SELECT id, status, amount, ts FROM orders ORDER BY id")
        assert [d[:2] for d in cur.description] == [
            ("id", "BIGINT_TYPE"),
            ("status", "STRING_TYPE"),
            ("amount", "DECIMAL_TYPE"),
            ("ts", "TIMESTAMP_TYPE"),
        ]
        assert rows(cur) == [(1, "paid", Decimal("9.50"), dt.datetime(2024, 1, 31, 10, 0))]
        cur.execute("SELECT id, status FROM orders VERSION AS OF 1 ORDER BY id")
        assert rows(cur) == [(1, "new"), (2, "new")]
        cur.execute(
            "SELECT id, _change_type, _change_version FROM orders VERSION BETWEEN 1 AND 3 ORDER BY id"
        )
        assert rows(cur) == [(1, "upsert", 2), (2, "delete", 3)]
        cur.execute("SELECT version, operation FROM orders.history ORDER BY version")
        assert [r[0] for r in rows(cur)] == [1, 2, 3]


def test_call_procedure_and_merge_through_server(server):
    with server.connect() as conn:
        cur = conn.cursor()
        cur.execute("CREATE DATABASE IF NOT EXISTS calls")
        cur.execute("CREATE TABLE calls.t (id INT, v STRING, PRIMARY KEY (id))")
        for i in range(3):
            cur.execute(f"INSERT INTO calls.t VALUES ({i}, 'v{i}')")
        cur.execute(
            "MERGE INTO calls.t t USING (SELECT 1 AS id, 'merged' AS v) s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET v = s.v"
        )
        cur.execute("CALL system.optimize(table => 'calls.t', mode => 'full')")
        names = [d[0] for d in cur.description]
        result = rows(cur)
        assert result, "optimize returned no row for the table's partition"
        assert len(names) == len(result[0])
        cur.execute("SELECT id, v FROM calls.t ORDER BY id")
        assert rows(cur) == [(0, "v0"), (1, "merged"), (2, "v2")]
        cur.execute("SELECT id, v FROM calls.t VERSION AS OF 3 ORDER BY id")  # before the MERGE
        assert rows(cur) == [(0, "v0"), (1, "v1"), (2, "v2")]


def test_sessions_keep_their_own_database_settings_and_views(server, shop):
    with server.connect(database="shop") as a, server.connect() as b:
        ca, cb = a.cursor(), b.cursor()
        ca.execute("SET spark.sql.shuffle.partitions=3")
        ca.execute("CREATE TEMPORARY VIEW mine AS SELECT 42 AS answer")
        ca.execute("SELECT current_database()")
        assert rows(ca) == [("shop",)]
        cb.execute("SELECT current_database()")
        assert rows(cb) == [("default",)]
        ca.execute("SET spark.sql.shuffle.partitions")
        assert rows(ca)[0][1] == "3"
        cb.execute("SET spark.sql.shuffle.partitions")
        assert rows(cb)[0][1] == "4"
        ca.execute("SELECT answer FROM mine")
        assert rows(ca) == [(42,)]
        from pyhive.exc import OperationalError

        with pytest.raises(OperationalError):
            cb.execute("SELECT answer FROM mine")
        cb.execute("SELECT count(*) FROM shop.orders")
        assert rows(cb) == [(1,)]


# errors ------------------------------------------------------------------------------------------
def _error_status(excinfo) -> object:
    response = excinfo.value.args[0]
    return getattr(response, "status", response)


def test_errors_reach_the_client_as_one_line_and_the_session_goes_on(server, shop):
    from pyhive.exc import OperationalError

    with server.connect(database="shop") as conn:
        cur = conn.cursor()
        with pytest.raises(OperationalError) as parse_error:
            cur.execute("SELEC id FROM orders")
        status = _error_status(parse_error)
        assert status.errorMessage and "\n" not in status.errorMessage
        with pytest.raises(OperationalError) as missing:
            cur.execute("SELECT * FROM no_such_table")
        status = _error_status(missing)
        assert "no_such_table" in status.errorMessage and "\n" not in status.errorMessage
        assert status.sqlState == "42P01"
        with pytest.raises(OperationalError) as bad_key:
            cur.execute("INSERT INTO orders VALUES (NULL, 'x', 1.0, NULL)")
        assert "\n" not in _error_status(bad_key).errorMessage
        with pytest.raises(OperationalError) as bad_call:
            cur.execute("CALL system.optimize(no_such_argument => 1)")
        assert "no_such_argument" in _error_status(bad_call).errorMessage
        cur.execute("SELECT count(*) FROM orders")
        assert rows(cur) == [(1,)]


def test_async_errors_arrive_through_operation_status(server):
    from TCLIService.ttypes import TOperationState

    with server.connect() as conn:
        cur = conn.cursor()
        cur.execute("SELECT * FROM missing_async_table", async_=True)
        assert _poll_state(cur, {TOperationState.FINISHED_STATE}) == TOperationState.ERROR_STATE
        status = cur.poll()
        assert "missing_async_table" in status.errorMessage and status.sqlState == "42P01"


def test_garbage_and_dropped_connections_do_not_stop_the_server(server):
    for payload in (
        b"\x80\x01\x00\x01garbage-that-is-not-thrift",
        b"\x01\x00\x00\x00\x05PLAIN\xff\xff",
        b"GET / HTTP/1.1\r\n\r\n",
        b"",
    ):
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
            try:  # the server may drop the connection at the first byte it refuses, before we are done
                s.sendall(payload)
                s.shutdown(socket.SHUT_WR)
                s.recv(1024)
            except OSError:
                pass
    conn = server.connect()
    conn.cursor().execute("SELECT 1")  # a session left open on a dropped connection
    conn._transport.close()
    with server.connect() as again:
        cur = again.cursor()
        cur.execute("SELECT 1 + 1")
        assert rows(cur) == [(2,)]
    assert server.alive()


# cancel and batches --------------------------------------------------------------------------------
def test_a_long_query_can_be_cancelled(server):
    from TCLIService.ttypes import TOperationState

    with server.connect() as conn:
        cur = conn.cursor()
        # ~10^11 rows: minutes of work on two cores, unless the cancel stops it
        cur.execute("SELECT sum(id % 7) FROM range(0, 100000000000, 1, 8)", async_=True)
        assert _poll_state(cur, {TOperationState.RUNNING_STATE}) == TOperationState.RUNNING_STATE
        cur.cancel()
        assert _poll_state(cur, {TOperationState.CANCELED_STATE}) == TOperationState.CANCELED_STATE
        other = conn.cursor()
        other.execute("SELECT 'still answering'")
        assert rows(other) == [("still answering",)]


def _thrift_fetch(conn, handle, max_rows: int) -> tuple[int, list]:
    from pyhive.hive import _unwrap_column
    from TCLIService.ttypes import TFetchOrientation, TFetchResultsReq

    resp = conn.client.FetchResults(
        TFetchResultsReq(operationHandle=handle, orientation=TFetchOrientation.FETCH_NEXT, maxRows=max_rows)
    )
    assert resp.status.statusCode == 0, resp.status.errorMessage
    columns = [_unwrap_column(c) for c in resp.results.columns]
    return resp.results.startRowOffset, list(zip(*columns))


def test_results_are_fetched_in_batches_without_computing_the_whole_result(server):
    from TCLIService.ttypes import TCloseOperationReq, TExecuteStatementReq

    with server.connect() as conn:
        # 10^10 rows in 10^6 partitions: only a server that streams partition by partition answers
        statement = "SELECT id FROM range(0, 10000000000, 1, 1000000)"
        resp = conn.client.ExecuteStatement(
            TExecuteStatementReq(sessionHandle=conn.sessionHandle, statement=statement, runAsync=False)
        )
        assert resp.status.statusCode == 0, resp.status.errorMessage
        handle = resp.operationHandle
        seen = []
        for expected_offset in (0, 500, 1000):
            offset, batch = _thrift_fetch(conn, handle, 500)
            assert offset == expected_offset and len(batch) == 500
            seen += [r[0] for r in batch]
        assert seen == list(range(1500))
        conn.client.CloseOperation(TCloseOperationReq(operationHandle=handle))


def test_pyhive_fetches_a_large_result_in_pages(server):
    with server.connect() as conn:
        cur = conn.cursor()
        cur.arraysize = 700
        cur.execute(
            "SELECT id, CAST(id AS STRING) AS s, id % 3 = 0 AS b, IF(id % 5 = 0, NULL, id * 0.5) AS d "
            "FROM range(2500)"
        )
        fetched = rows(cur)
        assert len(fetched) == 2500
        assert fetched[10] == (10, "10", False, None) and fetched[11] == (11, "11", False, 5.5)


# metadata ----------------------------------------------------------------------------------------
def _metadata(conn, call: str, **fields) -> tuple[list[str], list[tuple]]:
    from TCLIService import ttypes

    request = getattr(ttypes, f"T{call}Req")(sessionHandle=conn.sessionHandle, **fields)
    resp = getattr(conn.client, call)(request)
    assert resp.status.statusCode == 0, resp.status.errorMessage
    meta = conn.client.GetResultSetMetadata(
        ttypes.TGetResultSetMetadataReq(operationHandle=resp.operationHandle)
    )
    names = [c.columnName for c in meta.schema.columns]
    _, batch = _thrift_fetch(conn, resp.operationHandle, 10000)
    return names, batch


def test_metadata_calls_list_arctic_tables_and_columns(server, shop):
    with server.connect() as conn:
        names, schemas = _metadata(conn, "GetSchemas", schemaName="sh%")
        assert names[:2] == ["TABLE_SCHEM", "TABLE_CATALOG"] and ("shop", "") in schemas
        names, tables = _metadata(conn, "GetTables", schemaName="shop", tableName="%", tableTypes=["TABLE"])
        assert names[:4] == ["TABLE_CAT", "TABLE_SCHEM", "TABLE_NAME", "TABLE_TYPE"]
        assert [t[1:4] for t in tables] == [("shop", "orders", "TABLE")]
        names, columns = _metadata(conn, "GetColumns", schemaName="shop", tableName="orders", columnName="%")
        by_name = {c[names.index("COLUMN_NAME")]: dict(zip(names, c)) for c in columns}
        assert list(by_name) == ["id", "status", "amount", "ts"]
        assert by_name["id"]["DATA_TYPE"] == -5 and by_name["id"]["IS_NULLABLE"] == "NO"
        assert by_name["amount"]["TYPE_NAME"] == "DECIMAL(10,2)" and by_name["amount"]["DECIMAL_DIGITS"] == 2
        assert by_name["ts"]["ORDINAL_POSITION"] == 4
        _, keys = _metadata(conn, "GetPrimaryKeys", schemaName="shop", tableName="orders")
        assert [k[3:5] for k in keys] == [("id", 1)]
        names, types = _metadata(conn, "GetTypeInfo")
        assert {"BIGINT", "STRING", "DECIMAL", "TIMESTAMP"} <= {t[0] for t in types}
        assert names[:2] == ["TYPE_NAME", "DATA_TYPE"]
        names, catalogs = _metadata(conn, "GetCatalogs")
        assert names == ["TABLE_CAT"] and catalogs == []
        _, table_types = _metadata(conn, "GetTableTypes")
        assert ("TABLE",) in table_types
        # A view over an arctic table is arctic's: a BI tool's browser sees it and its columns.
        cur = conn.cursor()
        cur.execute(
            "CREATE VIEW shop.paid_orders AS SELECT id, amount FROM shop.orders WHERE status = 'paid'"
        )
        try:
            _, views = _metadata(conn, "GetTables", schemaName="shop", tableName="%", tableTypes=["VIEW"])
            assert [t[1:4] for t in views] == [("shop", "paid_orders", "VIEW")]
            names, columns = _metadata(
                conn, "GetColumns", schemaName="shop", tableName="paid_orders", columnName="%"
            )
            assert [c[names.index("COLUMN_NAME")] for c in columns] == ["id", "amount"]
        finally:
            cur.execute("DROP VIEW shop.paid_orders")


def test_sqlalchemy_hive_dialect_inspects_and_queries(server, shop):
    import sqlalchemy

    engine = sqlalchemy.create_engine(f"hive://tester@127.0.0.1:{server.port}/shop")
    try:
        inspector = sqlalchemy.inspect(engine)
        assert "shop" in inspector.get_schema_names()
        # PyHive's get_table_names takes SHOW TABLES' first column, which on Spark's Thrift server
        # (and so here) is the database, not the table: a PyHive limitation with Spark, not checked.
        assert inspector.has_table("orders", schema="shop")
        columns = inspector.get_columns("orders", schema="shop")
        assert [c["name"] for c in columns] == ["id", "status", "amount", "ts"]
        with engine.connect() as conn:
            result = conn.execute(
                sqlalchemy.text("SELECT id, status FROM orders VERSION AS OF 2 ORDER BY id")
            )
            assert [tuple(r) for r in result] == [(1, "paid"), (2, "new")]
    finally:
        engine.dispose()


# beeline (JDBC) ----------------------------------------------------------------------------------
def test_beeline_over_jdbc(server, shop, tmp_path):
    script = tmp_path / "script.sql"
    script.write_text(
        "SELECT id, status FROM orders VERSION AS OF 1 ORDER BY id;\n"
        "SELECT count(*) AS n FROM orders;\n"
        "SELECT * FROM no_such_beeline_table;\n"
        "!tables\n"
        "!primarykeys orders\n",
        encoding="utf-8",
    )
    result = run_beeline(server.port, "shop", ["--force=true", "--outputformat=csv2", "-f", str(script)])
    out = result.stdout + result.stderr
    assert "Connected to: Spark SQL" in out, out[-3000:]
    assert "id,status\n1,new\n2,new" in result.stdout
    assert "n\n1\n" in result.stdout
    assert "no_such_beeline_table" in out and "state=42P01" in out
    assert ",shop,orders,TABLE," in result.stdout
    assert ",shop,orders,id,1,orders_pk" in result.stdout
    assert server.alive()


# binding and authentication ----------------------------------------------------------------------
def test_server_listens_on_loopback_only(server):
    listening = []
    with open("/proc/net/tcp", encoding="ascii") as f:
        for line in f.read().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port = local.split(":")
            if int(port, 16) == server.port and state == "0A":  # LISTEN
                listening.append(socket.inet_ntoa(struct.pack("<I", int(address, 16))))
    assert listening == ["127.0.0.1"]


def test_nosasl_clients_work_on_a_none_server(server):
    with server.connect(auth="NOSASL") as conn:
        cur = conn.cursor()
        cur.execute("SELECT 'plain thrift'")
        assert rows(cur) == [("plain thrift",)]


def test_bad_arguments_fail_before_spark_starts(tmp_path):
    import subprocess
    import sys

    readable = tmp_path / "passwords"
    readable.write_text("alice:s3cret\n", encoding="utf-8")
    readable.chmod(0o644)

    for args, message in (
        (["--auth", "PLAIN"], "--auth PLAIN needs --password-file"),
        (["--auth", "PLAIN", "--password-file", str(tmp_path / "missing")], "Cannot read password file"),
        (["--port", "70000"], "--port must be between 0 and 65535"),
        (
            ["--auth", "PLAIN", "--password-file", str(readable)],
            f"Password file {readable} is accessible by group or others (mode 0644)",
        ),
        (["--max-connections", "-1"], "--max-connections must be 0 or more"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "arctic_sql.frontends.cli", "thriftserver", *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 2 and f"Error: {message}" in result.stderr, result.stderr
