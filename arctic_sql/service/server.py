"""``arctic-sql service``: the management service as one long-running process.

    arctic-sql service --warehouse DIR [catalog and Spark options as the shell]
                       [--host 127.0.0.1] [--port 8080] [--token-file F] [--protect-reads]
                       [--optimizer [--group NAME] [--interval S] [--policy quota|balanced]]

Serves the REST API (``/api/v1``, described at ``/openapi.json``), ``/metrics`` and the dashboard
(``/``). Reads use table metadata only; Spark starts for the first optimize asked for, or at once
with ``--optimizer``, which also runs the background optimizer of ``--group`` in this process. It
listens on loopback unless ``--host`` says otherwise; ``--port 0`` picks a free port. Once it
accepts connections it prints ``arctic-sql service listening on http://HOST:PORT``.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import stat
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from arctic_sql.options import add_connect_arguments, check_connect_args, connect_options, load_catalog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SERVICE_MODULES = ("fastapi", "uvicorn", "prometheus_client")
log = logging.getLogger("arctic_sql.service")


def build_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="arctic-sql service",
        description="Serve the REST API, Prometheus metrics and the dashboard of a warehouse's tables.",
    )
    add_connect_arguments(parser)
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: 127.0.0.1, loopback only; 0.0.0.0 for every interface)",
    )
    parser.add_argument("--port", type=int, default=8080, help="port (default: 8080; 0 picks a free one)")
    parser.add_argument(
        "--token-file",
        metavar="F",
        help="file holding the bearer token every POST needs (without it, changes are refused)",
    )
    parser.add_argument("--protect-reads", action="store_true", help="require the token for reads too")
    parser.add_argument("--optimizer", action="store_true", help="also run the background optimizer here")
    parser.add_argument("--group", default="default", help="optimizer group to serve with --optimizer")
    parser.add_argument(
        "--interval", type=float, default=10.0, metavar="S", help="seconds between optimizer rounds"
    )
    parser.add_argument(
        "--policy", choices=("quota", "balanced"), default="quota", help="optimizer scheduling"
    )
    parser.add_argument(
        "--cores", type=int, default=None, help="cores of the optimizer group (default: Spark's)"
    )
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    return parser


def read_token(path: str) -> str:
    """The token in ``path`` (surrounding whitespace dropped); refuses an empty or world-readable file."""
    mode = os.stat(path).st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ValueError(f"--token-file {path} is readable by others; chmod 600 it")
    with open(path, encoding="utf-8") as f:
        token = f.read().strip()
    if len(token) < 8:
        raise ValueError(f"--token-file {path} holds no token of 8 characters or more")
    return token


class LazySpark:
    """The Spark session, started on first use (reads never need it), once."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self._spark: SparkSession | None = None
        self._lock = threading.Lock()

    def __call__(self) -> SparkSession:
        with self._lock:
            if self._spark is None:
                import arctic_sql

                log.info("starting Spark")
                self._spark = arctic_sql.connect(
                    **connect_options(self.args, {"spark.ui.showConsoleProgress": "false"})
                ).spark
            return self._spark

    def stop(self) -> None:
        if self._spark is not None:
            self._spark.stop()


def _listen(host: str, port: int) -> socket.socket:
    """Bind first, so ``--port 0`` can be reported and a taken port fails before anything starts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


def _start_optimizer(
    args: argparse.Namespace, spark: LazySpark, catalog: Any
) -> tuple[Any, threading.Thread]:
    from arctic_sql.optimizer.service import Service
    from arctic_sql.session import view_refresher

    refresh = view_refresher(spark(), catalog)  # refresh.interval of materialized views
    service = Service(spark(), catalog, args.group, args.policy, args.cores, refresh=refresh)
    thread = threading.Thread(target=service.run, args=(args.interval,), name="arctic-optimizer", daemon=True)
    thread.start()
    return service, thread


def _warm(ctx: Any) -> None:
    try:
        ctx.cache.all()
    except Exception as e:  # noqa: BLE001 - the first request reports what is wrong
        log.warning("warming the table cache failed: %s", str(e).splitlines()[0] if str(e) else e)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_arg_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    check_connect_args(parser, args)
    from arctic_sql.extras import install_hint, missing_module

    if missing_module(SERVICE_MODULES) is not None:
        sys.stderr.write(install_hint("arctic-sql service", "service") + "\n")
        return 2
    if args.interval <= 0:
        parser.error(f"--interval must be positive, got {args.interval}")
    if args.protect_reads and args.token_file is None:
        parser.error("--protect-reads needs --token-file")
    try:
        token = read_token(args.token_file) if args.token_file else None
    except (OSError, ValueError) as e:
        sys.stderr.write(f"Error: {e}\n")
        return 2
    logging.basicConfig(
        level=args.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("py4j", "pyiceberg", "urllib3", "arctic_sql.optimizer.process"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return _serve(args, token)


def _serve(args: argparse.Namespace, token: str | None) -> int:
    import uvicorn

    from arctic_sql.service.api import ServiceContext, create_app
    from arctic_sql.table.catalog import ArcticCatalog

    options = connect_options(args)
    try:
        catalog = ArcticCatalog(
            load_catalog(
                options["warehouse"],
                options.get("catalog_name", "arctic"),
                options["catalog_properties"],
                None,
            )
        )
        sock = _listen(args.host, args.port)
    except Exception as e:  # noqa: BLE001 - an unreachable catalog, a taken port, an unknown host
        sys.stderr.write(f"Error: cannot start the service: {str(e).splitlines()[0] if str(e) else e}\n")
        return 1
    spark = LazySpark(args)
    ctx = ServiceContext(catalog, token=token, protect_reads=args.protect_reads, spark=spark)
    optimizer = None
    if args.optimizer:
        optimizer, _ = _start_optimizer(args, spark, catalog)
        ctx.spark_started.set()
        ctx.optimizer_groups[args.group] = {
            "cores": optimizer.cores,
            "policy": args.policy,
            "interval_s": args.interval,
        }
    # Read every table's metadata once in the background: the first listing then comes from the cache.
    threading.Thread(target=_warm, args=(ctx,), name="arctic-service-warm-up", daemon=True).start()
    config = uvicorn.Config(create_app(ctx), log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    host, port = sock.getsockname()[:2]
    print(
        f"arctic-sql service listening on http://{host}:{port} (warehouse {options['warehouse']})", flush=True
    )
    try:
        server.run(sockets=[sock])
    finally:
        if optimizer is not None:
            optimizer.stopping.set()
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
