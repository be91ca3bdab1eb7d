"""Records on a local file system: a temporary file a dead writer left beside a record is removed by
orphan removal once older than the safety window, and nothing else of the record folders is."""

from __future__ import annotations

import os
import time

from iceberg_tables import catalog_at, create

from arctic_sql.table.files import storage
from arctic_sql.table.format import layout
from arctic_sql.table.maintenance import orphan_removal
from arctic_sql.table.records import leases


def _aged(path: str, ms: float) -> None:
    then = time.time() - ms / 1000
    os.utime(path, (then, then))


def test_a_dead_writer_s_old_record_temporary_is_an_orphan_and_nothing_else_of_the_records_is(tmp_path):
    table = create(catalog_at(tmp_path))
    root = layout.table_root(table.base.location())
    lease = leases.take(root, "write")  # a record written the usual way: renamed, nothing left beside it
    folder = leases.folder(root).removeprefix("file://")
    assert [n for n in os.listdir(folder) if n.endswith(".tmp")] == []
    old = f"{folder}/{lease.lease_id}.json.a1b2c3.tmp"  # a writer died between its write and its rename
    young = f"{folder}/{lease.lease_id}.json.d4e5f6.tmp"
    theirs = f"{folder}/notes.tmp"  # not a temporary of ours
    for path in (old, young, theirs):
        with open(path, "w") as f:
            f.write("{")
    window = orphan_removal.safety_window_ms(table)
    for path in (old, theirs):
        _aged(path, window + 3_600_000)
    _aged(young, window / 2)

    found = orphan_removal.orphan_files(table, orphan_removal.now_ms() - window)
    assert [storage.filesystem(p)[1] for p in found] == [old]
    orphan_removal.remove_orphan_files(table)
    assert sorted(os.listdir(folder)) == sorted(
        [f"{lease.lease_id}.json", os.path.basename(young), "notes.tmp"]
    )
