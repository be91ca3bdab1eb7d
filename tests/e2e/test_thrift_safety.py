"""What a Thrift client cannot do, with PyHive as the client: reach paths outside the warehouse, run
Java or load jars, change settings beyond an allow-list; and the connection limits and logins.

The statement rules run on the shared default (strict) server; the limits and logins on one PLAIN
server with small limits (a private password file: alice plain, bob hashed).
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import time

import pytest
from thrift_harness import ServerProcess, rows, run_beeline, shared_server

pytestmark = pytest.mark.spark

IDLE_TIMEOUT_S = 10
MAX_CONNECTIONS = 3
LOGIN_ATTEMPTS = 3
WAIT_S = 60  # bound on waiting for the server to close a socket; the machine is slow, not the rule


@pytest.fixture(scope="module")
def server() -> ServerProcess:
    return shared_server()


def _refused(cursor, sql: str) -> str:
    """The one-line message of a statement the policy refuses."""
    from pyhive.exc import OperationalError

    with pytest.raises(OperationalError) as refused:
        cursor.execute(sql)
    status = refused.value.args[0].status
    assert status.sqlState == "42501" and "\n" not in status.errorMessage, status
    return status.errorMessage


# statements ----------------------------------------------------------------------------------------
def test_clients_cannot_read_files_outside_the_warehouse(server, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("top-secret\n", encoding="utf-8")
    with server.connect() as conn:
        cur = conn.cursor()
        for sql in (
            f"SELECT * FROM text.`{secret}`",
            f"SELECT * FROM csv.`file://{secret}`",
            f"SELECT * FROM IDENTIFIER('text.`{secret}`')",
        ):
            assert "(--allow-external-locations relaxes this)" in _refused(cur, sql)
        # defence in depth: the session itself runs without file queries and ${env:...} substitution
        cur.execute("SET spark.sql.runSQLOnFiles")
        assert rows(cur)[0][1] == "false"
        cur.execute("SELECT '${env:HOME}' AS home")
        assert rows(cur) == [("${env:HOME}",)]


def test_locations_are_confined_to_the_warehouse(server, tmp_path):
    outside = tmp_path / "outside"
    link = server.warehouse / "link-to-outside"
    os.symlink(tmp_path, link)
    with server.connect() as conn:
        cur = conn.cursor()
        cur.execute("CREATE DATABASE IF NOT EXISTS confined")
        message = _refused(cur, f"CREATE TABLE confined.t (a INT) USING parquet LOCATION '{outside}'")
        assert message == (
            f"LOCATION '{outside}' is outside the warehouse {os.path.realpath(server.warehouse)}; "
            f"the server refuses it (--allow-external-locations relaxes this)"
        )
        _refused(cur, f"CREATE TABLE confined.k (a INT, PRIMARY KEY (a)) LOCATION '{outside}'")
        _refused(
            cur, f"CREATE TABLE confined.t (a INT) USING parquet LOCATION '{server.warehouse}/../outside'"
        )
        _refused(cur, f"CREATE TABLE confined.t (a INT) USING parquet LOCATION '{link}/outside'")
        _refused(cur, f"CREATE DATABASE elsewhere LOCATION '{outside}'")
        # inside, but over what the warehouse already holds: a DROP or an overwrite would delete it
        assert "is the warehouse itself" in _refused(
            cur, f"CREATE TABLE confined.w (value STRING) USING text LOCATION '{server.warehouse}'"
        )
        assert "is outside the warehouse's folder for such tables" in _refused(
            cur, f"CREATE TABLE confined.c (value STRING) USING text LOCATION '{server.warehouse}/catalog.db'"
        )
        # a folder the arctic catalog may give a database: its tables would be inside this one's
        assert "the rest of the warehouse is the arctic catalog's" in _refused(
            cur,
            f"CREATE TABLE confined.sales (a INT, p INT) USING parquet PARTITIONED BY (p) "
            f"LOCATION '{server.warehouse}/sales'",
        )
        _refused(cur, f"INSERT OVERWRITE LOCAL DIRECTORY '{outside}' SELECT 1")
        _refused(cur, f"LOAD DATA LOCAL INPATH '{outside}' INTO TABLE confined.t")
        assert not outside.exists()
        inside = server.warehouse / "spark-warehouse" / "confined-inside"
        cur.execute(f"CREATE TABLE confined.inside (a INT) USING parquet LOCATION '{inside}'")
        cur.execute("INSERT INTO confined.inside VALUES (7)")
        cur.execute("SELECT a FROM confined.inside")
        assert rows(cur) == [(7,)]
        _refused(cur, f"ALTER TABLE confined.inside SET LOCATION '{outside}'")
        cur.execute("DROP TABLE confined.inside")


def test_java_calls_jars_and_class_functions_are_refused(server, tmp_path):
    jar = tmp_path / "evil.jar"
    jar.write_bytes(b"PK\x05\x06" + b"\0" * 18)  # an empty zip
    with server.connect() as conn:
        cur = conn.cursor()
        for sql in (
            "SELECT reflect('java.lang.System', 'getProperty', 'user.home')",
            "SELECT java_method('java.lang.System', 'getenv', 'HOME')",
            "SELECT try_reflect('java.lang.System', 'getProperty', 'user.home')",
            f"ADD JAR '{jar}'",
            f"ADD FILE '{jar}'",
            f"CREATE FUNCTION evil AS 'com.evil.F' USING JAR '{jar}'",
        ):
            assert _refused(cur, sql).endswith("(--allow-unsafe-functions relaxes this)"), sql
        cur.execute("LIST JAR")
        assert rows(cur) == []
        cur.execute("SELECT 'still answering'")
        assert rows(cur) == [("still answering",)]


def test_set_is_limited_to_an_allow_list(server):
    from TCLIService.ttypes import TExecuteStatementReq

    with server.connect() as conn:
        cur = conn.cursor()
        cur.execute("SET spark.sql.shuffle.partitions=5")
        cur.execute("SET spark.sql.session.timeZone = UTC")
        for sql in ("SET spark.sql.runSQLOnFiles=true", "SET spark.sql.catalog.evil=com.evil.Catalog"):
            assert _refused(cur, sql).endswith("(--allow-set-any relaxes this)")
        resp = conn.client.ExecuteStatement(
            TExecuteStatementReq(
                sessionHandle=conn.sessionHandle,
                statement="SELECT 1",
                confOverlay={"spark.sql.runSQLOnFiles": "true"},
            )
        )
        assert resp.status.sqlState == "42501" and "spark.sql.runSQLOnFiles" in resp.status.errorMessage
        cur.execute("SET spark.sql.runSQLOnFiles")
        assert rows(cur)[0][1] == "false"
        cur.execute("SET spark.sql.shuffle.partitions")
        assert rows(cur)[0][1] == "5"
    from pyhive.exc import OperationalError

    with pytest.raises(OperationalError) as refused:
        server.connect(configuration={"set:hiveconf:spark.sql.runSQLOnFiles": "true"})
    assert "spark.sql.runSQLOnFiles" in str(refused.value)


# frames ------------------------------------------------------------------------------------------
def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closes ``sock`` (within WAIT_S) without sending anything more."""
    sock.settimeout(WAIT_S)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        data += chunk
    return data


