"""arctic-sql: primary-key lakehouse tables on Spark.

>>> import arctic_sql
>>> s = arctic_sql.connect(warehouse="./warehouse")
>>> s.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
"""

from __future__ import annotations

import os as _os

# In a source checkout, parser/ and procedures/ sit beside this folder and are installed inside it
# (pyproject's package-dir). Let `arctic_sql.parser` resolve there too, so the checkout runs as is.
_root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _os.path.isfile(_os.path.join(_root, "parser", "__init__.py")) and not _os.path.isdir(
    _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "parser")
):
    __path__.append(_root)  # noqa: F821 - a package's __path__

from arctic_sql import cdc  # noqa: E402 - arctic_sql.cdc.debezium(df); imports pyspark only when called
from arctic_sql.errors import ArcticError  # noqa: E402

__all__ = ["ArcticError", "cdc", "connect", "register"]
__version__ = "0.1.0"


def connect(*args, **kwargs):  # noqa: ANN002, ANN003 - thin re-export, see Session.connect
    """Open an arctic-sql session; see :func:`arctic_sql.session.connect`."""
    from arctic_sql.session import connect as _connect

    return _connect(*args, **kwargs)


def register(*args, **kwargs):  # noqa: ANN002, ANN003 - thin re-export
    """Register the ``arctic`` DataFrame format on a SparkSession; see :func:`arctic_sql.session.register`."""
    from arctic_sql.session import register as _register

    _register(*args, **kwargs)


def load_ipython_extension(ipython):
    """``%load_ext arctic_sql``: the ``%%sql``/``%sql`` magics; see :mod:`arctic_sql.frontends.magic`."""
    from arctic_sql.frontends.magic import load_ipython_extension as _load

    _load(ipython)
