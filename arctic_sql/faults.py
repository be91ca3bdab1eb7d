"""Fault injection for the crash-safety tests: ``ARCTIC_FAULT=<point>`` kills the process there,
``ARCTIC_FAULT=raise:<point>`` raises :class:`InjectedFault` there (a failure the caller sees)."""

from __future__ import annotations

import os

EXIT_CODE = 86


def fault_point(name: str) -> None:
    """Crash the process here when ``ARCTIC_FAULT`` names this point, as a lost executor, an OOM kill
    or a power cut would: no cleanup, no ``finally`` blocks."""
    wanted = os.environ.get("ARCTIC_FAULT")
    if wanted == name:
        os._exit(EXIT_CODE)
    if wanted == f"raise:{name}":
        raise InjectedFault(f"injected fault at {name}")


class InjectedFault(RuntimeError):
    """The failure ``ARCTIC_FAULT=raise:<point>`` asked for."""
