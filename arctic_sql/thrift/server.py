"""``arctic-sql thriftserver``: a HiveServer2 (Thrift/JDBC) endpoint over arctic-sql.

    arctic-sql thriftserver [--host 127.0.0.1] [--port 10000] [--warehouse DIR] [--catalog-... ]
                            [--master URL] [--conf KEY=VALUE ...]
                            [--auth NONE|NOSASL|PLAIN --password-file FILE]
                            [--idle-timeout 900] [--max-connections 64] [--max-frame-bytes 16777216]
                            [--login-attempts 5] [--login-lockout 1]
                            [--allow-external-locations] [--allow-unsafe-functions] [--allow-set-any]
                            [--trusted] [--allow-readable-password-file]
    arctic-sql thriftserver --hash-password < password     # prints a password file entry's hash

Clients connect as to Spark's own Thrift server: ``beeline -u jdbc:hive2://127.0.0.1:10000/default``,
PyHive ``hive.connect('127.0.0.1', 10000)``, SQLAlchemy ``hive://127.0.0.1:10000/default``, dbt-spark
with ``method: thrift``. Every statement runs through an arctic-sql session, so CALL, time travel and
DML on primary-key tables work. Authentication as in HiveServer2: ``NONE`` takes SASL PLAIN with any
credentials (and, leniently, plain unframed clients too), ``NOSASL`` plain unframed Thrift only,
``PLAIN`` SASL PLAIN checked against a password file (PyHive: ``auth='CUSTOM'``; see auth.py for its
format, salted hashes and the lockout). The server listens on loopback unless ``--host`` says
otherwise; ``--port 0`` picks a free port. It prints ``... listening on HOST:PORT`` once clients can
connect. The catalog and Spark options are the shell's (:mod:`arctic_sql.options`): any pyiceberg
catalog (``--catalog-type rest --catalog-uri http://...``), any Spark master (``--master spark://...``).

Clients get SQL on the warehouse, not the machine. By default (each rule has an option that relaxes
it for trusted setups, ``--trusted`` relaxes the statement rules at once):

- statements are checked before they run (policy.py): paths stay in new folders of the warehouse
  (``--allow-external-locations``), no Java calls, jars or class-based functions
  (``--allow-unsafe-functions``), ``SET`` only for an allow-list of session settings
  (``--allow-set-any``); client sessions run with ``spark.sql.runSQLOnFiles`` and
  ``spark.sql.variable.substitute`` off (the first two options turn them back on);
- a connection idle for ``--idle-timeout`` seconds after login is closed (0: never); at most
  ``--max-connections`` are open at once (0: no cap), the next is closed at once; a Thrift frame or
  string longer than ``--max-frame-bytes`` closes its connection before it is read;
- ``--login-attempts`` failed logins for a user (four times as many for an address) lock it out for
  ``--login-lockout`` seconds, doubling with each further failure (0 attempts: no lockout); failed
  logins are logged at WARNING with the user and the address;
- a password file that group or others can access is refused (``--allow-readable-password-file``);
- a session's user is the authenticated one, not the name the client puts in OpenSession.
"""

from __future__ import annotations

import argparse
import getpass
import logging
import math
import os
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from arctic_sql.options import (
    add_connect_arguments,
    catalog_options,
    check_connect_args,
    connect_options,
    warehouse_path,
)
from arctic_sql.thrift.auth import (
    Credentials,
    LoginThrottle,
    PasswordFileError,
    hash_password,
    read_password_file,
)

