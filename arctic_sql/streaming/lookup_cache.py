"""One bucket of a lookup join's dimension, at one version, in a local SQLite file.

The state a lookup join holds is the dimension itself: per bucket (keys whose Spark ``xxhash64`` of
the primary key falls in it), the rows of one dimension version, indexed by the primary key and by
the join columns. SQLite keeps them on local disk behind a page cache of bounded size, so a
dimension larger than memory only makes lookups read pages; every change is one transaction that
also records the version it reaches, so a file is always exactly one version of its bucket.

The file is a cache, never the truth: the version each micro-batch uses is pinned by the batch's
timestamp in the checkpoint (lookup_task.py), and a file that is missing, from another version,
or made for another join is rebuilt from the table at the pinned version.

>>> import tempfile, os
>>> cache = BucketCache(os.path.join(tempfile.mkdtemp(), "b0.sqlite"), key_width=1, join_width=0, signature="s")
>>> cache.version() is None
True
>>> cache.apply([((1,), (), b"one"), ((2,), (), b"two")], [], version=3)  # keys as SQLite values
>>> cache.apply([((2,), (), b"TWO")], [(1,)], version=4)
>>> cache.version(), cache.lookup([(1,), (2,), (2,)])
(4, {(2,): [b'TWO']})
>>> cache.close()
"""

from __future__ import annotations

import datetime
import decimal
import os
import sqlite3
from collections.abc import Iterable, Sequence

Key = tuple  # of SQLite values (sql_value)
Entry = tuple[Key, Key, bytes]  # primary key, join key (empty when the join is on the primary key), row
# A batch's changes are random keys, each dirtying its own page, which the commit writes to the WAL
# and a checkpoint copies into the file: small pages write less per changed row, and checkpointing
# every 16 MB (not SQLite's 4 MB) copies a page once for all the batches that changed it since.
PAGE_SIZE, WAL_CHECKPOINT_BYTES = 1024, 16 << 20
_NATIVE = (int, float, str, bytes)  # what SQLite stores and compares as it is (bool is not: it is 0/1)


def sql_value(value: object) -> object:
    """A key value as SQLite compares it: numbers, text and bytes as they are; other types (dates,
    timestamps, decimals) as text. Both sides of a join arrive as the dimension's Spark types, so
    equal values always encode equally."""
    if value is None or type(value) in _NATIVE:
        return value
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, _NATIVE):  # a subclass (an IntEnum, a str enum) compares as its base
        return value
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        # One instant, one text: facts reach the task in the session's time zone, dimension rows in UTC.
        return str(value.astimezone(datetime.UTC))
    if isinstance(value, datetime.date | decimal.Decimal):
        return str(value)
    return repr(value)


def sql_column(values: list) -> list:
    """``sql_value`` of a column's values (one Python type, as Arrow's ``to_pylist`` gives them, plus
    None): the list itself when that type is stored as it is, so a bulk load pays nothing per value."""
    sample = next((v for v in values if v is not None), None)
    if sample is None or type(sample) in _NATIVE:
        return values
    return [sql_value(v) for v in values]


class BucketCache:
    """The rows of one bucket of a dimension at one version (``version()``; None when empty)."""

    def __init__(
        self, path: str, *, key_width: int, join_width: int, signature: str, memory_kib: int = 65536
    ) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.key_width, self.join_width = key_width, join_width
        self.db = sqlite3.connect(path, timeout=60, isolation_level=None)
        self.db.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # takes effect only when the file is new
        self.db.execute(f"PRAGMA cache_size = -{max(memory_kib, 256)}")
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_BYTES // PAGE_SIZE}")
        self.db.execute("PRAGMA synchronous = NORMAL")  # a cache: a lost tail is rebuilt, never wrong
        self._create(signature)

    def _create(self, signature: str) -> None:
        keys = ", ".join(f"k{i}" for i in range(self.key_width))
        joins = "".join(f", j{i}" for i in range(self.join_width))
        self.db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value)")
        known = self.db.execute("SELECT value FROM meta WHERE name = 'signature'").fetchone()
        if known is not None and known[0] != signature:  # another join's file: start over
            self.db.execute("DROP TABLE IF EXISTS dim")
            self.db.execute("DELETE FROM meta")
        self.db.execute(
            f"CREATE TABLE IF NOT EXISTS dim ({keys}{joins}, row BLOB, PRIMARY KEY ({keys})) WITHOUT ROWID"
        )
        if self.join_width:
            self.db.execute(f"CREATE INDEX IF NOT EXISTS dim_join ON dim ({joins.lstrip(', ')})")
        self.db.execute("INSERT OR REPLACE INTO meta VALUES ('signature', ?)", (signature,))

    def version(self) -> int | None:
        found = self.db.execute("SELECT value FROM meta WHERE name = 'version'").fetchone()
        return None if found is None else int(found[0])

    def apply(self, upserts: Iterable[Entry], deletes: Iterable[Key], version: int) -> None:
        """Upsert and delete rows, and move to ``version``, in one transaction (keys as SQLite values)."""
        self._write(upserts, deletes, version, replace_all=False)

    def reload(self, rows: Iterable[Entry], version: int) -> None:
        """Replace every row with ``rows`` (the bucket at ``version``), in one transaction."""
        self._write(rows, (), version, replace_all=True)

    def _write(
        self, upserts: Iterable[Entry], deletes: Iterable[Key], version: int, *, replace_all: bool
    ) -> None:
        width = self.key_width + self.join_width + 1
        insert = f"INSERT OR REPLACE INTO dim VALUES ({', '.join('?' * width)})"
        where = " AND ".join(f"k{i} = ?" for i in range(self.key_width))
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            if replace_all:
                db.execute("DELETE FROM dim")
            db.executemany(f"DELETE FROM dim WHERE {where}", deletes)
            db.executemany(insert, ((*key, *join, row) for key, join, row in upserts))
            db.execute("INSERT OR REPLACE INTO meta VALUES ('version', ?)", (version,))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def lookup(self, keys: Sequence[Key]) -> dict[Key, list[bytes]]:
        """The rows matching each of ``keys`` (SQLite values; on the primary key, or on the join
        columns when the cache has them); keys without a match, or with a null, are absent."""
        if not keys:
            return {}
        columns = [f"j{i}" for i in range(self.join_width)] or [f"k{i}" for i in range(self.key_width)]
        width = len(columns)
        db = self.db
        db.execute(
            "CREATE TEMP TABLE IF NOT EXISTS wanted (" + ", ".join(f"w{i}" for i in range(width)) + ")"
        )
        db.execute("DELETE FROM wanted")
        db.executemany(
            f"INSERT INTO wanted VALUES ({', '.join('?' * width)})", {k for k in keys if None not in k}
        )
        on = " AND ".join(f"dim.{c} = wanted.w{i}" for i, c in enumerate(columns))
        found: dict[Key, list[bytes]] = {}
        query = (
            f"SELECT {', '.join(f'wanted.w{i}' for i in range(width))}, dim.row FROM wanted JOIN dim ON {on}"
        )
        for *key, row in db.execute(query):
            found.setdefault(tuple(key), []).append(row)
        return found

    def close(self) -> None:
        self.db.close()
