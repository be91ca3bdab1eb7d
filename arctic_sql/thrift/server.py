"""``arctic-sql thriftserver``: a HiveServer2 (Thrift/JDBC) endpoint over arctic-sql.

    arctic-sql thriftserver [--host 127.0.0.1] [--port 10000] [--warehouse DIR]
                            [--auth NONE|NOSASL|PLAIN --password-file FILE] [--conf KEY=VALUE ...]

Clients connect as to Spark's own Thrift server: ``beeline -u jdbc:hive2://127.0.0.1:10000/default``,
PyHive ``hive.connect('127.0.0.1', 10000)``, SQLAlchemy ``hive://127.0.0.1:10000/default``, dbt-spark
with ``method: thrift``. Every statement runs through an arctic-sql session, so CALL, time travel and
DML on primary-key tables work. Authentication as in HiveServer2: ``NONE`` takes SASL PLAIN with any
credentials (and, leniently, plain unframed clients too), ``NOSASL`` plain unframed Thrift only,
``PLAIN`` SASL PLAIN checked against a password file of ``user:password`` lines (PyHive:
``auth='CUSTOM'``). The server listens on loopback unless ``--host`` says otherwise; ``--port 0``
picks a free port. It prints ``... listening on HOST:PORT`` once clients can connect.
"""

from __future__ import annotations

import argparse
import hmac
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from typing import Any

AUTH_MODES = ("NONE", "NOSASL", "PLAIN")
_BINARY_VERSION_BYTE = 0x80  # the first byte of a strict TBinaryProtocol message
_SASL_START = 0x01
HANDSHAKE_TIMEOUT_S = 60

log = logging.getLogger("arctic_sql.thrift")


class UsageError(Exception):
    """Bad command-line arguments: reported as one line, exit code 2."""


def build_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="arctic-sql thriftserver",
        description="Serve arctic-sql over the HiveServer2 Thrift protocol (JDBC, PyHive, dbt-spark, BI tools).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, loopback only)")
    parser.add_argument("--port", type=int, default=10000, help="port to listen on; 0 picks a free one (default 10000)")
    parser.add_argument("--warehouse", default="./warehouse", help="warehouse folder (default ./warehouse)")
    parser.add_argument("--auth", default="NONE", type=str.upper, choices=AUTH_MODES,
                        help="NONE (SASL, any user), NOSASL, or PLAIN (SASL, checked against --password-file)")
    parser.add_argument("--password-file", help="for --auth PLAIN: a file of user:password lines")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting for the server's SparkSession (repeatable)")
    parser.add_argument("--debug", action="store_true", help="log every call and Spark's warnings")
    return parser