def _sasl_login(sock: socket.socket, user: str, password: str) -> int:
    """The SASL PLAIN handshake by hand; returns the server's status byte (5: COMPLETE)."""
    sock.sendall(b"\x01" + struct.pack(">I", 5) + b"PLAIN")
    response = b"\0" + user.encode() + b"\0" + password.encode()
    sock.sendall(b"\x05" + struct.pack(">I", len(response)) + response)
    header = _recv_exactly(sock, 5)
    _recv_exactly(sock, struct.unpack(">I", header[1:])[0])
    return header[0]


def test_a_frame_over_the_limit_closes_the_connection_before_it_is_read(server):
    huge = 100 * 1024 * 1024  # above the 16 MiB default, below what the server used to accept
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as sock:
        assert _sasl_login(sock, "tester", "x") == 5  # COMPLETE
        sock.sendall(struct.pack(">I", huge) + b"\x80\x01")
        assert _closed_by_server(sock)
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as sock:  # plain Thrift
        sock.sendall(b"\x80\x01\x00\x01" + struct.pack(">i", huge) + b"Open")
        assert _closed_by_server(sock)
    assert server.log_text().count("(--max-frame-bytes)") >= 2
    assert server.alive()


# logins and limits (PLAIN) -----------------------------------------------------------------------
def _hash(password: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "arctic_sql.frontends.cli", "thriftserver", "--hash-password"],
        input=password + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return result.stdout.strip()


