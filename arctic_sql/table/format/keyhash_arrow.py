"""Spark's ``xxhash64`` of key columns, vectorized over Arrow arrays with numpy.

Writers that run outside Spark (the Arrow writer behind the DataFrame writer and the streaming sink)
must place every row in the tree node Spark's ``xxhash64`` would give it (tree.py), or merge-on-read
and optimizing would look for the key in the wrong node. keyhash.py computes one key in pure Python;
this module computes a whole column at once: XXH64 (seed 42, each column's hash seeding the next,
nulls skipped) over the bytes Spark hashes, with rows grouped by byte length so that every step is
one numpy operation over a group.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arctic_sql.errors import UnsupportedOperationError
from arctic_sql.table.format.keyhash import SPARK_SEED

_U = np.uint64
_P1, _P2, _P3 = _U(0x9E3779B185EBCA87), _U(0xC2B2AE3D27D4EB4F), _U(0x165667B19E3779F9)
_P4, _P5 = _U(0x85EBCA77C2B2AE63), _U(0x27D4EB2F165667C5)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << _U(r)) | (x >> _U(64 - r))


def _round(acc: np.ndarray, lane: np.ndarray) -> np.ndarray:
    return _rotl(acc + lane * _P2, 31) * _P1


def _merge(acc: np.ndarray, value: np.ndarray) -> np.ndarray:
    return (acc ^ _round(np.zeros_like(value), value)) * _P1 + _P4


def _lanes(data: np.ndarray, start: int, width: int) -> np.ndarray:
    """Little-endian words of ``width`` bytes at ``start`` of every row of a byte matrix, as uint64."""
    chunk = np.ascontiguousarray(data[:, start : start + width])
    return chunk.view("<u8" if width == 8 else "<u4").reshape(-1).astype(_U)


def xxh64_rows(data: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """XXH64 of each row of a ``(rows, length)`` uint8 matrix, each row with its own seed."""
    with np.errstate(over="ignore"):
        n = data.shape[1]
        i = 0
        if n >= 32:
            v1, v2, v3, v4 = seeds + _P1 + _P2, seeds + _P2, seeds.copy(), seeds - _P1
            while i + 32 <= n:
                v1 = _round(v1, _lanes(data, i, 8))
                v2 = _round(v2, _lanes(data, i + 8, 8))
                v3 = _round(v3, _lanes(data, i + 16, 8))
                v4 = _round(v4, _lanes(data, i + 24, 8))
                i += 32
            h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
            for v in (v1, v2, v3, v4):
                h = _merge(h, v)
        else:
            h = seeds + _P5
        h = h + _U(n)
        while i + 8 <= n:
            h = _rotl(h ^ _round(np.zeros_like(h), _lanes(data, i, 8)), 27) * _P1 + _P4
            i += 8
        if i + 4 <= n:
            h = _rotl(h ^ (_lanes(data, i, 4) * _P1), 23) * _P2 + _P3
            i += 4
        while i < n:
            h = _rotl(h ^ (data[:, i].astype(_U) * _P5), 11) * _P1
            i += 1
        h ^= h >> _U(33)
        h = h * _P2
        h ^= h >> _U(29)
        h = h * _P3
        return h ^ (h >> _U(32))


def _fixed_bytes(values: np.ndarray, width: int) -> np.ndarray:
    dtype = "<i4" if width == 4 else "<i8"
    return np.ascontiguousarray(values.astype(dtype)).view(np.uint8).reshape(-1, width)


def _hash_fixed(values: np.ndarray, width: int, seeds: np.ndarray) -> np.ndarray:
    return xxh64_rows(_fixed_bytes(values, width), seeds)


def _hash_binary(column: pa.Array, seeds: np.ndarray) -> np.ndarray:
    """Rows grouped by byte length, each group hashed as one matrix."""
    column = column.cast(pa.large_binary()) if not pa.types.is_large_binary(column.type) else column
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int64)[
        column.offset : column.offset + len(column) + 1
    ]
    data_buffer = column.buffers()[2]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    starts, lengths = offsets[:-1], np.diff(offsets)
    out = seeds.copy()
    for length in np.unique(lengths):
        rows = np.nonzero(lengths == length)[0]
        matrix = (
            data[starts[rows, None] + np.arange(length)] if length else np.zeros((len(rows), 0), np.uint8)
        )
        out[rows] = xxh64_rows(matrix, seeds[rows])
    return out


def _column_hash(column: pa.Array, seeds: np.ndarray) -> np.ndarray:
    """The hash of one key column seeded by the previous columns' (Spark's encoding per type)."""
    kind = column.type
    if pa.types.is_dictionary(kind):
        column, kind = column.dictionary_decode(), kind.value_type
    if pa.types.is_boolean(kind):
        return _hash_fixed(np.asarray(column.fill_null(False), dtype=np.int32), 4, seeds)
    if pa.types.is_integer(kind):
        width = 8 if kind.bit_width == 64 else 4
        return _hash_fixed(np.asarray(column.fill_null(0)), width, seeds)
    if pa.types.is_date32(kind):
        return _hash_fixed(np.asarray(column.fill_null(0).view(pa.int32())), 4, seeds)
    if pa.types.is_timestamp(kind):
        micros = pc.cast(column, pa.timestamp("us", tz=kind.tz)).fill_null(0).view(pa.int64())
        return _hash_fixed(np.asarray(micros), 8, seeds)
    if pa.types.is_decimal(kind) and kind.precision <= 18:
        # Spark hashes a decimal of precision <= 18 as the long of its unscaled value.
        decimals = column.to_pylist()
        values = np.array([0 if v is None else int(v.scaleb(kind.scale)) for v in decimals], dtype=np.int64)
        return _hash_fixed(values, 8, seeds)
    if (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
    ):
        return _hash_binary(column.fill_null(b"" if "binary" in str(kind) else ""), seeds)
    raise UnsupportedOperationError(
        f"Primary key columns of type {kind} cannot be written from DataFrames yet"
    )


def _as_int_hash(column: pa.Array, seeds: np.ndarray) -> np.ndarray:
    """A key widened from int to bigint: its int hash where the value fits in an int, else its long's
    (keyhash.py)."""
    values = np.asarray(column.cast(pa.int64()).fill_null(0))
    fits = (values >= -(2**31)) & (values < 2**31)
    narrow = _hash_fixed(np.where(fits, values, 0), 4, seeds)
    return narrow if fits.all() else np.where(fits, narrow, _hash_fixed(values, 8, seeds))


def spark_xxhash64(columns: list[pa.Array], as_int: tuple[bool, ...] = ()) -> np.ndarray:
    """Spark's ``xxhash64(c1, c2, ...)`` of every row, as uint64 (nulls are skipped, as Spark does);
    a column flagged in ``as_int`` is a key widened from int to bigint (keyhash.py)."""
    rows = len(columns[0]) if columns else 0
    seeds = np.full(rows, SPARK_SEED, dtype=_U)
    for i, column in enumerate(columns):
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        narrow = i < len(as_int) and as_int[i] and pa.types.is_integer(column.type)
        hashed = _as_int_hash(column, seeds) if narrow else _column_hash(column, seeds)
        if column.null_count:
            valid = np.asarray(column.is_valid())
            hashed = np.where(valid, hashed, seeds)
        seeds = hashed
    return seeds


def node_ids(columns: list[pa.Array], buckets: int, as_int: tuple[bool, ...] = ()) -> np.ndarray:
    """Each row's tree node id for a tree of ``buckets`` leaves (tree.node_id_column, in numpy).

    Spark takes ``xxhash64(...) & mask`` on the signed long; for a mask below 2^63 that equals
    the unsigned hash's low bits."""
    mask = buckets - 1
    return (spark_xxhash64(columns, as_int) & _U(mask)).astype(np.int32) + np.int32(mask + 1)