if TYPE_CHECKING:
    from arctic_sql.thrift.policy import StatementPolicy

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
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, loopback only)"
    )
    parser.add_argument(
        "--port", type=int, default=10000, help="port to listen on; 0 picks a free one (default 10000)"
    )
    parser.add_argument(
        "--auth",
        default="NONE",
        type=str.upper,
        choices=AUTH_MODES,
        help="NONE (SASL, any user), NOSASL, or PLAIN (SASL, checked against --password-file)",
    )
    parser.add_argument("--password-file", help="for --auth PLAIN: a file of user:password lines")
    parser.add_argument("--debug", action="store_true", help="log every call and Spark's warnings")
    add_connect_arguments(parser)
    limits = parser.add_argument_group("connection limits")
    limits.add_argument(
        "--idle-timeout",
        type=float,
        default=900,
        metavar="SECONDS",
        help="close a connection idle this long after login (default 900; 0: never)",
    )
    limits.add_argument(
        "--max-connections",
        type=int,
        default=64,
        metavar="N",
        help="connections open at once; the next is closed at once (default 64; 0: no cap)",
    )
    limits.add_argument(
        "--max-frame-bytes",
        type=int,
        default=16 * 1024 * 1024,
        metavar="N",
        help="largest Thrift frame or string a client may send (default 16 MiB)",
    )
    limits.add_argument(
        "--login-attempts",
        type=int,
        default=5,
        metavar="N",
        help="failed logins for a user (4x for an address) before a lockout (default 5; 0: none)",
    )
    limits.add_argument(
        "--login-lockout",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="the first lockout; it doubles with each further failure, up to 15 min (default 1)",
    )
    trust = parser.add_argument_group("relaxing the rules for trusted setups")
    trust.add_argument(
        "--allow-external-locations",
        action="store_true",
        help="let clients use paths outside the warehouse (LOCATION, LOAD DATA, file queries)",
    )
    trust.add_argument(
        "--allow-unsafe-functions",
        action="store_true",
        help="let clients call reflect/java_method, ADD JAR/FILE/ARCHIVE, CREATE FUNCTION ... USING JAR",
    )
    trust.add_argument("--allow-set-any", action="store_true", help="let clients SET any session setting")
    trust.add_argument("--trusted", action="store_true", help="all three of the above")
    trust.add_argument(
        "--allow-readable-password-file",
        action="store_true",
        help="accept a password file that group or others can access",
    )
    parser.add_argument(
        "--hash-password",
        action="store_true",
        help="read a password from stdin, print its salted hash for the password file, exit",
    )
    return parser


@dataclass(frozen=True)
class ConnectionLimits:
    """What one connection may hold: idle time after login, frame size; and how many connections."""

    idle_timeout_s: float = 900.0
    max_connections: int = 64
    max_frame_bytes: int = 16 * 1024 * 1024


