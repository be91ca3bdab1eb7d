"""Fault injection for the crash-safety tests: ``ARCTIC_FAULT=<point>`` kills the process there."""

from __future__ import annotations

import os

EXIT_CODE = 86


def fault_point(name: str) -> None:
    """Crash the process here when ``ARCTIC_FAULT`` names this point, as a lost executor, an OOM kill
    or a power cut would: no cleanup, no ``finally`` blocks."""
    if os.environ.get("ARCTIC_FAULT") == name:
        os._exit(EXIT_CODE)
