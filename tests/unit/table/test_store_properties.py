"""Iceberg properties arctic-sql fixes on both stores: users can neither set nor unset them."""

from __future__ import annotations

import pytest

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.table.model import properties


@pytest.mark.parametrize(
    "key",
    [
        "commit.retry.num-retries",
        "commit.retry.min-wait-ms",
        "commit.retry.max-wait-ms",
        "commit.retry.total-timeout-ms",
        "Commit.Retry.Num-Retries",
    ],
)
def test_commit_retry_keys_are_refused_when_creating_altering_and_unsetting(key):
    for creating in (True, False):
        with pytest.raises(
            InvalidArgumentError, match=f"^Table property '{key}' cannot be set: arctic-sql retries"
        ):
            properties.validate({key: "3"}, creating=creating)
    with pytest.raises(InvalidArgumentError, match=f"^Table property '{key}' cannot be set"):
        properties.check_unset(key)


@pytest.mark.parametrize("value", ["1", "3", "two", ""])
def test_format_version_other_than_2_is_refused(value):
    with pytest.raises(
        InvalidArgumentError,
        match=f"^Table property 'format-version' cannot be '{value}': arctic tables are Iceberg "
        "format version 2$",
    ):
        properties.validate({"format-version": value}, creating=True)


def test_format_version_2_is_accepted_and_not_stored_twice_and_cannot_be_unset():
    assert properties.validate({"format-version": "2", "owner": "team"}, creating=True) == {"owner": "team"}
    with pytest.raises(InvalidArgumentError, match="^Table property 'format-version' cannot be unset"):
        properties.check_unset("format-version")
    properties.check_unset("owner")  # an ordinary key may be unset
    properties.check_unset("commit.manifest.target-size-bytes")  # commit.* outside commit.retry.* too


def test_num_retries_may_be_set_to_the_zero_the_stores_have():
    # The way back for a table that took another value before arctic-sql refused it.
    assert properties.validate({"commit.retry.num-retries": "0"}, creating=False) == {
        "commit.retry.num-retries": "0"
    }
    with pytest.raises(
        InvalidArgumentError, match="^Table property 'commit.retry.num-retries' cannot be set"
    ):
        properties.check_unset("commit.retry.num-retries")