def _limits(args: argparse.Namespace) -> ConnectionLimits:
    for name in ("idle_timeout", "max_connections", "login_attempts", "login_lockout"):
        if getattr(args, name) < 0:
            raise UsageError(f"--{name.replace('_', '-')} must be 0 or more, got {getattr(args, name)}")
    if args.max_frame_bytes < 1024:
        raise UsageError(f"--max-frame-bytes must be at least 1024, got {args.max_frame_bytes}")
    return ConnectionLimits(args.idle_timeout, args.max_connections, args.max_frame_bytes)


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

    def __init__(
        self,
        service: Any,
        host: str,
        port: int,
        auth: str,
        credentials: Credentials,
        limits: ConnectionLimits | None = None,
        throttle: LoginThrottle | None = None,
    ) -> None:
        from thrift.transport.TSocket import TServerSocket

        self.service = service
        self.auth = auth
        self.credentials = credentials
        self.limits = limits or ConnectionLimits()
        self.throttle = throttle or LoginThrottle(attempts=0, lockout_s=0)
        self._listener = TServerSocket(host=host, port=port)
        self._listener.listen()
        self.host = host
        self.port = self._listener.handle.getsockname()[1]
        self._stopped = threading.Event()
        self._open = 0
        self._open_lock = threading.Lock()

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
            if not self._admit(client):
                continue
            threading.Thread(
                target=self._serve, args=(client,), name="arctic-thrift-conn", daemon=True
            ).start()

    def stop(self) -> None:
        self._stopped.set()
        self._listener.close()

    def _admit(self, client: Any) -> bool:
        """Count the connection in, or close it at once when ``max_connections`` are open."""
        cap = self.limits.max_connections
        with self._open_lock:
            if not cap or self._open < cap:
                self._open += 1
                return True
        log.warning(
            "connection from %s refused: %d connections are open (--max-connections %d)",
            _address(client),
            cap,
            cap,
        )
        client.close()
        return False

    def _transport(self, client: Any) -> tuple[Any, str | None] | None:
        from thrift.transport.TTransport import TBufferedTransport

        from arctic_sql.thrift.sasl import AuthenticationFailed, SaslServerTransport

        # A client that connects and says nothing must not hold a thread forever: bound the wait for
        # its first bytes and for the SASL handshake; after login, the idle timeout bounds it.
        client.setTimeout(HANDSHAKE_TIMEOUT_S * 1000)
        first = client.handle.recv(1, socket.MSG_PEEK)
        if not first:
            return None
        if first[0] == _BINARY_VERSION_BYTE and self.auth in ("NOSASL", "NONE"):
            self._idle_timeout(client)
            return TBufferedTransport(client), None
        if first[0] == _SASL_START and self.auth in ("NONE", "PLAIN"):
            address = _address(client)
            transport = SaslServerTransport(
                client,
                lambda user, password: self._login(user, password, address),
                self.limits.max_frame_bytes,
            )
            try:
                transport.handshake()
            except AuthenticationFailed as e:
                log.info("connection from %s refused: %s", address, e)
                return None
            self._idle_timeout(client)
            return transport, transport.user
        log.info(
            "connection refused: a %s client on a server with --auth %s",
            "SASL" if first[0] == _SASL_START else "plain Thrift",
            self.auth,
        )
        return None

    def _login(self, user: str, password: str, address: str) -> str | None:
        """None if ``user`` may log in from ``address``, else the reason the client is told."""
        host = address.rpartition(":")[0]
        wait = self.throttle.wait_s(user, host)
        if wait > 0:
            log.warning(
                "login refused for user %r from %s: locked out for %d s more after failed logins",
                user,
                address,
                math.ceil(wait),
            )
            return f"Too many failed logins; retry in {math.ceil(wait)} s"
        if self.credentials.check(user, password):
            self.throttle.succeeded(user, host)
            return None
        if self.credentials.required:
            self.throttle.failed(user, host)
            log.warning("failed login for user %r from %s", user, address)
        return "Error validating the login"

    def _idle_timeout(self, client: Any) -> None:
        idle = self.limits.idle_timeout_s
        client.setTimeout(idle * 1000 if idle else None)

    def _serve(self, client: Any) -> None:
        from TCLIService.TCLIService import Processor
        from thrift.protocol.TBinaryProtocol import TBinaryProtocol
        from thrift.protocol.TProtocol import TProtocolException
        from thrift.transport.TTransport import TTransportException

        connection = None
        address = _address(client)
        try:
            opened = self._transport(client)
            if opened is None:
                return
            transport, user = opened
            connection = _Connection(self.service, user)
            processor = Processor(connection)
            limit = self.limits.max_frame_bytes
            # strictRead: HiveServer2 clients send versioned messages; an old-style one would read its
            # name with no length check.
            protocol = TBinaryProtocol(
                transport, strictRead=True, string_length_limit=limit, container_length_limit=limit
            )
            while not self._stopped.is_set():
                processor.process(protocol, protocol)
        except TTransportException as e:
            if isinstance(e.inner, TimeoutError) and connection is not None:
                log.info(
                    "connection from %s closed: idle for %g s (--idle-timeout)",
                    address,
                    self.limits.idle_timeout_s,
                )
            elif e.type == TTransportException.SIZE_LIMIT:
                log.warning("connection from %s closed: %s (--max-frame-bytes)", address, e.message)
            # else: the client went away, or never spoke
        except TProtocolException as e:
            if e.type == TProtocolException.SIZE_LIMIT:
                log.warning("connection from %s closed: %s (--max-frame-bytes)", address, e.message)
            else:
                log.info("connection from %s closed: %s", address, e.message)
        except (ConnectionError, EOFError, TimeoutError):
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
            with self._open_lock:
                self._open -= 1


def _address(client: Any) -> str:
    try:
        host, port = client.handle.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return "an unknown address"


def _new_session_factory(args: argparse.Namespace) -> Any:
    """Each client's arctic session: on its own SparkSession, the server's catalog options."""
    options = catalog_options(args)

    def new_session(spark: Any) -> Any:
        import arctic_sql

        return arctic_sql.connect(spark=spark, **options)

    return new_session


