"""Optional dependencies: which extra brings a module, and the one line that says how to get it.

>>> missing_module(["json", "no_such_module_here"])
'no_such_module_here'
>>> install_hint("arctic-sql thriftserver", "server")
"arctic-sql thriftserver needs the 'server' extra: pip install 'arctic-sql[server]'"
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

SERVER_MODULES = ("thrift", "TCLIService")
"""What the Thrift server imports beyond the core: thrift itself and PyHive's generated TCLIService."""


def missing_module(modules: Iterable[str]) -> str | None:
    """The first of ``modules`` that cannot be imported, or ``None`` if all can."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            return name
    return None


def install_hint(feature: str, extra: str) -> str:
    return f"{feature} needs the '{extra}' extra: pip install 'arctic-sql[{extra}]'"