@pytest.fixture(scope="module")
def plain_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("plain-auth")
    passwords = root / "passwords"
    entry = _hash("hunter2")
    assert entry.startswith("pbkdf2_sha256$") and "hunter2" not in entry
    passwords.write_text(f"# user:password\nalice:s3cret\nbob:{entry}\n", encoding="utf-8")
    passwords.chmod(0o600)
    options = [
        "--idle-timeout",
        str(IDLE_TIMEOUT_S),
        "--max-connections",
        str(MAX_CONNECTIONS),
        "--login-attempts",
        str(LOGIN_ATTEMPTS),
        "--login-lockout",
        "600",
    ]
    process = ServerProcess(root, auth="PLAIN", password_file=passwords, options=options).start()
    yield process
    process.stop()


def _connect(server: ServerProcess, user: str, password: str):
    return server.connect(username=user, password=password, auth="CUSTOM")


def test_plain_auth_checks_the_password_file(plain_server):
    from thrift.transport.TTransport import TTransportException

    for user, password in (("alice", "s3cret"), ("bob", "hunter2")):
        with _connect(plain_server, user, password) as conn:
            cur = conn.cursor()
            cur.execute("SELECT current_user() IS NOT NULL")
            assert rows(cur) == [(True,)]
    with pytest.raises(TTransportException):
        _connect(plain_server, "alice", "wrong")
    with pytest.raises(Exception):  # noqa: B017 - the server closes a plain-Thrift connection at once
        plain_server.connect(auth="NOSASL")
    result = run_beeline(
        plain_server.port, "default", ["-p", "s3cret", "-e", "SELECT 6 * 7 AS answer;"], user="alice"
    )
    assert "| 42 " in result.stdout, result.stdout + result.stderr[-2000:]
    refused = run_beeline(plain_server.port, "default", ["-p", "nope", "-e", "SELECT 1;"], user="alice")
    assert "Error validating the login" in refused.stdout + refused.stderr
    assert "failed login for user 'alice' from 127.0.0.1:" in plain_server.log_text()
    assert plain_server.alive()


def test_the_session_user_is_the_authenticated_one(plain_server):
    from TCLIService.ttypes import TOpenSessionReq, TProtocolVersion

    with _connect(plain_server, "alice", "s3cret") as conn:
        resp = conn.client.OpenSession(
            TOpenSessionReq(username="mallory", client_protocol=TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V8)
        )
        assert resp.status.statusCode == 0, resp.status.errorMessage
    log = plain_server.log_text()
    assert "session opened for alice" in log and "session opened for mallory" not in log


def test_repeated_failed_logins_lock_the_user_out_without_blocking_others(plain_server):
    from thrift.transport.TTransport import TTransportException

    for _ in range(LOGIN_ATTEMPTS):
        with pytest.raises(TTransportException, match="Error validating the login"):
            _connect(plain_server, "bob", "guess")
    with pytest.raises(TTransportException, match="Too many failed logins; retry in 600 s"):
        _connect(plain_server, "bob", "hunter2")  # the right password, but bob is locked out
    with _connect(plain_server, "alice", "s3cret") as conn:  # others still get in, at once
        cur = conn.cursor()
        cur.execute("SELECT 1")
        assert rows(cur) == [(1,)]
    log = plain_server.log_text()
    assert log.count("failed login for user 'bob' from 127.0.0.1:") == LOGIN_ATTEMPTS
    assert "login refused for user 'bob' from 127.0.0.1:" in log


def test_an_idle_connection_is_closed_after_the_idle_timeout(plain_server):
    conn = _connect(plain_server, "alice", "s3cret")
    try:
        cur = conn.cursor()
        cur.execute("SELECT 1")
        assert rows(cur) == [(1,)]
        assert _closed_by_server(conn._transport._trans.handle)  # the server closes it; we only wait
    finally:
        conn._transport.close()
    assert f"idle for {IDLE_TIMEOUT_S} s (--idle-timeout)" in plain_server.log_text()


def test_connections_beyond_the_cap_are_refused(plain_server):
    from thrift.transport.TTransport import TTransportException

    open_ = [_connect(plain_server, "alice", "s3cret") for _ in range(MAX_CONNECTIONS)]
    try:
        with pytest.raises(TTransportException):
            _connect(plain_server, "alice", "s3cret")
        assert (
            f"{MAX_CONNECTIONS} connections are open (--max-connections {MAX_CONNECTIONS})"
            in plain_server.log_text()
        )
        open_.pop().close()
        deadline = time.monotonic() + WAIT_S  # the server frees the slot when it sees the close
        while True:
            try:
                open_.append(_connect(plain_server, "alice", "s3cret"))
                break
            except TTransportException:
                assert time.monotonic() < deadline, "a closed connection's slot was never freed"
    finally:
        for conn in open_:
            conn.close()
