"""XXH64 against the reference test vectors; Spark's column chaining is checked against Spark in e2e."""

from __future__ import annotations

from pyiceberg import types as it

from arctic_sql.table.format.keyhash import SPARK_SEED, spark_xxhash64, xxh64


def test_reference_vectors():
    # Published XXH64 values (xxHash's own sanity checks), seed 0.
    assert xxh64(b"", 0) == 0xEF46DB3751D8E999
    assert xxh64(b"a", 0) == 0xD24EC4F1A98C6E5B
    assert xxh64(b"abc", 0) == 0x44BC2CF5AD770999


def test_columns_chain_seeds_and_nulls_are_skipped():
    long_type, string_type = it.LongType(), it.StringType()
    first = xxh64((7).to_bytes(8, "little", signed=True), SPARK_SEED)
    assert spark_xxhash64((7,), (long_type,)) == first
    assert spark_xxhash64((7, "x"), (long_type, string_type)) == xxh64(b"x", first)
    assert spark_xxhash64((None, "x"), (long_type, string_type)) == xxh64(b"x", SPARK_SEED)


def test_values_it_cannot_encode_disable_pruning():
    assert spark_xxhash64((5.5,), (it.LongType(),)) is None
    assert spark_xxhash64(("abc",), (it.IntegerType(),)) is None
    assert spark_xxhash64((1.0,), (it.DoubleType(),)) is None


def test_a_key_widened_from_int_hashes_as_an_int_where_it_fits_and_as_a_long_beyond():
    import numpy as np
    import pyarrow as pa

    from arctic_sql.table.format import keyhash_arrow
    from arctic_sql.table.format.keyhash import hash_types

    by = hash_types((it.LongType(), it.StringType()), (True, False))
    assert by == (it.IntegerType(), it.StringType())
    as_int = xxh64((7).to_bytes(4, "little", signed=True), SPARK_SEED)
    big = 5_000_000_000
    assert spark_xxhash64((7, "x"), by) == xxh64(b"x", as_int)
    assert spark_xxhash64((big,), by[:1]) == spark_xxhash64((big,), (it.LongType(),))
    ids = pa.array([7, big, None, -(2**31), 2**31], pa.int64())
    names = pa.array(["x", "y", "z", None, "w"])
    widened = keyhash_arrow.spark_xxhash64([ids, names], (True, False))
    expected = [spark_xxhash64((i, n), by) for i, n in zip(ids.to_pylist(), names.to_pylist(), strict=True)]
    assert widened.tolist() == expected
    # Unflagged, the same column hashes every value as a long: the two differ where the value fits.
    plain = keyhash_arrow.spark_xxhash64([ids, names])
    assert (plain != widened).tolist() == [True, False, False, True, False]
    assert np.array_equal(keyhash_arrow.spark_xxhash64([ids], (False,)), keyhash_arrow.spark_xxhash64([ids]))
