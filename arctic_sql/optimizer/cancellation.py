"""Cancelling an optimizing process that runs in this Python process (Amoro's
``POST .../optimizing-processes/{id}/cancel``).

A process registers itself while it plans and executes. A cancel request sets its flag and keeps
cancelling its Spark job group (named after the process's output folder) until the process ends:
the running job fails at once, no retry starts, and the process records ``CANCELLED``. The flag is
checked under the same lock that lets a process enter ``COMMITTING``, so a cancel either wins (the
process commits nothing) or is refused because the commit has begun; a commit is never interrupted.

A process running in another Python process (another service, a session's ``CALL system.optimize``)
is not reachable from here: :func:`request` answers :data:`ELSEWHERE`.

>>> token = register("0001-ab", spark, "optimize-0001-ab")  # doctest: +SKIP
>>> request("0001-ab")  # doctest: +SKIP
'cancelling'
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from arctic_sql.errors import ArcticError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

CANCELLING, COMMITTING, ELSEWHERE = "cancelling", "committing", "elsewhere"
_RECANCEL_S = 0.5  # a job submitted between two cancels is cancelled within this


class OptimizingCancelledError(ArcticError):
    """The optimizing process was cancelled on request; it committed nothing."""


@dataclass
class Token:
    """What a running process shares with whoever cancels it."""

    process_id: str
    spark: SparkSession | None
    job_group: str
    cancelled: threading.Event = field(default_factory=threading.Event)
    ended: threading.Event = field(default_factory=threading.Event)
    committing: bool = False

    def check(self) -> None:
        """Raise if a cancel was requested (called between the steps of the process)."""
        if self.cancelled.is_set():
            raise OptimizingCancelledError(f"Optimizing process {self.process_id} was cancelled")


_lock = threading.Lock()
_running: dict[str, Token] = {}


def register(process_id: str, spark: SparkSession | None, job_group: str) -> Token:
    token = Token(process_id, spark, job_group)
    with _lock:
        _running[process_id] = token
    return token


def unregister(token: Token) -> None:
    with _lock:
        _running.pop(token.process_id, None)
    token.ended.set()


@contextmanager
def committing(token: Token) -> Iterator[None]:
    """Enter the commit unless cancelled (raises then); from here on a cancel is refused."""
    with _lock:
        token.check()
        token.committing = True
    yield


def request(process_id: str) -> str:
    """Cancel ``process_id`` if it runs here: :data:`CANCELLING`, or :data:`COMMITTING` when it is too
    late, or :data:`ELSEWHERE` when it is not a process of this Python process."""
    with _lock:
        token = _running.get(process_id)
        if token is None:
            return ELSEWHERE
        if token.committing:
            return COMMITTING
        first = not token.cancelled.is_set()
        token.cancelled.set()
    if first and token.spark is not None:
        threading.Thread(
            target=_keep_cancelling, args=(token,), name=f"arctic-cancel-{process_id}", daemon=True
        ).start()
    log.info("optimizing process %s: cancel requested", process_id)
    return CANCELLING


def _keep_cancelling(token: Token) -> None:
    assert token.spark is not None
    sc = token.spark.sparkContext
    while True:
        try:
            sc.cancelJobGroup(token.job_group)
        except Exception as e:  # noqa: BLE001 - Spark stopped: nothing left to cancel
            log.warning("optimizing process %s: cannot cancel its Spark jobs: %s", token.process_id, e)
            return
        if token.ended.wait(_RECANCEL_S):
            return