@dataclass(frozen=True)
class _Settings:
    credentials: Credentials
    limits: ConnectionLimits
    throttle: LoginThrottle
    policy: StatementPolicy


def _settings(args: argparse.Namespace, warehouse: str) -> _Settings:
    """Everything the arguments say, checked before Spark starts (raises UsageError)."""
    from arctic_sql.thrift.policy import StatementPolicy

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be between 0 and 65535, got {args.port}")
    if args.auth == "PLAIN" and not args.password_file:
        raise UsageError("--auth PLAIN needs --password-file FILE (lines of user:password)")
    if args.password_file and args.auth != "PLAIN":
        raise UsageError("--password-file only applies to --auth PLAIN")
    if args.password_file and _is_below(args.password_file, warehouse):
        raise UsageError(
            f"Password file {args.password_file} is inside the warehouse {warehouse}, where "
            "clients can read it; keep it elsewhere"
        )
    try:
        entries = (
            read_password_file(args.password_file, args.allow_readable_password_file)
            if args.auth == "PLAIN"
            else None
        )
    except PasswordFileError as e:
        raise UsageError(str(e)) from None
    policy = StatementPolicy(
        warehouse,
        allow_external_locations=args.allow_external_locations or args.trusted,
        allow_unsafe_functions=args.allow_unsafe_functions or args.trusted,
        allow_set_any=args.allow_set_any or args.trusted,
    )
    return _Settings(
        Credentials(entries), _limits(args), LoginThrottle(args.login_attempts, args.login_lockout), policy
    )


def _is_below(path: str, folder: str) -> bool:
    real, root = os.path.realpath(path), os.path.realpath(folder)
    return real.startswith(root.rstrip(os.sep) + os.sep)


def _print_hash() -> int:
    password = getpass.getpass("Password: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\n")
    if not password:
        sys.stderr.write("Error: --hash-password reads a password from stdin; got none\n")
        return 2
    print(hash_password(password))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_arg_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    check_connect_args(parser, args)
    if args.hash_password:
        return _print_hash()
    from arctic_sql.extras import SERVER_MODULES, install_hint, missing_module

    if missing_module(SERVER_MODULES) is not None:
        sys.stderr.write(install_hint("arctic-sql thriftserver", "server") + "\n")
        return 2
    warehouse = warehouse_path(args.warehouse)
    try:
        settings = _settings(args, warehouse)
    except UsageError as e:
        sys.stderr.write(f"Error: {e}\n")
        return 2
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("py4j", "pyiceberg", "thrift"):
        logging.getLogger(noisy).setLevel(logging.WARNING if args.debug else logging.ERROR)

    import arctic_sql
    from arctic_sql.thrift.service import ArcticThriftService

    # The first session starts Spark and opens the catalog: a bad catalog fails now, not at the first client.
    try:
        spark = arctic_sql.connect(**connect_options(args)).spark
    except Exception as e:  # noqa: BLE001 - no Java, an unreachable master or catalog, ...
        from arctic_sql.spark import error_message

        sys.stderr.write(f"Error: cannot start Spark or open the catalog: {error_message(e)}\n")
        return 1
    service = ArcticThriftService(spark, _new_session_factory(args), policy=settings.policy)
    try:
        server = ThriftServer(
            service, args.host, args.port, args.auth, settings.credentials, settings.limits, settings.throttle
        )
    except Exception as e:  # noqa: BLE001 - the port is taken, the host is unknown, ...
        sys.stderr.write(f"Error: cannot listen on {args.host}:{args.port}: {e}\n")
        spark.stop()
        return 1

    def shut_down(signum: int, frame: Any) -> None:
        server.stop()

    signal.signal(signal.SIGTERM, shut_down)
    signal.signal(signal.SIGINT, shut_down)
    print(
        f"arctic-sql Thrift server listening on {args.host}:{server.port} (auth {args.auth}, "
        f"warehouse {warehouse})",
        flush=True,
    )
    try:
        server.serve_forever()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
