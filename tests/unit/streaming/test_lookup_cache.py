"""The lookup join's bucket cache (SQLite, no Spark) and its options: versions move only with a
whole change set, a file made for another join starts over, non-key joins find every match, and
bad options are one-line errors."""

from __future__ import annotations

import datetime
import decimal
import os
import pickle

import pytest

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.streaming.lookup_cache import BucketCache, sql_column, sql_value
from arctic_sql.streaming.lookup_join import BUCKETS, INTERVAL, MEMORY, _options


def _cache(tmp_path, **kw) -> BucketCache:
    args = {"key_width": 1, "join_width": 0, "signature": "s", **kw}
    return BucketCache(os.path.join(str(tmp_path), "b.sqlite"), **args)


def _row(value: str) -> bytes:
    return pickle.dumps((value,))


def test_changes_move_the_cache_to_their_version_and_survive_reopening(tmp_path):
    cache = _cache(tmp_path)
    cache.reload([((k,), (), _row(f"v{k}")) for k in range(100)], version=5)
    cache.apply([((3,), (), _row("new")), ((200,), (), _row("added"))], [(4,), (999,)], version=6)
    cache.close()
    cache = _cache(tmp_path)
    found = cache.lookup([(3,), (4,), (200,), (None,)])
    assert cache.version() == 6
    assert {k: [pickle.loads(r) for r in v] for k, v in found.items()} == {
        (3,): [("new",)],
        (200,): [("added",)],
    }


def test_a_failed_change_set_leaves_the_version_and_rows_as_they_were(tmp_path):
    cache = _cache(tmp_path)
    cache.reload([((1,), (), _row("one"))], version=1)

    def broken():
        yield (2,), (), _row("two")
        raise RuntimeError("worker died")

    with pytest.raises(RuntimeError):
        cache.apply(broken(), [(1,)], version=2)
    assert cache.version() == 1
    assert sorted(cache.lookup([(1,), (2,)])) == [(1,)]


def test_a_file_of_another_join_starts_over(tmp_path):
    _cache(tmp_path).reload([((1,), (), _row("one"))], version=1)
    other = _cache(tmp_path, signature="other")
    assert other.version() is None and other.lookup([(1,)]) == {}


def test_a_join_on_other_columns_finds_every_match_and_follows_moves(tmp_path):
    cache = _cache(tmp_path, join_width=1)
    cache.reload([((1,), (10,), _row("p1")), ((2,), (10,), _row("p2")), ((3,), (20,), _row("p3"))], version=1)
    cache.apply([((1,), (20,), _row("p1"))], [], version=2)  # key 1 moves from 10 to 20
    found = {k: sorted(pickle.loads(r)[0] for r in v) for k, v in cache.lookup([(10,), (20,), (30,)]).items()}
    assert found == {(10,): ["p2"], (20,): ["p1", "p3"]}


def test_composite_and_typed_keys_match_their_own_values_only(tmp_path):
    day = datetime.date(2026, 1, 31)

    def key(*values):
        return tuple(sql_value(v) for v in values)

    cache = _cache(tmp_path, key_width=2)
    cache.reload(
        [
            (key(day, decimal.Decimal("1.50")), (), _row("a")),
            (key(day, decimal.Decimal("2.00")), (), _row("b")),
        ],
        1,
    )
    assert list(cache.lookup([key(day, decimal.Decimal("1.50")), key(day, decimal.Decimal("3.00"))])) == [
        ("2026-01-31", "1.50")
    ]
    assert sql_value(True) == 1 and sql_value(day) == "2026-01-31"


def test_a_column_is_encoded_by_its_type_and_kept_as_it_is_when_native():
    numbers = [1, None, 3]
    assert sql_column(numbers) is numbers and sql_column([None, None]) == [None, None]
    assert sql_column([True, None, False]) == [1, None, 0]
    assert sql_column([datetime.date(2026, 1, 31), None]) == ["2026-01-31", None]


def test_options_take_the_peers_words_and_refuse_bad_values():
    parsed = _options(
        {"lookup.reloading.interval": "10 s", "lookup.cache-max-memory-size": "64mb", "lookup.buckets": "32"}
    )
    assert (parsed[INTERVAL], parsed[MEMORY], parsed[BUCKETS]) == (10_000, 64 << 20, 32)
    assert _options({})[INTERVAL] == 0
    for spelled, ms in [
        ("10 minutes", 600_000),
        ("2min", 120_000),
        ("1 hour", 3_600_000),
        ("1d", 86_400_000),
        ("250", 250),
        ("30 seconds", 30_000),
    ]:
        assert _options({"lookup.reloading.interval": spelled})[INTERVAL] == ms
    for bad, words in [
        ({"lookup.buckets": "12"}, "power of two"),
        ({"lookup.buckets": "0"}, "power of two"),
        ({"lookup.reloading.interval": "1 week"}, "duration"),
        ({"lookup.cache-max-memory-size": "0"}, "size"),
        ({"lookup.cache": "full"}, "Unknown"),
    ]:
        with pytest.raises(InvalidArgumentError, match=words):
            _options(bad)


def test_one_instant_is_one_key_in_any_time_zone():
    # Facts reach a task in the session's time zone, the dimension's rows in UTC.
    new_york = datetime.timezone(datetime.timedelta(hours=-5))
    local = datetime.datetime(2024, 3, 10, 1, 30, tzinfo=new_york)
    utc = datetime.datetime(2024, 3, 10, 6, 30, tzinfo=datetime.UTC)
    assert sql_value(local) == sql_value(utc)
    assert sql_value(datetime.datetime(2024, 3, 10, 1, 30)) != sql_value(
        utc
    )  # NTZ: the wall clock is the value


def test_small_changes_stay_in_the_wal_and_a_file_made_with_other_pages_still_works(tmp_path):
    """A batch's changes are appended to the WAL and copied into the file only every 16 MB, in small
    pages (a random key dirties a page per change); a cache made by an older release keeps its
    4 KB pages and reads and writes as before."""
    import sqlite3

    from arctic_sql.streaming.lookup_cache import PAGE_SIZE, WAL_CHECKPOINT_BYTES

    cache = _cache(tmp_path)
    cache.reload([((k,), (), _row(f"v{k}")) for k in range(20_000)], version=1)
    path = os.path.join(str(tmp_path), "b.sqlite")
    assert cache.db.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE
    assert cache.db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == WAL_CHECKPOINT_BYTES // PAGE_SIZE
    wal = os.path.getsize(path + "-wal")
    cache.apply([((k,), (), _row("new")) for k in range(0, 20_000, 20)], [], version=2)
    assert os.path.getsize(path + "-wal") > wal  # appended, not checkpointed into the file
    cache.close()

    older = os.path.join(str(tmp_path), "old", "b.sqlite")
    os.makedirs(os.path.dirname(older))
    with sqlite3.connect(older) as db:
        db.execute("PRAGMA page_size = 4096")
        db.execute("PRAGMA journal_mode = WAL")
    cache = BucketCache(older, key_width=1, join_width=0, signature="s")
    cache.reload([((1,), (), _row("one"))], version=1)
    cache.apply([((1,), (), _row("ONE"))], [], version=2)
    assert cache.db.execute("PRAGMA page_size").fetchone()[0] == 4096
    assert cache.version() == 2 and [pickle.loads(r) for r in cache.lookup([(1,)])[(1,)]] == [("ONE",)]
