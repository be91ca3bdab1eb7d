"""arctic-sql: primary-key lakehouse tables on Spark.

>>> import arctic_sql
>>> s = arctic_sql.connect(warehouse="./warehouse")
>>> s.sql("CREATE TABLE db.t (id BIGINT, v STRING, PRIMARY KEY (id))")
"""

from __future__ import annotations

from arctic_sql.errors import ArcticError

__all__ = ["ArcticError", "connect"]
__version__ = "0.1.0"


def connect(*args, **kwargs):  # noqa: ANN002, ANN003 - thin re-export, see Session.connect
    """Open an arctic-sql session; see :func:`arctic_sql.session.connect`."""
    from arctic_sql.session import connect as _connect

    return _connect(*args, **kwargs)
