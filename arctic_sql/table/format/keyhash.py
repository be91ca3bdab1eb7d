"""Spark's ``xxhash64`` of primary-key values, computed in Python for planning.

Writers place rows with Spark's ``xxhash64(key columns)`` (tree.py). To prune files by tree node
for a point lookup (``WHERE id = 5`` or ``id IN (...)``), the planner needs the same hash without
Spark: XXH64 (seed 42), with each column's hash seeding the next and nulls skipped, and values
encoded as Spark does (int and date as 4 bytes, long and timestamp as 8, strings as UTF-8).
Types this module does not cover return None, and then no node pruning happens.

A key column widened from int to bigint keeps hashing as Spark's int wherever its value fits in
one, and as a long only beyond (``hash_types`` marks it as an int; ``_encode`` takes an int type's
value beyond int range as a long): every row written before the widening stays in its tree node.
"""

from __future__ import annotations

import datetime
import struct

from pyiceberg import types as it

_P1, _P2, _P3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_P4, _P5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5
_M = (1 << 64) - 1
SPARK_SEED = 42


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _M, 31) * _P1) & _M


def _merge(acc: int, value: int) -> int:
    return ((acc ^ _round(0, value)) * _P1 + _P4) & _M


def xxh64(data: bytes, seed: int) -> int:
    """Reference XXH64 of ``data`` (unsigned 64-bit result)."""
    seed &= _M
    n, i = len(data), 0
    if n >= 32:
        v1, v2, v3, v4 = (seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed, (seed - _P1) & _M
        while i + 32 <= n:
            a, b, c, d = struct.unpack_from("<4Q", data, i)
            v1, v2, v3, v4 = _round(v1, a), _round(v2, b), _round(v3, c), _round(v4, d)
            i += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M
        for v in (v1, v2, v3, v4):
            h = _merge(h, v)
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 8 <= n:
        (k,) = struct.unpack_from("<Q", data, i)
        h = ((_rotl(h ^ _round(0, k), 27) * _P1) + _P4) & _M
        i += 8
    if i + 4 <= n:
        (k,) = struct.unpack_from("<I", data, i)
        h = ((_rotl(h ^ ((k * _P1) & _M), 23) * _P2) + _P3) & _M
        i += 4
    while i < n:
        h = (_rotl(h ^ ((data[i] * _P5) & _M), 11) * _P1) & _M
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _M
    h ^= h >> 29
    h = (h * _P3) & _M
    return h ^ (h >> 32)


def _whole(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value)
    return None  # 5.5 or 'abc' for an integer key: let Spark compare, prune nothing


def _encode(value: object, field_type: it.IcebergType) -> bytes | None:
    if isinstance(field_type, it.DateType) and isinstance(value, datetime.date):
        return struct.pack("<i", (value - datetime.date(1970, 1, 1)).days)
    if isinstance(field_type, it.IntegerType) and (whole := _whole(value)) is not None:
        # Beyond int range: only a widened key holds such a value, and it hashes as a long (an INT
        # column holds none, so the node this picks is as good as any: nothing there matches).
        return _encode(whole, it.LongType()) if not -(2**31) <= whole < 2**31 else struct.pack("<i", whole)
    if isinstance(field_type, it.LongType) and (whole := _whole(value)) is not None:
        return struct.pack("<q", whole) if -(2**63) <= whole < 2**63 else None
    if isinstance(field_type, it.StringType) and isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(field_type, it.BooleanType) and isinstance(value, bool):
        return struct.pack("<i", 1 if value else 0)
    return None


def spark_xxhash64(values: tuple[object, ...], types: tuple[it.IcebergType, ...]) -> int | None:
    """Spark's ``xxhash64(c1, c2, ...)`` of one key (as an unsigned 64-bit int), or None if unsupported."""
    seed = SPARK_SEED
    for value, field_type in zip(values, types, strict=True):
        if value is None:
            continue
        encoded = _encode(value, field_type)
        if encoded is None:
            return None
        seed = xxh64(encoded, seed)
    return seed


def hash_types(types: tuple[it.IcebergType, ...], as_int: tuple[bool, ...]) -> tuple[it.IcebergType, ...]:
    """The types key values hash by: a key column widened from int to bigint (``as_int``) by int."""
    if not any(as_int):
        return types
    return tuple(it.IntegerType() if narrow else t for t, narrow in zip(types, as_int, strict=True))


MAX_LOOKUP_KEYS = 1024


def key_combinations(keys: list[str], choices: dict[str, set]) -> list[tuple] | None:
    """Every key a lookup names, from the values each key column may take (``choices``); None when
    a key column is not pinned or there are more than ``MAX_LOOKUP_KEYS`` keys."""
    if not keys or set(choices) != set(keys):
        return None
    combos: list[tuple] = [()]
    for key in keys:
        combos = [c + (v,) for c in combos for v in sorted(choices[key], key=repr)]
        if len(combos) > MAX_LOOKUP_KEYS:
            return None
    return combos


def lookup_hashes(lookups: list[tuple] | None, types: tuple[it.IcebergType, ...]) -> frozenset[int] | None:
    """Spark xxhash64 of each looked-up key, to prune by tree node; None when any cannot be hashed."""
    if lookups is None:
        return None
    hashes = set()
    for key in lookups:
        try:
            value = spark_xxhash64(key, types)
        except (TypeError, ValueError, OverflowError):
            return None
        if value is None:
            return None
        hashes.add(value)
    return frozenset(hashes)
