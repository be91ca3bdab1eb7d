"""Fault injection for the crash-safety tests: ``ARCTIC_FAULT=<point>`` kills the process there,
``ARCTIC_FAULT=raise:<point>`` raises :class:`InjectedFault` there (a failure the caller sees), and
``ARCTIC_FAULT=stall:<point>`` makes it hang there for ``ARCTIC_FAULT_STALL_S`` seconds (300 by
default), as a task stuck on slow storage would (the cancel tests stop it from outside)."""

from __future__ import annotations

import os
import time

EXIT_CODE = 86
STALL_S = 300.0


def fault_point(name: str) -> None:
    """Crash the process here when ``ARCTIC_FAULT`` names this point, as a lost executor, an OOM kill
    or a power cut would: no cleanup, no ``finally`` blocks."""
    wanted = os.environ.get("ARCTIC_FAULT")
    if wanted == name:
        os._exit(EXIT_CODE)
    if wanted == f"raise:{name}":
        raise InjectedFault(f"injected fault at {name}")
    if wanted == f"stall:{name}":
        time.sleep(float(os.environ.get("ARCTIC_FAULT_STALL_S", STALL_S)))


class InjectedFault(RuntimeError):
    """The failure ``ARCTIC_FAULT=raise:<point>`` asked for."""