def read_passwords(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise UsageError(f"Cannot read password file {path}: {e.strerror}") from None
    passwords = {}
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, password = line.partition(":")
        if not sep or not user:
            raise UsageError(f"Password file {path}, line {number}: expected user:password")
        passwords[user] = password
    if not passwords:
        raise UsageError(f"Password file {path} names no user")
    return passwords


def _spark_conf(items: Sequence[str]) -> dict[str, str]:
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--conf takes KEY=VALUE, got '{item}'")
        conf[key.strip()] = value.strip()
    return conf


class Credentials:
    """Who may connect: anyone (NONE), or the users of a password file (PLAIN)."""

    def __init__(self, passwords: dict[str, str] | None) -> None:
        self._passwords = passwords

    def check(self, user: str, password: str) -> bool:
        if self._passwords is None:
            return True
        expected = self._passwords.get(user)
        return expected is not None and hmac.compare_digest(expected.encode(), password.encode())


class _Connection:
    """The handler one connection's Processor calls: the service, plus the SASL user and cleanup."""

    def __init__(self, service: Any, user: str | None) -> None:
        self._service = service
        self._user = user
        self._sessions: list[Any] = []

    def OpenSession(self, req: Any) -> Any:
        resp = self._service.OpenSession(req, self._user)
        if resp.sessionHandle is not None:
            self._sessions.append(self._service._sessions.get(resp.sessionHandle.sessionId.guid))
        return resp

    def __getattr__(self, name: str) -> Any:
        return getattr(self._service, name)

    def close(self) -> None:
        """A dropped connection closes the sessions it opened, as HiveServer2 does."""
        for session in self._sessions:
            if session is not None and session.guid in self._service._sessions:
                self._service.close_session(session)


class ThriftServer:
    """Accepts connections and serves each on its own thread with one transport (SASL or plain)."""

    def __init__(self, service: Any, host: str, port: int, auth: str, credentials: Credentials) -> None:
        from thrift.transport.TSocket import TServerSocket

        self.service = service
        self.auth = auth
        self.credentials = credentials
        self._listener = TServerSocket(host=host, port=port)
        self._listener.listen()
        self.host = host
        self.port = self._listener.handle.getsockname()[1]
        self._stopped = threading.Event()

    def serve_forever(self) -> None:
        while not self._stopped.is_set():
            try:
                client = self._listener.accept()
            except OSError:
                if self._stopped.is_set():
                    return
                raise
            if client is None:
                continue
            threading.Thread(target=self._serve, args=(client,), name="arctic-thrift-conn", daemon=True).start()

    def stop(self) -> None:
        self._stopped.set()
        self._listener.close()

    def _transport(self, client: Any) -> tuple[Any, str | None] | None:
        from thrift.transport.TTransport import TBufferedTransport

        from arctic_sql.thrift.sasl import AuthenticationFailed, SaslServerTransport

        # A client that connects and says nothing must not hold a thread forever: bound the wait for
        # its first bytes and for the SASL handshake; once a session runs, calls may be minutes apart.
        client.setTimeout(HANDSHAKE_TIMEOUT_S * 1000)
        first = client.handle.recv(1, socket.MSG_PEEK)
        if not first:
            return None
        if first[0] == _BINARY_VERSION_BYTE and self.auth in ("NOSASL", "NONE"):
            client.setTimeout(None)
            return TBufferedTransport(client), None
        if first[0] == _SASL_START and self.auth in ("NONE", "PLAIN"):
            transport = SaslServerTransport(client, self.credentials.check)
            try:
                transport.handshake()
            except AuthenticationFailed as e:
                log.info("connection refused: %s", e)
                return None
            client.setTimeout(None)
            return transport, transport.user
        log.info("connection refused: a %s client on a server with --auth %s",
                 "SASL" if first[0] == _SASL_START else "plain Thrift", self.auth)
        return None

    def _serve(self, client: Any) -> None:
        from TCLIService.TCLIService import Processor
        from thrift.protocol.TBinaryProtocol import TBinaryProtocol
        from thrift.transport.TTransport import TTransportException

        connection = None
        try:
            opened = self._transport(client)
            if opened is None:
                return
            transport, user = opened
            connection = _Connection(self.service, user)
            processor = Processor(connection)
            protocol = TBinaryProtocol(transport)
            while not self._stopped.is_set():
                processor.process(protocol, protocol)
        except (TTransportException, ConnectionError, EOFError, TimeoutError):
            pass  # the client went away, or never spoke
        except Exception:
            log.warning("connection failed", exc_info=True)
        finally:
            if connection is not None:
                try:
                    connection.close()
                except Exception:
                    log.warning("closing the sessions of a dropped connection failed", exc_info=True)
            client.close()


def _new_session_factory(warehouse: str) -> Any:
    def new_session(spark: Any) -> Any:
        import arctic_sql

        return arctic_sql.connect(warehouse=warehouse, spark=spark)

    return new_session


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_arg_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        if not 0 <= args.port <= 65535:
            raise UsageError(f"--port must be between 0 and 65535, got {args.port}")
        if args.auth == "PLAIN" and not args.password_file:
            raise UsageError("--auth PLAIN needs --password-file FILE (lines of user:password)")
        if args.password_file and args.auth != "PLAIN":
            raise UsageError("--password-file only applies to --auth PLAIN")
        credentials = Credentials(read_passwords(args.password_file) if args.auth == "PLAIN" else None)
        conf = _spark_conf(args.conf)
    except UsageError as e:
        sys.stderr.write(f"Error: {e}\n")
        return 2
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    for noisy in ("py4j", "pyiceberg", "thrift"):
        logging.getLogger(noisy).setLevel(logging.WARNING if args.debug else logging.ERROR)

    from arctic_sql.spark import configure, local_session
    from arctic_sql.thrift.service import ArcticThriftService

    warehouse = os.path.abspath(args.warehouse)
    spark = local_session(warehouse, conf)
    configure(spark)
    new_session = _new_session_factory(warehouse)
    new_session(spark)  # fail now, not at the first client, if the catalog cannot be opened
    service = ArcticThriftService(spark, new_session)
    try:
        server = ThriftServer(service, args.host, args.port, args.auth, credentials)
    except Exception as e:  # noqa: BLE001 - the port is taken, the host is unknown, ...
        sys.stderr.write(f"Error: cannot listen on {args.host}:{args.port}: {e}\n")
        spark.stop()
        return 1

    def shut_down(signum: int, frame: Any) -> None:
        server.stop()

    signal.signal(signal.SIGTERM, shut_down)
    signal.signal(signal.SIGINT, shut_down)
    print(f"arctic-sql Thrift server listening on {args.host}:{server.port} (auth {args.auth}, "
          f"warehouse {warehouse})", flush=True)
    try:
        server.serve_forever()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
