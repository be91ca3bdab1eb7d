"""Small records in the table's folders (leases, optimizing records): read whole, or refused by name."""

from __future__ import annotations

import json

import pytest

from arctic_sql.errors import ExecutionError
from arctic_sql.table import storage


def test_records_are_read_and_a_broken_one_is_named(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"id": 1}))
    (tmp_path / "notes.txt").write_text("not a record")
    assert storage.json_records(str(tmp_path)) == [{"id": 1}]
    (tmp_path / "b.json").write_text("")
    with pytest.raises(ExecutionError, match=rf"Cannot read the record {tmp_path}/b.json: .*remove or repair it"):
        storage.json_records(str(tmp_path))
