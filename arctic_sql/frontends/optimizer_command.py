"""``arctic-sql optimizer --warehouse DIR [--group NAME] [--interval S]`` (plus the shell's catalog
and Spark options: ``--catalog-*``, ``--master URL``, ``--conf K=V``): the background optimizer as a
process. A front end like the shell: it opens a session and runs ``optimizer.service.Service``.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence

import arctic_sql
from arctic_sql.optimizer.service import Service
from arctic_sql.options import add_connect_arguments, check_connect_args, connect_options
from arctic_sql.session import view_refresher

log = logging.getLogger("arctic_sql.optimizer.service")


def build_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="arctic-sql optimizer",
        description="Keep the tables of an optimizer group optimized, in the background.",
    )
    add_connect_arguments(parser)
    parser.add_argument("--group", default="default", help="optimizer group to serve (self-optimizing.group)")
    parser.add_argument("--interval", type=float, default=10.0, metavar="S", help="seconds between rounds")
    parser.add_argument("--policy", choices=("quota", "balanced"), default="quota", help="scheduling policy")
    parser.add_argument("--cores", type=int, default=None, help="cores of the group (default: Spark's)")
    parser.add_argument("--once", action="store_true", help="run one round and exit")
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_arg_parser()
    args = parser.parse_args(argv)
    check_connect_args(parser, args)
    logging.basicConfig(
        level=args.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("py4j", "pyiceberg", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if args.interval <= 0:
        log.error("--interval must be positive, got %s", args.interval)
        return 2
    session = arctic_sql.connect(**connect_options(args, {"spark.ui.showConsoleProgress": "false"}))
    refresh = view_refresher(session.spark, session.catalog)  # refresh.interval of materialized views
    service = Service(session.spark, session.catalog, args.group, args.policy, args.cores, refresh=refresh)

    def stop(signum: int, frame: object) -> None:
        log.info("signal %d: stopping after the current step", signum)
        service.stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        if args.once:
            service.run_once()
        else:
            service.run(args.interval)
    finally:
        session.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
