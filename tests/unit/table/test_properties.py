"""The table-property registry: types, defaults, validation and aliases, without Spark."""

from __future__ import annotations

import pytest

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.table.model import properties as props


def test_defaults_follow_amoro():
    assert props.get({}, "self-optimizing.minor.trigger.file-count") == 12
    assert props.get({}, "self-optimizing.minor.trigger.interval") == 3_600_000
    assert props.get({}, "self-optimizing.major.trigger.duplicate-ratio") == 0.1
    assert props.get({}, "self-optimizing.full.trigger.interval") == -1
    assert props.get({}, "self-optimizing.target-size") == 128 * 1024 * 1024
    assert props.get({}, "self-optimizing.fragment-ratio") == 8
    assert props.get({}, "base.file-index.hash-bucket") == 4
    assert props.get({}, "clean-orphan-file.min-existing-time-minutes") == 2880


def test_values_are_validated_and_normalized():
    assert props.validate({"base.file-index.hash-bucket": " 8 "}, creating=True) == {
        "base.file-index.hash-bucket": "8"
    }
    assert props.validate({"self-optimizing.enabled": "TRUE"}, creating=True) == {
        "self-optimizing.enabled": "true"
    }
    with pytest.raises(InvalidArgumentError, match="power of two"):
        props.validate({"base.file-index.hash-bucket": "6"}, creating=True)
    with pytest.raises(InvalidArgumentError, match="expected int"):
        props.validate({"self-optimizing.fragment-ratio": "eight"}, creating=True)
    with pytest.raises(InvalidArgumentError, match="must be positive"):
        props.validate({"self-optimizing.target-size": "0"}, creating=True)
    with pytest.raises(InvalidArgumentError, match=r"must be in \(0, 1\]"):
        props.validate({"self-optimizing.major.trigger.duplicate-ratio": "1.5"}, creating=True)


def test_maxcompute_aliases_land_on_canonical_keys():
    assert props.validate({"write.bucket.num": "16"}, creating=True) == {"base.file-index.hash-bucket": "16"}
    assert props.validate({"acid.data.retain.hours": "24"}, creating=True) == {
        "acid.data.retain.hours": "24",
        "snapshot.keep.duration": "1440",
    }


def test_reserved_and_immutable_keys_are_refused():
    with pytest.raises(InvalidArgumentError, match="reserved"):
        props.validate({"arctic.format": "keyed"}, creating=True)
    with pytest.raises(InvalidArgumentError, match="only be set at CREATE TABLE"):
        props.validate({"change.file-index.hash-bucket": "8"}, creating=False)


def test_unknown_keys_pass_through_like_iceberg():
    assert props.validate({"write.parquet.compression-codec": "zstd", "owner": "me"}, creating=True) == {
        "write.parquet.compression-codec": "zstd",
        "owner": "me",
    }
