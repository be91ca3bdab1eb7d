"""How busy the test host is: bounds on waits for Spark that grow with the load, and a load to make.

A wait for a Spark stream is a bound on something that does happen, not a measurement: on a quiet
machine it ends long before the bound; on a busy one every step takes longer, so the bound scales
with the load per core (the 1-minute load average; at most tenfold) instead of failing a test that
was only slow.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

MAX_SCALE = 10.0


def load_scale() -> float:
    """The load per core, at least 1 and at most ``MAX_SCALE``."""
    return min(MAX_SCALE, max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1)))


def scaled(seconds: float) -> float:
    """``seconds`` (the bound on a quiet host) times the load per core."""
    return seconds * load_scale()


@contextlib.contextmanager
def busy_host(per_core: int) -> Iterator[list[subprocess.Popen]]:
    """``per_core`` processes per core that spin until the block ends, each in a session of its own
    (Linux's autogroup scheduler then shares the CPU among them as among separate services)."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        for _ in range(per_core * (os.cpu_count() or 1))
    ]
    try:
        yield spinners
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()
